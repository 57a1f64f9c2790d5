"""Fault drills on a real cluster: SIGKILL and SIGSTOP of a master, of a slave and of one name server.

Every test starts its own :class:`pocketmq.admin.cluster.LocalCluster` (two name servers; ``2m-2s-sync`` for the broker
faults, ``2m-noslave`` for the name-server faults), all processes on 127.0.0.1 with free ports, and kills every
one of them by PID when it ends. The periods that decide how fast a fault is noticed are shortened so that a
drill takes seconds, not minutes; the rules are RocketMQ's:

* brokers register every second (``registerNameServerPeriod``) with a 1 s timeout per name server;
* a name server scans every 0.5 s and drops a broker it has not heard from for 4 s (RocketMQ: 10 s / 120 s);
  a registration round waits up to 1 s for a frozen name server, so a broker's rounds are 2 s apart then;
* a SYNC_MASTER waits 1 s for its slave (``slaveTimeout``); either HA end drops a peer silent for 3 s
  (``haHousekeepingInterval``, heartbeats every 0.5 s);
* the producer isolates a broker after a failed attempt for :data:`ISOLATION_MS` instead of 600 s.

What each drill checks is the consequence a user would see: which sends fail and when, which statuses a
SYNC_MASTER answers, what the name servers route, what a consumer reads, and that replicas end byte-identical.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pocketmq.admin.api import AdminClient, AdminError
from pocketmq.admin.cluster import LocalCluster
from pocketmq.client import Message, MessageQueue, Producer, PullConsumer, PullStatus, SendResult, SendStatus
from pocketmq.client.core.errors import SendFailedError
from pocketmq.common.record import decode_records
from pocketmq.remoting.client import RemotingClient
from pocketmq.remoting.codes import RequestCode, ResponseCode
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.headers import PullMessageRequestHeader
from tests.helpers import eventually
from tests.procs import TEST_STORE_PROPERTIES

REGISTER_PERIOD = 1.0
EXPIRY = 4.0
SLAVE_TIMEOUT = 1.0
HOUSEKEEPING = 3.0
HEARTBEAT = 0.5
ISOLATION_MS = 6000
SENDERS = 4
QUEUES = 2
COMMIT_LOG_FILE_SIZE = 4 << 20

BROKER_PROPS = {
    "registerNameServerPeriod": str(int(REGISTER_PERIOD * 1000)),
    "registerBrokerTimeoutMills": "1000",
    "slaveTimeout": str(int(SLAVE_TIMEOUT * 1000)),
    "haHousekeepingInterval": str(int(HOUSEKEEPING * 1000)),
    "haSendHeartbeatInterval": str(int(HEARTBEAT * 1000)),
    **TEST_STORE_PROPERTIES,
    "mappedFileSizeCommitLog": str(COMMIT_LOG_FILE_SIZE),
}
#: Name server durations are milliseconds, as RocketMQ's keys.
NAMESRV_PROPS = {"scanNotActiveBrokerInterval": "500", "brokerChannelExpiredTime": str(int(EXPIRY * 1000))}
#: Statuses of a put that was stored on the master (only SEND_OK says it is also on a slave).
STORED = {SendStatus.SEND_OK, SendStatus.FLUSH_SLAVE_TIMEOUT, SendStatus.SLAVE_NOT_AVAILABLE}


# -- the cluster -------------------------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def running_cluster(tmp_path: Path, preset: str) -> AsyncIterator[LocalCluster]:
    """A started cluster; afterwards every child is SIGKILLed by PID (a frozen one too) and reaped."""
    cluster = LocalCluster(preset, base_dir=tmp_path / "cluster", namesrv_count=2, ephemeral_ports=True,
                           overrides=BROKER_PROPS, namesrv_overrides=NAMESRV_PROPS, log_format="json")
    failed = True
    try:
        await cluster.start()
        yield cluster
        failed = False
    finally:
        if failed:
            for child in cluster.children.values():
                print(f"--- {child.spec.name} (pid {child.pid}, exit {child.returncode}) ---")
                print("\n".join(child.lines[-15:]))
        for name, child in cluster.children.items():
            if child.alive:
                cluster.signal(name, signal.SIGKILL)
        await cluster.stop()


async def create_topic(cluster: LocalCluster, topic: str, namesrvs: Sequence[str] | None = None) -> None:
    """``topic`` with :data:`QUEUES` queues on every master, and on every slave too, so that a consumer can
    read a slave without waiting for its 10 s metadata copy."""
    async with AdminClient(list(namesrvs or cluster.namesrv_addrs)) as admin:
        await admin.update_topic(topic, read_queues=QUEUES, write_queues=QUEUES)
        for child in cluster.brokers():
            if child.spec.role == "SLAVE" and child.alive:
                await admin.update_topic(topic, read_queues=QUEUES, write_queues=QUEUES, broker_addr=child.addr)


async def members(namesrv: str, broker_name: str) -> dict[int, str]:
    """broker id -> address of ``broker_name`` as ``namesrv`` has it now ({} when it has none)."""
    async with AdminClient([namesrv], timeout=2.0) as admin:
        info = await admin.cluster_info(namesrv)
    data = info.broker_addr_table.get(broker_name)
    return dict(data.broker_addrs) if data is not None else {}


async def all_namesrvs_have(cluster: LocalCluster, broker_name: str, wanted: dict[int, str]) -> bool:
    for ns in cluster.namesrv_addrs:
        try:
            if await members(ns, broker_name) != wanted:
                return False
        except AdminError:
            return False
    return True


async def runtime(addr: str) -> dict[str, str]:
    async with AdminClient([addr], timeout=3.0) as admin:
        return await admin.runtime_info(addr)


def commit_log(store_dir: str, length: int) -> bytes:
    """The first ``length`` bytes of a broker's commit log, read from its files."""
    out = bytearray()
    for path in sorted((Path(store_dir) / "commitlog").iterdir(), key=lambda p: int(p.name)):
        start = int(path.name)
        if start >= length:
            break
        with path.open("rb") as f:
            out += f.read(min(length - start, COMMIT_LOG_FILE_SIZE))
    return bytes(out)


