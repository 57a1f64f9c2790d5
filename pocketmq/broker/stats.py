"""Put/get counters and rates for GET_BROKER_RUNTIME_INFO, VIEW_BROKER_STATS_DATA (315) and the metrics.

Counters are plain integers bumped on the hot path; a once-a-second sample into a bounded ring turns
them into rates over 10 s, 60 s and 600 s windows, as RocketMQ's ``putTps`` reports them.

Per-topic and per-group counters are RocketMQ's ``BrokerStatsManager`` items, named as it names them
(``TOPIC_PUT_NUMS``/``TOPIC_PUT_SIZE`` keyed by topic, ``GROUP_GET_NUMS``/``GROUP_GET_SIZE`` keyed by
``topic@group``, ``BROKER_PUT_NUMS``/``BROKER_GET_NUMS`` keyed by the cluster name): each keeps a value and
a count of updates, snapshotted every 10 s, 10 min and 1 h into three small rings, from which
:meth:`StatsItem.stats` gives ``{sum, tps, avgpt}`` over the last minute, hour and day as the
``BrokerStatsData`` body wants them. At most :data:`MAX_STATS_ITEMS` items per name (the rest are not counted).
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

#: Items kept per stats name: every topic and topic@group pair a client names costs one.
MAX_STATS_ITEMS = 20_000
TOPIC_PUT_NUMS = "TOPIC_PUT_NUMS"
TOPIC_PUT_SIZE = "TOPIC_PUT_SIZE"
GROUP_GET_NUMS = "GROUP_GET_NUMS"
GROUP_GET_SIZE = "GROUP_GET_SIZE"
BROKER_PUT_NUMS = "BROKER_PUT_NUMS"
BROKER_GET_NUMS = "BROKER_GET_NUMS"
STATS_NAMES = (TOPIC_PUT_NUMS, TOPIC_PUT_SIZE, GROUP_GET_NUMS, GROUP_GET_SIZE, BROKER_PUT_NUMS, BROKER_GET_NUMS)
#: (ring, seconds between snapshots, snapshots kept): a minute of 10 s, an hour of 10 min, a day of 1 h.
_RINGS = (("statsMinute", 10, 7), ("statsHour", 600, 7), ("statsDay", 3600, 25))


@dataclass(slots=True)
class StatsItem:
    """One counter (a value and how many updates made it) with its snapshot rings."""

    value: int = 0
    times: int = 0
    rings: tuple[deque[tuple[float, int, int]], ...] = field(
        default_factory=lambda: tuple(deque(maxlen=n) for _name, _period, n in _RINGS))

    def snapshot(self, ring: int, now: float) -> None:
        self.rings[ring].append((now, self.value, self.times))

    def window(self, ring: int, now: float) -> dict[str, Any]:
        """``{sum, tps, avgpt}`` from the ring's oldest snapshot to now (RocketMQ's StatsSnapshot)."""
        snaps = self.rings[ring]
        if not snaps:
            return {"avgpt": 0.0, "sum": 0, "tps": 0.0}
        start_t, start_v, start_n = snaps[0]
        total, times, elapsed = self.value - start_v, self.times - start_n, now - start_t
        return {"avgpt": total / times if times else 0.0, "sum": total,
                "tps": total / elapsed if elapsed > 0 else 0.0}

    def stats(self, now: float) -> dict[str, Any]:
        return {name: self.window(i, now) for i, (name, _p, _n) in enumerate(_RINGS)}


class BrokerStats:
    WINDOWS = (10, 60, 600)

    def __init__(self) -> None:
        self.boot_timestamp_ms = int(time.time() * 1000)
        self.put_messages = 0
        self.put_bytes = 0
        self.get_messages = 0
        self.get_bytes = 0
        self._samples: deque[tuple[float, int, int]] = deque(maxlen=max(self.WINDOWS) + 2)
        self.items: dict[str, dict[str, StatsItem]] = {name: {} for name in STATS_NAMES}
        self._last_snapshot = [0.0] * len(_RINGS)
        self._cluster = ""
        self._put: dict[str, tuple[StatsItem, StatsItem]] = {}
        self._got: dict[str, dict[str, tuple[StatsItem, StatsItem]]] = {}
        broker_put, broker_get = self._item(BROKER_PUT_NUMS, ""), self._item(BROKER_GET_NUMS, "")
        assert broker_put is not None and broker_get is not None
        self._broker_put, self._broker_get = broker_put, broker_get

    def _item(self, name: str, key: str) -> StatsItem | None:
        table = self.items[name]
        item = table.get(key)
        if item is None and len(table) < MAX_STATS_ITEMS:
            item = table[key] = StatsItem()
            now = time.monotonic()
            for ring in range(len(_RINGS)):
                item.snapshot(ring, now)  # a new item's windows start at zero now, not at the next tick
        return item

    def _pair(self, nums: str, size: str, key: str) -> tuple[StatsItem, StatsItem] | None:
        first, second = self._item(nums, key), self._item(size, key)
        return (first, second) if first is not None and second is not None else None

    @property
    def cluster(self) -> str:
        return self._cluster

    @cluster.setter
    def cluster(self, name: str) -> None:
        """The key of BROKER_PUT_NUMS/BROKER_GET_NUMS (RocketMQ keys them by the cluster name)."""
        for table in (self.items[BROKER_PUT_NUMS], self.items[BROKER_GET_NUMS]):
            table[name] = table.pop(self._cluster)
        self._cluster = name

    # The two hot-path hooks bump plain attributes of items found through one or two dict lookups (no
    # allocation once a topic or topic/group pair has been seen).

    def on_put(self, topic: str, count: int, size: int) -> None:
        self.put_messages += count
        self.put_bytes += size
        pair = self._put.get(topic)
        if pair is None:
            pair = self._pair(TOPIC_PUT_NUMS, TOPIC_PUT_SIZE, topic)
            if pair is None:
                return
            self._put[topic] = pair
        nums, sizes = pair
        nums.value += count
        nums.times += 1
        sizes.value += size
        sizes.times += 1
        broker = self._broker_put
        broker.value += count
        broker.times += 1

    def on_get(self, count: int, size: int, topic: str = "", group: str = "") -> None:
        self.get_messages += count
        self.get_bytes += size
        groups = self._got.get(topic)
        pair = groups.get(group) if groups is not None else None
        if pair is None:
            pair = self._pair(GROUP_GET_NUMS, GROUP_GET_SIZE, f"{topic}@{group}")
            if pair is None:
                return
            self._got.setdefault(topic, {})[group] = pair
        nums, sizes = pair
        nums.value += count
        nums.times += 1
        sizes.value += size
        sizes.times += 1
        broker = self._broker_get
        broker.value += count
        broker.times += 1

    def view(self, name: str, key: str, now: float | None = None) -> dict[str, Any] | None:
        """The ``BrokerStatsData`` of one item, None when the broker has not counted it."""
        item = self.items.get(name, {}).get(key)
        return item.stats(time.monotonic() if now is None else now) if item is not None else None

    def minute_tps(self, name: str, key: str) -> float:
        item = self.items.get(name, {}).get(key)
        return float(item.window(0, time.monotonic())["tps"]) if item is not None else 0.0

    def sample(self, now: float | None = None) -> None:
        """Record the counters (called once a second by the controller); snapshot the items when due."""
        now = time.monotonic() if now is None else now
        self._samples.append((now, self.put_messages, self.get_messages))
        for ring, (_name, period, _n) in enumerate(_RINGS):
            if now - self._last_snapshot[ring] >= period or not self._last_snapshot[ring]:
                self._last_snapshot[ring] = now
                for table in self.items.values():
                    for item in table.values():
                        item.snapshot(ring, now)

    def _rate(self, window: int, index: int) -> float:
        if len(self._samples) < 2:
            return 0.0
        newest = self._samples[-1]
        oldest = self._samples[0]
        for sample in self._samples:
            if newest[0] - sample[0] <= window:
                oldest = sample
                break
        elapsed = newest[0] - oldest[0]
        return (newest[index] - oldest[index]) / elapsed if elapsed > 0 else 0.0

    def rate(self, window: int, index: int) -> float:
        """Per-second rate over ``window`` seconds of puts (``index`` 1) or gets (2)."""
        return self._rate(window, index)

    def put_tps(self) -> str:
        return " ".join(f"{self._rate(w, 1):.2f}" for w in self.WINDOWS)

    def get_tps(self) -> str:
        return " ".join(f"{self._rate(w, 2):.2f}" for w in self.WINDOWS)

    def runtime(self) -> str:
        seconds = int(time.time() - self.boot_timestamp_ms / 1000)
        days, rest = divmod(seconds, 86400)
        hours, rest = divmod(rest, 3600)
        minutes, seconds = divmod(rest, 60)
        return f"[ {days} days, {hours} hours, {minutes} minutes, {seconds} seconds ]"
