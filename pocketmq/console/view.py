"""What the console knows about the cluster as a whole, and how its list pages stay fast.

A page never asks every broker about every topic or group. The lists read two snapshots, each built with a
fixed number of requests per *master* (not per topic or group): :class:`TopicSnapshot` (the name servers' topic
list and cluster table, GET_ALL_TOPIC_CONFIG on every master at once) and :class:`GroupSnapshot`
(GET_ALL_SUBSCRIPTIONGROUP_CONFIG and GET_BROKER_CONSUME_STATS, every group's offsets and lag in one answer, the
costly one for a broker: only group views and the dashboard ask for it). A snapshot older than ``snapshotTtlMs``
is still served while one new one is built in the background (never two at once), so a list page costs a sort
and a slice of tables already in memory; the page says how old its data is. An admin action that changes a
list rebuilds its snapshot before it answers.

Live charts read the same counters the brokers' ``/metrics`` publish: put and get TPS are the brokers'
``putTps``/``getTransferedTps`` runtime keys (10 s rate, the same counter as
``rocketmq_brokeruntime_put_tps10``/``…_gettransfered_tps10``), lag is the group snapshot's (the same sum as
``rocketmq_group_diff``). :class:`ClusterView` samples the rates every :data:`SAMPLE_INTERVAL` seconds (one
runtime-info request per broker, kept for the Cluster page too, which so never waits for a busy broker), so the
dashboard opens with up to ten minutes of history; lag is sampled only while someone has looked at the dashboard
in the last :data:`SAMPLE_WHILE_VIEWED` seconds (it costs a group snapshot), and is a gap in the chart otherwise.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from pocketmq.admin import api_ops
from pocketmq.admin.api import AdminClient, AdminError
from pocketmq.common.service import Service, on_demand, periodic
from pocketmq.common.topic import (
    AUTO_CREATE_TOPIC_KEY_TOPIC,
    NOT_ALLOWED_SEND_TOPIC_SET,
    RMQ_SYS_TOPIC_PREFIX,
    is_dlq_topic,
    is_retry_topic,
)
from pocketmq.common.topic_config import PermName, TopicConfig
from pocketmq.remoting import route as rd

SAMPLE_INTERVAL = 2.0
SAMPLE_WHILE_VIEWED = 60.0
#: Chart points kept: ten minutes at one every two seconds.
SAMPLES_KEPT = 300
#: How old a sampled runtime-info table may be for the Cluster page to show it instead of asking again (s).
RUNTIME_FRESH = 2 * SAMPLE_INTERVAL + 1
TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"
#: Consumer groups RocketMQ's tools and brokers use for themselves.
SYSTEM_GROUPS = frozenset({"TOOLS_CONSUMER", "FILTERSRV_CONSUMER", "SELF_TEST_C_GROUP", "CID_ONS-HTTP-PROXY",
                           "CID_ONSAPI_PERMISSION", "CID_ONSAPI_OWNER", "CID_ONSAPI_PULL", "CID_RMQ_SYS_TRANS",
                           "CID_SYS_RMQ_TRANS"})

RowT = TypeVar("RowT")


def perm_text(perm: int) -> str:
    """``6`` → ``RW``; ``4`` → ``R-``; ``2`` → ``-W``; ``0`` → ``--``."""
    return ("R" if perm & PermName.PERM_READ else "-") + ("W" if perm & PermName.PERM_WRITE else "-")


@dataclass(frozen=True, slots=True)
class TopicRow:
    name: str
    kind: str
    read_queues: int
    write_queues: int
    perm: int
    order: bool
    brokers: tuple[str, ...]

    @property
    def perm_text(self) -> str:
        return perm_text(self.perm)

    @property
    def message_type(self) -> str:
        return "FIFO" if self.order else "NORMAL"


@dataclass(frozen=True, slots=True)
class GroupRow:
    name: str
    kind: str
    lag: int
    retry_lag: int
    consume_tps: float
    topics: tuple[str, ...]
    brokers: tuple[str, ...]
    configured: bool
    consume_enable: bool
    broadcast: bool
    retry_max_times: int


@dataclass(frozen=True, slots=True)
class TopicSnapshot:
    taken_ms: int
    took_ms: float
    topics: tuple[TopicRow, ...]
    #: broker name → master address (masters that answer or not)
    masters: dict[str, str]
    clusters: dict[str, tuple[str, ...]]
    errors: tuple[str, ...] = ()

    def age_seconds(self, now_ms: int | None = None) -> float:
        return max(((now_ms if now_ms is not None else _now_ms()) - self.taken_ms) / 1000, 0.0)


@dataclass(frozen=True, slots=True)
class GroupSnapshot:
    taken_ms: int
    took_ms: float
    groups: tuple[GroupRow, ...]
    errors: tuple[str, ...] = ()

    def age_seconds(self, now_ms: int | None = None) -> float:
        return max(((now_ms if now_ms is not None else _now_ms()) - self.taken_ms) / 1000, 0.0)

    @property
    def total_lag(self) -> int:
        return sum(g.lag for g in self.groups)


SnapT = TypeVar("SnapT", TopicSnapshot, GroupSnapshot)


class Cached(Generic[SnapT]):
    """One snapshot kind: built on first use, then served while a stale one is rebuilt in the background."""

    def __init__(self, name: str, build: Callable[[], Awaitable[SnapT]], ttl_ms: int, owner: Service) -> None:
        self._build: Callable[[], Awaitable[SnapT]] = build
        self.ttl_ms = ttl_ms
        self.value: SnapT | None = None
        self._lock = asyncio.Lock()
        self._rebuilder = owner.add_child(on_demand(name, self._rebuild))

    async def get(self) -> SnapT:
        value = self.value
        if value is None:
            return await self.rebuild()
        if value.age_seconds() * 1000 > self.ttl_ms and not self._lock.locked():
            self._rebuilder.trigger()
        return value

    async def rebuild(self) -> SnapT:
        """A new snapshot now (after an action that changed the list); one build at a time."""
        await self._rebuild()
        assert self.value is not None
        return self.value

    async def _rebuild(self) -> None:
        async with self._lock:
            self.value = await self._build()


@dataclass(frozen=True, slots=True)
class Page(Generic[RowT]):
    rows: tuple[RowT, ...]
    number: int
    pages: int
    matched: int
    total: int


def paginate(rows: Sequence[RowT], page: int, size: int, total: int) -> Page[RowT]:
    pages = max(math.ceil(len(rows) / size), 1)
    number = min(max(page, 1), pages)
    start = (number - 1) * size
    return Page(tuple(rows[start:start + size]), number, pages, len(rows), total)


TOPIC_SORTS: dict[str, Callable[[TopicRow], Any]] = {
    "name": lambda t: t.name.lower(), "queues": lambda t: (t.write_queues, t.name.lower()),
    "perm": lambda t: (t.perm, t.name.lower()), "type": lambda t: (t.message_type, t.name.lower()),
    "kind": lambda t: (t.kind, t.name.lower()), "brokers": lambda t: (len(t.brokers), t.name.lower()),
}
GROUP_SORTS: dict[str, Callable[[GroupRow], Any]] = {
    "name": lambda g: g.name.lower(), "lag": lambda g: (g.lag, g.name.lower()),
    "tps": lambda g: (g.consume_tps, g.name.lower()), "topics": lambda g: (len(g.topics), g.name.lower()),
    "retry": lambda g: (g.retry_lag, g.name.lower()),
}


def select(rows: Iterable[RowT], *, query: str, kinds: frozenset[str], sort: str, descending: bool,
           sorts: dict[str, Callable[[RowT], Any]]) -> list[RowT]:
    """Rows whose name holds ``query`` (case-insensitive) and whose kind is in ``kinds``, sorted."""
    needle = query.strip().lower()
    chosen = [r for r in rows if getattr(r, "kind", "") in kinds and needle in str(getattr(r, "name", "")).lower()]
    chosen.sort(key=sorts.get(sort, sorts["name"]), reverse=descending)
    return chosen


def topic_kind(name: str, reserved: frozenset[str]) -> str:
    if is_retry_topic(name):
        return "retry"
    if is_dlq_topic(name):
        return "dlq"
    if (name in NOT_ALLOWED_SEND_TOPIC_SET or name in (AUTO_CREATE_TOPIC_KEY_TOPIC, TRACE_TOPIC)
            or name.startswith(RMQ_SYS_TOPIC_PREFIX) or name in reserved):
        return "system"
    return "normal"


def group_kind(name: str) -> str:
    return "system" if name in SYSTEM_GROUPS or name.startswith("CID_RMQ_SYS_") else "normal"


@dataclass(slots=True)
class MasterGroups:
    """One master's subscription groups and consume stats, as a group snapshot reads them."""

    groups: dict[str, dict[str, Any]] = field(default_factory=dict)
    stats: dict[str, dict[str, Any]] = field(default_factory=dict)


