"""The comparison benchmark's pure parts: medians and ratios, the report's tables, and a peer that is not
installed being reported (not dropped). No server is started."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from pocketmq.bench.compare import peers
from pocketmq.bench.compare.limits import Limits
from pocketmq.bench.compare.report import Meta, latency_table, render, throughput_table
from pocketmq.bench.compare.results import RunRecord, TargetStatus, best_peer, check_targets, median, ratio, summarise
from pocketmq.bench.compare.runner import Options, Outcome, run_target
from pocketmq.bench.compare.target import Target, Unavailable
from pocketmq.bench.compare.workload import (
    ONE_CPU,
    Budget,
    ConsumeMode,
    Measure,
    Plan,
    SendRuns,
    Tuning,
    Workload,
    pipelined,
)

POCKET, SYNC, REDIS, NATS = "PocketMQ ASYNC_MASTER", "PocketMQ SYNC_MASTER+slave", "Redis Streams", "NATS JetStream"
PEER_FLAGS = {POCKET: False, SYNC: False, REDIS: True, NATS: True}


def _runs(target: str, workload: Workload, rates: list[float], mode: str = "", **extra: object) -> list[RunRecord]:
    return [RunRecord(target, workload, mode, done=int(rate), seconds=1.0, **extra)  # type: ignore[arg-type]
            for rate in rates]


def test_median_ignores_missing_values() -> None:
    assert median([3.0, None, 1.0, 2.0]) == 2.0
    assert median([None, None]) is None
    assert ratio(10.0, 0.0) is None
    assert ratio(None, 2.0) is None
    assert ratio(10.0, 4.0) == 2.5


def test_summarise_takes_the_median_run_and_finds_the_best_peer() -> None:
    records = [
        *_runs(POCKET, Workload.W1, [90_000, 30_000, 60_000], server_cpu_pct=80.0),
        *_runs(REDIS, Workload.W1, [20_000, 30_000, 25_000]),
        *_runs(NATS, Workload.W1, [28_000, 26_000, 27_000]),
    ]
    rows = summarise(records, PEER_FLAGS, expected=1)
    pocket = next(r for r in rows if r.target == POCKET)
    assert pocket.rate == 60_000
    assert pocket.rates == (90_000, 30_000, 60_000)
    assert pocket.server_cpu_pct == 80.0
    best = best_peer(rows, Workload.W1)
    assert best is not None and best.target == NATS and best.rate == 27_000


def test_failed_runs_do_not_count_in_the_median() -> None:
    records = [*_runs(REDIS, Workload.W1, [10_000, 20_000]),
               RunRecord(REDIS, Workload.W1, done=0, seconds=0.0, error="ConnectionError: refused")]
    (row,) = summarise(records, PEER_FLAGS, expected=1)
    assert row.rate == 15_000
    assert row.error == "ConnectionError: refused"


def test_latency_medians_and_the_best_peer_by_p50() -> None:
    records = [
        RunRecord(REDIS, Workload.W3, done=5000, seconds=1.0, latency_us={"p50": 260.0, "p99": 900.0, "p999": 2e3}),
        RunRecord(NATS, Workload.W3, done=5000, seconds=1.0, latency_us={"p50": 370.0, "p99": 800.0, "p999": 3e3}),
        RunRecord(POCKET, Workload.W3, done=5000, seconds=1.0, latency_us={"p50": 200.0, "p99": 700.0, "p999": 9e3}),
    ]
    rows = summarise(records, PEER_FLAGS, expected=1)
    best = best_peer(rows, Workload.W3, latency="p50")
    assert best is not None and best.target == REDIS
    checks = {c.target: c.met for c in check_targets(rows, POCKET, SYNC, echo_idle_p50_us=120.0)}
    assert checks["W3: p50 below every peer's"] is True
    assert checks["W3: p99 no worse than the best peer's"] is True
    assert checks["W3: p50 within 2x the idle asyncio echo round trip"] is True
    assert checks["W1: ≥ 2x the best peer's msg/s"] is None  # no W1 figures: cannot tell


def test_w3_placements_are_judged_each_against_the_peers_in_the_same_placement() -> None:
    def w3(target: str, p50: float, mode: str = "") -> RunRecord:
        return RunRecord(target, Workload.W3, mode, done=5000, seconds=1.0,
                         latency_us={"p50": p50, "p99": 2 * p50, "p999": 4 * p50})

    records = [w3(REDIS, 145.0), w3(POCKET, 170.0), w3(REDIS, 90.0, ONE_CPU), w3(POCKET, 84.0, ONE_CPU)]
    rows = summarise(records, PEER_FLAGS, expected=1)
    best = best_peer(rows, Workload.W3, latency="p50", mode=ONE_CPU)
    assert best is not None and best.latency_us["p50"] == 90.0
    checks = {c.target: c for c in check_targets(rows, POCKET, SYNC, echo_idle_p50_us=90.0)}
    assert checks["W3: p50 below every peer's"].met is False
    assert checks["W3: p50 below every peer's"].figure == "170 µs vs 145 µs"
    assert checks["W3 (client and server on one CPU): p50 below every peer's"].met is True
    assert checks["W3 (client and server on one CPU): p50 below every peer's"].figure == "84 µs vs 90 µs"
    text = "\n".join(latency_table(rows, []))
    assert "PocketMQ ASYNC_MASTER (client and server on one CPU) | 84 |" in text
    assert "| 0.93x |" in text  # 84 / 90, not 84 / 145


def test_throughput_table_shows_ratio_to_best_peer_and_unavailable_peers() -> None:
    rows = summarise([*_runs(POCKET, Workload.W1, [60_000], client_cpu_pct=90.0, server_cpu_pct=30.0),
                      *_runs(REDIS, Workload.W1, [30_000])], PEER_FLAGS, expected=1)
    statuses = [TargetStatus("pocketmq", POCKET, False, "ok"), TargetStatus("redis", REDIS, True, "ok"),
                TargetStatus("rabbitmq", "RabbitMQ quorum", True, "not installed", "rabbitmq-server not found")]
    text = "\n".join(throughput_table(Workload.W1, rows, statuses, 1024))
    # 90 % of a core over 60,000 msg/s = 15 µs of client CPU per message; 30 % = 5 µs of server CPU
    assert f"| {POCKET} | 60,000 | 15.0 | 5.0 | 61.4 | 60,000 | 2.00x |" in text
    assert f"| {REDIS} | 30,000 | — | — | 30.7 | 30,000 | 1.00x |" in text
    assert "| RabbitMQ quorum | not installed: rabbitmq-server not found |" in text
    assert "Best peer: Redis Streams, 30,000 msg/s." in text


def test_require_binary_reports_a_missing_server_as_not_installed() -> None:
    with pytest.raises(Unavailable) as caught:
        peers.require_binary("no-such-server-for-pocketmq-tests", "no-such-package")
    assert caught.value.state == "not installed"
    assert "install_peers.sh" in caught.value.detail


def test_a_peer_that_is_not_installed_is_reported_in_every_table(tmp_path: Path) -> None:
    def start(workdir: Path) -> peers.PeerServer:
        raise Unavailable("not installed", "nats-server not found")

    target = Target("nats", NATS, True, start, lambda: "not installed")
    outcome = Outcome()
    plan = Plan().quick()
    run_target(target, Options(plan=plan, workloads=list(Workload), targets=[target]), outcome, io.StringIO())
    assert outcome.statuses == [TargetStatus("nats", NATS, True, "not installed", "nats-server not found",
                                             "not installed")]
    assert outcome.records == []
    meta = Meta(date="today", machine="2 CPUs", clients="none", plan=plan, pinned=True, loadavg={},
                command="rmq-bench compare")
    limits = Limits({"p50": 20.0}, {"p50": 15.0}, 2e9, {1024: 3e6, 128: 8e6})
    text = render(meta, outcome.statuses, [], limits, [], list(Workload))
    assert text.count(f"| {NATS} | not installed: nats-server not found |") == len(Workload)
    assert "| NATS JetStream | not installed | not installed | nats-server not found |" in text


async def test_pipelined_is_bounded_by_count_and_counts_failures() -> None:
    calls = 0

    async def call() -> None:
        nonlocal calls
        calls += 1
        if calls % 4 == 0:
            raise RuntimeError("refused")

    measure = Measure()
    await pipelined(call, measure, Budget(40, 10.0), workers=8, per_call=2, record_latency=True)
    assert calls == 20
    assert measure.done + measure.failed == 40
    assert measure.failed == 10
    assert measure.first_error == "RuntimeError: refused"
    assert len(measure.latencies_us) == 15


def test_budget_stops_at_the_deadline() -> None:
    budget = Budget(1_000, 0.0)
    assert not budget.take(1)
    assert budget.left == 1_000


def test_tuning_assignments_are_checked() -> None:
    tuning = Tuning().replace_from(["redis_pipeline=200", "nats_fetch=50"])
    assert (tuning.redis_pipeline, tuning.nats_fetch, tuning.nats_batch) == (200, 50, Tuning().nats_batch)
    for bad in ("redis_pipeline", "redis_pipeline=0", "no_such=5", "nats_fetch=x"):
        with pytest.raises(ValueError, match="--tune"):
            Tuning().replace_from([bad])


def test_a_naive_peer_row_runs_only_its_own_workloads(tmp_path: Path) -> None:
    calls: list[str] = []

    class Recording(SendRuns):
        consume_modes: tuple[ConsumeMode, ...] = (ConsumeMode.EACH,)
        refill_per_consume = False

        async def send_run(self, name: str, size: int, count: int, seconds: float, *, workers: int,
                           per_call: int, record_latency: bool) -> Measure:
            calls.append(f"send {workers}x{per_call}")
            measure = Measure(done=count, seconds=1.0)
            return measure

        async def consume(self, name: str, count: int, mode: ConsumeMode, plan: Plan) -> Measure:
            calls.append(f"consume {count}")
            return Measure(done=count, seconds=1.0)

        async def drop(self, name: str) -> None:
            calls.append("drop")

    class Idle:
        def pids(self) -> list[int]:
            return []

        def floating_pids(self) -> list[int]:
            return []

        def client(self) -> Recording:
            return Recording()

        def log_tail(self) -> str:
            return ""

        def stop(self) -> None:
            calls.append("stop")

    target = Target("x-naive", "X (naive client)", True, lambda workdir: Idle(), lambda: "1",
                    peers.NAIVE_STREAMS)
    outcome = Outcome()
    plan = Plan(count=1000, sequential=10, runs=1, time_limit=5.0)
    run_target(target, Options(plan=plan, workloads=list(Workload), targets=[target], pinned=False), outcome,
               io.StringIO())
    assert sorted({r.workload for r in outcome.records}) == [Workload.W1, Workload.W2, Workload.W4]
    assert calls.count("send 1000x1") == 2 and "consume 1000" in calls and calls[-1] == "stop"


class _Pipe:
    def __init__(self) -> None:
        self.acks: list[tuple[bytes, ...]] = []

    def xack(self, name: str, group: str, *ids: bytes) -> None:
        self.acks.append(ids)


def test_redis_acknowledges_each_id_or_one_xack_per_hundred() -> None:
    redis_load = pytest.importorskip("pocketmq.bench.compare.redis_load")
    ids = [f"1-{n}".encode() for n in range(250)]
    each, batch = _Pipe(), _Pipe()
    redis_load._acknowledge(each, "s", "g", ids, ConsumeMode.EACH)
    redis_load._acknowledge(batch, "s", "g", ids, ConsumeMode.BATCH)
    assert len(each.acks) == 250 and all(len(a) == 1 for a in each.acks)
    assert [len(a) for a in batch.acks] == [100, 100, 50]
    assert [i for a in batch.acks for i in a] == ids
