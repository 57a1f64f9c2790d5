"""``PushConsumer`` against real in-process brokers: delivery over two brokers, offsets committed and resumed,
tag filtering, broadcasting, consume-from rules, orderly consumption, retries and dead letters, delayed
messages, rebalance on notification, and shutdown."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from pocketmq.client import Message, MessageQueue, Producer
from pocketmq.client.consumer.pull import PullConsumer
from pocketmq.client.consumer.pull_result import PullStatus
from pocketmq.client.consumer.push import PushConsumer
from pocketmq.client.consumer.types import ConsumeFromWhere, ConsumeResult, MessageModel
from pocketmq.client.core.message_ext import MessageExt
from pocketmq.remoting.errors import RemotingConnectError
from pocketmq.store.config import BrokerRole
from tests.client.consumer.consumer_support import (
    FAST,
    SHORT_DELAY_LEVELS,
    Cluster,
    Recorder,
    caught_up,
    cluster,
    create_topic,
    instance_name,
    produce,
    push_consumer,
)
from tests.helpers import eventually


def broker_offsets(c: Cluster, group: str, topic: str, queues: int) -> dict[tuple[str, int], int]:
    return {(name, q): b.offsets.query_offset(group, topic, q) for name, b in c.brokers.items() for q in range(queues)}


async def test_consumes_everything_over_two_brokers_and_commits(tmp_path: Path) -> None:
    async with cluster(tmp_path, ("broker-a", "broker-b")) as c:
        await create_topic(c, "PushT", 4)
        bodies = await produce(c, "PushT", 200)
        rec = Recorder()
        consumer = push_consumer(c, "PushG", "PushT", rec)
        async with consumer:
            await eventually(lambda: len(set(rec.bodies)) == 200, timeout=20, message="all consumed")
            await eventually(lambda: len(consumer.assigned_queues) == 8 + 2, timeout=10,
                             message="every queue of the topic and of the retry topic (one per broker)")
            assert set(consumer.subscriptions) == {"PushT", "%RETRY%PushG"}
        assert sorted(rec.bodies) == sorted(bodies)  # exactly once: one consumer, no failures
        committed = broker_offsets(c, "PushG", "PushT", 4)
        stored = {(n, q): b.store.get_max_offset_in_queue("PushT", q)  # type: ignore[union-attr]
                  for n, b in c.brokers.items() for q in range(4)}
        assert committed == stored  # shutdown committed every queue's offset
        # Every message carries what the broker stored: queue, offset, topic, broker name.
        for msg in rec.got:
            assert msg.topic == "PushT" and msg.broker_name in c.brokers and msg.reconsume_times == 0
        # Unregistered from both brokers: the group has no client left.
        for b in c.brokers.values():
            info = b.clients.consumers.get("PushG")
            assert info is None or not info.channels


async def test_restarted_consumer_resumes_from_committed_offset(tmp_path: Path) -> None:
    async with cluster(tmp_path, ("broker-a", "broker-b")) as c:
        await create_topic(c, "ResumeT", 2)
        first = await produce(c, "ResumeT", 60, prefix="first")
        rec = Recorder()
        name = instance_name()
        async with push_consumer(c, "ResumeG", "ResumeT", rec, instance_name=name):
            await eventually(lambda: len(rec.got) == 60, timeout=20, message="first batch consumed")
        second = await produce(c, "ResumeT", 40, prefix="second")
        again = Recorder()
        async with push_consumer(c, "ResumeG", "ResumeT", again, instance_name=name) as consumer:
            await eventually(lambda: len(consumer.assigned_queues) == 4 + 2 and caught_up(consumer, c, "ResumeT"),
                             timeout=20, message="second consumer at the end of every queue")
        assert sorted(rec.bodies) == sorted(first)
        assert sorted(again.bodies) == sorted(second)


async def test_tag_filtering(tmp_path: Path) -> None:
    async with cluster(tmp_path) as c:
        await create_topic(c, "TagPushT", 2)
        await produce(c, "TagPushT", 60, tags=lambda i: ("tagA", "tagB", "tagC")[i % 3])
        rec = Recorder()
        async with push_consumer(c, "TagPushG", "TagPushT", rec, "tagA || tagC") as consumer:
            await eventually(lambda: len(rec.got) == 40, timeout=15, message="tagA and tagC consumed")
            # Offsets move past the filtered-out messages too.
            await eventually(lambda: sum(consumer.committed_offsets().values()) == 60, timeout=10,
                             message="offsets at the end")
        assert Counter(m.tags for m in rec.got) == {"tagA": 20, "tagC": 20}


async def test_broadcasting_gives_every_consumer_everything(tmp_path: Path) -> None:
    async with cluster(tmp_path, ("broker-a", "broker-b")) as c:
        await create_topic(c, "CastT", 2)
        bodies = await produce(c, "CastT", 50)
        recs = [Recorder("one"), Recorder("two")]
        consumers = [push_consumer(c, "CastG", "CastT", rec, message_model=MessageModel.BROADCASTING,
                                   consume_from_where=ConsumeFromWhere.FIRST_OFFSET, offset_store_dir=tmp_path / "o")
                     for rec in recs]
        for consumer in consumers:
            await consumer.start()
        try:
            for rec in recs:
                await eventually(lambda r=rec: len(r.got) == 50, timeout=15, message=f"{rec.name} got all")  # type: ignore[misc]
            assert all(len(consumer.assigned_queues) == 4 for consumer in consumers)  # no retry topic
        finally:
            for consumer in consumers:
                await consumer.shutdown()
        for rec in recs:
            assert sorted(rec.bodies) == sorted(bodies)
        # Offsets live in each consumer's local file, not on the broker.
        files = sorted((tmp_path / "o").rglob("offsets.json"))
        assert len(files) == 2
        assert c.brokers["broker-a"].offsets.query_offset("CastG", "CastT", 0) < 0
        # A broadcasting consumer restarted with the same instance resumes from its file.
        more = await produce(c, "CastT", 10, prefix="more")
        rec = Recorder()
        name = consumers[0].config.client.client_id.split("@")[1]
        async with push_consumer(c, "CastG", "CastT", rec, message_model=MessageModel.BROADCASTING,
                                 offset_store_dir=tmp_path / "o", instance_name=name) as again:
            await eventually(lambda: len(again.assigned_queues) == 4 and caught_up(again, c, "CastT"), timeout=15,
                             message="resumed from the local file, to the end")
        assert sorted(rec.bodies) == sorted(more)


@pytest.fixture
async def old_topic(tmp_path: Path) -> AsyncIterator[tuple[Cluster, int]]:
    """A topic with 5 old messages, a timestamp, then 5 newer ones, whose queue no longer starts at 0 as far
    as QUERY_CONSUMER_OFFSET is concerned (as if its first file had been deleted), so a new group gets
    QUERY_NOT_FOUND and its consume-from rule decides."""
    async with cluster(tmp_path) as c:
        await create_topic(c, "FromT", 1)
        await produce(c, "FromT", 5, prefix="old")
        await asyncio.sleep(0.02)
        middle = time.time_ns() // 1_000_000
        await asyncio.sleep(0.02)
        await produce(c, "FromT", 5, prefix="new")
        store = c.brokers["broker-a"].store
        assert store is not None
        processor = c.brokers["broker-a"].consumer_processor

        class AgedStore:
            """The store as QUERY_CONSUMER_OFFSET sees it: the queue's min offset is past 0."""

            def __getattr__(self, name: str) -> object:
                return getattr(store, name)

            def get_min_offset_in_queue(self, topic: str, queue_id: int) -> int:
                return 1

        processor.store = AgedStore()  # type: ignore[assignment]
        yield c, middle


