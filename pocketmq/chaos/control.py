"""The cluster under test: :class:`pocketmq.admin.cluster.LocalCluster`'s processes, plus what faults need.

* **Presets** and what each promises (:func:`promise`): see :data:`PROMISES`.
* **A network namespace** (:class:`NetLink`): when running as root with iproute2's ``ip``, one broker (the
  *partitionable* one) runs in a namespace of its own joined to the root namespace by a veth pair on a
  private /30 (``10.214.x.y``, as ``tests/ops/test_partition.py`` does); every other process listens on the
  root end's address, so all traffic to and from that broker — clients, its slave or master, the name
  servers — crosses the pair. Setting the root end down is a silent partition; ``tc netem`` on both ends
  adds loss and delay. The broker is started through ``ip netns exec`` (which execs, so the PID is the
  broker's): the launcher's own spawning is reused, only the command line is wrapped.
* **Power loss** (:func:`drop_unflushed`): after a SIGKILL, the commit log is cut back to the flushed offset
  of the store's checkpoint file (:mod:`pocketmq.store.checkpoint`) and every consume-queue entry pointing at or past
  the consume queues' flushed offset is zeroed — what the page cache held and a power failure would lose.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from pocketmq.admin.api import AdminClient, AdminError
from pocketmq.admin.cluster import START_TIMEOUT, Child, ChildSpec, LocalCluster
from pocketmq.admin.commands_controller import elect_master
from pocketmq.remoting.codes import RequestCode
from pocketmq.store.checkpoint import StoreCheckpoint

__all__ = ["PROMISES", "ChaosCluster", "NetLink", "drop_unflushed", "netns_unavailable", "promise"]

#: What a preset promises about acknowledged (SEND_OK) messages, by preset and flush type:
#: * SYNC_FLUSH: a SEND_OK is on disk, nothing acknowledged may be lost, power loss included;
#: * a SYNC_MASTER preset with ASYNC_FLUSH: a SEND_OK is on the slave too, so nothing may be lost while faults
#:   do not overlap, a power loss of a master included: the restarted master takes back from its slave the
#:   unflushed tail it lost before it takes any write (broker/tail_recovery.py); a power loss of a slave leaves
#:   the master's copy; overlaps may lose (e.g. the slave frozen while its master restarts after a power loss:
#:   past ``haTailRecoveryTimeoutMs`` the master starts without the tail and the slave is cut back to it);
#: * ASYNC_MASTER / no slave with ASYNC_FLUSH: nothing may be lost to kills, stops and partitions (the page
#:   cache survives a process), but a power loss may lose what was not flushed;
#: * controller mode (allAckInSyncStateSet) with ASYNC_FLUSH: a SEND_OK is on every in-sync replica and the
#:   controller elects only among them, so nothing may be lost while faults do not overlap (a master and the
#:   controller leader killed together is one fault), its power loss included, and no epoch may have two masters
#:   acknowledging.
PROMISES = {
    "sync-flush": "no SEND_OK lost, whatever the faults",
    "sync-master": "no SEND_OK lost unless faults overlap",
    "async": "no SEND_OK lost unless a power loss is injected",
    "controller": "no SEND_OK lost and never two masters acknowledging in one epoch, unless faults overlap",
}

CQ_UNIT = 20


def promise(preset: str, flush: str, *, overlap: bool, power_loss: bool) -> tuple[str, bool]:
    """(which promise applies, whether it says nothing acknowledged may be lost in this run)."""
    if flush == "SYNC_FLUSH":
        return "sync-flush", True
    if "controller" in preset:
        return "controller", not overlap
    if preset.endswith("-sync"):
        return "sync-master", not overlap
    return "async", not power_loss


def netns_unavailable() -> str:
    """Why a namespace cannot be made here ("" when it can)."""
    if os.geteuid() != 0:
        return "not running as root (network namespaces need it)"
    if shutil.which("ip") is None:
        return "iproute2's `ip` is not installed"
    return ""


class NetLink:
    """A namespace joined to the root namespace by a veth pair on a free /30."""

    def __init__(self) -> None:
        ip = shutil.which("ip")
        assert ip is not None
        self.ip = ip
        self.tc = shutil.which("tc")
        pid = os.getpid()
        self.name = f"pocketmq-chaos-{pid}"
        self.root_if, self.ns_if = f"pc{pid}r", f"pc{pid}n"
        self.root_addr, self.ns_addr = self._free_subnet(pid)
        self.netem_on = False
        self.netem_error = "not created yet"

    def _run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(list(args), capture_output=True, text=True, timeout=15, check=False)
        if check and done.returncode != 0:
            raise OSError(f"{' '.join(args)} failed ({done.returncode}): {done.stderr.strip()}")
        return done

    def _free_subnet(self, pid: int) -> tuple[str, str]:
        used = self._run(self.ip, "-o", "-4", "addr", "show").stdout
        for step in range(64):
            index = (pid + step * 257) % 16384
            base, first = f"10.214.{index // 64}.", (index % 64) * 4
            root, ns = f"{base}{first + 1}", f"{base}{first + 2}"
            if f" {root}/" not in used and f" {ns}/" not in used:
                return root, ns
        raise OSError("no free 10.214.x.y/30 for the veth pair")

    def create(self) -> None:
        ip = self.ip
        self._run(ip, "netns", "add", self.name)
        self._run(ip, "link", "add", self.root_if, "type", "veth", "peer", "name", self.ns_if, "netns", self.name)
        self._run(ip, "addr", "add", f"{self.root_addr}/30", "dev", self.root_if)
        self._run(ip, "link", "set", self.root_if, "up")
        self._run(ip, "-n", self.name, "addr", "add", f"{self.ns_addr}/30", "dev", self.ns_if)
        self._run(ip, "-n", self.name, "link", "set", self.ns_if, "up")
        self._run(ip, "-n", self.name, "link", "set", "lo", "up")
        self.netem_error = self._try_netem()

    def _try_netem(self) -> str:
        """Why netem cannot shape the pair ("" when it can): no ``tc``, or a kernel without sch_netem."""
        if self.tc is None:
            return "tc (iproute2) is not installed"
        done = self._run(self.tc, "qdisc", "add", "dev", self.root_if, "root", "netem", "delay", "1ms", check=False)
        if done.returncode != 0:
            return f"tc netem failed: {done.stderr.strip() or done.returncode}"
        self._run(self.tc, "qdisc", "del", "dev", self.root_if, "root", check=False)
        return ""

    def set_link(self, up: bool) -> None:
        self._run(self.ip, "link", "set", self.root_if, "up" if up else "down")

    def block_ports(self, ports: list[int], blocked: bool) -> None:
        """In the namespace, drop (or stop dropping) every packet to or from these ports of the root end: the
        broker there keeps its clients and replicas but loses the processes listening on them (iptables)."""
        action = "-A" if blocked else "-D"
        for port in ports:
            for chain, flag in (("OUTPUT", "--dport"), ("INPUT", "--sport")):
                self._run(self.ip, "netns", "exec", self.name, "iptables", action, chain, "-p", "tcp", "-s" if
                          chain == "INPUT" else "-d", self.root_addr, flag, str(port), "-j", "DROP",
                          check=blocked)

    def netem(self, loss_percent: float, delay_ms: int) -> None:
        """Loss and delay on both ends of the pair (each end shapes what it sends)."""
        assert self.tc is not None
        spec = ["netem", "delay", f"{delay_ms}ms", "loss", f"{loss_percent}%"]
        self._run(self.tc, "qdisc", "add", "dev", self.root_if, "root", *spec)
        self._run(self.ip, "netns", "exec", self.name, self.tc, "qdisc", "add", "dev", self.ns_if, "root", *spec)
        self.netem_on = True

    def clear_netem(self) -> None:
        if self.tc is None:
            return
        self._run(self.tc, "qdisc", "del", "dev", self.root_if, "root", check=False)
        self._run(self.ip, "netns", "exec", self.name, self.tc, "qdisc", "del", "dev", self.ns_if, "root", check=False)
        self.netem_on = False

    def delete(self) -> list[str]:
        """Remove the pair and the namespace; returns what failed."""
        problems = []
        if self._run(self.ip, "link", "show", self.root_if, check=False).returncode == 0:
            done = self._run(self.ip, "link", "del", self.root_if, check=False)
            if done.returncode != 0:
                problems.append(f"link del {self.root_if}: {done.stderr.strip()}")
        if self.name in self._run(self.ip, "netns", "list", check=False).stdout.split():
            done = self._run(self.ip, "netns", "del", self.name, check=False)
            if done.returncode != 0:
                problems.append(f"netns del {self.name}: {done.stderr.strip()}")
        return problems

    def wrap(self, spec: ChildSpec, properties: Path) -> None:
        """Make ``spec`` start inside the namespace, listening and registering on the namespace's address."""
        lines = [line for line in properties.read_text(encoding="utf-8").splitlines()
                 if not line.startswith("brokerIP1=")]
        properties.write_text("\n".join([*lines, f"brokerIP1={self.ns_addr}"]) + "\n", encoding="utf-8")
        args = list(spec.args)
        args[args.index("--listen-host") + 1] = self.ns_addr
        # LocalCluster runs `python <args>`: a one-line exec of `ip netns exec <ns> python <original args>`.
        exec_line = "import os, sys; os.execv(sys.argv[1], sys.argv[1:])"
        spec.args = ["-c", exec_line, self.ip, "netns", "exec", self.name, sys.executable, *args]


