"""PocketMQ in the comparison: its deployments and the same workloads through its SDK.

Deployments (name server and brokers are child processes, stopped by PID):

* ``pocketmq`` — :func:`pocketmq.bench.common.local_cluster`: a name server and one ASYNC_MASTER /
  ASYNC_FLUSH broker;
* ``pocketmq-sync`` — a name server, a SYNC_MASTER / ASYNC_FLUSH broker and its slave (a send is answered
  once the slave has the message), started here the way ``pocketmq/bench/ha_bench.py`` starts them, and
  measured only after the slave has attached.

Workloads, through :class:`pocketmq.client.Producer` and :class:`pocketmq.client.PushConsumer`; each topic has
:data:`QUEUES` queues, created on the master before the run:

* W1/W2: ``in_flight`` coroutines each awaiting ``producer.send`` (the SDK may coalesce sends that meet in
  one loop step into one request; every message still gets its own acknowledged result);
* W3: one ``send`` at a time; W5: ``batch_workers`` coroutines each awaiting ``send_batch`` of ``batch``;
* W4: a push consumer from the first offset, pulling :data:`PULL_BATCH_SIZE` messages per request and
  handing them to a batch handler (``register_batch_handler``) :data:`CONSUME_BATCH_SIZE` at a time, the SDK's
  high-throughput usage (RocketMQ's ``consumeMessageBatchMaxSize``), as the Redis row reads ``COUNT`` entries
  per call; offsets are committed as it goes (every 5 s and at shutdown), RocketMQ's consumer acknowledgement.
  A result other than SEND_OK counts as a failure.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import shutil
import sys
import time
from pathlib import Path

import uvloop

from pocketmq.bench.common import Child, create_topic, local_cluster, wait_for_route, wait_idle
from pocketmq.bench.compare.target import Target, Unavailable
from pocketmq.bench.compare.workload import (
    Budget,
    ConsumeMode,
    ConsumeProgress,
    Measure,
    Plan,
    SendRuns,
    body,
    pipelined,
)
from pocketmq.client import ConsumeFromWhere, Message, MessageExt, Producer, PushConsumer, SendStatus
from pocketmq.common.logs import configure_logging
from pocketmq.remoting.client import RemotingClient
from pocketmq.remoting.codes import RequestCode
from pocketmq.remoting.command import RemotingCommand

QUEUES = 8
SEND_TIMEOUT = 10.0
PULL_BATCH_SIZE = 32
"""Messages per pull: RocketMQ's default, and the most a broker with the default
``maxTransferCountOnMessageInMemory`` (32) answers; larger pulls need that raised on the broker
(docs/perf/history.md, "W4")."""
CONSUME_BATCH_SIZE = 32
"""Messages per handler call: a whole pull (the sweep 1 / 8 / 32 in docs/perf/history.md, "W4": one message per call
costs the client more per message)."""
CONSUME_THREADS = 20
BROKER_NAME = "broker-compare"


def quiet_logs() -> None:
    configure_logging("console", "ERROR")


class PocketClient(SendRuns):
    """W1-W5 through the SDK against one name server; topics are created on ``masters``."""

    consume_modes: tuple[ConsumeMode, ...] = (ConsumeMode.EACH,)
    refill_per_consume = False

    def __init__(self, namesrv: str, masters: list[str]) -> None:
        self.namesrv = namesrv
        self.masters = masters
        self._topics: set[str] = set()

    def _producer(self, in_flight: int) -> Producer:
        return Producer("compare_producer", namesrv_addr=self.namesrv, send_msg_timeout=SEND_TIMEOUT,
                        max_in_flight=in_flight + 64, compress_over=1 << 30, instance_name="compare-producer")

    async def _topic(self, producer: Producer, topic: str) -> None:
        if topic not in self._topics:
            for addr in self.masters:
                await create_topic(addr, topic, QUEUES)
            self._topics.add(topic)
        await wait_for_route(producer, topic)

    async def send_run(self, topic: str, size: int, count: int, seconds: float, *, workers: int,
                       per_call: int, record_latency: bool) -> Measure:
        async with self._producer(workers * per_call) as producer:
            await self._topic(producer, topic)
            payload = body(size)

            async def send_one() -> None:
                result = await producer.send(Message(topic, payload))
                if result.status is not SendStatus.SEND_OK:
                    raise RuntimeError(f"status {result.status.name}")

            async def send_batch() -> None:
                result = await producer.send_batch([Message(topic, payload) for _ in range(per_call)])
                if result.status is not SendStatus.SEND_OK:
                    raise RuntimeError(f"status {result.status.name}")

            measure = Measure(capacity=count)
            await pipelined(send_one if per_call == 1 else send_batch, measure, Budget(count, seconds),
                            workers=workers, per_call=per_call, record_latency=record_latency)
            return measure

    async def consume(self, name: str, count: int, mode: ConsumeMode, plan: Plan) -> Measure:
        del mode  # one mode: the push consumer commits offsets as it goes
        progress = ConsumeProgress(count)

        async def handler(msgs: list[MessageExt]) -> None:
            progress.add(len(msgs))

        consumer = PushConsumer(f"compare_{name}", namesrv_addr=self.namesrv,
                                consume_from_where=ConsumeFromWhere.FIRST_OFFSET, pull_batch_size=PULL_BATCH_SIZE,
                                consume_message_batch_max_size=CONSUME_BATCH_SIZE,
                                consume_thread_max=CONSUME_THREADS, instance_name=f"compare-{name}")
        consumer.subscribe(name, "*")
        consumer.register_batch_handler(handler)
        start = time.perf_counter()
        await consumer.start()
        try:
            await progress.wait(time.monotonic() + plan.time_limit, plan.consume_idle)
        finally:
            await consumer.shutdown()
        return progress.measure(start)

    async def drop(self, name: str) -> None:
        """Commit-log data stays (a topic's messages are not deleted one by one); nothing to do."""



class PocketServer:
    """Our name server and brokers (``Child`` processes) and how to stop them."""

    def __init__(self, stack: contextlib.ExitStack, namesrv: str, masters: list[str], children: list[Child],
                 slaves: list[Child] | None = None) -> None:
        self._stack = stack
        self.namesrv = namesrv
        self.masters = masters
        self.children = children
        self.slaves = slaves or []

    def pids(self) -> list[int]:
        return [child.popen.pid for child in self.children if child.popen.poll() is None]

    def floating_pids(self) -> list[int]:
        """The slave is not confined to the master's CPU: in production it has a machine of its own."""
        return [child.popen.pid for child in self.slaves if child.popen.poll() is None]

    def client(self) -> PocketClient:
        return PocketClient(self.namesrv, self.masters)

    def log_tail(self) -> str:
        return "\n".join(line for child in self.children for line in child.tail[-8:])

    def stop(self) -> None:
        self._stack.close()


def start_async_master(workdir: Path) -> PocketServer:
    """A name server and one ASYNC_MASTER / ASYNC_FLUSH broker through ``local_cluster``."""
    del workdir  # local_cluster makes (and removes) its own temporary directory
    quiet_logs()
    stack = contextlib.ExitStack()
    try:
        cluster = stack.enter_context(local_cluster(argparse.Namespace(queues=QUEUES, pin=False, keep_dir=False),
                                                    "compare"))
    except RuntimeError as exc:
        stack.close()
        raise Unavailable("failed to start", str(exc)) from None
    return PocketServer(stack, cluster.namesrv, [cluster.broker.addr], cluster.children)


def _broker_properties(workdir: Path, role: str, broker_id: int) -> Path:
    conf = workdir / f"broker-{broker_id}.properties"
    conf.write_text(
        f"brokerClusterName=DefaultCluster\nbrokerName={BROKER_NAME}\nbrokerId={broker_id}\n"
        f"brokerRole={role}\nflushDiskType=ASYNC_FLUSH\nautoCreateTopicEnable=true\n"
        f"defaultTopicQueueNums={QUEUES}\nstorePathRootDir={workdir / f'store-{broker_id}'}\n"
    )
    return conf


def _broker_child(conf: Path, namesrv: str) -> Child:
    return Child([sys.executable, "-m", "pocketmq.broker.main", "-c", str(conf), "-n", namesrv, "--listen-port", "0",
                  "--listen-host", "127.0.0.1", "--log-format", "json", "--log-level", "WARNING"], "BROKER READY")


async def _slave_attached(master: str, timeout: float) -> bool:
    client = RemotingClient()
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            with contextlib.suppress(Exception):
                response = await client.invoke(master, RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO),
                                               3.0)
                if json.loads(bytes(response.body or b""))["table"].get("haConnectionCount") == "1":
                    return True
            await asyncio.sleep(0.2)
        return False
    finally:
        await client.close()