@pytest.mark.parametrize(
    ("where", "expected"),
    [
        (ConsumeFromWhere.FIRST_OFFSET, [f"old-{i}" for i in range(5)] + [f"new-{i}" for i in range(5)]),
        (ConsumeFromWhere.TIMESTAMP, [f"new-{i}" for i in range(5)]),
        (ConsumeFromWhere.LAST_OFFSET, []),
    ],
)
async def test_consume_from_rules(old_topic: tuple[Cluster, int], where: ConsumeFromWhere,
                                  expected: list[str]) -> None:
    c, middle = old_topic
    rec = Recorder()
    async with push_consumer(c, f"From{where.name}", "FromT", rec, consume_from_where=where,
                             consume_timestamp=middle) as consumer:
        await eventually(lambda: len(rec.got) >= len(expected) and len(consumer.assigned_queues) == 2, timeout=15,
                         message="consumed from the rule's start")
        await produce(c, "FromT", 1, prefix="live")
        await eventually(lambda: "live-0" in rec.bodies, timeout=10, message="live message")
    assert rec.bodies == [*expected, "live-0"]


async def test_young_queue_starts_at_zero_even_from_last_offset(tmp_path: Path) -> None:
    """The broker answers a new group's offset query with 0 while the queue starts at 0 (reference §2.4), so
    LAST_OFFSET on a young topic reads its history, as RocketMQ 4.x does."""
    async with cluster(tmp_path) as c:
        await create_topic(c, "YoungT", 1)
        await produce(c, "YoungT", 3)
        rec = Recorder()
        async with push_consumer(c, "YoungG", "YoungT", rec, consume_from_where=ConsumeFromWhere.LAST_OFFSET):
            await eventually(lambda: len(rec.got) == 3, timeout=15, message="history consumed")


