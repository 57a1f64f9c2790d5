"""The order of a comparison and what is measured around each run.

For each broker in turn: start its servers in a fresh temporary directory, then ``plan.runs`` rounds of the
selected workloads (interleaved, so a drift of the machine spreads over all workloads), then stop the
servers by PID and remove the directory. Around every measured phase: wait until the servers are idle,
place the processes (client and servers on one CPU each for the throughput workloads, free for W3's
one-at-a-time latency, as PocketMQ's own benchmarks do), and read the servers' CPU time and resident memory
from ``/proc``. Each phase runs on a fresh uvloop event loop, bounded by ``asyncio.wait_for``.

W4 consumes the backlog that W1 wrote in the same round; without W1 (or for a queue that consuming
empties) the backlog is written first with the broker's batch path, not measured.
"""

from __future__ import annotations

import asyncio
import functools
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

import uvloop

from pocketmq.bench.compare.proc import Placement, cpu_seconds, rss_bytes
from pocketmq.bench.compare.results import RunRecord, TargetStatus
from pocketmq.bench.compare.target import Client, Server, Target, Unavailable
from pocketmq.bench.compare.workload import METER, ONE_CPU, ConsumeMode, Measure, Plan, Workload

MIB = 1024 * 1024
#: Extra seconds a phase may take over ``plan.time_limit`` (connect, drain, close) before it is cancelled.
PHASE_GRACE = 120.0
#: A server is idle when it uses less than this share of one CPU.
IDLE_CPU = 0.15
IDLE_WAIT = 30.0


@dataclass
class Options:
    plan: Plan
    workloads: Sequence[Workload]
    targets: Sequence[Target]
    pinned: bool = True
    keep_dir: bool = False


@dataclass
class Outcome:
    statuses: list[TargetStatus] = field(default_factory=list)
    records: list[RunRecord] = field(default_factory=list)
    loadavg: dict[str, tuple[float, float, float]] = field(default_factory=dict)


def settle(pids: Callable[[], list[int]]) -> None:
    """Wait (at most :data:`IDLE_WAIT` s) until the servers use less than :data:`IDLE_CPU` of a CPU."""
    deadline = time.monotonic() + IDLE_WAIT
    last = cpu_seconds(pids())
    while time.monotonic() < deadline:
        time.sleep(0.5)
        now = cpu_seconds(pids())
        if now - last < IDLE_CPU * 0.5:
            return
        last = now


