"""Start-up recovery: plan from the bytes alone, then apply.

**Plan** (:func:`plan_recovery`, reads only). Two offsets decide everything:

* ``replay_from`` — records at or after it are (re)dispatched into the consume queues. With a PocketMQ
  checkpoint it is ``min(physicOffset, logicsOffset)``: before it the commit log and every consume-queue
  unit are known to be on disk. Without one (a RocketMQ store, a damaged checkpoint) RocketMQ's rules
  apply: after a clean shutdown the third-last file; after a crash the last file whose first record
  was stored at least 3 s before the older checkpoint timestamp.
* ``truncate_at`` — where the valid log ends. The scan starts at the file holding ``replay_from`` and
  validates record after record (magic, sizes, PHYSICALOFFSET = its own position, body CRC); a blank
  marker moves it to the next file; the first thing that is not a valid record ends the log.

**Apply** (:func:`apply_recovery`, writes): drop commit-log files past ``truncate_at`` and zero the tail
of the one it falls in (so stale records past the new end can never come back to life), fdatasync what
is left, cut every consume queue at ``min(replay_from, truncate_at)``, re-dispatch the records from
there, and rebuild the queue-offset table from the consume queues.

Both normal and abnormal recovery are this one procedure; what differs is only where ``replay_from``
comes from when the checkpoint lacks PocketMQ's exact offsets. Everything here is blocking and runs in a
thread before the store accepts work.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from pocketmq.common.errors import RecordFormatError
from pocketmq.common.logs import get_logger
from pocketmq.common.record import (
    INT32,
    INT64,
    MESSAGE_MAGIC_CODE,
    SIZE_AND_MAGIC,
    SYS_FLAG_OFFSET,
    DispatchRequest,
    store_timestamp_offset,
)
from pocketmq.store.checkpoint import StoreCheckpoint
from pocketmq.store.commitlog import CommitLog
from pocketmq.store.consume_queue import ConsumeQueue
from pocketmq.store.mapped_file import MappedFileQueue

log = get_logger("pocketmq.store.recovery")

ABNORMAL_TIME_MARGIN_MS = 3000


@dataclass(frozen=True, slots=True)
class RecoveryPlan:
    """What recovery will do; computed from the files without changing them."""

    abnormal: bool
    scan_start: int
    replay_from: int
    truncate_at: int
    records_scanned: int
    stop_reason: str | None

    @property
    def cut_consume_queues_at(self) -> int:
        """Consume-queue units of records at or after this offset are rebuilt."""
        return min(self.replay_from, self.truncate_at)


def _first_store_timestamp(queue: MappedFileQueue, index: int) -> int:
    mapped = queue.files[index]
    if mapped.data_end() == 0:  # never written: a hole is not read (see mapped_file)
        return -1
    size, magic = SIZE_AND_MAGIC.unpack_from(mapped.view, 0)
    if magic != MESSAGE_MAGIC_CODE or size < SYS_FLAG_OFFSET + 4:
        return -1
    sys_flag = INT32.unpack_from(mapped.view, SYS_FLAG_OFFSET)[0]
    return int(INT64.unpack_from(mapped.view, store_timestamp_offset(sys_flag))[0])


def _replay_start(queue: MappedFileQueue, checkpoint: StoreCheckpoint, abnormal: bool) -> int:
    files = queue.files
    if checkpoint.has_offsets:
        return min(checkpoint.physic_offset, checkpoint.logics_offset)
    if not abnormal:
        return files[max(0, len(files) - 3)].file_from_offset
    # RocketMQ's rule: the last file whose first record is safely older than both checkpoint times.
    stamps = [t for t in (checkpoint.physic_msg_timestamp, checkpoint.logics_msg_timestamp) if t > 0]
    if not stamps:
        return files[0].file_from_offset
    limit = min(stamps) - ABNORMAL_TIME_MARGIN_MS
    for index in range(len(files) - 1, -1, -1):
        first = _first_store_timestamp(queue, index)
        if 0 <= first <= limit:
            return files[index].file_from_offset
    return files[0].file_from_offset


def plan_recovery(commit_log: CommitLog, checkpoint: StoreCheckpoint, *, abnormal: bool,
                  check_crc: bool) -> RecoveryPlan:
    """Decide ``replay_from`` and ``truncate_at`` for a loaded (not yet positioned) commit log."""
    queue = commit_log.queue
    if not queue.files:
        return RecoveryPlan(abnormal, 0, 0, 0, 0, None)
    first, last = queue.files[0], queue.files[-1]
    replay = min(max(_replay_start(queue, checkpoint, abnormal), first.file_from_offset), last.file_end_offset)
    holder = queue.find(replay) or last
    scan_start = holder.file_from_offset
    scanner = commit_log.scan(scan_start, check_crc=check_crc, written_only=False)
    count = 0
    for _request in scanner:
        count += 1
    error: RecordFormatError | None = scanner.error
    reason = None if error is None or error.is_end_of_data else error.reason
    truncate_at = scanner.end_offset
    return RecoveryPlan(abnormal, scan_start, min(replay, truncate_at), truncate_at, count, reason)


def apply_recovery(plan: RecoveryPlan, commit_log: CommitLog, consume_queues: Iterable[ConsumeQueue],
                   dispatch: Callable[[DispatchRequest], object]) -> int:
    """Carry out ``plan``; returns the number of records re-dispatched."""
    queue = commit_log.queue
    removed = queue.truncate(plan.truncate_at)
    successor = queue.files[-1].file_end_offset if queue.files else -1
    for mapped in removed:
        if mapped.file_from_offset == successor:
            # The pre-allocated next file: keep it for the allocator, zero-filled (normally it already is).
            mapped.zero_from(0)
            mapped.close()
            continue
        log.warning("commit_log_file_past_end_removed", file=mapped.path)
        mapped.destroy()
    for mapped in queue.files:
        if mapped.file_end_offset > plan.truncate_at:
            mapped.zero_from(plan.truncate_at - mapped.file_from_offset)
        mapped.flush(mapped.wrote_position)
        mapped.flushed_position = mapped.wrote_position
    queue.flushed_where = queue.max_offset
    cut = plan.cut_consume_queues_at
    for cq in consume_queues:
        cq.truncate_by_physical_offset(cut)
    replayed = 0
    if queue.files:
        for request in commit_log.scan(plan.scan_start, check_crc=False, written_only=True):
            if request.commit_log_offset >= cut:
                dispatch(request)
                replayed += 1
    return replayed


def rebuild_topic_queue_table(consume_queues: Iterable[ConsumeQueue]) -> dict[str, dict[int, int]]:
    """topic -> queue id -> next queue offset, from the consume queues' max offsets."""
    table: dict[str, dict[int, int]] = {}
    for cq in consume_queues:
        table.setdefault(cq.topic, {})[cq.queue_id] = cq.max_offset
    return table