async def assert_replica_identical(cluster: LocalCluster, master: str, slave: str) -> int:
    """Wait until the slave's commit log ends where the master's does; then compare the bytes."""
    m, s = cluster.broker(master), cluster.broker(slave)
    ends: list[int] = []

    async def caught_up() -> bool:
        ends[:] = [int((await runtime(a))["commitLogMaxOffset"]) for a in (m.addr, s.addr)]
        return ends[0] == ends[1] > 0

    await eventually(caught_up, timeout=20, interval=0.1, message=f"{slave} caught up with {master}")
    assert commit_log(s.spec.store_dir, ends[0]) == commit_log(m.spec.store_dir, ends[0])
    return ends[0]


async def pull_bodies(addr: str, topic: str) -> set[bytes]:
    """Every body of ``topic`` on the broker at ``addr`` (any role), PULL_MESSAGE queue by queue from 0."""
    client = RemotingClient()
    bodies: set[bytes] = set()
    try:
        for queue_id in range(QUEUES):
            offset = 0
            while True:
                header = PullMessageRequestHeader("faults-check", topic, queue_id, offset, 32, 0x4, -1, 0, 0, "*")
                request = RemotingCommand.request(RequestCode.PULL_MESSAGE, header.to_fields())
                resp = await client.invoke(addr, request, 5.0)
                records = list(decode_records(bytes(resp.body or b""))) if resp.code == ResponseCode.SUCCESS else []
                if not records:
                    break
                bodies.update(bytes(r.body) for r in records)
                offset = records[-1].queue_offset + 1
    finally:
        await client.close()
    return bodies