class ChaosCluster(LocalCluster):
    """A :class:`LocalCluster` whose one broker may run in a network namespace (see the module docstring)."""

    def __init__(self, *args: object, link: NetLink | None = None, partitioned: str = "", **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.link = link
        self.partitioned = partitioned
        #: every address a restarted broker had before (with ephemeral ports a restart takes another): address -> name
        self.former_addrs: dict[str, str] = {}

    async def restart(self, name: str, timeout: float = START_TIMEOUT) -> Child:
        old = self.children.get(name)
        if old is not None and old.addr:
            self.former_addrs[old.addr] = name
        return await super().restart(name, timeout)

    def namesrv_ports(self) -> list[int]:
        return [int(c.addr.rsplit(":", 1)[1]) for c in self.children.values() if c.spec.kind == "namesrv" and c.addr]

    async def controller_leader(self) -> Child | None:
        """The name server whose controller leads now (None: no leader, or no controller)."""
        async with AdminClient(self.namesrv_addrs, timeout=2.0) as admin:
            for address in self.namesrv_addrs:
                try:
                    response = await admin.call(address, RequestCode.CONTROLLER_GET_METADATA_INFO)
                except AdminError:
                    continue
                leader = (response.ext_fields or {}).get("controllerLeaderAddress", "")
                port = leader.rsplit(":", 1)[-1]
                for child in self.children.values():
                    if child.spec.kind == "namesrv" and child.alive and child.addr.rsplit(":", 1)[-1] == port:
                        return child
        return None

    async def switch_master(self, child: Child, timeout: float = 15.0) -> None:
        """A planned switchover of ``child``'s group to it (``electMaster``), waited for (bounded); raises
        AdminError when the controllers refuse."""
        async with AdminClient(self.namesrv_addrs, timeout=5.0) as admin:
            await elect_master(admin, self.namesrv_addrs, "DefaultCluster", child.spec.broker_name,
                               child.spec.broker_id)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:  # polled: the role is the broker's answer, there is no event to wait on
            if (await self.masters()).get(child.spec.broker_name) is child:
                return
            await asyncio.sleep(0.1)

    def _broker_spec(self, index: int, path: Path) -> ChildSpec:
        spec = super()._broker_spec(index, path)
        if self.link is not None and spec.name == self.partitioned:
            self.link.wrap(spec, self.base_dir / "conf" / f"{spec.name}.properties")
        return spec


def _cut_file(path: Path, keep: int) -> None:
    """Zero ``path`` from byte ``keep`` on (its size stays: the store's files are pre-sized)."""
    size = path.stat().st_size
    if keep >= size:
        return
    with path.open("r+b") as f:
        f.seek(keep)
        remaining = size - keep
        chunk = bytes(1 << 20)
        while remaining > 0:
            n = min(remaining, len(chunk))
            f.write(chunk[:n])
            remaining -= n


def drop_unflushed(store_dir: str, durable_record: int = -1) -> dict[str, int]:
    """After a SIGKILL: keep only what the checkpoint says was flushed (see the module docstring), and at
    least the record starting at ``durable_record`` (-1: none) with everything before it. Blocking.

    The checkpoint is rewritten once a second, so it lags what SYNC_FLUSH has already fsynced: a broker that
    answered SEND_OK with SYNC_FLUSH had that record on disk, and the caller passes the last such record so
    the cut is not harsher than a real power failure. Returns the offset kept, the bytes zeroed in the commit
    log and the consume-queue entries zeroed."""
    root = Path(store_dir)
    checkpoint = StoreCheckpoint.load(str(root / "checkpoint"))
    flushed = checkpoint.physic_offset if checkpoint.has_offsets else 0
    logics = checkpoint.logics_offset if checkpoint.has_offsets else 0
    commitlog = root / "commitlog"
    if durable_record >= 0:
        flushed = max(flushed, _record_end(commitlog, durable_record))
    dropped = 0
    if commitlog.is_dir():
        for path in sorted(commitlog.iterdir(), key=lambda p: int(p.name) if p.name.isdigit() else -1):
            if not path.name.isdigit():
                continue
            start = int(path.name)
            size = path.stat().st_size
            keep = max(0, min(size, flushed - start))
            before = _used_bytes(path, keep)
            _cut_file(path, keep)
            dropped += before
    entries = 0
    cq_root = root / "consumequeue"
    if cq_root.is_dir():
        for path in cq_root.glob("*/*/*"):
            if path.is_file() and path.name.isdigit():
                entries += _cut_consume_queue(path, logics)
    return {"flushed_offset": flushed, "commitlog_bytes_dropped": dropped, "cq_entries_dropped": entries}


def _record_end(commitlog: Path, offset: int) -> int:
    """The end of the record at commit-log ``offset`` (its first 4 bytes are its size); ``offset`` when the
    file is missing."""
    files = sorted((int(p.name), p) for p in commitlog.iterdir() if p.name.isdigit()) if commitlog.is_dir() else []
    for start, path in reversed(files):
        if start <= offset:
            with path.open("rb") as f:
                f.seek(offset - start)
                size = int.from_bytes(f.read(4), "big", signed=True)
            return offset + max(size, 0)
    return offset


def _used_bytes(path: Path, keep: int) -> int:
    """Non-zero bytes after ``keep`` (an estimate of the records lost; zeros are the unused tail)."""
    total = 0
    with path.open("rb") as f:
        f.seek(keep)
        while chunk := f.read(1 << 20):
            stripped = chunk.rstrip(b"\0")
            total += len(stripped) if stripped else 0
            if not stripped:
                break
    return total


def _cut_consume_queue(path: Path, logics_offset: int) -> int:
    """Zero the entries from the first one whose commit-log offset is at or past ``logics_offset``."""
    data = path.read_bytes()
    for pos in range(0, len(data) - CQ_UNIT + 1, CQ_UNIT):
        unit = data[pos:pos + CQ_UNIT]
        if unit == bytes(CQ_UNIT):
            return 0
        if int.from_bytes(unit[:8], "big") >= logics_offset:
            used = len(data[pos:].rstrip(b"\0"))
            _cut_file(path, pos)
            return (used + CQ_UNIT - 1) // CQ_UNIT
    return 0
