"""Pieces of ``rmq-bench scale``: the cluster it runs (child processes it can restart), what it reads of a process
(RSS, CPU, open files, memory maps, limits) and of a store (disk use), and the loads it drives over raw remoting
requests (topic and group creation, one message per queue, clients that heartbeat).

Everything is bounded: counts come from the command line, every wait has a deadline, and the cluster's
directory is removed on exit.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pocketmq.bench.common import Child, wait_idle
from pocketmq.remoting import route as rd
from pocketmq.remoting.client import RemotingClient
from pocketmq.remoting.codes import RequestCode, ResponseCode
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.connection import Connection
from pocketmq.remoting.headers import SendMessageRequestHeader, TopicQueueRequestHeader

#: Requests in flight at once when a phase sends many (messages, offset checks, batch chunks).
CONCURRENCY = 64
#: Seconds a broker may take to start on a store of many queues (recovery opens every one).
START_TIMEOUT = 600.0


# -- processes --------------------------------------------------------------------------------------------------


def _status_kib(pid: int, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return 0


def rss_kib(pid: int) -> int:
    """Resident set size of ``pid`` (KiB)."""
    return _status_kib(pid, "VmRSS")


def open_files(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def memory_maps(pid: int) -> int:
    with open(f"/proc/{pid}/maps", "rb") as f:
        return sum(1 for _ in f)


def nofile_limit(pid: int) -> int:
    """The soft ``Max open files`` of ``pid``."""
    for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
        if line.startswith("Max open files"):
            return int(line.split()[3])
    return 0


def max_map_count() -> int:
    try:
        return int(Path("/proc/sys/vm/max_map_count").read_text())
    except OSError:
        return 0


def disk_use(path: str) -> dict[str, int]:
    """Blocks held (``du``) and apparent size of every file under ``path``, and how many files and directories."""
    blocks = apparent = files = dirs = 0
    for root, dir_names, file_names in os.walk(path):
        dirs += len(dir_names)
        for name in file_names:
            with contextlib.suppress(OSError):
                st = os.lstat(os.path.join(root, name))
                blocks += st.st_blocks * 512
                apparent += st.st_size
                files += 1
    return {"bytes_on_disk": blocks, "apparent_bytes": apparent, "files": files, "directories": dirs}


def load_average() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


# -- the cluster ------------------------------------------------------------------------------------------------


@dataclass
class ScaleCluster:
    """A name server and one ASYNC_MASTER broker as child processes; the broker can be restarted on its store."""

    workdir: Path
    properties: dict[str, str]
    namesrv: Child | None = None
    broker: Child | None = None
    children: list[Child] = field(default_factory=list)

    @property
    def namesrv_addr(self) -> str:
        assert self.namesrv is not None
        return self.namesrv.addr

    @property
    def broker_addr(self) -> str:
        assert self.broker is not None
        return self.broker.addr

    @property
    def broker_pid(self) -> int:
        assert self.broker is not None
        return self.broker.popen.pid

    @property
    def store_dir(self) -> str:
        return str(self.workdir / "store")

    def start_namesrv(self) -> None:
        self.namesrv = Child([sys.executable, "-m", "pocketmq.namesrv.main", "--listen", "127.0.0.1", "--port", "0",
                              "--kv-config-path", str(self.workdir / "kv" / "kvConfig.json"), "--log-format", "json",
                              "--log-level", "WARNING"], "NAMESRV READY")
        self.children.append(self.namesrv)
        self.namesrv.wait_ready()

    def start_broker(self, port: int = 0) -> float:
        """Start the broker (on ``port``: a restart keeps the address the store's records carry); returns the
        seconds until it was ready."""
        conf = self.workdir / "broker.properties"
        props = {"brokerClusterName": "DefaultCluster", "brokerName": "broker-scale", "brokerId": "0",
                 "brokerRole": "ASYNC_MASTER", "flushDiskType": "ASYNC_FLUSH", "storePathRootDir": self.store_dir,
                 **self.properties}
        conf.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        started = time.monotonic()
        self.broker = Child([sys.executable, "-m", "pocketmq.broker.main", "-c", str(conf), "-n", self.namesrv_addr,
                             "--listen-port", str(port), "--listen-host", "127.0.0.1", "--log-format", "json",
                             "--log-level", "WARNING"], "BROKER READY")
        self.children.append(self.broker)
        self.broker.wait_ready(START_TIMEOUT)
        return time.monotonic() - started

    def stop_broker(self, *, kill: bool) -> int:
        """SIGTERM (or SIGKILL with ``kill``) the broker and wait; returns its port."""
        assert self.broker is not None
        port = int(self.broker_addr.rpartition(":")[2])
        if kill:
            self.broker.popen.kill()
            self.broker.popen.wait(15)
        else:
            self.broker.stop()
        self.children.remove(self.broker)
        self.broker = None
        return port


@contextlib.contextmanager
def scale_cluster(name: str, properties: dict[str, str], *, keep_dir: bool) -> Iterator[ScaleCluster]:
    """A :class:`ScaleCluster` in a fresh directory, stopped by PID and removed on exit (kept with ``keep_dir``)."""
    cluster = ScaleCluster(Path(tempfile.mkdtemp(prefix=f"rmq-bench-scale-{name}-")), properties)
    try:
        cluster.start_namesrv()
        cluster.start_broker()
        assert cluster.broker is not None
        wait_idle(cluster.broker)
        yield cluster
    finally:
        for child in reversed(cluster.children):
            child.stop()
        if keep_dir:
            print(f"cluster directory kept: {cluster.workdir}", file=sys.stderr)
        else:
            shutil.rmtree(cluster.workdir, ignore_errors=True)


# -- requests ---------------------------------------------------------------------------------------------------


def topic_fields(topic: str, queues: int) -> dict[str, str]:
    """UPDATE_AND_CREATE_TOPIC's header for a read-write topic of ``queues`` queues."""
    return {"topic": topic, "defaultTopic": "TBW102", "readQueueNums": str(queues), "writeQueueNums": str(queues),
            "perm": "6", "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false"}


async def expect_ok(client: RemotingClient, addr: str, request: RemotingCommand, timeout: float = 30.0) -> None:
    response = await client.invoke(addr, request, timeout)
    if response.code != ResponseCode.SUCCESS:
        raise RuntimeError(f"request {request.code} to {addr}: code {response.code} {response.remark}")


async def create_topic(client: RemotingClient, broker: str, topic: str, queues: int) -> float:
    """One UPDATE_AND_CREATE_TOPIC; returns its latency in seconds."""
    started = time.perf_counter()
    await expect_ok(client, broker, RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC,
                                                            topic_fields(topic, queues)))
    return time.perf_counter() - started


