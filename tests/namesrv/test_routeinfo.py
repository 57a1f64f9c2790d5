"""RouteInfoManager: registration rules of reference §3.2 and cleanup rules of §6, with an injected clock."""

from __future__ import annotations

import pytest

from pocketmq.common.topic_config import DataVersion, TopicConfig
from pocketmq.namesrv.routeinfo import BrokerLiveInfo, RegisterBrokerResult, RouteInfoManager
from pocketmq.remoting.errors import InvalidHeaderError
from pocketmq.remoting.route import BrokerData, ClusterInfo, QueueData, TopicConfigSerializeWrapper, TopicRouteData

CLUSTER = "DefaultCluster"
A_MASTER, A_SLAVE = "10.0.0.1:10911", "10.0.0.2:10911"
B_MASTER, B_SLAVE = "10.0.0.3:10911", "10.0.0.4:10911"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Channel:
    """Stands in for a connection; the manager only compares channels by identity."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __eq__(self, other: object) -> bool:  # equal to every Channel: identity must be what counts
        return isinstance(other, Channel)

    __hash__ = object.__hash__


def names(channels: list[object]) -> list[str]:
    return [c.name for c in channels if isinstance(c, Channel)]


def wrapper(counter: int, **topics: int) -> TopicConfigSerializeWrapper:
    """Topics given as name=queue count; perm 6."""
    configs = {name: TopicConfig(name, nums, nums, 6) for name, nums in topics.items()}
    return TopicConfigSerializeWrapper(configs, DataVersion(counter, 1690000000000 + counter))


class Cluster:
    """Two broker groups, each a master and a slave, registered over their own channels."""

    def __init__(self) -> None:
        self.clock = Clock()
        self.mgr = RouteInfoManager(clock=self.clock)
        self.channels = {addr: Channel(addr) for addr in (A_MASTER, A_SLAVE, B_MASTER, B_SLAVE)}

    def register(
        self,
        name: str,
        addr: str,
        broker_id: int,
        topics: TopicConfigSerializeWrapper | None,
        cluster: str = CLUSTER,
    ) -> RegisterBrokerResult:
        ha = addr.replace(":10911", ":10912")
        channel = self.channels.setdefault(addr, Channel(addr))
        return self.mgr.register_broker(cluster, addr, name, broker_id, ha, topics, [], channel)

    def start_all(self) -> None:
        self.register("broker-a", A_MASTER, 0, wrapper(1, T=4, TBW102=8))
        self.register("broker-a", A_SLAVE, 1, wrapper(1, T=4, TBW102=8))
        self.register("broker-b", B_MASTER, 0, wrapper(1, T=2, OnlyB=1))
        self.register("broker-b", B_SLAVE, 1, wrapper(1, T=2, OnlyB=1))


@pytest.fixture
def cluster() -> Cluster:
    c = Cluster()
    c.start_all()
    return c


def test_route_of_two_groups_with_masters_and_slaves(cluster: Cluster) -> None:
    route = cluster.mgr.pickup_topic_route_data("T")
    assert route == TopicRouteData(
        queue_datas=[QueueData("broker-a", 4, 4, 6, 0), QueueData("broker-b", 2, 2, 6, 0)],
        broker_datas=[
            BrokerData(CLUSTER, "broker-a", {0: A_MASTER, 1: A_SLAVE}),
            BrokerData(CLUSTER, "broker-b", {0: B_MASTER, 1: B_SLAVE}),
        ],
        order_topic_conf=None,
        filter_server_table={},
    )
    only_b = cluster.mgr.pickup_topic_route_data("OnlyB")
    assert only_b is not None
    assert [b.broker_name for b in only_b.broker_datas] == ["broker-b"]
    assert cluster.mgr.pickup_topic_route_data("Unknown") is None


def test_route_is_a_copy(cluster: Cluster) -> None:
    route = cluster.mgr.pickup_topic_route_data("T")
    assert route is not None
    route.broker_datas[0].broker_addrs.clear()
    route.queue_datas[0].perm = 0
    again = cluster.mgr.pickup_topic_route_data("T")
    assert again is not None
    assert again.broker_datas[0].broker_addrs == {0: A_MASTER, 1: A_SLAVE}
    assert again.queue_datas[0].perm == 6


def test_slave_gets_live_master_and_its_ha_address() -> None:
    c = Cluster()
    # Before the master registers, a slave learns nothing.
    assert c.register("broker-a", A_SLAVE, 1, wrapper(1, T=4)) == RegisterBrokerResult(None, None)
    assert c.register("broker-a", A_MASTER, 0, wrapper(1, T=4)) == RegisterBrokerResult(None, None)
    assert c.register("broker-a", A_SLAVE, 1, wrapper(1, T=4)) == RegisterBrokerResult(
        ha_server_addr="10.0.0.1:10912", master_addr=A_MASTER
    )


def test_slave_of_a_dead_master_gets_nothing(cluster: Cluster) -> None:
    cluster.mgr.on_channel_destroy(cluster.channels[A_MASTER])
    assert cluster.register("broker-a", A_SLAVE, 1, None) == RegisterBrokerResult(None, None)


def test_topic_data_only_from_masters() -> None:
    c = Cluster()
    c.register("broker-a", A_SLAVE, 1, wrapper(1, SlaveTopic=4))
    assert c.mgr.get_all_topic_list() == []
    assert c.mgr.pickup_topic_route_data("SlaveTopic") is None
    # The slave's group exists, without any topic.
    assert c.mgr.get_all_cluster_info().broker_addr_table["broker-a"].broker_addrs == {1: A_SLAVE}


def test_topic_data_updated_only_when_data_version_changes() -> None:
    c = Cluster()
    c.register("broker-a", A_MASTER, 0, wrapper(1, T=4))
    # Same version, different content: ignored (the broker did not announce a change).
    c.register("broker-a", A_MASTER, 0, wrapper(1, T=8, New=1))
    assert c.mgr.get_all_topic_list() == ["T"]
    route = c.mgr.pickup_topic_route_data("T")
    assert route is not None and route.queue_datas[0].write_queue_nums == 4
    # New version: applied.
    c.register("broker-a", A_MASTER, 0, wrapper(2, T=8, New=1))
    assert c.mgr.get_all_topic_list() == ["New", "T"]
    route = c.mgr.pickup_topic_route_data("T")
    assert route is not None and route.queue_datas[0].write_queue_nums == 8


def test_data_version_queries(cluster: Cluster) -> None:
    mgr = cluster.mgr
    assert mgr.query_broker_topic_config(A_MASTER) == DataVersion(1, 1690000000001)
    assert not mgr.is_broker_topic_config_changed(A_MASTER, DataVersion(1, 1690000000001))
    assert mgr.is_broker_topic_config_changed(A_MASTER, DataVersion(2, 1690000000001))
    assert mgr.is_broker_topic_config_changed("10.9.9.9:1", DataVersion(1, 1690000000001))
    assert mgr.query_broker_topic_config("10.9.9.9:1") is None
    # The stored version is a copy: advancing the broker's object changes nothing here.
    topics = wrapper(5, T=4)
    cluster.register("broker-a", A_MASTER, 0, topics)
    topics.data_version.next_version()
    assert mgr.query_broker_topic_config(A_MASTER) == DataVersion(5, 1690000000005)


def test_registration_without_body_keeps_topics_and_records_version_zero(cluster: Cluster) -> None:
    cluster.register("broker-a", A_MASTER, 0, None)
    assert cluster.mgr.query_broker_topic_config(A_MASTER) == DataVersion(0, 0)
    assert "TBW102" in cluster.mgr.get_all_topic_list()


def test_unregister_master_keeps_group_with_slave(cluster: Cluster) -> None:
    cluster.mgr.unregister_broker(CLUSTER, A_MASTER, "broker-a", 0)
    route = cluster.mgr.pickup_topic_route_data("T")
    assert route is not None
    assert {b.broker_name: b.broker_addrs for b in route.broker_datas} == {
        "broker-a": {1: A_SLAVE},
        "broker-b": {0: B_MASTER, 1: B_SLAVE},
    }
    assert A_MASTER not in cluster.mgr.broker_live_table


def test_unregistering_a_whole_group_removes_it_everywhere(cluster: Cluster) -> None:
    mgr = cluster.mgr
    mgr.unregister_broker(CLUSTER, A_SLAVE, "broker-a", 1)
    mgr.unregister_broker(CLUSTER, A_MASTER, "broker-a", 0)
    route = mgr.pickup_topic_route_data("T")
    assert route is not None
    assert [b.broker_name for b in route.broker_datas] == ["broker-b"]
    assert [q.broker_name for q in route.queue_datas] == ["broker-b"]
    # TBW102 lived only on broker-a: gone.
    assert mgr.pickup_topic_route_data("TBW102") is None
    assert mgr.get_all_topic_list() == ["OnlyB", "T"]
    assert mgr.cluster_addr_table == {CLUSTER: {"broker-b"}}
    assert "broker-a" not in mgr.broker_addr_table


def test_last_group_gone_drops_the_cluster(cluster: Cluster) -> None:
    for name, addr, broker_id in [
        ("broker-a", A_MASTER, 0),
        ("broker-a", A_SLAVE, 1),
        ("broker-b", B_MASTER, 0),
        ("broker-b", B_SLAVE, 1),
    ]:
        cluster.mgr.unregister_broker(CLUSTER, addr, name, broker_id)
    assert cluster.mgr.get_all_cluster_info() == ClusterInfo({}, {})
    assert cluster.mgr.get_all_topic_list() == []
    assert cluster.mgr.broker_live_table == {}


def test_unregister_with_stale_address_keeps_the_new_broker(cluster: Cluster) -> None:
    cluster.register("broker-a", "10.0.0.9:10911", 0, wrapper(1, T=4))  # master replaced
    cluster.mgr.unregister_broker(CLUSTER, A_MASTER, "broker-a", 0)
    assert cluster.mgr.broker_addr_table["broker-a"].broker_addrs == {0: "10.0.0.9:10911", 1: A_SLAVE}


def test_unregister_unknown_broker_is_harmless(cluster: Cluster) -> None:
    cluster.mgr.unregister_broker(CLUSTER, "10.9.9.9:1", "nobody", 0)
    assert cluster.mgr.pickup_topic_route_data("T") is not None


def test_channel_destroy_removes_that_broker_only(cluster: Cluster) -> None:
    mgr = cluster.mgr
    assert mgr.on_channel_destroy(cluster.channels[B_MASTER]) == [B_MASTER]
    assert mgr.broker_addr_table["broker-b"].broker_addrs == {1: B_SLAVE}
    assert mgr.on_channel_destroy(cluster.channels[B_SLAVE]) == [B_SLAVE]
    assert "broker-b" not in mgr.broker_addr_table
    assert mgr.pickup_topic_route_data("OnlyB") is None
    route = mgr.pickup_topic_route_data("T")
    assert route is not None and [b.broker_name for b in route.broker_datas] == ["broker-a"]


def test_channel_destroy_matches_by_identity(cluster: Cluster) -> None:
    stranger = Channel(A_MASTER)  # equal to every Channel, but not the broker's channel
    assert cluster.mgr.on_channel_destroy(stranger) == []
    assert cluster.mgr.on_channel_destroy(None) == []
    assert len(cluster.mgr.broker_live_table) == 4


def test_expiry_scan_with_injected_clock(cluster: Cluster) -> None:
    mgr, clock = cluster.mgr, cluster.clock
    clock.now += 60
    cluster.register("broker-b", B_MASTER, 0, wrapper(1, T=2, OnlyB=1))
    mgr.update_broker_info_update_timestamp(B_SLAVE)  # e.g. a QUERY_DATA_VERSION
    clock.now += 61  # broker-a silent for 121 s, broker-b for 61 s
    closed = mgr.scan_not_active_broker(clock.now, 120)
    assert names(closed) == [A_MASTER, A_SLAVE]
    assert set(mgr.broker_live_table) == {B_MASTER, B_SLAVE}
    assert "broker-a" not in mgr.broker_addr_table
    assert mgr.pickup_topic_route_data("TBW102") is None
    # Nothing else is due until broker-b has been silent for the whole period.
    assert mgr.scan_not_active_broker(clock.now + 59, 120) == []
    assert names(mgr.scan_not_active_broker(clock.now + 59.5, 60)) == [B_MASTER, B_SLAVE]
    assert mgr.get_all_cluster_info() == ClusterInfo({}, {})


def test_expiry_scan_defaults_to_the_clock() -> None:
    c = Cluster()
    c.register("broker-a", A_MASTER, 0, wrapper(1, T=4))
    c.clock.now += 120
    assert c.mgr.scan_not_active_broker() == []  # exactly 120 s is not yet expired
    c.clock.now += 0.001
    [closed] = c.mgr.scan_not_active_broker()
    assert closed is c.channels[A_MASTER]


def test_expiry_of_broker_without_channel_returns_nothing_to_close() -> None:
    mgr = RouteInfoManager(clock=lambda: 0.0)
    mgr.register_broker(CLUSTER, A_MASTER, "broker-a", 0, "", wrapper(1, T=1), None, None)
    assert mgr.scan_not_active_broker(1000.0, 1.0) == []
    assert mgr.broker_live_table == {}


def test_slave_switched_to_master_replaces_its_old_id(cluster: Cluster) -> None:
    mgr = cluster.mgr
    mgr.on_channel_destroy(cluster.channels[A_MASTER])
    # The slave comes back as master (same address, id 0), announcing a topic it now serves.
    result = cluster.register("broker-a", A_SLAVE, 0, wrapper(1, T=4, TBW102=8, Promoted=2))
    assert result == RegisterBrokerResult(None, None)
    assert mgr.broker_addr_table["broker-a"].broker_addrs == {0: A_SLAVE}
    # First registration under id 0 counts as new: its topics are taken although the version is the same.
    route = mgr.pickup_topic_route_data("Promoted")
    assert route is not None and route.broker_datas[0].master_addr() == A_SLAVE
    # And back again.
    cluster.register("broker-a", A_SLAVE, 1, wrapper(1, T=4))
    assert mgr.broker_addr_table["broker-a"].broker_addrs == {1: A_SLAVE}


def test_delete_topic(cluster: Cluster) -> None:
    assert cluster.mgr.delete_topic("T")
    assert not cluster.mgr.delete_topic("T")
    assert cluster.mgr.pickup_topic_route_data("T") is None
    assert cluster.mgr.get_all_topic_list() == ["OnlyB", "TBW102"]
    # A broker re-registering with a new version brings it back.
    cluster.register("broker-a", A_MASTER, 0, wrapper(2, T=4))
    assert "T" in cluster.mgr.get_all_topic_list()


def test_cluster_info_is_a_copy(cluster: Cluster) -> None:
    info = cluster.mgr.get_all_cluster_info()
    assert info.cluster_addr_table == {CLUSTER: {"broker-a", "broker-b"}}
    assert info.broker_addr_table["broker-b"] == BrokerData(CLUSTER, "broker-b", {0: B_MASTER, 1: B_SLAVE})
    info.cluster_addr_table[CLUSTER].clear()
    info.broker_addr_table["broker-b"].broker_addrs.clear()
    assert cluster.mgr.get_all_cluster_info().cluster_addr_table == {CLUSTER: {"broker-a", "broker-b"}}
    assert cluster.mgr.broker_addr_table["broker-b"].broker_addrs == {0: B_MASTER, 1: B_SLAVE}


def test_topics_by_cluster() -> None:
    c = Cluster()
    c.register("broker-a", A_MASTER, 0, wrapper(1, T=4, OnlyA=1))
    c.register("broker-b", B_MASTER, 0, wrapper(1, T=2, OnlyB=1), cluster="Other")
    assert c.mgr.get_topics_by_cluster(CLUSTER) == ["OnlyA", "T"]
    assert c.mgr.get_topics_by_cluster("Other") == ["OnlyB", "T"]
    assert c.mgr.get_topics_by_cluster("Nope") == []
    assert c.mgr.get_all_topic_list() == ["OnlyA", "OnlyB", "T"]


def test_filter_servers_appear_in_route_and_go_with_the_broker() -> None:
    mgr = RouteInfoManager(clock=lambda: 0.0)
    channel = Channel("a")
    mgr.register_broker(CLUSTER, A_MASTER, "broker-a", 0, "", wrapper(1, T=1), ["10.0.0.7:4000"], channel)
    route = mgr.pickup_topic_route_data("T")
    assert route is not None and route.filter_server_table == {A_MASTER: ["10.0.0.7:4000"]}
    mgr.register_broker(CLUSTER, A_MASTER, "broker-a", 0, "", wrapper(1, T=1), [], channel)
    assert mgr.filter_server_table == {}
    mgr.register_broker(CLUSTER, A_MASTER, "broker-a", 0, "", wrapper(1, T=1), ["10.0.0.7:4000"], channel)
    mgr.on_channel_destroy(channel)
    assert mgr.filter_server_table == {}


def test_live_info_records_registration(cluster: Cluster) -> None:
    info = cluster.mgr.broker_live_table[A_SLAVE]
    assert isinstance(info, BrokerLiveInfo)
    assert info.channel is cluster.channels[A_SLAVE]
    assert info.ha_server_addr == "10.0.0.2:10912"
    assert info.last_update_monotonic == 1000.0


@pytest.mark.parametrize(
    ("cluster_name", "addr", "name", "broker_id", "ha"),
    [
        ("", A_MASTER, "broker-a", 0, ""),
        (CLUSTER, "", "broker-a", 0, ""),
        (CLUSTER, A_MASTER, "", 0, ""),
        (CLUSTER, A_MASTER, "broker-a", -1, ""),
        (CLUSTER, A_MASTER, "broker-a", True, ""),
        (CLUSTER, A_MASTER, "x" * 256, 0, ""),
        (CLUSTER, A_MASTER, "broker-a", 0, None),
        (CLUSTER, A_MASTER, 7, 0, ""),
    ],
)
def test_register_refuses_absurd_input(
    cluster_name: str, addr: str, name: str, broker_id: int, ha: str
) -> None:
    mgr = RouteInfoManager()
    with pytest.raises(InvalidHeaderError):
        mgr.register_broker(cluster_name, addr, name, broker_id, ha, wrapper(1, T=1), [], None)
    assert mgr.get_all_cluster_info() == ClusterInfo({}, {})


def test_register_refuses_bad_topic_names_without_partial_update() -> None:
    mgr = RouteInfoManager()
    bad = TopicConfigSerializeWrapper(
        {"ok": TopicConfig("ok"), "": TopicConfig(""), "long": TopicConfig("t" * 300)}, DataVersion(1, 1)
    )
    with pytest.raises(InvalidHeaderError):
        mgr.register_broker(CLUSTER, A_MASTER, "broker-a", 0, "", bad, [], None)
    assert mgr.get_all_topic_list() == []
    assert mgr.broker_live_table == {}


def test_controller_mode_lists_only_the_master_of_the_highest_epoch() -> None:
    """brokerId 0 belongs to the newest epoch: an old master still registering (replaced, not aware yet) is not
    listed, and the new one replaces it at once."""
    mgr = RouteInfoManager(clock=Clock())
    topics = wrapper(1, T=4)
    old, new = Channel("old"), Channel("new")
    mgr.register_broker(CLUSTER, A_MASTER, "broker-a", 0, "", topics, [], old, master_epoch=1)
    mgr.register_broker(CLUSTER, A_SLAVE, "broker-a", 2, "", topics, [], new, master_epoch=1)
    mgr.register_broker(CLUSTER, A_SLAVE, "broker-a", 0, "", topics, [], new, master_epoch=2)
    assert mgr.broker_addr_table["broker-a"].broker_addrs == {0: A_SLAVE}
    stale = mgr.register_broker(CLUSTER, A_MASTER, "broker-a", 0, "", topics, [], old, master_epoch=1)
    assert stale == RegisterBrokerResult()
    assert mgr.broker_addr_table["broker-a"].broker_addrs == {0: A_SLAVE}
    mgr.register_broker(CLUSTER, A_MASTER, "broker-a", 1, "", topics, [], old, master_epoch=2)
    assert mgr.broker_addr_table["broker-a"].broker_addrs == {0: A_SLAVE, 1: A_MASTER}
    route = mgr.pickup_topic_route_data("T")
    assert route is not None and route.broker_datas[0].broker_addrs[0] == A_SLAVE
