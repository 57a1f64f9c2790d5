"""The nemesis: faults drawn by a seeded random generator, injected one at a time or overlapping.

Kinds (:data:`KINDS`):

* ``kill`` — SIGKILL of a master, a slave or a name server, then a restart with the same arguments;
* ``stop`` — SIGSTOP, then SIGCONT;
* ``partition`` — the namespace broker's veth link down, then up (:class:`~pocketmq.chaos.control.NetLink`);
* ``netem`` — packet loss and delay on that link (``tc netem``), then removed;
* ``powerloss`` — SIGKILL of a broker, its unflushed tail dropped (:func:`~pocketmq.chaos.control.drop_unflushed`),
  then a restart.

Controller mode (:data:`CONTROLLER_KINDS`), the role of each process being the controllers' to decide, picks a broker
group and hits whichever replica is its master at that moment (the fault records the group and that master's
address, for the failover-time and two-masters checkers):

* ``kill-master``, ``stop-master``, ``powerloss-master`` — as above, on the current master;
* ``partition-master`` — the namespace broker cut from the controllers only (iptables in its namespace drops what
  goes to or comes from the name servers' ports: they carry the controllers), its clients and replicas still
  reachable; made the master first by a planned switchover when it is not (the note says if that failed);
* ``kill-controller-leader`` — SIGKILL of the name server whose controller leads, then a restart;
* ``kill-master-and-leader`` — a group's master and the controller leader killed at once.

A fault that cannot be injected here (no namespace, no ``tc``) is recorded with the reason and skipped.
Without ``overlap`` each fault is healed before the next is drawn; with it, a new fault may start while
others last, never on a process already under a fault. Every wait is bounded: a fault lasts at most
``fault_max`` seconds plus its restart (bounded by the launcher's start timeout), and :meth:`Nemesis.heal`
ends every fault in progress.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import signal
from collections.abc import Callable
from dataclasses import dataclass

from pocketmq.admin.api import AdminError
from pocketmq.admin.cluster import ClusterError
from pocketmq.chaos.control import ChaosCluster, drop_unflushed
from pocketmq.chaos.events import FaultEvent

__all__ = ["CONTROLLER_KINDS", "KINDS", "Nemesis", "NemesisConfig"]

KINDS = ("kill", "stop", "partition", "netem", "powerloss")
CONTROLLER_KINDS = ("kill-master", "stop-master", "partition-master", "kill-controller-leader",
                    "kill-master-and-leader", "powerloss-master")
_MASTER_KINDS = frozenset({"kill-master", "stop-master", "powerloss-master", "kill-master-and-leader"})
RESTART_TIMEOUT = 60.0
EXIT_TIMEOUT = 10.0
IN_SYNC_WAIT = 20.0
"""How long a fault on a controller-mode master waits for every running replica of its group to be in sync."""
NETEM_LOSS_PERCENT = 20.0
NETEM_DELAY_MS = 100


@dataclass(frozen=True, slots=True)
class NemesisConfig:
    kinds: tuple[str, ...] = KINDS
    seed: int = 1
    overlap: bool = False
    fault_min: float = 3.0
    fault_max: float = 10.0
    gap_min: float = 4.0
    gap_max: float = 12.0


class Nemesis:
    """Injects faults into ``cluster`` until :meth:`heal`; every fault lands in :attr:`faults`."""

    def __init__(self, cluster: ChaosCluster, config: NemesisConfig, now: Callable[[], float],
                 say: Callable[[str], None], durable_record: Callable[[str], int] = lambda _addr: -1) -> None:
        self.cluster = cluster
        self.config = config
        self.rng = random.Random(config.seed)
        self.now = now
        self.say = say
        #: broker address -> commit-log offset of a record known to be on disk (-1: none); see drop_unflushed.
        self.durable_record = durable_record
        self.faults: list[FaultEvent] = []
        self._busy: set[str] = set()
        self._healing = asyncio.Event()
        self._running: set[asyncio.Task[None]] = set()

    def unavailable(self, kind: str) -> str:
        """Why ``kind`` cannot be injected here ("" when it can)."""
        link = self.cluster.link
        if kind == "partition-master" and link is None:
            return "no network namespace (needs root, iproute2's ip and iptables)"
        if kind in ("partition", "netem"):
            if link is None:
                return "no network namespace (needs root and iproute2's ip)"
            if kind == "netem" and link.netem_error:
                return link.netem_error
        return ""

    def _targets(self, kind: str) -> list[str]:
        if kind in _MASTER_KINDS:
            groups = sorted({c.spec.broker_name for c in self.cluster.brokers()})
            return [g for g in groups if g not in self._busy and not any(
                c.spec.name in self._busy for c in self.cluster.brokers() if c.spec.broker_name == g)]
        if kind == "kill-controller-leader":
            return [] if any(c.spec.kind == "namesrv" and c.spec.name in self._busy
                             for c in self.cluster.children.values()) else ["controller-leader"]
        if kind in ("partition", "netem", "partition-master"):
            names = [self.cluster.partitioned]
        elif kind == "powerloss":
            names = [c.spec.name for c in self.cluster.brokers()]
        else:
            names = list(self.cluster.children)
        return sorted(n for n in names if n not in self._busy and n in self.cluster.children)

    async def run(self, until: float) -> None:
        """Draw and inject faults until ``until`` (run time); the faults still lasting then keep going until
        :meth:`heal`."""
        cfg = self.config
        while not self._healing.is_set():
            gap = self.rng.uniform(cfg.gap_min, cfg.gap_max)
            if self.now() + gap >= until:
                break
            if await self._hold(gap):
                break
            kind = self.rng.choice(cfg.kinds)
            duration = self.rng.uniform(cfg.fault_min, cfg.fault_max)
            reason = self.unavailable(kind)
            targets = self._targets(kind)
            if reason or not targets:
                self.faults.append(FaultEvent(kind, targets[0] if targets else "-", self.now(), self.now(),
                                              skipped=reason or "every target is under a fault already"))
                continue
            target = self.rng.choice(targets)
            task = asyncio.ensure_future(self._inject(kind, target, duration))
            if cfg.overlap:
                self._running.add(task)
                task.add_done_callback(self._running.discard)
            else:
                await task

    async def heal(self) -> None:
        """End every fault in progress (restart, continue, link up) and wait for it."""
        self._healing.set()
        if self._running:
            await asyncio.gather(*self._running, return_exceptions=True)

    async def _hold(self, seconds: float) -> bool:
        """Sleep ``seconds`` unless healing starts first (then True)."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._healing.wait(), seconds)
        return self._healing.is_set()

    async def _inject(self, kind: str, target: str, duration: float) -> None:
        fault = FaultEvent(kind, target, self.now())
        self.faults.append(fault)
        self._busy.add(target)
        self.say(f"fault {kind} {target} for {duration:.1f}s")
        try:
            await getattr(self, f"_{kind.replace('-', '_')}")(fault, duration)
        except (ClusterError, AdminError, OSError, TimeoutError) as exc:
            fault.note = (fault.note + "; " if fault.note else "") + f"heal failed: {exc}"[:300]
            self.say(f"!! {kind} {target}: {exc}")
        finally:
            fault.end = self.now()
            self._busy.discard(target)
            self._busy.discard(fault.target)
            self.say(f"healed {kind} {fault.target} after {fault.end - fault.start:.1f}s {fault.note}")

    # ============================================================================ controller mode

    async def _master(self, fault: FaultEvent) -> str:
        """The current master of the fault's group (the target becomes that process)."""
        group = fault.target
        await self._in_sync(fault, group)
        master = (await self.cluster.masters()).get(group)
        if master is None:
            raise ClusterError(f"{group} has no master now")
        fault.group, fault.old_master, fault.target = group, master.addr, master.spec.name
        self._busy.add(master.spec.name)
        return master.spec.name

    async def _in_sync(self, fault: FaultEvent, group: str) -> None:
        """Wait (bounded) until every running replica of ``group`` is in its SyncStateSet: a fault on a master
        whose SyncStateSet is the master alone has no replica to fail over to (noted on the fault)."""
        try:
            await self.cluster.wait_in_sync(IN_SYNC_WAIT, {group})
        except (ClusterError, AdminError) as exc:
            fault.note = f"not in sync at the fault: {exc}"[:200]
        fault.start = self.now()  # the fault starts now, not while waiting

    async def _controller_leader(self) -> str:
        leader = await self.cluster.controller_leader()
        if leader is None:
            raise ClusterError("the controllers have no leader now")
        self._busy.add(leader.spec.name)
        return leader.spec.name

    async def _kill_master(self, fault: FaultEvent, duration: float) -> None:
        await self._master(fault)
        await self._kill(fault, duration)

    async def _stop_master(self, fault: FaultEvent, duration: float) -> None:
        await self._master(fault)
        await self._stop(fault, duration)

    async def _powerloss_master(self, fault: FaultEvent, duration: float) -> None:
        await self._master(fault)
        await self._powerloss(fault, duration)

    async def _kill_controller_leader(self, fault: FaultEvent, duration: float) -> None:
        fault.target = await self._controller_leader()
        await self._kill(fault, duration)

    async def _kill_master_and_leader(self, fault: FaultEvent, duration: float) -> None:
        master = await self._master(fault)
        leader = await self._controller_leader()
        fault.note = f"controller leader {leader}"
        for name in (master, leader):
            self.cluster.signal(name, signal.SIGKILL)
        for name in (master, leader):
            await self.cluster.wait_exit(name, EXIT_TIMEOUT)
        try:
            await self._hold(duration)
        finally:
            self._busy.discard(leader)
            for name in (leader, master):
                await self.cluster.restart(name, RESTART_TIMEOUT)

    async def _partition_master(self, fault: FaultEvent, duration: float) -> None:
        link = self.cluster.link
        assert link is not None
        child = self.cluster.broker(fault.target)
        group = child.spec.broker_name
        if (await self.cluster.masters()).get(group) is not child:  # make it the master first: a planned switchover
            await self.cluster.switch_master(child)
        await self._in_sync(fault, group)  # the fault is the cut, not the switchover before it
        role = "master" if (await self.cluster.masters()).get(group) is child else "not the master"
        if role == "master":
            fault.group, fault.old_master = group, child.addr
        fault.note = f"cut from the controllers while {role}" + (f"; {fault.note}" if fault.note else "")
        ports = self.cluster.namesrv_ports()
        await asyncio.to_thread(link.block_ports, ports, True)
        try:
            await self._hold(duration)
        finally:
            await asyncio.to_thread(link.block_ports, ports, False)

    async def _kill(self, fault: FaultEvent, duration: float) -> None:
        self.cluster.signal(fault.target, signal.SIGKILL)
        await self.cluster.wait_exit(fault.target, EXIT_TIMEOUT)
        await self._hold(duration)
        await self.cluster.restart(fault.target, RESTART_TIMEOUT)

    async def _powerloss(self, fault: FaultEvent, duration: float) -> None:
        child = self.cluster.broker(fault.target)
        durable = self.durable_record(child.addr)
        self.cluster.signal(fault.target, signal.SIGKILL)
        await self.cluster.wait_exit(fault.target, EXIT_TIMEOUT)
        dropped = await asyncio.to_thread(drop_unflushed, child.spec.store_dir,
                                          max(durable, self.durable_record(child.addr)))
        fault.note = ", ".join(f"{k}={v}" for k, v in dropped.items())
        await self._hold(duration)
        await self.cluster.restart(fault.target, RESTART_TIMEOUT)

    async def _stop(self, fault: FaultEvent, duration: float) -> None:
        self.cluster.signal(fault.target, signal.SIGSTOP)
        try:
            await self._hold(duration)
        finally:
            self.cluster.signal(fault.target, signal.SIGCONT)

    async def _partition(self, fault: FaultEvent, duration: float) -> None:
        link = self.cluster.link
        assert link is not None
        await asyncio.to_thread(link.set_link, False)
        try:
            await self._hold(duration)
        finally:
            await asyncio.to_thread(link.set_link, True)

    async def _netem(self, fault: FaultEvent, duration: float) -> None:
        link = self.cluster.link
        assert link is not None
        fault.note = f"loss {NETEM_LOSS_PERCENT}% delay {NETEM_DELAY_MS}ms"
        await asyncio.to_thread(link.netem, NETEM_LOSS_PERCENT, NETEM_DELAY_MS)
        try:
            await self._hold(duration)
        finally:
            await asyncio.to_thread(link.clear_netem)
