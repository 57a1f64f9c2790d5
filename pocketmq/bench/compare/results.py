"""Pure bookkeeping of a comparison: per-run records, per-broker medians, ratios and the project's targets.

No I/O here: the runner fills :class:`RunRecord` and :class:`TargetStatus` objects; :func:`summarise`
turns the runs of each (broker, workload, mode) into one :class:`Row` of medians; :func:`check_targets`
evaluates the targets of docs/perf/method.md on those rows and the measured limits.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from pocketmq.bench.compare.workload import ONE_CPU, Workload

LATENCY_KEYS = ("p50", "p99", "p999")


@dataclass(frozen=True)
class TargetStatus:
    """Whether a broker could be measured: ``state`` is 'ok', 'not installed', 'failed to start',
    'failed during run' or 'not selected'."""

    key: str
    label: str
    peer: bool
    state: str
    detail: str = ""
    version: str = ""

    @property
    def usable(self) -> bool:
        return self.state == "ok"


@dataclass
class RunRecord:
    """One measured run of one workload on one broker."""

    target: str
    workload: Workload
    mode: str = ""
    done: int = 0
    failed: int = 0
    seconds: float = 0.0
    latency_us: dict[str, float] = field(default_factory=dict)
    server_cpu_pct: float | None = None
    server_rss_mib: float | None = None
    client_cpu_pct: float | None = None
    error: str | None = None

    @property
    def rate(self) -> float:
        return self.done / self.seconds if self.seconds > 0 else 0.0


@dataclass(frozen=True)
class Row:
    """The medians of one broker's runs of one workload (and consume mode)."""

    target: str
    workload: Workload
    mode: str
    peer: bool
    rates: tuple[float, ...]
    rate: float
    latency_us: dict[str, float]
    server_cpu_pct: float | None
    server_rss_mib: float | None
    client_cpu_pct: float | None
    failed: int
    incomplete: int
    error: str | None


def median(values: Iterable[float | None]) -> float | None:
    """Median of the values that are not None; None when there are none."""
    present = [v for v in values if v is not None]
    return float(statistics.median(present)) if present else None


def summarise(records: Sequence[RunRecord], peers: dict[str, bool], expected: int) -> list[Row]:
    """One :class:`Row` per (target, workload, mode), in first-seen order. ``expected`` is the message count a
    complete throughput run reaches; runs below it are counted in ``incomplete``."""
    groups: dict[tuple[str, Workload, str], list[RunRecord]] = {}
    for record in records:
        groups.setdefault((record.target, record.workload, record.mode), []).append(record)
    rows = []
    for (target, workload, mode), runs in groups.items():
        good = [r for r in runs if r.error is None and r.done > 0]
        latency = {key: median(r.latency_us.get(key) for r in good) for key in LATENCY_KEYS}
        rows.append(Row(
            target=target, workload=workload, mode=mode, peer=peers.get(target, True),
            rates=tuple(r.rate for r in good), rate=median(r.rate for r in good) or 0.0,
            latency_us={k: v for k, v in latency.items() if v is not None},
            server_cpu_pct=median(r.server_cpu_pct for r in good),
            server_rss_mib=median(r.server_rss_mib for r in good),
            client_cpu_pct=median(r.client_cpu_pct for r in good),
            failed=sum(r.failed for r in runs),
            incomplete=sum(1 for r in good if workload is not Workload.W3 and r.done + r.failed < expected),
            error=next((r.error for r in runs if r.error), None),
        ))
    return rows


def best_peer(rows: Iterable[Row], workload: Workload, *, mode: str | None = None,
              latency: str | None = None) -> Row | None:
    """The best peer row of ``workload`` (highest rate, or lowest ``latency`` percentile), optionally of one
    consume ``mode``; None when no peer has a figure."""
    candidates = [r for r in rows if r.peer and r.workload is workload and r.rates
                  and (mode is None or r.mode == mode)]
    if latency is not None:
        candidates = [r for r in candidates if latency in r.latency_us]
        return min(candidates, key=lambda r: r.latency_us[latency], default=None)
    return max(candidates, key=lambda r: r.rate, default=None)


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    if numerator is None or not denominator:
        return None
    return numerator / denominator


@dataclass(frozen=True)
class Check:
    """One of the targets: what it asks, the figure, and whether it is met (None: cannot tell)."""

    target: str
    figure: str
    met: bool | None


def _fmt(value: float | None, unit: str = "", spec: str = ",.2f") -> str:
    return "n/a" if value is None else f"{value:{spec}}{unit}"