async def consume_all(namesrv: str, topic: str, broker_name: str | None = None) -> set[bytes]:
    """Every body of ``topic`` (of one broker group, or all) read by a PullConsumer that knows only the
    name servers: it follows the routes, as an application would."""
    bodies: set[bytes] = set()
    async with PullConsumer("faults-cg", namesrv_addr=namesrv, pull_timeout=5.0) as consumer:
        for mq in await consumer.fetch_subscribe_message_queues(topic):
            if broker_name is not None and mq.broker_name != broker_name:
                continue
            offset = 0
            while True:
                result = await consumer.pull(mq, "*", offset, 32)
                if result.status is not PullStatus.FOUND:
                    break
                bodies.update(bytes(m.body) for m in result.messages)
                offset = result.next_begin_offset
    return bodies


def on_broker(name: str) -> Callable[[Sequence[MessageQueue], Message, Any], MessageQueue]:
    """A selector sending to the first queue of broker group ``name`` (one attempt, no move elsewhere)."""
    return lambda queues, _msg, _arg: next(q for q in queues if q.broker_name == name)


# -- a stream of sends -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Failure:
    at: float
    elapsed: float
    brokers: tuple[str, ...]
    timed_out: bool
    error: str


class Stream:
    """:data:`SENDERS` tasks sending paced messages until stopped; every result, failed send and failed
    attempt is kept with its (monotonic) time. Bounded: it stops by itself after ``max_seconds``."""

    def __init__(self, producer: Producer, topic: str, *, pace: float = 0.01, max_seconds: float = 120.0) -> None:
        self.producer = producer
        self.topic = topic
        self.pace = pace
        self.results: list[tuple[float, bytes, SendResult]] = []
        self.failures: list[Failure] = []
        self.failed_attempts: list[tuple[float, str]] = []
        self._stop = asyncio.Event()
        self._deadline = time.monotonic() + max_seconds

        def record(queue: MessageQueue, error: BaseException | None, _latency_ms: float) -> None:
            if error is not None:
                self.failed_attempts.append((time.monotonic(), queue.broker_name))

        producer.attempt_hook = record
        self._tasks = [asyncio.ensure_future(self._run(i)) for i in range(SENDERS)]

    async def _run(self, index: int) -> None:
        n = 0
        while not self._stop.is_set() and time.monotonic() < self._deadline and len(self.failures) < 100:
            body = f"{self.topic}-{index}-{n}".encode()
            n += 1
            started = time.monotonic()
            try:
                result = await self.producer.send(Message(self.topic, body))
            except SendFailedError as exc:
                now = time.monotonic()
                self.failures.append(Failure(now, now - started, exc.brokers_tried, exc.timed_out, str(exc)))
            except Exception as exc:  # anything else is a failure too, and must not end the stream
                now = time.monotonic()
                self.failures.append(Failure(now, now - started, (), False, f"{type(exc).__name__}: {exc}"))
            else:
                self.results.append((time.monotonic(), body, result))
            await asyncio.sleep(self.pace)

    def ok(self, broker: str | None = None, since: float = 0.0) -> int:
        return sum(1 for t, _, r in self.results if t >= since and r.status is SendStatus.SEND_OK
                   and (broker is None or r.message_queue.broker_name == broker))

    async def flowing(self, per_group: int = 50) -> None:
        """Until both broker groups have acknowledged ``per_group`` sends."""
        await eventually(lambda: self.ok("broker-a") >= per_group and self.ok("broker-b") >= per_group,
                         timeout=30, message="sends flowing to both groups")

    def acked(self, broker: str | None = None) -> set[bytes]:
        """Bodies answered SEND_OK (by ``broker``)."""
        return {b for _, b, r in self.results if r.status is SendStatus.SEND_OK
                and (broker is None or r.message_queue.broker_name == broker)}

    def stored(self) -> set[bytes]:
        """Bodies a broker answered for with a stored status (SEND_OK or a replication status)."""
        return {b for _, b, r in self.results if r.status in STORED}

    def summary(self) -> str:
        statuses: dict[str, int] = {}
        for _, _, r in self.results:
            statuses[r.status.name] = statuses.get(r.status.name, 0) + 1
        return f"results {statuses}, failed sends {len(self.failures)}, failed attempts {len(self.failed_attempts)}"

    async def stop(self) -> None:
        self._stop.set()
        await asyncio.wait_for(asyncio.gather(*self._tasks), 30)


