"""``rmq-bench failover``: how long a group of controller mode takes a write again after its master dies.

The ``2m-2s-controller`` preset runs as local processes (three name servers carrying the controllers, two groups of
two replicas, small commit-log files). A topic lives on group ``broker-a`` only, so a send can succeed only there. One
SDK producer sends to it, a new send every ``--interval``. Each round kills
(SIGKILL) or freezes (SIGSTOP) the group's current master and measures, with the producer's clock, the time from the
signal to the first SEND_OK stored by another replica; and, from the new master's own log, the time from its taking
over (``took_over_as_master``) to that SEND_OK (how long the SDK took to find it). Sends go out at a steady rate,
not one after another: a send stuck on a frozen master waits out its timeout, and the first SEND_OK is that of a
later send. Then the old master is restarted
(or thawed) and the next round waits until both replicas are in sync again. Every wait is bounded.

``--client cpp`` sends with Apache's 4.x C++ client instead (a third-party client: it learns the new master on its
next route poll).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import json
import os
import shutil
import signal
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import uvloop

from pocketmq.admin.api import AdminClient
from pocketmq.admin.cluster import Child, LocalCluster
from pocketmq.bench.common import percentiles
from pocketmq.client import Message, Producer, SendStatus
from pocketmq.client.core.errors import SendFailedError
from pocketmq.common.logs import configure_logging
from pocketmq.common.record import decode_message_id
from pocketmq.remoting.errors import PocketMQError

__all__ = ["add_arguments", "run"]

TOPIC = "FailoverBench"
GROUP = "broker-a"
ROUND_LIMIT = 60.0
CPP_ROUND_LIMIT = 90.0
"""The C++ client finds a new master on its route poll (30 s by default), plus its own retries."""
MAX_IN_FLIGHT = 2000
STORE_PROPERTIES = {"mappedFileSizeCommitLog": str(16 << 20), "diskMaxUsedSpaceRatio": "100",
                    "diskSpaceCleanForciblyRatio": "100", "diskSpaceWarningLevelRatio": "100"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--kills", type=int, default=20, help="SIGKILL rounds (default 20)")
    parser.add_argument("--stops", type=int, default=5, help="SIGSTOP rounds (default 5)")
    parser.add_argument("--interval", type=float, default=0.01, help="time between two sends (s)")
    parser.add_argument("--preset", default="2m-2s-controller")
    parser.add_argument("--json", type=Path, help="also write every round as JSON here")
    parser.add_argument("--keep-dir", action="store_true", help="keep the cluster's stores and processes.log")
    parser.add_argument("--client", choices=("sdk", "cpp"), default="sdk",
                        help="who sends: PocketMQ's SDK, or Apache's 4.x C++ client (PyPI rocketmq==0.4.4, the dev "
                        "extra), which learns a new route on its 30 s poll")


def run(args: argparse.Namespace) -> int:
    configure_logging("console", "WARNING")
    results = uvloop.run(_main(args))
    print(render(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    return 0 if all(r.get("failover_s") is not None for r in results["rounds"]) else 1


@dataclass
class Sender:
    """Sends at a steady rate (a new send every ``interval``, at most :data:`MAX_IN_FLIGHT` waiting), as a busy
    application does; every SEND_OK as (monotonic time, wall time, storing broker address)."""

    producer: Producer
    interval: float
    oks: list[tuple[float, float, str]] = field(default_factory=list)
    failures: int = 0
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    _in_flight: set[asyncio.Task[None]] = field(default_factory=set)

    async def run(self) -> None:
        seq = 0
        while not self.stop.is_set():
            if len(self._in_flight) < MAX_IN_FLIGHT:
                seq += 1
                task = asyncio.ensure_future(self._one(f"f{seq}"))
                self._in_flight.add(task)
                task.add_done_callback(self._in_flight.discard)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stop.wait(), self.interval)
        if self._in_flight:
            await asyncio.wait(self._in_flight, timeout=10)

    async def _one(self, body: str) -> None:
        try:
            result = await self.producer.send(Message(TOPIC, body.encode()))
        except (SendFailedError, PocketMQError):
            self.failures += 1
            return
        if result.status is SendStatus.SEND_OK:
            ip, port, _offset = decode_message_id(result.offset_msg_id.rsplit(",", 1)[-1])
            self.oks.append((time.monotonic(), time.time(), f"{ip}:{port}"))
            if len(self.oks) > 100_000:
                del self.oks[:50_000]

    async def first_ok_after(self, since: float, not_addr: str, limit: float) -> tuple[float, float, str] | None:
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            for ok in self.oks:
                if ok[0] >= since and ok[2] != not_addr:
                    return ok
            await asyncio.sleep(0.01)
        return None


class CppSender:
    """The same load through Apache's C++ 4.x client (``rocketmq`` on PyPI, blocking ``send_sync`` calls in a thread
    of their own). Its send result names no broker, so a SEND_OK of a send *started* after the fault counts: the
    old master is dead or frozen then."""

    def __init__(self, namesrv_addr: str, interval: float) -> None:
        from rocketmq import client as cpp  # optional: the dev extra, Linux x86_64 only

        self._cpp = cpp
        self.producer = cpp.Producer("failover-bench-cpp", timeout=3000)
        self.producer.set_namesrv_addr(namesrv_addr)
        self.interval = interval
        #: (start, end, wall end) of every SEND_OK, monotonic times
        self.oks: list[tuple[float, float, float]] = []
        self.failures = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="cpp-sender", daemon=True)

    def start(self) -> None:
        self.producer.start()
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(15)
        self.producer.shutdown()

    def _run(self) -> None:
        seq = 0
        while not self._stop.is_set():
            seq += 1
            message = self._cpp.Message(TOPIC)
            message.set_body(f"c{seq}")
            started = time.monotonic()
            try:
                result = self.producer.send_sync(message)
            except Exception:  # the C++ client raises its own exception types for every failure
                self.failures += 1
            else:
                if result.status == self._cpp.SendStatus.OK:
                    self.oks.append((started, time.monotonic(), time.time()))
                    if len(self.oks) > 100_000:
                        del self.oks[:50_000]
            self._stop.wait(self.interval)

    async def first_ok_after(self, since: float, not_addr: str, limit: float) -> tuple[float, float, str] | None:
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            for started, end, wall in list(self.oks):
                if started >= since:
                    return end, wall, ""
            await asyncio.sleep(0.05)
        return None


def _takeover_wall_time(child: Child) -> float | None:
    """When the new master logged ``took_over_as_master`` (its last one), as a Unix time."""
    for line in reversed(child.lines):
        if '"took_over_as_master"' in line:
            with contextlib.suppress(ValueError, KeyError):
                stamp = json.loads(line.split("| ", 1)[-1] if not line.startswith("{") else line)["timestamp"]
                return datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    return None


async def _round(cluster: LocalCluster, sender: Sender | CppSender, kind: str, index: int,
                 limit: float = ROUND_LIMIT) -> dict[str, Any]:
    await cluster.wait_in_sync(ROUND_LIMIT)
    master = (await cluster.masters())[GROUP]
    await asyncio.sleep(0.3)  # a few SEND_OKs on the old master first
    signalled = time.monotonic()
    cluster.signal(master.spec.name, signal.SIGKILL if kind == "kill" else signal.SIGSTOP)
    first = await sender.first_ok_after(signalled, master.addr, limit)
    row: dict[str, Any] = {"round": index, "fault": kind, "old_master": master.spec.name,
                           "failover_s": None if first is None else round(first[0] - signalled, 3)}
    if first is not None:
        stored_by = first[2] or (await cluster.masters())[GROUP].addr
        new = next((c for c in cluster.brokers() if c.addr == stored_by), None)
        takeover = _takeover_wall_time(new) if new is not None else None
        row["new_master"] = new.spec.name if new else stored_by
        row["after_takeover_s"] = None if takeover is None else round(first[1] - takeover, 3)
    if kind == "kill":
        await cluster.wait_exit(master.spec.name, 10.0)
        await cluster.restart(master.spec.name, ROUND_LIMIT)
    else:
        cluster.signal(master.spec.name, signal.SIGCONT)
    return row


async def _main(args: argparse.Namespace) -> dict[str, Any]:
    base = Path(tempfile.mkdtemp(prefix="rmq-bench-failover-"))
    load_before = os.getloadavg()
    echo = await asyncio.to_thread((base / "processes.log").open, "w", encoding="utf-8")
    cluster = LocalCluster(args.preset, base_dir=base / "cluster", namesrv_count=3, ephemeral_ports=True,
                           overrides=STORE_PROPERTIES, log_format="json", echo=echo)
    rounds: list[dict[str, Any]] = []
    try:
        await cluster.start(timeout=180)
        master = (await cluster.masters())[GROUP]
        async with AdminClient(cluster.namesrv_addrs) as admin:
            await admin.update_topic(TOPIC, read_queues=4, write_queues=4, broker_addr=master.addr)
        plan = ["kill"] * args.kills + ["stop"] * args.stops
        if args.client == "cpp":
            await _cpp_rounds(cluster, args, plan, rounds)
        else:
            await _sdk_rounds(cluster, args, plan, rounds)
    finally:
        await cluster.stop()
        echo.close()
        if args.keep_dir:
            print(f"kept {base}")
        else:
            await asyncio.to_thread(shutil.rmtree, base, True)
    return {"preset": args.preset, "client": args.client, "rounds": rounds, "load_before": load_before,
            "load_after": os.getloadavg(), "cpus": os.cpu_count()}


def _report(row: dict[str, Any]) -> None:
    print(f"round {row['round']:>2} {row['fault']:<4} failover {row['failover_s']} s "
          f"(after takeover {row.get('after_takeover_s')} s)", flush=True)


async def _sdk_rounds(cluster: LocalCluster, args: argparse.Namespace, plan: list[str],
                      rounds: list[dict[str, Any]]) -> None:
    producer = Producer("failover-bench", namesrv_addr=cluster.namesrv_addr, send_msg_timeout=3.0)
    await producer.start()
    sender = Sender(producer, args.interval)
    task = asyncio.ensure_future(sender.run())
    try:
        for index, kind in enumerate(plan, start=1):
            rounds.append(await _round(cluster, sender, kind, index))
            _report(rounds[-1])
    finally:
        sender.stop.set()
        await task
        await producer.shutdown()


async def _cpp_rounds(cluster: LocalCluster, args: argparse.Namespace, plan: list[str],
                      rounds: list[dict[str, Any]]) -> None:
    sender = CppSender(cluster.namesrv_addr, max(args.interval, 0.01))
    await asyncio.to_thread(sender.start)
    try:
        for index, kind in enumerate(plan, start=1):
            rounds.append(await _round(cluster, sender, kind, index, limit=CPP_ROUND_LIMIT))
            _report(rounds[-1])
    finally:
        await asyncio.to_thread(sender.close)


def summary(rounds: list[dict[str, Any]], kind: str, key: str = "failover_s") -> dict[str, float]:
    values = [r[key] for r in rounds if r["fault"] == kind and r.get(key) is not None]
    return {k: round(v, 3) for k, v in percentiles(values).items()} if values else {}


def render(results: dict[str, Any]) -> str:
    rounds = results["rounds"]
    lines = [f"rmq-bench failover ({results['preset']}, client {results['client']}), {results['cpus']} CPUs, load "
             f"before "
             f"{' '.join(f'{x:.2f}' for x in results['load_before'])}, after "
             f"{' '.join(f'{x:.2f}' for x in results['load_after'])}", "",
             "| fault | rounds | failover p50 | p90 | max | SEND_OK after takeover p50 | max |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for kind in ("kill", "stop"):
        done = [r for r in rounds if r["fault"] == kind]
        if not done:
            continue
        s, t = summary(rounds, kind), summary(rounds, kind, "after_takeover_s")
        lines.append(f"| {'SIGKILL' if kind == 'kill' else 'SIGSTOP'} of the master | {len(done)} | "
                     f"{s.get('p50', '-')} s | {s.get('p90', '-')} s | {s.get('max', '-')} s | "
                     f"{t.get('p50', '-')} s | {t.get('max', '-')} s |")
    lines.append("")
    lines.append("every round (s): " + ", ".join(f"{r['fault']} {r['failover_s']}" for r in rounds))
    return "\n".join(lines)
