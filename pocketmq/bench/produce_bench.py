"""``rmq-bench produce``: producer throughput and latency through the SDK, in the manner of RocketMQ's
benchmark ``Producer`` (N concurrent senders, a message size, a line every second, a summary at the end).

Without ``--namesrv`` it starts its own cluster in a temporary directory: a name server and one
ASYNC_MASTER / ASYNC_FLUSH broker, each a separate process, and creates the topic with ``--queues`` queues.
With ``--pin`` (the default except for one sequential sender) and at least two CPUs the broker is pinned to
the last CPU and this process to the first, so each has a core of its own. With ``--namesrv`` it sends to
that cluster (the topic is auto-created through ``TBW102`` unless it exists).

Modes:

* ``sync``   — ``--senders`` tasks, each awaiting ``producer.send`` in a loop: ``--senders 1`` measures the
  sequential round trip, ``--senders 1000`` pipelined sends (up to 1,000 in flight on one connection);
* ``async``  — one task keeping ``--in-flight`` ``send_async`` futures outstanding;
* ``oneway`` — ``--senders`` tasks calling ``send_oneway`` (no answers, so no latency figures);
* ``batch``  — ``--senders`` tasks sending ``--batch-size`` messages per ``send_batch``.

Bounded in count (``--messages``) and time (``--duration``); ``--warmup`` seconds of traffic come first and
are not measured. Latencies are per request (per batch in ``batch`` mode), kept in a float32 array capped
at ``--messages`` entries. Every second: TPS, MB/s, p50/p99 of that second, failures. At the end: the
same over the whole run plus p999, max, and CPU used by this process and by the broker process (when it is
ours). ``--json`` prints the summary as one JSON object instead.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
import time
from array import array
from collections.abc import Callable
from typing import Any

import uvloop

from pocketmq.bench.common import Child, create_topic, local_cluster, percentiles, pin_self
from pocketmq.client.core.message import Message
from pocketmq.client.producer.producer import Producer
from pocketmq.common.logs import configure_logging
from pocketmq.remoting.codes import SerializeType

MODES = ("sync", "async", "oneway", "batch")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--mode", choices=MODES, default="sync", help="how to send (default sync)")
    parser.add_argument("--senders", type=int, default=None,
                        help="concurrent sender tasks for sync/oneway/batch (default: sync 1000, oneway 100, "
                             "batch 32; 1 = sequential)")
    parser.add_argument("--in-flight", type=int, default=1000, help="outstanding futures in async mode (1000)")
    parser.add_argument("--size", type=int, default=1024, help="message body bytes (default 1024)")
    parser.add_argument("--batch-size", type=int, default=32, help="messages per batch in batch mode (32)")
    parser.add_argument("--messages", type=int, default=2_000_000, help="stop after this many messages")
    parser.add_argument("--duration", type=float, default=10.0, help="stop after this many seconds (10)")
    parser.add_argument("--warmup", type=float, default=2.0, help="unmeasured seconds before the run (2)")
    parser.add_argument("--topic", default="BenchmarkTest")
    parser.add_argument("--group", default="benchmark_producer")
    parser.add_argument("--namesrv", metavar="ADDR", help="use this cluster (a:9876;b:9876) instead of starting one")
    parser.add_argument("--queues", type=int, default=8, help="queues of the topic in our own cluster (8)")
    parser.add_argument("--serialize", choices=("msgpack", "json"), default="msgpack",
                        help="request header encoding (default msgpack)")
    parser.add_argument("--timeout", type=float, default=3.0, help="send timeout in seconds (3)")
    parser.add_argument("--pin", action=argparse.BooleanOptionalAction, default=None,
                        help="pin this process and our broker to different CPUs (default: on, except for one "
                             "sequential sender, whose ping-pong is faster when both may share a CPU)")
    parser.add_argument("--keep-dir", action="store_true", help="keep our cluster's temporary directory")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")


def run(args: argparse.Namespace) -> int:
    problem = _check_args(args)
    if problem:
        print(f"rmq-bench produce: {problem}", file=sys.stderr)
        return 2
    configure_logging("console", "ERROR")
    with contextlib.ExitStack() as stack:
        if args.namesrv:
            namesrv, broker = args.namesrv, None
        else:
            cluster = stack.enter_context(local_cluster(args, "produce"))
            namesrv, broker = cluster.namesrv, cluster.broker
        if args.pin:
            pin_self()
        summary = uvloop.run(_bench(args, namesrv, broker))
    _print_summary(args, summary)
    return 0 if summary["sent"] > 0 else 1


#: ``--senders`` when not given: 1,000 requests in flight for sync, 32 batches (1,024 messages) for batch.
DEFAULT_SENDERS = {"sync": 1000, "async": 1, "oneway": 100, "batch": 32}


def _check_args(args: argparse.Namespace) -> str | None:
    if args.senders is None:
        args.senders = DEFAULT_SENDERS[args.mode]
    if args.pin is None:
        # One request at a time: each answer wakes the other process; across CPUs that wake-up is dear on
        # virtual CPUs, on a shared CPU it is a context switch. Many requests in flight: one CPU each wins.
        args.pin = not (args.mode in ("sync", "batch") and args.senders == 1)
    if args.size < 1 or args.size > 4 * 1024 * 1024:
        return "--size must be 1..4194304"
    if args.senders < 1 or args.senders > 100_000 or args.in_flight < 1 or args.in_flight > 100_000:
        return "--senders and --in-flight must be 1..100000"
    if args.batch_size < 1 or args.batch_size > 10_000:
        return "--batch-size must be 1..10000"
    if args.messages < 1 or args.messages > 100_000_000:
        return "--messages must be 1..100000000"
    if args.duration <= 0 or args.warmup < 0 or args.timeout <= 0:
        return "--duration and --timeout must be positive, --warmup not negative"
    return None



# -- our own cluster -----------------------------------------------------------------------------------------


class _Stats:
    """Counters and a bounded latency record (microseconds, float32)."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.latencies = array("f")
        self.sent = 0
        self.failed = 0
        self.first_error: str | None = None
        self.bytes = 0

    def ok(self, count: int, latency_s: float | None, size: int) -> None:
        self.sent += count
        self.bytes += size
        if latency_s is not None and len(self.latencies) < self.capacity:
            self.latencies.append(latency_s * 1e6)

    def fail(self, count: int, error: BaseException) -> None:
        self.failed += count
        if self.first_error is None:
            self.first_error = f"{type(error).__name__}: {error}"



