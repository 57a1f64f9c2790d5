"""A consumer's view of its group is the union of every broker's list (found by ``rmq-chaos``).

After a 2m-noslave master restart the two consumers of a group read broker-b's four queues both for 20 s
(11,000 duplicate deliveries in a 300 s run): the restarted broker knew only the consumer that had
heartbeated it since, a rebalance that asked it (one broker picked at random) took every queue, and the
other consumer kept its half. Here broker-a forgets one consumer, as a restarted broker would: every ask
must still see both.
"""

from __future__ import annotations

from pathlib import Path

from pocketmq.broker.controller import BrokerController
from tests.client.consumer.consumer_support import Recorder, cluster, create_topic, push_consumer
from tests.helpers import eventually

GROUP = "UnionG"
TOPIC = "UnionT"


async def test_a_broker_that_lost_a_member_does_not_shrink_the_group(tmp_path: Path) -> None:
    async with cluster(tmp_path, ("broker-a", "broker-b")) as c:
        await create_topic(c, TOPIC, 2)
        first = push_consumer(c, GROUP, TOPIC, Recorder(), rebalance_interval=20.0)
        second = push_consumer(c, GROUP, TOPIC, Recorder(), rebalance_interval=20.0)
        async with first, second:
            ids = sorted([first.instance.client_id, second.instance.client_id])
            broker_a, broker_b = c.brokers["broker-a"], c.brokers["broker-b"]

            def known(broker: BrokerController) -> list[str]:
                info = broker.clients.consumers.get(GROUP)
                return sorted(info.channels) if info is not None else []

            await eventually(lambda: known(broker_a) == ids and known(broker_b) == ids, timeout=10,
                             message="both consumers registered on both brokers")
            broker_a.clients.unregister(second.instance.client_id, None, GROUP)  # as if broker-a restarted
            assert known(broker_a) == [first.instance.client_id]
            for _ in range(12):  # the old code asked one broker at random: broker-a half of the time
                assert await first.api.consumer_id_list(TOPIC) == ids
