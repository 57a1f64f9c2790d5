"""``rmq-bench lite-pull``: ``LitePullConsumer.poll`` reading a backlog, beside the push consumer's W4 on the same
backlog, on one cluster.

It starts a name server and one ASYNC_MASTER / ASYNC_FLUSH broker (child processes, :func:`local_cluster`). Each of
``--rounds`` rounds writes a backlog of ``--backlog`` x 1 KiB messages to a topic of its own (8 queues, not
measured), then reads it twice with new consumer groups, alternating which goes first:

* **W4 push** — the comparison's W4 (:meth:`~pocketmq.bench.compare.pocketmq.PocketClient.consume`): a push consumer
  from the first offset, pulls of 32, a batch handler of 32, offsets committed as it goes;
* **lite pull** — a :class:`~pocketmq.client.LitePullConsumer` subscribed from the first offset, pulls of
  ``--pull-batch-size`` (32), a loop of ``poll()`` counting what each returns, automatic commits.

Both are measured alike: messages over the time from the consumer's creation to the last message. Reported: each
run's messages/s, the median per kind and the ratio lite / push (its target is at least 0.90), and the load average
before and after. With ``--pin`` (default) the broker runs on the last CPU and this process on the first.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from typing import Any

from pocketmq.bench.common import Cluster, add_own_cluster_arguments, format_load, run_on_own_cluster
from pocketmq.bench.compare.pocketmq import QUEUES, PocketClient, quiet_logs
from pocketmq.bench.compare.workload import ConsumeMode, ConsumeProgress, Measure, Plan
from pocketmq.client import ConsumeFromWhere, LitePullConsumer

#: How long one poll waits (s): short, so that the loop notices the end of the backlog.
POLL_TIMEOUT = 0.5


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--backlog", type=int, default=100_000, help="messages per round's backlog (100000)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds, alternating which consumer goes first (3)")
    parser.add_argument("--pull-batch-size", type=int, default=32, help="the lite consumer's pullBatchSize (32)")
    parser.add_argument("--duration", type=float, default=60.0, help="longest read of one backlog, seconds (60)")
    add_own_cluster_arguments(parser)


def run(args: argparse.Namespace) -> int:
    if not 1 <= args.backlog <= 10_000_000 or not 1 <= args.rounds <= 100 or not 1 <= args.pull_batch_size <= 1024:
        print("rmq-bench lite-pull: --backlog 1..10000000, --rounds 1..100, --pull-batch-size 1..1024",
              file=sys.stderr)
        return 2
    if args.duration <= 0:
        print("rmq-bench lite-pull: --duration must be positive", file=sys.stderr)
        return 2
    args.queues = QUEUES  # the cluster's default for auto-created topics; PocketClient creates them with this
    quiet_logs()
    summary = run_on_own_cluster(args, "lite-pull", lambda cluster: _bench(args, cluster))
    if args.json:
        print(json.dumps(summary, indent=1))
    else:
        _print(summary)
    complete = all(r["done"] >= args.backlog for r in summary["runs"])
    return 0 if complete else 1


async def _bench(args: argparse.Namespace, cluster: Cluster) -> dict[str, Any]:
    client = PocketClient(cluster.namesrv, [cluster.broker.addr])
    plan = Plan(count=args.backlog, time_limit=args.duration)
    run_id = f"{os.getpid()}x{int(time.time())}"
    runs: list[dict[str, Any]] = []
    for index in range(args.rounds):
        topic = f"BenchLite{run_id}r{index}"
        written = await client.fill(topic, 1024, args.backlog)
        kinds = ("W4 push", "lite pull") if index % 2 == 0 else ("lite pull", "W4 push")
        for kind in kinds:
            if kind == "W4 push":
                measure = await client.consume(topic, written, ConsumeMode.EACH, plan)
            else:
                measure = await _lite(cluster.namesrv, topic, written, plan, args.pull_batch_size)
            runs.append({"round": index, "kind": kind, "done": measure.done, "seconds": measure.seconds,
                         "rate": measure.rate})
            if not args.json:
                print(f"round {index}  {kind:<10} {measure.done:>9,} msgs in {measure.seconds:6.2f} s  "
                      f"{measure.rate:>10,.0f} msg/s", flush=True)
    return {"backlog": args.backlog, "pull_batch_size": args.pull_batch_size, "runs": runs,
            "summary": _summarise(runs)}


async def _lite(namesrv: str, topic: str, count: int, plan: Plan, pull_batch_size: int) -> Measure:
    """Read ``count`` messages of ``topic`` with a lite pull consumer; the window opens at its creation."""
    progress = ConsumeProgress(count)
    start = time.perf_counter()
    consumer = LitePullConsumer(f"lite_{topic}", namesrv_addr=namesrv, instance_name=f"lite-{topic}",
                                consume_from_where=ConsumeFromWhere.FIRST_OFFSET, pull_batch_size=pull_batch_size)
    consumer.subscribe(topic, "*")
    await consumer.start()
    deadline = time.monotonic() + plan.time_limit
    try:
        while not progress.finished.is_set() and time.monotonic() < deadline:
            polled = await consumer.poll(POLL_TIMEOUT)
            if polled:
                progress.add(len(polled))
            elif time.perf_counter() - progress.last > plan.consume_idle:
                break
    finally:
        await consumer.shutdown()
    return progress.measure(start)


def _summarise(runs: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kind in ("W4 push", "lite pull"):
        rates = [r["rate"] for r in runs if r["kind"] == kind]
        out[kind] = statistics.median(rates) if rates else 0.0
    ratios = [lite["rate"] / push["rate"] for lite in runs if lite["kind"] == "lite pull"
              for push in runs if push["kind"] == "W4 push" and push["round"] == lite["round"] and push["rate"]]
    out["ratio_median_of_rounds"] = statistics.median(ratios) if ratios else None
    out["ratio_of_medians"] = out["lite pull"] / out["W4 push"] if out["W4 push"] else None
    return out


def _print(summary: dict[str, Any]) -> None:
    s = summary["summary"]
    print(f"\nmedian of {len(summary['runs']) // 2} rounds, {summary['backlog']:,} x 1 KiB each:")
    print(f"  W4 push   {s['W4 push']:>10,.0f} msg/s")
    print(f"  lite pull {s['lite pull']:>10,.0f} msg/s (pulls of {summary['pull_batch_size']})")
    if s["ratio_median_of_rounds"] is not None:
        print(f"  lite / push: median of the rounds' ratios {s['ratio_median_of_rounds']:.2f}, "
              f"ratio of the medians {s['ratio_of_medians']:.2f} (target >= 0.90)")
    print(format_load(summary))