class TargetRun:
    """The runs of one started broker."""

    def __init__(self, target: Target, server: Server, options: Options, out: TextIO) -> None:
        self.target = target
        self.server = server
        self.client: Client = server.client()
        self.options = options
        self.plan = options.plan
        self.out = out
        self.throughput = Placement.choose(options.pinned)
        self.latency = Placement.choose(False)
        self.backlogs: dict[int, tuple[str, int]] = {}

    def name(self, workload: Workload, run: int, suffix: str = "") -> str:
        return f"cmp_{workload.lower()}_r{run}{suffix}"

    def measure(self, workload: Workload, run: int, phase: Callable[[], Awaitable[Measure]], *,
                mode: str = "") -> RunRecord:
        if workload is Workload.W3:
            placement = Placement.one_cpu() if mode == ONE_CPU else self.latency
            placement.apply(self.server.pids())
        else:
            self.throughput.apply(self.server.pids(), self.server.floating_pids())
        settle(self.server.pids)
        pids = self.server.pids()
        record = RunRecord(self.target.label, workload, mode)
        token = METER.set(lambda: (time.process_time(), cpu_seconds(pids)))
        try:
            result = uvloop.run(asyncio.wait_for(phase(), self.plan.time_limit + PHASE_GRACE))
        except Exception as exc:
            record.error = f"{type(exc).__name__}: {exc}"
            self._line(workload, run, mode, record)
            return record
        finally:
            METER.reset(token)
        record.done, record.failed, record.seconds = result.done, result.failed, result.seconds
        record.latency_us = result.latency()
        record.server_rss_mib = rss_bytes(self.server.pids()) / MIB
        if result.cpu_seconds is not None and result.seconds > 0:
            record.client_cpu_pct = 100.0 * result.cpu_seconds[0] / result.seconds
            record.server_cpu_pct = 100.0 * result.cpu_seconds[1] / result.seconds
        if result.first_error and result.done == 0:
            record.error = result.first_error
        self._line(workload, run, mode, record)
        if result.first_error:
            tail = self.server.log_tail().strip()
            print(f"    first failure: {result.first_error}" + (f"; server log:\n{tail}" if tail else ""),
                  file=self.out, flush=True)
        return record

    def _line(self, workload: Workload, run: int, mode: str, record: RunRecord) -> None:
        label = f"[{self.target.label}] {workload}{f' ({mode})' if mode else ''} run {run + 1}/{self.plan.runs}"
        if record.error and not record.done:
            print(f"{label}: ERROR {record.error}", file=self.out, flush=True)
            return
        text = (f"{label}: {record.rate:,.0f} msg/s ({record.done:,} in {record.seconds:.2f} s, "
                f"{record.failed:,} failed)")
        if record.latency_us:
            text += (f"  p50 {record.latency_us['p50']:.0f} µs  p99 {record.latency_us['p99']:.0f} µs  "
                     f"p999 {record.latency_us['p999']:.0f} µs")
        text += f"  server CPU {record.server_cpu_pct or 0:.0f} %  RSS {record.server_rss_mib or 0:.0f} MiB"
        print(text, file=self.out, flush=True)

    def one_round(self, run: int) -> list[RunRecord]:
        records: list[RunRecord] = []
        created: list[str] = []
        try:
            for workload in (w for w in self.options.workloads if self.target.runs(w)):
                records.extend(self._workload(workload, run, created))
        finally:
            for name in created:
                try:
                    uvloop.run(asyncio.wait_for(self.client.drop(name), 60.0))
                except Exception as exc:
                    print(f"    could not drop {name}: {type(exc).__name__}: {exc}", file=self.out)
        return records

    def _workload(self, workload: Workload, run: int, created: list[str]) -> list[RunRecord]:
        plan, client = self.plan, self.client
        name = self.name(workload, run)
        if workload is Workload.W4:
            return self._consume(run, created)
        created.append(name)
        if workload in (Workload.W1, Workload.W2):
            record = self.measure(workload, run, lambda: client.produce(name, plan.size(workload), plan))
            if workload is Workload.W1 and record.done > 0 and record.error is None:
                self.backlogs[run] = (name, record.done)
            return [record]
        if workload is Workload.W3:
            shared = self.name(workload, run, "_cpu")
            created.append(shared)
            return [self.measure(workload, run, lambda: client.sequential(name, plan)),
                    self.measure(workload, run, lambda: client.sequential(shared, plan), mode=ONE_CPU)]
        return [self.measure(workload, run, lambda: client.batches(name, plan))]

    def _consume(self, run: int, created: list[str]) -> list[RunRecord]:
        records = []
        reusable = self.backlogs.pop(run, None)
        for mode in self.client.consume_modes:
            if reusable is None:
                reusable = self._fill(run, mode, created)
            if reusable is None:
                continue
            name, count = reusable
            mode_label = "" if len(self.client.consume_modes) == 1 else str(mode)
            phase = functools.partial(self.client.consume, name, count, mode, self.plan)
            records.append(self.measure(Workload.W4, run, phase, mode=mode_label))
            if self.client.refill_per_consume:
                reusable = None
        return records

    def _fill(self, run: int, mode: ConsumeMode, created: list[str]) -> tuple[str, int] | None:
        name = self.name(Workload.W4, run, f"_{mode}")
        created.append(name)
        try:
            done = uvloop.run(asyncio.wait_for(self.client.fill(name, self.plan.size(Workload.W1), self.plan.count),
                                               600.0))
        except Exception as exc:
            print(f"[{self.target.label}] W4 backlog: ERROR {type(exc).__name__}: {exc}", file=self.out)
            return None
        print(f"[{self.target.label}] W4 backlog: {done:,} messages written (not measured)", file=self.out,
              flush=True)
        return (name, done) if done else None


def run_target(target: Target, options: Options, outcome: Outcome, out: TextIO) -> None:
    """Start ``target``, run every round, stop it; its status and records go into ``outcome``."""
    workdir = Path(tempfile.mkdtemp(prefix=f"rmq-compare-{target.key}-"))
    version = target.version()
    outcome.loadavg[f"before {target.label}"] = os.getloadavg()
    print(f"== {target.label} ({version}) in {workdir}", file=out, flush=True)
    try:
        server = target.start(workdir)
    except Unavailable as exc:
        print(f"[{target.label}] {exc.state}: {exc.detail}", file=out, flush=True)
        outcome.statuses.append(TargetStatus(target.key, target.label, target.peer, exc.state, exc.detail, version))
        _remove(workdir, options.keep_dir, out)
        return
    status = TargetStatus(target.key, target.label, target.peer, "ok", "", version)
    try:
        runs = TargetRun(target, server, options, out)
        for run in range(options.plan.runs):
            outcome.records.extend(runs.one_round(run))
            if not server.pids():
                status = TargetStatus(target.key, target.label, target.peer, "failed during run",
                                      "its server processes exited", version)
                break
    except Exception as exc:
        status = TargetStatus(target.key, target.label, target.peer, "failed during run",
                              f"{type(exc).__name__}: {exc}", version)
        print(f"[{target.label}] failed during run: {exc}", file=out, flush=True)
    finally:
        server.stop()
        Placement.choose(False).apply([])
        _remove(workdir, options.keep_dir, out)
    outcome.statuses.append(status)


def _remove(workdir: Path, keep: bool, out: TextIO) -> None:
    if keep:
        print(f"kept {workdir}", file=out)
    else:
        shutil.rmtree(workdir, ignore_errors=True)


def run_all(options: Options, out: TextIO = sys.stdout) -> Outcome:
    outcome = Outcome()
    outcome.loadavg["start"] = os.getloadavg()
    for target in options.targets:
        run_target(target, options, outcome, out)
    outcome.loadavg["end"] = os.getloadavg()
    return outcome
