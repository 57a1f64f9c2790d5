"""``RaftCore``: one Raft node as a state machine with no I/O and no clock of its own.

The driver (:mod:`pocketmq.controller.raft.node`) feeds it messages (:meth:`RaftCore.step`), clock ticks
(:meth:`RaftCore.tick`) and proposals (:meth:`RaftCore.propose`), each with the time ``now``, and after each call
takes the :class:`Output`: what to make durable, then the messages to send, then up to where entries are
committed. The rule the driver keeps is the one every Raft safety argument rests on: **nothing in an output is
sent or applied before its hard state and log operations are on disk** (a vote is not granted, an append not
acknowledged, and a leader never counts an entry of its own, before the fsync). Tests drive several cores through
a simulated network with partitions, drops, delays and crashes (``tests/controller/test_raft_sim.py``).

What is implemented (Ongaro's thesis: chapter 3, and pre-vote from chapter 9, as etcd's raft does it):

* leader election with randomized timeouts in ``[election_timeout, 2 * election_timeout)``;
* **pre-vote**: a node whose timer fires first asks whether it could win, without raising anybody's term, so a
  node cut off for a while cannot force the cluster into a new term when it comes back;
* **leader stickiness**: a node that heard from a leader less than ``election_timeout`` ago refuses (pre-)votes;
* **check quorum**: a leader that has not heard from a majority for ``election_timeout`` steps down;
* log replication with the consistency check and a fast back-off hint; commit by majority match of an entry
  of the leader's own term (a new leader appends a no-op to commit its term at once);
* **a leader lease** for reads and for the broker heartbeats the controller answers (:meth:`RaftCore.lease_valid`):
  the leader is sure nobody else can have been elected while a majority accepted an append it sent less than
  ``election_timeout`` ago (by its own clock: followers echo the send time), because of stickiness;
* snapshots: the driver hands a snapshot of the applied state to :meth:`RaftCore.compact`, the log before it is
  dropped, and a follower that needs what was dropped gets the snapshot (one message: the controller's state is
  small).

Membership is static (the peers of the configuration), as in RocketMQ's DLedger controller.
"""

from __future__ import annotations

import enum
import random
from dataclasses import dataclass, field

from pocketmq.controller.raft.messages import (
    AppendRequest,
    AppendResponse,
    Entry,
    Message,
    SnapshotRequest,
    SnapshotResponse,
    VoteRequest,
    VoteResponse,
)

__all__ = ["LogOp", "NotLeaderError", "Output", "RaftCore", "Role", "Snapshot"]

MAX_ENTRIES_PER_APPEND = 64
"""Entries in one append message (a follower far behind catches up over several round trips)."""


class Role(enum.Enum):
    FOLLOWER = "follower"
    PRE_CANDIDATE = "pre-candidate"
    CANDIDATE = "candidate"
    LEADER = "leader"


