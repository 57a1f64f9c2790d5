"""At-least-once for real: a group of three push consumers, started and stopped at different times while a
producer writes to a topic on two brokers. Every message is delivered at least once; a message is only
ever delivered twice by two different consumer instances (a hand-over of its queue: the new owner starts
from the offset last committed by the old one), never twice by the same consumer; and a consumer that
is shut down and started again (same client id) starts from the offsets committed at its shutdown."""

from __future__ import annotations

import asyncio
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable
from pathlib import Path

from pocketmq.client import Message, Producer
from pocketmq.client.consumer.push import PushConsumer
from pocketmq.client.consumer.types import ConsumeResult
from pocketmq.client.core.message_ext import MessageExt
from tests.client.consumer.consumer_support import FAST, Cluster, caught_up, cluster, create_topic, instance_name
from tests.helpers import eventually

TOTAL = 1500
GROUP = "AtLeastOnceG"
TOPIC = "AtLeastOnceT"


class Deliveries:
    """Every delivery, per consumer instance: the body and the stored message it came from (broker, queue,
    queue offset), which identifies a message even if a timed-out send stored it twice."""

    def __init__(self) -> None:
        self.by_label: dict[str, list[tuple[str, tuple[str, int, int]]]] = defaultdict(list)

    def handler(self, label: str) -> Callable[[MessageExt], Awaitable[ConsumeResult]]:
        async def handle(msg: MessageExt) -> ConsumeResult:
            self.by_label[label].append((msg.body.decode(), (msg.broker_name, msg.queue_id, msg.queue_offset)))
            await asyncio.sleep(0)
            return ConsumeResult.SUCCESS

        return handle

    def bodies(self) -> set[str]:
        return {body for got in self.by_label.values() for body, _ in got}

    def stored(self, label: str) -> list[tuple[str, int, int]]:
        return [where for _, where in self.by_label[label]]

    def count(self, label: str) -> int:
        return len(self.by_label[label])


def consumer(c: Cluster, deliveries: Deliveries, label: str, name: str) -> PushConsumer:
    pc = PushConsumer(GROUP, namesrv_addr=c.namesrv_addr, instance_name=name, **FAST)
    pc.subscribe(TOPIC, "*")
    pc.register_handler(deliveries.handler(label))
    return pc


async def produce_steadily(c: Cluster, sent: list[str], stop_after: int) -> None:
    async with Producer("AtLeastOncePG", namesrv_addr=c.namesrv_addr, instance_name=instance_name("p"),
                        send_msg_timeout=10.0) as p:
        for i in range(stop_after):
            body = f"msg-{i}"
            await p.send(Message(TOPIC, body.encode()))
            sent.append(body)
            await asyncio.sleep(0.004)  # ~200 msg/s: the group changes while messages keep coming


async def test_every_message_at_least_once_while_the_group_changes(tmp_path: Path) -> None:
    async with cluster(tmp_path, ("broker-a", "broker-b")) as c:
        await create_topic(c, TOPIC, 4)
        deliveries = Deliveries()
        sent: list[str] = []
        a_name, b_name, c_name = instance_name("A"), instance_name("B"), instance_name("C")
        producing = asyncio.ensure_future(produce_steadily(c, sent, TOTAL))
        a = consumer(c, deliveries, "A", a_name)
        b = consumer(c, deliveries, "B", b_name)
        cc = consumer(c, deliveries, "C", c_name)
        a2 = consumer(c, deliveries, "A2", a_name)  # A again, same client id
        started: list[PushConsumer] = []
        try:
            await a.start()
            started.append(a)
            await eventually(lambda: deliveries.count("A") >= 100, timeout=20, message="A consuming")
            await b.start()
            started.append(b)
            await eventually(lambda: deliveries.count("B") >= 50, timeout=20, message="B consuming")
            await cc.start()
            started.append(cc)
            await eventually(lambda: deliveries.count("C") >= 50, timeout=20, message="C consuming")
            assert not producing.done(), "the producer finished too early for the test to mean anything"
            await a.shutdown()  # commits its offsets, unregisters: B and C take its queues at once
            await eventually(lambda: len(b.assigned_queues) + len(cc.assigned_queues) >= 10, timeout=20,
                             message="B and C own every queue")
            mark = deliveries.count("B") + deliveries.count("C")
            await eventually(lambda: deliveries.count("B") + deliveries.count("C") >= mark + 50, timeout=20,
                             message="B and C consuming A's share")
            await a2.start()
            started.append(a2)
            # A2 rejoining must take over a share of the queues; how many messages it then sees depends on
            # how much the producer has left to send, which a loaded machine makes unpredictable.
            await eventually(lambda: len(a2.assigned_queues) > 0, timeout=20, message="A2 owns queues")
            await asyncio.wait_for(producing, 60)
            await b.shutdown()
            await eventually(lambda: deliveries.bodies() >= set(sent), timeout=30, message="every message delivered")
        finally:
            producing.cancel()
            for pc in started:
                await pc.shutdown()
        assert len(sent) == TOTAL
        assert deliveries.bodies() == set(sent)
        for label in deliveries.by_label:
            repeated = [where for where, n in Counter(deliveries.stored(label)).items() if n > 1]
            assert not repeated, f"{label} consumed {len(repeated)} messages twice, e.g. {repeated[:5]}"
        stored = {where for label in deliveries.by_label for where in deliveries.stored(label)}
        total = sum(len(got) for got in deliveries.by_label.values())
        duplicates = total - len(stored)
        # Duplicates come only from hand-overs (4 changes of membership), each re-delivering at most what the
        # old owner consumed since its last commit (commits every 0.2 s here).
        assert duplicates <= TOTAL // 4, f"{duplicates} duplicates"


async def test_consumer_restarted_after_shutdown_resumes_exactly(tmp_path: Path) -> None:
    async with cluster(tmp_path, ("broker-a", "broker-b")) as c:
        await create_topic(c, TOPIC, 4)
        deliveries = Deliveries()
        name = instance_name("R")
        sent: list[str] = []
        await produce_steadily(c, sent, 100)
        first = consumer(c, deliveries, "first", name)
        async with first:
            await eventually(lambda: deliveries.count("first") == 100, timeout=20, message="first 100")
        await produce_steadily(c, sent, 100)  # bodies msg-0..99 again: count deliveries instead
        second = consumer(c, deliveries, "second", name)
        async with second:
            await eventually(lambda: len(second.assigned_queues) == 8 + 2 and caught_up(second, c, TOPIC),
                             timeout=20, message="second consumer at the end of every queue")
        assert deliveries.count("second") == 100
