"""``docker compose up`` on a real engine, as a user runs it: the project's image built on a base made here, the
project's own ``docker-compose.yml`` with no variable set, and clients on the host and in a container.

One test, in the order a user meets things: the cluster comes up healthy; ``rmq-admin clusterList`` from the host
shows two SYNC_MASTERs and two slaves; a client in a container of the Compose network sends; the SDK on the host
sends 1,000 messages and a push consumer on the host receives every one; broker-a's master is killed and started
while the host keeps sending, and every acknowledged message is still received; ``down`` then ``up`` with the same
volumes, and a new consumer group reads every acknowledged message again. Traffic goes to 127.0.0.1 (the name
servers' published ports) and to the test's own containers (the addresses the brokers advertise).

The engine, its images, containers, volumes and networks all live in a temporary directory removed at the end
(:mod:`tests.docker.engine`). Where no engine can run, the test is skipped with the reason; with
``POCKETMQ_REQUIRE_DOCKER=1`` (CI) it fails instead, so a machine that lost its engine cannot pass unnoticed.
"""

from __future__ import annotations

import functools
import json
import os
import socket
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NoReturn

import pytest

from pocketmq.admin import cli
from pocketmq.client import ConsumeFromWhere, ConsumeResult, Message, MessageExt, SendStatus
from pocketmq.client.blocking import Producer, PushConsumer
from tests.docker.engine import ROOT, Engine, EngineUnavailable, base_tarball, find_tools, python_base_image
from tests.helpers import wait_until

pytestmark = [pytest.mark.docker, pytest.mark.timeout(1800)]

PROJECT = "pocketmqtest"
IMAGE = "pocketmq:latest"
BASE_TAG = "pocketmq-test/python:3.11"
NAMESRV = "127.0.0.1:9876;127.0.0.1:9877"
IN_NETWORK_NAMESRV = "namesrv-0:9876;namesrv-1:9877"
PUBLISHED_PORTS = (9876, 9877, 10911, 10921, 10931, 10941)
SERVICES = ("namesrv-0", "namesrv-1", "broker-a", "broker-a-s", "broker-b", "broker-b-s")
LAYOUT = [("broker-a", 0, "SYNC_MASTER"), ("broker-a", 1, "SLAVE"), ("broker-b", 0, "SYNC_MASTER"),
          ("broker-b", 1, "SLAVE")]
TOPIC = "DockerOrders"
FIRST_BATCH = 1000
FROM_CONTAINER = 10
#: Sends while broker-a's master is down and back: paced, and bounded in count as well as in time.
FAILOVER_PACE = 0.02
MAX_FAILOVER_SENDS = 20_000
MAX_FAILOVER_SECONDS = 600.0
#: The stand-in base plus the project must stay an image of a few tens of MB on top of its base.
MAX_PROJECT_LAYERS = 64 * 1024 * 1024
#: Clients see a broker that left or came back within seconds rather than the default 30.
CLIENT_OPTIONS: dict[str, Any] = {"namesrv_addr": NAMESRV, "poll_name_server_interval": 3.0,
                                  "heartbeat_broker_interval": 5.0}


def unavailable(reason: str) -> NoReturn:
    if os.environ.get("POCKETMQ_REQUIRE_DOCKER") == "1":
        pytest.fail(f"POCKETMQ_REQUIRE_DOCKER=1 but no Docker engine here: {reason}")
    pytest.skip(reason)


@pytest.fixture
def engine() -> Iterator[Engine]:
    """A private engine; at the end the Compose project (containers, volumes, network, images) is taken down
    and the engine stopped by PID, its directory removed."""
    try:
        tools = find_tools()
    except EngineUnavailable as exc:
        unavailable(str(exc))
    busy = [port for port in PUBLISHED_PORTS if listening(port)]
    if busy:
        unavailable(f"ports {busy} are in use on this host, and docker-compose.yml publishes them")
    # Under /tmp, short: the engine's socket path must fit a sockaddr_un.
    eng = Engine(tools, Path(tempfile.mkdtemp(prefix="pmq-docker-", dir="/tmp")))
    try:
        eng.start()
    except EngineUnavailable as exc:
        eng.close()
        unavailable(str(exc))
    try:
        yield eng
    finally:
        eng.compose(ROOT, PROJECT, "down", "--volumes", "--remove-orphans", "--rmi", "all", check=False,
                    timeout=300)
        eng.close()


