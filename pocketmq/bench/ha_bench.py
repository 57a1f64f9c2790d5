"""``rmq-bench ha``: SYNC_MASTER beside ASYNC_MASTER, each with one slave, in one run.

For each role: TPS and p50/p99 send latency for 1 and for 64 concurrent producers (1 KiB messages), and the
replication lag under a paced load (default 20,000 msg/s): for each master max offset sampled every 5 ms
from GET_BROKER_RUNTIME_INFO, the time until the slave's acknowledged offset reached it. Name server,
masters and slaves are separate processes; every phase is bounded in time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import uvloop

from pocketmq.bench.common import Child, percentiles, wait_idle
from pocketmq.client.core.message import Message, SendStatus
from pocketmq.client.producer.producer import Producer
from pocketmq.remoting.client import RemotingClient
from pocketmq.remoting.codes import RequestCode
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.errors import PocketMQError

TOPIC = "BenchHA"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--duration", type=float, default=5.0, help="seconds per throughput phase")
    parser.add_argument("--size", type=int, default=1024, help="message body bytes")
    parser.add_argument("--concurrency", default="1,64", help="comma-separated producer counts")
    parser.add_argument("--lag-rate", type=int, default=20_000, help="messages/s for the lag phase")
    parser.add_argument("--lag-duration", type=float, default=5.0, help="seconds of the lag phase")
    parser.add_argument("--json", action="store_true", help="print the results as JSON too")


def run(args: argparse.Namespace) -> int:
    results = uvloop.run(_main(args))
    _print(results)
    if args.json:
        print(json.dumps(results, indent=2))
    return 0


async def _main(args: argparse.Namespace) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix="rmq-bench-ha-"))
    children: list[Child] = []
    try:
        ns = Child([sys.executable, "-m", "pocketmq.namesrv.main", "--listen", "127.0.0.1", "--port", "0",
                    "--kv-config-path", str(workdir / "kv.json"), "--log-level", "WARNING"], "NAMESRV READY")
        children.append(ns)
        namesrv = ns.wait_ready()
        results: dict[str, Any] = {}
        for role in ("SYNC_MASTER", "ASYNC_MASTER"):
            results[role] = await _role(args, role, namesrv, workdir / role, children)
        return results
    finally:
        for child in reversed(children):
            child.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def _broker(role: str, name: str, namesrv: str, store: Path, broker_id: int) -> Child:
    return Child([sys.executable, "-m", "pocketmq.broker.main", "-n", namesrv, "--listen-host", "127.0.0.1",
                  "--listen-port", "0", "--broker-name", name, "--role", role, "--broker-id", str(broker_id),
                  "--store-dir", str(store), "--log-level", "WARNING"], "BROKER READY")


async def _runtime(client: RemotingClient, addr: str) -> dict[str, str]:
    resp = await client.invoke(addr, RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO), 3)
    table: dict[str, str] = json.loads(bytes(resp.body or b""))["table"]
    return table


async def _role(args: argparse.Namespace, role: str, namesrv: str, workdir: Path,
                children: list[Child]) -> dict[str, Any]:
    name = f"broker-{role.lower()}"
    master = _broker(role, name, namesrv, workdir / "master", 0)
    children.append(master)
    master_addr = master.wait_ready()
    slave = _broker("SLAVE", name, namesrv, workdir / "slave", 1)
    children.append(slave)
    slave.wait_ready()
    admin = RemotingClient()
    deadline = time.monotonic() + 30
    while (await _runtime(admin, master_addr)).get("haConnectionCount") != "1":
        if time.monotonic() > deadline:
            raise RuntimeError(f"{role}: slave did not attach")
        await asyncio.sleep(0.1)
    wait_idle(master)
    wait_idle(slave)
    body = b"x" * args.size
    out: dict[str, Any] = {}
    async with Producer("BenchHA", namesrv_addr=namesrv, send_msg_timeout=5.0) as producer:
        await producer.send(Message(TOPIC, body))  # creates the topic and warms the route
        for count in (int(c) for c in args.concurrency.split(",")):
            out[f"x{count}"] = await _throughput(producer, body, count, args.duration)
        out["lag"] = await _lag(producer, admin, master_addr, body, args.lag_rate, args.lag_duration)
    await admin.close()
    master.stop()
    slave.stop()
    return out


async def _throughput(producer: Producer, body: bytes, senders: int, duration: float) -> dict[str, Any]:
    latencies: list[float] = []
    failures = 0
    not_ok = 0
    stop_at = time.monotonic() + duration

    async def sender() -> None:
        nonlocal failures, not_ok
        while time.monotonic() < stop_at:
            start = time.perf_counter()
            try:
                result = await producer.send(Message(TOPIC, body))
            except PocketMQError:
                failures += 1
                continue
            latencies.append((time.perf_counter() - start) * 1e6)
            if result.status is not SendStatus.SEND_OK:
                not_ok += 1

    began = time.monotonic()
    await asyncio.gather(*(sender() for _ in range(senders)))
    elapsed = time.monotonic() - began
    pct = percentiles(latencies)
    return {"senders": senders, "tps": len(latencies) / elapsed, "p50_us": pct.get("p50", 0.0),
            "p99_us": pct.get("p99", 0.0), "failures": failures, "not_send_ok": not_ok}


async def _lag(producer: Producer, admin: RemotingClient, master: str, body: bytes, rate: int,
               duration: float) -> dict[str, Any]:
    """Replication lag = for each sampled master max offset, the time until the slave's acknowledged offset
    reached it (sampled every 5 ms, so figures are at that resolution)."""
    samples: list[tuple[float, int, int]] = []  # (time, master max offset, slave acknowledged offset)
    done = asyncio.Event()

    async def sampler() -> None:
        while not done.is_set():
            table = await _runtime(admin, master)
            samples.append((time.monotonic(), int(table["haMasterMaxOffset"]), int(table["haPush2SlaveMaxOffset"])))
            await asyncio.sleep(0.005)

    sample_task = asyncio.ensure_future(sampler())
    sent = 0
    began = time.monotonic()
    pending: set[asyncio.Future[Any]] = set()
    while time.monotonic() - began < duration:
        due = int((time.monotonic() - began) * rate) - sent
        for _ in range(max(0, due)):
            if len(pending) >= 1000:
                break
            future = producer.send_async(Message(TOPIC, body))
            pending.add(future)
            future.add_done_callback(pending.discard)
            sent += 1
        await asyncio.sleep(0.005)
    if pending:
        await asyncio.wait(pending, timeout=10)
    await asyncio.sleep(0.2)
    done.set()
    await sample_task
    elapsed = time.monotonic() - began
    lags = _ack_delays(samples)
    pct = percentiles(lags)
    return {"offered_rate": rate, "achieved_rate": sent / elapsed, "lag_ms_p50": pct.get("p50", 0.0),
            "lag_ms_p99": pct.get("p99", 0.0), "lag_ms_max": pct.get("max", 0.0), "samples": len(lags)}


def _ack_delays(samples: list[tuple[float, int, int]]) -> list[float]:
    """For every sample, ms until a later sample shows the slave acknowledged that sample's max offset."""
    delays = []
    j = 0
    for t, max_offset, _ack in samples:
        while j < len(samples) and samples[j][2] < max_offset:
            j += 1
        if j == len(samples):
            break
        delays.append(max(0.0, (samples[j][0] - t) * 1000))
    return delays