def stream_producer(cluster: LocalCluster, send_timeout: float) -> Producer:
    return Producer("faults-pg", namesrv_addr=cluster.namesrv_addr, send_msg_timeout=send_timeout,
                    poll_name_server_interval=0.5,
                    not_available_duration=(0, 0, 1000, 1000, 1000, 1000, ISOLATION_MS))


# -- master ------------------------------------------------------------------------------------------------


async def test_master_sigkill_is_isolated_and_its_slave_still_serves_its_messages(tmp_path: Path) -> None:
    topic = "FaultMasterKill"
    async with running_cluster(tmp_path, "2m-2s-sync") as cluster:
        await create_topic(cluster, topic)
        slave_addr = cluster.broker("broker-a-s").addr
        async with stream_producer(cluster, send_timeout=3.0) as producer:
            stream = Stream(producer, topic)
            try:
                await stream.flowing()
                cluster.signal("broker-a", signal.SIGKILL)
                killed_at = time.monotonic()
                await cluster.wait_exit("broker-a", 10)
                await eventually(lambda: stream.ok("broker-b", since=killed_at + 1.0) >= 100, timeout=30,
                                 message="sends continuing on broker-b")
                # Both name servers saw the master's connection close: broker-a is its slave alone.
                await eventually(lambda: all_namesrvs_have(cluster, "broker-a", {1: slave_addr}), timeout=10,
                                 message="the dead master dropped from the routes")
                acked_a = stream.acked("broker-a")
                # A consumer that knows only the name servers reads broker-a's messages from its slave.
                from_slave = await consume_all(cluster.namesrv_addr, topic, "broker-a")

                await cluster.restart("broker-a")
                restarted_at = time.monotonic()
                await cluster.wait_registered(20)
                await eventually(lambda: stream.ok("broker-a", since=restarted_at) >= 10, timeout=30,
                                 message="the restarted master acknowledging again (slave re-attached)")
            finally:
                await stream.stop()
        print(f"master SIGKILL: {stream.summary()}; {len(acked_a)} acked by broker-a before the kill, "
              f"{len(from_slave)} read from its slave")

        # Only the sends in flight at the kill failed on broker-a, each retried on broker-b; no send failed.
        assert stream.failures == []
        assert {b for _, b in stream.failed_attempts} == {"broker-a"}
        first_failed = min(t for t, _ in stream.failed_attempts)
        assert 1 <= len(stream.failed_attempts) <= 2 * SENDERS
        # Isolated at once: nobody tried broker-a again while it was down (only in-flight sends failed).
        assert all(t < first_failed + 1.0 for t, _ in stream.failed_attempts)
        late = [t for t, _, r in stream.results
                if killed_at <= t < restarted_at and r.message_queue.broker_name == "broker-a"]
        assert len(late) <= SENDERS  # answers written just before the kill
        assert not any(r.message_queue.broker_name == "broker-a" for t, _, r in stream.results
                       if max(late, default=killed_at) < t < restarted_at)
        # SYNC_MASTER: every SEND_OK of broker-a was on the slave; the consumer read every one of them.
        assert len(acked_a) >= 50 and acked_a <= from_slave
        assert all(r.status in STORED for _, _, r in stream.results)
        everything = await consume_all(cluster.namesrv_addr, topic)
        assert stream.acked() <= everything


