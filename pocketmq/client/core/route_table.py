"""The topic routes a client instance holds and the broker tables derived from them (no I/O).

* ``route_table``: topic → :class:`~pocketmq.remoting.route.TopicRouteData` as last applied, at most :data:`MAX_TOPICS`
  (beyond it the topic held longest is forgotten, and looked up again if it is used again). A route equal to
  the one held (other than in list order, :func:`route_changed`) changes nothing. Route objects are never
  changed in place: a new route gives new objects.
* ``master_table``: broker name → master address, and ``broker_addr_table``: broker name → broker id →
  address (slaves included). A route just applied is the freshest word on its brokers, so its broker groups
  replace what was held for them; after each poll both tables are rebuilt from every route held, which drops
  brokers no route names any more.
* Routes derived from ``TBW102`` (:func:`default_route_for_topic`, for a topic that does not exist yet, so that
  the first send auto-creates it) are marked: producers send on them, consumers ignore them
  (:meth:`RouteTable.subscribe_route`).

Consumers find the member of a broker group to ask here (:meth:`RouteTable.find_broker_address_in_subscribe`,
Java's ``findBrokerAddressInSubscribe``): they follow the broker's ``suggestWhichBrokerId`` and fall back to
any live member of a group whose master is down.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from pocketmq.client.core.config import DEFAULT_TOPIC_QUEUE_NUMS
from pocketmq.remoting.route import MASTER_ID, QueueData, TopicRouteData

__all__ = [
    "MAX_TOPICS",
    "FindBrokerResult",
    "RouteTable",
    "default_route_for_topic",
    "route_changed",
    "with_brokers_of",
]

#: Topics whose routes an instance keeps; beyond it the topic held longest is forgotten.
MAX_TOPICS = 65536


@dataclass(frozen=True, slots=True)
class FindBrokerResult:
    """A broker address for a consumer request; ``slave`` when it is not the master (id 0)."""

    addr: str
    broker_id: int

    @property
    def slave(self) -> bool:
        return self.broker_id != MASTER_ID


def default_route_for_topic(
    default_route: TopicRouteData, *, default_topic_queue_nums: int = DEFAULT_TOPIC_QUEUE_NUMS
) -> TopicRouteData:
    """A new route for a not-yet-existing topic, built from ``TBW102``'s without touching it: read and
    write queue nums of every queue data become ``min(default_topic_queue_nums, read_queue_nums)``."""
    queue_datas: list[QueueData] = []
    for data in default_route.queue_datas:
        nums = min(default_topic_queue_nums, data.read_queue_nums)
        queue_datas.append(replace(data, read_queue_nums=nums, write_queue_nums=nums))
    return TopicRouteData(
        queue_datas=queue_datas,
        broker_datas=[replace(b, broker_addrs=dict(b.broker_addrs)) for b in default_route.broker_datas],
        order_topic_conf=default_route.order_topic_conf,
        filter_server_table={k: list(v) for k, v in default_route.filter_server_table.items()},
    )


def with_brokers_of(route: TopicRouteData, other: TopicRouteData, names: set[str]) -> TopicRouteData:
    """A new route: ``route`` plus the queue and broker data ``other`` has for the brokers ``names``."""
    return replace(
        route,
        queue_datas=[*route.queue_datas, *(q for q in other.queue_datas if q.broker_name in names)],
        broker_datas=[*route.broker_datas, *(b for b in other.broker_datas if b.broker_name in names)],
    )


def _route_key(route: TopicRouteData) -> tuple[object, ...]:
    queues = sorted(
        (q.broker_name, q.read_queue_nums, q.write_queue_nums, q.perm, q.topic_sys_flag)
        for q in route.queue_datas
    )
    brokers = sorted((b.broker_name, b.cluster, sorted(b.broker_addrs.items())) for b in route.broker_datas)
    filters = sorted((k, sorted(v)) for k, v in route.filter_server_table.items())
    return queues, brokers, route.order_topic_conf or None, filters


def route_changed(old: TopicRouteData | None, new: TopicRouteData | None) -> bool:
    """Whether two routes differ other than in list order (RocketMQ's ``topicRouteDataIsChange``), so a
    refresh that brings the same route keeps what was built from the old one (publish info, round-robin)."""
    if old is None or new is None:
        return old is not new
    return _route_key(old) != _route_key(new)


class RouteTable:
    """Routes by topic and brokers by name (see the module docstring). Its dicts are never replaced, only
    updated, so a producer may keep a reference to ``master_table`` for its hot path."""

    def __init__(self) -> None:
        self.route_table: dict[str, TopicRouteData] = {}
        #: broker name → master address, from every route held.
        self.master_table: dict[str, str] = {}
        #: broker name → broker id → address, from every route held (consumers read slaves too).
        self.broker_addr_table: dict[str, dict[int, str]] = {}
        self._from_default: set[str] = set()

    # -- routes -----------------------------------------------------------------------------------------

    def make_room(self, topic: str) -> str | None:
        """Before applying a route of a topic not held yet to a full table: forget the topic held longest and
        return it."""
        if topic in self.route_table or len(self.route_table) < MAX_TOPICS:
            return None
        oldest = next(iter(self.route_table))
        self.forget(oldest)
        return oldest

    def apply(self, topic: str, route: TopicRouteData, *, from_default: bool) -> bool:
        """Hold ``route`` for ``topic`` and take its brokers; ``False`` when it equals the route held (then
        nothing but the ``TBW102`` mark changes)."""
        if from_default:
            self._from_default.add(topic)
        else:
            self._from_default.discard(topic)
        old = self.route_table.get(topic)
        if old is not None and not route_changed(old, route):
            return False
        self.route_table[topic] = route
        self._merge_brokers(route)
        return True

    def forget(self, topic: str) -> None:
        self.route_table.pop(topic, None)
        self._from_default.discard(topic)

    def has_own_route(self, topic: str) -> bool:
        """Whether the topic's route held is its own (not derived from ``TBW102``)."""
        return topic in self.route_table and topic not in self._from_default

    def subscribe_route(self, topic: str) -> TopicRouteData | None:
        """The topic's own route (never one derived from ``TBW102``), or ``None``."""
        if topic in self._from_default:
            return None
        return self.route_table.get(topic)

    def is_from_default_route(self, topic: str) -> bool:
        """Whether the topic is published on ``TBW102``'s brokers because it has no route of its own yet."""
        return topic in self._from_default

    # -- brokers ----------------------------------------------------------------------------------------

    def _merge_brokers(self, route: TopicRouteData) -> None:
        """A broker group's member list is replaced as a whole: a master the name server dropped (it is down)
        must not linger in ``broker_addr_table``, or consumers would keep trying it instead of the slave.
        (``master_table`` keeps its entry until the next rebuild, as the producer has always relied on.)"""
        for broker in route.broker_datas:
            addr = broker.broker_addrs.get(MASTER_ID)
            if addr:
                self.master_table[broker.broker_name] = addr
            if broker.broker_addrs:
                self.broker_addr_table[broker.broker_name] = dict(broker.broker_addrs)

    def rebuild_brokers(self) -> None:
        """Masters and all members from every route held, dropping brokers no route names any more."""
        masters: dict[str, str] = {}
        members: dict[str, dict[int, str]] = {}
        for route in self.route_table.values():
            for broker in route.broker_datas:
                addr = broker.broker_addrs.get(MASTER_ID)
                if addr:
                    masters[broker.broker_name] = addr
                if broker.broker_addrs:
                    members.setdefault(broker.broker_name, {}).update(broker.broker_addrs)
        if masters != self.master_table:
            self.master_table.clear()
            self.master_table.update(masters)
        if members != self.broker_addr_table:
            self.broker_addr_table.clear()
            self.broker_addr_table.update(members)

    def all_broker_addrs(self) -> list[str]:
        """Every broker address (masters and slaves) of the routes held, sorted."""
        return sorted({addr for members in self.broker_addr_table.values() for addr in members.values()})

    def master_addr(self, broker_name: str) -> str | None:
        """The master of ``broker_name`` among its members, if it has one."""
        return self.broker_addr_table.get(broker_name, {}).get(MASTER_ID)

    def find_broker_address_in_subscribe(
        self, broker_name: str, broker_id: int = MASTER_ID, *, only_this_broker: bool = False,
        skip: Iterable[str] = (),
    ) -> FindBrokerResult | None:
        """Where a consumer should send a request for ``broker_name``: the member ``broker_id``; else, for a
        slave id, the next id; else (unless ``only_this_broker``) any member, the master first. Addresses in
        ``skip`` (recently unreachable) are passed over while another member is left."""
        members = self.broker_addr_table.get(broker_name)
        if not members:
            return None
        skipped = set(skip)
        candidates = [broker_id]
        if broker_id != MASTER_ID:
            candidates.append(broker_id + 1)
        for candidate in candidates:
            addr = members.get(candidate)
            if addr is not None and addr not in skipped:
                return FindBrokerResult(addr, candidate)
        if only_this_broker:
            addr = members.get(broker_id)
            return FindBrokerResult(addr, broker_id) if addr is not None else None
        ordered = sorted(members.items())
        for member_id, addr in ordered:
            if addr not in skipped:
                return FindBrokerResult(addr, member_id)
        member_id, addr = ordered[0]  # all of them were unreachable lately: try anyway
        return FindBrokerResult(addr, member_id)

    def find_broker_address_in_admin(self, broker_name: str) -> FindBrokerResult | None:
        """The master of ``broker_name``, else any member (offset commits and queries when the master is
        down go to a slave)."""
        return self.find_broker_address_in_subscribe(broker_name, MASTER_ID)
