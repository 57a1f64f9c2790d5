"""A client instance holding one route, for tests that need its broker tables without a name server."""

from __future__ import annotations

from pocketmq.client.core.config import ClientConfig
from pocketmq.client.core.instance import MQClientInstance
from pocketmq.remoting.route import BrokerData, QueueData, TopicRouteData


def instance_with(route: TopicRouteData) -> MQClientInstance:
    """An instance (not started) that holds ``route`` for topic ``T``."""
    instance = MQClientInstance(ClientConfig(namesrv_addrs=("127.0.0.1:1",), client_id="1.2.3.4@x"))
    instance.apply_route("T", route, from_default=False)
    return instance


def route(addrs: dict[int, str]) -> TopicRouteData:
    """Two queues of ``broker-a``, whose members are ``addrs`` (broker id → address)."""
    return TopicRouteData([QueueData("broker-a", 2, 2, 6)], [BrokerData("c", "broker-a", dict(addrs))])