async def test_master_sigstop_times_out_is_routed_around_and_serves_again_after_sigcont(tmp_path: Path) -> None:
    topic = "FaultMasterStop"
    send_timeout = 2.0
    async with running_cluster(tmp_path, "2m-2s-sync") as cluster:
        await create_topic(cluster, topic)
        master_addr = cluster.broker("broker-a").addr
        slave_addr = cluster.broker("broker-a-s").addr
        async with stream_producer(cluster, send_timeout=send_timeout) as producer:
            stream = Stream(producer, topic)
            try:
                await stream.flowing()
                cluster.signal("broker-a", signal.SIGSTOP)
                frozen_at = time.monotonic()
                try:
                    await eventually(lambda: bool(stream.failures), timeout=send_timeout + 10,
                                     message="a send to the frozen master timing out")
                    isolated_at = stream.failures[0].at
                    # Isolated: the stream goes on, on broker-b, while broker-a stays frozen.
                    await eventually(lambda: stream.ok("broker-b", since=isolated_at + send_timeout) >= 100,
                                     timeout=30, message="sends routed around the frozen master")
                    # Frozen, it keeps its TCP connections: the name servers drop it after brokerChannelExpiredTime.
                    await eventually(lambda: all_namesrvs_have(cluster, "broker-a", {1: slave_addr}),
                                     timeout=EXPIRY + 15, message="the frozen master expired by the name servers")
                    expired_after = time.monotonic() - frozen_at
                    assert cluster.broker("broker-a").alive
                finally:
                    cluster.signal("broker-a", signal.SIGCONT)
                resumed_at = time.monotonic()
                await eventually(lambda: all_namesrvs_have(cluster, "broker-a", {0: master_addr, 1: slave_addr}),
                                 timeout=20, message="the resumed master registered again")
                await eventually(lambda: stream.ok("broker-a", since=resumed_at) >= 10, timeout=30,
                                 message="the resumed master acknowledging again")
            finally:
                await stream.stop()
        print(f"master SIGSTOP: {stream.summary()}; expired by the name servers {expired_after:.1f}s after SIGSTOP")

        # Sends that met the frozen master timed out (the whole budget; RocketMQ does not retry a timeout
        # within it); at most one per sender, each on broker-a, all before the isolation took hold.
        assert 1 <= len(stream.failures) <= SENDERS
        for failure in stream.failures:
            assert failure.timed_out and set(failure.brokers) == {"broker-a"}, failure
            assert failure.elapsed >= send_timeout * 0.9, failure
            assert failure.at <= isolated_at + send_timeout + 1.0, failure
        assert {b for _, b in stream.failed_attempts} == {"broker-a"}
        # Expiry is by silence: not before brokerChannelExpiredTime minus one registration period.
        assert expired_after >= EXPIRY - REGISTER_PERIOD - 0.5
        # After SIGCONT only broker-a may answer a replication status (its slave re-attaching), never a failure.
        assert all(r.status is SendStatus.SEND_OK or (r.message_queue.broker_name == "broker-a" and t >= resumed_at
                                                        and r.status in STORED) for t, _, r in stream.results)
        # Nothing acknowledged is lost: every stored answer is read back through the routes.
        everything = await consume_all(cluster.namesrv_addr, topic)
        assert stream.stored() <= everything
        # SYNC_MASTER: what broker-a acknowledged, before the freeze and after, is on its slave.
        acked_a = stream.acked("broker-a")

        async def on_slave() -> bool:
            return acked_a <= await pull_bodies(slave_addr, topic)

        await eventually(on_slave, timeout=10, interval=0.2, message="broker-a's acknowledged messages on its slave")


# -- slave -------------------------------------------------------------------------------------------------


async def timed_send(producer: Producer, topic: str, body: bytes, broker: str) -> tuple[SendStatus, float]:
    started = time.monotonic()
    result = await producer.send(Message(topic, body), selector=on_broker(broker), arg=None)
    assert result.message_queue.broker_name == broker
    return result.status, time.monotonic() - started


