"""A network partition of a broker from its name servers, made with a Linux network namespace.

The broker under test runs in a namespace of its own (``ip netns exec``), joined to the root namespace by a
veth pair with a private /30 (``10.213.x.y``, chosen from the test's PID and checked to be unused). The two
name servers and a control broker run in the root namespace; the name servers listen on the root end of the
pair, so the partitioned broker can reach them only through it. Setting the root end down drops every packet
between the broker and the name servers, silently, without closing any connection: the name servers must
notice by the broker's silence (``brokerChannelExpiredTime``) and expire it, while the control broker stays
registered; when the link comes back the broker must register again on its own and serve sends.

Needs root (namespaces) and iproute2's ``ip``. As non-root the test is skipped; as root without ``ip`` it
fails, saying so. Namespace and veth pair are deleted in ``finally``; processes are killed by PID.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import pytest

from pocketmq.admin.api import AdminClient, AdminError
from pocketmq.client import Message, MessageQueue, Producer, SendStatus
from tests.helpers import eventually
from tests.procs import Proc, start_broker

REGISTER_PERIOD = 1.0
EXPIRY = 3.0
TOPIC = "PartitionTopic"
BROKER_PROPS = (
    "brokerClusterName=DefaultCluster\n"
    f"registerNameServerPeriod={int(REGISTER_PERIOD * 1000)}\n"
    "registerBrokerTimeoutMills=1000\n"
    "mappedFileSizeCommitLog=1048576\n"
    "diskMaxUsedSpaceRatio=100\n"
)
#: Milliseconds, as RocketMQ's keys: scan twice a second, drop a broker silent for EXPIRY.
NAMESRV_PROPS = f"scanNotActiveBrokerInterval=500\nbrokerChannelExpiredTime={int(EXPIRY * 1000)}\n"


def ip_tool() -> str:
    if os.geteuid() != 0:
        pytest.skip("network namespaces need root (ip netns add); this user is not root")
    ip = shutil.which("ip")
    if ip is None:
        pytest.fail("iproute2's `ip` is not installed: the partition test needs it to create a network "
                    "namespace and a veth pair (Debian/Ubuntu: apt-get install iproute2)")
    return ip


class Netns:
    """A namespace joined to the root namespace by a veth pair with a private /30."""

    def __init__(self, ip: str) -> None:
        self.ip = ip
        pid = os.getpid()
        self.name = f"pocketmq-part-{pid}"
        self.root_if, self.ns_if = f"pq{pid}r", f"pq{pid}n"  # at most 15 characters
        self.root_addr, self.ns_addr = self._free_subnet(pid)

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run([self.ip, *args], capture_output=True, text=True, timeout=15, check=False)
        if check and done.returncode != 0:
            raise AssertionError(f"ip {' '.join(args)} failed ({done.returncode}): {done.stderr.strip()}")
        return done

    def _free_subnet(self, pid: int) -> tuple[str, str]:
        used = self.run("-o", "-4", "addr", "show").stdout
        for step in range(64):
            index = (pid + step * 257) % 16384
            base = f"10.213.{index // 64}."
            first = (index % 64) * 4
            root, ns = f"{base}{first + 1}", f"{base}{first + 2}"
            if f" {root}/" not in used and f" {ns}/" not in used:
                return root, ns
        raise AssertionError("no free 10.213.x.y/30 for the veth pair")

    def create(self) -> None:
        self.run("netns", "add", self.name)
        self.run("link", "add", self.root_if, "type", "veth", "peer", "name", self.ns_if, "netns", self.name)
        self.run("addr", "add", f"{self.root_addr}/30", "dev", self.root_if)
        self.run("link", "set", self.root_if, "up")
        self.run("-n", self.name, "addr", "add", f"{self.ns_addr}/30", "dev", self.ns_if)
        self.run("-n", self.name, "link", "set", self.ns_if, "up")
        self.run("-n", self.name, "link", "set", "lo", "up")

    def set_link(self, up: bool) -> None:
        self.run("link", "set", self.root_if, "up" if up else "down")

    def delete(self) -> list[str]:
        """Remove the pair (deleting one end deletes both) and the namespace; returns what failed."""
        problems = []
        if self.run("link", "show", self.root_if, check=False).returncode == 0:
            done = self.run("link", "del", self.root_if, check=False)
            if done.returncode != 0:
                problems.append(f"link del {self.root_if}: {done.stderr.strip()}")
        if self.name in self.run("netns", "list", check=False).stdout.split():
            done = self.run("netns", "del", self.name, check=False)
            if done.returncode != 0:
                problems.append(f"netns del {self.name}: {done.stderr.strip()}")
        return problems


@contextmanager
def netns_pair() -> Iterator[Netns]:
    net = Netns(ip_tool())
    try:
        net.create()
        yield net
    finally:
        problems = net.delete()
        assert not problems, f"cleanup of the namespace failed: {problems}"


def start_namesrv_on(host: str, tmp: Path, name: str) -> Proc:
    conf = tmp / f"{name}.properties"
    conf.write_text(NAMESRV_PROPS)
    proc = Proc([sys.executable, "-m", "pocketmq.namesrv.main", "--listen", host, "--port", "0", "-c", str(conf),
                 "--kv-config-path", str(tmp / name / "kvConfig.json"), "--log-format", "json"], "NAMESRV READY")
    proc.wait_ready()
    return proc


def start_broker_in(net: Netns, namesrv: str, tmp: Path, conf: Path) -> Proc:
    proc = Proc([net.ip, "netns", "exec", net.name, sys.executable, "-m", "pocketmq.broker.main", "-n", namesrv,
                 "--listen-host", net.ns_addr, "--listen-port", "0", "--broker-ip", net.ns_addr,
                 "--broker-name", "broker-p", "--store-dir", str(tmp / "broker-p"), "-c", str(conf),
                 "--log-format", "json"], "BROKER READY")
    proc.wait_ready()
    return proc


async def registered(namesrv: str) -> dict[str, str]:
    """broker name -> master address, as ``namesrv`` has them now."""
    async with AdminClient([namesrv], timeout=2.0) as admin:
        info = await admin.cluster_info(namesrv)
    return {name: bd.broker_addrs[0] for name, bd in info.broker_addr_table.items() if 0 in bd.broker_addrs}


async def routed(namesrv: str) -> list[str]:
    """The broker names in ``namesrv``'s route of TOPIC ([] when it has none)."""
    async with AdminClient([namesrv], timeout=2.0) as admin:
        try:
            route = await admin.topic_route(TOPIC)
        except AdminError:
            return []
    return sorted(q.broker_name for q in route.queue_datas)


