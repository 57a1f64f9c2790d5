"""A push consumer reads a restarted master again within seconds, not at its next 30 s route poll.

Found by ``rmq-chaos`` (issue 14): producers asked for a fresh route as soon as a broker failed, consumers
waited for the poll, so the queues of a group whose master came back were not read for up to 30 s (and
longer before the next 20 s rebalance). The consumer here keeps RocketMQ's intervals (30 s route poll, 20 s
rebalance): only the route watch can bring broker-a back within the test's bound.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

from pocketmq.client import Message, MessageQueue, Producer
from tests.client.consumer.consumer_support import Recorder, cluster, create_topic, instance_name, push_consumer
from tests.cluster import start_broker
from tests.helpers import eventually

TOPIC = "RouteWatchT"
#: Far below the 30 s poll and the 20 s rebalance the consumer is left with.
BACK_WITHIN = 10.0


def to_a(queues: Sequence[MessageQueue], _msg: Message, _arg: object) -> MessageQueue:
    return next(q for q in queues if q.broker_name == "broker-a")


async def test_consumer_takes_a_restarted_master_back_without_waiting_for_the_route_poll(tmp_path: Path) -> None:
    async with cluster(tmp_path, ("broker-a", "broker-b")) as c:
        await create_topic(c, TOPIC, 2)
        rec = Recorder()
        consumer = push_consumer(c, "RouteWatchG", TOPIC, rec, poll_name_server_interval=30.0,
                                 rebalance_interval=20.0)
        async with consumer:
            await eventually(lambda: {q.broker_name for q in consumer.assigned_queues if q.topic == TOPIC}
                             == {"broker-a", "broker-b"}, timeout=10, message="both groups assigned")
            await c.brokers["broker-a"].stop(grace=0.5)
            await eventually(lambda: all(q.broker_name != "broker-a" for q in consumer.assigned_queues),
                             timeout=15, message="broker-a's queues given up after it left the route")

            c.brokers["broker-a"] = await start_broker(tmp_path, "broker-a", c.namesrv.addr)
            await create_topic(c, TOPIC, 2, brokers=["broker-a"])
            back_at = time.monotonic()
            async with Producer("RouteWatchPG", namesrv_addr=c.namesrv_addr, instance_name=instance_name("p"),
                                poll_name_server_interval=1.0) as producer:
                result = await producer.send(Message(TOPIC, b"after the restart"), selector=to_a, arg=None)
            assert result.message_queue.broker_name == "broker-a"
            await eventually(lambda: "after the restart" in rec.bodies, timeout=BACK_WITHIN, interval=0.1,
                             message="the restarted master's message consumed")
            took = time.monotonic() - back_at
    assert took < BACK_WITHIN