async def test_orderly_keeps_per_queue_order(tmp_path: Path) -> None:
    async with cluster(tmp_path, ("broker-a", "broker-b")) as c:
        await create_topic(c, "OrderT", 2)
        keys = [f"k{i}" for i in range(4)]
        async with Producer("OrderPG", namesrv_addr=c.namesrv_addr, instance_name=instance_name("p")) as p:

            def by_key(queues: Sequence[MessageQueue], msg: Message, arg: str) -> MessageQueue:
                return queues[int(arg[1:]) % len(queues)]

            for seq in range(40):
                for key in keys:
                    await p.send(Message("OrderT", f"{key}:{seq}".encode()), selector=by_key, arg=key)
        failed_once: set[str] = set()
        seen: list[tuple[MessageQueue, str]] = []
        running = 0
        overlap = 0

        async def handler(msg: MessageExt) -> ConsumeResult:
            nonlocal running, overlap
            body = msg.body.decode()
            running += 1
            overlap = max(overlap, running)
            try:
                await asyncio.sleep(0)
                if body.endswith(":7") and body not in failed_once:  # a failure is retried in place
                    failed_once.add(body)
                    return ConsumeResult.RECONSUME_LATER
                seen.append((msg.message_queue, body))
                return ConsumeResult.SUCCESS
            finally:
                running -= 1

        consumer = PushConsumer("OrderG", namesrv_addr=c.namesrv_addr, instance_name=instance_name(), orderly=True,
                                suspend_current_queue_time=0.1, **FAST)
        consumer.subscribe("OrderT", "*")
        consumer.register_handler(handler)
        async with consumer:
            await eventually(lambda: len(seen) == 160, timeout=30, message="all consumed in order")

            def locked() -> list[tuple[str, str, int]]:
                return [key for b in c.brokers.values() for key in b.consumer_processor.locks.get("OrderG", {})]

            # Every queue locked by this client: 2 of the topic and 1 of the retry topic on each broker.
            await eventually(lambda: len(locked()) == 6, timeout=10, message="all queues locked")
            assert {key[0] for key in locked()} == {"OrderT", "%RETRY%OrderG"}
        assert {b for b in failed_once} == {f"{k}:7" for k in keys}
        per_key: dict[str, list[int]] = {}
        queue_of_key: dict[str, set[MessageQueue]] = {}
        for mq, body in seen:
            key, number = body.split(":")
            per_key.setdefault(key, []).append(int(number))
            queue_of_key.setdefault(key, set()).add(mq)
        for key in keys:
            assert per_key[key] == list(range(40)), key  # in order, each once, the failed one retried in place
            assert len(queue_of_key[key]) == 1
        # Unlocked at shutdown.
        assert all(not b.consumer_processor.locks.get("OrderG") for b in c.brokers.values())


