"""Recall of timer messages (RocketMQ 5.3's RECALL_MESSAGE): a timer's send answers a recall handle; a recall
before it is due stores a marker and the message is never delivered, the others are; RocketMQ's refusals (recall
off, unknown topic, a handle that does not decode or names another topic, broker or a time not ahead); a recall
survives a SIGKILL of the broker; PocketMQ's SDK recalls by its send result's handle."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from pocketmq.broker.controller import BrokerController
from pocketmq.client import Message, Producer
from pocketmq.common.recall import RecallHandle
from pocketmq.namesrv.controller import NamesrvController
from pocketmq.remoting.codes import RequestCode, ResponseCode
from tests.client.consumer.consumer_support import instance_name
from tests.helpers import eventually
from tests.pop.java_pop import create_topic, now_ms, send
from tests.pop.test_pop_crash import broker_process, start_broker_proc
from tests.timer.support import pull_all
from tests.transaction.raw import Frame, RawClient

pytestmark = pytest.mark.timeout(60)

PROPS = {"timerMaxDelaySec": "3600", "recallMessageEnable": "true"}


@pytest.fixture
def broker_props() -> dict[str, str]:
    return dict(PROPS)


@pytest.fixture
async def client(broker: BrokerController) -> AsyncIterator[RawClient]:
    c = await RawClient.connect(broker.addr)
    yield c
    await c.close()


async def delivered(client: RawClient, topic: str, count: int) -> list[bytes]:
    """The bodies delivered to ``topic`` once ``count`` are there (a fired timer reaches its queue a moment after
    the timer service counts it)."""
    bodies: list[bytes] = []

    async def arrived() -> bool:
        bodies[:] = sorted(f.body for f in await pull_all(client, topic))
        return len(bodies) >= count

    await eventually(arrived, timeout=10, interval=0.05, message=f"{count} messages in {topic}")
    return bodies


async def recall(client: RawClient, topic: str, handle: str) -> Frame:
    return await client.request(RequestCode.RECALL_MESSAGE, {"producerGroup": "PG", "topic": topic,
                                                            "recallHandle": handle, "brokerName": "broker-a"})


async def send_timers(client: RawClient, topic: str, due: int, count: int) -> dict[str, str]:
    """``count`` timers due at ``due``, UNIQ_KEY ``u<i>``, body ``b<i>``: their recall handles by UNIQ_KEY."""
    handles = {}
    for i in range(count):
        frame = await send(client, topic, f"b{i}".encode(), TIMER_DELIVER_MS=str(due), UNIQ_KEY=f"u{i}")
        assert frame.code == 0, frame.remark
        handles[f"u{i}"] = frame.ext["recallHandle"]
    return handles


async def test_a_recalled_timer_is_never_delivered_and_the_others_are(client: RawClient,
                                                                       broker: BrokerController) -> None:
    await create_topic(client, "TRecall", 1)
    due = now_ms() + 1500
    handles = await send_timers(client, "TRecall", due, 3)
    assert RecallHandle.decode(handles["u1"]) == RecallHandle("TRecall", "broker-a", str(due + 1), "u1")
    plain = await send(client, "TRecall", b"now", UNIQ_KEY="plain")
    assert plain.code == 0 and "recallHandle" not in plain.ext  # only a timer gets one
    empty = await send(client, "TRecall", b"empty", TIMER_DELIVER_MS=str(due), TIMER_DEL_UNIQKEY="", UNIQ_KEY="e")
    assert empty.code == 0  # a marker naming nothing is an ordinary timer
    answer = await recall(client, "TRecall", handles["u1"])
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    assert answer.ext["msgId"] == "u1"
    timer = broker.timer
    assert timer is not None
    # The marker fired too (its key is forgotten) and the original was dropped: nothing of u1 can come later.
    await eventually(lambda: timer.recalled == 1 and not timer.recalls and timer.wheel.pending == 0, timeout=10,
                     message="the recalled timer dropped and its marker due")
    assert await delivered(client, "TRecall", 4) == [b"b0", b"b2", b"empty", b"now"]
    assert timer.fired == 3 and timer.pending_by_topic == {}


async def test_refusals(client: RawClient, broker: BrokerController) -> None:
    await create_topic(client, "TRecallNo", 1)
    due = now_ms() + 60_000
    handle = (await send_timers(client, "TRecallNo", due, 1))["u0"]

    async def code(topic: str, text: str) -> int:
        return (await recall(client, topic, text)).code

    leveled = await send(client, "TRecallNo", b"level", DELAY="1", TIMER_DELIVER_MS=str(due), UNIQ_KEY="lvl")
    assert leveled.code == 0 and "recallHandle" not in leveled.ext  # the delay level wins: not a timer
    assert await code("TRecallNo", "not base64 !") == ResponseCode.ILLEGAL_OPERATION
    other = RecallHandle("TRecallNo", "broker-z", str(due + 1), "u0").encode()
    assert await code("TRecallNo", other) == ResponseCode.ILLEGAL_OPERATION  # another broker's
    assert await code("TRecallOther", handle) == ResponseCode.TOPIC_NOT_EXIST
    await create_topic(client, "TRecallOther", 1)
    assert await code("TRecallOther", handle) == ResponseCode.ILLEGAL_OPERATION  # topic not match
    past = RecallHandle("TRecallNo", "broker-a", str(now_ms() - 1), "u0").encode()
    assert await code("TRecallNo", past) == ResponseCode.ILLEGAL_OPERATION
    enabled = broker.config
    broker.config = dataclasses.replace(enabled, recall_message_enable=False)
    assert await code("TRecallNo", handle) == ResponseCode.NO_PERMISSION
    broker.config = enabled
    assert await code("TRecallNo", handle) == ResponseCode.SUCCESS
    timer = broker.timer
    assert timer is not None and timer.recalls == {"TRecallNo+u0": 1}  # nothing refused was stored


async def test_the_sdk_recalls_by_its_send_result(client: RawClient, broker: BrokerController,
                                                  namesrv: NamesrvController) -> None:
    await create_topic(client, "TRecallSdk", 1)
    async with Producer("PGRecall", namesrv_addr=namesrv.addr, instance_name=instance_name("recall")) as producer:
        kept = await producer.send(Message("TRecallSdk", b"kept", delay=1.5))
        gone = await producer.send(Message("TRecallSdk", b"gone", delay=1.5))
        plain = await producer.send(Message("TRecallSdk", b"plain"))
        assert kept.recall_handle and gone.recall_handle and plain.recall_handle is None
        assert await producer.recall_message("TRecallSdk", gone.recall_handle) == gone.msg_id
        with pytest.raises(ValueError, match="recall handle is invalid"):
            await producer.recall_message("TRecallSdk", "no handle")
    timer = broker.timer
    assert timer is not None
    await eventually(lambda: timer.recalled == 1 and not timer.recalls and timer.wheel.pending == 0, timeout=10,
                     message="the recalled timer dropped and its marker due")
    assert await delivered(client, "TRecallSdk", 2) == [b"kept", b"plain"]


async def runtime_info(client: RawClient) -> dict[str, str]:
    frame = await client.request(RequestCode.GET_BROKER_RUNTIME_INFO, {})
    assert frame.code == 0, frame.remark
    table: dict[str, str] = json.loads(frame.body)["table"]
    return table


async def test_a_recall_survives_a_sigkill(tmp_path: Path) -> None:
    async with broker_process(tmp_path, PROPS) as (namesrv, procs):
        client = await RawClient.connect(procs[0].addr)
        await create_topic(client, "TRecallKill", 1)
        due = now_ms() + 4000
        handles = await send_timers(client, "TRecallKill", due, 2)
        assert (await recall(client, "TRecallKill", handles["u0"])).code == ResponseCode.SUCCESS
        await client.close()
        procs[0].kill()
        procs.append(await asyncio.to_thread(start_broker_proc, namesrv, tmp_path / "store", PROPS))
        client = await RawClient.connect(procs[-1].addr)
        try:
            async def settled() -> bool:
                info = await runtime_info(client)
                return info["timerRecalled"] == "1" and info["timerPending"] == "0"

            await eventually(settled, timeout=20, interval=0.2, message="the recovered recall dropped the timer")
            assert await delivered(client, "TRecallKill", 1) == [b"b1"]
        finally:
            await client.close()
