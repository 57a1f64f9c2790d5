"""A deterministic simulation of Raft cores: a clock, a lossy network with delays and partitions, crashes that lose
whatever was not persisted, and the invariants checked at every step.

Each node's output is persisted to its simulated disk *before* its messages enter the network and before its commits
are applied, the rule :class:`pocketmq.controller.raft.node.RaftNode` keeps. A crash drops the core and its queued
messages; a restart builds a new core from the disk only.
"""

from __future__ import annotations

import heapq
import itertools
import json
import random
from dataclasses import dataclass, field

from pocketmq.controller.raft.core import NotLeaderError, Output, RaftCore, Role, Snapshot
from pocketmq.controller.raft.messages import Entry, Message, decode_message, encode_message

ELECTION = 0.3
HEARTBEAT = 0.05


@dataclass
class Disk:
    term: int = 0
    voted_for: str | None = None
    snapshot: Snapshot | None = None
    entries: list[Entry] = field(default_factory=list)

    def persist(self, out: Output) -> None:
        if out.hard_state is not None:
            self.term, self.voted_for = out.hard_state
        for op in out.log_ops:
            if op.snapshot is not None:
                self.snapshot = op.snapshot
                self.entries = [e for e in self.entries if e.index > op.snapshot.index]
            if op.truncate_from is not None:
                self.entries = [e for e in self.entries if e.index < op.truncate_from]
            if op.entries:
                assert not self.entries or self.entries[-1].index + 1 == op.entries[0].index or \
                    (self.snapshot is not None and op.entries[0].index == self.snapshot.index + 1 and not self.entries)
                self.entries.extend(op.entries)


@dataclass
class SimNode:
    node_id: str
    disk: Disk
    core: RaftCore | None = None
    #: the state machine: the data of each applied entry, in order (entries before the snapshot included)
    applied: list[bytes] = field(default_factory=list)


class InvariantError(AssertionError):
    pass