def _stop_all(children: list[Child]) -> None:
    for child in reversed(children):
        child.stop()


def start_sync_master(workdir: Path) -> PocketServer:
    """A name server, a SYNC_MASTER / ASYNC_FLUSH broker and its slave, in ``workdir``."""
    quiet_logs()
    stack = contextlib.ExitStack()
    children: list[Child] = []
    # Exit callbacks run last-in first-out: the children stop, then their directory goes.
    stack.callback(shutil.rmtree, workdir / "pocketmq", ignore_errors=True)
    stack.callback(_stop_all, children)
    base = workdir / "pocketmq"
    base.mkdir(parents=True, exist_ok=True)
    try:
        ns = Child([sys.executable, "-m", "pocketmq.namesrv.main", "--listen", "127.0.0.1", "--port", "0",
                    "--kv-config-path", str(base / "kv" / "kvConfig.json"), "--log-format", "json",
                    "--log-level", "WARNING"], "NAMESRV READY")
        children.append(ns)
        namesrv = ns.wait_ready()
        master = _broker_child(_broker_properties(base, "SYNC_MASTER", 0), namesrv)
        children.append(master)
        master_addr = master.wait_ready()
        slave = _broker_child(_broker_properties(base, "SLAVE", 1), namesrv)
        children.append(slave)
        slave.wait_ready()
        if not uvloop.run(_slave_attached(master_addr, 30.0)):
            raise RuntimeError("the slave did not attach to the SYNC_MASTER within 30 s")
        wait_idle(master)
        wait_idle(slave)
    except RuntimeError as exc:
        stack.close()
        raise Unavailable("failed to start", str(exc)) from None
    return PocketServer(stack, namesrv, [master_addr], children, [slave])


def pocketmq_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"pocketmq {version('pocketmq')} (working tree)"
    except PackageNotFoundError:
        return "pocketmq (working tree)"


TARGETS = (
    Target("pocketmq", "PocketMQ ASYNC_MASTER", False, start_async_master, pocketmq_version),
    Target("pocketmq-sync", "PocketMQ SYNC_MASTER+slave", False, start_sync_master, pocketmq_version),
)