async def test_slave_sigkill_gives_slave_not_available_and_restart_catches_up(tmp_path: Path) -> None:
    topic = "FaultSlaveKill"
    async with running_cluster(tmp_path, "2m-2s-sync") as cluster:
        await create_topic(cluster, topic)
        async with Producer("faults-pg", namesrv_addr=cluster.namesrv_addr, send_msg_timeout=5.0) as producer:
            for i in range(20):
                status, _ = await timed_send(producer, topic, f"before-{i}".encode(), "broker-a")
                assert status is SendStatus.SEND_OK
            cluster.signal("broker-a-s", signal.SIGKILL)
            await cluster.wait_exit("broker-a-s", 10)
            # The master sees the HA connection close: without a slave, a SYNC_MASTER stores the message and
            # says SLAVE_NOT_AVAILABLE at once (RocketMQ's isSlaveOK check), never SEND_OK.
            seen: list[tuple[SendStatus, float]] = []

            async def slave_gone() -> bool:
                seen.append(await timed_send(producer, topic, f"down-{len(seen)}".encode(), "broker-a"))
                return seen[-1][0] is SendStatus.SLAVE_NOT_AVAILABLE

            await eventually(slave_gone, timeout=10, interval=0.05, message="SLAVE_NOT_AVAILABLE")
            for _ in range(20):
                seen.append(await timed_send(producer, topic, f"down-{len(seen)}".encode(), "broker-a"))
            assert all(s in (SendStatus.FLUSH_SLAVE_TIMEOUT, SendStatus.SLAVE_NOT_AVAILABLE) for s, _ in seen), seen
            assert [s for s, _ in seen[-20:]] == [SendStatus.SLAVE_NOT_AVAILABLE] * 20
            assert max(t for _, t in seen[-20:]) < SLAVE_TIMEOUT  # answered without waiting for a replica
            assert (await runtime(cluster.broker("broker-a").addr))["haConnectionCount"] == "0"
            status, _ = await timed_send(producer, topic, b"group-b", "broker-b")
            assert status is SendStatus.SEND_OK  # the other group is untouched

            await cluster.restart("broker-a-s")
            await cluster.wait_replicating(20)
            end = await assert_replica_identical(cluster, "broker-a", "broker-a-s")

            async def ok_again() -> bool:
                return (await timed_send(producer, topic, b"after", "broker-a"))[0] is SendStatus.SEND_OK

            await eventually(ok_again, timeout=20, interval=0.1, message="SEND_OK again after the restart")
        # The restarted slave has what was written while it was down, and serves it.
        on_slave = await pull_bodies(cluster.broker("broker-a-s").addr, topic)
        assert {f"down-{i}".encode() for i in range(len(seen))} <= on_slave
        print(f"slave SIGKILL: {len(seen)} puts answered {sorted({s.name for s, _ in seen})} while it was down; "
              f"replica identical up to offset {end}")