async def test_failed_message_comes_back_after_the_retry_delay_then_goes_to_dlq(tmp_path: Path) -> None:
    async with cluster(tmp_path, props={"messageDelayLevel": SHORT_DELAY_LEVELS}) as c:
        await create_topic(c, "RetryT", 1)
        await produce(c, "RetryT", 2, prefix="r")  # r-0 always fails, r-1 fails once
        times: dict[str, list[float]] = {}
        failed_once: set[str] = set()

        reconsumes: dict[str, list[int]] = {}

        async def handler(msg: MessageExt) -> ConsumeResult:
            body = msg.body.decode()
            times.setdefault(body, []).append(time.monotonic())
            reconsumes.setdefault(body, []).append(msg.reconsume_times)
            assert msg.topic == "RetryT"  # the original topic is restored for retried messages
            if body == "r-0":
                raise RuntimeError("always fails")  # an exception counts as RECONSUME_LATER
            if body not in failed_once:
                failed_once.add(body)
                return ConsumeResult.RECONSUME_LATER
            return ConsumeResult.SUCCESS

        consumer = PushConsumer("RetryG", namesrv_addr=c.namesrv_addr, instance_name=instance_name(),
                                max_reconsume_times=2, **FAST)
        consumer.subscribe("RetryT")
        consumer.register_handler(handler)
        async with consumer:
            await eventually(lambda: len(times.get("r-0", [])) == 3 and len(times.get("r-1", [])) == 2,
                             timeout=30, message="retries delivered")
            async with PullConsumer("DlqReader", namesrv_addr=c.namesrv_addr,
                                    instance_name=instance_name()) as reader:
                dlq = MessageQueue("%DLQ%RetryG", "broker-a", 0)

                async def dead() -> bool:
                    return (await reader.pull(dlq, "*", 0, 32)).status is PullStatus.FOUND

                await eventually(dead, timeout=15, message="r-0 in the DLQ")
                letters = (await reader.pull(dlq, "*", 0, 32)).messages
        assert [m.body for m in letters] == [b"r-0"]
        assert reconsumes["r-0"] == [0, 1, 2] and reconsumes["r-1"] == [0, 1]
        for body, stamps in times.items():
            for before, after in itertools.pairwise(stamps):
                assert after - before >= 0.9, body  # delay level 3+n is 1 s with the short levels


async def fail_once(c: Cluster, topic: str, group: str, *, break_send_back: bool = False) -> list[MessageExt]:
    """A push consumer of ``group`` whose handler fails the first delivery of ``topic``'s one message and
    accepts the second: the two deliveries. ``break_send_back`` makes CONSUMER_SEND_MSG_BACK fail, so that the
    SDK falls back to producing the retry itself."""
    deliveries: list[MessageExt] = []

    async def handler(msg: MessageExt) -> ConsumeResult:
        deliveries.append(msg)
        return ConsumeResult.SUCCESS if len(deliveries) > 1 else ConsumeResult.RECONSUME_LATER

    async def broken_send_back(*args: object, **kw: object) -> None:
        raise RemotingConnectError("send-back refused (test)")

    consumer = PushConsumer(group, namesrv_addr=c.namesrv_addr, instance_name=instance_name(), **FAST)
    consumer.subscribe(topic)
    consumer.register_handler(handler)
    async with consumer:
        if break_send_back:
            consumer.api.send_back = broken_send_back  # type: ignore[method-assign]
        await eventually(lambda: len(deliveries) == 2, timeout=20, message="redelivered once")
    return deliveries


async def test_send_back_failure_falls_back_to_producing_to_the_retry_topic(tmp_path: Path) -> None:
    async with cluster(tmp_path, props={"messageDelayLevel": SHORT_DELAY_LEVELS}) as c:
        await create_topic(c, "FallbackT", 1)
        await produce(c, "FallbackT", 1, prefix="fb", tags=lambda i: "keep")
        first, second = await fail_once(c, "FallbackT", "FallbackG", break_send_back=True)
        assert second.topic == "FallbackT" and second.body == first.body and second.tags == "keep"
        assert second.reconsume_times == 1
        assert second.get_property("ORIGIN_MESSAGE_ID") == first.msg_id
        assert second.msg_id == first.msg_id  # UNIQ_KEY kept


async def test_send_back_stored_but_not_replicated_is_not_produced_again(tmp_path: Path) -> None:
    """On a SYNC_MASTER without a slave the broker stores a send-back and answers SLAVE_NOT_AVAILABLE: the
    retry message exists, so the SDK must not also produce it to %RETRY% (that stored it twice)."""
    async with cluster(tmp_path, props={"messageDelayLevel": SHORT_DELAY_LEVELS},
                       broker_role=BrokerRole.SYNC_MASTER) as c:
        await create_topic(c, "StoredBackT", 1)
        await produce(c, "StoredBackT", 1, prefix="sb")
        deliveries = await fail_once(c, "StoredBackT", "StoredBackG")
        store = c.brokers["broker-a"].store
        assert store is not None
        assert store.get_max_offset_in_queue("%RETRY%StoredBackG", 0) == 1
        assert [m.reconsume_times for m in deliveries] == [0, 1]