async def unreachable(addr: str) -> bool:
    host, port = addr.rsplit(":", 1)
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(host, int(port)), 1.0)
    except (OSError, TimeoutError):
        return True
    writer.close()
    return False


def test_partitioned_broker_expires_and_registers_again_after_healing(tmp_path: Path) -> None:
    conf = tmp_path / "broker.properties"
    conf.write_text(BROKER_PROPS)
    procs: list[Proc] = []
    with netns_pair() as net:
        try:
            namesrvs = [start_namesrv_on(net.root_addr, tmp_path, f"ns{i}") for i in range(2)]
            procs += namesrvs
            ns_list = [p.addr for p in namesrvs]
            broker = start_broker_in(net, ";".join(ns_list), tmp_path, conf)
            procs.append(broker)
            control = start_broker(namesrv=";".join(ns_list), store_dir=tmp_path / "broker-c", name="broker-c",
                                   config=conf)
            procs.append(control)
            assert broker.addr.startswith(net.ns_addr + ":")
            # `ip netns exec` execs (no fork): the PID is the broker's, and it lives in the other namespace.
            assert os.readlink(f"/proc/{broker.pid}/ns/net") != os.readlink("/proc/self/ns/net")
            timings = asyncio.run(partition_and_heal(net, ns_list, broker, control))
        finally:
            for proc in reversed(procs):
                proc.kill()
    print(f"partition: expired {timings[0]:.1f}s after the link went down; registered again "
          f"{timings[1]:.1f}s after it came back")


async def partition_and_heal(net: Netns, namesrvs: list[str], broker: Proc, control: Proc) -> tuple[float, float]:
    both = {"broker-p": broker.addr, "broker-c": control.addr}

    async def everywhere(wanted: dict[str, str], route: list[str]) -> bool:
        return all([await registered(ns) == wanted and await routed(ns) == route for ns in namesrvs])

    async with AdminClient(namesrvs) as admin:
        created = await admin.update_topic(TOPIC, read_queues=2, write_queues=2)
    assert sorted(created) == sorted(both.values())
    await eventually(lambda: everywhere(both, ["broker-c", "broker-p"]), timeout=15,
                     message="both brokers registered and routed")

    net.set_link(False)
    cut_at = time.monotonic()
    lines_before = len(broker.lines)
    assert await unreachable(broker.addr)
    # Silence, not a closed connection, is what the name servers see: they expire the broker after
    # brokerChannelExpiredTime, and only it (the control broker keeps registering and stays routed).
    await eventually(lambda: everywhere({"broker-c": control.addr}, ["broker-c"]), timeout=EXPIRY + 15,
                     interval=0.1, message="the partitioned broker expired by every name server")
    expired_after = time.monotonic() - cut_at
    assert expired_after >= EXPIRY - REGISTER_PERIOD - 0.5
    # The broker lives on and knows it cannot register (each attempt times out).
    await eventually(lambda: any("register_failed" in line for line in broker.lines[lines_before:]), timeout=10,
                     message="the partitioned broker reporting failed registrations")
    assert broker.popen.poll() is None

    net.set_link(True)
    healed_at = time.monotonic()
    # TCP retransmission backoff decides how soon the broker's stale connection is reset; then the next
    # registration reconnects. Bounded generously: the backoff after a few seconds' cut is a few seconds.
    await eventually(lambda: everywhere(both, ["broker-c", "broker-p"]), timeout=40, interval=0.2,
                     message="the broker registered again after the partition healed")
    back_after = time.monotonic() - healed_at

    # And it serves again: a producer that knows only the name servers sends to it.
    def to_partitioned(queues: Sequence[MessageQueue], _msg: Message, _arg: object) -> MessageQueue:
        return next(q for q in queues if q.broker_name == "broker-p")

    async with Producer("partition-pg", namesrv_addr=namesrvs, send_msg_timeout=10.0) as producer:
        result = await producer.send(Message(TOPIC, b"after the partition"), selector=to_partitioned, arg=None)
    assert result.status is SendStatus.SEND_OK and result.message_queue.broker_name == "broker-p"
    return expired_after, back_after
