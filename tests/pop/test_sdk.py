"""The SDK side of RocketMQ 5's features against in-process brokers: ``SimpleConsumer`` (receive with invisible
time, ack, batch ack, change invisible duration, tags and SQL92, FIFO), the push consumer's POP mode, timer
messages (``Message(deliver_at=...)`` / ``delay=``) and FIFO message groups (``message_group=``)."""

from __future__ import annotations

import asyncio
import datetime
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from pocketmq.client import Message, Producer
from pocketmq.client.consumer.pop_api import receipt_handle
from pocketmq.client.consumer.push import PushConsumer
from pocketmq.client.consumer.selector import MessageSelector
from pocketmq.client.consumer.simple import SimpleConsumer
from pocketmq.client.consumer.types import ConsumeResult
from pocketmq.client.core.errors import InvalidMessageError
from pocketmq.client.core.message_ext import MessageExt
from pocketmq.client.producer.message_group import message_group_queue
from pocketmq.remoting.codes import ResponseCode
from pocketmq.remoting.errors import ResponseError
from tests.client.consumer.consumer_support import Cluster, cluster, create_topic, instance_name
from tests.helpers import eventually

pytestmark = pytest.mark.timeout(90)
PROPS = {"reviveInterval": "100", "enablePropertyFilter": "true"}


@pytest.fixture
async def c(tmp_path: Path) -> AsyncIterator[Cluster]:
    async with cluster(tmp_path, ("broker-a", "broker-b"), dict(PROPS)) as running:
        yield running


def simple(c: Cluster, group: str, **kw: Any) -> SimpleConsumer:
    return SimpleConsumer(group, namesrv_addr=c.namesrv_addr, instance_name=instance_name("s"), **kw)


def producer(c: Cluster) -> Producer:
    return Producer("PopSdkPG", namesrv_addr=c.namesrv_addr, instance_name=instance_name("p"))


async def receive_all(consumer: SimpleConsumer, want: int, timeout: float = 15, **kw: Any) -> list[MessageExt]:
    got: list[MessageExt] = []

    async def enough() -> bool:
        got.extend(await consumer.receive(32, **kw))
        return len(got) >= want

    await eventually(enough, timeout=timeout, interval=0.0, message=f"{want} received")
    return got


async def test_simple_consumer_receive_ack_and_redelivery(c: Cluster) -> None:
    await create_topic(c, "TSimple", 2)
    async with producer(c) as p:
        for i in range(10):
            await p.send(Message("TSimple", f"m{i}".encode(), tags="A" if i % 2 else "B"))
    async with simple(c, "GSimple", await_duration=2) as consumer:
        consumer.subscribe("TSimple", "*")
        got = await receive_all(consumer, 10, invisible_duration=1.5)
        assert sorted(m.body for m in got) == sorted(f"m{i}".encode() for i in range(10))
        assert all(m.topic == "TSimple" and m.reconsume_times == 0 for m in got)
        await consumer.ack_batch(got[:4])
        for m in got[4:8]:
            await consumer.ack(m)
        again = await receive_all(consumer, 2, invisible_duration=30)  # the two not acked, after 1.5 s
        assert sorted(m.body for m in again) == sorted(m.body for m in got[8:])
        assert all(m.reconsume_times == 1 and m.topic == "TSimple" for m in again)  # delivery attempt 2
        with pytest.raises(ResponseError) as stale:
            await consumer.ack(got[8])
        assert stale.value.response_code == ResponseCode.NO_MESSAGE
        await consumer.change_invisible_duration(again[0], 0)  # a nack: back at once
        back = await receive_all(consumer, 1, invisible_duration=30)
        assert back[0].body == again[0].body and back[0].reconsume_times == 2
        await consumer.change_invisible_duration(again[1], 30)  # an extension; the new handle acks it
        await consumer.ack(again[1])
        await consumer.ack(back[0])
        assert await consumer.receive(32) == []