async def test_delayed_messages_arrive_no_earlier_than_their_level(tmp_path: Path) -> None:
    async with cluster(tmp_path, props={"messageDelayLevel": "1s 2s 3s"}) as c:
        await create_topic(c, "DelayT", 1)
        rec = Recorder()
        async with push_consumer(c, "DelayG", "DelayT", rec) as consumer:
            await eventually(lambda: len(consumer.assigned_queues) == 2, timeout=10, message="queues assigned")
            async with Producer("DelayPG", namesrv_addr=c.namesrv_addr, instance_name=instance_name("p")) as p:
                sent = time.time() * 1000
                await p.send(Message("DelayT", b"two", delay_level=2))
                await p.send(Message("DelayT", b"now"))
            await eventually(lambda: len(rec.got) == 2, timeout=15, message="both delivered")
            received = time.time() * 1000
        now, two = rec.got
        assert now.body == b"now" and two.body == b"two"
        assert two.store_timestamp - sent >= 2000 - 50  # re-put no earlier than the level's delay
        assert received - sent >= 2000 - 50


async def test_notification_rebalances_at_once(tmp_path: Path) -> None:
    async with cluster(tmp_path, ("broker-a", "broker-b")) as c:
        await create_topic(c, "NotifyT", 2)
        slow: dict[str, Any] = {"rebalance_interval": 120.0}
        first = push_consumer(c, "NotifyG", "NotifyT", Recorder(), **slow)
        second = push_consumer(c, "NotifyG", "NotifyT", Recorder(), **slow)
        async with first:
            await eventually(lambda: len([q for q in first.assigned_queues if q.topic == "NotifyT"]) == 4,
                             timeout=10, message="first owns all")
            async with second:
                # Without the broker's NOTIFY_CONSUMER_IDS_CHANGED the first would wait 120 s.
                await eventually(lambda: len([q for q in first.assigned_queues if q.topic == "NotifyT"]) == 2,
                                 timeout=10, message="first gave half away")
                await eventually(lambda: len([q for q in second.assigned_queues if q.topic == "NotifyT"]) == 2,
                                 timeout=10, message="second took half")
                mine = {q for q in first.assigned_queues if q.topic == "NotifyT"}
                theirs = {q for q in second.assigned_queues if q.topic == "NotifyT"}
                assert not mine & theirs
            await eventually(lambda: len([q for q in first.assigned_queues if q.topic == "NotifyT"]) == 4,
                             timeout=10, message="first took everything back when the second left")


async def test_handler_concurrency_is_bounded(tmp_path: Path) -> None:
    async with cluster(tmp_path) as c:
        await create_topic(c, "ConcT", 4)
        await produce(c, "ConcT", 60)
        running = 0
        peak = 0
        done = 0

        async def handler(msg: MessageExt) -> None:
            nonlocal running, peak, done
            running += 1
            peak = max(peak, running)
            await asyncio.sleep(0.02)
            running -= 1
            done += 1

        consumer = PushConsumer("ConcG", namesrv_addr=c.namesrv_addr, instance_name=instance_name(),
                                consume_thread_max=5, **FAST)
        consumer.subscribe("ConcT")
        consumer.register_handler(handler)
        async with consumer:
            await eventually(lambda: done == 60, timeout=20, message="all consumed")
        assert peak == 5


async def test_flow_control_holds_pulling_while_the_handler_lags(tmp_path: Path) -> None:
    async with cluster(tmp_path) as c:
        await create_topic(c, "FlowT", 1)
        await produce(c, "FlowT", 200)
        gate = asyncio.Event()
        got = 0

        async def handler(msg: MessageExt) -> None:
            nonlocal got
            got += 1
            await gate.wait()

        consumer = PushConsumer("FlowG", namesrv_addr=c.namesrv_addr, instance_name=instance_name(),
                                pull_batch_size=8, pull_threshold_for_queue=20, consume_thread_max=2, **FAST)
        consumer.subscribe("FlowT")
        consumer.register_handler(handler)
        async with consumer:
            mq = MessageQueue("FlowT", "broker-a", 0)
            await eventually(lambda: len(consumer.process_queue(mq) or ()) > 20, timeout=10,
                             message="queue filled to its threshold")
            await asyncio.sleep(0.3)
            pq = consumer.process_queue(mq)
            assert pq is not None and 20 < len(pq) <= 28  # one batch over the threshold at most
            assert consumer.committed_offsets().get(mq, -1) <= 0  # nothing acknowledged yet
            gate.set()
            await eventually(lambda: got == 200, timeout=20, message="all consumed after the gate opened")
            await eventually(lambda: consumer.committed_offsets().get(mq) == 200, timeout=10, message="offset 200")