def _find(rows: Sequence[Row], target: str, workload: Workload, mode: str = "") -> Row | None:
    return next((r for r in rows if r.target == target and r.workload is workload and r.mode == mode and r.rates),
                None)


def check_targets(rows: Sequence[Row], pocket: str, pocket_sync: str, echo_idle_p50_us: float | None) -> list[Check]:
    """The targets for the ASYNC_MASTER ``pocket`` (and SYNC/ASYNC for ``pocket_sync``)."""
    checks = []
    for workload in (Workload.W1, Workload.W2):
        mine, best = _find(rows, pocket, workload), best_peer(rows, workload)
        r = ratio(mine.rate if mine else None, best.rate if best else None)
        checks.append(Check(f"{workload}: ≥ 2x the best peer's msg/s", f"{_fmt(r, 'x')}"
                            f"{f' vs {best.target}' if best else ''}", None if r is None else r >= 2.0))
    checks.extend(_consume_checks(rows, pocket))
    checks.extend(_latency_checks(rows, pocket, echo_idle_p50_us))
    checks.extend(_latency_checks(rows, pocket, None, ONE_CPU))
    mine5, best1 = _find(rows, pocket, Workload.W5), best_peer(rows, Workload.W1)
    r5 = ratio(mine5.rate if mine5 else None, best1.rate if best1 else None)
    checks.append(Check("W5: batches ≥ 5x the best peer's W1 rate", _fmt(r5, "x"), None if r5 is None else r5 >= 5.0))
    for workload in Workload:
        sync, base = _find(rows, pocket_sync, workload), _find(rows, pocket, workload)
        if workload is Workload.W3:
            r = ratio(base.latency_us.get("p50") if base else None, sync.latency_us.get("p50") if sync else None)
        else:
            r = ratio(sync.rate if sync else None, base.rate if base else None)
        share = None if r is None else 100 * r
        checks.append(Check(f"{workload}: SYNC_MASTER+slave ≥ 80 % of ASYNC_MASTER", _fmt(share, " %", ".0f"),
                            None if r is None else r >= 0.8))
    return checks


def _consume_checks(rows: Sequence[Row], pocket: str) -> list[Check]:
    mine = next((r for r in rows if r.target == pocket and r.workload is Workload.W4 and r.rates), None)
    each, fastest = best_peer(rows, Workload.W4, mode="each"), best_peer(rows, Workload.W4)
    r_each = ratio(mine.rate if mine else None, each.rate if each else None)
    r_fast = ratio(mine.rate if mine else None, fastest.rate if fastest else None)
    return [
        Check("W4: ≥ 2x the best peer with per-message acknowledgement", _fmt(r_each, "x"),
              None if r_each is None else r_each >= 2.0),
        Check("W4: ≥ the best peer's fastest mode", _fmt(r_fast, "x"), None if r_fast is None else r_fast >= 1.0),
    ]


def _latency_checks(rows: Sequence[Row], pocket: str, echo_idle_p50_us: float | None,
                    mode: str = "") -> list[Check]:
    """W3's targets in one placement (``mode`` "" unpinned, :data:`ONE_CPU`); the echo check only where the
    echo limit was measured the same way (unpinned)."""
    mine = _find(rows, pocket, Workload.W3, mode)
    p50 = mine.latency_us.get("p50") if mine else None
    p99 = mine.latency_us.get("p99") if mine else None
    best50 = best_peer(rows, Workload.W3, latency="p50", mode=mode)
    best99 = best_peer(rows, Workload.W3, latency="p99", mode=mode)
    peer50 = best50.latency_us["p50"] if best50 else None
    peer99 = best99.latency_us["p99"] if best99 else None
    where = "W3" if not mode else "W3 (client and server on one CPU)"
    checks = [
        Check(f"{where}: p50 below every peer's", f"{_fmt(p50, ' µs', ',.0f')} vs {_fmt(peer50, ' µs', ',.0f')}",
              None if p50 is None or peer50 is None else p50 < peer50),
        Check(f"{where}: p99 no worse than the best peer's",
              f"{_fmt(p99, ' µs', ',.0f')} vs {_fmt(peer99, ' µs', ',.0f')}",
              None if p99 is None or peer99 is None else p99 <= peer99),
    ]
    if not mode:
        echo = ratio(p50, echo_idle_p50_us)
        checks.append(Check("W3: p50 within 2x the idle asyncio echo round trip", _fmt(echo, "x"),
                            None if echo is None else echo <= 2.0))
    return checks
