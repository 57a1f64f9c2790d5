"""Route builders shared by the selection tests."""

from __future__ import annotations

from pocketmq.remoting.route import MASTER_ID, BrokerData, QueueData, TopicRouteData

RW = 6


def route(
    *brokers: tuple[str, int],
    perm: int = RW,
    slave_only: frozenset[str] = frozenset(),
    order_topic_conf: str | None = None,
) -> TopicRouteData:
    """A route with one queue data per ``(broker name, queue nums)`` and a master for each, unless the
    name is in ``slave_only``."""
    queue_datas = [QueueData(name, nums, nums, perm) for name, nums in brokers]
    broker_datas = []
    for index, (name, _) in enumerate(brokers):
        addrs = {1: f"10.0.1.{index}:10911"} if name in slave_only else {MASTER_ID: f"10.0.0.{index}:10911"}
        broker_datas.append(BrokerData("DefaultCluster", name, addrs))
    return TopicRouteData(queue_datas, broker_datas, order_topic_conf)
