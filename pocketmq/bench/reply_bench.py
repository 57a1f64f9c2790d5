"""``rmq-bench reply``: request-reply's round trip through a live consumer, beside W3's lone send, on one cluster.

It starts a name server and one ASYNC_MASTER / ASYNC_FLUSH broker (child processes, :func:`local_cluster`) and a
replier process: a push consumer of the request topic whose handler answers each request with
``create_reply_message`` and a producer's ``send`` (SEND_REPLY_MESSAGE_V2). Then, ``--rounds`` times, alternating
which goes first:

* **W3** — ``--count`` sequential sends of 1 KiB, each awaited (the comparison's W3, through
  :class:`~pocketmq.bench.compare.pocketmq.PocketClient`, to a topic nobody consumes);
* **request-reply** — ``--count`` sequential ``Producer.request`` calls of 1 KiB, each awaited until its reply
  arrives: request stored, the consumer's long poll woken, the handler's reply pushed back to this process.

Each round's requester is a new producer whose first request (a one-time route lookup of the reply topic and a
heartbeat, RocketMQ's ``prepareSendRequest``) is not measured. Reported: per round and kind the p50 / p99 / p999
in µs; the median of the rounds; the ratio of the medians; where a round trip's time goes (medians, ms: request
sent to reply sent, reply sent to pushed, pushed to arrived, arrived to returned; from the reply's born,
``PUSH_REPLY_TIME`` and ``ARRIVE_TIME`` stamps, whole milliseconds); the load average before and after. Nothing is
pinned by default, as W3 runs in the comparison: pinning the broker and this process (``--pin``) leaves the
replier, the third process, to the CPUs' leftovers, and its round trips take several times longer.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import statistics
import sys
import time
from typing import Any

import uvloop

from pocketmq.bench.common import (
    Cluster,
    add_own_cluster_arguments,
    create_topic,
    format_load,
    run_on_own_cluster,
    wait_for_route,
)
from pocketmq.bench.compare.pocketmq import PocketClient, quiet_logs
from pocketmq.bench.compare.workload import Budget, Measure, Plan, body, pipelined
from pocketmq.client import Message, MessageExt, Producer, PushConsumer, create_reply_message

#: A round that takes longer than this (s) is cut short and measured on what it did.
ROUND_LIMIT = 120.0
#: How long the replier may take to start consuming (s).
REPLIER_READY_TIMEOUT = 60.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--count", type=int, default=2000, help="sequential calls per round and kind (2000)")
    parser.add_argument("--rounds", type=int, default=4, help="rounds, alternating which kind goes first (4)")
    parser.add_argument("--queues", type=int, default=8, help="queues of the request topic (8)")
    add_own_cluster_arguments(parser, pin=False)  # W3's placement in the comparison: unpinned


def run(args: argparse.Namespace) -> int:
    if not 1 <= args.count <= 1_000_000 or not 1 <= args.rounds <= 100 or not 1 <= args.queues <= 256:
        print("rmq-bench reply: --count 1..1000000, --rounds 1..100, --queues 1..256", file=sys.stderr)
        return 2
    quiet_logs()
    summary = run_on_own_cluster(args, "reply", lambda cluster: _bench(args, cluster))
    if args.json:
        print(json.dumps(summary, indent=1))
    else:
        _print(summary)
    return 0 if all(r["failed"] == 0 for r in summary["rounds"]) else 1


async def _bench(args: argparse.Namespace, cluster: Cluster) -> dict[str, Any]:
    run_id = f"{os.getpid()}x{int(time.time())}"
    rpc_topic, send_topic = f"BenchRpc{run_id}", f"BenchLoneSend{run_id}"
    await create_topic(cluster.broker.addr, rpc_topic, args.queues)
    client = PocketClient(cluster.namesrv, [cluster.broker.addr])
    plan = Plan(sequential=args.count, time_limit=ROUND_LIMIT)
    ctx = multiprocessing.get_context("spawn")
    ready, stop = ctx.Queue(maxsize=1), ctx.Event()
    replier = ctx.Process(target=_replier_main, args=(cluster.namesrv, rpc_topic, ready, stop), daemon=True)
    replier.start()
    rounds: list[dict[str, Any]] = []
    legs: list[list[float]] = [[] for _ in LEGS]
    try:
        await asyncio.to_thread(ready.get, True, REPLIER_READY_TIMEOUT)
        for index in range(args.rounds):
            kinds = ("W3", "request-reply") if index % 2 == 0 else ("request-reply", "W3")
            for kind in kinds:
                if kind == "W3":
                    measure = await client.sequential(send_topic, plan)
                else:
                    measure, round_legs = await _requests(cluster.namesrv, rpc_topic, args.count, index)
                    for total, part in zip(legs, round_legs, strict=True):
                        total.extend(part)
                rounds.append({"round": index, "kind": kind, "done": measure.done, "failed": measure.failed,
                               "first_error": measure.first_error, "latency_us": measure.latency()})
                if not args.json:
                    _print_round(rounds[-1])
    finally:
        stop.set()
        await asyncio.to_thread(replier.join, 15.0)
        if replier.is_alive():
            replier.kill()
    split = {name: statistics.median(values) for name, values in zip(LEGS, legs, strict=True) if values}
    return {"count": args.count, "pinned": args.pin, "rounds": rounds, "summary": _summarise(rounds),
            "round_trip_ms": split}


#: The four legs of a round trip (see the module docstring), as named in the report.
LEGS = ("request sent -> reply sent", "reply sent -> pushed", "pushed -> arrived", "arrived -> returned")


async def _requests(namesrv: str, topic: str, count: int, index: int) -> tuple[Measure, list[list[float]]]:
    payload = body(1024)
    legs: list[list[float]] = [[] for _ in LEGS]
    async with Producer("bench_reply_requester", namesrv_addr=namesrv, instance_name=f"bench-requester-{index}",
                        send_msg_timeout=10.0) as producer:
        await wait_for_route(producer, topic)
        await producer.request(Message(topic, payload), timeout=30.0)  # the one-time preparation, not measured

        async def call() -> None:
            sent = time.time() * 1000
            reply = await producer.request(Message(topic, payload), timeout=10.0)
            returned = time.time() * 1000
            if len(reply.body) != len(payload):
                raise RuntimeError(f"a reply of {len(reply.body)} bytes")
            pushed = int(reply.get_property("PUSH_REPLY_TIME") or 0)
            arrived = int(reply.get_property("ARRIVE_TIME") or 0)
            if pushed and arrived and len(legs[0]) < count:
                for leg, value in zip(legs, (reply.born_timestamp - sent, pushed - reply.born_timestamp,
                                             arrived - pushed, returned - arrived), strict=True):
                    leg.append(value)

        measure = Measure(capacity=count)
        await pipelined(call, measure, Budget(count, ROUND_LIMIT), workers=1, record_latency=True)
        return measure, legs


def _replier_main(namesrv: str, topic: str, ready: Any, stop: Any) -> None:
    """Child process: answer every request on ``topic`` until ``stop`` is set."""
    quiet_logs()
    uvloop.run(_serve(namesrv, topic, ready, stop))


async def _serve(namesrv: str, topic: str, ready: Any, stop: Any) -> None:
    producer = Producer("bench_replier", namesrv_addr=namesrv, instance_name="bench-replier", send_msg_timeout=10.0)

    async def handle(msg: MessageExt) -> None:
        await producer.send(create_reply_message(msg, msg.body))

    consumer = PushConsumer("bench_reply_consumer", namesrv_addr=namesrv, instance_name="bench-replier")
    consumer.subscribe(topic, "*")
    consumer.register_handler(handle)
    await producer.start()
    await consumer.start()
    deadline = time.monotonic() + REPLIER_READY_TIMEOUT
    while time.monotonic() < deadline:
        if consumer.assigned_queues:
            break
        await asyncio.sleep(0.05)
    ready.put(True)
    parent = multiprocessing.parent_process()
    while not await asyncio.to_thread(stop.wait, 1.0):
        if parent is not None and not parent.is_alive():
            break  # the benchmark is gone: do not outlive it
    await consumer.shutdown()
    await producer.shutdown()


def _summarise(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """The median over the rounds of each kind's p50 and p99, and request-reply over W3."""
    out: dict[str, Any] = {}
    for kind in ("W3", "request-reply"):
        mine = [r["latency_us"] for r in rounds if r["kind"] == kind and r["latency_us"]]
        out[kind] = {q: statistics.median(m[q] for m in mine) for q in ("p50", "p99", "p999")} if mine else {}
    if out["W3"] and out["request-reply"]:
        out["ratio"] = {q: out["request-reply"][q] / out["W3"][q] for q in ("p50", "p99")}
    return out