async def _wait_for_route(producer: Producer, topic: str, deadline: float) -> None:
    """Until the name server has the topic's own route (the broker created it and registered)."""
    instance = producer.instance
    while time.monotonic() < deadline:
        await producer.send(Message(topic, b"warm-up"))
        with contextlib.suppress(Exception):
            if await instance.refresher.fetch_route(topic, 1.0) is not None:
                await instance.refresher.refresh(topic, 3.0, publish=True)
                return
        await asyncio.sleep(0.2)


async def _bench(args: argparse.Namespace, namesrv: str, broker: Child | None) -> dict[str, Any]:
    serialize = SerializeType.MSGPACK if args.serialize == "msgpack" else SerializeType.JSON
    body = os.urandom(args.size // 2).hex().encode()[: args.size].ljust(args.size, b"x")  # incompressible-ish
    max_in_flight = max(args.in_flight, args.senders) + 16
    producer = Producer(args.group, namesrv_addr=namesrv, send_msg_timeout=args.timeout, serialize_type=serialize,
                        max_in_flight=max_in_flight, compress_over=max(4096, args.size + 1))
    await producer.start()
    try:
        if broker is not None:
            await create_topic(broker.addr, args.topic, args.queues)
        await _wait_for_route(producer, args.topic, time.monotonic() + 30.0)
        if args.warmup:
            await _phase(args, producer, body, _Stats(0), args.warmup, args.messages, report=False)
        stats = _Stats(args.messages)
        cpu0, broker0, wall0 = time.process_time(), broker.cpu_seconds() if broker else None, time.perf_counter()
        await _phase(args, producer, body, stats, args.duration, args.messages, report=not args.json)
        wall = time.perf_counter() - wall0
        cpu = time.process_time() - cpu0
        broker_cpu = None
        if broker is not None and broker0 is not None:
            now = broker.cpu_seconds()
            broker_cpu = None if now is None else now - broker0
    finally:
        await producer.shutdown()
    return {
        "mode": args.mode, "size": args.size, "senders": args.senders, "in_flight": args.in_flight,
        "queues": args.queues if broker is not None else None, "serialize": args.serialize,
        "batch_size": args.batch_size if args.mode == "batch" else 1, "sent": stats.sent, "failed": stats.failed,
        "first_error": stats.first_error, "seconds": wall, "tps": stats.sent / wall,
        "mb_per_s": stats.bytes / wall / 1e6, "latency_us": percentiles(stats.latencies),
        "client_cpu_pct": 100.0 * cpu / wall,
        "broker_cpu_pct": None if broker_cpu is None else 100.0 * broker_cpu / wall,
        "loadavg": os.getloadavg(), "cpus": os.cpu_count(),
    }


async def _phase(args: argparse.Namespace, producer: Producer, body: bytes, stats: _Stats, duration: float,
                 limit: int, *, report: bool) -> None:
    stop_at = time.monotonic() + duration
    budget = {"left": limit}

    def take(count: int) -> bool:
        if budget["left"] < count or time.monotonic() >= stop_at:
            return False
        budget["left"] -= count
        return True

    reporter = asyncio.ensure_future(_reporter(stats)) if report else None
    try:
        if args.mode == "async":
            await _run_async(args, producer, body, stats, take)
        else:
            worker = {"sync": _sync_sender, "oneway": _oneway_sender, "batch": _batch_sender}[args.mode]
            await asyncio.gather(*(worker(args, producer, body, stats, take) for _ in range(args.senders)))
    finally:
        if reporter is not None:
            reporter.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reporter


Take = Callable[[int], bool]


async def _sync_sender(args: argparse.Namespace, producer: Producer, body: bytes, stats: _Stats, take: Take) -> None:
    topic, size, clock = args.topic, len(body), time.perf_counter
    while take(1):
        begin = clock()
        try:
            await producer.send(Message(topic, body))
        except Exception as exc:
            stats.fail(1, exc)
            continue
        stats.ok(1, clock() - begin, size)


async def _oneway_sender(args: argparse.Namespace, producer: Producer, body: bytes, stats: _Stats,
                         take: Take) -> None:
    topic, size = args.topic, len(body)
    while take(1):
        try:
            await producer.send_oneway(Message(topic, body))
        except Exception as exc:
            stats.fail(1, exc)
            await asyncio.sleep(0)
            continue
        stats.ok(1, None, size)


async def _batch_sender(args: argparse.Namespace, producer: Producer, body: bytes, stats: _Stats, take: Take) -> None:
    topic, count, clock = args.topic, args.batch_size, time.perf_counter
    size = count * len(body)
    while take(count):
        begin = clock()
        try:
            await producer.send_batch([Message(topic, body) for _ in range(count)])
        except Exception as exc:
            stats.fail(count, exc)
            continue
        stats.ok(count, clock() - begin, size)


async def _run_async(args: argparse.Namespace, producer: Producer, body: bytes, stats: _Stats, take: Take) -> None:
    window = asyncio.Semaphore(args.in_flight)
    topic, size, clock = args.topic, len(body), time.perf_counter

    def done(begin: float, future: asyncio.Future[Any]) -> None:
        window.release()
        if future.cancelled():
            stats.fail(1, asyncio.CancelledError())
        elif future.exception() is not None:
            stats.fail(1, future.exception())  # type: ignore[arg-type]
        else:
            stats.ok(1, clock() - begin, size)

    while take(1):
        await window.acquire()
        begin = clock()
        try:
            future = producer.send_async(Message(topic, body))
        except Exception as exc:
            window.release()
            stats.fail(1, exc)
            continue
        future.add_done_callback(lambda f, b=begin: done(b, f))  # type: ignore[misc]
    for _ in range(args.in_flight):
        await window.acquire()


async def _reporter(stats: _Stats) -> None:
    start = last_time = time.perf_counter()
    last_sent = last_failed = last_bytes = 0
    last_index = 0
    while True:
        await asyncio.sleep(1.0)
        now = time.perf_counter()
        span = now - last_time
        window = stats.latencies[last_index:]
        pct = percentiles(window)
        line = (f"[{now - start:5.1f}s] tps {int((stats.sent - last_sent) / span):>8,} msg/s  "
                f"{(stats.bytes - last_bytes) / span / 1e6:7.1f} MB/s  failed {stats.failed - last_failed}")
        if pct:
            line += f"  p50 {pct['p50']:8.0f} us  p99 {pct['p99']:8.0f} us"
        print(line, flush=True)
        last_time, last_sent, last_failed, last_bytes = now, stats.sent, stats.failed, stats.bytes
        last_index = len(stats.latencies)


def _print_summary(args: argparse.Namespace, summary: dict[str, Any]) -> None:
    if args.json:
        print(json.dumps(summary, indent=None, default=str))
        return
    lat = summary["latency_us"]
    lines = [
        f"mode {summary['mode']}  size {summary['size']} B  senders {summary['senders']}  "
        f"in-flight {summary['in_flight']}  batch {summary['batch_size']}",
        f"sent {summary['sent']:,}  failed {summary['failed']:,}  in {summary['seconds']:.2f} s",
        f"TPS {summary['tps']:,.0f} msg/s  {summary['mb_per_s']:.1f} MB/s",
    ]
    if lat:
        lines.append(f"latency us: p50 {lat['p50']:.0f}  p90 {lat['p90']:.0f}  p99 {lat['p99']:.0f}  "
                     f"p999 {lat['p999']:.0f}  max {lat['max']:.0f}  mean {lat['mean']:.0f}")
    cpu = f"client CPU {summary['client_cpu_pct']:.0f}%"
    if summary["broker_cpu_pct"] is not None:
        cpu += f"  broker CPU {summary['broker_cpu_pct']:.0f}%"
    lines.append(cpu + f"  loadavg {' '.join(f'{x:.2f}' for x in summary['loadavg'])}  cpus {summary['cpus']}")
    if summary["first_error"]:
        lines.append(f"first error: {summary['first_error']}")
    print("\n".join(lines))