async def test_slave_sigstop_gives_flush_slave_timeout_then_not_available_and_catches_up(tmp_path: Path) -> None:
    topic = "FaultSlaveStop"
    async with running_cluster(tmp_path, "2m-2s-sync") as cluster:
        await create_topic(cluster, topic)
        master = cluster.broker("broker-a").addr
        async with Producer("faults-pg", namesrv_addr=cluster.namesrv_addr, send_msg_timeout=5.0) as producer:
            for i in range(20):
                status, _ = await timed_send(producer, topic, f"before-{i}".encode(), "broker-a")
                assert status is SendStatus.SEND_OK
            cluster.signal("broker-a-s", signal.SIGSTOP)
            stopped_at = time.monotonic()
            seen: list[tuple[SendStatus, float]] = []
            try:
                # The frozen slave's connection stays open and silent: a put waits slaveTimeout for an
                # acknowledgement that never comes, is stored, and says FLUSH_SLAVE_TIMEOUT.
                seen.append(await timed_send(producer, topic, b"frozen-0", "broker-a"))
                assert seen[0][0] is SendStatus.FLUSH_SLAVE_TIMEOUT
                assert SLAVE_TIMEOUT * 0.9 <= seen[0][1] < SLAVE_TIMEOUT + 2.0

                # After haHousekeepingInterval of silence the master drops it: SLAVE_NOT_AVAILABLE at once.
                async def dropped() -> bool:
                    seen.append(await timed_send(producer, topic, f"frozen-{len(seen)}".encode(), "broker-a"))
                    return seen[-1][0] is SendStatus.SLAVE_NOT_AVAILABLE

                await eventually(dropped, timeout=HOUSEKEEPING + 10, interval=0.05,
                                 message="the silent slave dropped by the master")
                dropped_after = time.monotonic() - stopped_at
                for _ in range(5):
                    seen.append(await timed_send(producer, topic, f"frozen-{len(seen)}".encode(), "broker-a"))
                assert (await runtime(master))["haConnectionCount"] == "0"
                assert cluster.broker("broker-a-s").alive
            finally:
                cluster.signal("broker-a-s", signal.SIGCONT)
            statuses = [s for s, _ in seen]
            first_not_available = statuses.index(SendStatus.SLAVE_NOT_AVAILABLE)
            assert set(statuses[:first_not_available]) == {SendStatus.FLUSH_SLAVE_TIMEOUT}
            assert set(statuses[first_not_available:]) == {SendStatus.SLAVE_NOT_AVAILABLE}
            assert max(t for _, t in seen[first_not_available:]) < SLAVE_TIMEOUT
            # Dropped by silence, not earlier: at least the housekeeping interval minus one heartbeat.
            assert dropped_after >= HOUSEKEEPING - HEARTBEAT - 0.5

            # SIGCONT: the slave reconnects and copies what it missed; SEND_OK again; the logs are identical.
            await cluster.wait_replicating(20)

            async def ok_again() -> bool:
                return (await timed_send(producer, topic, b"after", "broker-a"))[0] is SendStatus.SEND_OK

            await eventually(ok_again, timeout=20, interval=0.1, message="SEND_OK again after SIGCONT")
            end = await assert_replica_identical(cluster, "broker-a", "broker-a-s")
        on_slave = await pull_bodies(cluster.broker("broker-a-s").addr, topic)
        assert {f"frozen-{i}".encode() for i in range(len(seen))} <= on_slave
        print(f"slave SIGSTOP: statuses {[s.name for s in statuses]}; dropped {dropped_after:.1f}s after SIGSTOP; "
              f"replica identical up to offset {end}")


# -- name server -------------------------------------------------------------------------------------------


async def watch_registrations(cluster: LocalCluster, namesrv: str, seconds: float) -> int:
    """For ``seconds`` (longer than the expiry), ask ``namesrv`` again and again: every broker must stay
    registered with it, which it only does if the brokers keep registering. Returns the number of looks."""
    wanted = {c.addr for c in cluster.brokers()}
    looks = 0
    end = time.monotonic() + seconds
    async with AdminClient([namesrv], timeout=2.0) as admin:
        while time.monotonic() < end:
            info = await admin.cluster_info(namesrv)
            seen = {a for bd in info.broker_addr_table.values() for a in bd.broker_addrs.values()}
            assert seen == wanted, f"{namesrv} lost brokers: {wanted - seen}"
            looks += 1
            await asyncio.sleep(0.25)
    return looks


async def fresh_producer_asking(victim: str, survivor: str) -> Producer:
    """A started producer (a client instance of its own) whose first name server to ask is ``victim``: the
    client picks its first one at random, so instances are made until one starts there (1/2 each time)."""
    for attempt in range(32):
        producer = Producer("faults-fresh-pg", namesrv_addr=[victim, survivor], instance_name=f"fresh-{attempt}",
                            namesrv_timeout=3.0, send_msg_timeout=10.0)
        await producer.start()
        if producer.instance.refresher.current_namesrv == victim:
            return producer
        await producer.shutdown()
    raise AssertionError("no client instance started with the faulty name server first")


