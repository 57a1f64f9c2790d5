"""The lite pull consumer against a real name server and broker: subscribe with rebalance (two consumers share the
queues, one leaves and the other takes them over), assign, seek, pause and resume, automatic and manual commits, a
restart resuming from the committed offset, the bounded poll buffer, broadcasting, the broker's admin requests, and
the blocking facade."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from pocketmq.client import (
    ConsumeFromWhere,
    LitePullConsumer,
    MessageExt,
    MessageModel,
    MessageQueue,
    MQClientError,
    blocking,
)
from pocketmq.client.consumer.lite_pull_service import PollBuffer
from pocketmq.client.consumer.offset_store import decode_offsets, local_offset_store_path
from pocketmq.client.consumer.process_queue import ProcessQueue
from pocketmq.remoting.codes import RequestCode, ResponseCode
from tests.admin.rocketmq_json import parse
from tests.client.consumer.consumer_support import Cluster, admin, cluster, create_topic, instance_name, produce
from tests.helpers import eventually

TOPIC = "LiteT"
#: Fast-moving settings (RocketMQ's defaults are a 20 s rebalance, 5 s commits, 20 s long polls).
LITE_FAST: dict[str, Any] = {"rebalance_interval": 1.0, "persist_consumer_offset_interval": 0.2,
                             "poll_name_server_interval": 1.0, "long_polling_timeout": 4.0, "pull_timeout": 14.0,
                             "consume_from_where": ConsumeFromWhere.FIRST_OFFSET}


@pytest.fixture
async def lite(tmp_path: Path) -> AsyncIterator[Cluster]:
    async with cluster(tmp_path) as c:
        await create_topic(c, TOPIC, 4)
        yield c


def consumer(c: Cluster, group: str = "LiteG", **kw: Any) -> LitePullConsumer:
    settings = {**LITE_FAST, **kw}
    settings.setdefault("instance_name", instance_name("l"))
    return LitePullConsumer(group, namesrv_addr=c.namesrv_addr, **settings)


def mq(queue_id: int) -> MessageQueue:
    return MessageQueue(TOPIC, "broker-a", queue_id)


def broker_offset(c: Cluster, group: str, queue_id: int) -> int:
    offsets = c.brokers["broker-a"].offsets
    return offsets.offset_table.get(offsets.key(TOPIC, group), {}).get(queue_id, -1)


async def poll_until(lc: LitePullConsumer, count: int, timeout: float = 20.0) -> list[MessageExt]:
    got: list[MessageExt] = []
    deadline = time.monotonic() + timeout
    while len(got) < count:
        assert time.monotonic() < deadline, f"polled {len(got)} of {count}"
        got += await lc.poll(0.5)
    return got


def where(msgs: list[MessageExt]) -> list[tuple[int, int]]:
    return [(m.queue_id, m.queue_offset) for m in msgs]


async def test_subscribers_share_the_queues_and_one_takes_over_when_the_other_leaves(lite: Cluster) -> None:
    await produce(lite, TOPIC, 40)
    a, b = consumer(lite), consumer(lite)
    a.subscribe(TOPIC)
    b.subscribe(TOPIC, "*")
    await a.start()
    await b.start()
    try:
        await eventually(lambda: len(a.assigned_queues) == 2 and len(b.assigned_queues) == 2, timeout=20,
                         message="the four queues shared two and two")
        assert set(a.assigned_queues).isdisjoint(b.assigned_queues)
        got_a, got_b = await asyncio.gather(poll_until(a, 20), poll_until(b, 20))
        assert {m.queue_id for m in got_a} == {q.queue_id for q in a.assigned_queues}
        assert sorted(m.body for m in got_a + got_b) == sorted(f"m-{i}".encode() for i in range(40))
        await a.commit_sync()
        await b.commit_sync()
        await a.shutdown()
        await eventually(lambda: len(b.assigned_queues) == 4, timeout=20, message="the survivor holds every queue")
        await produce(lite, TOPIC, 20, prefix="late")
        late = await poll_until(b, 20)
        assert sorted(m.body for m in late) == sorted(f"late-{i}".encode() for i in range(20))  # nothing again
        assert await b.poll(0.3) == []
    finally:
        await a.shutdown()
        await b.shutdown()


async def test_assign_reads_only_the_queues_named(lite: Cluster) -> None:
    await produce(lite, TOPIC, 40)
    lc = consumer(lite)
    lc.assign([mq(0), mq(1)])
    with pytest.raises(MQClientError, match="mutually exclusive"):
        lc.subscribe(TOPIC)
    async with lc:
        got = await poll_until(lc, 20)
        assert {m.queue_id for m in got} == {0, 1} and lc.assigned_queues == [mq(0), mq(1)]
        assert await lc.poll(0.3) == []
        group = lite.brokers["broker-a"].clients.consumers["LiteG"]
        assert group.subscriptions == {}  # an assigning consumer announces no subscription, as RocketMQ's
        lc.assign([mq(2)])
        await eventually(lambda: lc.assigned_queues == [mq(2)], message="the new assignment")
        assert {m.queue_id for m in await poll_until(lc, 10)} == {2}
    assert broker_offset(lite, "LiteG", 0) == 10 and broker_offset(lite, "LiteG", 2) == 10


async def test_seek_to_an_offset_the_beginning_and_the_end(lite: Cluster) -> None:
    await produce(lite, TOPIC, 40)  # ten per queue
    async with consumer(lite) as lc:
        lc.assign([mq(0)])
        await lc.seek(mq(0), 7)  # before its pulls have started: it starts there
        assert where(await poll_until(lc, 3)) == [(0, 7), (0, 8), (0, 9)]
        await lc.seek(mq(0), 3)
        assert where(await poll_until(lc, 7))[0] == (0, 3)
        await lc.seek_to_begin(mq(0))
        assert where(await poll_until(lc, 10)) == [(0, i) for i in range(10)]
        await lc.seek_to_end(mq(0))
        assert await lc.poll(0.3) == []
        with pytest.raises(MQClientError, match="Seek offset illegal"):
            await lc.seek(mq(0), 11)
        with pytest.raises(MQClientError, match="not in assigned list"):
            await lc.seek(mq(3), 0)
        assert lc.positions()[mq(0)] == 10
        await lc.commit_sync()
        assert broker_offset(lite, "LiteG", 0) == 10
        await lc.seek(mq(0), 2)
        await lc.commit_sync()  # a position moved back is committed as it is
        assert broker_offset(lite, "LiteG", 0) == 2


async def test_a_paused_queue_is_neither_pulled_nor_polled_until_resumed(lite: Cluster) -> None:
    await produce(lite, TOPIC, 40)  # ten per queue
    async with consumer(lite, pull_batch_size=2) as lc:
        lc.assign([mq(0), mq(1)])
        lc.pause([mq(0)])
        assert lc.paused_queues == [mq(0)]
        from_1: list[MessageExt] = []
        while len(from_1) < 10:
            polled = await lc.poll(5.0)
            assert polled, "queue 1's messages did not come"
            assert {m.queue_id for m in polled} == {1}, "a paused queue's messages were polled"
            from_1 += polled
        assert await lc.poll(0.3) == []  # queue 0 is paused, queue 1 is drained
        lc.resume([mq(0)])
        resumed = await poll_until(lc, 10)
        assert where(resumed) == [(0, i) for i in range(10)]  # from where it was, in order, nothing twice
        assert lc.paused_queues == []


async def test_auto_commit_commits_what_was_polled(lite: Cluster) -> None:
    await produce(lite, TOPIC, 40)
    async with consumer(lite, auto_commit_interval=1.0) as lc:
        lc.assign([mq(1)])
        await poll_until(lc, 10)

        async def committed() -> bool:
            await lc.poll(0.1)  # each poll commits once the interval has passed
            return broker_offset(lite, "LiteG", 1) == 10

        await eventually(committed, timeout=10, message="the automatic commit")
        assert await lc.committed(mq(1)) == 10


async def test_manual_commit_and_a_restart_resume_from_the_committed_offset(lite: Cluster) -> None:
    await produce(lite, TOPIC, 40)
    name = instance_name("same")
    first = consumer(lite, auto_commit=False, instance_name=name, pull_batch_size=2)
    first.assign([mq(2)])
    async with first:
        assert where(await poll_until(first, 4))[0] == (2, 0)
    assert broker_offset(lite, "LiteG", 2) == 0  # polled but never committed

    second = consumer(lite, auto_commit=False, instance_name=name, pull_batch_size=2)
    second.assign([mq(2)])
    async with second:
        polled = await poll_until(second, 6)
        assert where(polled)[0] == (2, 0)
        await second.commit_sync([mq(2)])
        assert broker_offset(lite, "LiteG", 2) == polled[-1].queue_offset + 1
        assert await second.committed(mq(2)) == polled[-1].queue_offset + 1
        await poll_until(second, 2)  # polled after the commit: not committed
    resume_at = polled[-1].queue_offset + 1
    assert broker_offset(lite, "LiteG", 2) == resume_at

    third = consumer(lite, auto_commit=False, instance_name=name, pull_batch_size=2)
    third.assign([mq(2)])
    async with third:
        assert where(await poll_until(third, 1))[0] == (2, resume_at)


async def test_the_poll_buffer_holds_at_most_pull_threshold_for_all(lite: Cluster) -> None:
    await produce(lite, TOPIC, 200)
    async with consumer(lite, pull_threshold_for_all=20, pull_batch_size=5) as lc:
        lc.subscribe(TOPIC)
        parts = lc._parts
        assert parts is not None
        await eventually(lambda: parts.buffer.full, timeout=20, message="the buffer filled")
        bound = 20 + 4 * 5  # the limit, plus one pull of each queue in flight when it was reached
        watch_until = time.monotonic() + 1.0
        while time.monotonic() < watch_until:  # a bounded watch: the buffer never grows past the bound
            assert parts.buffer.count <= bound
            await asyncio.sleep(0.02)
        got = await poll_until(lc, 200)
        assert len({m.body for m in got}) == 200


async def test_the_blocking_facade(lite: Cluster) -> None:
    await produce(lite, TOPIC, 12)

    def run() -> tuple[int, int]:
        lc = blocking.LitePullConsumer("LiteBlockingG", namesrv_addr=lite.namesrv_addr, auto_commit=False,
                                       instance_name=instance_name("bl"), **LITE_FAST)
        lc.assign([mq(3)])
        with lc:
            got: list[MessageExt] = []
            deadline = time.monotonic() + 20
            while len(got) < 3 and time.monotonic() < deadline:
                got += lc.poll(0.5)
            lc.commit_sync()
            return len(got), lc.committed(mq(3))

    count, committed = await asyncio.to_thread(run)
    assert (count, committed) == (3, 3)


def batch(queue_id: int, offsets: range, pq: ProcessQueue) -> tuple[MessageQueue, ProcessQueue, list[MessageExt]]:
    msgs = [MessageExt.of(TOPIC, b"x", queue_id=queue_id, queue_offset=o) for o in offsets]
    pq.put(msgs)
    return mq(queue_id), pq, msgs


async def test_poll_buffer_parks_a_paused_queue_and_forgets_a_dropped_one() -> None:
    buffer = PollBuffer(limit=6)
    pq0, pq1, pq2 = ProcessQueue(), ProcessQueue(), ProcessQueue()
    for queue_id, offsets, pq in ((0, range(0, 2), pq0), (1, range(0, 2), pq1), (0, range(2, 4), pq0),
                                  (2, range(0, 2), pq2)):
        buffer.submit(*batch(queue_id, offsets, pq))
    assert buffer.count == 8 and buffer.full
    taken = buffer.take({mq(0)})  # queue 0 paused: its first batch is parked
    assert taken is not None and taken[0] == mq(1) and buffer.count == 4 and not buffer.full
    pq2.dropped = True
    assert buffer.take({mq(0)}) is None and buffer.count == 0  # queue 0's second batch parked, queue 2 dropped
    buffer.resume(mq(0))
    first, second = buffer.take(set()), buffer.take(set())
    assert first is not None and second is not None
    assert [m.queue_offset for m in first[2] + second[2]] == [0, 1, 2, 3]  # resumed in order
    buffer.submit(*batch(1, range(2, 4), pq1))
    buffer.drop(mq(1))
    assert buffer.count == 0 and buffer.take(set()) is None
    started = time.monotonic()
    await buffer.wait(0.05)
    assert time.monotonic() - started >= 0.04
    buffer.close()
    await asyncio.wait_for(buffer.wait(10), 1)  # a closed buffer does not make a poll wait


async def test_the_broker_s_admin_requests_reach_a_lite_consumer(lite: Cluster) -> None:
    before = int(time.time() * 1000) - 1
    await produce(lite, TOPIC, 40)
    broker = lite.brokers["broker-a"]
    async with consumer(lite) as lc:
        lc.assign([mq(0)])
        assert where(await poll_until(lc, 10)) == [(0, i) for i in range(10)]
        await lc.commit_sync()
        client_id = lc.instance.client_id
        running = parse((await admin(broker.addr, RequestCode.GET_CONSUMER_RUNNING_INFO,
                                     {"consumerGroup": "LiteG", "clientId": client_id})).body)
        assert running["properties"]["PROP_CONSUME_TYPE"] == "CONSUME_ACTIVELY"
        assert [v["commitOffset"] for v in running["mqTable"].values()] == [10]
        status = await admin(broker.addr, RequestCode.INVOKE_BROKER_TO_GET_CONSUMER_STATUS,
                             {"topic": TOPIC, "group": "LiteG"})
        assert sum(parse(status.body)["consumerTable"][client_id].values()) == 10
        direct = await admin(broker.addr, RequestCode.CONSUME_MESSAGE_DIRECTLY,
                             {"consumerGroup": "LiteG", "clientId": client_id, "msgId": "00" * 16,
                              "brokerName": "broker-a"})
        assert direct.code != ResponseCode.SUCCESS
        reset = await admin(broker.addr, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET,
                            {"topic": TOPIC, "group": "LiteG", "timestamp": str(before), "isForce": "true"})
        assert reset.code == ResponseCode.SUCCESS, reset
        assert where(await poll_until(lc, 10)) == [(0, i) for i in range(10)]  # read again from the reset point


async def test_broadcasting_consumers_each_read_everything_and_keep_offsets_locally(lite: Cluster,
                                                                                    tmp_path: Path) -> None:
    await produce(lite, TOPIC, 20)
    a = consumer(lite, message_model=MessageModel.BROADCASTING, offset_store_dir=tmp_path / "offsets",
                 auto_commit=False)
    b = consumer(lite, message_model=MessageModel.BROADCASTING, offset_store_dir=tmp_path / "offsets",
                 auto_commit=False)
    a.subscribe(TOPIC)
    b.subscribe(TOPIC)
    async with a, b:
        got_a, got_b = await asyncio.gather(poll_until(a, 20), poll_until(b, 20))
        assert sorted(m.body for m in got_a) == sorted(m.body for m in got_b) == sorted(
            f"m-{i}".encode() for i in range(20))
        await a.commit_sync()
        written = local_offset_store_path(a.instance.client_id, "LiteG", tmp_path / "offsets")
        assert sum(decode_offsets(written.read_bytes()).values()) == 20
    assert broker_offset(lite, "LiteG", 0) == -1  # nothing committed to the broker
