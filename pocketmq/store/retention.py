"""Retention: deleting old commit-log and consume-queue files (RocketMQ's CleanCommitLogService and
CleanConsumeQueueService).

Every ``clean_resource_interval`` (10 s) the service decides whether to delete:

* at one of the ``delete_when`` hours (``"04"`` or ``"04;16"``), or when a deletion was requested by
  hand, files whose last write is older than ``file_reserved_time`` hours go;
* when the disk holding the store is fuller than ``disk_max_used_space_ratio`` (75 %) the same happens
  at any hour; above ``disk_space_clean_forcibly_ratio`` (85 %) the oldest files go even if they are not
  expired;
* above ``disk_space_warning_level_ratio`` (90 %) the store refuses puts until space is freed;
* every run also hands the store the disk's state (:attr:`RetentionService.disk`) and lets it re-check a
  full disk met by a reservation (``recheck``), so sends are accepted again when space returns.

Never deleted: the file being written, and any file not entirely flushed (the flush thread may be
working on it). At most ``delete_files_batch_max`` commit-log files go per run. Consume-queue files go
when every record they index is gone. Files leave the in-memory lists first, on the event loop (so a
reader sees "gone", which ``get_messages`` reports as MESSAGE_WAS_REMOVING or OFFSET_TOO_SMALL); the
unlink and munmap happen afterwards in a thread. A file a reader still holds a view of is unlinked at
once and unmapped on a later run.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass

from pocketmq.common.logs import get_logger
from pocketmq.common.service import PeriodicService
from pocketmq.store.commitlog import CommitLog
from pocketmq.store.config import StoreConfig
from pocketmq.store.consume_queue import ConsumeQueue
from pocketmq.store.mapped_file import MappedFile

log = get_logger("pocketmq.store.retention")


@dataclass(frozen=True, slots=True)
class DiskState:
    """The file system holding the store, at one statvfs."""

    ratio: float
    """Used fraction (0..1): (total - free) / total with the free blocks of the whole file system, as
    RocketMQ computes it (Java's ``File.getFreeSpace``)."""
    total: int
    """Bytes."""
    available: int
    """Bytes an unprivileged writer can still take."""


def disk_state(path: str) -> DiskState:
    """The file system holding ``path``. Blocking (a statvfs)."""
    st = os.statvfs(path)
    if st.f_blocks <= 0:
        return DiskState(0.0, 0, 0)
    return DiskState(1.0 - st.f_bfree / st.f_blocks, st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize)


def _destroy(files: list[MappedFile]) -> list[MappedFile]:
    """Destroy files; returns those still mapped because a reader holds a view."""
    return [m for m in files if not m.destroy()]


class RetentionService(PeriodicService):
    """Periodic deletion of expired files (see module docstring)."""

    name = "retention"

    def __init__(self, config: StoreConfig, commit_log: CommitLog,
                 consume_queues: Callable[[], Iterable[ConsumeQueue]], executor: concurrent.futures.Executor,
                 *, clock: Callable[[], float] = time.time,
                 on_disk_full: Callable[[bool], None] | None = None,
                 recheck: Callable[[DiskState], Awaitable[None]] | None = None) -> None:
        super().__init__(config.clean_resource_interval_ms / 1000)
        self._config = config
        self._commit_log = commit_log
        self._consume_queues = consume_queues
        self._executor = executor
        self._clock = clock
        self._on_disk_full = on_disk_full
        self._recheck = recheck
        self._hours = config.delete_hours
        self._manual_requests = 0
        self._unclosed: list[MappedFile] = []
        #: True while the disk is above the warning ratio: the store refuses puts.
        self.disk_full = False
        #: the disk at the last run (None before the first)
        self.disk: DiskState | None = None

    def discard(self, files: list[MappedFile]) -> None:
        """Destroy files that left a queue (a reset log, a restarted consume queue) in the io thread;
        those a reader still holds are closed by a later run. Call on the event loop."""
        if files:
            future = asyncio.get_running_loop().run_in_executor(self._executor, _destroy, files)
            future.add_done_callback(self._keep_unclosed)

    def keep_unclosed(self, files: list[MappedFile]) -> None:
        """Files already unlinked whose mapping a reader still holds: closed by a later run."""
        self._unclosed += files

    def _keep_unclosed(self, future: asyncio.Future[list[MappedFile]]) -> None:
        if not future.cancelled() and future.exception() is None:
            self._unclosed += future.result()

    def close_deferred(self) -> None:
        """At shutdown: try once more to unmap the files readers held. Blocking."""
        self._unclosed = [m for m in self._unclosed if not m.close()]

    def request_manual_delete(self) -> None:
        """Delete expired files on the next runs regardless of the hour (RocketMQ's
        executeDeleteFilesManually, which allows 20 runs)."""
        self._manual_requests = 20

    async def tick(self) -> None:
        await self.run_once()

    async def run_once(self) -> int:
        """One decision and deletion round; returns the number of commit-log files deleted."""
        loop = asyncio.get_running_loop()
        cfg = self._config
        disk = self.disk = await loop.run_in_executor(self._executor, disk_state, cfg.commit_log_dir)
        usage = disk.ratio
        self._set_disk_full(usage * 100 >= cfg.disk_space_warning_level_ratio)
        if self._recheck is not None:
            await self._recheck(disk)
        manual = self._manual_requests > 0
        if manual:
            self._manual_requests -= 1
        at_hour = time.localtime(self._clock()).tm_hour in self._hours
        over = usage * 100 >= cfg.disk_max_used_space_ratio
        forced = usage * 100 >= cfg.disk_space_clean_forcibly_ratio
        deleted = 0
        if at_hour or over or manual:
            deleted = await self._delete_commit_log_files(forced)
        await self._delete_consume_queue_files()
        if self._unclosed:
            self._unclosed = await loop.run_in_executor(self._executor, _destroy, self._unclosed)
        return deleted

    def _set_disk_full(self, full: bool) -> None:
        if full != self.disk_full:
            log.warning("disk_full" if full else "disk_space_recovered", dir=self._config.commit_log_dir,
                        ratio=self._config.disk_space_warning_level_ratio, refusing_puts=full)
            if self._on_disk_full is not None:
                self._on_disk_full(full)
        self.disk_full = full

    async def _delete_commit_log_files(self, forced: bool) -> int:
        loop = asyncio.get_running_loop()
        queue = self._commit_log.queue
        candidates = [m for m in queue.files[:-1][:self._config.delete_files_batch_max]
                      if m.file_end_offset <= queue.flushed_where]
        if not candidates:
            return 0
        mtimes = await loop.run_in_executor(self._executor, lambda: [m.last_modified() for m in candidates])
        expired_before = self._clock() - self._config.file_reserved_time_hours * 3600
        count = 0
        for mtime in mtimes:
            if not (forced or mtime <= expired_before):
                break
            count += 1
        # The list may have changed while we were in the thread; only take files still at its head.
        count = min(count, next((i for i, (a, b) in enumerate(zip(queue.files, candidates, strict=False))
                                 if a is not b), len(candidates)))
        removed = queue.remove_head(count)
        if removed:
            log.info("commit_log_files_deleted", count=len(removed), first=removed[0].path,
                     min_offset=queue.min_offset, forced=forced)
            self._unclosed += await loop.run_in_executor(self._executor, _destroy, removed)
        return len(removed)

    async def _delete_consume_queue_files(self) -> None:
        min_offset = self._commit_log.min_offset
        removed: list[MappedFile] = []
        for cq in self._consume_queues():
            removed += cq.delete_expired(min_offset)
        if removed:
            log.info("consume_queue_files_deleted", count=len(removed))
            self._unclosed += await asyncio.get_running_loop().run_in_executor(self._executor, _destroy, removed)