def build_topics(names: Iterable[str], tables: dict[str, dict[str, TopicConfig]],
                 reserved: frozenset[str]) -> list[TopicRow]:
    """One row per topic: queues and permission as the masters have them (the widest when they differ)."""
    by_topic: dict[str, list[tuple[str, TopicConfig]]] = {}
    for broker, table in tables.items():
        for topic, config in table.items():
            by_topic.setdefault(topic, []).append((broker, config))
    rows = []
    for name in sorted(set(names) | set(by_topic)):
        configs = by_topic.get(name, [])
        rows.append(TopicRow(
            name=name, kind=topic_kind(name, reserved),
            read_queues=max((c.read_queue_nums for _b, c in configs), default=0),
            write_queues=max((c.write_queue_nums for _b, c in configs), default=0),
            perm=max((c.perm for _b, c in configs), default=0),
            order=any(c.order for _b, c in configs),
            brokers=tuple(sorted(b for b, _c in configs))))
    return rows


def build_groups(tables: dict[str, MasterGroups]) -> list[GroupRow]:
    """One row per group that has a subscription config or committed offsets on some master."""
    names: set[str] = set()
    for t in tables.values():
        names.update(t.groups)
        names.update(t.stats)
    rows = []
    for name in sorted(names):
        lag = retry_lag = 0
        tps = 0.0
        topics: set[str] = set()
        brokers: set[str] = set()
        config: dict[str, Any] | None = None
        for broker, t in tables.items():
            if name in t.groups:
                config = config or t.groups[name]
                brokers.add(broker)
            stats = t.stats.get(name)
            if stats is None:
                continue
            brokers.add(broker)
            tps += float(stats.get("consumeTps", 0.0))
            for e in stats["offsetTable"]:
                topic = str(e.get("topic"))
                if is_retry_topic(topic):
                    retry_lag += int(e["lag"])
                else:
                    lag += int(e["lag"])
                    topics.add(topic)
        rows.append(GroupRow(
            name=name, kind=group_kind(name), lag=lag, retry_lag=retry_lag, consume_tps=round(tps, 2),
            topics=tuple(sorted(topics)), brokers=tuple(sorted(brokers)), configured=config is not None,
            consume_enable=bool((config or {}).get("consumeEnable", True)),
            broadcast=bool((config or {}).get("consumeBroadcastEnable", False)),
            retry_max_times=int((config or {}).get("retryMaxTimes", 16))))
    return rows


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _raise_unexpected(answers: Sequence[object]) -> None:
    """Re-raise what gather returned that is not a broker's refusal (a bug must not pass as a broker error)."""
    for answer in answers:
        if isinstance(answer, BaseException) and not isinstance(answer, AdminError | rd.BodyDecodeError):
            raise answer


