"""Retention: deleting old commit-log and consume-queue files (RocketMQ's CleanCommitLogService and
CleanConsumeQueueService).

Every ``clean_resource_interval`` (10 s) the service decides whether to delete:

* at one of the ``delete_when`` hours (``"04"`` or ``"04;16"``), or when a deletion was requested by
  hand, files whose last write is older than ``file_reserved_time`` hours go;
* when the disk holding the store is fuller than ``disk_max_used_space_ratio`` (75 %) the same happens
  at any hour;
* only with ``clean_file_forcibly_enable`` (RocketMQ's ``cleanFileForciblyEnable``, off here, on in RocketMQ):
  above ``disk_space_clean_forcibly_ratio`` (85 %) or the warning ratio the oldest files go even if they are
  not expired, unconsumed messages with them. Off, a full disk deletes nothing ``file_reserved_time`` keeps:
  sends are refused until space is freed, and the report says what holds the disk;
* above ``disk_space_warning_level_ratio`` (90 %) the store refuses puts until space is freed;
* every run also hands the store the disk's state (:attr:`RetentionService.disk`) and lets it re-check a
  full disk met by a reservation (``recheck``), so sends are accepted again when space returns.

Every deletion says what it took: the files, the bytes, and each consumer group's unconsumed messages that
went with them (``commit_log_files_deleted``, :attr:`RetentionService.deleted`). After each run
:attr:`RetentionService.report` says how much of the log is reclaimable and which backlogs hold the rest
(:mod:`pocketmq.store.disk_report`); the consumer offsets come from the store's owner (``offsets``).

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
from dataclasses import dataclass, field

from pocketmq.common.logs import get_logger
from pocketmq.common.service import PeriodicService
from pocketmq.store.commitlog import CommitLog
from pocketmq.store.config import StoreConfig
from pocketmq.store.consume_queue import ConsumeQueue
from pocketmq.store.disk_report import DiskReport, Offsets, backlogs, count_expired, dropped_messages, make_report
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


@dataclass(slots=True)
class Deleted:
    """What retention deleted since start, for one reason (``expired`` or ``forced``)."""

    files: int = 0
    bytes: int = 0
    dropped: dict[tuple[str, str], int] = field(default_factory=dict)
    """``(group, topic) -> unconsumed messages`` that went with the files."""

    def add(self, files: int, size: int, dropped: dict[tuple[str, str], int]) -> None:
        self.files += files
        self.bytes += size
        for key, count in dropped.items():
            self.dropped[key] = self.dropped.get(key, 0) + count


def _no_offsets() -> Offsets:
    return {}


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
                 recheck: Callable[[DiskState], Awaitable[None]] | None = None,
                 offsets: Callable[[], Offsets] = _no_offsets) -> None:
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
        #: consumer offsets (``topic@group -> queue -> offset``), read at each run
        self.offsets = offsets
        #: what is reclaimable and what holds the rest, as of the last run (None before the first)
        self.report: DiskReport | None = None
        #: what was deleted since start, by reason
        self.deleted = {"expired": Deleted(), "forced": Deleted()}
        self._above_forcibly = False

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
        # RocketMQ's cleanImmediately: above the forced ratio, or above the warning ratio whatever that one is.
        above_forcibly = usage * 100 >= min(cfg.disk_space_clean_forcibly_ratio, cfg.disk_space_warning_level_ratio)
        forced = cfg.clean_file_forcibly_enable and above_forcibly
        deleted = 0
        if at_hour or over or manual or forced:
            deleted = await self._delete_commit_log_files(forced)
        await self._delete_consume_queue_files()
        if self._unclosed:
            self._unclosed = await loop.run_in_executor(self._executor, _destroy, self._unclosed)
        self.report = await self._make_report()
        self._say_above_forcibly(above_forcibly and not forced, usage)
        return deleted

    async def _make_report(self) -> DiskReport:
        files = list(self._commit_log.queue.files)
        expired_before = self._clock() - self._config.file_reserved_time_hours * 3600
        expired = await asyncio.get_running_loop().run_in_executor(
            self._executor, count_expired, files[:-1], expired_before)
        found = await backlogs(self._consume_queues(), self.offsets())
        return make_report(files, expired, found, self._commit_log.max_offset, int(self._clock() * 1000))

    def _say_above_forcibly(self, above: bool, usage: float) -> None:
        """Once per crossing: the disk is past the forced ratio and forced cleaning is off, so nothing is deleted
        but what expired; say what would free space."""
        report = self.report
        if above and not self._above_forcibly and report is not None:
            log.warning("disk_above_clean_forcibly_ratio_nothing_forced", dir=self._config.commit_log_dir,
                        used=round(usage, 4), clean_file_forcibly_enable=False, **summary(report))
        self._above_forcibly = above

    def _set_disk_full(self, full: bool) -> None:
        if full != self.disk_full:
            held = summary(self.report) if full and self.report is not None else {}
            log.warning("disk_full" if full else "disk_space_recovered", dir=self._config.commit_log_dir,
                        ratio=self._config.disk_space_warning_level_ratio, refusing_puts=full, **held)
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
        before = {cq: cq.min_offset for cq in self._consume_queues()} if count else {}
        removed = queue.remove_head(count)
        if removed:
            self._account(removed, before, forced)
            self._unclosed += await loop.run_in_executor(self._executor, _destroy, removed)
        return len(removed)

    def _account(self, removed: list[MappedFile], before: dict[ConsumeQueue, int], forced: bool) -> None:
        """Log and count a deletion with the unconsumed messages of each group it took (the queues' min offsets
        move past the deleted records now, as the consume-queue deletion would)."""
        min_offset = self._commit_log.queue.min_offset
        for cq in before:
            cq.correct_min_offset(min_offset)
        dropped = dropped_messages(before, self.offsets())
        size = sum(m.file_size for m in removed)
        self.deleted["forced" if forced else "expired"].add(len(removed), size, dropped)
        by_group = {f"{topic}@{group}": count for (group, topic), count in sorted(dropped.items())}
        event = "commit_log_files_deleted_forcibly" if forced else "commit_log_files_deleted"
        (log.warning if forced or dropped else log.info)(
            event, count=len(removed), bytes=size, first=removed[0].path, last=removed[-1].path,
            min_offset=min_offset, forced=forced, unconsumed_dropped=sum(dropped.values()), dropped=by_group)

    async def _delete_consume_queue_files(self) -> None:
        min_offset = self._commit_log.min_offset
        removed: list[MappedFile] = []
        for cq in self._consume_queues():
            removed += cq.delete_expired(min_offset)
        if removed:
            log.info("consume_queue_files_deleted", count=len(removed))
            self._unclosed += await asyncio.get_running_loop().run_in_executor(self._executor, _destroy, removed)


def summary(report: DiskReport, holders: int = 5) -> dict[str, object]:
    """A report's figures for a log line: reclaimable and held bytes, and the largest holders."""
    return {"reclaimable_expired_bytes": report.expired_bytes, "reclaimable_consumed_bytes": report.consumed_bytes,
            "held_bytes": report.held_bytes,
            "held_by": {f"{h.topic}@{h.group}": h.bytes for h in report.holders[:holders]}}
