"""The POP push consumer's ack merger against a stand-in for the broker API: acks that come while one request is
out leave together, each broker group has its own request in flight, and an error reaches every handler whose
messages the failed request carried; and what acking a slice of a pop response means, from its runs."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest

from pocketmq.client.consumer.pop_api import AckGroup, PopAPI, ack_groups
from pocketmq.client.consumer.pop_consume import AckMerger
from pocketmq.client.core.message_ext import MessageExt
from pocketmq.remoting.errors import PocketMQError


class FakeAPI:
    def __init__(self) -> None:
        self.requests: list[list[int]] = []
        self.gate = asyncio.Event()
        self.fail: Exception | None = None

    async def ack_groups(self, groups: list[AckGroup]) -> None:
        self.requests.append([offset for _topic, _prefix, offsets in groups for offset in offsets])
        await self.gate.wait()
        if self.fail is not None:
            raise self.fail


def group(*offsets: int) -> list[AckGroup]:
    return [("T", "0 1 60000 0 0 broker 0", list(offsets))]


def merger() -> tuple[AckMerger, FakeAPI]:
    api = FakeAPI()
    return AckMerger(cast(PopAPI, api)), api


async def settle(*tasks: asyncio.Task[Any]) -> None:
    await asyncio.wait(tasks, timeout=5)
    assert all(t.done() for t in tasks)


async def test_acks_that_wait_leave_in_one_request() -> None:
    acks, api = merger()
    first = asyncio.ensure_future(acks.ack("a", group(1, 2)))
    await asyncio.sleep(0)
    await asyncio.sleep(0)  # the first request is out
    later = [asyncio.ensure_future(acks.ack("a", group(i))) for i in range(3, 6)]
    await asyncio.sleep(0)
    assert api.requests == [[1, 2]]
    api.gate.set()
    await settle(first, *later)
    assert api.requests == [[1, 2], [3, 4, 5]]
    assert acks.acked == 5 and all(t.result() is None for t in (first, *later))


async def test_each_broker_group_has_its_own_request() -> None:
    acks, api = merger()
    a = asyncio.ensure_future(acks.ack("a", group(1)))
    b = asyncio.ensure_future(acks.ack("b", group(2)))
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert sorted(api.requests) == [[1], [2]]
    api.gate.set()
    await settle(a, b)


async def test_a_failed_request_fails_every_ack_it_carried() -> None:
    acks, api = merger()
    api.fail = PocketMQError("broker gone")
    first = asyncio.ensure_future(acks.ack("a", group(1)))
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    second = asyncio.ensure_future(acks.ack("a", group(2)))
    third = asyncio.ensure_future(acks.ack("a", group(3)))
    api.gate.set()
    await settle(first, second, third)
    for task in (first, second, third):
        with pytest.raises(PocketMQError, match="broker gone"):
            task.result()
    assert acks.acked == 0 and api.requests == [[1], [2, 3]]


async def test_close_cancels_what_waits() -> None:
    acks, _api = merger()
    first = asyncio.ensure_future(acks.ack("a", group(1)))
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    second = asyncio.ensure_future(acks.ack("a", group(2)))
    await asyncio.sleep(0)
    await acks.close()
    await settle(first, second)
    assert first.cancelled() and second.cancelled()


def test_ack_groups_of_a_slice_follow_the_runs_of_check_points() -> None:
    pairs = ((1, 7), (1, 8), (1, 9), (2, 3), (2, 4))
    messages = [MessageExt.of("T", b"", queue_id=q, queue_offset=o) for q, o in pairs]
    runs = [("T", "h1", 0, 3), ("T", "h2", 3, 5)]
    assert ack_groups(messages, runs, 0, 2) == [("T", "h1", [7, 8])]
    assert ack_groups(messages, runs, 2, 4) == [("T", "h1", [9]), ("T", "h2", [3])]
    assert ack_groups(messages, runs, 4, 6) == [("T", "h2", [4])]
    assert ack_groups(messages, runs, 0, 5) == [("T", "h1", [7, 8, 9]), ("T", "h2", [3, 4])]