async def test_simple_consumer_filters(c: Cluster) -> None:
    await create_topic(c, "TSimpleF", 2)
    async with producer(c) as p:
        for i in range(8):
            await p.send(Message("TSimpleF", f"m{i}".encode(), tags="A" if i % 2 else "B",
                                 properties={"n": str(i)}))
    async with simple(c, "GSimpleTag", await_duration=1) as by_tag, simple(c, "GSimpleSql",
                                                                           await_duration=1) as by_sql:
        by_tag.subscribe("TSimpleF", "A")
        by_sql.subscribe("TSimpleF", MessageSelector.by_sql("n >= 6"))
        tagged = await receive_all(by_tag, 4)
        assert sorted(m.body for m in tagged) == [b"m1", b"m3", b"m5", b"m7"]
        selected = await receive_all(by_sql, 2)
        assert sorted(m.body for m in selected) == [b"m6", b"m7"]


async def test_message_groups_keep_their_order(c: Cluster) -> None:
    await create_topic(c, "TFifoSdk", 4)
    groups = [f"order-{g}" for g in range(5)]
    async with producer(c) as p:
        for i in range(6):
            for g in groups:
                result = await p.send(Message("TFifoSdk", f"{g}:{i}".encode(), message_group=g))
                queues = p._publish["TFifoSdk"].message_queues
                assert result.message_queue == message_group_queue(queues, g)
    seen: dict[str, list[int]] = {g: [] for g in groups}
    async with simple(c, "GFifoSdk", fifo=True, await_duration=1) as consumer:
        consumer.subscribe("TFifoSdk")

        async def drained() -> bool:
            batch = await consumer.receive(8, invisible_duration=10)
            for m in batch:
                g, i = m.body.decode().split(":")
                seen[g].append(int(i))
            await consumer.ack_batch(batch)
            return all(len(v) == 6 for v in seen.values())

        await eventually(drained, timeout=30, interval=0.0, message="every group consumed")
    assert all(v == list(range(6)) for v in seen.values()), seen


async def test_timer_messages_from_the_sdk(c: Cluster) -> None:
    await create_topic(c, "TTimerSdk", 2)
    sent = time.time()
    async with producer(c) as p:
        await p.send(Message("TTimerSdk", b"at", deliver_at=datetime.datetime.now() + datetime.timedelta(seconds=1)))
        await p.send(Message("TTimerSdk", b"in", delay=datetime.timedelta(milliseconds=1500)))
        await p.send(Message("TTimerSdk", b"ms", deliver_at=int((sent + 0.5) * 1000)))
        with pytest.raises(InvalidMessageError):
            Message("TTimerSdk", b"x", deliver_at=1, delay=1)
        with pytest.raises(InvalidMessageError):
            await p.send_batch([Message("TTimerSdk", b"x", delay=1)])
    async with simple(c, "GTimerSdk", await_duration=3) as consumer:
        consumer.subscribe("TTimerSdk")
        got = await receive_all(consumer, 3)
        for m in got:
            due = int(m.get_property("TIMER_OUT_MS") or 0)
            assert m.store_timestamp >= due > 0, m.body
        assert sorted(m.body for m in got) == [b"at", b"in", b"ms"]


async def test_push_consumer_pop_mode(c: Cluster) -> None:
    await create_topic(c, "TPopPush", 4)
    async with producer(c) as p:
        for i in range(30):
            await p.send(Message("TPopPush", f"m{i}".encode()))
    attempts: dict[bytes, int] = {}
    done: set[bytes] = set()

    async def handler(msg: MessageExt) -> ConsumeResult:
        attempts[msg.body] = attempts.get(msg.body, 0) + 1
        assert receipt_handle(msg).broker_name in ("broker-a", "broker-b")
        if msg.body == b"m7" and msg.reconsume_times == 0:
            return ConsumeResult.RECONSUME_LATER  # retried after pop_retry_delays[0]
        done.add(msg.body)
        return ConsumeResult.SUCCESS

    consumers = [PushConsumer("GPopPush", namesrv_addr=c.namesrv_addr, instance_name=instance_name("pp"), pop=True,
                              pop_retry_delays=(0.5,), long_polling_timeout=1.0, pull_timeout=5.0,
                              pop_invisible_time=20) for _ in range(2)]
    for consumer in consumers:
        consumer.subscribe("TPopPush", "*")
        consumer.register_handler(handler)
        await consumer.start()
    try:
        await eventually(lambda: len(done) == 30, timeout=20, message="all consumed")
        await asyncio.sleep(1.0)  # a window for a wrong redelivery: the counts below must not grow in it
        assert attempts[b"m7"] == 2 and all(n == 1 for body, n in attempts.items() if body != b"m7")
        assert sum(consumer.consumed_count for consumer in consumers) == 31
    finally:
        for consumer in consumers:
            await consumer.shutdown()


