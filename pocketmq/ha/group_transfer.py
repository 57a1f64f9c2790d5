"""Replica waits of a SYNC_MASTER (RocketMQ's ``GroupTransferService``).

A put registers a future for its end offset and awaits it next to the flush wait. Waiters sit in a heap
keyed by end offset; an acknowledgement that advances the replicated watermark completes, in offset
order, every waiter at or below it, so one acknowledgement releases a whole group of puts and nothing
polls. Deadlines are kept in a FIFO (every waiter gets the same timeout, so insertion order is deadline
order) with one timer armed for the oldest; an expired waiter becomes FLUSH_SLAVE_TIMEOUT.

Each waiter is settled exactly once, by whichever structure reaches it first; the other one drops it
lazily (at its head, or in an occasional compaction that keeps both within twice the live count), so
memory stays proportional to the waiters alive. The number of live waiters is bounded; the broker asks
:meth:`GroupTransferService.has_room` before appending, and a wait registered past the bound comes back
FLUSH_SLAVE_TIMEOUT at once (the message is stored; its replication was not waited for).

The watermark itself is the replica hub's (:class:`ha.service.HAService`) business: it only ever passes offsets that
a live, validated slave connection acknowledged.
"""

from __future__ import annotations

import asyncio
import collections
import heapq
import itertools

from pocketmq.common.logs import get_logger
from pocketmq.store import PutMessageStatus

log = get_logger("pocketmq.ha.group_transfer")

_PUT_OK = PutMessageStatus.PUT_OK
_TIMEOUT = PutMessageStatus.FLUSH_SLAVE_TIMEOUT
_COMPACT_SLACK = 1024
_REFUSAL_LOG_INTERVAL_S = 1.0


class _Waiter:
    __slots__ = ("deadline", "future", "settled")

    def __init__(self, future: asyncio.Future[PutMessageStatus], deadline: float) -> None:
        self.future = future
        self.deadline = deadline
        self.settled = False


class GroupTransferService:
    """Futures keyed by end offset, completed by acknowledgements or by their deadline (see module
    docstring). Used from the event loop only."""

    def __init__(self, *, timeout: float, max_waiters: int) -> None:
        self._timeout = timeout
        self._max_waiters = max_waiters
        self._heap: list[tuple[int, int, _Waiter]] = []
        self._deadlines: collections.deque[_Waiter] = collections.deque()
        self._seq = itertools.count()
        self._live = 0
        self._timer: asyncio.TimerHandle | None = None
        self._last_refusal_log = -_REFUSAL_LOG_INTERVAL_S
        #: waits that ended in FLUSH_SLAVE_TIMEOUT because nobody acknowledged in time
        self.timeouts = 0
        #: waits refused because ``max_waiters`` were already waiting
        self.refused = 0

    @property
    def pending(self) -> int:
        """Waiters not yet completed (a waiter its caller cancelled counts until its deadline)."""
        return self._live

    def has_room(self) -> bool:
        """False when ``max_waiters`` puts are already waiting."""
        return self._live < self._max_waiters

    def wait_for(self, end_offset: int, acked: int) -> asyncio.Future[PutMessageStatus]:
        """A future of PUT_OK once the watermark reaches ``end_offset`` (``acked`` is where it is now),
        FLUSH_SLAVE_TIMEOUT after the timeout or at once when the bound is reached. Never raises;
        cancelling the future only stops that caller from waiting."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[PutMessageStatus] = loop.create_future()
        if end_offset <= acked:
            future.set_result(_PUT_OK)
            return future
        if self._live >= self._max_waiters:
            self._refuse(loop.time())
            future.set_result(_TIMEOUT)
            return future
        waiter = _Waiter(future, loop.time() + self._timeout)
        heapq.heappush(self._heap, (end_offset, next(self._seq), waiter))
        self._deadlines.append(waiter)
        self._live += 1
        if self._timer is None:
            self._timer = loop.call_at(waiter.deadline, self._expire)
        return future

    def _refuse(self, now: float) -> None:
        self.refused += 1
        if now - self._last_refusal_log >= _REFUSAL_LOG_INTERVAL_S:
            self._last_refusal_log = now
            log.warning("replica_waits_refused", max_waiters=self._max_waiters,
                        refused_total=self.refused)

    def notify_transfer(self, acked: int) -> int:
        """The watermark reached ``acked``: complete every waiter at or below it with PUT_OK; returns
        how many were completed."""
        heap = self._heap
        released = 0
        while heap and heap[0][0] <= acked:
            waiter = heapq.heappop(heap)[2]
            if not waiter.settled:
                waiter.settled = True
                self._live -= 1
                released += 1
                if not waiter.future.done():
                    waiter.future.set_result(_PUT_OK)
        if released:
            deadlines = self._deadlines
            while deadlines and deadlines[0].settled:
                deadlines.popleft()
            self._maybe_compact()
        return released

    def _expire(self) -> None:
        self._timer = None
        loop = asyncio.get_running_loop()
        now = loop.time()
        deadlines = self._deadlines
        expired = 0
        while deadlines and (deadlines[0].settled or deadlines[0].deadline <= now):
            waiter = deadlines.popleft()
            if waiter.settled:
                continue
            waiter.settled = True
            self._live -= 1
            if not waiter.future.done():
                waiter.future.set_result(_TIMEOUT)
                expired += 1
        if expired:
            self.timeouts += expired
            log.warning("replica_waits_timed_out", waiters=expired, timeout_s=self._timeout)
        heap = self._heap
        while heap and heap[0][2].settled:
            heapq.heappop(heap)
        self._maybe_compact()
        if deadlines:
            self._timer = loop.call_at(deadlines[0].deadline, self._expire)

    def _maybe_compact(self) -> None:
        """Drop settled entries buried inside either structure once they outnumber the live ones."""
        limit = 2 * self._live + _COMPACT_SLACK
        if len(self._heap) > limit:
            self._heap = [item for item in self._heap if not item[2].settled]
            heapq.heapify(self._heap)
        if len(self._deadlines) > limit:
            self._deadlines = collections.deque(w for w in self._deadlines if not w.settled)

    def release_all(self, status: PutMessageStatus = _TIMEOUT) -> None:
        """Complete every waiter with ``status`` (at shutdown: replication was not confirmed)."""
        for _end, _seq, waiter in self._heap:
            if not waiter.settled:
                waiter.settled = True
                if not waiter.future.done():
                    waiter.future.set_result(status)
        self._heap.clear()
        self._deadlines.clear()
        self._live = 0
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