async def test_start_requires_handler_and_subscription(tmp_path: Path) -> None:
    from pocketmq.client.core.errors import ConsumerStateError

    consumer = PushConsumer("NoHandlerG", namesrv_addr="127.0.0.1:1")
    consumer.subscribe("T")
    with pytest.raises(ConsumerStateError):
        await consumer.start()
    other = PushConsumer("NoSubG", namesrv_addr="127.0.0.1:1")
    other.register_handler(Recorder())
    with pytest.raises(ConsumerStateError):
        await other.start()
    with pytest.raises(ValueError):
        PushConsumer("BadG", namesrv_addr="127.0.0.1:1", pull_batch_size=0)
    with pytest.raises(ValueError):
        PushConsumer("BadG", namesrv_addr="127.0.0.1:1", long_polling_timeout=30, pull_timeout=20)


async def test_broker_moves_a_message_produced_to_the_retry_topic_at_its_limit_to_the_dlq(tmp_path: Path) -> None:
    """The SDK's fallback path (send-back failed, the message is produced to ``%RETRY%<group>`` with
    RECONSUME_TIME / MAX_RECONSUME_TIMES) reaches the DLQ at the limit, as with RocketMQ's broker."""
    async with cluster(tmp_path, props={"messageDelayLevel": SHORT_DELAY_LEVELS}) as c:
        await create_topic(c, "LimitT", 1)
        async with PullConsumer("LimitG", namesrv_addr=c.namesrv_addr, instance_name=instance_name()) as reader:
            await reader.fetch_subscribe_message_queues("LimitT")
            await eventually(lambda: c.brokers["broker-a"].topics.get("%RETRY%LimitG") is not None, timeout=10,
                             message="retry topic created by the heartbeat")
            props = {"RETRY_TOPIC": "LimitT", "RECONSUME_TIME": "3", "MAX_RECONSUME_TIMES": "3"}
            async with Producer("LimitPG", namesrv_addr=c.namesrv_addr, instance_name=instance_name("p")) as p:
                await p.send(Message("%RETRY%LimitG", b"spent", properties=props, delay_level=6))
            dlq = MessageQueue("%DLQ%LimitG", "broker-a", 0)

            async def dead() -> bool:
                try:
                    return (await reader.pull(dlq, "*", 0, 32)).status is PullStatus.FOUND
                except Exception:
                    return False

            await eventually(dead, timeout=5, message="message in the DLQ")


async def test_producer_and_consumer_share_one_client_instance(tmp_path: Path) -> None:
    async with cluster(tmp_path) as c:
        await create_topic(c, "ShareT", 1)
        name = instance_name("shared")
        rec = Recorder()
        # Equal client settings (FAST polls the name server every second) make one instance.
        async with Producer("SharePG", namesrv_addr=c.namesrv_addr, instance_name=name,
                            poll_name_server_interval=FAST["poll_name_server_interval"]) as producer:
            consumer = push_consumer(c, "ShareG", "ShareT", rec, instance_name=name)
            async with consumer:
                assert consumer.instance is producer.instance
                assert producer.instance.consumer_groups == ["ShareG"]
                await producer.send(Message("ShareT", b"to myself"))
                await eventually(lambda: rec.bodies == ["to myself"], timeout=10, message="consumed")
                # One heartbeat announces both groups.
                info = c.brokers["broker-a"].clients
                assert "SharePG" in info.producers and bool(info.consumers["ShareG"].channels)
            # The consumer left; the producer and its instance go on.
            assert not producer.instance.closed and producer.instance.consumer_groups == []
            await producer.send(Message("ShareT", b"still sending"))
        assert producer.instance.closed