def test_compose_up_serves_the_host_and_containers_and_keeps_every_acknowledged_message(
        engine: Engine, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    timings: dict[str, float] = {}
    with timed(timings, "base image"):
        base = python_base_image(engine, base_tarball(engine.tools, tmp_path), tmp_path, BASE_TAG)
    with timed(timings, "project image"):
        engine.docker("build", "--network", "host", "--build-arg", f"BASE_IMAGE={base}", "-t", IMAGE, str(ROOT),
                      timeout=900)
    sizes = check_image(engine, base)
    with timed(timings, "up until healthy"):
        engine.compose(ROOT, PROJECT, "up", "-d", timeout=600)
        wait_healthy(engine)
    with timed(timings, "cluster list, topic, container client"):
        cluster_list(capsys, replicated=True)
        admin(capsys, "updateTopic", "-t", TOPIC, "-r", "4", "-w", "4")
        acked = send_from_a_container(engine)
    consumer, received = start_consumer("docker-host-group")
    try:
        with timed(timings, f"{FIRST_BATCH} sends, all received"):
            acked |= send_batch(FIRST_BATCH)
            wait_received(received, acked)
        with timed(timings, "kill and start broker-a"):
            acked |= kill_and_start_master(engine, capsys)
            wait_received(received, acked)
    finally:
        consumer.shutdown()
    assert "BROKER READY" in engine.compose(ROOT, PROJECT, "logs", "--no-color", "broker-a").stdout
    with timed(timings, "down, up until healthy"):
        engine.compose(ROOT, PROJECT, "down", timeout=300)
        engine.compose(ROOT, PROJECT, "up", "-d", timeout=600)
        wait_healthy(engine)
        cluster_list(capsys, replicated=True)
    with timed(timings, "every message read again"):
        consumer, received = start_consumer("docker-after-restart")
        try:
            wait_received(received, acked)
        finally:
            consumer.shutdown()
    with capsys.disabled():
        print(f"\ndocker test: engine storage {engine.storage_driver}; image {sizes}; "
              f"{len(acked)} messages acknowledged; " + ", ".join(f"{k} {v:.0f}s" for k, v in timings.items()))


# -- steps ---------------------------------------------------------------------------------------------------


def check_image(engine: Engine, base: str) -> str:
    """The image runs as a non-root user and adds a bounded amount to its base; returns the sizes."""
    user, size = engine.docker("image", "inspect", IMAGE, "--format", "{{.Config.User}} {{.Size}}").stdout.split()
    base_size = int(engine.docker("image", "inspect", base, "--format", "{{.Size}}").stdout)
    assert user.split(":")[0] not in ("", "0", "root")
    assert int(size) - base_size < MAX_PROJECT_LAYERS, (size, base_size)
    return f"{int(size) / 1e6:.0f} MB = base {base_size / 1e6:.0f} MB + {(int(size) - base_size) / 1e6:.1f} MB"


def wait_healthy(engine: Engine, timeout: float = 240.0) -> None:
    """Every service's container reports healthy (its own health check: a request answered)."""
    def states() -> dict[str, str]:
        found = {}
        for service in SERVICES:
            ids = engine.compose(ROOT, PROJECT, "ps", "-q", service).stdout.split()
            status = engine.docker("inspect", "--format", "{{.State.Health.Status}}", *ids, check=False).stdout
            found[service] = status.strip() if ids else "absent"
        return found

    last: dict[str, str] = {}

    def all_healthy() -> bool:
        last.update(states())
        return all(state == "healthy" for state in last.values())

    try:
        wait_until(all_healthy, timeout=timeout, interval=2.0, message="every service healthy")
    except AssertionError:
        logs = engine.compose(ROOT, PROJECT, "logs", "--no-color", "--tail", "20", check=False).stdout
        raise AssertionError(f"not healthy: {last}\n{logs[-6000:]}") from None


def cluster_list(capsys: pytest.CaptureFixture[str], *, replicated: bool) -> list[dict[str, Any]]:
    """``rmq-admin clusterList`` from the host: two masters and two slaves; with ``replicated`` (a fresh
    cluster) each master also reports its slave attached."""
    brokers: list[dict[str, Any]] = []

    def listed() -> bool:
        brokers[:] = admin(capsys, "clusterList")
        return sorted((b["brokerName"], b["brokerId"], b["role"]) for b in brokers) == LAYOUT

    wait_until(listed, timeout=60, interval=1.0, message=f"clusterList showing {LAYOUT}")
    if replicated:
        for master in (b for b in brokers if b["brokerId"] == 0):
            addr: str = master["addr"]
            wait_until(functools.partial(slave_attached, capsys, addr), timeout=60, interval=1.0,
                       message=f"{master['brokerName']}'s slave attached")
    return brokers


def slave_attached(capsys: pytest.CaptureFixture[str], master_addr: str) -> bool:
    return bool(admin(capsys, "brokerStatus", "-b", master_addr)["haConnectionCount"] == "1")


def send_from_a_container(engine: Engine) -> set[str]:
    """``rmq-admin sendMessage`` in a one-off container of the Compose network, through the name servers'
    service names and the addresses the brokers advertise; returns the acknowledged messages' ids."""
    out = engine.compose(ROOT, PROJECT, "run", "--rm", "--no-deps", "-T", "namesrv-0", "rmq-admin", "sendMessage",
                         "-n", IN_NETWORK_NAMESRV, "-t", TOPIC, "-p", "sent-from-a-container", "--count",
                         str(FROM_CONTAINER), "--json", timeout=180).stdout
    results = json.loads(out[out.index("["):])
    assert [r["status"] for r in results] == ["SEND_OK"] * FROM_CONTAINER, results
    return {r["uniqKey"] for r in results}


def send_batch(count: int) -> set[str]:
    """``count`` sends from the host SDK, each acknowledged SEND_OK (SYNC_MASTER: on the slave too)."""
    acked = set()
    with Producer("docker-host-producer", **CLIENT_OPTIONS) as producer:
        for i in range(count):
            result = producer.send(Message(TOPIC, f"host-{i}".encode()))
            assert result.status is SendStatus.SEND_OK, result
            acked.add(result.msg_id)
    return acked


def start_consumer(group: str) -> tuple[PushConsumer, dict[str, bytes]]:
    """A push consumer on the host reading the topic from its first offset; returns it and what it got."""
    received: dict[str, bytes] = {}
    lock = threading.Lock()

    def handle(msg: MessageExt) -> ConsumeResult:
        with lock:
            received[msg.msg_id] = msg.body
        return ConsumeResult.SUCCESS

    consumer = PushConsumer(group, consume_from_where=ConsumeFromWhere.FIRST_OFFSET, rebalance_interval=5.0,
                            **CLIENT_OPTIONS)
    consumer.subscribe(TOPIC, "*")
    consumer.register_handler(handle)
    consumer.start()
    return consumer, received


def wait_received(received: dict[str, bytes], acked: set[str], timeout: float = 180.0) -> None:
    try:
        wait_until(lambda: acked <= received.keys(), timeout=timeout, interval=0.5,
                   message=f"all {len(acked)} acknowledged messages received")
    except AssertionError:
        missing = acked - received.keys()
        raise AssertionError(f"{len(missing)} of {len(acked)} acknowledged messages never received, "
                             f"e.g. {sorted(missing)[:5]}") from None


def kill_and_start_master(engine: Engine, capsys: pytest.CaptureFixture[str]) -> set[str]:
    """SIGKILL broker-a's master while the host sends, start it again and wait until it is healthy and registered;
    returns every send acknowledged meanwhile (by broker-a before the kill, by broker-b while it is down)."""
    sender = FailoverSender()
    sender.start()
    try:
        wait_until(lambda: sender.count() >= 50, timeout=60, interval=0.2, message="sends before the kill")
        engine.compose(ROOT, PROJECT, "kill", "broker-a")
        killed_at = sender.count()
        # Sends go on: to broker-b while broker-a's master is down.
        wait_until(lambda: sender.count() >= killed_at + 50, timeout=60, interval=0.2,
                   message="sends acknowledged while broker-a is down")
        engine.compose(ROOT, PROJECT, "start", "broker-a")
        wait_healthy(engine)
        cluster_list(capsys, replicated=False)
    finally:
        sender.stop()
    assert sender.error is None, sender.error
    return set(sender.acked)


class FailoverSender(threading.Thread):
    """Sends one message after another, :data:`FAILOVER_PACE` apart, until stopped (at most
    :data:`MAX_FAILOVER_SENDS` in :data:`MAX_FAILOVER_SECONDS`), recording which were acknowledged SEND_OK and by
    which broker; a send that fails, or that the master stored without its slave (SLAVE_NOT_AVAILABLE), is not
    acknowledged and not counted."""

    def __init__(self) -> None:
        super().__init__(name="failover-sender", daemon=True)
        self.acked: dict[str, str] = {}
        self.order: list[str] = []
        self.error: BaseException | None = None
        self._stop_event = threading.Event()
        self._lock = threading.Lock()

    def run(self) -> None:
        try:
            with Producer("docker-failover-producer", send_msg_timeout=3.0, **CLIENT_OPTIONS) as producer:
                deadline = time.monotonic() + MAX_FAILOVER_SECONDS
                for i in range(MAX_FAILOVER_SENDS):
                    if self._stop_event.wait(FAILOVER_PACE) or time.monotonic() > deadline:
                        return
                    self._send(producer, i)
        except BaseException as exc:  # reported by the test thread
            self.error = exc

    def _send(self, producer: Producer, i: int) -> None:
        try:
            result = producer.send(Message(TOPIC, f"failover-{i}".encode()))
        except Exception:  # broker-a refusing or gone: this message was not acknowledged
            return
        if result.status is SendStatus.SEND_OK:
            with self._lock:
                self.acked[result.msg_id] = result.message_queue.broker_name
                self.order.append(result.msg_id)

    def count(self) -> int:
        with self._lock:
            return len(self.order)

    def stop(self) -> None:
        self._stop_event.set()
        self.join(60)
        assert not self.is_alive(), "the sender did not stop"


# -- helpers -------------------------------------------------------------------------------------------------


def admin(capsys: pytest.CaptureFixture[str], command: str, *argv: str) -> Any:
    capsys.readouterr()
    code = cli.main([command, "-n", NAMESRV, "--json", *argv])
    out = capsys.readouterr().out
    assert code == 0, out
    return json.loads(out)


def listening(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(1.0)
        return probe.connect_ex(("127.0.0.1", port)) == 0


@contextmanager
def timed(timings: dict[str, float], step: str) -> Iterator[None]:
    start = time.monotonic()
    yield
    timings[step] = time.monotonic() - start
