"""``RouteInfoManager``: the name server's routing tables and the rules that change them.

Tables (the same five as RocketMQ's)::

    topic_queue_table    topic      -> {brokerName -> QueueData}
    broker_addr_table    brokerName -> BrokerData(cluster, brokerName, {brokerId -> addr})
    cluster_addr_table   cluster    -> {brokerName}
    broker_live_table    brokerAddr -> BrokerLiveInfo(last update, DataVersion, channel, HA address)
    filter_server_table  brokerAddr -> [filter server addr]

Invariants kept by every method: no empty topic map, no ``BrokerData`` without an address, no empty
cluster set. Nothing here does I/O or awaits, so each call runs to completion on the event loop and needs
no lock; time comes from an injectable monotonic clock. Values handed out are copies, never the table's
own objects (a caller mutating a route must not change the name server's state).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from pocketmq.common.topic_config import DataVersion, PermName, TopicConfig
from pocketmq.remoting.errors import InvalidHeaderError
from pocketmq.remoting.route import (
    MASTER_ID,
    BrokerData,
    ClusterInfo,
    QueueData,
    TopicConfigSerializeWrapper,
    TopicRouteData,
)

__all__ = [
    "BROKER_CHANNEL_EXPIRED_SECONDS",
    "MAX_NAME_LENGTH",
    "BrokerLiveInfo",
    "RegisterBrokerResult",
    "RouteInfoManager",
]

#: A broker not heard from for this long is dropped (``BROKER_CHANNEL_EXPIRED_TIME``, 120 s).
BROKER_CHANNEL_EXPIRED_SECONDS = 120.0

#: Longest cluster name, broker name, address or topic accepted. RocketMQ limits topics to 127 characters
#: and names are far shorter in practice; the bound keeps one request from parking megabytes in the tables.
MAX_NAME_LENGTH = 255


@dataclass(slots=True, eq=False)
class BrokerLiveInfo:
    """What the name server knows about one registered broker address.

    ``channel`` is whatever the server uses for the broker's connection; it is only compared by identity.
    """

    last_update_monotonic: float
    data_version: DataVersion
    channel: object
    ha_server_addr: str


@dataclass(frozen=True, slots=True)
class RegisterBrokerResult:
    """Answer to a registration: for a slave, its live master's HA and broker address; else None/None."""

    ha_server_addr: str | None = None
    master_addr: str | None = None


def _check_name(value: object, what: str, *, allow_empty: bool = False) -> str:
    if not isinstance(value, str):
        raise InvalidHeaderError(f"{what} must be a string, got {type(value).__name__}")
    if not value and not allow_empty:
        raise InvalidHeaderError(f"{what} must not be empty")
    if len(value) > MAX_NAME_LENGTH:
        raise InvalidHeaderError(f"{what} longer than {MAX_NAME_LENGTH} characters")
    return value