class Simulation:
    def __init__(self, seed: int, size: int = 3, *, snapshot_every: int = 0) -> None:
        self.rng = random.Random(seed)
        self.ids = [f"n{i}" for i in range(size)]
        self.now = 0.0
        self.nodes = {i: SimNode(i, Disk()) for i in self.ids}
        self.snapshot_every = snapshot_every
        self.network: list[tuple[float, int, str, bytes]] = []
        self._seq = itertools.count()
        self.drop_rate = 0.0
        self.max_delay = 0.02
        self.cut: set[frozenset[str]] = set()
        #: (from, to) -> a fixed delay for that direction (a slow link)
        self.link_delay: dict[tuple[str, str], float] = {}
        self.leaders: dict[int, str] = {}
        self.committed: dict[int, tuple[int, bytes]] = {}
        #: index -> the term of the first node seen applying it (at least the term it was committed in)
        self.commit_terms: dict[int, int] = {}
        self.proposed = 0
        for node in self.nodes.values():
            self.start(node.node_id)

    # ------------------------------------------------------------------------------------------ lifecycle

    def start(self, node_id: str) -> None:
        node = self.nodes[node_id]
        disk = node.disk
        node.core = RaftCore(node_id, self.ids, election_timeout=ELECTION, heartbeat_interval=HEARTBEAT,
                             rng=random.Random(self.rng.random()), term=disk.term, voted_for=disk.voted_for,
                             snapshot=disk.snapshot, entries=list(disk.entries), now=self.now)
        hexed: list[str] = json.loads(disk.snapshot.data) if disk.snapshot else []
        node.applied = [bytes.fromhex(x) for x in hexed]

    def crash(self, node_id: str) -> None:
        self.nodes[node_id].core = None
        self.network = [m for m in self.network if m[2] != node_id]
        heapq.heapify(self.network)

    # ------------------------------------------------------------------------------------------- network

    def partition(self, group: set[str]) -> None:
        """Cut every link between ``group`` and the rest."""
        for a in group:
            for b in self.ids:
                if b not in group:
                    self.cut.add(frozenset((a, b)))

    def heal(self) -> None:
        self.cut.clear()
        self.link_delay.clear()
        self.drop_rate = 0.0

    def _deliverable(self, a: str, b: str) -> bool:
        return frozenset((a, b)) not in self.cut

    def _handle(self, node: SimNode, out: Output) -> None:
        node.disk.persist(out)
        core = node.core
        assert core is not None
        for peer, message in out.messages:
            if not self._deliverable(node.node_id, peer) or self.rng.random() < self.drop_rate:
                continue
            delay = self.link_delay.get((node.node_id, peer)) or self.rng.uniform(0.001, self.max_delay)
            heapq.heappush(self.network, (self.now + delay, next(self._seq), peer, encode_message(message)))
        if out.restore is not None:
            node.applied = [bytes.fromhex(x) for x in json.loads(out.restore.data)]
        while len(node.applied) < out.commit:
            index = len(node.applied) + 1
            entry = core.entry(index)
            self._check_commit(index, entry)
            self.commit_terms.setdefault(index, core.term)
            node.applied.append(entry.data)
        if self.snapshot_every and len(node.applied) - core.snapshot.index >= self.snapshot_every:
            core.compact(len(node.applied), json.dumps([d.hex() for d in node.applied]).encode())
            node.disk.persist(core.take_output())

    # ------------------------------------------------------------------------------------------ stepping

    def run(self, seconds: float, *, step: float = 0.005, propose_every: float = 0.0) -> None:
        end = self.now + seconds
        next_proposal = self.now
        while self.now < end:
            self.now += step
            while self.network and self.network[0][0] <= self.now:
                _, _, to, body = heapq.heappop(self.network)
                node = self.nodes[to]
                if node.core is None:
                    continue
                message: Message = decode_message(body)
                if not self._deliverable(message.sender, to):
                    continue
                node.core.step(message, self.now)
                self._handle(node, node.core.take_output())
            for node in self.nodes.values():
                if node.core is not None:
                    node.core.tick(self.now)
                    self._handle(node, node.core.take_output())
            if propose_every and self.now >= next_proposal:
                next_proposal = self.now + propose_every
                self.propose()
            self.check()

    def propose(self, data: bytes | None = None) -> bool:
        for node in self.nodes.values():
            if node.core is not None and node.core.role is Role.LEADER:
                payload = data if data is not None else f"v{self.proposed}".encode()
                try:
                    node.core.propose(payload, self.now)
                except NotLeaderError:
                    return False
                self.proposed += 1
                self._handle(node, node.core.take_output())
                return True
        return False

    # ------------------------------------------------------------------------------------------ invariants

    def _check_commit(self, index: int, entry: Entry) -> None:
        known = self.committed.setdefault(index, (entry.term, entry.data))
        if known != (entry.term, entry.data):
            raise InvariantError(f"two different entries applied at {index}: {known} vs {(entry.term, entry.data)}")

    def check(self) -> None:
        leases = []
        for node in self.nodes.values():
            core = node.core
            if core is None:
                continue
            if core.role is Role.LEADER:
                known = self.leaders.setdefault(core.term, core.id)
                if known != core.id:
                    raise InvariantError(f"two leaders in term {core.term}: {known} and {core.id}")
                for index, (term, _data) in self.committed.items():
                    earlier = self.commit_terms[index] < core.term  # committed before this leader's term
                    if earlier and index > core.snapshot.index and core.term_at(index) != term:
                        raise InvariantError(f"leader {core.id} (term {core.term}) lacks committed entry {index}")
                if core.lease_valid(self.now):
                    leases.append(core)
            for i, data in enumerate(node.applied, start=1):
                if i in self.committed and self.committed[i][1] != data:
                    raise InvariantError(f"{node.node_id} applied another entry at {i}")
        if len(leases) > 1:
            raise InvariantError(f"two leases at once: {[(c.id, c.term) for c in leases]}")

    def check_logs_match(self) -> None:
        """Log matching: two logs holding an entry of the same term at an index agree on everything before."""
        cores = [n.core for n in self.nodes.values() if n.core is not None]
        for a, b in itertools.combinations(cores, 2):
            last = min(a.last_index, b.last_index)
            agreed = False
            for index in range(last, max(a.snapshot.index, b.snapshot.index), -1):
                same = a.term_at(index) == b.term_at(index)
                if agreed and not same:
                    raise InvariantError(f"{a.id} and {b.id} agree at a later index but differ at {index}")
                if same:
                    agreed = True
                    if a.entry(index) != b.entry(index):
                        raise InvariantError(f"{a.id} and {b.id}: same term, different entry at {index}")

    def leader(self) -> RaftCore | None:
        leaders = [n.core for n in self.nodes.values() if n.core is not None and n.core.role is Role.LEADER]
        return max(leaders, key=lambda c: c.term) if leaders else None
