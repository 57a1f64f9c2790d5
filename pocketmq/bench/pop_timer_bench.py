"""``rmq-bench pop-timer``: RocketMQ 5's POP and timer messages, through the SDK, against one local broker.

Three phases, each bounded in count and time (``--phase``):

* **pop** — ``--count`` messages of ``--size`` bytes (100,000 x 1 KiB) are written (batched, not measured) to a
  topic of ``--queues`` queues; then three groups read the same backlog one after the other: a push consumer as
  the comparison's W4 reads it (pulls of 32, a batch handler called with 32, offsets committed as it goes), then
  the same push consumer in POP mode (pops of 32, the same batch handler, each message acked; its rate counts a
  message once its ack is answered), then ``--receivers`` loops of one :class:`~pocketmq.client.SimpleConsumer`
  (``receive(32)`` then ``ack_batch``; ``--ack async``: the next receive while the ack is in flight). The three
  take turns ``--repeat`` times (3), each turn a new group per reader. Reported: msg/s of each from its start to
  its last message (the median turn of each reader, and every turn's), the ratios of the medians to W4's, both
  processes' CPU per message in the median turn, and the ratio that CPU predicts.
* **timers** — ``--timers`` timer messages (100,000) are sent with delivery times spread evenly over
  ``--spread`` seconds (10) that start ``--lead`` seconds (120) after the first send; once the window has passed,
  the topic is read back and each message's lateness is its store time in the topic minus its due time
  (``TIMER_OUT_MS``): p50/p99/max, none early.
* **rss** — the broker's memory idle, then with ``--pending`` timer messages (1,000,000) of 16 bytes due an hour
  later: VmRSS, RssAnon (the broker's own memory: the wheel) and RssFile (commit-log pages it touched, which any
  million messages of that size also cost) from ``/proc``.

Without ``--namesrv`` it starts its own name server and ASYNC_MASTER / ASYNC_FLUSH broker as child processes (the
broker pinned to the last CPU and this process to the first, with ``--pin``). ``--json`` prints the summary.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from pocketmq.admin.api import AdminClient, split_namesrv
from pocketmq.bench.common import Child, create_topic, percentiles, run_bench, wait_for_route, wait_idle
from pocketmq.bench.compare.pocketmq import quiet_logs
from pocketmq.client import ConsumeFromWhere, Message, MessageExt, Producer, PushConsumer, SimpleConsumer
from pocketmq.client.consumer.pull import PullConsumer
from pocketmq.client.consumer.pull_result import PullStatus

_FILL_BATCH = 32
_FILL_CONCURRENCY = 16
_TIMER_IN_FLIGHT = 512


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--phase", choices=("all", "pop", "timers", "rss"), default="all")
    parser.add_argument("--count", type=int, default=100_000, help="backlog of the pop phase (100,000)")
    parser.add_argument("--size", type=int, default=1024, help="message body bytes of the pop phase (1024)")
    parser.add_argument("--queues", type=int, default=8, help="queues of the topics (8)")
    parser.add_argument("--receivers", type=int, default=16, help="concurrent receive loops of the SimpleConsumer (16)")
    parser.add_argument("--repeat", type=int, default=3,
                        help="pop phase: read the backlog this many times with each reader, in turns; the medians "
                             "are compared (3)")
    parser.add_argument("--pop-receives", type=int, default=4,
                        help="receives in flight of the push consumer in POP mode (its pop_receives, 4)")
    parser.add_argument("--ack", choices=("sync", "async"), default="sync",
                        help="pop loops await each ack_batch before the next receive (sync), or receive the next "
                             "batch while it is in flight (async, the Java client's ackAsync)")
    parser.add_argument("--timers", type=int, default=100_000, help="timer messages of the timers phase (100,000)")
    parser.add_argument("--spread", type=float, default=10.0, help="seconds their due times spread over (10)")
    parser.add_argument("--lead", type=float, default=120.0,
                        help="seconds from the first send to the window (120): every timer is sent before it")
    parser.add_argument("--pending", type=int, default=1_000_000, help="pending timers of the rss phase (1,000,000)")
    parser.add_argument("--duration", type=float, default=120.0, help="longest read of one group, seconds (120)")
    parser.add_argument("--namesrv", metavar="ADDR", help="use this cluster instead of starting one (no CPU/RSS)")
    parser.add_argument("--pin", action=argparse.BooleanOptionalAction, default=True,
                        help="pin the broker and this process to different CPUs (default on)")
    parser.add_argument("--keep-dir", action="store_true", help="keep our cluster's temporary directory")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")


def run(args: argparse.Namespace) -> int:
    if not (1 <= args.count <= 10_000_000 and 8 <= args.size <= 4 << 20 and 1 <= args.receivers <= 256
            and 1 <= args.pop_receives <= 64 and 1 <= args.repeat <= 20
            and 1 <= args.timers <= 10_000_000 and 1 <= args.pending <= 10_000_000 and args.spread > 0
            and args.lead > 0 and 1 <= args.queues <= 1024):
        print("rmq-bench pop-timer: an argument is out of range", file=sys.stderr)
        return 2
    quiet_logs()
    summary = run_bench(args, "pop-timer", lambda namesrv, broker: _bench(args, namesrv, broker))
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        _print(summary)
    return 0


async def _bench(args: argparse.Namespace, namesrv: str, broker: Child | None) -> dict[str, Any]:
    summary: dict[str, Any] = {"cpus": os.cpu_count(), "loadavg_before": os.getloadavg()}
    tag = f"{os.getpid()}x{int(time.time())}"
    if args.phase in ("all", "pop"):
        summary["pop"] = await _pop_phase(args, namesrv, broker, f"BenchPop{tag}")
    if args.phase in ("all", "timers"):
        summary["timers"] = await _timer_phase(args, namesrv, f"BenchTimer{tag}")
    if args.phase in ("all", "rss"):
        summary["rss"] = await _rss_phase(args, namesrv, broker, f"BenchTimerRss{tag}")
    summary["loadavg_after"] = os.getloadavg()
    return summary


def _producer(namesrv: str, name: str) -> Producer:
    return Producer(f"bench-{name}", namesrv_addr=namesrv, instance_name=f"bench-{name}", max_in_flight=4096,
                    send_msg_timeout=30.0)


async def _topic(producer: Producer, namesrv: str, topic: str, queues: int) -> None:
    async with AdminClient(split_namesrv(namesrv)) as admin:
        for addr in await admin.master_addrs():
            await create_topic(addr, topic, queues)
    await wait_for_route(producer, topic)


def _cpu(broker: Child | None) -> tuple[float, float | None, float]:
    return time.process_time(), broker.cpu_seconds() if broker else None, time.perf_counter()


def _rate(start: tuple[float, float | None, float], broker: Child | None, count: int) -> dict[str, Any]:
    cpu0, broker0, wall0 = start
    wall = time.perf_counter() - wall0
    broker_now = broker.cpu_seconds() if broker else None
    return {"messages": count, "seconds": round(wall, 3), "msg_per_s": round(count / wall) if wall else 0,
            "client_cpu_us_per_msg": round(1e6 * (time.process_time() - cpu0) / max(count, 1), 1),
            "broker_cpu_us_per_msg": None if broker0 is None or broker_now is None
            else round(1e6 * (broker_now - broker0) / max(count, 1), 1)}


# -- pop -------------------------------------------------------------------------------------------------------


async def _pop_phase(args: argparse.Namespace, namesrv: str, broker: Child | None, topic: str) -> dict[str, Any]:
    async with _producer(namesrv, "pop-fill") as producer:
        await _topic(producer, namesrv, topic, args.queues)
        payload = os.urandom(args.size)
        batches = asyncio.Semaphore(_FILL_CONCURRENCY)

        async def batch() -> None:
            async with batches:
                await producer.send_batch([Message(topic, payload) for _ in range(_FILL_BATCH)])

        await asyncio.gather(*(batch() for _ in range(args.count // _FILL_BATCH)))
    count = args.count // _FILL_BATCH * _FILL_BATCH
    if broker is not None:
        await asyncio.to_thread(wait_idle, broker)
    runs: dict[str, list[dict[str, Any]]] = {"push_w4": [], "pop_push": [], "pop": []}
    for rep in range(args.repeat):  # the readers take turns, each time as a new group reading the whole backlog
        runs["push_w4"].append(await _read_push(namesrv, topic, count, args.duration, broker, pop=False, rep=rep))
        runs["pop_push"].append(await _read_push(namesrv, topic, count, args.duration, broker, pop=True, rep=rep,
                                                 receives=args.pop_receives))
        runs["pop"].append(await _read_pop(namesrv, topic, count, args.duration, args.receivers, args.ack == "async",
                                           broker, rep))
    push, pop_push, pop = (_median_run(runs[name]) for name in ("push_w4", "pop_push", "pop"))
    return {"size": args.size, "queues": args.queues, "receivers": args.receivers, "ack": args.ack,
            "pop_receives": args.pop_receives, "repeat": args.repeat,
            "rates": {name: [r["msg_per_s"] for r in rs] for name, rs in runs.items()},
            "push_w4": push, "pop_push": pop_push, "pop": pop,
            "pop_push_over_push": _rate_ratio(push, pop_push), "pop_push_over_push_by_cpu": _cpu_ratio(push, pop_push),
            "pop_over_push": _rate_ratio(push, pop), "pop_over_push_by_cpu": _cpu_ratio(push, pop)}


def _median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The run of median msg/s (the lower middle one of an even count)."""
    return sorted(runs, key=lambda r: r["msg_per_s"])[(len(runs) - 1) // 2]


def _rate_ratio(push: dict[str, Any], pop: dict[str, Any]) -> float:
    return round(pop["msg_per_s"] / push["msg_per_s"], 3) if push["msg_per_s"] else 0.0


def _cpu_ratio(push: dict[str, Any], pop: dict[str, Any]) -> float | None:
    """The ratio of rates the CPU per message predicts when each process has its CPU (pinned): the busier of
    client and broker bounds each reader. Steadier than the rates on a shared machine, whose load swings them."""
    def bound(r: dict[str, Any]) -> float | None:
        costs = (r["client_cpu_us_per_msg"], r["broker_cpu_us_per_msg"])
        return None if None in costs else max(costs)

    push_bound, pop_bound = bound(push), bound(pop)
    return round(push_bound / pop_bound, 3) if push_bound and pop_bound else None


async def _read_push(namesrv: str, topic: str, count: int, seconds: float, broker: Child | None, *,
                     pop: bool, rep: int, receives: int = 4) -> dict[str, Any]:
    """W4 (``pop=False``), or the same consumer in POP mode, whose window closes when every ack is answered."""
    done = asyncio.Event()
    got = 0

    async def handler(msgs: list[MessageExt]) -> None:
        nonlocal got
        got += len(msgs)
        if got >= count:
            done.set()

    name = f"bench-pop-push-{rep}" if pop else f"bench-w4-{rep}"
    consumer = PushConsumer(name, namesrv_addr=namesrv, instance_name=name, pull_batch_size=32,
                            consume_message_batch_max_size=32, consume_from_where=ConsumeFromWhere.FIRST_OFFSET,
                            pop=pop, pop_invisible_time=60.0, pop_receives=receives)
    consumer.subscribe(topic, "*")
    consumer.register_batch_handler(handler)
    start = _cpu(broker)
    deadline = time.monotonic() + seconds
    await consumer.start()
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(done.wait(), seconds)
    # the last acks are in flight; the consumer counts them but has no event for them
    while pop and consumer.acked_count < got and time.monotonic() < deadline:  # noqa: ASYNC110
        await asyncio.sleep(0.001)
    result = _rate(start, broker, consumer.acked_count if pop else got)
    await consumer.shutdown()
    return result


async def _read_pop(namesrv: str, topic: str, count: int, seconds: float, receivers: int, ack_async: bool,
                    broker: Child | None, rep: int) -> dict[str, Any]:
    acked = 0
    deadline = time.monotonic() + seconds
    consumer = SimpleConsumer(f"bench-pop-{rep}", namesrv_addr=namesrv, instance_name=f"bench-pop-{rep}",
                              await_duration=1.0, invisible_duration=60.0)
    consumer.subscribe(topic)

    async def loop() -> None:
        nonlocal acked
        while acked < count and time.monotonic() < deadline:
            messages = await consumer.receive(32)
            if messages:
                await consumer.ack_batch(messages)
                acked += len(messages)

    async def loop_ack_async() -> None:
        # The Java client's ackAsync: a batch's ack is in flight while the next batch is received (one ack
        # outstanding per loop); a message counts once its ack is answered.
        nonlocal acked
        ack: asyncio.Task[int] | None = None
        while acked < count and time.monotonic() < deadline:
            messages = await consumer.receive(32)
            if ack is not None:
                done = await ack  # not ``acked += await ack``: that reads ``acked`` before the other loops add
                acked += done
                ack = None
            if messages:
                ack = asyncio.ensure_future(_ack_counted(consumer, messages))
        if ack is not None:
            done = await ack
            acked += done

    start = _cpu(broker)
    await consumer.start()
    await asyncio.gather(*((loop_ack_async if ack_async else loop)() for _ in range(receivers)))
    result = _rate(start, broker, acked)
    await consumer.shutdown()
    return result


async def _ack_counted(consumer: SimpleConsumer, messages: list[MessageExt]) -> int:
    await consumer.ack_batch(messages)
    return len(messages)


# -- timers ----------------------------------------------------------------------------------------------------


async def _send_timers(producer: Producer, topic: str, dues: list[int], body: bytes) -> None:
    window = asyncio.Semaphore(_TIMER_IN_FLIGHT)

    async def one(due: int) -> None:
        async with window:
            await producer.send(Message(topic, body, deliver_at=due))

    await asyncio.gather(*(one(due) for due in dues))


async def _timer_phase(args: argparse.Namespace, namesrv: str, topic: str) -> dict[str, Any]:
    async with _producer(namesrv, "timers") as producer:
        await _topic(producer, namesrv, topic, args.queues)
        first = time.time()
        start_ms = int((first + args.lead) * 1000)
        step = args.spread * 1000 / args.timers
        dues = [start_ms + int(i * step) for i in range(args.timers)]
        await _send_timers(producer, topic, dues, b"t" * 16)
        sent_s = time.time() - first
    if sent_s >= args.lead:
        return {"error": f"sending took {sent_s:.1f} s, longer than --lead {args.lead}: raise --lead"}
    await asyncio.sleep(max(0.0, start_ms / 1000 + args.spread - time.time()) + 2.0)
    lateness = await _read_lateness(namesrv, topic)
    return {"timers": args.timers, "spread_s": args.spread, "send_seconds": round(sent_s, 1),
            "fired": len(lateness), "early": sum(1 for v in lateness if v < 0),
            "lateness_ms": {k: round(v, 1) for k, v in percentiles(lateness).items()}}


async def _read_lateness(namesrv: str, topic: str) -> list[int]:
    out: list[int] = []
    async with PullConsumer("bench-timer-read", namesrv_addr=namesrv, instance_name="bench-timer-read") as reader:
        for mq in await reader.fetch_subscribe_message_queues(topic):
            offset = 0
            while True:
                result = await reader.pull(mq, "*", offset, 32)
                if result.status is not PullStatus.FOUND:
                    break
                out.extend(m.store_timestamp - int(m.get_property("TIMER_OUT_MS") or 0) for m in result.messages)
                offset = result.next_begin_offset
    return out


# -- rss -------------------------------------------------------------------------------------------------------


def _memory(pid: int) -> dict[str, int]:
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "RssAnon", "RssFile"):
            fields[name] = int(value.split()[0]) // 1024  # MiB
    return fields


