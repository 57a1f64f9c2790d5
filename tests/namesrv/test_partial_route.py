"""A name server that restarts empty (issue 14): brokers rejoin it within a second, and until they have, the
partial route it gives does not replace a client's complete one.

Real name servers and brokers in the test's event loop on 127.0.0.1, port 0; the restarted name server comes
back on its old port (the brokers and clients know it by address).
"""

from __future__ import annotations

import time
from pathlib import Path

from pocketmq.broker.controller import BrokerController
from pocketmq.client import Producer
from pocketmq.namesrv.config import NamesrvConfig
from pocketmq.namesrv.controller import NamesrvController
from pocketmq.remoting.route import TopicRouteData
from tests.client.producer.producer_support import ScriptedBroker
from tests.cluster import start_broker, start_namesrv
from tests.helpers import eventually

TOPIC = "PartialRouteTopic"


async def restart_empty(ns: NamesrvController, tmp: Path, name: str) -> NamesrvController:
    """Stop ``ns`` and start an empty one on its port."""
    port = int(ns.addr.rsplit(":", 1)[1])
    await ns.stop()
    fresh = NamesrvController(NamesrvConfig(listen_host="127.0.0.1", listen_port=port,
                                            kv_config_path=str(tmp / f"{name}-again" / "kvConfig.json")))
    await fresh.start()
    return fresh


def brokers_of(route: TopicRouteData | None) -> set[str]:
    return {b.broker_name for b in route.broker_datas} if route is not None else set()


async def test_brokers_rejoin_a_restarted_namesrv_within_a_second(tmp_path: Path) -> None:
    ns1, ns2 = await start_namesrv(tmp_path, "ns1"), await start_namesrv(tmp_path, "ns2")
    brokers: list[BrokerController] = []
    try:
        for name in ("broker-a", "broker-b"):
            brokers.append(await start_broker(tmp_path, name, f"{ns1.addr};{ns2.addr}"))
        assert all(b.config.register_name_server_period == 30000 for b in brokers)
        ns1 = await restart_empty(ns1, tmp_path, "ns1")
        restarted_at = time.monotonic()

        def rejoined() -> bool:
            return set(ns1.routes.broker_addr_table) == {"broker-a", "broker-b"}

        await eventually(rejoined, timeout=5, message="both brokers registered with the restarted name server")
        assert time.monotonic() - restarted_at < 3
    finally:
        for broker in brokers:
            await broker.stop()
        await ns1.stop()
        await ns2.stop()


async def test_a_partial_route_from_a_restarted_namesrv_keeps_the_brokers_another_one_lists(tmp_path: Path) -> None:
    ns1, ns2 = await start_namesrv(tmp_path, "ns1"), await start_namesrv(tmp_path, "ns2")
    a = await ScriptedBroker("broker-a", topics={TOPIC: 4}).start()
    b = await ScriptedBroker("broker-b", topics={TOPIC: 4}).start()
    try:
        await a.register(ns1.addr, ns2.addr)
        await b.register(ns1.addr, ns2.addr)
        async with Producer("partial-pg", namesrv_addr=[ns1.addr, ns2.addr]) as producer:
            refresher = producer.instance.refresher
            await refresher.refresh(TOPIC, 3.0, publish=False)
            assert brokers_of(producer.instance.routes.subscribe_route(TOPIC)) == {"broker-a", "broker-b"}
            ns1 = await restart_empty(ns1, tmp_path, "ns1")
            await b.register(ns1.addr)  # broker-b rejoined it, broker-a not yet
            refresher._ns_index = 0  # the client asks the restarted one first
            await refresher.refresh(TOPIC, 3.0, publish=False)
            assert refresher.current_namesrv == ns1.addr
            route = producer.instance.routes.subscribe_route(TOPIC)
            assert brokers_of(route) == {"broker-a", "broker-b"}
            assert route is not None and sum(q.read_queue_nums for q in route.queue_datas) == 8
            info = producer.publish_info(TOPIC)
            assert info is not None and {q.broker_name for q in info.message_queues} == {"broker-a", "broker-b"}
            # A broker that no name server lists any more goes at once.
            ns2 = await restart_empty(ns2, tmp_path, "ns2")
            await b.register(ns2.addr)
            await refresher.refresh(TOPIC, 3.0, publish=False)
            assert brokers_of(producer.instance.routes.subscribe_route(TOPIC)) == {"broker-b"}
    finally:
        await a.stop()
        await b.stop()
        await ns1.stop()
        await ns2.stop()
