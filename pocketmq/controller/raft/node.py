"""``RaftNode``: the asyncio driver of a :class:`~pocketmq.controller.raft.core.RaftCore`.

One task takes the node's inputs in order from a bounded queue — a peer's message, a clock tick, a proposal — and
for each: steps the core, makes its output durable in the node's own storage thread (fsync off the event loop),
then sends the output's messages, then applies what is committed to the state machine. A proposal's future is
completed with what the state machine's ``apply`` returned once its entry is applied (or fails when another entry
took its index). Every ``snapshot_every`` applied entries the state machine's snapshot is taken and the log is
compacted (:mod:`pocketmq.controller.raft.storage`).

Messages go out through one bounded queue and one task per peer (:class:`PeerLink`): a slow or dead peer never
holds up the others, and when its queue is full the oldest message is dropped (Raft resends what matters).

A storage failure (a failed fsync, a full disk) stops the node for good (fail-stop, logged): it sends and applies
nothing more, the other nodes elect without it, and it rejoins after a restart.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from pocketmq.common.logs import get_logger
from pocketmq.common.service import Service
from pocketmq.controller.raft.core import NotLeaderError, Output, RaftCore, Role
from pocketmq.controller.raft.messages import RaftCodecError, decode_message, encode_message
from pocketmq.controller.raft.storage import RaftStorage

__all__ = ["ProposalDroppedError", "RaftConfig", "RaftNode", "StateMachine"]

log = get_logger("pocketmq.controller.raft")

INPUT_QUEUE = 4096
"""Inputs waiting for the node's task; past it a peer's message is dropped (as a lossy network would)."""
PEER_QUEUE = 256
"""Messages waiting to go to one peer; past it the oldest is dropped."""

Send = Callable[[str, bytes], Awaitable[None]]
"""``send(address, body)``: deliver one encoded message to a peer (raises on failure)."""


class StateMachine(Protocol):
    """What the node replicates: deterministic ``apply``, and a snapshot of the whole state."""

    def apply(self, data: bytes) -> Any: ...

    def snapshot(self) -> bytes: ...

    def restore(self, data: bytes) -> None: ...


class ProposalDroppedError(Exception):
    """A proposal whose entry was replaced by another leader's (it was never committed) or that the node could not
    make durable."""


@dataclass(frozen=True, slots=True)
class RaftConfig:
    node_id: str
    #: every member's id -> its address (this node's included)
    peers: dict[str, str]
    directory: str
    election_timeout: float = 1.0
    heartbeat_interval: float = 0.2
    tick_interval: float = 0.05
    snapshot_every: int = 1000


class PeerLink:
    """The messages to one peer: a bounded queue drained by one task (see the module docstring)."""

    def __init__(self, address: str, send: Send) -> None:
        self.address = address
        self._send = send
        self._queue: collections.deque[bytes] = collections.deque(maxlen=PEER_QUEUE)
        self._ready = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.failures = 0

    def post(self, body: bytes) -> None:
        self._queue.append(body)
        self._ready.set()

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name=f"raft-peer-{self.address}")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _run(self) -> None:
        while True:
            await self._ready.wait()
            self._ready.clear()
            while self._queue:
                body = self._queue.popleft()
                try:
                    await self._send(self.address, body)
                except Exception as exc:  # unreachable peer: what is queued is stale by the time it comes back
                    self.failures += 1
                    if self.failures == 1 or self.failures % 100 == 0:
                        log.info("raft_peer_unreachable", peer=self.address, error=str(exc)[:200],
                                 failures=self.failures)
                    self._queue.clear()
                    await asyncio.sleep(0.05)
                    break
                else:
                    self.failures = 0


class RaftNode(Service):
    """One member of the group (see the module docstring): ``await open()``, ``start()``, ``await stop()``."""

    name = "raft-node"

    def __init__(self, config: RaftConfig, state_machine: StateMachine, send: Send, *,
                 on_role_change: Callable[[], None] | None = None) -> None:
        super().__init__()
        if config.node_id not in config.peers:
            raise ValueError(f"selfId {config.node_id!r} is not among the peers {sorted(config.peers)}")
        self.config = config
        self.state_machine = state_machine
        self._send = send
        self._on_role_change = on_role_change
        self._storage = RaftStorage(config.directory)
        self._executor = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="raft-storage")
        self._inputs: asyncio.Queue[tuple[str, Any]] = asyncio.Queue(INPUT_QUEUE)
        self._links = {node: PeerLink(addr, send) for node, addr in config.peers.items() if node != config.node_id}
        self._pending: dict[int, tuple[int, asyncio.Future[Any]]] = {}
        self._ticker: asyncio.Task[None] | None = None
        self.core: RaftCore | None = None
        #: index of the last entry applied to the state machine
        self.applied = 0
        #: why the node stopped for good (None while it works)
        self.failed: str | None = None
        self._seen: tuple[Role, str | None, int] | None = None
        self.log = log.bind(node=config.node_id)

    # ============================================================================================ lifecycle

    async def open(self) -> None:
        """Load the durable state and restore the state machine from the snapshot (run before start())."""
        loop = asyncio.get_running_loop()
        state = await loop.run_in_executor(self._executor, self._storage.load)
        cfg = self.config
        self.core = RaftCore(cfg.node_id, list(cfg.peers), election_timeout=cfg.election_timeout,
                             heartbeat_interval=cfg.heartbeat_interval, term=state.term, voted_for=state.voted_for,
                             snapshot=state.snapshot, entries=state.entries, now=loop.time())
        if state.snapshot is not None:
            self.state_machine.restore(state.snapshot.data)
            self.applied = state.snapshot.index
        self.log.info("raft_opened", term=state.term, snapshot=self.applied, entries=len(state.entries),
                      cut_bytes=state.cut_bytes)

    def start(self) -> None:
        if self.core is None:
            raise RuntimeError("open() the node first")
        super().start()
        for link in self._links.values():
            link.start()
        if self._ticker is None:
            self._ticker = asyncio.get_running_loop().create_task(self._tick_loop(), name="raft-tick")

    async def stop(self) -> None:
        ticker, self._ticker = self._ticker, None
        if ticker is not None:
            ticker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await ticker
        await super().stop()
        for link in self._links.values():
            await link.stop()
        self._fail_pending("the node stopped")
        await asyncio.get_running_loop().run_in_executor(self._executor, self._storage.close)
        self._executor.shutdown(wait=True)

    async def _tick_loop(self) -> None:
        while True:
            await asyncio.sleep(self.config.tick_interval)
            with contextlib.suppress(asyncio.QueueFull):
                self._inputs.put_nowait(("tick", None))

    # ============================================================================================== inputs

    def receive(self, body: bytes | bytearray | memoryview) -> None:
        """A message from a peer (dropped when undecodable or when the node is too far behind)."""
        try:
            message = decode_message(body)
        except RaftCodecError as exc:
            self.log.warning("raft_message_dropped", error=str(exc))
            return
        with contextlib.suppress(asyncio.QueueFull):
            self._inputs.put_nowait(("message", message))

    async def propose(self, data: bytes, timeout: float) -> Any:
        """Replicate ``data``; the state machine's answer once it is applied. Raises :class:`NotLeaderError`,
        :class:`ProposalDroppedError` or ``TimeoutError``."""
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        if self.failed is not None:
            raise ProposalDroppedError(f"the Raft node has stopped: {self.failed}")
        try:
            self._inputs.put_nowait(("propose", (data, future)))
        except asyncio.QueueFull:
            raise ProposalDroppedError("the Raft node is overloaded") from None
        async with asyncio.timeout(timeout):
            return await future

    # ============================================================================================= queries

    @property
    def is_leader(self) -> bool:
        return self.core is not None and self.core.role is Role.LEADER

    @property
    def leader_id(self) -> str | None:
        return self.core.leader if self.core is not None else None

    @property
    def leader_address(self) -> str | None:
        leader = self.leader_id
        return self.config.peers.get(leader) if leader else None

    def can_serve(self) -> bool:
        """True when this leader's applied state is authoritative now: its lease holds (no other leader can
        exist) and nothing it accepted is still being made durable or applied."""
        core = self.core
        if core is None or self.failed is not None:
            return False
        return core.lease_valid(asyncio.get_running_loop().time()) and self.applied == core.last_index

    # ============================================================================================= the loop

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            kind, value = await self._inputs.get()
            if self.failed is not None:
                continue
            core = self.core
            assert core is not None
            now = loop.time()
            if kind == "tick":
                core.tick(now)
            elif kind == "message":
                core.step(value, now)
            else:
                self._propose(core, value, now)
            await self._handle(core.take_output())
            if self.failed is None and self.applied - core.snapshot.index >= self.config.snapshot_every:
                core.compact(self.applied, self.state_machine.snapshot())
                await self._handle(core.take_output())
            self._note_role(core)

    def _propose(self, core: RaftCore, value: tuple[bytes, asyncio.Future[Any]], now: float) -> None:
        data, future = value
        if future.done():
            return
        try:
            index, term = core.propose(data, now)
        except NotLeaderError as exc:
            future.set_exception(exc)
            return
        self._pending[index] = (term, future)

    async def _handle(self, out: Output) -> None:
        if out.needs_persist:
            try:
                await asyncio.get_running_loop().run_in_executor(
                    self._executor, self._storage.persist, out.hard_state, out.log_ops)
            except OSError as exc:
                self._fail(f"storage: {exc}")
                return
        for peer, message in out.messages:
            link = self._links.get(peer)
            if link is not None:
                link.post(encode_message(message))
        if out.restore is not None:
            self.state_machine.restore(out.restore.data)
            self.applied = out.restore.index
            self._drop_pending(up_to=out.restore.index)
        self._apply(out.commit)

    def _apply(self, commit: int) -> None:
        core = self.core
        assert core is not None
        while self.applied < commit:
            index = self.applied + 1
            entry = core.entry(index)
            result = self.state_machine.apply(entry.data) if entry.data else None
            self.applied = index
            pending = self._pending.pop(index, None)
            if pending is None:
                continue
            term, future = pending
            if future.done():
                continue
            if term == entry.term:
                future.set_result(result)
            else:
                future.set_exception(ProposalDroppedError(f"entry {index} was replaced by another leader's"))

    def _drop_pending(self, up_to: int) -> None:
        for index in [i for i in self._pending if i <= up_to]:
            _term, future = self._pending.pop(index)
            if not future.done():
                future.set_exception(ProposalDroppedError("a snapshot replaced the log before it was applied"))

    def _fail(self, reason: str) -> None:
        self.failed = reason
        self.log.error("raft_node_stopped", reason=reason)
        self._fail_pending(reason)
        if self._on_role_change is not None:
            self._on_role_change()

    def _fail_pending(self, reason: str) -> None:
        for _index, (_term, future) in self._pending.items():
            if not future.done():
                future.set_exception(ProposalDroppedError(reason))
        self._pending.clear()

    def _note_role(self, core: RaftCore) -> None:
        seen = (core.role, core.leader, core.term)
        if seen == self._seen:
            return
        before, self._seen = self._seen, seen
        if before is not None and before[0] is Role.LEADER and core.role is not Role.LEADER:
            # Answer now rather than at the caller's timeout: a deposed leader cannot commit anything itself.
            self._fail_pending("leadership was lost before the entry committed (a new leader may still commit it)")
        if before is None or before[:2] != seen[:2]:
            self.log.info("raft_role", role=core.role.value, leader=core.leader, term=core.term)
            if self._on_role_change is not None:
                self._on_role_change()