async def create_group(client: RemotingClient, broker: str, group: str) -> float:
    """One UPDATE_AND_CREATE_SUBSCRIPTIONGROUP with RocketMQ's defaults; returns its latency in seconds."""
    body = rd.encode_body({"groupName": group, "consumeEnable": True, "consumeBroadcastEnable": True,
                           "retryQueueNums": 1, "retryMaxTimes": 16, "brokerId": 0})
    started = time.perf_counter()
    await expect_ok(client, broker, RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {}, body))
    return time.perf_counter() - started


async def bounded(jobs: list[Callable[[], Awaitable[Any]]], limit: int = CONCURRENCY) -> list[Any]:
    """Run ``jobs`` with at most ``limit`` in flight; their results in order (the first error is raised)."""
    results: list[Any] = [None] * len(jobs)
    next_job = 0

    async def worker() -> None:
        nonlocal next_job
        while next_job < len(jobs):
            index = next_job
            next_job += 1
            results[index] = await jobs[index]()

    await asyncio.gather(*(worker() for _ in range(min(limit, len(jobs)))))
    return results


async def send_one(client: RemotingClient, broker: str, topic: str, queue_id: int, body: bytes) -> None:
    header = SendMessageRequestHeader("scale_bench_producer", topic, "TBW102", 8, queue_id, 0,
                                      int(time.time() * 1000), 0, "WAIT\u0001true\u0002")
    request = RemotingCommand.request(RequestCode.SEND_MESSAGE, header.to_fields(), body)
    await expect_ok(client, broker, request)