async def _rss_phase(args: argparse.Namespace, namesrv: str, broker: Child | None, topic: str) -> dict[str, Any]:
    if broker is None:
        return {"error": "needs our own broker (no --namesrv)"}
    await asyncio.to_thread(wait_idle, broker)
    idle = _memory(broker.popen.pid)
    async with _producer(namesrv, "rss") as producer:
        await _topic(producer, namesrv, topic, args.queues)
        base = int((time.time() + 3600) * 1000)
        sent_at = time.time()
        for start in range(0, args.pending, 100_000):
            dues = [base + (i % 3_600_000) for i in range(start, min(args.pending, start + 100_000))]
            await _send_timers(producer, topic, dues, b"x" * 16)
        send_seconds = time.time() - sent_at
    await asyncio.to_thread(wait_idle, broker)
    loaded = _memory(broker.popen.pid)
    return {"pending": args.pending, "send_seconds": round(send_seconds, 1), "idle_mib": idle, "loaded_mib": loaded,
            "delta_mib": {k: loaded[k] - idle.get(k, 0) for k in loaded}}


def _print(summary: dict[str, Any]) -> None:
    print(f"cpus {summary['cpus']}, load before {summary['loadavg_before']}, after {summary['loadavg_after']}")
    pop = summary.get("pop")
    if pop:
        for name, label in (("push_w4", "push W4"), ("pop_push", "push POP"), ("pop", "simple")):
            r = pop[name]
            print(f"{label:8} {r['messages']:>9,} msgs in {r['seconds']:7.2f} s = {r['msg_per_s']:>8,} msg/s "
                  f"(client {r['client_cpu_us_per_msg']} us/msg, broker {r['broker_cpu_us_per_msg']} us/msg)")
        for key, label in (("pop_push_over_push", "push POP / W4"), ("pop_over_push", "simple / W4")):
            by_cpu = pop.get(f"{key}_by_cpu")
            print(f"{label} = {pop[key]:.2f}" + ("" if by_cpu is None else
                  f" (by CPU per message, the busier process of each: {by_cpu:.2f})"))
        print(f"simple: {pop['receivers']} loops, ack {pop.get('ack', 'sync')}; medians of {pop['repeat']} turns, "
              f"msg/s of each: {json.dumps(pop['rates'])}")
    timers = summary.get("timers")
    if timers:
        print(f"timers {json.dumps(timers)}")
    rss = summary.get("rss")
    if rss:
        print(f"rss {json.dumps(rss)}")
