"""POP's in-memory state: which message is in flight under which check point, until when, and how far each
(topic, group, queue) has been popped. Pure bookkeeping, no I/O: :mod:`pocketmq.broker.pop.service` feeds it the
records it writes, and recovery feeds it the records it reads back, through the same methods.

Ownership. A message (queue offset) in flight is owned by exactly one check point: the last one stored for it.
A pop registers a check point for the offsets it read; a change of invisible time stores a check point for one
offset, which takes the offset over from the one that owned it; an ack, or a revive (the message re-put to the
POP retry topic or the DLQ), settles it. A check point owning nothing is done. What a message's receipt handle
names must be its owner, or the handle is stale.

Progress. Per queue, ``pop_offset`` is the next offset never handed out; the group's committed consume offset is
``min(pop_offset, oldest offset in flight)``, so it never passes a message not yet acked.

Snapshot. :meth:`PopState.snapshot` says where a replay of the revive log must start: per revive queue the first
record of a check point that owns anything or has an ack being written, or, for one still being stored, the
revive queue's end before its record was written (``revive_offsets``), and per queue the
pop offset below which all is settled (the start of a pop whose check point is not stored yet, else
``pop_offset``). Pops of one queue are serialised (:attr:`QueueState.locked` held until the check point is
stored), and every check point of a queue goes to the same revive queue, so the check points a replay skips are
settled and end below the snapshot's pop offset.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from pocketmq.broker.pop.records import AckMsg, PopCheckPoint, PopSnapshot

QueueKey = tuple[str, str, int]
"""(topic as stored, group, queue id): one queue as one group consumes it."""
CheckPointKey = tuple[str, str, int, int, int]


class LiveCheckPoint:
    """A stored (or being stored) check point and what it still owns."""

    __slots__ = ("ck", "live", "pending_acks", "revive_offset", "revive_qid", "stored")

    def __init__(self, ck: PopCheckPoint, revive_qid: int) -> None:
        self.ck = ck
        self.revive_qid = revive_qid
        #: queue offset of its record in the revive queue; until stored, the revive queue's end before the record
        #: was written (a floor: the record lands at or after it), or -1 when unknown
        self.revive_offset = -1
        self.stored = False
        #: offsets it owns
        self.live = 0
        #: acks of its offsets whose records are being written (it counts as live for the snapshot)
        self.pending_acks = 0

    @property
    def deadline(self) -> int:
        return self.ck.deadline

    def __repr__(self) -> str:
        return f"LiveCheckPoint({self.ck.key}, live={self.live}, deadline={self.deadline})"


@dataclass(slots=True)
class QueueState:
    """One (topic, group, queue)."""

    pop_offset: int = -1
    owners: dict[int, LiveCheckPoint] = field(default_factory=dict)
    heap: list[int] = field(default_factory=list)
    #: the pop whose check point is being stored (pops of a queue are serialised)
    pending: LiveCheckPoint | None = None
    locked: bool = False
    #: FIFO: how often each offset in flight was handed out before its current delivery
    counts: dict[int, int] = field(default_factory=dict)
    #: FIFO: the attempt id of the last pop (a client's retry of the same receive is not blocked)
    attempt_id: str | None = None

    def oldest(self) -> int | None:
        """The oldest offset in flight (lazy heap: entries no longer owned are dropped here)."""
        heap, owners = self.heap, self.owners
        while heap and heap[0] not in owners:
            heapq.heappop(heap)
        return heap[0] if heap else None

    def committed(self) -> int:
        """The offset the group has consumed up to: every message below it is settled."""
        oldest = self.oldest()
        if oldest is None:
            return self.pop_offset
        return oldest if self.pop_offset < 0 else min(oldest, self.pop_offset)

    def blocked(self, now: int, attempt_id: str | None) -> bool:
        """FIFO: a message of this queue is in flight and still invisible (a retry of the same attempt is not)."""
        if attempt_id is not None and attempt_id == self.attempt_id:
            return False
        return any(owner.deadline > now for owner in self.owners.values())


class PopState:
    """Every queue's :class:`QueueState`, the check points by key, and their deadlines."""

    def __init__(self, revive_queue_num: int) -> None:
        self.revive_queue_num = revive_queue_num
        self.queues: dict[QueueKey, QueueState] = {}
        self._index: dict[CheckPointKey, list[LiveCheckPoint]] = {}
        self._deadlines: list[tuple[int, int, LiveCheckPoint]] = []
        self._sequence = itertools.count()
        #: messages in flight per group
        self.inflight_by_group: dict[str, int] = {}

    # -- queues -------------------------------------------------------------------------------------------

    def queue(self, key: QueueKey) -> QueueState:
        state = self.queues.get(key)
        if state is None:
            state = self.queues[key] = QueueState()
        return state

    def revive_qid(self, key: QueueKey) -> int:
        """The revive queue of every check point of a queue (a stable hash: the same after a restart)."""
        text = f"{key[0]}@{key[1]}@{key[2]}"
        return sum(text.encode()) % self.revive_queue_num

    # -- check points -------------------------------------------------------------------------------------

    def register(self, ck: PopCheckPoint, revive_qid: int) -> LiveCheckPoint:
        """A check point takes over its offsets (see the module docstring) and its deadline is watched."""
        live = LiveCheckPoint(ck, revive_qid)
        state = self.queue((ck.topic, ck.group, ck.queue_id))
        owners, counts, heap = state.owners, state.counts, state.heap
        new = 0
        for offset in ck.offsets:
            previous = owners.get(offset)
            if previous is not None:
                previous.live -= 1
                if ck.order and previous.ck.pop_time != ck.pop_time:
                    counts[offset] = counts.get(offset, 0) + 1
                if previous.live <= 0 and previous.pending_acks <= 0:
                    self._drop(previous)
            else:
                new += 1
                if ck.order:
                    counts.setdefault(offset, 0)
                heapq.heappush(heap, offset)
            owners[offset] = live
        live.live = len(ck.offsets)
        if new:
            self._count(ck.group, new)
        self._index.setdefault(ck.key, []).append(live)
        heapq.heappush(self._deadlines, (ck.deadline, next(self._sequence), live))
        return live

    def unregister(self, live: LiveCheckPoint) -> None:
        """Forget a check point whose record could not be stored (its offsets are no longer in flight)."""
        state = self.queues.get((live.ck.topic, live.ck.group, live.ck.queue_id))
        if state is not None:
            for offset in live.ck.offsets:
                if state.owners.get(offset) is live:
                    del state.owners[offset]
                    state.counts.pop(offset, None)
                    self._count(live.ck.group, -1)
        live.live = 0
        self._drop(live)

    def find(self, key: CheckPointKey, offset: int) -> LiveCheckPoint | None:
        """The check point of ``key`` that owns ``offset``, if any (an offset's one owner, when its key matches)."""
        state = self.queues.get((key[0], key[1], key[2]))
        owner = state.owners.get(offset) if state is not None else None
        if owner is None:
            return None
        ck = owner.ck
        return owner if (ck.start_offset == key[3] and ck.pop_time == key[4]) else None

    def known(self, key: CheckPointKey) -> bool:
        return key in self._index

    def settle(self, live: LiveCheckPoint, offset: int) -> bool:
        """The message at ``offset`` is acked or revived: ``live`` no longer owns it. False if it did not."""
        return bool(self.settle_many(live, (offset,)))

    def settle_many(self, live: LiveCheckPoint, offsets: Iterable[int]) -> list[int]:
        """:meth:`settle` for several offsets of one check point; the ones it owned (now settled)."""
        state = self.queues.get((live.ck.topic, live.ck.group, live.ck.queue_id))
        if state is None:
            return []
        owners, counts = state.owners, state.counts
        settled = [o for o in dict.fromkeys(offsets) if owners.get(o) is live]  # once each
        for offset in settled:
            del owners[offset]
            if counts:
                counts.pop(offset, None)
        if settled:
            self._count(live.ck.group, -len(settled))
            live.live -= len(settled)
            if live.live <= 0 and live.pending_acks <= 0:
                self._drop(live)
        return settled

    def reown(self, live: LiveCheckPoint, offsets: list[int]) -> None:
        """An ack that could not be stored: ``live`` owns ``offsets`` again (those nobody took meanwhile) and its
        deadline is watched again."""
        state = self.queue((live.ck.topic, live.ck.group, live.ck.queue_id))
        for offset in offsets:
            if offset not in state.owners:
                state.owners[offset] = live
                live.live += 1
                self._count(live.ck.group, 1)
                heapq.heappush(state.heap, offset)
        self.watch(live, live.deadline)

    def ack_done(self, live: LiveCheckPoint) -> None:
        """An ack record of ``live`` was written (or failed): it may now be done."""
        live.pending_acks -= 1
        if live.live <= 0 and live.pending_acks <= 0:
            self._drop(live)

    def apply_ack(self, ack: AckMsg) -> int:
        """Replay: settle the offsets an ack record names (those its check point still owns)."""
        settled = 0
        for offset in ack.offsets:
            live = self.find(ack.key, offset)
            if live is not None and self.settle(live, offset):
                settled += 1
        return settled

    def _drop(self, live: LiveCheckPoint) -> None:
        listed = self._index.get(live.ck.key)
        if listed is None:
            return
        try:
            listed.remove(live)
        except ValueError:
            return
        if not listed:
            del self._index[live.ck.key]

    def _count(self, group: str, delta: int) -> None:
        count = self.inflight_by_group.get(group, 0) + delta
        if count > 0:
            self.inflight_by_group[group] = count
        else:
            self.inflight_by_group.pop(group, None)

    # -- deadlines ----------------------------------------------------------------------------------------

    def due(self, now: int, limit: int) -> list[LiveCheckPoint]:
        """Up to ``limit`` check points whose deadline has passed and that still own a message, taken off the
        deadline heap (the caller revives them, or :meth:`watch` puts one back)."""
        out: list[LiveCheckPoint] = []
        heap = self._deadlines
        while heap and heap[0][0] <= now and len(out) < limit:
            _deadline, _seq, live = heapq.heappop(heap)
            if live.live > 0:
                out.append(live)
        return out

    def watch(self, live: LiveCheckPoint, when: int) -> None:
        """Look at ``live`` again at ``when`` (a revive that failed, to be tried again)."""
        heapq.heappush(self._deadlines, (when, next(self._sequence), live))

    def next_deadline(self) -> int | None:
        heap = self._deadlines
        while heap and heap[0][2].live <= 0:
            heapq.heappop(heap)
        return heap[0][0] if heap else None

    def owned_offsets(self, live: LiveCheckPoint) -> list[int]:
        state = self.queues.get((live.ck.topic, live.ck.group, live.ck.queue_id))
        if state is None:
            return []
        return [o for o in live.ck.offsets if state.owners.get(o) is live]

    def expired_count(self, now: int) -> int:
        """Messages whose invisible time has passed and that are not revived yet (the revive backlog)."""
        return sum(1 for state in self.queues.values() for live in state.owners.values()
                   if live.deadline <= now and not live.ck.order)

    # -- snapshot -----------------------------------------------------------------------------------------

    def live_check_points(self) -> Iterator[LiveCheckPoint]:
        for listed in self._index.values():
            yield from listed

    def snapshot(self, revive_ends: list[int], now: int) -> PopSnapshot:
        """Where a replay must start (see the module docstring); ``revive_ends`` are the revive queues' ends."""
        revive = list(revive_ends)
        for live in self.live_check_points():
            # One being stored counts by its floor: its record may already be below ``revive_ends`` (appended,
            # still replicating) and its pop is in the snapshot only as the pending start.
            if (live.live > 0 or live.pending_acks > 0) and live.revive_offset >= 0 \
                    and 0 <= live.revive_qid < len(revive):
                revive[live.revive_qid] = min(revive[live.revive_qid], live.revive_offset)
        pops = {}
        for key, state in self.queues.items():
            offset = state.pending.ck.start_offset if state.pending is not None else state.pop_offset
            if offset >= 0:
                pops[key] = offset
        return PopSnapshot(revive, pops, now)

    def restore(self, snapshot: PopSnapshot) -> None:
        """Start from a snapshot's pop offsets (replay then registers the check points after it)."""
        for key, offset in snapshot.pop_offsets.items():
            self.queue(key).pop_offset = offset

    def replay_check_point(self, ck: PopCheckPoint, revive_qid: int, revive_offset: int) -> None:
        """Replay: a stored check point; the queue's pop offset covers what it handed out."""
        live = self.register(ck, revive_qid)
        live.stored = True
        live.revive_offset = revive_offset
        state = self.queue((ck.topic, ck.group, ck.queue_id))
        if ck.offsets:
            state.pop_offset = max(state.pop_offset, max(ck.offsets) + 1)

    def groups(self) -> Iterable[str]:
        return self.inflight_by_group.keys()