class NotLeaderError(Exception):
    """A proposal made to a node that is not the leader; ``leader`` is the one it knows of (None: unknown)."""

    def __init__(self, leader: str | None) -> None:
        super().__init__(f"not the leader (leader: {leader or 'unknown'})")
        self.leader = leader


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The applied state at ``index`` (whose entry had ``term``)."""

    index: int
    term: int
    data: bytes


@dataclass(frozen=True, slots=True)
class LogOp:
    """One change to the durable log, applied in order: drop entries from ``truncate_from`` on; append
    ``entries``; or (``snapshot``) save a snapshot and drop the entries it covers."""

    truncate_from: int | None = None
    entries: tuple[Entry, ...] = ()
    snapshot: Snapshot | None = None


@dataclass(slots=True)
class Output:
    """What one call produced. Persist ``hard_state`` and ``log_ops`` first, then send ``messages``; then load
    ``restore`` into the state machine (a snapshot from the leader) and apply entries up to ``commit``."""

    hard_state: tuple[int, str | None] | None = None
    log_ops: list[LogOp] = field(default_factory=list)
    messages: list[tuple[str, Message]] = field(default_factory=list)
    restore: Snapshot | None = None
    commit: int = 0

    @property
    def needs_persist(self) -> bool:
        return self.hard_state is not None or bool(self.log_ops)


class RaftCore:
    """See the module docstring. ``peers`` are all member ids, this one's included; ``rng`` makes timeouts
    reproducible in tests."""

    def __init__(self, node_id: str, peers: list[str], *, election_timeout: float, heartbeat_interval: float,
                 rng: random.Random | None = None, term: int = 0, voted_for: str | None = None,
                 snapshot: Snapshot | None = None, entries: list[Entry] | None = None, now: float = 0.0) -> None:
        if node_id not in peers:
            raise ValueError(f"{node_id!r} is not one of the peers {peers}")
        if heartbeat_interval <= 0 or election_timeout <= 2 * heartbeat_interval:
            raise ValueError("the election timeout must exceed twice the heartbeat interval")
        self.id = node_id
        self.peers = sorted(set(peers))
        self.others = [p for p in self.peers if p != node_id]
        self.quorum = len(self.peers) // 2 + 1
        self.election_timeout = election_timeout
        self.heartbeat_interval = heartbeat_interval
        self._rng = rng or random.Random()
        self.term = term
        self.voted_for = voted_for
        base = snapshot or Snapshot(0, 0, b"")
        self.snapshot = base
        self.entries: list[Entry] = [e for e in entries or [] if e.index > base.index]
        self._check_contiguous()
        #: highest index known committed; never below the snapshot
        self.commit = base.index
        self.role = Role.FOLLOWER
        self.leader: str | None = None
        self._last_leader_contact = -float("inf")
        # A node that just (re)started has forgotten the leader it last heard: it grants no vote for one timeout,
        # so its restart cannot cut a leader's lease short.
        self._vote_quiet_until = now + election_timeout
        self._election_deadline = now + self._random_timeout()
        self._heartbeat_due = 0.0
        self._votes: set[str] = set()
        self.next_index: dict[str, int] = {}
        self.match_index: dict[str, int] = {}
        self._heard_at: dict[str, float] = {}
        self._acked_sent_at: dict[str, float] = {}
        #: the first index of the current leader's term (its no-op): reads wait until it is committed
        self._term_start = 0
        self._out = Output()
        self._hard_dirty = False

    def _check_contiguous(self) -> None:
        expected = self.snapshot.index + 1
        for entry in self.entries:
            if entry.index != expected:
                raise ValueError(f"log is not contiguous at index {entry.index} (expected {expected})")
            expected += 1

    # ============================================================================================ the log

    @property
    def last_index(self) -> int:
        return self.snapshot.index + len(self.entries)

    @property
    def last_term(self) -> int:
        return self.entries[-1].term if self.entries else self.snapshot.term

    def term_at(self, index: int) -> int | None:
        """The term of the entry at ``index``; None when compacted away (before the snapshot) or not in the log."""
        if index == self.snapshot.index:
            return self.snapshot.term
        if index < self.snapshot.index or index > self.last_index:
            return None
        return self.entries[index - self.snapshot.index - 1].term

    def entry(self, index: int) -> Entry:
        """The entry at ``index`` (in the log, after the snapshot)."""
        return self.entries[index - self.snapshot.index - 1]

    def entries_between(self, first: int, last: int) -> list[Entry]:
        """Entries ``first..last`` inclusive (those after the snapshot)."""
        first = max(first, self.snapshot.index + 1)
        base = self.snapshot.index + 1
        return self.entries[first - base:last - base + 1]

    def _append(self, entries: list[Entry]) -> None:
        self.entries.extend(entries)
        self._out.log_ops.append(LogOp(entries=tuple(entries)))

    def _truncate(self, index: int) -> None:
        if index <= self.commit:
            raise AssertionError(f"truncating committed entries at {index} (commit {self.commit})")
        del self.entries[index - self.snapshot.index - 1:]
        self._out.log_ops.append(LogOp(truncate_from=index))

    # ========================================================================================= outputs

    def take_output(self) -> Output:
        """What the calls since the last one produced (see :class:`Output`)."""
        out = self._out
        if self._hard_dirty:
            out.hard_state = (self.term, self.voted_for)
            self._hard_dirty = False
        out.commit = self.commit
        self._out = Output()
        return out

    def _send(self, peer: str, message: Message) -> None:
        self._out.messages.append((peer, message))

    def _set_term(self, term: int, voted_for: str | None) -> None:
        if (term, voted_for) != (self.term, self.voted_for):
            self.term, self.voted_for = term, voted_for
            self._hard_dirty = True

    def _random_timeout(self) -> float:
        return self.election_timeout * (1.0 + self._rng.random())

    # ========================================================================================= queries

    @property
    def is_leader(self) -> bool:
        return self.role is Role.LEADER

    def lease_valid(self, now: float) -> bool:
        """True while this leader is sure it is the only one: a majority (itself included) accepted an append
        it sent less than ``election_timeout`` ago, and its term's first entry is committed (its state machine
        has everything committed before it)."""
        if self.role is not Role.LEADER or self.commit < self._term_start:
            return False
        times = sorted([now, *(self._acked_sent_at.get(p, -float("inf")) for p in self.others)], reverse=True)
        return now - times[self.quorum - 1] < self.election_timeout

    # ========================================================================================= inputs

    def tick(self, now: float) -> None:
        """Time passed: heartbeats and the check-quorum of a leader, the election timer of the others."""
        if self.role is Role.LEADER:
            if now >= self._heartbeat_due:
                self._heartbeat_due = now + self.heartbeat_interval
                self._broadcast(now)
            if not self._quorum_heard(now):
                self._become_follower(self.term, None, now)
        elif now >= self._election_deadline:
            self._start_pre_vote(now)

    def propose(self, data: bytes, now: float) -> tuple[int, int]:
        """Append ``data`` to the leader's log and send it; returns (index, term) of the entry, committed once
        :attr:`commit` reaches the index with the entry still of that term. Raises :class:`NotLeaderError`."""
        if self.role is not Role.LEADER:
            raise NotLeaderError(self.leader)
        entry = Entry(self.term, self.last_index + 1, bytes(data))
        self._append([entry])
        self._advance_commit()
        self._broadcast(now)
        return entry.index, entry.term

    def compact(self, index: int, data: bytes) -> None:
        """``data`` is the state machine's snapshot after applying up to ``index`` (committed): drop the log
        before it."""
        term = self.term_at(index)
        if term is None or index > self.commit or index <= self.snapshot.index:
            raise ValueError(f"cannot compact at {index} (snapshot {self.snapshot.index}, commit {self.commit})")
        snapshot = Snapshot(index, term, bytes(data))
        del self.entries[:index - self.snapshot.index]
        self.snapshot = snapshot
        self._out.log_ops.append(LogOp(snapshot=snapshot))

    def step(self, message: Message, now: float) -> None:
        """One message from a peer."""
        if message.sender not in self.others:
            return
        if message.term > self.term:
            if isinstance(message, VoteRequest) and self._in_lease(now):
                return  # stickiness: a live leader exists, do not let this node disrupt it
            if isinstance(message, VoteRequest) and message.pre_vote:
                self._handle_vote_request(message, now)
                return
            if isinstance(message, VoteResponse) and message.pre_vote and message.granted:
                self._handle_vote_response(message, now)
                return
            leader = message.sender if isinstance(message, (AppendRequest, SnapshotRequest)) else None
            self._become_follower(message.term, leader, now)
        elif message.term < self.term:
            self._answer_stale(message)
            return
        match message:
            case VoteRequest():
                self._handle_vote_request(message, now)
            case VoteResponse():
                self._handle_vote_response(message, now)
            case AppendRequest():
                self._handle_append(message, now)
            case AppendResponse():
                self._handle_append_response(message, now)
            case SnapshotRequest():
                self._handle_snapshot(message, now)
            case SnapshotResponse():
                self._handle_snapshot_response(message, now)

    def _answer_stale(self, message: Message) -> None:
        """A message of an older term: tell a stale leader or candidate the current term (it steps down)."""
        if isinstance(message, (AppendRequest, SnapshotRequest)):
            self._send(message.sender, AppendResponse(self.term, self.id, False, 0, message.sent_at))
        elif isinstance(message, VoteRequest):
            self._send(message.sender, VoteResponse(self.term, self.id, False, message.pre_vote))

    def _in_lease(self, now: float) -> bool:
        """Whether a leader was heard from within the election timeout (or this node leads)."""
        if self.role is Role.LEADER:
            return self._quorum_heard(now)
        if now < self._vote_quiet_until:
            return True
        return self.leader is not None and now - self._last_leader_contact < self.election_timeout

    # ======================================================================================= elections

    def _become_follower(self, term: int, leader: str | None, now: float) -> None:
        was_leader = self.role is Role.LEADER
        self._set_term(term, self.voted_for if term == self.term else None)
        self.role = Role.FOLLOWER
        self.leader = leader
        if leader is not None:
            self._last_leader_contact = now
        if was_leader or leader is not None:
            self._election_deadline = now + self._random_timeout()

    def _start_pre_vote(self, now: float) -> None:
        self.role = Role.PRE_CANDIDATE
        self.leader = None
        self._votes = {self.id}
        self._election_deadline = now + self._random_timeout()
        if len(self._votes) >= self.quorum:
            self._start_election(now)
            return
        for peer in self.others:
            self._send(peer, VoteRequest(self.term + 1, self.id, self.last_index, self.last_term, True))

    def _start_election(self, now: float) -> None:
        self.role = Role.CANDIDATE
        self._set_term(self.term + 1, self.id)
        self._votes = {self.id}
        self._election_deadline = now + self._random_timeout()
        if len(self._votes) >= self.quorum:
            self._become_leader(now)
            return
        for peer in self.others:
            self._send(peer, VoteRequest(self.term, self.id, self.last_index, self.last_term, False))

    def _log_up_to_date(self, last_term: int, last_index: int) -> bool:
        return (last_term, last_index) >= (self.last_term, self.last_index)

    def _handle_vote_request(self, request: VoteRequest, now: float) -> None:
        if request.pre_vote:
            granted = request.term > self.term and self._log_up_to_date(request.last_term, request.last_index)
            self._send(request.sender, VoteResponse(request.term if granted else self.term, self.id, granted, True))
            return
        granted = (self.voted_for in (None, request.sender)
                   and self._log_up_to_date(request.last_term, request.last_index))
        if granted:
            self._set_term(self.term, request.sender)
            self._election_deadline = now + self._random_timeout()
        self._send(request.sender, VoteResponse(self.term, self.id, granted, False))

    def _handle_vote_response(self, response: VoteResponse, now: float) -> None:
        if response.pre_vote:
            if self.role is Role.PRE_CANDIDATE and response.granted and response.term == self.term + 1:
                self._votes.add(response.sender)
                if len(self._votes) >= self.quorum:
                    self._start_election(now)
            return
        if self.role is Role.CANDIDATE and response.granted:
            self._votes.add(response.sender)
            if len(self._votes) >= self.quorum:
                self._become_leader(now)

    def _become_leader(self, now: float) -> None:
        self.role = Role.LEADER
        self.leader = self.id
        self.next_index = {p: self.last_index + 1 for p in self.others}
        self.match_index = {p: 0 for p in self.others}
        self._heard_at = {p: now for p in self.others}  # check-quorum grace: one timeout to hear from them
        self._acked_sent_at = {}
        self._append([Entry(self.term, self.last_index + 1, b"")])
        self._term_start = self.last_index
        self._heartbeat_due = now + self.heartbeat_interval
        self._advance_commit()
        self._broadcast(now)

    def _quorum_heard(self, now: float) -> bool:
        recent = 1 + sum(1 for p in self.others if now - self._heard_at.get(p, -float("inf")) < self.election_timeout)
        return recent >= self.quorum

    # ===================================================================================== replication

    def _broadcast(self, now: float) -> None:
        for peer in self.others:
            self._send_append(peer, now)

    def _send_append(self, peer: str, now: float) -> None:
        next_index = self.next_index[peer]
        prev = next_index - 1
        prev_term = self.term_at(prev)
        if prev_term is None or prev < self.snapshot.index:
            snap = self.snapshot
            self._send(peer, SnapshotRequest(self.term, self.id, snap.index, snap.term, snap.data, now))
            return
        entries = tuple(self.entries_between(next_index, min(self.last_index, prev + MAX_ENTRIES_PER_APPEND)))
        self._send(peer, AppendRequest(self.term, self.id, prev, prev_term, entries, self.commit, now))

    def _handle_append(self, request: AppendRequest, now: float) -> None:
        if self.role is not Role.FOLLOWER or self.leader != request.sender:
            self._become_follower(self.term, request.sender, now)
        self._last_leader_contact = now
        self._election_deadline = now + self._random_timeout()
        prev, prev_term, entries = request.prev_index, request.prev_term, request.entries
        if prev < self.snapshot.index:  # the start is in our snapshot, committed and so identical
            entries = tuple(e for e in entries if e.index > self.snapshot.index)
            prev, prev_term = self.snapshot.index, self.snapshot.term
            if entries and entries[0].index != prev + 1:
                entries = ()
        ours = self.term_at(prev)
        if ours is None or ours != prev_term:
            self._send(request.sender, AppendResponse(self.term, self.id, False, self._hint(prev), request.sent_at))
            return
        for position, entry in enumerate(entries):
            have = self.term_at(entry.index)
            if have == entry.term:
                continue
            if have is not None:
                self._truncate(entry.index)
            self._append(list(entries[position:]))
            break
        last_new = prev + len(entries)
        if request.commit > self.commit:
            self.commit = max(self.commit, min(request.commit, last_new))
        self._send(request.sender, AppendResponse(self.term, self.id, True, last_new, request.sent_at))

    def _hint(self, prev: int) -> int:
        """Where the leader should retry after a failed consistency check at ``prev``: our last index when we
        are shorter, else just before the first entry of the conflicting term (never below the commit)."""
        if prev > self.last_index:
            return self.last_index
        conflict = self.term_at(prev)
        index = prev
        while index - 1 > self.commit and self.term_at(index - 1) == conflict:
            index -= 1
        return max(self.commit, index - 1)

    def _handle_append_response(self, response: AppendResponse, now: float) -> None:
        if self.role is not Role.LEADER:
            return
        peer = response.sender
        self._heard_at[peer] = now
        self._acked_sent_at[peer] = max(self._acked_sent_at.get(peer, -float("inf")), response.sent_at)
        if response.success:
            if response.match_index > self.match_index[peer]:
                self.match_index[peer] = response.match_index
                self._advance_commit()
            self.next_index[peer] = max(self.next_index[peer], self.match_index[peer] + 1)
            if self.next_index[peer] <= self.last_index:
                self._send_append(peer, now)
            return
        retry = min(self.next_index[peer] - 1, response.match_index + 1)
        self.next_index[peer] = max(1, self.match_index[peer] + 1, retry)
        self._send_append(peer, now)

    def _advance_commit(self) -> None:
        matches = sorted([self.last_index, *self.match_index.values()], reverse=True)
        candidate = matches[self.quorum - 1]
        if candidate > self.commit and self.term_at(candidate) == self.term:
            self.commit = candidate

    def _handle_snapshot(self, request: SnapshotRequest, now: float) -> None:
        if self.role is not Role.FOLLOWER or self.leader != request.sender:
            self._become_follower(self.term, request.sender, now)
        self._last_leader_contact = now
        self._election_deadline = now + self._random_timeout()
        if request.index > self.commit:
            snapshot = Snapshot(request.index, request.snapshot_term, request.data)
            keep = self.term_at(request.index) == request.snapshot_term  # then the log after it still matches
            if keep:
                del self.entries[:request.index - self.snapshot.index]
            else:
                self.entries = []
            self.snapshot = snapshot
            self.commit = request.index
            self._out.log_ops.append(LogOp(snapshot=snapshot))
            if not keep:
                self._out.log_ops.append(LogOp(truncate_from=request.index + 1))
            self._out.restore = snapshot
        reply = SnapshotResponse(self.term, self.id, max(self.commit, request.index), request.sent_at)
        self._send(request.sender, reply)

    def _handle_snapshot_response(self, response: SnapshotResponse, now: float) -> None:
        if self.role is not Role.LEADER:
            return
        peer = response.sender
        self._heard_at[peer] = now
        self._acked_sent_at[peer] = max(self._acked_sent_at.get(peer, -float("inf")), response.sent_at)
        index = min(response.index, self.last_index)
        if index > self.match_index[peer]:
            self.match_index[peer] = index
            self._advance_commit()
        self.next_index[peer] = max(self.next_index[peer], self.match_index[peer] + 1)
        if self.next_index[peer] <= self.last_index:
            self._send_append(peer, now)