async def test_push_consumer_pop_mode_pipelines_receives_and_merges_acks(c: Cluster) -> None:
    """Several receives in flight and one ack request for many handler calls: every message handled once, every
    one acked (nothing left in flight on the brokers), and never more handler calls at once than the slots."""
    await create_topic(c, "TPopMerge", 4)
    async with producer(c) as p:
        for i in range(20):
            await p.send_batch([Message("TPopMerge", f"{i}:{j}".encode()) for j in range(32)])
    seen: list[bytes] = []
    running = most = 0

    async def handler(msgs: list[MessageExt]) -> ConsumeResult:
        nonlocal running, most
        running += 1
        most = max(most, running)
        await asyncio.sleep(0.005)  # handler work: acks of other calls pile up meanwhile
        seen.extend(msg.body for msg in msgs)
        running -= 1
        return ConsumeResult.SUCCESS

    consumer = PushConsumer("GPopMerge", namesrv_addr=c.namesrv_addr, instance_name=instance_name("pm"), pop=True,
                            consume_message_batch_max_size=8, consume_thread_max=6, pop_receives=3,
                            long_polling_timeout=1.0, pull_timeout=5.0)
    consumer.subscribe("TPopMerge", "*")
    consumer.register_batch_handler(handler)
    requests: list[int] = []
    async with consumer:
        assert consumer._pop is not None
        api = consumer._pop.api
        ack_groups = api.ack_groups

        async def counted(groups: Any) -> None:
            requests.append(sum(len(offsets) for _topic, _prefix, offsets in groups))
            await ack_groups(groups)

        api.ack_groups = counted  # type: ignore[method-assign]
        await eventually(lambda: consumer.acked_count == 640, timeout=30, message="all acked")
    assert sorted(seen) == sorted(f"{i}:{j}".encode() for i in range(20) for j in range(32))
    assert most <= 6
    assert sum(requests) == 640 and len(requests) < 80, requests  # 80 handler calls at the least
    for broker in c.brokers.values():
        assert broker.pop is not None and broker.pop.state.inflight_by_group.get("GPopMerge", 0) == 0


async def test_push_consumer_pop_mode_orderly(c: Cluster) -> None:
    await create_topic(c, "TPopOrderly", 2)
    async with producer(c) as p:
        for i in range(10):
            for g in ("x", "y"):
                await p.send(Message("TPopOrderly", f"{g}:{i}".encode(), message_group=g))
    seen: dict[str, list[int]] = {"x": [], "y": []}
    failed = False

    async def handler(msg: MessageExt) -> ConsumeResult:
        nonlocal failed
        g, i = msg.body.decode().split(":")
        if g == "x" and i == "3" and not failed:
            failed = True
            return ConsumeResult.RECONSUME_LATER  # x:3 again after the pause, then x:4 ...
        seen[g].append(int(i))
        return ConsumeResult.SUCCESS

    consumer = PushConsumer("GPopOrderly", namesrv_addr=c.namesrv_addr, instance_name=instance_name("po"), pop=True,
                            orderly=True, suspend_current_queue_time=0.3, long_polling_timeout=1.0, pull_timeout=5.0)
    consumer.subscribe("TPopOrderly", "*")
    consumer.register_handler(handler)
    async with consumer:
        await eventually(lambda: len(seen["x"]) == 10 and len(seen["y"]) == 10, timeout=20, message="consumed")
    assert seen == {"x": list(range(10)), "y": list(range(10))}



async def test_blocking_simple_consumer(c: Cluster) -> None:
    from pocketmq.client import blocking

    await create_topic(c, "TBlockSimple", 1)
    async with producer(c) as p:
        await p.send(Message("TBlockSimple", b"x"))

    def consume() -> list[bytes]:
        consumer = blocking.SimpleConsumer("GBlockSimple", namesrv_addr=c.namesrv_addr, await_duration=2,
                                           instance_name=instance_name("bs"), start=False)
        consumer.subscribe("TBlockSimple")
        consumer.start()
        try:
            got = consumer.receive(4, invisible_duration=10)
            consumer.ack_batch(got)
            return [m.body for m in got]
        finally:
            consumer.shutdown()

    assert await asyncio.to_thread(consume) == [b"x"]
