"""``MessageStore``: the broker's message store (RocketMQ's DefaultMessageStore), composing the commit
log, the consume queues, flushing, recovery and retention.

Threading model. Everything that reads or changes store state runs on the event loop, synchronously:
an append packs the record into the mapped file, assigns its offsets and writes its consume-queue unit
in one call, with no lock and no await (:meth:`MessageStore.append`). Blocking work runs on four
single-thread executors, so each kind is serialised and none waits behind another:

* ``flush``: commit-log fdatasync (the group commit's critical path);
* ``io``: consume-queue flushes, the checkpoint, file deletion;
* ``alloc``: creating and warming the next commit-log file (which can take seconds for 1 GiB);
* ``cq-alloc``: creating consume-queue files (a new queue's first put waits for it, so it must not
  queue behind a flush or a warm-up).

Recovery runs once, before any of them is used, in a thread of its own.

Writes. Every put goes one way, RocketMQ's ``asyncPutMessage`` then ``handleDiskFlushAndHA``:
:meth:`MessageStore.put` (one message: sends, send-backs, scheduled re-deliveries) and
:meth:`MessageStore.put_batch` append and index, then wait for the disk (SYNC_FLUSH group commit) and, on a
SYNC_MASTER, a replica (a :class:`ReplicaWaiter` the broker injects) side by side, each under its own
timeout; a timeout comes back as a status (FLUSH_DISK_TIMEOUT, FLUSH_SLAVE_TIMEOUT, SLAVE_NOT_AVAILABLE),
never as an exception. When there is nothing to wait for the result is returned at once, with no task or
future (the broker's hot path); otherwise an awaitable of it (``put_message``/``put_messages`` await it).
``append``/``append_batch`` are the bare append the put path is built on (replication tests and tools use
them to write without waiting).

Delayed messages (a DELAY property, reference §8) are rewritten here as RocketMQ's CommitLog does: topic
SCHEDULE_TOPIC_XXXX, queue ``level - 1``, REAL_TOPIC/REAL_QID properties, and a consume-queue tag code
that is the delivery time, so a schedule service can read due messages in order.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import enum
import fcntl
import functools
import os
import shutil
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Protocol

from common.logs import get_logger
from common.message import MessageConst, get_property, join_properties, tags_code_of
from common.record import DispatchRequest, MessageRecord
from common.service import Service
from common.sysflag import MessageSysFlag
from common.topic import RMQ_SYS_SCHEDULE_TOPIC
from store.checkpoint import StoreCheckpoint
from store.commitlog import CommitLog
from store.config import BrokerRole, FlushDiskType, StoreConfig
from store.consume_queue import BLANK_UNIT_SIZE, CQ_UNIT, UNIT_SIZE, ConsumeQueue
from store.errors import StoreError, StoreNotRunningError
from store.flush import FlushConsumeQueueService, FlushRealTimeService, GroupCommitService, flush_commit_log
from store.mapped_file import MappedFile, MappedFileAllocator, file_name_for, fsync_dir, run_flush_plan
from store.message import MessageExtBatch, MessageExtBrokerInner
from store.recovery import apply_recovery, plan_recovery, rebuild_topic_queue_table
from store.results import (
    AppendMessageResult,
    AppendMessageStatus,
    GetMessageResult,
    GetMessageStatus,
    PutMessageResult,
    PutMessageStatus,
)
from store.retention import RetentionService

log = get_logger("store.message_store")

#: (topic, queue id, queue max offset after the new message, tag code, store timestamp)
ArrivalListener = Callable[[str, int, int, int, int], None]
#: the commit log's new max offset
GrowthListener = Callable[[int], None]
#: accepts a consume-queue tag code; None means accept everything
MessageFilter = Callable[[int], bool]
#: what :meth:`MessageStore.put` gives: the result, or an awaitable of it when the put has to wait
PutOutcome = PutMessageResult | Awaitable[PutMessageResult]


class ReplicaWaiter(Protocol):
    """What a SYNC_MASTER's put waits on next to the disk flush (``ha.HAService`` is one; the broker
    injects it with :meth:`MessageStore.set_replica_waiter`, so the store imports no replication)."""

    def has_room(self) -> bool:
        """False when the bound on puts waiting for a replica is reached (the put is refused)."""

    def wait_for_replica(self, end_offset: int) -> asyncio.Future[PutMessageStatus]:
        """Already running when returned; PUT_OK once a slave holds ``end_offset``, otherwise
        FLUSH_SLAVE_TIMEOUT or SLAVE_NOT_AVAILABLE. Never raises."""

_PUT_OK = PutMessageStatus.PUT_OK
_APPEND_OK = AppendMessageStatus.PUT_OK
_TXN_MASK = MessageSysFlag.TRANSACTION_MASK
_TXN_COMMIT = MessageSysFlag.TRANSACTION_COMMIT_TYPE
_DELAY_MARKER = MessageConst.PROPERTY_DELAY_TIME_LEVEL + "\x01"
_STATUS_OF_APPEND = {
    AppendMessageStatus.MESSAGE_SIZE_EXCEEDED: PutMessageStatus.MESSAGE_ILLEGAL,
    AppendMessageStatus.PROPERTIES_SIZE_EXCEEDED: PutMessageStatus.PROPERTIES_SIZE_EXCEEDED,
    AppendMessageStatus.UNKNOWN_ERROR: PutMessageStatus.CREATE_MAPEDFILE_FAILED,
    AppendMessageStatus.END_OF_FILE: PutMessageStatus.UNKNOWN_ERROR,
}
_MIN_FILTER_SCAN = 16_000
_WARM_AT_START = 32 << 20


class _State(enum.Enum):
    NEW = "NEW"
    RUNNING = "RUNNING"
    STOPPED = "STOPPED"


def _settle(result: PutMessageResult, flushed: PutMessageStatus, replicated: PutMessageStatus) -> PutMessageResult:
    """The put's status from its two waits: a failed replica wait wins over the flush's, as in RocketMQ."""
    if replicated is not _PUT_OK:
        result.status = replicated
    elif flushed is not _PUT_OK:
        result.status = flushed
    return result


async def _settle_later(result: PutMessageResult, flushed: asyncio.Future[PutMessageStatus] | None,
                        replicated: asyncio.Future[PutMessageStatus] | None) -> PutMessageResult:
    """:func:`_settle` once both waits have ended (they run side by side: both are registered already)."""
    flush_status = _PUT_OK if flushed is None else await flushed
    replica_status = _PUT_OK if replicated is None else await replicated
    return _settle(result, flush_status, replica_status)


def _total_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return 8 << 30


class MessageStore:
    """See the module docstring. A store is started once and shut down once."""

    def __init__(self, config: StoreConfig) -> None:
        self.config = config
        self._log = log.bind(store=config.store_path_root_dir)
        self._flush_executor = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="store-flush")
        self._io_executor = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="store-io")
        self._alloc_executor = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="store-alloc")
        self._cq_alloc_executor = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="store-cq-alloc")
        self._cl_allocator = MappedFileAllocator(self._alloc_executor)
        self._cq_allocator = MappedFileAllocator(self._cq_alloc_executor)
        self.commit_log = CommitLog(config, self._cl_allocator)
        self.checkpoint = StoreCheckpoint()
        self._checkpoint_path = os.path.join(config.store_path_root_dir, "checkpoint")
        self._abort_path = os.path.join(config.store_path_root_dir, "abort")
        self._lock_fd: int | None = None
        self._cq_table: dict[str, dict[int, ConsumeQueue]] = {}
        self._state = _State.NEW
        self._writable = False
        self._disk_full = False
        self._is_slave = config.broker_role is BrokerRole.SLAVE
        self._sync_flush = config.flush_disk_type is FlushDiskType.SYNC_FLUSH
        self._delay_levels = config.delay_levels_ms
        self._max_transfer_count = config.max_transfer_count_on_message_in_memory
        self._max_transfer_bytes = config.max_transfer_bytes_on_message_in_memory
        self._memory_for_hot_data = _total_memory() * config.access_message_in_memory_max_ratio // 100
        self._arrival_listeners: list[ArrivalListener] = []
        self._growth_listeners: list[GrowthListener] = []
        self._reput_offset = 0
        self._group_commit: GroupCommitService | None = None
        self._replica: ReplicaWaiter | None = None
        #: the flush and retention services, stopped with one call at shutdown
        self._services = Service(name="store")
        self._cq_flush: FlushConsumeQueueService | None = None
        self.retention: RetentionService | None = None
        #: what the last start-up recovery did (for logs and tests)
        self.recovery_summary: dict[str, object] = {}

    # =================================================================================== lifecycle

    async def start(self) -> None:
        """Lock the directory, recover, and start the flush and retention services."""
        if self._state is not _State.NEW:
            raise StoreError("a MessageStore is started once; create a new one")
        loop = asyncio.get_running_loop()
        self._state = _State.STOPPED  # until recovery succeeds; a failed store is not started again
        try:
            await loop.run_in_executor(None, self._open_and_recover)
        except BaseException:
            await loop.run_in_executor(None, self._close_files, False)
            raise
        cfg = self.config
        if self._sync_flush:
            self._group_commit = self._services.add_child(GroupCommitService(
                self.commit_log, self._flush_executor, self.checkpoint, timeout_ms=cfg.sync_flush_timeout_ms,
                max_waiters=cfg.max_sync_flush_waiters))
        else:
            self._services.add_child(FlushRealTimeService(
                self.commit_log, self._flush_executor, self.checkpoint, interval_ms=cfg.flush_interval_commit_log_ms,
                least_pages=cfg.flush_commit_log_least_pages, thorough_ms=cfg.flush_commit_log_thorough_interval_ms))
        self._cq_flush = self._services.add_child(FlushConsumeQueueService(
            self._all_consume_queues, self.commit_log, self._io_executor, self.checkpoint, self._checkpoint_path,
            interval_ms=cfg.flush_interval_consume_queue_ms, least_pages=cfg.flush_consume_queue_least_pages,
            thorough_ms=cfg.flush_consume_queue_thorough_interval_ms))
        self.retention = self._services.add_child(RetentionService(
            cfg, self.commit_log, self._all_consume_queues, self._io_executor, on_disk_full=self._on_disk_full))
        self._services.start()
        self._state = _State.RUNNING
        self._update_writable()
        self._log.info("store_started", flush=cfg.flush_disk_type.value, role=cfg.broker_role.value,
                       min_offset=self.min_phy_offset, max_offset=self.max_phy_offset,
                       queues=sum(len(q) for q in self._cq_table.values()))

    async def shutdown(self) -> None:
        """Stop accepting writes, flush everything, write the checkpoint, remove ``abort``, unlock."""
        if self._state is not _State.RUNNING:
            self._state = _State.STOPPED
            return
        self._state = _State.STOPPED
        self._update_writable()
        loop = asyncio.get_running_loop()
        await self._services.stop()
        try:
            await flush_commit_log(self.commit_log, self._flush_executor, self.checkpoint)
        except OSError as exc:
            self._log.error("final_commit_log_flush_failed", error=str(exc))
        if self._group_commit is not None:
            self._group_commit.release_all()
        clean = True
        try:
            if self._cq_flush is not None:
                await self._cq_flush.flush(0)
        except OSError as exc:
            clean = False
            self._log.error("final_consume_queue_flush_failed", error=str(exc))
        await loop.run_in_executor(self._io_executor, self._close_files, clean)
        for executor in (self._flush_executor, self._io_executor, self._alloc_executor, self._cq_alloc_executor):
            executor.shutdown(wait=False, cancel_futures=True)
        self._log.info("store_shut_down", max_offset=self.commit_log.max_offset)

    def _open_and_recover(self) -> None:
        """Blocking part of start(): lock, load, plan and apply recovery, prepare the first file."""
        cfg = self.config
        for path in (cfg.store_path_root_dir, cfg.commit_log_dir, cfg.consume_queue_dir, cfg.config_dir):
            os.makedirs(path, exist_ok=True)
        self._lock()
        abnormal = os.path.exists(self._abort_path)
        loaded = StoreCheckpoint.load(self._checkpoint_path)
        self.commit_log.queue.load()
        self._load_consume_queues()
        plan = plan_recovery(self.commit_log, loaded, abnormal=abnormal, check_crc=cfg.check_crc_on_recover)
        replayed = apply_recovery(plan, self.commit_log, list(self._all_consume_queues()), self._dispatch_request)
        self.commit_log.topic_queue_table = rebuild_topic_queue_table(self._all_consume_queues())
        for cq in self._all_consume_queues():
            cq.correct_min_offset(self.commit_log.min_offset)
            plan_files, target = cq.queue.flush_plan()
            run_flush_plan(plan_files)
            cq.queue.apply_flushed(plan_files, target)
        self._prepare_commit_log_file()
        max_offset = self.commit_log.max_offset
        self.checkpoint.physic_msg_timestamp = loaded.physic_msg_timestamp
        self.checkpoint.logics_msg_timestamp = loaded.logics_msg_timestamp
        self.checkpoint.physic_offset = self.checkpoint.logics_offset = max_offset
        self.checkpoint.has_offsets = True
        self.checkpoint.write(self._checkpoint_path)
        self._reput_offset = max_offset
        with open(self._abort_path, "wb") as f:
            os.fsync(f.fileno())
        fsync_dir(cfg.store_path_root_dir)
        self.recovery_summary = {
            "abnormal": abnormal, "scan_start": plan.scan_start, "replay_from": plan.replay_from,
            "truncate_at": plan.truncate_at, "stop_reason": plan.stop_reason, "replayed": replayed,
        }
        level = "warning" if plan.stop_reason else "info"
        getattr(self._log, level)("store recovered", **self.recovery_summary)

    def _lock(self) -> None:
        fd = os.open(os.path.join(self.config.store_path_root_dir, "lock"), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise StoreError(f"{self.config.store_path_root_dir} is in use by another store") from None
        self._lock_fd = fd

    def _load_consume_queues(self) -> None:
        root = self.config.consume_queue_dir
        for topic in sorted(os.listdir(root)):
            topic_dir = os.path.join(root, topic)
            if not os.path.isdir(topic_dir):
                continue
            for name in sorted(os.listdir(topic_dir)):
                if not name.isdigit():
                    continue
                cq = self._find_or_create_cq(topic, int(name))
                cq.load()
                cq.recover()

    def _prepare_commit_log_file(self) -> None:
        queue = self.commit_log.queue
        if not queue.files or queue.files[-1].is_full:
            queue.roll(queue.max_offset, request_next=False)
        last = queue.last
        if self.config.warm_mapped_file and last is not None:
            # The first stretch now, before any write (a cold page costs ~25x a warm one, and the first
            # touch of each 2 MiB region of a cold file stalled writes for 10-70 ms here); the rest in
            # the background before the next file, so the warm-up stays ahead of the writer.
            ahead = last.wrote_position + _WARM_AT_START
            last.warm(last.wrote_position, ahead)
            if ahead < last.file_size:
                self._cl_allocator.warm_later(last, ahead)
        queue.request_next()

    def _close_files(self, clean: bool) -> None:
        self._cl_allocator.close()
        self._cq_allocator.close()
        for mapped in self._all_mapped_files():
            mapped.close()
        if self.retention is not None:
            self.retention.close_deferred()
        if clean:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self._abort_path)
            fsync_dir(self.config.store_path_root_dir)
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def _all_mapped_files(self) -> Iterator[MappedFile]:
        yield from self.commit_log.queue.files
        for cq in self._all_consume_queues():
            yield from cq.queue.files

    def _all_consume_queues(self) -> Iterator[ConsumeQueue]:
        for queues in list(self._cq_table.values()):
            yield from list(queues.values())

    def _on_disk_full(self, full: bool) -> None:
        self._disk_full = full
        self._update_writable()

    def _update_writable(self) -> None:
        self._writable = self._state is _State.RUNNING and not self._is_slave and not self._disk_full

    @property
    def is_running(self) -> bool:
        """Between start() and shutdown()."""
        return self._state is _State.RUNNING

    @property
    def writable(self) -> bool:
        """True when puts are accepted (running, not a slave, disk not full)."""
        return self._writable

    # ====================================================================================== writes

    def _find_or_create_cq(self, topic: str, queue_id: int) -> ConsumeQueue:
        queues = self._cq_table.get(topic)
        if queues is None:
            queues = self._cq_table[topic] = {}
        cq = queues.get(queue_id)
        if cq is None:
            cq = queues[queue_id] = ConsumeQueue(topic, queue_id, self.config.consume_queue_dir,
                                                 self.config.mapped_file_size_consume_queue, self._cq_allocator,
                                                 self._discard_later)
        return cq

    def _discard_later(self, files: list[MappedFile]) -> None:
        if self.retention is not None:
            self.retention.discard(files)
        else:  # during recovery, in its own thread
            for mapped in files:
                mapped.destroy()

    def _schedule(self, msg: MessageExtBrokerInner) -> MessageExtBrokerInner:
        """Rewrite a delayed message to SCHEDULE_TOPIC_XXXX (see module docstring)."""
        if msg.topic == RMQ_SYS_SCHEDULE_TOPIC:
            return msg
        level_text = get_property(msg.properties, MessageConst.PROPERTY_DELAY_TIME_LEVEL)
        if not level_text or not level_text.isdigit() or int(level_text) <= 0:
            return msg
        if msg.sys_flag & _TXN_MASK not in (0, _TXN_COMMIT):
            return msg
        level = min(int(level_text), len(self._delay_levels))
        props = msg.properties
        if int(level_text) != level:
            props = props.replace(f"{_DELAY_MARKER}{level_text}", f"{_DELAY_MARKER}{level}", 1)
        props = join_properties(props, f"{MessageConst.PROPERTY_REAL_TOPIC}\x01{msg.topic}\x02"
                                       f"{MessageConst.PROPERTY_REAL_QUEUE_ID}\x01{msg.queue_id}")
        tags = msg.tags_code if msg.tags_code is not None else tags_code_of(msg.properties)
        return MessageExtBrokerInner(
            topic=RMQ_SYS_SCHEDULE_TOPIC, body=msg.body, queue_id=level - 1, flag=msg.flag, properties=props,
            tags_code=tags, sys_flag=msg.sys_flag, born_timestamp=msg.born_timestamp, born_host=msg.born_host,
            store_host=msg.store_host, reconsume_times=msg.reconsume_times,
            prepared_transaction_offset=msg.prepared_transaction_offset, wait_store_msg_ok=msg.wait_store_msg_ok)

    def _not_writable(self) -> PutMessageResult:
        if self._state is not _State.RUNNING:
            self._log.warning("put refused: store is not running")
        return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE)

    def _next_queue_offset(self, topic: str, queue_id: int) -> int:
        queues = self.commit_log.topic_queue_table.get(topic)
        return queues.get(queue_id, 0) if queues else 0

    def _ready_cq(self, topic: str, queue_id: int) -> ConsumeQueue:
        """The consume queue with a file for its next unit, created inline if needed (raises OSError)."""
        queues = self._cq_table.get(topic)
        cq = queues.get(queue_id) if queues is not None else None
        if cq is None:
            cq = self._find_or_create_cq(topic, queue_id)
        tail = cq.tail
        if tail is None or tail.wrote_position >= cq.file_size:
            cq.prepare(self._next_queue_offset(topic, queue_id))
        return cq

    def append(self, msg: MessageExtBrokerInner) -> PutMessageResult:
        """Append and index one message now, with no flush or replica wait (puts go through :meth:`put`).
        Call :meth:`prepare_queue` first for a queue that is not :meth:`queue_ready`, or this creates its
        consume-queue file inline (~0.1 ms of blocking I/O, once per file)."""
        result = self._append(msg, True)
        assert result is not None
        return result

    def _append(self, msg: MessageExtBrokerInner, inline_file: bool) -> PutMessageResult | None:
        """:meth:`append`; with ``inline_file`` False, None instead of creating a consume-queue file."""
        if not self._writable:
            return self._not_writable()
        props = msg.properties
        if _DELAY_MARKER in props and msg.topic != RMQ_SYS_SCHEDULE_TOPIC:
            msg = self._schedule(msg)
            props = msg.properties
        topic = msg.topic
        queue_id = msg.queue_id
        txn = msg.sys_flag & _TXN_MASK
        cq: ConsumeQueue | None = None
        if txn == 0 or txn == _TXN_COMMIT:
            queues = self._cq_table.get(topic)
            cq = queues.get(queue_id) if queues is not None else None
            tail = cq.tail if cq is not None else None
            if cq is None or tail is None or tail.wrote_position >= cq.file_size:
                if not inline_file:
                    return None
                try:
                    cq = self._ready_cq(topic, queue_id)
                except OSError as exc:
                    self._log.error("consume-queue file creation failed", topic=topic, error=str(exc))
                    return PutMessageResult(PutMessageStatus.CREATE_MAPEDFILE_FAILED)
        result = self.commit_log.append_message(msg)
        if result.status is not _APPEND_OK:
            return PutMessageResult(_STATUS_OF_APPEND[result.status], result)
        if cq is not None:
            tags = msg.tags_code
            if tags is None:
                tags = tags_code_of(props) if props else 0
            if topic == RMQ_SYS_SCHEDULE_TOPIC:
                tags = self._deliver_time(queue_id + 1, result.store_timestamp)
            try:
                cq.put(result.logics_offset, result.wrote_offset, result.wrote_bytes, tags)
            except OSError as exc:
                self._unindexed(cq, result.logics_offset, exc)
            if self._arrival_listeners:
                self._notify_arrival(topic, queue_id, result.logics_offset + 1, tags, result.store_timestamp)
        if self._growth_listeners:
            self._notify_growth(result.wrote_offset + result.wrote_bytes)
        return PutMessageResult(_PUT_OK, result)

    def append_batch(self, batch: MessageExtBatch) -> PutMessageResult:
        """Append and index a batch now, with no flush or replica wait (puts go through :meth:`put_batch`).
        Delayed, retry-topic and transactional batches are MESSAGE_ILLEGAL (reference §4.6)."""
        if not self._writable:
            return self._not_writable()
        if (batch.topic.startswith("%RETRY%") or _DELAY_MARKER in batch.properties
                or batch.sys_flag & _TXN_MASK not in (0, _TXN_COMMIT)):
            return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL)
        try:
            cq = self._ready_cq(batch.topic, batch.queue_id)
        except OSError as exc:
            self._log.error("consume-queue file creation failed", topic=batch.topic, error=str(exc))
            return PutMessageResult(PutMessageStatus.CREATE_MAPEDFILE_FAILED)
        result, dispatch = self.commit_log.append_batch(batch)
        if result.status is not _APPEND_OK:
            return PutMessageResult(_STATUS_OF_APPEND[result.status], result)
        try:
            cq.put_many(result.logics_offset, dispatch)
        except OSError as exc:
            self._unindexed(cq, result.logics_offset, exc)
        if self._arrival_listeners:
            index = result.logics_offset
            for _phys, _size, tags in dispatch:
                index += 1
                self._notify_arrival(batch.topic, batch.queue_id, index, tags, result.store_timestamp)
        if self._growth_listeners:
            self._notify_growth(result.end_offset)
        return PutMessageResult(_PUT_OK, result)

    def _unindexed(self, cq: ConsumeQueue, index: int, exc: OSError) -> None:
        # Only a consume-queue roll-over inside a batch can get here (the first file of every put is made
        # before appending). The record is in the commit log; the next start re-indexes it.
        self._log.error("consume-queue write failed; the queue is repaired at the next start",
                        topic=cq.topic, queue_id=cq.queue_id, offset=index, error=str(exc))

    def _deliver_time(self, level: int, store_timestamp: int) -> int:
        levels = self._delay_levels
        return store_timestamp + levels[min(max(level, 1), len(levels)) - 1]

    def wait_for_flush(self, end_offset: int) -> asyncio.Future[PutMessageStatus]:
        """A future of PUT_OK once ``end_offset`` is on disk (at once for ASYNC_FLUSH), or
        FLUSH_DISK_TIMEOUT after ``sync_flush_timeout``."""
        if self._group_commit is not None:
            return self._group_commit.wait_for(end_offset)
        future: asyncio.Future[PutMessageStatus] = asyncio.get_running_loop().create_future()
        future.set_result(_PUT_OK)
        return future

    def needs_flush_wait(self, wait_store_msg_ok: bool = True) -> bool:
        """True when a put must wait for the disk (SYNC_FLUSH and the producer's WAIT is not false)."""
        return self._sync_flush and wait_store_msg_ok

    def queue_ready(self, topic: str, queue_id: int) -> bool:
        """True when :meth:`append` to this queue will not have to create a consume-queue file."""
        queues = self._cq_table.get(topic)
        cq = queues.get(queue_id) if queues is not None else None
        tail = cq.tail if cq is not None else None
        return tail is not None and cq is not None and tail.wrote_position < cq.file_size

    async def prepare_queue(self, topic: str, queue_id: int) -> bool:
        """Create the queue's next consume-queue file in a thread unless it is ready (see
        :meth:`queue_ready`); False when it cannot be created (answer CREATE_MAPEDFILE_FAILED)."""
        return self.queue_ready(topic, queue_id) or await self._ensure_cq_file(topic, queue_id)

    async def _ensure_cq_file(self, topic: str, queue_id: int) -> bool:
        """Create a queue's next consume-queue file in a thread if it has none with room."""
        cq = self._find_or_create_cq(topic, queue_id)
        future = cq.request_file_for(self._next_queue_offset(topic, queue_id))
        if future is None:
            return True
        try:
            await asyncio.wrap_future(future)
            if self._cq_table.get(topic, {}).get(queue_id) is cq:  # not deleted meanwhile
                cq.prepare(self._next_queue_offset(topic, queue_id))  # takes the file just made
        except OSError as exc:
            self._log.error("consume-queue file creation failed", topic=topic, error=str(exc))
            return False
        return True

    def set_replica_waiter(self, waiter: ReplicaWaiter | None) -> None:
        """On a SYNC_MASTER, every put that waits (WAIT not false) also waits for ``waiter`` (the broker
        injects ``ha.HAService``; the store knows no replication)."""
        self._replica = waiter

    def put(self, msg: MessageExtBrokerInner) -> PutOutcome:
        """The one put path of a single message, for sends, send-backs and scheduled re-deliveries alike:
        append and index it, then wait for the disk and a replica (:meth:`_flush_and_replica`).

        Returns the result itself when there is nothing to wait for (ASYNC_FLUSH and no replica waiter,
        or the producer's WAIT=false; and the queue's consume-queue file has room): the broker answers
        such a send inside the read callback, with no task and no future. Otherwise an awaitable of the
        result; a queue's new consume-queue file is then made in a thread first, never on the loop. A
        put that would wait when the bound on waiting puts is reached is OS_PAGECACHE_BUSY (nothing
        stored)."""
        wait = msg.wait_store_msg_ok and (self._group_commit is not None or self._replica is not None)
        if wait and not self._room_to_wait():
            return PutMessageResult(PutMessageStatus.OS_PAGECACHE_BUSY)
        result = self._append(msg, False)
        if result is None:
            target = self._schedule(msg) if _DELAY_MARKER in msg.properties else msg
            return self._put_after_cq_file(target.topic, target.queue_id, functools.partial(self.append, msg), wait)
        return self._flush_and_replica(result) if wait else result

    def put_batch(self, batch: MessageExtBatch) -> PutOutcome:
        """:meth:`put` for a batch (see :meth:`append_batch` for what a batch may not be)."""
        wait = batch.wait_store_msg_ok and (self._group_commit is not None or self._replica is not None)
        if self._writable and not self.queue_ready(batch.topic, batch.queue_id):
            return self._put_after_cq_file(batch.topic, batch.queue_id, functools.partial(self.append_batch, batch),
                                           wait)
        if wait and not self._room_to_wait():
            return PutMessageResult(PutMessageStatus.OS_PAGECACHE_BUSY)
        result = self.append_batch(batch)
        return self._flush_and_replica(result) if wait else result

    async def put_message(self, msg: MessageExtBrokerInner) -> PutMessageResult:
        """:meth:`put`, awaited: for callers that are coroutines anyway."""
        outcome = self.put(msg)
        return outcome if isinstance(outcome, PutMessageResult) else await outcome

    async def put_messages(self, batch: MessageExtBatch) -> PutMessageResult:
        """:meth:`put_batch`, awaited."""
        outcome = self.put_batch(batch)
        return outcome if isinstance(outcome, PutMessageResult) else await outcome

    def has_flush_capacity(self) -> bool:
        """False when the bound on waiting SYNC_FLUSH writers is reached."""
        return self._group_commit is None or self._group_commit.has_room()

    def _room_to_wait(self) -> bool:
        replica = self._replica
        return self.has_flush_capacity() and (replica is None or replica.has_room())

    async def _put_after_cq_file(self, topic: str, queue_id: int, append: Callable[[], PutMessageResult],
                                 wait: bool) -> PutMessageResult:
        """Make the queue's consume-queue file in a thread, then append and wait as :meth:`put` does."""
        if not await self._ensure_cq_file(topic, queue_id):
            return PutMessageResult(PutMessageStatus.CREATE_MAPEDFILE_FAILED)
        if wait and not self._room_to_wait():
            return PutMessageResult(PutMessageStatus.OS_PAGECACHE_BUSY)
        result = append()
        if not wait:
            return result
        outcome = self._flush_and_replica(result)
        return outcome if isinstance(outcome, PutMessageResult) else await outcome

    def _flush_and_replica(self, result: PutMessageResult) -> PutOutcome:
        """RocketMQ's handleDiskFlushAndHA: wait for the disk (SYNC_FLUSH group commit) and a replica (a
        SYNC_MASTER's waiter) side by side, each under its own timeout, which comes back as a status
        (FLUSH_DISK_TIMEOUT, FLUSH_SLAVE_TIMEOUT, SLAVE_NOT_AVAILABLE), never as an exception. The result
        itself when both are settled already (e.g. no slave attached under ASYNC_FLUSH)."""
        append = result.append_result
        if result.status is not _PUT_OK or append is None:
            return result
        end = append.end_offset
        flushed = self._group_commit.wait_for(end) if self._group_commit is not None else None
        replicated = self._replica.wait_for_replica(end) if self._replica is not None else None
        if (flushed is None or flushed.done()) and (replicated is None or replicated.done()):
            return _settle(result, _PUT_OK if flushed is None else flushed.result(),
                           _PUT_OK if replicated is None else replicated.result())
        return _settle_later(result, flushed, replicated)

    # ------------------------------------------------------------------------------------- slave

    def append_to_commit_log(self, offset: int, data: bytes | memoryview, *, dispatch: bool = True) -> bool:
        """Slave side of replication: append bytes received from the master at ``offset`` (which must
        be this log's max offset) and dispatch every record they complete. False when the offset does
        not match or the bytes are not valid records (then nothing past the last valid record is
        kept); the caller reconnects and reports its real max offset. Commit-log files are created
        ahead in the background; the first consume-queue file of a queue the slave has never seen is
        created inline (a one-off ~0.1 ms).

        With ``dispatch`` False the bytes are only appended: call :meth:`dispatch_replicated` soon after
        (the slave acknowledges a transfer between the two, as RocketMQ's slave does before its reput)."""
        if self._state is not _State.RUNNING:
            return False
        try:
            if not self.commit_log.append_raw(offset, data):
                self._log.warning("replicated_data_misplaced", offset=offset,
                                  max_offset=self.commit_log.max_offset)
                return False
        except OSError as exc:
            self._log.error("commit_log_file_creation_failed", error=str(exc))
            return False
        return self.dispatch_replicated() if dispatch else True

    def dispatch_replicated(self) -> bool:
        """Check and index the records appended by :meth:`append_to_commit_log` since the last dispatch;
        False when they are not valid records (nothing past the last valid one is kept)."""
        if self._state is not _State.RUNNING:
            return False
        ok = self._reput()
        if self._growth_listeners:
            self._notify_growth(self.commit_log.max_offset)
        return ok

    def reset_commit_log(self, offset: int) -> bool:
        """Slave side: drop the whole commit log and start an empty one whose first file begins at
        ``offset``, a file boundary at or past the current max offset. Replication uses it when the
        master sends its last file to a slave with an empty log, or its oldest file to a slave whose next
        bytes it has already deleted. Consume queues keep their units; those of dropped records read as
        removed (their min offsets move past them) and new records continue at their own queue offsets.
        False (and nothing changes) for any other offset. The old files are deleted in a thread; the
        new first file is taken from the allocator or, rarely, created here."""
        queue = self.commit_log.queue
        if self._state is not _State.RUNNING or offset % queue.mapped_file_size or offset < queue.max_offset:
            return False
        if offset == queue.max_offset and queue.files and queue.files[0].file_from_offset == offset:
            return True  # already an empty log starting there
        target = os.path.join(queue.store_dir, file_name_for(offset))
        self._cl_allocator.discard_pending(queue.store_dir, keep=target)
        removed, queue.files = queue.files, []
        try:
            queue.roll(offset)
        except OSError as exc:
            queue.files = removed
            self._log.error("commit_log_file_creation_failed", error=str(exc))
            return False
        self._discard_later(removed)
        self._reput_offset = offset
        for cq in self._all_consume_queues():
            cq.correct_min_offset(offset)
        self._log.warning("commit_log_reset", offset=offset, dropped_files=len(removed))
        if self._growth_listeners:
            self._notify_growth(offset)
        return True

    def _reput(self) -> bool:
        """Index the records replicated since the last call. Their body CRCs are not checked (as in
        RocketMQ's reput): the bytes are the master's own records, over TCP; sizes, magic codes and
        offsets are, so garbage still ends the scan and is cut."""
        scanner = self.commit_log.scan(self._reput_offset, check_crc=False, written_only=True)
        dispatch = self._dispatch_request
        notify = self._notify_arrival if self._arrival_listeners else None
        for request in scanner:
            if dispatch(request) and notify is not None:
                notify(request.topic, request.queue_id, request.consume_queue_offset + 1, request.tags_code,
                       request.store_timestamp)
        self._reput_offset = scanner.end_offset
        if scanner.error is not None:
            self._log.error("replicated_data_invalid_tail_cut",
                            offset=scanner.end_offset, reason=scanner.error.reason)
            self._discard_later(self.commit_log.truncate_written_tail(scanner.end_offset))
            return False
        return True

    def _dispatch_request(self, request: DispatchRequest) -> bool:
        """Index a record found by recovery or received by a slave (idempotent); False for the halves of a
        transaction that get no consume-queue entry."""
        topic, queue_id, phys, size, tags, stamp, queue_offset, sys_flag, delay_level = request
        txn = sys_flag & _TXN_MASK
        if txn and txn != _TXN_COMMIT:
            return False
        if topic == RMQ_SYS_SCHEDULE_TOPIC:
            tags = self._deliver_time(delay_level or queue_id + 1, stamp)
        queues = self._cq_table.get(topic)
        cq = queues.get(queue_id) if queues is not None else None
        if cq is None:
            cq = self._find_or_create_cq(topic, queue_id)
        cq.put(queue_offset, phys, size, tags)
        offsets = self.commit_log.topic_queue_table.get(topic)
        if offsets is None:
            offsets = self.commit_log.topic_queue_table[topic] = {}
        if offsets.get(queue_id, 0) <= queue_offset:
            offsets[queue_id] = queue_offset + 1
        return True

    # ============================================================================ listener hooks

    def add_arrival_listener(self, listener: ArrivalListener) -> None:
        """Call ``listener(topic, queue_id, max_offset, tags_code, store_timestamp)`` after each message
        is indexed (long polling). It runs inside the put: keep it cheap and non-blocking."""
        self._arrival_listeners.append(listener)

    def add_commitlog_growth_listener(self, listener: GrowthListener) -> None:
        """Call ``listener(max_offset)`` after each append (replication). Keep it cheap."""
        self._growth_listeners.append(listener)

    def _notify_arrival(self, topic: str, queue_id: int, max_offset: int, tags: int, stamp: int) -> None:
        for listener in self._arrival_listeners:
            try:
                listener(topic, queue_id, max_offset, tags, stamp)
            except Exception:
                self._log.exception("arrival_listener_failed")

    def _notify_growth(self, max_offset: int) -> None:
        for listener in self._growth_listeners:
            try:
                listener(max_offset)
            except Exception:
                self._log.exception("growth_listener_failed")

    # ======================================================================================= reads

    def _check_running(self) -> None:
        if self._state is not _State.RUNNING:
            raise StoreNotRunningError("the message store is not running")

    def _correct(self, old: int, new: int) -> int:
        """RocketMQ's nextOffsetCorrection: a slave never moves a consumer's offset."""
        return old if self._is_slave else new

    def find_consume_queue(self, topic: str, queue_id: int) -> ConsumeQueue | None:
        """The consume queue of a topic queue, if it has ever had a message."""
        queues = self._cq_table.get(topic)
        return queues.get(queue_id) if queues else None

    def get_messages(self, group: str, topic: str, queue_id: int, offset: int, max_count: int,
                     max_bytes: int | None = None, message_filter: MessageFilter | None = None) -> GetMessageResult:
        """Read up to ``max_count`` messages (capped at ``max_transfer_count_on_message_in_memory``) and
        ``max_bytes`` (capped at ``max_transfer_bytes_on_message_in_memory``; at least one message is
        returned whatever its size) from queue offset ``offset``. ``message_filter`` sees each tag code.
        ``group`` is accepted for the broker's bookkeeping and not used by the store."""
        del group
        self._check_running()
        cq = self.find_consume_queue(topic, queue_id)
        if cq is None:
            status = GetMessageStatus.NO_MATCHED_LOGIC_QUEUE if queue_id < 0 else GetMessageStatus.NO_MESSAGE_IN_QUEUE
            return GetMessageResult(status, self._correct(offset, 0), 0, 0)
        min_offset, max_offset = cq.min_offset, cq.max_offset
        if max_offset == 0:
            return GetMessageResult(GetMessageStatus.NO_MESSAGE_IN_QUEUE, self._correct(offset, 0), min_offset,
                                    max_offset)
        if offset < min_offset:
            return GetMessageResult(GetMessageStatus.OFFSET_TOO_SMALL, self._correct(offset, min_offset),
                                    min_offset, max_offset)
        if offset == max_offset:
            return GetMessageResult(GetMessageStatus.OFFSET_OVERFLOW_ONE, offset, min_offset, max_offset)
        if offset > max_offset:
            return GetMessageResult(GetMessageStatus.OFFSET_OVERFLOW_BADLY, self._correct(offset, max_offset),
                                    min_offset, max_offset)
        return self._read_queue(cq, offset, min_offset, max_offset, max_count, max_bytes, message_filter)

    def _read_queue(self, cq: ConsumeQueue, offset: int, min_offset: int, max_offset: int, max_count: int,
                    max_bytes: int | None, message_filter: MessageFilter | None) -> GetMessageResult:
        """Scan units from ``offset`` within one consume-queue file, as RocketMQ does, so the work of one
        pull is bounded (at most ``max(16000, 20 * max_count)`` units, for filters that reject a lot)."""
        count_limit = max(1, min(max_count, self._max_transfer_count))
        bytes_limit = self._max_transfer_bytes if max_bytes is None else min(max_bytes, self._max_transfer_bytes)
        result = GetMessageResult(GetMessageStatus.NO_MATCHED_MESSAGE, offset, min_offset, max_offset)
        units = cq.get_units(offset, min(max_offset - offset, max(_MIN_FILTER_SCAN, max_count * 20)))
        if units is None:
            result.status = GetMessageStatus.OFFSET_FOUND_NULL
            result.next_begin_offset = self._correct(offset, self._next_cq_file_index(cq, offset))
            return result
        buffers, queue_offsets, tags_codes = result.message_buffers, result.message_queue_offsets, result.tags_codes
        get_message = self.commit_log.get_message
        cl_min = self.commit_log.min_offset
        index = offset
        total = 0
        removed = False
        last_phys = -1
        for phys, size, tags in CQ_UNIT.iter_unpack(units):
            if size == BLANK_UNIT_SIZE or phys < cl_min:
                removed = removed or size != BLANK_UNIT_SIZE
                index += 1
                continue
            if buffers and total + size > bytes_limit:
                break
            if message_filter is not None and not message_filter(tags):
                index += 1
                continue
            view = get_message(phys, size)
            if view is None:
                removed = True
                index += 1
                continue
            buffers.append(view)
            queue_offsets.append(index)
            tags_codes.append(tags)
            total += size
            last_phys = phys
            index += 1
            if len(buffers) >= count_limit:
                break
        if buffers:
            result.status = GetMessageStatus.FOUND
            result.suggest_pulling_from_slave = self.commit_log.max_offset - last_phys > self._memory_for_hot_data
        elif removed:
            result.status = GetMessageStatus.MESSAGE_WAS_REMOVING
        result.next_begin_offset = index
        result.buffer_total_size = total
        return result

    def _next_cq_file_index(self, cq: ConsumeQueue, index: int) -> int:
        per_file = cq.file_size // UNIT_SIZE
        return index + per_file - index % per_file

    def get_max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        """Next queue offset to be written (0 for an unknown queue)."""
        cq = self.find_consume_queue(topic, queue_id)
        return cq.max_offset if cq else 0

    def get_min_offset_in_queue(self, topic: str, queue_id: int) -> int:
        """First readable queue offset (0 for an unknown queue)."""
        cq = self.find_consume_queue(topic, queue_id)
        return cq.min_offset if cq else 0

    def get_offset_in_queue_by_time(self, topic: str, queue_id: int, timestamp: int) -> int:
        """First queue offset stored at or after ``timestamp`` ms (see ConsumeQueue)."""
        cq = self.find_consume_queue(topic, queue_id)
        return cq.get_offset_in_queue_by_time(timestamp, self.commit_log.pickup_store_timestamp) if cq else 0

    def get_earliest_message_time(self, topic: str, queue_id: int) -> int:
        """Store time of the oldest readable message of the queue; -1 if none."""
        cq = self.find_consume_queue(topic, queue_id)
        return cq.get_earliest_message_time(self.commit_log.pickup_store_timestamp) if cq else -1

    def get_message_store_timestamp(self, topic: str, queue_id: int, offset: int) -> int:
        """Store time of the message at queue offset ``offset``; -1 if none."""
        cq = self.find_consume_queue(topic, queue_id)
        unit = cq.get_unit(offset) if cq and cq.min_offset <= offset < cq.max_offset else None
        return -1 if unit is None else self.commit_log.pickup_store_timestamp(unit[0], unit[1])

    def look_message_by_offset(self, phys_offset: int, size: int | None = None) -> MessageRecord | None:
        """Decode the record at a commit-log offset (e.g. from a message id); None if there is none."""
        return self.commit_log.look_message(phys_offset, size)

    def get_commit_log_data(self, offset: int, max_bytes: int | None = None) -> memoryview | None:
        """Replication read: written bytes from ``offset`` to the end of its file (at most ``max_bytes``);
        None when ``offset`` is not in the log (deleted, or not yet written)."""
        return self.commit_log.get_data(offset, max_bytes)

    @property
    def max_phy_offset(self) -> int:
        """Commit-log offset just past the last record."""
        return self.commit_log.max_offset

    @property
    def min_phy_offset(self) -> int:
        """Oldest commit-log offset still on disk."""
        return self.commit_log.min_offset

    @property
    def flushed_phy_offset(self) -> int:
        """Commit-log offset up to which data is on disk."""
        return self.commit_log.flushed_offset

    def topics(self) -> dict[str, list[int]]:
        """Topics with consume queues and their queue ids."""
        return {topic: sorted(queues) for topic, queues in self._cq_table.items()}

    # ====================================================================================== admin

    async def delete_topic(self, topic: str) -> bool:
        """Remove a topic's consume queues (its records stay in the commit log until retention)."""
        queues = self._cq_table.pop(topic, None)
        self.commit_log.topic_queue_table.pop(topic, None)
        if not queues:
            return False
        files = [m for cq in queues.values() for m in cq.queue.files]
        path = os.path.join(self.config.consume_queue_dir, topic)
        self._cq_allocator.discard_pending(path)

        def remove() -> list[MappedFile]:
            still_mapped = [m for m in files if not m.destroy()]
            shutil.rmtree(path, ignore_errors=True)
            return still_mapped

        unclosed = await asyncio.get_running_loop().run_in_executor(self._io_executor, remove)
        if self.retention is not None:
            self.retention.keep_unclosed(unclosed)
        self._log.info("topic_deleted", topic=topic, queues=len(queues))
        return True

    def request_delete_expired_files(self) -> None:
        """Let retention delete expired files on its next runs regardless of ``delete_when``."""
        if self.retention is not None:
            self.retention.request_manual_delete()

    def runtime_info(self) -> dict[str, object]:
        """Offsets and counters for admin tools."""
        return {
            "commitLogMinOffset": self.min_phy_offset,
            "commitLogMaxOffset": self.max_phy_offset,
            "commitLogFlushedOffset": self.flushed_phy_offset,
            "commitLogFiles": len(self.commit_log.queue.files),
            "consumeQueues": sum(len(q) for q in self._cq_table.values()),
            "syncFlushWaiters": self._group_commit.pending if self._group_commit else 0,
            "writable": self._writable,
            "diskFull": self._disk_full,
            "now": int(time.time() * 1000),
        }


__all__ = ["AppendMessageResult", "ArrivalListener", "GrowthListener", "MessageFilter", "MessageStore", "PutOutcome",
           "ReplicaWaiter"]
