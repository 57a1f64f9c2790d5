"""Writable queues of a topic and round-robin selection among them (RocketMQ's ``TopicPublishInfo``).

From a name server route:

* with ``orderTopicConf`` (``"brokerName:queueNums;..."``) the queues are exactly those listed, in order;
* otherwise queue datas are sorted by broker name, and each one with the WRITE permission whose broker
  group has a master (id 0) gives queues ``0 .. writeQueueNums-1``. A group with only slaves cannot take
  writes, so it contributes nothing.

Selection keeps one counter per instance, started at a random value so that many producers do not all
begin on queue 0. On a retry it scans forward for a queue on another broker than the one that just failed
and falls back to plain round-robin when every queue is on that broker.

Each producer keeps its own publish info per topic, built here from the route its client instance hands it
whenever the route changes (RocketMQ's ``updateTopicPublishInfo``); a route that did not change keeps the
publish info and its counter. Route objects (:class:`pocketmq.remoting.route.TopicRouteData` and its parts) are shared
with the instance and never modified here. :class:`MessageQueue` is frozen.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from pocketmq.client.core.config import DEFAULT_TOPIC_QUEUE_NUMS
from pocketmq.client.core.errors import NoRouteError
from pocketmq.client.core.message import MessageQueue
from pocketmq.client.core.route_table import default_route_for_topic
from pocketmq.common.topic_config import PermName
from pocketmq.remoting.route import MASTER_ID, BrokerData, TopicRouteData

__all__ = ["MAX_QUEUES_PER_BROKER", "TopicPublishInfo"]
#: Queue counts in a route are clamped to this, so a corrupt route cannot make us allocate without limit.
MAX_QUEUES_PER_BROKER = 4096
_INDEX_MASK = 0x7FFFFFFF


def _queue_count(raw: int) -> int:
    return max(0, min(raw, MAX_QUEUES_PER_BROKER))


def _parse_order_conf(conf: str) -> list[tuple[str, int]]:
    """``"a:4;b:4"`` → ``[("a", 4), ("b", 4)]``; malformed items are skipped."""
    entries: list[tuple[str, int]] = []
    for item in conf.split(";"):
        name, sep, nums = item.partition(":")
        name = name.strip()
        if not sep or not name:
            continue
        try:
            entries.append((name, _queue_count(int(nums))))
        except ValueError:
            continue
    return entries


def _master_addrs(broker_datas: Sequence[BrokerData]) -> dict[str, str]:
    masters: dict[str, str] = {}
    for broker in broker_datas:
        addr = broker.broker_addrs.get(MASTER_ID)
        if addr:
            masters[broker.broker_name] = addr
    return masters


def _writable_queues(topic: str, route: TopicRouteData, masters: dict[str, str]) -> list[MessageQueue]:
    queues: list[MessageQueue] = []
    seen: set[str] = set()
    for data in sorted(route.queue_datas, key=lambda q: q.broker_name):
        name = data.broker_name
        if name in seen or not data.perm & PermName.PERM_WRITE or name not in masters:
            continue
        seen.add(name)
        queues.extend(MessageQueue(topic, name, qid) for qid in range(_queue_count(data.write_queue_nums)))
    return queues


class TopicPublishInfo:
    """The queues a producer may send a topic's messages to, and the round-robin state over them.

    ``have_topic_router_info`` is true when built from a route (real or ``TBW102``), false for the empty
    placeholder a producer caches before the first lookup.
    """

    __slots__ = (
        "_by_broker",
        "_index",
        "_masters",
        "broker_names",
        "have_topic_router_info",
        "message_queues",
        "order_topic",
        "route",
        "topic",
    )

    def __init__(
        self,
        topic: str,
        message_queues: Sequence[MessageQueue] = (),
        *,
        order_topic: bool = False,
        have_topic_router_info: bool = False,
        route: TopicRouteData | None = None,
        master_addrs: dict[str, str] | None = None,
        start_index: int | None = None,
    ) -> None:
        self.topic = topic
        self.message_queues: tuple[MessageQueue, ...] = tuple(message_queues)
        self.order_topic = order_topic
        self.have_topic_router_info = have_topic_router_info
        self.route = route
        self._masters: dict[str, str] = dict(master_addrs) if master_addrs else {}
        by_broker: dict[str, list[MessageQueue]] = {}
        for queue in self.message_queues:
            by_broker.setdefault(queue.broker_name, []).append(queue)
        self._by_broker: dict[str, tuple[MessageQueue, ...]] = {k: tuple(v) for k, v in by_broker.items()}
        self.broker_names: frozenset[str] = frozenset(self._by_broker)
        self._index = (random.getrandbits(31) if start_index is None else start_index) & _INDEX_MASK

    # -- construction ----------------------------------------------------------------------------------

    @classmethod
    def from_route(
        cls, topic: str, route: TopicRouteData, *, start_index: int | None = None
    ) -> TopicPublishInfo:
        """The publish info of ``topic`` from its name server route (rules in the module docstring)."""
        masters = _master_addrs(route.broker_datas)
        if route.order_topic_conf:
            queues = [
                MessageQueue(topic, name, qid)
                for name, nums in _parse_order_conf(route.order_topic_conf)
                for qid in range(nums)
            ]
            order = True
        else:
            queues = _writable_queues(topic, route, masters)
            order = False
        return cls(
            topic,
            queues,
            order_topic=order,
            have_topic_router_info=True,
            route=route,
            master_addrs=masters,
            start_index=start_index,
        )

    @classmethod
    def from_default_route(
        cls,
        topic: str,
        default_route: TopicRouteData,
        *,
        default_topic_queue_nums: int = DEFAULT_TOPIC_QUEUE_NUMS,
        start_index: int | None = None,
    ) -> TopicPublishInfo:
        """Publish info for a topic no name server knows yet, from the route of ``TBW102``: the brokers that
        can auto-create it, with ``min(default_topic_queue_nums, TBW102 read queue nums)`` queues each."""
        route = default_route_for_topic(default_route, default_topic_queue_nums=default_topic_queue_nums)
        return cls.from_route(topic, route, start_index=start_index)

    @classmethod
    def empty(cls, topic: str) -> TopicPublishInfo:
        """A placeholder with no queues and ``have_topic_router_info`` false."""
        return cls(topic)

    # -- queries ---------------------------------------------------------------------------------------

    @property
    def ok(self) -> bool:
        """Whether there is at least one queue to send to."""
        return bool(self.message_queues)

    def queues_of(self, broker_name: str) -> tuple[MessageQueue, ...]:
        """This topic's writable queues on ``broker_name`` (empty if none)."""
        return self._by_broker.get(broker_name, ())

    def write_queue_nums(self, broker_name: str) -> int:
        """How many writable queues ``broker_name`` has for this topic (RocketMQ's ``getQueueIdByBroker``)."""
        return len(self._by_broker.get(broker_name, ()))

    def master_addr(self, broker_name: str) -> str | None:
        """The master address of ``broker_name`` according to this route."""
        return self._masters.get(broker_name)

    # -- selection -------------------------------------------------------------------------------------

    def next_index(self) -> int:
        """Advance the round-robin counter and return it (non-negative, wraps at 2**31)."""
        index = self._index = (self._index + 1) & _INDEX_MASK
        return index

    def select_one_message_queue(self, last_broker_name: str | None = None) -> MessageQueue:
        """The next queue round-robin; on a retry (``last_broker_name`` set) the next one on another broker,
        or plain round-robin if every queue is on that broker. Raises :class:`NoRouteError` if empty."""
        queues = self.message_queues
        count = len(queues)
        if not count:
            raise NoRouteError(self.topic)
        if last_broker_name is not None:
            index = self._index
            for _ in range(count):
                index = (index + 1) & _INDEX_MASK
                queue = queues[index % count]
                if queue.broker_name != last_broker_name:
                    self._index = index
                    return queue
            self._index = index
        index = self._index = (self._index + 1) & _INDEX_MASK
        return queues[index % count]

    def __repr__(self) -> str:
        return (
            f"TopicPublishInfo(topic={self.topic!r}, queues={len(self.message_queues)}, "
            f"brokers={sorted(self.broker_names)}, order_topic={self.order_topic})"
        )
