"""Timer messages on one broker: TIMER_DELIVER_MS / TIMER_DELAY_SEC / TIMER_DELAY_MS sent with raw SEND_MESSAGE_V2
frames fire at their millisecond (never early) in due order, beyond ``timerMaxDelaySec`` or malformed they are
refused, a delay level still works and wins over timer properties, a batch cannot carry timers, and a timer of a
rolled-back transaction never fires."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest

from pocketmq.broker.controller import BrokerController
from pocketmq.client.core.message import Message
from pocketmq.client.producer.transaction import TransactionProducer, TransactionState
from pocketmq.common.batch import BatchEntry, encode_batch_body
from pocketmq.remoting.codes import ResponseCode
from tests.client.consumer.consumer_support import SHORT_DELAY_LEVELS, instance_name
from tests.helpers import eventually
from tests.pop.java_pop import create_topic, now_ms, send
from tests.timer.support import Fired, pull_all
from tests.transaction.raw import RawClient
from tests.transaction.support import TX_PROPS, Ledger

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def broker_props() -> dict[str, str]:
    return {"timerMaxDelaySec": "3600", "messageDelayLevel": SHORT_DELAY_LEVELS, **TX_PROPS}


@pytest.fixture
async def client(broker: BrokerController) -> AsyncIterator[RawClient]:
    c = await RawClient.connect(broker.addr)
    yield c
    await c.close()


async def wait_for(client: RawClient, topic: str, count: int, timeout: float = 10) -> list[Fired]:
    fired: list[Fired] = []

    async def arrived() -> bool:
        fired[:] = await pull_all(client, topic)
        return len(fired) >= count

    await eventually(arrived, timeout=timeout, interval=0.05, message=f"{count} timers fired in {topic}")
    return fired


async def test_timers_fire_at_their_millisecond_in_due_order(client: RawClient) -> None:
    await create_topic(client, "TTimer", 1)
    base = now_ms()
    offsets = [1700, 400, 1100, 800, 1400]
    for i, offset in enumerate(offsets):
        frame = await send(client, "TTimer", f"abs{offset}".encode(), TIMER_DELIVER_MS=str(base + offset))
        assert frame.code == 0, frame.remark
        assert i >= 0
    assert (await send(client, "TTimer", b"sec", TIMER_DELAY_SEC="1")).code == 0
    assert (await send(client, "TTimer", b"ms", TIMER_DELAY_MS="600")).code == 0
    assert (await send(client, "TTimer", b"past", TIMER_DELIVER_MS=str(base - 5000))).code == 0
    fired = await wait_for(client, "TTimer", 8)
    assert fired[0].body == b"past" and fired[0].due == 0  # due already: delivered at once, not a timer
    timers = fired[1:]
    assert [f.due for f in timers] == sorted(f.due for f in timers)  # fired in due order
    assert sorted(f.body for f in timers) == sorted([f"abs{o}".encode() for o in offsets] + [b"sec", b"ms"])
    for f in timers:
        assert f.lateness >= 0, f"{f.body!r} fired {-f.lateness} ms early"
        assert f.properties["TIMER_DEQUEUE_MS"] and f.properties["TIMER_ENQUEUE_MS"]
        assert "REAL_TOPIC" not in f.properties


async def test_refusals(client: RawClient) -> None:
    await create_topic(client, "TTimerBad", 1)
    far = await send(client, "TTimerBad", b"far", TIMER_DELAY_SEC=str(3600 + 60))
    assert far.code == ResponseCode.MESSAGE_ILLEGAL and "max delay 3600000ms" in (far.remark or "")
    for bad in ({"TIMER_DELIVER_MS": "soon"}, {"TIMER_DELAY_MS": "1.5"}, {"TIMER_DELAY_SEC": ""}):
        frame = await send(client, "TTimerBad", b"bad", properties=bad)
        assert frame.code == ResponseCode.MESSAGE_ILLEGAL, bad
    entries = [BatchEntry(0, b"a", "TIMER_DELAY_SEC\x015"), BatchEntry(0, b"b", "")]
    batch = await client.request(320, {"a": "PG", "b": "TTimerBad", "c": "TBW102", "d": "4", "e": "0", "f": "0",
                                       "g": str(now_ms()), "h": "0", "i": "", "m": "true"},
                                 encode_batch_body(entries))
    assert batch.code == ResponseCode.MESSAGE_ILLEGAL and "batch" in (batch.remark or "")
    direct = await send(client, "rmq_sys_wheel_timer", b"x")
    assert direct.code == ResponseCode.NO_PERMISSION
    assert await pull_all(client, "TTimerBad") == []


async def test_delay_levels_keep_working_and_win_over_timers(client: RawClient) -> None:
    await create_topic(client, "TLevel", 1)
    sent = time.time() * 1000
    assert (await send(client, "TLevel", b"level", DELAY="1")).code == 0
    assert (await send(client, "TLevel", b"both", DELAY="1", TIMER_DELAY_SEC="30")).code == 0
    fired = await wait_for(client, "TLevel", 2)
    assert sorted(f.body for f in fired) == [b"both", b"level"]
    for f in fired:
        assert f.stored - sent >= 900 and "TIMER_DELAY_SEC" not in f.properties


async def test_a_rolled_back_transaction_never_fires(client: RawClient, broker: BrokerController) -> None:
    await create_topic(client, "TTxTimer", 1)
    ledger = Ledger()
    async with TransactionProducer("TxTimerPG", ledger, namesrv_addr=broker.config.namesrv_addr,
                                   instance_name=instance_name("txt")) as producer:
        for body, state in ((b"commit", TransactionState.COMMIT), (b"rollback", TransactionState.ROLLBACK)):
            msg = Message("TTxTimer", body, properties={"TIMER_DELAY_MS": "800"})
            result = await producer.send_message_in_transaction(msg, state)
            assert result.local_state is state
    fired = await wait_for(client, "TTxTimer", 1)
    await asyncio.sleep(1.5)
    fired = await pull_all(client, "TTxTimer")
    assert [f.body for f in fired] == [b"commit"] and fired[0].lateness >= 0