async def max_offset(client: RemotingClient, broker: str, topic: str, queue_id: int) -> int:
    request = RemotingCommand.request(RequestCode.GET_MAX_OFFSET, TopicQueueRequestHeader(topic, queue_id).to_fields())
    response = await client.invoke(broker, request, 30.0)
    if response.code != ResponseCode.SUCCESS or response.ext_fields is None:
        raise RuntimeError(f"GET_MAX_OFFSET {topic}/{queue_id}: code {response.code} {response.remark}")
    return int(response.ext_fields["offset"])


# -- heartbeating clients ---------------------------------------------------------------------------------------


def heartbeat_body(client_id: str, groups: list[str], topic_of: Callable[[str], str]) -> bytes:
    """A Java push consumer's HEART_BEAT body (JSON): each group subscribes to its topic and its retry topic."""
    def subscription(topic: str) -> dict[str, Any]:
        return {"classFilterMode": False, "codeSet": [], "expressionType": "TAG", "subString": "*",
                "subVersion": 1, "tagsSet": [], "topic": topic}

    consumers = [{"consumeFromWhere": "CONSUME_FROM_LAST_OFFSET", "consumeType": "CONSUME_PASSIVELY",
                  "groupName": group, "messageModel": "CLUSTERING", "unitMode": False,
                  "subscriptionDataSet": [subscription(topic_of(group)), subscription(f"%RETRY%{group}")]}
                 for group in groups]
    return rd.encode_body({"clientID": client_id, "consumerDataSet": consumers,
                           "producerDataSet": [{"groupName": "CLIENT_INNER_PRODUCER"}]})


class HeartbeatClients:
    """``count`` clients, each on its own connection, each in ``per_client`` of ``groups`` consumer groups; counts
    the NOTIFY_CONSUMER_IDS_CHANGED each receives."""

    def __init__(self, broker: str, count: int, groups: int, per_client: int, topics: int,
                 prefix: str = "ScaleGroup") -> None:
        self.broker = broker
        self.notifications = 0
        self.clients: list[RemotingClient] = []
        self.bodies: list[bytes] = []
        for i in range(count):
            client = RemotingClient()
            client.register(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, self._notified)
            self.clients.append(client)
            names = [f"{prefix}{(i * per_client + j) % groups:05d}" for j in range(per_client)]
            self.bodies.append(heartbeat_body(f"127.0.0.1@{prefix}-{i}", names,
                                              lambda g: f"ScaleTopic{int(g[-5:]) % topics:04d}"))

    def _notified(self, request: RemotingCommand, conn: Connection) -> None:
        self.notifications += 1

    async def beat(self, index: int) -> None:
        request = RemotingCommand.request(RequestCode.HEART_BEAT, {}, self.bodies[index])
        await expect_ok(self.clients[index], self.broker, request)

    async def beat_all(self) -> None:
        await bounded([functools.partial(self.beat, i) for i in range(len(self.clients))])

    async def beat_spread(self, interval: float, rounds: int) -> None:
        """Each client beats once every ``interval`` s, the clients evenly spread over it, ``rounds`` times."""
        count = len(self.clients)
        started = time.monotonic()
        for n in range(rounds * count):
            due = started + n * interval / count
            delay = due - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            await self.beat(n % count)

    async def close(self) -> None:
        await asyncio.gather(*(client.close() for client in self.clients))