def _check_broker_id(value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise InvalidHeaderError(f"brokerId must be a non-negative integer, got {value!r:.40}")
    return value


class RouteInfoManager:
    """The name server's routing state. Synchronous and pure: the request processors call it."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self.topic_queue_table: dict[str, dict[str, QueueData]] = {}
        self.broker_addr_table: dict[str, BrokerData] = {}
        self.cluster_addr_table: dict[str, set[str]] = {}
        self.broker_live_table: dict[str, BrokerLiveInfo] = {}
        self.filter_server_table: dict[str, list[str]] = {}

    # -- registration --------------------------------------------------------------------------------

    def register_broker(
        self,
        cluster: str,
        broker_addr: str,
        broker_name: str,
        broker_id: int,
        ha_server_addr: str,
        topic_config_wrapper: TopicConfigSerializeWrapper | None,
        filter_server_list: list[str] | None,
        channel: object,
    ) -> RegisterBrokerResult:
        """Record a broker's (re-)registration and, for a master, its topics."""
        _check_name(cluster, "clusterName")
        _check_name(broker_addr, "brokerAddr")
        _check_name(broker_name, "brokerName")
        _check_broker_id(broker_id)
        _check_name(ha_server_addr, "haServerAddr", allow_empty=True)
        filter_servers = [_check_name(s, "filterServer") for s in filter_server_list or ()]
        data_version = topic_config_wrapper.data_version if topic_config_wrapper else DataVersion()
        # Topic data comes only from masters, and only when it may have changed.
        take_topics = topic_config_wrapper is not None and self.needs_topic_config(
            broker_name, broker_id, broker_addr, data_version)
        if topic_config_wrapper is not None and take_topics:
            for topic_config in topic_config_wrapper.topic_config_table.values():
                _check_name(topic_config.topic_name, "topicName")

        self.cluster_addr_table.setdefault(cluster, set()).add(broker_name)
        self._put_broker_addr(cluster, broker_name, broker_id, broker_addr)
        if topic_config_wrapper is not None and take_topics:
            for topic_config in topic_config_wrapper.topic_config_table.values():
                self._update_queue_data(broker_name, topic_config)

        self.broker_live_table[broker_addr] = BrokerLiveInfo(
            self._clock(), data_version.copy(), channel, ha_server_addr
        )
        if filter_server_list is not None:
            if filter_servers:
                self.filter_server_table[broker_addr] = filter_servers
            else:
                self.filter_server_table.pop(broker_addr, None)
        return self._master_of(broker_name) if broker_id != MASTER_ID else RegisterBrokerResult()

    def needs_topic_config(self, broker_name: str, broker_id: int, broker_addr: str, data_version: DataVersion) -> bool:
        """True when a registration of ``broker_addr`` with ``data_version`` would update routes: it comes from a
        master that is new (or new in its id) or whose topic table version moved. A processor may skip decoding the
        topics of a registration for which this is False."""
        if broker_id != MASTER_ID:
            return False
        broker_data = self.broker_addr_table.get(broker_name)
        if broker_data is None or broker_id not in broker_data.broker_addrs:
            return True
        return self.is_broker_topic_config_changed(broker_addr, data_version)

    def _put_broker_addr(self, cluster: str, broker_name: str, broker_id: int, broker_addr: str) -> bool:
        """Add ``broker_id -> broker_addr`` to the group; True when the group or the id was new."""
        broker_data = self.broker_addr_table.get(broker_name)
        first = broker_data is None
        if broker_data is None:
            broker_data = BrokerData(cluster, broker_name, {})
            self.broker_addr_table[broker_name] = broker_data
        addrs = broker_data.broker_addrs
        # One address has one id: a slave switched to master (or back) loses its old entry first.
        for stale_id in [i for i, addr in addrs.items() if addr == broker_addr and i != broker_id]:
            del addrs[stale_id]
        previous = addrs.get(broker_id)
        addrs[broker_id] = broker_addr
        return first or previous is None

    def _update_queue_data(self, broker_name: str, topic_config: TopicConfig) -> None:
        queue_data = QueueData(
            broker_name=broker_name,
            read_queue_nums=topic_config.read_queue_nums,
            write_queue_nums=topic_config.write_queue_nums,
            perm=topic_config.perm,
            topic_sys_flag=topic_config.topic_sys_flag,
        )
        self.topic_queue_table.setdefault(topic_config.topic_name, {})[broker_name] = queue_data

    def _master_of(self, broker_name: str) -> RegisterBrokerResult:
        master_addr = self.broker_addr_table[broker_name].master_addr()
        if master_addr is None:
            return RegisterBrokerResult()
        master = self.broker_live_table.get(master_addr)
        if master is None:
            return RegisterBrokerResult()
        return RegisterBrokerResult(ha_server_addr=master.ha_server_addr, master_addr=master_addr)

    # -- versions and liveness -------------------------------------------------------------------------

    def is_broker_topic_config_changed(self, broker_addr: str, data_version: DataVersion) -> bool:
        """True unless the broker is registered with exactly this DataVersion."""
        known = self.broker_live_table.get(broker_addr)
        return known is None or known.data_version != data_version

    def query_broker_topic_config(self, broker_addr: str) -> DataVersion | None:
        """The DataVersion a broker last registered with (a copy), or None if it is not live."""
        known = self.broker_live_table.get(broker_addr)
        return None if known is None else known.data_version.copy()

    def update_broker_info_update_timestamp(self, broker_addr: str, now: float | None = None) -> None:
        """Mark a broker as heard from (QUERY_DATA_VERSION counts as a sign of life)."""
        known = self.broker_live_table.get(broker_addr)
        if known is not None:
            known.last_update_monotonic = self._clock() if now is None else now

    def scan_not_active_broker(
        self, now: float | None = None, expire_after: float = BROKER_CHANNEL_EXPIRED_SECONDS
    ) -> list[object]:
        """Drop brokers silent for longer than ``expire_after`` seconds; return their channels to close."""
        now = self._clock() if now is None else now
        expired = [
            addr
            for addr, info in self.broker_live_table.items()
            if info.last_update_monotonic + expire_after < now
        ]
        channels: list[object] = []
        for addr in expired:
            channel = self.broker_live_table[addr].channel
            self._remove_broker_addr(addr)
            if channel is not None:
                channels.append(channel)
        return channels

    # -- removal ---------------------------------------------------------------------------------------

    def unregister_broker(self, cluster: str, broker_addr: str, broker_name: str, broker_id: int) -> None:
        """A broker's orderly goodbye (UNREGISTER_BROKER).

        The id entry is removed only while it still maps to ``broker_addr``, so a late unregister from an
        old address cannot take out the broker that has since registered under the same id.
        """
        self.broker_live_table.pop(broker_addr, None)
        self.filter_server_table.pop(broker_addr, None)
        broker_data = self.broker_addr_table.get(broker_name)
        if broker_data is None:
            return
        if broker_data.broker_addrs.get(broker_id) == broker_addr:
            del broker_data.broker_addrs[broker_id]
        if not broker_data.broker_addrs:
            self._remove_broker_name(broker_name, [cluster, broker_data.cluster])

    def on_channel_destroy(self, channel: object) -> list[str]:
        """The connection ``channel`` closed: drop the brokers registered over it; return their addresses."""
        if channel is None:
            return []
        addrs = [addr for addr, info in self.broker_live_table.items() if info.channel is channel]
        for addr in addrs:
            self._remove_broker_addr(addr)
        return addrs

    def _remove_broker_addr(self, broker_addr: str) -> None:
        """Forget an address everywhere; broker groups left without addresses disappear."""
        self.broker_live_table.pop(broker_addr, None)
        self.filter_server_table.pop(broker_addr, None)
        emptied: list[BrokerData] = []
        for broker_data in self.broker_addr_table.values():
            addrs = broker_data.broker_addrs
            for broker_id in [i for i, addr in addrs.items() if addr == broker_addr]:
                del addrs[broker_id]
            if not addrs:
                emptied.append(broker_data)
        for broker_data in emptied:
            self._remove_broker_name(broker_data.broker_name, [broker_data.cluster])

    def _remove_broker_name(self, broker_name: str, clusters: Iterable[str]) -> None:
        """Remove an empty broker group from its cluster(s) and every topic."""
        self.broker_addr_table.pop(broker_name, None)
        for cluster in clusters:
            names = self.cluster_addr_table.get(cluster)
            if names is not None:
                names.discard(broker_name)
                if not names:
                    del self.cluster_addr_table[cluster]
        for topic in list(self.topic_queue_table):
            queues = self.topic_queue_table[topic]
            queues.pop(broker_name, None)
            if not queues:
                del self.topic_queue_table[topic]

    def delete_topic(self, topic: str) -> bool:
        """DELETE_TOPIC_IN_NAMESRV; True if the topic was known."""
        return self.topic_queue_table.pop(topic, None) is not None

    # -- queries ---------------------------------------------------------------------------------------

    def pickup_topic_route_data(self, topic: str) -> TopicRouteData | None:
        """The route of ``topic`` (copies), or None unless it has queue data and a live broker group."""
        queues = self.topic_queue_table.get(topic)
        if not queues:
            return None
        broker_datas: list[BrokerData] = []
        filter_servers: dict[str, list[str]] = {}
        for broker_name in sorted(queues):
            broker_data = self.broker_addr_table.get(broker_name)
            if broker_data is None:
                continue
            broker_datas.append(broker_data.copy())
            for addr in broker_data.broker_addrs.values():
                servers = self.filter_server_table.get(addr)
                if servers:
                    filter_servers[addr] = list(servers)
        if not broker_datas:
            return None
        queue_datas = [queues[name].copy() for name in sorted(queues)]
        return TopicRouteData(queue_datas, broker_datas, filter_server_table=filter_servers)

    def get_all_cluster_info(self) -> ClusterInfo:
        """GET_BROKER_CLUSTER_INFO: every broker group and cluster (copies)."""
        return ClusterInfo(
            broker_addr_table={name: bd.copy() for name, bd in self.broker_addr_table.items()},
            cluster_addr_table={cluster: set(names) for cluster, names in self.cluster_addr_table.items()},
        )

    def set_write_perm(self, broker_name: str, *, writable: bool) -> int:
        """Take PERM_WRITE off (or put it on) every topic of ``broker_name``; returns the topics changed."""
        count = 0
        for queues in self.topic_queue_table.values():
            queue_data = queues.get(broker_name)
            if queue_data is None:
                continue
            perm = queue_data.perm | PermName.PERM_WRITE if writable else queue_data.perm & ~PermName.PERM_WRITE
            if perm != queue_data.perm:
                queue_data.perm = perm
                count += 1
        return count

    def get_all_topic_list(self) -> list[str]:
        return sorted(self.topic_queue_table)

    def get_topics_by_cluster(self, cluster: str) -> list[str]:
        """Topics with queues on at least one broker group of ``cluster``."""
        names = self.cluster_addr_table.get(cluster, set())
        return sorted(
            topic for topic, queues in self.topic_queue_table.items() if not names.isdisjoint(queues)
        )
