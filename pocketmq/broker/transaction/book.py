"""The in-memory bookkeeping of the half queue: which half messages are resolved and which copy of each
transaction is the live one.

RocketMQ's check re-appends a half message (with ``TRANSACTION_CHECK_TIMES`` + 1) each time it checks it back, so
one transaction may have several half messages: the original and its copies. The *key* of a transaction is the
queue offset of its first half message (copies carry it in ``TRAN_PREPARED_QUEUE_OFFSET``). The book keeps, for
every transaction whose half messages lie at or past the scan's progress, the offset of its latest half; older
halves of the same key are superseded and never checked, and resolving any of them resolves the latest too. So a
late END_TRANSACTION for the original, or a restart that re-reads halves already copied, cannot commit a
transaction twice.

Everything here is rebuilt at start from the two queues (``TransactionalMessageService.load``) and
bounded: at most ``max_tracked`` transactions are tracked (past that, new ones are handled per half message,
as RocketMQ does); resolved offsets and op references are dropped as the scan passes them.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass

from pocketmq.common.logs import get_logger

log = get_logger("pocketmq.broker.transaction")


@dataclass(slots=True)
class Pending:
    """The latest half message of one transaction."""

    offset: int
    topic: str
    group: str
    resolved: bool = False


class TransactionBook:
    """Progress and resolution state of the half queue (single-threaded: the event loop's)."""

    def __init__(self, max_tracked: int = 1_000_000) -> None:
        self.max_tracked = max_tracked
        #: half-queue offset below which every half message is settled (resolved, superseded or discarded)
        self.half_progress = 0
        #: op-queue offset below which every op record refers to a settled half message
        self.op_progress = 0
        #: next op-queue offset to read
        self.op_read = 0
        #: half offsets at or past ``half_progress`` that have an outcome (an op record, or one being written)
        self.done: set[int] = set()
        #: (op offset, half offset) of the op records read from ``op_progress`` on, in op order
        self._op_refs: collections.deque[tuple[int, int]] = collections.deque()
        #: transaction key → its latest half message
        self.pending: dict[str, Pending] = {}
        self._overflow_logged = False

    def reset(self, half_progress: int, op_progress: int) -> None:
        self.half_progress = half_progress
        self.op_progress = self.op_read = op_progress
        self.done.clear()
        self._op_refs.clear()
        self.pending.clear()

    # -- halves --------------------------------------------------------------------------------------------

    def track(self, key: str, offset: int, topic: str, group: str) -> None:
        """A half message (or a copy) of transaction ``key`` was stored at ``offset``."""
        entry = self.pending.get(key)
        if entry is not None:
            if offset > entry.offset:
                entry.offset = offset
            return
        if len(self.pending) >= self.max_tracked:
            if not self._overflow_logged:
                log.warning("transaction_tracking_full", tracked=len(self.pending))
                self._overflow_logged = True
            return
        self.pending[key] = Pending(offset, topic, group)

    def settled(self, key: str, offset: int) -> bool:
        """True when the half at ``offset`` needs no check: it has an outcome, its transaction has one (through
        another of its half messages), or a later half message of the transaction exists."""
        if offset in self.done:
            return True
        entry = self.pending.get(key)
        return entry is not None and (entry.resolved or entry.offset > offset)

    def resolved(self, key: str) -> bool:
        entry = self.pending.get(key)
        return entry is not None and entry.resolved

    def note_loaded(self, key: str, offset: int) -> None:
        """Start-up: a half message read back; when it has an op record its transaction is resolved (a copy
        made just before the outcome may lack one)."""
        entry = self.pending.get(key)
        if entry is not None and offset in self.done:
            entry.resolved = True

    def passed(self, key: str | None, offset: int) -> None:
        """The scan settled the half message at ``offset`` (it is ``half_progress`` now + 1)."""
        self.done.discard(offset)
        if key is not None:
            entry = self.pending.get(key)
            if entry is not None and entry.offset <= offset:
                del self.pending[key]
        self.half_progress = offset + 1
        self._advance_op_progress()

    def skip_to(self, offset: int) -> None:
        """The half queue starts at ``offset`` now (older files deleted): forget what lay before."""
        if offset > self.half_progress:
            self.half_progress = offset
            self.done = {d for d in self.done if d >= offset}
            self._advance_op_progress()

    # -- outcomes ------------------------------------------------------------------------------------------

    def targets(self, key: str, offset: int) -> list[int] | None:
        """The half offsets an outcome for the half at ``offset`` must close: itself and the transaction's latest
        copy. None when the transaction is already resolved (or was discarded: its halves are all settled)."""
        entry = self.pending.get(key)
        if entry is not None and (entry.resolved or entry.offset in self.done):
            return None
        if offset in self.done:
            return None
        if offset < self.half_progress and (entry is None or entry.offset < self.half_progress):
            return None  # settled by the scan: resolved, superseded or discarded
        out = [offset] if offset >= self.half_progress else []
        if entry is not None and entry.offset != offset and entry.offset >= self.half_progress:
            out.append(entry.offset)
        return out

    def mark(self, key: str, offsets: list[int], resolved: bool = True) -> None:
        """Mark (or, when an outcome could not be written, unmark) a transaction's outcome."""
        entry = self.pending.get(key)
        if entry is not None:
            entry.resolved = resolved
        for offset in offsets:
            if resolved:
                self.done.add(offset)
            else:
                self.done.discard(offset)

    def is_done(self, offset: int) -> bool:
        return offset in self.done

    # -- op records ----------------------------------------------------------------------------------------

    def op_read_at(self, op_offset: int, half_offset: int | None) -> None:
        """The op record at ``op_offset`` (naming ``half_offset``; None for a record that is not a valid one) was
        read."""
        if half_offset is not None:
            if half_offset >= self.half_progress:
                self.done.add(half_offset)
            self._op_refs.append((op_offset, half_offset))
        self.op_read = op_offset + 1
        self._advance_op_progress()

    def op_skip_to(self, op_offset: int) -> None:
        """Op records before ``op_offset`` are read (or gone)."""
        if op_offset > self.op_read:
            self.op_read = op_offset
            self._advance_op_progress()

    def _advance_op_progress(self) -> None:
        refs = self._op_refs
        while refs and refs[0][1] < self.half_progress:
            refs.popleft()
        self.op_progress = refs[0][0] if refs else self.op_read

    # -- views ---------------------------------------------------------------------------------------------

    def unresolved(self) -> dict[tuple[str, str], int]:
        """(real topic, producer group) → transactions with no outcome yet (tracked ones)."""
        counts: collections.Counter[tuple[str, str]] = collections.Counter()
        for entry in self.pending.values():
            if not entry.resolved and entry.offset not in self.done:
                counts[(entry.topic, entry.group)] += 1
        return dict(counts)
