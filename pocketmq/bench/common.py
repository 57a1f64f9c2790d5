"""Shared pieces of the benchmarks: child server processes, waiting for them to go idle, percentiles."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import uvloop

from pocketmq.remoting.client import RemotingClient
from pocketmq.remoting.codes import RequestCode, ResponseCode
from pocketmq.remoting.command import RemotingCommand

if TYPE_CHECKING:
    from pocketmq.client.producer.producer import Producer

ROOT = Path(__file__).resolve().parents[2]
READY_TIMEOUT = 30.0


class Child:
    """A child process whose stderr is drained by a thread; ``ready`` is the address on its readiness line."""

    def __init__(self, argv: list[str], ready_prefix: str) -> None:
        env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
        self.popen = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.PIPE, env=env, cwd=ROOT)
        self.prefix = ready_prefix
        self.addr = ""
        self.tail: list[str] = []
        self._ready = threading.Event()
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self) -> None:
        assert self.popen.stderr is not None
        for raw in self.popen.stderr:
            line = raw.decode(errors="replace").rstrip()
            self.tail = [*self.tail[-19:], line]
            if line.startswith(self.prefix) and not self._ready.is_set():
                self.addr = line[len(self.prefix):].strip()
                self._ready.set()
        self._ready.set()

    def wait_ready(self, timeout: float = READY_TIMEOUT) -> str:
        if not self._ready.wait(timeout) or not self.addr:
            self.stop()
            raise RuntimeError(f"{self.popen.args!r} did not become ready:\n" + "\n".join(self.tail))
        return self.addr

    def cpu_seconds(self) -> float | None:
        try:
            fields = Path(f"/proc/{self.popen.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return None
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(15)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(5)


def wait_idle(child: Child, *, limit: float = 60.0, busy: float = 0.2) -> None:
    """Wait until the child uses less than ``busy`` of a CPU (a new broker preallocates its commit-log files
    first, which takes seconds of CPU), at most ``limit`` seconds."""
    deadline = time.monotonic() + limit
    last = child.cpu_seconds()
    while last is not None and time.monotonic() < deadline:
        time.sleep(0.5)
        now = child.cpu_seconds()
        if now is None or now - last < busy * 0.5:
            return
        last = now


def percentiles(values: Any) -> dict[str, float]:
    if not len(values):
        return {}
    ordered = sorted(values)
    n = len(ordered)

    def at(q: float) -> float:
        return float(ordered[min(n - 1, int(q * n))])

    return {"p50": at(0.50), "p90": at(0.90), "p99": at(0.99), "p999": at(0.999), "max": float(ordered[-1]),
            "mean": sum(ordered) / n}


@dataclass
class Cluster:
    namesrv: str
    broker: Child
    children: list[Child] = field(default_factory=list)


@contextlib.contextmanager
def local_cluster(args: argparse.Namespace, name: str,
                  prepare: Callable[[Path], None] | None = None) -> Iterator[Cluster]:
    """A name server and one ASYNC_MASTER/ASYNC_FLUSH broker as child processes, stopped by PID on exit
    (``args`` carries ``queues``, ``pin`` and ``keep_dir``); ``prepare`` gets the broker's store directory before
    the broker starts (to lay metadata files there)."""
    workdir = Path(tempfile.mkdtemp(prefix=f"rmq-bench-{name}-"))
    children: list[Child] = []
    try:
        ns = Child([sys.executable, "-m", "pocketmq.namesrv.main", "--listen", "127.0.0.1", "--port", "0",
                    "--kv-config-path", str(workdir / "kv" / "kvConfig.json"), "--log-format", "json",
                    "--log-level", "WARNING"], "NAMESRV READY")
        children.append(ns)
        namesrv = ns.wait_ready()
        conf = workdir / "broker.properties"
        conf.write_text(
            "brokerClusterName=DefaultCluster\nbrokerName=broker-bench\nbrokerId=0\n"
            "brokerRole=ASYNC_MASTER\nflushDiskType=ASYNC_FLUSH\nautoCreateTopicEnable=true\n"
            f"defaultTopicQueueNums={args.queues}\nstorePathRootDir={workdir / 'store'}\n"
        )
        if prepare is not None:
            prepare(workdir / "store")
        broker = Child([sys.executable, "-m", "pocketmq.broker.main", "-c", str(conf), "-n", namesrv,
                        "--listen-port", "0",
                        "--listen-host", "127.0.0.1", "--log-format", "json", "--log-level", "WARNING"],
                       "BROKER READY")
        children.append(broker)
        broker.wait_ready()
        if args.pin:
            pin_child(broker.popen.pid)
        wait_idle(broker)
        yield Cluster(namesrv, broker, children)
    finally:
        for child in reversed(children):
            child.stop()
        if args.keep_dir:
            print(f"cluster directory kept: {workdir}", file=sys.stderr)
        else:
            shutil.rmtree(workdir, ignore_errors=True)


def available_cpus() -> list[int]:
    try:
        return sorted(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return []


def pin_child(pid: int) -> None:
    cpus = available_cpus()
    if len(cpus) >= 2:
        os.sched_setaffinity(pid, {cpus[-1]})


def pin_self() -> None:
    cpus = available_cpus()
    if len(cpus) >= 2:
        os.sched_setaffinity(0, {cpus[0]})


async def create_topic(broker_addr: str, topic: str, queues: int) -> None:
    """UPDATE_AND_CREATE_TOPIC on one broker, so a run uses ``queues`` queues from the start."""
    fields = {"topic": topic, "defaultTopic": "TBW102", "readQueueNums": str(queues), "writeQueueNums": str(queues),
              "perm": "6", "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false"}
    client = RemotingClient()
    try:
        response = await client.invoke(broker_addr, RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC,
                                                                           fields), timeout=10.0)
    finally:
        await client.close()
    if response.code != ResponseCode.SUCCESS:
        raise RuntimeError(f"cannot create topic {topic}: {response.code} {response.remark}")


async def wait_for_route(producer: Producer, topic: str, timeout: float = 30.0) -> None:
    """Until the name servers have the topic's own route (its broker created it and registered) and the
    producer has taken it; RuntimeError after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    instance = producer.instance
    while time.monotonic() < deadline:
        with contextlib.suppress(Exception):
            if await instance.refresher.fetch_route(topic, 1.0) is not None:
                await instance.refresher.refresh(topic, 3.0, publish=True)
                return
        await asyncio.sleep(0.2)
    raise RuntimeError(f"no route for {topic}")


