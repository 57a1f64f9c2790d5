"""``Reput``: a slave's side of the commit log (RocketMQ's ``ReputMessageService`` with the HA client's append).

The slave appends the bytes its master sends at its own max offset (:meth:`Reput.append`), then indexes the
records they complete (:meth:`Reput.dispatch`: the consume queues, the queue-offset table, the arrival and
growth listeners); the replication client acknowledges a transfer between the two, as RocketMQ's slave does
before its reput. Body CRCs are not checked (the bytes are the master's own records, over TCP); sizes, magic
codes and offsets are, so garbage ends the scan and is cut. :meth:`Reput.reset` restarts an empty log at a
file boundary, when the master has nothing older to send. :meth:`Reput.truncate` cuts the log back to a record
start, when the master restarted with a shorter log than ours (it lost its unflushed tail) and sends from
there; :func:`make_cut_durable` then makes that cut survive a crash of ours.

Nothing here blocks the event loop: the replication client asks :meth:`CommitLog.raw_room` before it appends
(and stops reading from the master until the window covers the bytes), and a dispatch stops at a record whose
consume queue needs a file or room, which :meth:`Reput.prepare` makes in the allocation thread.

The store says whether it runs before it calls any of these.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import copy
import os
from collections.abc import Callable

from pocketmq.common.errors import RecordFormatError
from pocketmq.common.logs import Logger
from pocketmq.common.record import DispatchRequest
from pocketmq.store.checkpoint import StoreCheckpoint
from pocketmq.store.commitlog import CommitLog
from pocketmq.store.dispatch_kernel import dispatch_requests
from pocketmq.store.listeners import StoreListeners
from pocketmq.store.mapped_file import MappedFile, MappedFileAllocator, file_name_for, fsync_dir
from pocketmq.store.queue_table import DISPATCHED, NOT_READY, ConsumeQueueTable

RUN_RECORDS = 1024
"""Most records read typed in one run (the list of their requests is bounded)."""


class Reput:
    """Appending and indexing replicated bytes (see the module docstring). :attr:`offset` is where the next
    dispatch starts (the store sets it after recovery)."""

    def __init__(self, commit_log: CommitLog, queues: ConsumeQueueTable, listeners: StoreListeners,
                 allocator: MappedFileAllocator, discard: Callable[[list[MappedFile]], None],
                 log: Logger) -> None:
        self.offset = 0
        #: the record the last dispatch stopped at because its consume queue needs a file or room first
        self.waiting: DispatchRequest | None = None
        self._commit_log = commit_log
        self._queues = queues
        self._listeners = listeners
        self._allocator = allocator
        self._discard = discard
        self._log = log

    def append(self, offset: int, data: bytes | memoryview) -> bool:
        """Append bytes received from the master at ``offset`` (which must be this log's max offset); False
        when the offset does not match or no file can be created."""
        try:
            if not self._commit_log.append_raw(offset, data):
                self._log.warning("replicated_data_misplaced", offset=offset, max_offset=self._commit_log.max_offset)
                return False
        except OSError as exc:
            self._log.error("commit_log_file_creation_failed", error=str(exc))
            return False
        return True

    def dispatch(self, *, inline: bool = False) -> bool:
        """Index the records appended since the last dispatch and tell the growth listeners; False (and the
        invalid tail cut) when they are not valid records. It never blocks: at a record whose consume queue
        needs a file or room it stops and sets :attr:`waiting` (await :meth:`prepare`, then dispatch again).
        ``inline`` (the bare append of tools and tests) makes files and room in this thread instead."""
        ok = self._reput(inline)
        if self._listeners.growth:
            self._listeners.notify_growth(self._commit_log.max_offset)
        return ok

    def _reput(self, inline: bool) -> bool:
        """The records from :attr:`offset`: the usual ones read typed from the mapping, a run at a time
        (:func:`~pocketmq.store.dispatch_kernel.dispatch_requests`), anything else (a file's end, a blank marker, a
        new topic, damage, the end of the written data) by one step of the commit log's scanner, which
        decides."""
        commit_log = self._commit_log
        files = commit_log.queue
        dispatch = self._queues.dispatch_ready
        notify = self._listeners.notify_arrival if self._listeners.arrival else None
        self.waiting = None
        offset = self.offset
        while True:
            mapped = files.find(offset)
            requests = [] if mapped is None else dispatch_requests(
                mapped.view, offset - mapped.file_from_offset, mapped.wrote_position, mapped.file_from_offset,
                RUN_RECORDS)
            if not requests:  # the scanner's step
                scanner = commit_log.scan(offset, check_crc=False, written_only=True)
                step = next(iter(scanner), None)
                if step is None:
                    self.offset = scanner.end_offset
                    return self._scanned_to_end(scanner.end_offset, scanner.error)
                requests = [step]
            for request in requests:
                done = dispatch(request, inline)
                if done == NOT_READY:
                    self.waiting = request  # the next dispatch starts there
                    self.offset = request[2]
                    return True
                if done == DISPATCHED and notify is not None:  # topic, queue id, next offset, tags, store time
                    notify(request[0], request[1], request[6] + 1, request[4], request[5])
            last = requests[-1]
            offset = last[2] + last[3]

    def _scanned_to_end(self, offset: int, error: RecordFormatError | None) -> bool:
        if error is None:
            return True
        self._log.error("replicated_data_invalid_tail_cut", offset=offset, reason=error.reason)
        self._discard(self._commit_log.truncate_written_tail(offset))
        return False

    async def prepare(self) -> None:
        """Create and reserve (in the allocation thread) what the record :meth:`dispatch` stopped at needs
        (raises OSError); dispatch again after."""
        waiting = self.waiting
        if waiting is not None:
            await self._queues.prepare_dispatch(waiting)

    def reset(self, offset: int) -> bool:
        """Drop the whole commit log and start an empty one whose first file begins at ``offset`` (see
        ``MessageStore.reset_commit_log``); False (and nothing changes) unless ``offset`` is a file boundary at
        or past the current max offset."""
        queue = self._commit_log.queue
        if offset % queue.mapped_file_size or offset < queue.max_offset:
            return False
        if offset == queue.max_offset and queue.files and queue.files[0].file_from_offset == offset:
            return True  # already an empty log starting there
        target = os.path.join(queue.store_dir, file_name_for(offset))
        self._allocator.discard_pending(queue.store_dir, keep=target)
        removed, queue.files = queue.files, []
        try:
            queue.roll(offset)
        except OSError as exc:
            queue.files = removed
            self._log.error("commit_log_file_creation_failed", error=str(exc))
            return False
        self._discard(removed)
        self.offset = offset
        for cq in self._queues:
            cq.correct_min_offset(offset)
        self._log.warning("commit_log_reset", offset=offset, dropped_files=len(removed))
        if self._listeners.growth:
            self._listeners.notify_growth(offset)
        return True

    def truncate(self, offset: int) -> list[MappedFile] | None:
        """Cut the log back to ``offset``, the start of a record it holds (see
        ``MessageStore.truncate_commit_log``): the written bytes from there on are zeroed (later files are
        returned), the consume-queue units of the records cut are dropped (their files returned too), the
        queue-offset table is put back, and the next dispatch starts there. None (and nothing changes) for
        any other offset. It reuses the cuts recovery and an invalid replicated tail make."""
        commit_log = self._commit_log
        max_offset = commit_log.max_offset
        if not commit_log.min_offset <= offset < max_offset or commit_log.look_message(offset) is None:
            return None
        removed = commit_log.truncate_written_tail(offset)
        removed += self._queues.truncate(offset)
        waiting = self.waiting
        if waiting is not None and waiting.commit_log_offset >= offset:
            self.waiting = None
        self.offset = min(self.offset, offset)
        self._log.warning("commit_log_truncated", offset=offset, max_offset=max_offset,
                          dropped_bytes=max_offset - offset, dropped_files=len(removed))
        return removed


async def make_cut_durable(commit_log: CommitLog, removed: list[MappedFile], checkpoint: StoreCheckpoint,
                           checkpoint_path: str, flush_executor: concurrent.futures.Executor,
                           io_executor: concurrent.futures.Executor) -> list[MappedFile]:
    """After :meth:`Reput.truncate`: fdatasync the log's cut file (so records past the cut cannot come back
    after a crash of ours), delete the files that left the log and its queues and write a checkpoint no
    higher than the cut (so recovery re-indexes from there), before anything is appended again (a file name
    cut is reused when the log grows back). The fdatasync runs in the flush thread, after any flush under
    way (whose result is then capped at the cut); the rest in the io thread, after any consume-queue
    checkpoint under way. Returns the files a reader still maps, for retention to close later."""
    loop = asyncio.get_running_loop()
    max_offset = commit_log.max_offset
    checkpoint.physic_offset = min(checkpoint.physic_offset, max_offset)
    checkpoint.logics_offset = min(checkpoint.logics_offset, max_offset)
    tail = commit_log.queue.last
    if tail is not None:
        await loop.run_in_executor(flush_executor, tail.flush, tail.wrote_position)
    snapshot = copy.copy(checkpoint)
    return await loop.run_in_executor(io_executor, _delete_and_checkpoint, removed, snapshot, checkpoint_path)


def _delete_and_checkpoint(removed: list[MappedFile], checkpoint: StoreCheckpoint, path: str) -> list[MappedFile]:
    still_mapped = [m for m in removed if not m.destroy()]
    for directory in {os.path.dirname(m.path) for m in removed}:
        fsync_dir(directory)
    checkpoint.write(path)
    return still_mapped
