"""The POP push consumer's ack merger against a stand-in for the broker API: acks that come while one request is
out leave together, each broker group has its own request in flight, and an error reaches every handler whose
messages the failed request carried."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest

from pocketmq.client.consumer.pop_api import PopAPI
from pocketmq.client.consumer.pop_consume import AckMerger
from pocketmq.client.core.message_ext import MessageExt
from pocketmq.remoting.errors import PocketMQError


class FakeAPI:
    def __init__(self) -> None:
        self.requests: list[list[bytes]] = []
        self.gate = asyncio.Event()
        self.fail: Exception | None = None

    async def ack_batch(self, messages: list[MessageExt]) -> None:
        self.requests.append([msg.body for msg in messages])
        await self.gate.wait()
        if self.fail is not None:
            raise self.fail


def msgs(broker: str, *bodies: str) -> list[MessageExt]:
    out = []
    for body in bodies:
        msg = MessageExt.of("T", body.encode())
        msg.broker_name = broker
        out.append(msg)
    return out


def merger() -> tuple[AckMerger, FakeAPI]:
    api = FakeAPI()
    return AckMerger(cast(PopAPI, api)), api


async def settle(*tasks: asyncio.Task[Any]) -> None:
    await asyncio.wait(tasks, timeout=5)
    assert all(t.done() for t in tasks)


async def test_acks_that_wait_leave_in_one_request() -> None:
    acks, api = merger()
    first = asyncio.ensure_future(acks.ack(msgs("a", "1", "2")))
    await asyncio.sleep(0)
    await asyncio.sleep(0)  # the first request is out
    later = [asyncio.ensure_future(acks.ack(msgs("a", str(i)))) for i in range(3, 6)]
    await asyncio.sleep(0)
    assert api.requests == [[b"1", b"2"]]
    api.gate.set()
    await settle(first, *later)
    assert api.requests == [[b"1", b"2"], [b"3", b"4", b"5"]]
    assert acks.acked == 5 and all(t.result() is None for t in (first, *later))


async def test_each_broker_group_has_its_own_request() -> None:
    acks, api = merger()
    a = asyncio.ensure_future(acks.ack(msgs("a", "1")))
    b = asyncio.ensure_future(acks.ack(msgs("b", "2")))
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert sorted(api.requests) == [[b"1"], [b"2"]]
    api.gate.set()
    await settle(a, b)


async def test_a_failed_request_fails_every_ack_it_carried() -> None:
    acks, api = merger()
    api.fail = PocketMQError("broker gone")
    first = asyncio.ensure_future(acks.ack(msgs("a", "1")))
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    second = asyncio.ensure_future(acks.ack(msgs("a", "2")))
    third = asyncio.ensure_future(acks.ack(msgs("a", "3")))
    api.gate.set()
    await settle(first, second, third)
    for task in (first, second, third):
        with pytest.raises(PocketMQError, match="broker gone"):
            task.result()
    assert acks.acked == 0 and api.requests == [[b"1"], [b"2", b"3"]]


async def test_close_cancels_what_waits() -> None:
    acks, _api = merger()
    first = asyncio.ensure_future(acks.ack(msgs("a", "1")))
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    second = asyncio.ensure_future(acks.ack(msgs("a", "2")))
    await asyncio.sleep(0)
    await acks.close()
    await settle(first, second)
    assert first.cancelled() and second.cancelled()