def run_bench(args: argparse.Namespace, name: str,
              bench: Callable[[str, Child | None], Coroutine[Any, Any, dict[str, Any]]]) -> dict[str, Any]:
    """``bench(namesrv, broker)`` on uvloop against ``--namesrv`` or our own :func:`local_cluster` (``broker`` is
    None with ``--namesrv``), this process pinned with ``--pin``; returns its summary."""
    with contextlib.ExitStack() as stack:
        if args.namesrv:
            namesrv, broker = args.namesrv, None
        else:
            cluster = stack.enter_context(local_cluster(args, name))
            namesrv, broker = cluster.namesrv, cluster.broker
        if args.pin:
            pin_self()
        return uvloop.run(bench(namesrv, broker))


def add_own_cluster_arguments(parser: argparse.ArgumentParser, *, pin: bool = True) -> None:
    """``--pin`` (default ``pin``), ``--keep-dir`` and ``--json`` of a benchmark that always starts its own cluster."""
    parser.add_argument("--pin", action=argparse.BooleanOptionalAction, default=pin,
                        help=f"pin the broker and this process to different CPUs (default {'on' if pin else 'off'})")
    parser.add_argument("--keep-dir", action="store_true", help="keep the cluster's temporary directory")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")


def run_on_own_cluster(args: argparse.Namespace, name: str,
                       bench: Callable[[Cluster], Coroutine[Any, Any, dict[str, Any]]]) -> dict[str, Any]:
    """``bench`` on uvloop against :func:`local_cluster` (this process pinned with ``--pin``); its summary gets the
    load average before and after (the machine may be shared: figures are read beside it)."""
    load_before = os.getloadavg()
    with local_cluster(args, name) as cluster:
        if args.pin:
            pin_self()
        summary: dict[str, Any] = uvloop.run(bench(cluster))
    summary["loadavg_before"], summary["loadavg_after"] = load_before, os.getloadavg()
    summary["cpus"] = os.cpu_count()
    return summary


def format_load(summary: dict[str, Any]) -> str:
    """The load-average line of a summary made by :func:`run_on_own_cluster`."""
    before, after = summary["loadavg_before"], summary["loadavg_after"]
    return (f"load average before {before[0]:.2f} {before[1]:.2f} {before[2]:.2f}, "
            f"after {after[0]:.2f} {after[1]:.2f} {after[2]:.2f} ({summary['cpus']} CPUs)")
