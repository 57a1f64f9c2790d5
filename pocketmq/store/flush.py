"""Disk flush services: when written pages reach the disk.

* :class:`FlushRealTimeService` — ASYNC_FLUSH: every ``flush_interval_commit_log`` (500 ms) flush if at
  least ``flush_commit_log_least_pages`` (4) pages are dirty, and everything every
  ``flush_commit_log_thorough_interval`` (10 s). Producers never wait for it.
* :class:`GroupCommitService` — SYNC_FLUSH group commit. A writer registers a future for its end
  offset (:meth:`GroupCommitService.wait_for`). One loop flushes everything written so far with one
  fdatasync in a thread and completes, in offset order, every waiter that flush covered; while that
  flush runs, new writers keep appending and queue up for the next one, so the number of flushes adapts
  to the load instead of to a timer. Each waiter has a deadline (``sync_flush_timeout``): one timer
  armed for the oldest waiter completes expired ones with FLUSH_DISK_TIMEOUT, so a stuck disk gives a
  status, never a hang, and no per-writer timer or polling exists.
* :class:`FlushConsumeQueueService` — every second flush consume queues with at least 2 dirty pages
  (all every 60 s) and rewrite the checkpoint with exact offsets (see :mod:`pocketmq.store.checkpoint`).

The two periodic flushes share one loop, :class:`PagedFlushService` (least pages, thorough interval).

All flushing is ``fdatasync`` run in a dedicated thread (see :mod:`pocketmq.store.mapped_file` for why not msync).
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
from collections.abc import Callable, Iterable

from pocketmq.common.logs import get_logger
from pocketmq.common.service import PeriodicService, Service
from pocketmq.store.checkpoint import StoreCheckpoint
from pocketmq.store.commitlog import CommitLog
from pocketmq.store.config import OS_PAGE_SIZE
from pocketmq.store.consume_queue import CQ_UNIT, UNIT_SIZE, ConsumeQueue
from pocketmq.store.mapped_file import MappedFile, MappedFileQueue, run_flush_plan
from pocketmq.store.results import PutMessageStatus

log = get_logger("pocketmq.store.flush")

_PUT_OK = PutMessageStatus.PUT_OK
_TIMEOUT = PutMessageStatus.FLUSH_DISK_TIMEOUT
_RETRY_DELAY_S = 0.01


def _dirty_pages(queue: MappedFileQueue) -> int:
    return queue.max_offset // OS_PAGE_SIZE - queue.flushed_where // OS_PAGE_SIZE


async def flush_commit_log(commit_log: CommitLog, executor: concurrent.futures.Executor,
                           checkpoint: StoreCheckpoint) -> int:
    """Flush everything written so far; returns the offset now on disk."""
    queue = commit_log.queue
    plan, target = queue.flush_plan()
    stamp = commit_log.last_store_timestamp
    if plan:
        await asyncio.get_running_loop().run_in_executor(executor, run_flush_plan, plan)
    queue.apply_flushed(plan, target)
    checkpoint.physic_offset = queue.flushed_where
    if stamp:
        checkpoint.physic_msg_timestamp = stamp
    return queue.flushed_where


class PagedFlushService(PeriodicService):
    """The periodic flush shared by the commit log and the consume queues: every ``interval_ms`` flush what
    has at least ``least_pages`` dirty pages, and everything once ``thorough_ms`` have passed since the last
    thorough flush (RocketMQ's ``flush...LeastPages`` / ``flush...ThoroughInterval``)."""

    def __init__(self, *, interval_ms: int, least_pages: int, thorough_ms: int) -> None:
        super().__init__(interval_ms / 1000)
        self._least_pages = least_pages
        self._thorough = thorough_ms / 1000
        self._last_thorough = 0.0

    def start(self) -> None:
        self._last_thorough = asyncio.get_running_loop().time()
        super().start()

    async def tick(self) -> None:
        now = asyncio.get_running_loop().time()
        least = self._least_pages
        if now - self._last_thorough >= self._thorough:
            least, self._last_thorough = 0, now
        await self.flush(least)

    async def flush(self, least_pages: int) -> None:
        """Flush what has at least ``least_pages`` dirty pages (everything dirty for 0)."""
        raise NotImplementedError


class FlushRealTimeService(PagedFlushService):
    """ASYNC_FLUSH of the commit log."""

    name = "flush-commitlog"

    def __init__(self, commit_log: CommitLog, executor: concurrent.futures.Executor,
                 checkpoint: StoreCheckpoint, *, interval_ms: int, least_pages: int, thorough_ms: int) -> None:
        super().__init__(interval_ms=interval_ms, least_pages=least_pages, thorough_ms=thorough_ms)
        self._commit_log = commit_log
        self._executor = executor
        self._checkpoint = checkpoint

    async def flush(self, least_pages: int) -> None:
        queue = self._commit_log.queue
        if queue.dirty_bytes() > 0 and _dirty_pages(queue) >= least_pages:
            await flush_commit_log(self._commit_log, self._executor, self._checkpoint)


class GroupCommitService(Service):
    """SYNC_FLUSH group commit (see module docstring)."""

    name = "group-commit"

    def __init__(self, commit_log: CommitLog, executor: concurrent.futures.Executor,
                 checkpoint: StoreCheckpoint, *, timeout_ms: int, max_waiters: int) -> None:
        super().__init__()
        self._commit_log = commit_log
        self._executor = executor
        self._checkpoint = checkpoint
        self._timeout = timeout_ms / 1000
        self._max_waiters = max_waiters
        self._waiters: collections.deque[tuple[int, float, asyncio.Future[PutMessageStatus]]] = (
            collections.deque())
        self._wakeup = asyncio.Event()
        self._timer: asyncio.TimerHandle | None = None

    @property
    def pending(self) -> int:
        """Writers waiting now."""
        return len(self._waiters)

    def has_room(self) -> bool:
        """False when the bound on waiting writers is reached (the put is refused before appending)."""
        return len(self._waiters) < self._max_waiters

    def wait_for(self, end_offset: int) -> asyncio.Future[PutMessageStatus]:
        """A future that becomes PUT_OK once ``end_offset`` is on disk, FLUSH_DISK_TIMEOUT after the
        timeout. Never raises; cancelling the future only stops that writer from waiting."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[PutMessageStatus] = loop.create_future()
        if self._commit_log.queue.flushed_where >= end_offset:
            future.set_result(_PUT_OK)
            return future
        deadline = loop.time() + self._timeout
        self._waiters.append((end_offset, deadline, future))
        if self._timer is None:
            self._timer = loop.call_at(deadline, self._expire)
        self._wakeup.set()
        return future

    def _expire(self) -> None:
        self._timer = None
        loop = asyncio.get_running_loop()
        now = loop.time()
        waiters = self._waiters
        expired = 0
        while waiters and waiters[0][1] <= now:
            future = waiters.popleft()[2]
            if not future.done():
                future.set_result(_TIMEOUT)
            expired += 1
        if expired:
            log.warning("sync_flush_timed_out", waiters=expired, flushed=self._commit_log.flushed_offset)
        if waiters:
            self._timer = loop.call_at(waiters[0][1], self._expire)

    def _release(self, flushed: int) -> None:
        waiters = self._waiters
        while waiters and waiters[0][0] <= flushed:
            future = waiters.popleft()[2]
            if not future.done():
                future.set_result(_PUT_OK)

    async def run(self) -> None:
        while True:
            await self._wakeup.wait()
            self._wakeup.clear()
            while self._waiters:
                try:
                    flushed = await flush_commit_log(self._commit_log, self._executor, self._checkpoint)
                except OSError as exc:
                    log.error("commit_log_flush_failed", error=str(exc))
                    await asyncio.sleep(_RETRY_DELAY_S)
                    continue
                self._release(flushed)

    def release_all(self) -> None:
        """At shutdown, after the final flush: complete every waiter with what is true for it."""
        self._release(self._commit_log.flushed_offset)
        while self._waiters:
            future = self._waiters.popleft()[2]
            if not future.done():
                future.set_result(_TIMEOUT)
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


def _flush_queues_and_checkpoint(plans: list[list[tuple[MappedFile, int]]], checkpoint: StoreCheckpoint,
                                 path: str) -> None:
    for plan in plans:
        run_flush_plan(plan)
    checkpoint.write(path)


class FlushConsumeQueueService(PagedFlushService):
    """Periodic consume-queue flush and checkpoint (see module docstring)."""

    name = "flush-consumequeue"

    def __init__(self, consume_queues: Callable[[], Iterable[ConsumeQueue]], commit_log: CommitLog,
                 executor: concurrent.futures.Executor, checkpoint: StoreCheckpoint, checkpoint_path: str,
                 *, interval_ms: int, least_pages: int, thorough_ms: int,
                 indexed_offset: Callable[[], int] | None = None) -> None:
        super().__init__(interval_ms=interval_ms, least_pages=least_pages, thorough_ms=thorough_ms)
        self._consume_queues = consume_queues
        self._commit_log = commit_log
        #: commit-log offset before which every record is indexed (a slave's dispatch may be waiting for a
        #: consume-queue file behind its appended bytes); the commit log's max offset when not given
        self._indexed_offset = indexed_offset or (lambda: commit_log.max_offset)
        self._executor = executor
        self._checkpoint = checkpoint
        self._checkpoint_path = checkpoint_path

    async def flush(self, least_pages: int) -> None:
        """Flush the queues with at least ``least_pages`` dirty pages (all dirty ones for 0), then write
        the checkpoint. ``logics_offset`` becomes the commit-log offset before which every unit is on
        disk: the indexed offset (the max, or where a slave's dispatch waits), unless a queue left dirty holds
        a unit of an earlier record."""
        capture = self._indexed_offset()
        stamp = self._commit_log.last_store_timestamp if capture == self._commit_log.max_offset else 0
        logics = capture
        flushed: list[tuple[MappedFileQueue, list[tuple[MappedFile, int]], int]] = []
        for cq in self._consume_queues():
            queue = cq.queue
            if queue.dirty_bytes() <= 0:
                continue
            if _dirty_pages(queue) >= least_pages:
                plan, target = queue.flush_plan()
                flushed.append((queue, plan, target))
            else:
                unit = cq.get_units(queue.flushed_where // UNIT_SIZE, 1)
                if unit is not None:
                    logics = min(logics, CQ_UNIT.unpack(unit)[0])
        snapshot = StoreCheckpoint(
            physic_msg_timestamp=self._checkpoint.physic_msg_timestamp,
            logics_msg_timestamp=stamp if logics == capture and stamp else self._checkpoint.logics_msg_timestamp,
            index_msg_timestamp=self._checkpoint.index_msg_timestamp,
            physic_offset=self._checkpoint.physic_offset,
            logics_offset=logics,
            has_offsets=True,
        )
        await asyncio.get_running_loop().run_in_executor(
            self._executor, _flush_queues_and_checkpoint, [p for _q, p, _t in flushed], snapshot,
            self._checkpoint_path)
        for queue, plan, target in flushed:
            queue.apply_flushed(plan, target)
        self._checkpoint.logics_offset = snapshot.logics_offset
        self._checkpoint.logics_msg_timestamp = snapshot.logics_msg_timestamp
