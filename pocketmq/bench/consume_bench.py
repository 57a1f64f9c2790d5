"""``rmq-bench consume``: what a push consumer with a no-op handler reads, through the SDK.

Two phases, each bounded in count and time:

* **backlog** — ``--backlog`` messages of ``--size`` bytes (default 200,000 x 1 KiB) are produced first
  (batched, not measured) to a topic of ``--queues`` queues; then a push consumer with default settings and a
  no-op handler reads them. Reported: messages/s from the consumer's start to the last message (rebalance
  and first pulls included) and over the steady part (first to last message), MB/s, CPU of both processes;
  one line per second while it runs.
* **latency** — a producer in a separate process sends at ``--rate`` messages/s (default 5,000) for
  ``--latency-duration`` seconds to a fresh topic that a push consumer (started first, caught up) reads.
  Each body starts with the producer's ``time.time_ns()`` taken just before the send (the born timestamp at
  ns resolution); the handler records now - that. Reported: p50/p90/p99/p999/max in ms, plus the same from the
  broker's ``bornTimestamp`` (ms resolution), the rate achieved, and CPU.

Without ``--namesrv`` it starts its own cluster in a temporary directory: a name server and one
ASYNC_MASTER / ASYNC_FLUSH broker, each a separate process. With ``--pin`` (default) and at least two CPUs
the broker is pinned to the last CPU and this process (the consumer) to the first; the latency phase's
producer process is left unpinned. ``--json`` prints the summary as JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import multiprocessing
import os
import struct
import sys
import time
from array import array
from typing import Any

import uvloop

from pocketmq.bench.common import Child, create_topic, local_cluster, percentiles, pin_self, wait_for_route, wait_idle
from pocketmq.client.consumer.push import PushConsumer
from pocketmq.client.consumer.types import ConsumeFromWhere
from pocketmq.client.core.message import Message
from pocketmq.client.core.message_ext import MessageExt
from pocketmq.client.producer.producer import Producer
from pocketmq.common.logs import configure_logging

_STAMP = struct.Struct(">q")
#: Batches in flight while the backlog is written.
_FILL_CONCURRENCY = 16
_FILL_BATCH = 32


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--phase", choices=("both", "backlog", "latency"), default="both")
    parser.add_argument("--backlog", type=int, default=200_000, help="messages produced before the backlog read")
    parser.add_argument("--size", type=int, default=1024, help="message body bytes (default 1024)")
    parser.add_argument("--queues", type=int, default=8, help="queues of the topics in our own cluster (8)")
    parser.add_argument("--duration", type=float, default=60.0, help="longest backlog read, seconds (60)")
    parser.add_argument("--rate", type=int, default=5000, help="producer rate of the latency phase (5000 msg/s)")
    parser.add_argument("--latency-duration", type=float, default=10.0, help="seconds of steady load (10)")
    parser.add_argument("--pull-batch-size", type=int, default=32, help="consumer pullBatchSize (32)")
    parser.add_argument("--consume-threads", type=int, default=20, help="consumer handler concurrency (20)")
    parser.add_argument("--namesrv", metavar="ADDR", help="use this cluster instead of starting one")
    parser.add_argument("--pin", action=argparse.BooleanOptionalAction, default=True,
                        help="pin the broker and this process to different CPUs (default on)")
    parser.add_argument("--keep-dir", action="store_true", help="keep our cluster's temporary directory")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")


def run(args: argparse.Namespace) -> int:
    problem = _check_args(args)
    if problem:
        print(f"rmq-bench consume: {problem}", file=sys.stderr)
        return 2
    configure_logging("console", "ERROR")
    with contextlib.ExitStack() as stack:
        if args.namesrv:
            namesrv, broker = args.namesrv, None
        else:
            cluster = stack.enter_context(local_cluster(args, "consume"))
            namesrv, broker = cluster.namesrv, cluster.broker
        if args.pin:
            pin_self()
        summary = uvloop.run(_bench(args, namesrv, broker))
    _print_summary(args, summary)
    backlog = summary.get("backlog")
    return 0 if backlog is None or backlog["consumed"] > 0 else 1


def _check_args(args: argparse.Namespace) -> str | None:
    if not 8 <= args.size <= 4 * 1024 * 1024:
        return "--size must be 8..4194304"
    if not 1 <= args.backlog <= 10_000_000:
        return "--backlog must be 1..10000000"
    if not 1 <= args.rate <= 1_000_000:
        return "--rate must be 1..1000000"
    if args.duration <= 0 or args.latency_duration <= 0:
        return "--duration and --latency-duration must be positive"
    if not 1 <= args.queues <= 1024 or not 1 <= args.pull_batch_size <= 1024 or not 1 <= args.consume_threads <= 1000:
        return "--queues, --pull-batch-size and --consume-threads out of range"
    return None



# -- our own cluster -------------------------------------------------------------------------------------------


def _cpu(broker: Child | None) -> tuple[float, float | None, float]:
    return time.process_time(), broker.cpu_seconds() if broker else None, time.perf_counter()


def _cpu_used(start: tuple[float, float | None, float], broker: Child | None) -> dict[str, float | None]:
    cpu0, broker0, wall0 = start
    wall = time.perf_counter() - wall0
    broker_now = broker.cpu_seconds() if broker else None
    return {
        "consumer_cpu_pct": 100.0 * (time.process_time() - cpu0) / wall,
        "broker_cpu_pct": None if broker0 is None or broker_now is None else 100.0 * (broker_now - broker0) / wall,
    }


# -- the phases ------------------------------------------------------------------------------------------------


async def _bench(args: argparse.Namespace, namesrv: str, broker: Child | None) -> dict[str, Any]:
    summary: dict[str, Any] = {"size": args.size, "queues": args.queues, "pull_batch_size": args.pull_batch_size,
                               "consume_threads": args.consume_threads, "cpus": os.cpu_count()}
    run_id = f"{os.getpid()}x{int(time.time())}"
    if args.phase in ("both", "backlog"):
        summary["backlog"] = await _backlog_phase(args, namesrv, broker, f"BenchConsumeBacklog{run_id}")
    if args.phase in ("both", "latency"):
        summary["latency"] = await _latency_phase(args, namesrv, broker, f"BenchConsumeLatency{run_id}")
    summary["loadavg"] = os.getloadavg()
    return summary


async def _prepare_topic(args: argparse.Namespace, producer: Producer, broker: Child | None, topic: str) -> None:
    if broker is not None:
        await create_topic(broker.addr, topic, args.queues)
    else:
        await producer.send(Message(topic, b"create"))  # auto-created through TBW102
    await wait_for_route(producer, topic)


async def _fill(args: argparse.Namespace, producer: Producer, topic: str) -> int:
    body = os.urandom(args.size // 2).hex().encode()[: args.size].ljust(args.size, b"x")
    left = {"n": args.backlog}
    sent = 0

    async def sender() -> None:
        nonlocal sent
        while left["n"] > 0:
            count = min(_FILL_BATCH, left["n"])
            left["n"] -= count
            await producer.send_batch([Message(topic, body) for _ in range(count)], timeout=30.0)
            sent += count

    await asyncio.gather(*(sender() for _ in range(_FILL_CONCURRENCY)))
    return sent


def _consumer(args: argparse.Namespace, namesrv: str, group: str, topic: str) -> PushConsumer:
    consumer = PushConsumer(group, namesrv_addr=namesrv, consume_from_where=ConsumeFromWhere.FIRST_OFFSET,
                            pull_batch_size=args.pull_batch_size, consume_thread_max=args.consume_threads,
                            instance_name=f"bench-{group}")
    consumer.subscribe(topic, "*")
    return consumer


async def _backlog_phase(args: argparse.Namespace, namesrv: str, broker: Child | None, topic: str) -> dict[str, Any]:
    async with Producer("bench_consume_fill", namesrv_addr=namesrv, compress_over=max(4096, args.size + 1),
                        send_msg_timeout=30.0, instance_name="bench-fill") as producer:
        await _prepare_topic(args, producer, broker, topic)
        fill_start = time.perf_counter()
        produced = await _fill(args, producer, topic)
        fill_seconds = time.perf_counter() - fill_start
    if not args.json:
        print(f"backlog: {produced:,} x {args.size} B written in {fill_seconds:.1f} s; reading it...", flush=True)
    if broker is not None:
        await asyncio.to_thread(wait_idle, broker, limit=30.0)
    target = produced
    count = 0
    first = last = 0.0
    done = asyncio.Event()
    clock = time.perf_counter

    async def handler(msg: MessageExt) -> None:
        nonlocal count, first, last
        count += 1
        if count == 1:
            first = clock()
        if count >= target:
            last = clock()
            done.set()

    consumer = _consumer(args, namesrv, f"bench_consume_backlog_{os.getpid()}", topic)
    consumer.register_handler(handler)
    reporter = None
    cpu_start = _cpu(broker)
    start = clock()
    await consumer.start()
    try:
        if not args.json:
            reporter = asyncio.ensure_future(_reporter(lambda: count, args.size))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(done.wait(), args.duration)
        end = last or clock()
        cpu = _cpu_used(cpu_start, broker)
    finally:
        if reporter is not None:
            reporter.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reporter
        await consumer.shutdown()
    total = end - start
    steady = (end - first) if first else 0.0
    return {
        "produced": produced, "consumed": count, "complete": count >= target, "seconds": total,
        "tps": count / total if total else 0.0, "steady_tps": (count - 1) / steady if steady else 0.0,
        "mb_per_s": count * args.size / total / 1e6 if total else 0.0,
        "first_message_s": first - start if first else None,
        **cpu,
    }


async def _reporter(count: Any, size: int) -> None:
    start = last_time = time.perf_counter()
    last_count = 0
    while True:
        await asyncio.sleep(1.0)
        now = time.perf_counter()
        current = count()
        rate = (current - last_count) / (now - last_time)
        print(f"[{now - start:5.1f}s] consumed {current:>10,}  {rate:>9,.0f} msg/s  {rate * size / 1e6:7.1f} MB/s",
              flush=True)
        last_time, last_count = now, current


async def _latency_phase(args: argparse.Namespace, namesrv: str, broker: Child | None, topic: str) -> dict[str, Any]:
    async with Producer("bench_consume_prepare", namesrv_addr=namesrv, instance_name="bench-prepare") as producer:
        await _prepare_topic(args, producer, broker, topic)
    capacity = int(args.rate * args.latency_duration * 1.2) + 1000
    precise = array("f")
    born = array("f")
    stored = array("f")  # store timestamp -> handler: the broker-to-consumer share of the latency
    received = 0
    expected = {"n": -1}
    caught_up = asyncio.Event()

    async def handler(msg: MessageExt) -> None:
        nonlocal received
        now_ns = time.time_ns()
        body = msg.body
        if len(body) < 8 or body[8:12] != b"LAT:":
            return
        received += 1
        if received == expected["n"]:
            caught_up.set()
        if len(precise) < capacity:
            precise.append((now_ns - _STAMP.unpack_from(body)[0]) / 1e6)
            born.append(now_ns / 1e6 - msg.born_timestamp)
            stored.append(now_ns / 1e6 - msg.store_timestamp)

    consumer = _consumer(args, namesrv, f"bench_consume_latency_{os.getpid()}", topic)
    consumer.register_handler(handler)
    await consumer.start()
    try:
        await _wait_assigned(consumer, topic, args.queues if broker is not None else 1)
        if not args.json:
            print(f"latency: producer at {args.rate:,} msg/s for {args.latency_duration:.0f} s...", flush=True)
        ctx = multiprocessing.get_context("spawn")
        results = ctx.Queue(maxsize=1)
        child = ctx.Process(target=_steady_producer,
                            args=(namesrv, topic, args.rate, args.latency_duration, args.size, results), daemon=True)
        cpu_start = _cpu(broker)
        child.start()
        sent_info: dict[str, Any] = await asyncio.to_thread(results.get, True, args.latency_duration + 60.0)
        await asyncio.to_thread(child.join, 10.0)
        expected["n"] = sent_info["sent"]
        if received < expected["n"]:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(caught_up.wait(), 10.0)
        cpu = _cpu_used(cpu_start, broker)
    finally:
        await consumer.shutdown()
    return {
        "rate": args.rate, "sent": sent_info["sent"], "send_failures": sent_info["failed"],
        "achieved_rate": sent_info["sent"] / sent_info["seconds"] if sent_info["seconds"] else 0.0,
        "received": received, "latency_ms": percentiles(precise), "born_latency_ms": percentiles(born),
        "store_to_handler_ms": percentiles(stored), **cpu,
    }


async def _wait_assigned(consumer: PushConsumer, topic: str, queues: int) -> None:
    deadline = time.monotonic() + 30.0
    while time.monotonic() < deadline:
        if len([q for q in consumer.assigned_queues if q.topic == topic]) >= queues:
            await asyncio.sleep(0.5)  # first long polls parked
            return
        await asyncio.sleep(0.05)
    raise RuntimeError(f"the consumer was not assigned the queues of {topic}")


def _steady_producer(namesrv: str, topic: str, rate: int, duration: float, size: int, results: Any) -> None:
    """Child process: send at ``rate`` msg/s for ``duration`` seconds with async sends; report the counts."""
    configure_logging("console", "ERROR")
    results.put(uvloop.run(_produce_steadily(namesrv, topic, rate, duration, size)))


async def _produce_steadily(namesrv: str, topic: str, rate: int, duration: float, size: int) -> dict[str, Any]:
    """Issue sends on a schedule (``rate`` per second, checked every millisecond) with ``send_async``; each
    body starts with ``time.time_ns()`` taken just before its send."""
    filler = b"x" * max(size - 12, 0)
    counts = {"sent": 0, "failed": 0}
    issued = 0

    def done(future: asyncio.Future[Any]) -> None:
        counts["failed" if future.cancelled() or future.exception() is not None else "sent"] += 1

    async with Producer("bench_consume_steady", namesrv_addr=namesrv, instance_name="bench-steady",
                        compress_over=max(4096, size + 1), max_in_flight=max(rate, 1024)) as producer:
        await producer.instance.refresher.refresh(topic, 5.0, publish=True)
        pending: set[asyncio.Future[Any]] = set()
        start = time.perf_counter()
        while (elapsed := time.perf_counter() - start) < duration:
            for _ in range(int(elapsed * rate) - issued):
                body = _STAMP.pack(time.time_ns()) + b"LAT:" + filler
                try:
                    future = producer.send_async(Message(topic, body))
                except Exception:
                    counts["failed"] += 1
                else:
                    pending.add(future)
                    future.add_done_callback(pending.discard)
                    future.add_done_callback(done)
                issued += 1
            await asyncio.sleep(0.001)
        seconds = time.perf_counter() - start
        if pending:
            await asyncio.wait(set(pending), timeout=10.0)
    return {"sent": counts["sent"], "failed": counts["failed"], "seconds": seconds}


def _print_summary(args: argparse.Namespace, summary: dict[str, Any]) -> None:
    if args.json:
        print(json.dumps(summary, default=str))
        return
    lines = [f"size {summary['size']} B  queues {summary['queues']}  pullBatchSize {summary['pull_batch_size']}  "
             f"consume threads {summary['consume_threads']}  cpus {summary['cpus']}"]
    backlog = summary.get("backlog")
    if backlog:
        lines.append(
            f"backlog: consumed {backlog['consumed']:,}/{backlog['produced']:,} in {backlog['seconds']:.2f} s  "
            f"TPS {backlog['tps']:,.0f} msg/s (steady {backlog['steady_tps']:,.0f})  {backlog['mb_per_s']:.1f} MB/s  "
            f"consumer CPU {backlog['consumer_cpu_pct']:.0f}%  broker CPU {_pct(backlog['broker_cpu_pct'])}")
    latency = summary.get("latency")
    if latency:
        lat, born = latency["latency_ms"], latency["born_latency_ms"]
        lines.append(
            f"latency at {latency['achieved_rate']:,.0f} msg/s (asked {latency['rate']:,}): received "
            f"{latency['received']:,}/{latency['sent']:,}  consumer CPU {latency['consumer_cpu_pct']:.0f}%  "
            f"broker CPU {_pct(latency['broker_cpu_pct'])}")
        if lat:
            lines.append(f"  e2e ms (send→handler): p50 {lat['p50']:.2f}  p90 {lat['p90']:.2f}  p99 {lat['p99']:.2f}  "
                         f"p999 {lat['p999']:.2f}  max {lat['max']:.2f}")
        if born:
            lines.append(f"  e2e ms (bornTimestamp→handler, ms clock): p50 {born['p50']:.1f}  p99 {born['p99']:.1f}")
        stored = latency.get("store_to_handler_ms")
        if stored:
            lines.append(f"  ms (storeTimestamp→handler, ms clock): p50 {stored['p50']:.1f}  p90 {stored['p90']:.1f}  "
                         f"p99 {stored['p99']:.1f}")
    lines.append(f"loadavg {' '.join(f'{x:.2f}' for x in summary['loadavg'])}")
    print("\n".join(lines))


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.0f}%"
