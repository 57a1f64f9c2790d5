"""Latency fault tolerance: keep sends away from brokers that were slow or failed (RocketMQ's ``MQFaultStrategy``).

After every attempt the producer reports the broker's latency; a failure counts as 30000 ms. The latency
maps to an isolation time through two tables read from the top down (the first ``latency_max`` entry the
latency reaches gives the duration)::

    latency >=  15000   3000   2000   1000    550    100     50 ms
    isolated    600 s  180 s  120 s   60 s   30 s    0 s    0 s

:class:`LatencyFaultTolerance` keeps, per broker name, the last latency and the time the broker becomes
available again. :class:`MQFaultStrategy` selects queues with it:

1. round-robin, the first queue whose broker is available and is not the broker of the failed previous
   attempt (``last_broker_name``); RocketMQ once had this check inverted (apache/rocketmq#1576) and later dropped it;
2. else the first available queue even on that broker (it is still better than an isolated one);
3. else ``pick_one_at_least`` among this topic's brokers (the last one excluded if there is another):
   available first, then reachable (its last attempt got an answer, however slow or negative), then lower
   latency, then earliest end of isolation, round-robin over the better half: when every broker is isolated,
   a slow broker that answers is preferred to one that did not answer at all.
   It returns a broker *name*, and the queue comes from the publish info's own frozen queues: RocketMQ
   re-pointed the shared cached ``MessageQueue`` here (apache/rocketmq#7779) and routed later sends to the wrong broker;
4. else plain selection.

A broker isolated because it did not answer (connect refused, closed connection, timeout) is *unreachable*:
RocketMQ 5's fault strategy, and :class:`~pocketmq.client.producer.probe.FaultProbe` here, probe such brokers in the
background and :meth:`LatencyFaultTolerance.remove` them from the table as soon as they answer, so a failure isolates a
broker for as long as it is down, not for the 600 s of the table. A broker that answered slowly or with an
error keeps the table's isolation (it is alive; a probe would not tell how slow its sends are).

Brokers never seen, or seen only answering fast, are not in the table at all, so a healthy cluster's
table stays empty and selection takes the plain path. The table is bounded (``max_items``): when full,
entries that are available again go first, then the one whose isolation ends soonest.
Clocks are monotonic milliseconds and injectable for tests.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

from pocketmq.client.core.errors import NoRouteError
from pocketmq.client.core.message import MessageQueue
from pocketmq.client.producer.topic_publish import TopicPublishInfo

__all__ = [
    "DEFAULT_LATENCY_MAX",
    "DEFAULT_NOT_AVAILABLE_DURATION",
    "FAILURE_LATENCY_MS",
    "FaultItem",
    "LatencyFaultTolerance",
    "MQFaultStrategy",
    "monotonic_ms",
]

DEFAULT_LATENCY_MAX: tuple[int, ...] = (50, 100, 550, 1000, 2000, 3000, 15000)
DEFAULT_NOT_AVAILABLE_DURATION: tuple[int, ...] = (0, 0, 30000, 60000, 120000, 180000, 600000)
#: The latency a failed attempt counts as (isolation = the duration for this latency, 600 s by default).
FAILURE_LATENCY_MS = 30000
#: Broker names remembered at most; a cluster has tens, so this only guards against unbounded growth.
DEFAULT_MAX_ITEMS = 4096
_INDEX_MASK = 0x7FFFFFFF

Clock = Callable[[], int]


def monotonic_ms() -> int:
    """Monotonic milliseconds (isolation windows must not move with wall-clock changes)."""
    return time.monotonic_ns() // 1_000_000


@dataclass(slots=True)
class FaultItem:
    """One broker's last latency, when it becomes available (``start_timestamp``, clock ms) and whether its
    last attempt got an answer (``reachable``)."""

    name: str
    current_latency: float
    start_timestamp: int
    reachable: bool = True

    def is_available(self, now: int) -> bool:
        return now >= self.start_timestamp


class LatencyFaultTolerance:
    """The per-broker fault table (RocketMQ's ``LatencyFaultToleranceImpl``), bounded by ``max_items``."""

    __slots__ = ("_clock", "_items", "_max_items", "_which_item_worst")

    def __init__(self, *, clock: Clock = monotonic_ms, max_items: int = DEFAULT_MAX_ITEMS) -> None:
        if max_items < 1:
            raise ValueError("max_items must be at least 1")
        self._clock = clock
        self._items: dict[str, FaultItem] = {}
        self._max_items = max_items
        self._which_item_worst = 0

    def __len__(self) -> int:
        return len(self._items)

    def get(self, name: str) -> FaultItem | None:
        """The broker's entry, if it has one."""
        return self._items.get(name)

    def update_fault_item(
        self, name: str, current_latency: float, not_available_duration: int, reachable: bool = True
    ) -> None:
        """Record a latency: the broker is unavailable for ``not_available_duration`` ms from now;
        ``reachable`` false when the attempt got no answer at all.

        A broker without an entry that is not to be isolated gets none (absent means available).
        """
        item = self._items.get(name)
        if item is None and not_available_duration <= 0:
            return  # the common case of a healthy broker: no clock read, no entry
        now = self._clock()
        if item is not None:
            item.current_latency = current_latency
            item.start_timestamp = now + not_available_duration
            item.reachable = reachable
            return
        if len(self._items) >= self._max_items:
            self._evict(now)
        self._items[name] = FaultItem(name, current_latency, now + not_available_duration, reachable)

    def _evict(self, now: int) -> None:
        """Make room: drop entries already available again, else the one whose isolation ends first."""
        items = self._items
        for name in [name for name, item in items.items() if item.is_available(now)]:
            del items[name]
        if len(items) >= self._max_items:
            del items[min(items.values(), key=lambda item: item.start_timestamp).name]

    def is_available(self, name: str, now: int | None = None) -> bool:
        """Whether ``name`` is out of isolation (brokers without an entry always are)."""
        item = self._items.get(name)
        if item is None:
            return True
        return (self._clock() if now is None else now) >= item.start_timestamp

    def remove(self, name: str) -> None:
        """Forget a broker: it left the cluster, or it answered a probe (it is available again)."""
        self._items.pop(name, None)

    def unreachable(self) -> list[str]:
        """Brokers isolated now because they did not answer: the ones to probe."""
        if not self._items:
            return []
        now = self._clock()
        return [item.name for item in self._items.values() if not item.reachable and now < item.start_timestamp]

    def pick_one_at_least(self, among: Collection[str] | None = None) -> str | None:
        """The least bad broker with an entry (restricted to ``among`` if given), or ``None``.

        Entries sort available first, then reachable, then by lower latency, then by earlier end of isolation
        (then by name, for a stable order); successive calls take turns over the better half, or the only entry.
        """
        items = self._items
        names = items.keys() if among is None else among
        candidates = [items[name] for name in names if name in items]
        if not candidates:
            return None
        now = self._clock()
        candidates.sort(key=lambda i: (now < i.start_timestamp, not i.reachable, i.current_latency,
                                       i.start_timestamp, i.name))
        half = len(candidates) // 2
        if half == 0:
            return candidates[0].name
        turn = self._which_item_worst
        self._which_item_worst = (turn + 1) & _INDEX_MASK
        return candidates[turn % half].name


class MQFaultStrategy:
    """Queue selection with latency fault tolerance (on by default here; RocketMQ's default is off).

    With ``send_latency_fault_enable`` false, selection is :meth:`TopicPublishInfo.select_one_message_queue`
    and updates are ignored.
    """

    __slots__ = (
        "_clock",
        "_harmless_below",
        "latency_fault_tolerance",
        "latency_max",
        "not_available_duration",
        "send_latency_fault_enable",
    )

    def __init__(
        self,
        *,
        send_latency_fault_enable: bool = True,
        latency_max: Sequence[int] = DEFAULT_LATENCY_MAX,
        not_available_duration: Sequence[int] = DEFAULT_NOT_AVAILABLE_DURATION,
        clock: Clock = monotonic_ms,
        max_items: int = DEFAULT_MAX_ITEMS,
    ) -> None:
        if len(latency_max) != len(not_available_duration) or not latency_max:
            raise ValueError("latency_max and not_available_duration must be non-empty and of equal length")
        if list(latency_max) != sorted(latency_max):
            raise ValueError("latency_max must be ascending")
        self.send_latency_fault_enable = send_latency_fault_enable
        self.latency_max: tuple[int, ...] = tuple(latency_max)
        self.not_available_duration: tuple[int, ...] = tuple(not_available_duration)
        self._clock = clock
        self.latency_fault_tolerance = LatencyFaultTolerance(clock=clock, max_items=max_items)
        # Latencies below the first threshold with a non-zero duration isolate nobody: skip the table scan.
        harmful = [limit for limit, d in zip(self.latency_max, self.not_available_duration, strict=True) if d]
        self._harmless_below: float = harmful[0] if harmful else float("inf")

    def compute_not_available_duration(self, current_latency: float) -> int:
        """Isolation (ms) for a latency: the duration of the highest ``latency_max`` it reaches, else 0."""
        if current_latency < self._harmless_below:
            return 0
        pairs = zip(reversed(self.latency_max), reversed(self.not_available_duration), strict=True)
        for limit, duration in pairs:
            if current_latency >= limit:
                return duration
        return 0

    def update_fault_item(
        self, broker_name: str, current_latency_ms: float, isolation: bool, *, answered: bool = True
    ) -> None:
        """Report an attempt's latency; ``isolation`` (a failed attempt) counts as 30000 ms ⇒ 600 s;
        ``answered`` false when the broker did not answer at all (then it is probed until it does)."""
        if not self.send_latency_fault_enable:
            return
        latency = FAILURE_LATENCY_MS if isolation else current_latency_ms
        duration = self.compute_not_available_duration(latency)
        self.latency_fault_tolerance.update_fault_item(broker_name, current_latency_ms, duration, answered)

    def is_available(self, broker_name: str) -> bool:
        return self.latency_fault_tolerance.is_available(broker_name)

    def select_one_message_queue(
        self, tpinfo: TopicPublishInfo, last_broker_name: str | None = None
    ) -> MessageQueue:
        """A queue of ``tpinfo`` for the next attempt (steps in the module docstring). Never returns a
        modified queue: every result is one of ``tpinfo``'s frozen queues. Raises :class:`NoRouteError`
        when ``tpinfo`` has no queue."""
        items = self.latency_fault_tolerance._items
        if not self.send_latency_fault_enable or not items:
            return tpinfo.select_one_message_queue(last_broker_name)
        queues = tpinfo.message_queues
        count = len(queues)
        if not count:
            raise NoRouteError(tpinfo.topic)
        now = self._clock()
        same_broker: MessageQueue | None = None
        for _ in range(count):
            queue = queues[tpinfo.next_index() % count]
            item = items.get(queue.broker_name)
            if item is None or now >= item.start_timestamp:
                if queue.broker_name != last_broker_name:
                    return queue
                if same_broker is None:
                    same_broker = queue
        if same_broker is not None:
            return same_broker
        return self._least_bad_queue(tpinfo, last_broker_name) or tpinfo.select_one_message_queue(
            last_broker_name
        )

    def _least_bad_queue(self, tpinfo: TopicPublishInfo, last_broker_name: str | None) -> MessageQueue | None:
        among = tpinfo.broker_names
        if last_broker_name in among and len(among) > 1:
            among = among - {last_broker_name}
        name = self.latency_fault_tolerance.pick_one_at_least(among)
        if name is None:
            return None
        candidates = tpinfo.queues_of(name)
        if not candidates:
            return None
        return candidates[tpinfo.next_index() % len(candidates)]