def _print_round(row: dict[str, Any]) -> None:
    lat = row["latency_us"]
    failed = f"  failed {row['failed']} ({row['first_error']})" if row["failed"] else ""
    print(f"round {row['round']}  {row['kind']:<14} {row['done']:>7,} calls  p50 {lat.get('p50', 0):>8,.0f} µs  "
          f"p99 {lat.get('p99', 0):>8,.0f} µs  p999 {lat.get('p999', 0):>8,.0f} µs{failed}", flush=True)


def _print(summary: dict[str, Any]) -> None:
    s = summary["summary"]
    print(f"\nmedian of {len(summary['rounds']) // 2} rounds, {summary['count']:,} sequential calls each:")
    for kind in ("W3", "request-reply"):
        if s[kind]:
            print(f"  {kind:<14} p50 {s[kind]['p50']:>8,.0f} µs  p99 {s[kind]['p99']:>8,.0f} µs  "
                  f"p999 {s[kind]['p999']:>8,.0f} µs")
    if "ratio" in s:
        print(f"  request-reply / W3: p50 x{s['ratio']['p50']:.2f}, p99 x{s['ratio']['p99']:.2f}")
    if summary["round_trip_ms"]:
        print("  a round trip, medians in ms (whole-ms stamps): " + ", ".join(
            f"{name} {value:.1f}" for name, value in summary["round_trip_ms"].items()))
    print(f"  placement: {'broker and this process pinned, replier not' if summary['pinned'] else 'unpinned'}")
    print(format_load(summary))