async def fresh_client_round_trip(cluster: LocalCluster, victim: str, topic: str) -> float:
    """A new producer that asks the faulty name server first, and a new consumer, send and read back one
    message through the other; returns how long the send took."""
    survivor = next(a for a in cluster.namesrv_addrs if a != victim)
    body = f"fresh-{time.monotonic_ns()}".encode()
    producer = await fresh_producer_asking(victim, survivor)
    try:
        started = time.monotonic()
        result = await producer.send(Message(topic, body))
        took = time.monotonic() - started
        # failed over, and sticks to the one that answered
        assert producer.instance.refresher.current_namesrv == survivor
    finally:
        await producer.shutdown()
    assert result.status is SendStatus.SEND_OK
    assert body in await consume_all(f"{victim};{survivor}", topic, result.message_queue.broker_name)
    return took


async def namesrv_fault(tmp_path: Path, sig: signal.Signals) -> tuple[Stream, float, int]:
    topic, late_topic = f"FaultNs{sig.name}", f"FaultNsLate{sig.name}"
    async with running_cluster(tmp_path, "2m-noslave") as cluster:
        victim, survivor = cluster.namesrv_addrs
        await create_topic(cluster, topic)
        async with stream_producer(cluster, send_timeout=3.0) as producer:
            stream = Stream(producer, topic)
            try:
                await eventually(lambda: stream.ok("broker-a") >= 30 and stream.ok("broker-b") >= 30, timeout=30,
                                 message="sends flowing")
                cluster.signal("namesrv-0", sig)
                faulted_at = time.monotonic()
                try:
                    # Brokers keep registering with the other one: for twice its expiry nobody is dropped.
                    looks = await watch_registrations(cluster, survivor, 2 * EXPIRY)
                    # A topic created now is routed by the survivor (brokers register it there at once).
                    await create_topic(cluster, late_topic, [survivor])
                    async with AdminClient([survivor]) as admin:
                        route = await admin.topic_route(late_topic)
                    assert sorted(q.broker_name for q in route.queue_datas) == ["broker-a", "broker-b"]
                    # New clients given the faulty one first still get routes, send and consume.
                    took = await fresh_client_round_trip(cluster, victim, late_topic)
                    assert took < 8.0
                    assert stream.ok("broker-a", since=faulted_at) > 0 and stream.ok("broker-b", since=faulted_at) > 0
                finally:
                    if sig is signal.SIGSTOP:
                        cluster.signal("namesrv-0", signal.SIGCONT)
                if sig is signal.SIGSTOP:
                    # Resumed, it serves complete routes again, the topic created meanwhile included.
                    async def victim_routes() -> bool:
                        try:
                            async with AdminClient([victim], timeout=2.0) as admin:
                                r = await admin.topic_route(late_topic)
                        except AdminError:
                            return False
                        return sorted(q.broker_name for q in r.queue_datas) == ["broker-a", "broker-b"]

                    await eventually(victim_routes, timeout=20, interval=0.2, message="the resumed name server")
                else:
                    assert not cluster.children["namesrv-0"].alive
            finally:
                await stream.stop()
    # The stream never noticed: no failed send, every answer SEND_OK.
    assert stream.failures == [] and stream.failed_attempts == []
    assert all(r.status is SendStatus.SEND_OK for _, _, r in stream.results)
    return stream, took, looks


async def test_namesrv_sigkill_clients_and_brokers_work_through_the_other(tmp_path: Path) -> None:
    stream, took, looks = await namesrv_fault(tmp_path, signal.SIGKILL)
    print(f"name server SIGKILL: {stream.summary()}; fresh client's first send {took:.2f}s; "
          f"{looks} looks at the survivor's registrations")


async def test_namesrv_sigstop_clients_and_brokers_work_through_the_other(tmp_path: Path) -> None:
    stream, took, looks = await namesrv_fault(tmp_path, signal.SIGSTOP)
    print(f"name server SIGSTOP: {stream.summary()}; fresh client's first send {took:.2f}s; "
          f"{looks} looks at the survivor's registrations")

