"""FIFO POP (``order=true``) with raw frames as RocketMQ 5's Java client sends them: a queue hands out its next
messages only once the previous ones are acked or their invisible time ran out, then again in order with their
delivery counts (``orderCountInfo``); other queues are not held up; past ``retryMaxTimes`` a message goes to the
DLQ and the queue moves on."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest

from pocketmq.broker.controller import BrokerController
from pocketmq.common.record import decode_records
from pocketmq.remoting.codes import ResponseCode
from tests.helpers import eventually
from tests.pop.java_pop import (
    ACK_MESSAGE,
    CHANGE_INVISIBLE,
    Popped,
    ack_fields,
    change_fields,
    changed_handle,
    create_topic,
    pop,
    popped,
    send,
)
from tests.transaction.raw import RawClient

pytestmark = pytest.mark.timeout(60)
GROUP = "GFifo"


@pytest.fixture
def broker_props() -> dict[str, str]:
    return {"reviveInterval": "100"}


@pytest.fixture
async def client(broker: BrokerController) -> AsyncIterator[RawClient]:
    c = await RawClient.connect(broker.addr)
    yield c
    await c.close()


async def fill(client: RawClient, topic: str, per_queue: int, queues: int = 2) -> None:
    await create_topic(client, topic, queues)
    for i in range(per_queue):
        for q in range(queues):
            assert (await send(client, topic, f"q{q}-{i}".encode(), queue_id=q)).code == 0


async def fifo(client: RawClient, topic: str, queue_id: int = -1, n: int = 2, invisible: int = 1000,
               poll: int = 0, group: str = GROUP) -> list[Popped]:
    frame = await pop(client, group, topic, queue_id=queue_id, max_nums=n, invisible=invisible, poll=poll,
                      order=True)
    assert frame.code in (0, ResponseCode.POLLING_TIMEOUT), frame.remark
    if frame.code == 0:
        assert frame.ext["reviveQid"] == "999"
    return popped(frame)


async def ack(client: RawClient, topic: str, m: Popped) -> None:
    frame = await client.request(ACK_MESSAGE, ack_fields(GROUP, topic, m))
    assert frame.code == 0, frame.remark


async def test_a_queue_waits_for_its_acks(client: RawClient) -> None:
    await fill(client, "TF1", 3)
    first = await fifo(client, "TF1", queue_id=0)
    assert [m.body for m in first] == [b"q0-0", b"q0-1"]
    assert first[0].pop_ck.split(" ")[3] == "999"
    assert await fifo(client, "TF1", queue_id=0) == []  # blocked
    other = await fifo(client, "TF1", queue_id=1)  # another queue (message group) runs in parallel
    assert [m.body for m in other] == [b"q1-0", b"q1-1"]
    await ack(client, "TF1", first[0])
    assert await fifo(client, "TF1", queue_id=0) == []  # q0-1 still in flight
    await ack(client, "TF1", first[1])
    assert [m.body for m in await fifo(client, "TF1", queue_id=0)] == [b"q0-2"]


async def fifo_once_due(client: RawClient, topic: str, n: int) -> list[Popped]:
    """Pop (1 s invisible) until the queue's in-flight messages are past their invisible time and served again; a
    pop before that finds the queue blocked and changes nothing."""
    got: list[Popped] = []

    async def due() -> bool:
        got[:] = await fifo(client, topic, n=n, invisible=1000)
        return bool(got)

    await eventually(due, timeout=15, interval=0.05, message=f"{topic}: in-flight FIFO messages served again")
    return got


async def test_expired_messages_come_back_in_order_with_their_counts(client: RawClient) -> None:
    await fill(client, "TF2", 3, queues=1)
    first = await fifo(client, "TF2", n=2, invisible=1000)
    assert [(m.body, m.reconsume_times) for m in first] == [(b"q0-0", 0), (b"q0-1", 0)]
    again = await fifo_once_due(client, "TF2", 2)
    assert [(m.body, m.reconsume_times) for m in again] == [(b"q0-0", 1), (b"q0-1", 1)]
    assert "qo0%0 1" in again[0].ext["orderCountInfo"]
    await ack(client, "TF2", again[0])
    third = await fifo_once_due(client, "TF2", 2)
    assert [(m.body, m.reconsume_times) for m in third] == [(b"q0-1", 2), (b"q0-2", 0)]


async def test_an_ack_wakes_a_parked_fifo_pop(client: RawClient) -> None:
    await fill(client, "TF3", 2, queues=1)
    (first,) = await fifo(client, "TF3", n=1, invisible=30_000)
    started = time.monotonic()
    parked = asyncio.ensure_future(fifo(client, "TF3", n=1, poll=8000))
    await asyncio.sleep(0.3)
    assert not parked.done()
    await ack(client, "TF3", first)
    nxt = await asyncio.wait_for(parked, 5)
    assert [m.body for m in nxt] == [b"q0-1"] and time.monotonic() - started < 5


async def test_change_invisible_time_keeps_the_pop_time(client: RawClient) -> None:
    await fill(client, "TF4", 1, queues=1)
    (m,) = await fifo(client, "TF4", n=1, invisible=1000)
    fields = change_fields(GROUP, "TF4", m, 3000)
    frame = await client.request(CHANGE_INVISIBLE, fields)
    assert frame.code == 0, frame.remark
    assert frame.ext["popTime"] == m.ext["popTime"] and int(frame.ext["invisibleTime"]) >= 3000
    await asyncio.sleep(1.2)
    assert await fifo(client, "TF4") == []  # still invisible: the queue stays blocked
    frame = await client.request(ACK_MESSAGE, ack_fields(GROUP, "TF4", m, changed_handle(frame, fields)))
    assert frame.code == 0, frame.remark


async def test_past_max_attempts_to_the_dlq_then_the_next(client: RawClient) -> None:
    frame = await client.request(200, {}, b'{"groupName":"GFifoDlq","retryMaxTimes":1,"consumeEnable":true}')
    assert frame.code == 0
    await fill(client, "TF5", 2, queues=1)
    counts = []
    for _ in range(2):
        (m,) = await fifo(client, "TF5", n=1, invisible=1000, group="GFifoDlq")
        counts.append((m.body, m.reconsume_times))
        await asyncio.sleep(1.1)
    assert counts == [(b"q0-0", 0), (b"q0-0", 1)]
    after: list[Popped] = []

    async def moved_on() -> bool:
        after.extend(await fifo(client, "TF5", n=1, invisible=30_000, group="GFifoDlq"))
        return bool(after)

    await eventually(moved_on, timeout=5, message="the next message")
    assert [m.body for m in after] == [b"q0-1"]
    pulled = await client.request(11, {
        "consumerGroup": "GReadDlq", "topic": "%DLQ%GFifoDlq", "queueId": "0", "queueOffset": "0",
        "maxMsgNums": "1", "sysFlag": "4", "commitOffset": "0", "suspendTimeoutMillis": "0", "subVersion": "0",
        "subscription": "*", "expressionType": "TAG"})
    assert pulled.code == 0 and next(iter(decode_records(pulled.body))).body == b"q0-0"