def _print(results: dict[str, Any]) -> None:
    print(f"{'role':<13} {'producers':>9} {'msg/s':>10} {'p50 µs':>9} {'p99 µs':>9} {'not OK':>7} {'failed':>7}")
    for role, out in results.items():
        for key, row in out.items():
            if key.startswith("x"):
                print(f"{role:<13} {row['senders']:>9} {row['tps']:>10.0f} {row['p50_us']:>9.0f} "
                      f"{row['p99_us']:>9.0f} {row['not_send_ok']:>7} {row['failures']:>7}")
    sync, async_ = results.get("SYNC_MASTER", {}), results.get("ASYNC_MASTER", {})
    for key in sync:
        if key.startswith("x") and key in async_ and async_[key]["tps"]:
            ratio = sync[key]["tps"] / async_[key]["tps"]
            added = sync[key]["p50_us"] - async_[key]["p50_us"]
            print(f"{key[1:]} producers: SYNC/ASYNC rate {ratio:.0%}, sync replication adds {added:.0f} µs to p50")
    for role, out in results.items():
        lag = out.get("lag", {})
        print(f"{role}: replication lag at {lag.get('achieved_rate', 0):.0f} msg/s: "
              f"p50 {lag.get('lag_ms_p50', 0):.1f} ms, p99 {lag.get('lag_ms_p99', 0):.1f} ms, "
              f"max {lag.get('lag_ms_max', 0):.1f} ms ({lag.get('samples', 0)} samples, 5 ms resolution)")
