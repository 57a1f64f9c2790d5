"""``rmq-bench compare``: PocketMQ beside NATS JetStream, Redis Streams and RabbitMQ; writes
``docs/perf/compare-results.md``.

Exposes ``add_arguments(parser)`` and ``run(args) -> int`` like the other ``rmq-bench`` workloads; also runs
alone as ``python -m pocketmq.bench.compare.cli``. ``--quick`` is for development (20,000 messages, one run);
``--peers`` and ``--workloads`` choose what runs. A peer that is not installed or does not start is
reported in the output as such. Install the peers with ``scripts/install_peers.sh``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
from dataclasses import replace
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from pocketmq.bench.compare import limits as limits_module
from pocketmq.bench.compare import saved
from pocketmq.bench.compare.limits import Limits
from pocketmq.bench.compare.peers import PEERS
from pocketmq.bench.compare.pocketmq import TARGETS as POCKETMQ_TARGETS
from pocketmq.bench.compare.pocketmq import quiet_logs
from pocketmq.bench.compare.proc import Placement
from pocketmq.bench.compare.report import Meta, render
from pocketmq.bench.compare.results import RunRecord, TargetStatus, check_targets, summarise
from pocketmq.bench.compare.runner import Options, run_all
from pocketmq.bench.compare.target import Target
from pocketmq.bench.compare.workload import Plan, Workload

ALL_TARGETS: tuple[Target, ...] = (*POCKETMQ_TARGETS, *PEERS)
DEFAULT_OUTPUT = Path("docs/perf/compare-results.md")
CLIENT_PACKAGES = ("uvloop", "nats-py", "redis", "aio-pika")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    keys = ",".join(t.key for t in ALL_TARGETS)
    parser.add_argument("--quick", action="store_true", help="20,000 messages, 1,000 sequential sends, one run")
    parser.add_argument("--peers", default=keys, help=f"comma-separated brokers to run (default all: {keys})")
    parser.add_argument("--workloads", default="W1,W2,W3,W4,W5", help="comma-separated workloads (W1..W5)")
    parser.add_argument("--runs", type=int, help="runs per workload, the median is reported (default 3)")
    parser.add_argument("--messages", type=int, help="messages per throughput run (default 200000)")
    parser.add_argument("--time-limit", type=float, help="longest measured phase in seconds (default 60)")
    parser.add_argument("--tune", action="append", default=[], metavar="NAME=VALUE",
                        help="a peer's batch size in its tuned row, e.g. redis_pipeline=200 (repeatable; "
                             "names: redis_pipeline, redis_read_count, nats_batch, nats_fetch, "
                             "rabbit_confirm_batch)")
    parser.add_argument("--pin", action=argparse.BooleanOptionalAction, default=True,
                        help="client and servers on different CPUs for the throughput workloads (default on)")
    parser.add_argument("--skip-limits", action="store_true", help="do not measure the machine's limits")
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT,
                        help="Markdown report (docs/perf/compare-results.md)")
    parser.add_argument("--json", type=Path, help="also write the raw records as JSON here")
    parser.add_argument("--keep-dir", action="store_true", help="keep the servers' temporary directories")
    parser.add_argument("--render-only", type=Path, metavar="JSON",
                        help="write the report from a --json file of an earlier run, measuring nothing")


def _select(args: argparse.Namespace) -> tuple[list[Target], list[TargetStatus], list[Workload]] | str:
    keys = [k.strip() for k in args.peers.split(",") if k.strip()]
    unknown = [k for k in keys if k not in {t.key for t in ALL_TARGETS}]
    if unknown:
        return f"unknown --peers {','.join(unknown)}; choose from {','.join(t.key for t in ALL_TARGETS)}"
    try:
        workloads = [Workload(w.strip().upper()) for w in args.workloads.split(",") if w.strip()]
    except ValueError as exc:
        return f"--workloads: {exc}"
    chosen = [t for t in ALL_TARGETS if t.key in keys]
    skipped = [TargetStatus(t.key, t.label, t.peer, "not selected") for t in ALL_TARGETS if t.key not in keys]
    return chosen, skipped, sorted(set(workloads), key=list(Workload).index)


def _plan(args: argparse.Namespace) -> Plan:
    plan = Plan().quick() if args.quick else Plan()
    if args.runs is not None:
        plan = replace(plan, runs=max(1, args.runs))
    if args.messages is not None:
        plan = replace(plan, count=max(100, args.messages))
    if args.time_limit is not None:
        plan = replace(plan, time_limit=max(1.0, args.time_limit))
    return replace(plan, tuning=plan.tuning.replace_from(args.tune))


def _versions() -> str:
    found = []
    for package in CLIENT_PACKAGES:
        try:
            found.append(f"{package} {version(package)}")
        except PackageNotFoundError:
            found.append(f"{package} not installed")
    return ", ".join(found)


def _machine() -> str:
    return (f"{os.cpu_count()} CPUs, {platform.system()} {platform.release()}, "
            f"Python {platform.python_version()}")


def run(args: argparse.Namespace) -> int:
    if args.render_only:
        meta, workloads, statuses, records, limits = saved.load(json.loads(args.render_only.read_text()))
        _write_report(args.output, meta, workloads, statuses, records, limits)
        return 0
    selection = _select(args)
    if isinstance(selection, str):
        print(f"rmq-bench compare: {selection}", file=sys.stderr)
        return 2
    targets, skipped, workloads = selection
    try:
        plan = _plan(args)
    except ValueError as exc:
        print(f"rmq-bench compare: {exc}", file=sys.stderr)
        return 2
    quiet_logs()
    limits = None
    if not args.skip_limits:
        print("== limits of this machine", flush=True)
        limits = limits_module.measure(Placement.choose(args.pin))
        Placement.choose(False).apply([])
        print(json.dumps(limits.as_dict(), default=float), flush=True)
    outcome = run_all(Options(plan=plan, workloads=workloads, targets=targets, pinned=args.pin,
                              keep_dir=args.keep_dir))
    meta = Meta(date=datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z"), machine=_machine(),
                clients=_versions(), plan=plan, pinned=args.pin, loadavg=outcome.loadavg,
                command="rmq-bench compare" + (" --quick" if args.quick else "")
                + "".join(f" --tune {t}" for t in args.tune))
    statuses = [*outcome.statuses, *skipped]
    if args.json:
        document = saved.dump(meta, workloads, statuses, outcome.records, limits)
        args.json.write_text(json.dumps(document, indent=1, default=str))
    _write_report(args.output, meta, workloads, statuses, outcome.records, limits)
    return 0 if any(r.done > 0 for r in outcome.records) else 1


def _write_report(output: Path, meta: Meta, workloads: list[Workload], statuses: list[TargetStatus],
                  records: list[RunRecord], limits: Limits | None) -> None:
    peers = {t.label: t.peer for t in ALL_TARGETS}
    rows = summarise(records, peers, meta.plan.count)
    checks = check_targets(rows, POCKETMQ_TARGETS[0].label, POCKETMQ_TARGETS[1].label,
                           limits.echo_idle_us.get("p50") if limits else None)
    output.write_text(render(meta, statuses, rows, limits, checks, workloads))
    print(f"\nwrote {output}", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="rmq-bench compare", description=__doc__.splitlines()[0] if __doc__ else "")
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