@dataclass(frozen=True, slots=True)
class Sample:
    at: float
    put_tps: float
    get_tps: float
    lag: int | None


def first_rate(text: str | None) -> float:
    """The first (10 s) figure of a runtime ``putTps``-style value ``"12.00 10.50 9.80"``."""
    try:
        return float((text or "0").split()[0])
    except (ValueError, IndexError):
        return 0.0


class ClusterView:
    """The two snapshots, their background rebuilds, the latest runtime info of each broker and the chart samples,
    over one :class:`AdminClient`."""

    def __init__(self, admin: AdminClient, *, ttl_ms: int) -> None:
        self.admin = admin
        self.samples: deque[Sample] = deque(maxlen=SAMPLES_KEPT)
        #: broker address → (monotonic time, GET_BROKER_RUNTIME_INFO table or why it failed)
        self.runtime: dict[str, tuple[float, dict[str, str] | str]] = {}
        self.dashboard_viewed = 0.0
        self.services = Service(name="console-view")
        self.topic_cache: Cached[TopicSnapshot] = Cached("console-topics", self._build_topics, ttl_ms, self.services)
        self.group_cache: Cached[GroupSnapshot] = Cached("console-groups", self._build_groups, ttl_ms, self.services)
        self.services.add_child(periodic("console-sampler", SAMPLE_INTERVAL, self._sample, initial_delay=0))

    async def topics(self) -> TopicSnapshot:
        return await self.topic_cache.get()

    async def groups(self) -> GroupSnapshot:
        return await self.group_cache.get()

    # -- building ------------------------------------------------------------------------------------------

    async def _masters(self) -> tuple[dict[str, str], dict[str, tuple[str, ...]], frozenset[str]]:
        info = await self.admin.cluster_info()
        masters = {name: bd.broker_addrs[rd.MASTER_ID] for name, bd in info.broker_addr_table.items()
                   if rd.MASTER_ID in bd.broker_addrs}
        clusters = {c: tuple(sorted(names)) for c, names in info.cluster_addr_table.items()}
        return masters, clusters, frozenset(clusters) | frozenset(info.broker_addr_table)

    async def _build_topics(self) -> TopicSnapshot:
        started = time.perf_counter()
        masters, clusters, reserved = await self._masters()
        names_task = asyncio.ensure_future(self.admin.topic_list())
        answers = await asyncio.gather(*(self.admin.all_topic_configs(a) for a in masters.values()),
                                       return_exceptions=True)
        errors = [f"{a}: {x}" for a, x in zip(masters.values(), answers, strict=True) if isinstance(x, Exception)]
        tables = {name: x for name, x in zip(masters, answers, strict=True) if isinstance(x, dict)}
        _raise_unexpected(answers)
        try:
            names = await names_task
        except AdminError as exc:
            names, errors = [], [*errors, str(exc)]
        took = round((time.perf_counter() - started) * 1000, 1)
        rows = await asyncio.to_thread(build_topics, names, tables, reserved)  # thousands of rows: off the loop
        return TopicSnapshot(_now_ms(), took, tuple(rows), masters, clusters, tuple(errors))

    async def _build_groups(self) -> GroupSnapshot:
        started = time.perf_counter()
        masters, _clusters, _reserved = await self._masters()
        answers = await asyncio.gather(*(self._master_groups(a) for a in masters.values()))
        errors = [a for a in answers if isinstance(a, str)]
        tables = {name: a for name, a in zip(masters, answers, strict=True) if isinstance(a, MasterGroups)}
        took = round((time.perf_counter() - started) * 1000, 1)
        rows = await asyncio.to_thread(build_groups, tables)
        return GroupSnapshot(_now_ms(), took, tuple(rows), tuple(errors))

    async def _master_groups(self, addr: str) -> MasterGroups | str:
        try:
            groups, stats = await asyncio.gather(api_ops.sub_groups(self.admin, addr),
                                                 api_ops.broker_consume_stats(self.admin, addr))
        except (AdminError, rd.BodyDecodeError) as exc:
            return f"{addr}: {exc}"
        return MasterGroups(groups, stats)

    # -- runtime info --------------------------------------------------------------------------------------

    async def runtime_info(self, addr: str) -> dict[str, str] | str:
        """A broker's runtime table (or why it could not be read): the sampler's when it is fresh, so a page does
        not wait behind a broker that is busy answering something else."""
        cached = self.runtime.get(addr)
        if cached is not None and time.monotonic() - cached[0] <= RUNTIME_FRESH:
            return cached[1]
        return await self._ask_runtime(addr)

    async def _ask_runtime(self, addr: str) -> dict[str, str] | str:
        try:
            info: dict[str, str] | str = dict(await self.admin.runtime_info(addr))
        except (AdminError, rd.BodyDecodeError) as exc:
            info = str(exc)
        self.runtime[addr] = (time.monotonic(), info)
        return info

    # -- charts --------------------------------------------------------------------------------------------

    def viewed(self) -> None:
        self.dashboard_viewed = time.monotonic()

    async def _sample(self) -> None:
        brokers = await self.admin.brokers()
        infos = await asyncio.gather(*(self._ask_runtime(b.addr) for b in brokers))
        live = {b.addr for b in brokers}
        for addr in [a for a in self.runtime if a not in live]:
            del self.runtime[addr]
        put = get = 0.0
        for info in infos:
            if isinstance(info, dict):
                put += first_rate(info.get("putTps"))
                get += first_rate(info.get("getTransferedTps"))
        lag = None
        if time.monotonic() - self.dashboard_viewed <= SAMPLE_WHILE_VIEWED:
            lag = (await self.groups()).total_lag
        self.samples.append(Sample(time.time(), round(put, 2), round(get, 2), lag))

    def series(self) -> dict[str, list[float | None]]:
        """The samples as uPlot's columns: time (s), put TPS, get TPS, lag (None: not sampled)."""
        points = list(self.samples)
        return {"t": [round(s.at, 1) for s in points], "put": [s.put_tps for s in points],
                "get": [s.get_tps for s in points], "lag": [s.lag for s in points]}
