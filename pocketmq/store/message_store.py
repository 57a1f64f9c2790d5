"""``MessageStore``: the broker's message store (RocketMQ's DefaultMessageStore), the facade every other package
uses. It owns the lifecycle (lock, recovery, services, shutdown) and composes focused collaborators:

* :class:`~pocketmq.store.queue_table.ConsumeQueueTable` — the consume queues, and indexing a record found by
  recovery or received by a slave;
* :class:`~pocketmq.store.put_path.PutPath` — every write: append and index, then wait for flush and replica
  (RocketMQ's ``handleDiskFlushAndHA``), with the delay rewrite of :mod:`pocketmq.store.delay`;
* :class:`~pocketmq.store.reput.Reput` — a slave's append of the master's bytes and their dispatch;
* :class:`~pocketmq.store.reader.MessageReader` — pulls and queue-offset queries;
* :class:`~pocketmq.store.listeners.StoreListeners` — arrival (long polling) and growth (replication) listeners;
* the flush and retention services (:mod:`pocketmq.store.flush`, :mod:`pocketmq.store.retention`), children of one
  :class:`~pocketmq.common.service.Service`.

Threading model. Everything that reads or changes store state runs on the event loop, synchronously: an
append packs the record into the mapped file, assigns its offsets and writes its consume-queue unit in one
call, with no lock and no await. Blocking work runs on four single-thread executors, so each kind is
serialised and none waits behind another:

* ``flush``: commit-log fdatasync (the group commit's critical path);
* ``io``: consume-queue flushes, the checkpoint, file deletion;
* ``alloc``: creating the next commit-log file (sparse) and reserving and warming the commit log's window
  ahead of the writer (``reserveWindowCommitLog``);
* ``cq-alloc``: creating consume-queue files and reserving their windows (a new queue's first put waits
  for it, so it must not queue behind a flush or a warm-up).

Disk. Files are sparse; what a store takes on disk is its data plus the reserved windows (see
:mod:`pocketmq.store.mapped_file`). When a reservation or a file creation meets a full disk (ENOSPC), or the disk
is above ``diskSpaceWarningLevelRatio`` (:mod:`pocketmq.store.retention`), the store stops taking puts
(SERVICE_NOT_AVAILABLE, :attr:`MessageStore.not_writable_reason` says why) and keeps serving reads; every
retention run re-checks, and puts are taken again once the reservation succeeds (:mod:`pocketmq.store.disk_guard`).

Recovery runs once, before any of them is used, in a thread of its own.

This module is longer than 600 lines: it is the store's one facade, every operation other packages call is here,
each a few lines delegating to the collaborators above.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import enum
import fcntl
import os
import shutil
import time
from collections.abc import Iterable, Iterator

from pocketmq.common.logs import get_logger
from pocketmq.common.record import MessageRecord
from pocketmq.common.service import Service, periodic
from pocketmq.store.checkpoint import StoreCheckpoint
from pocketmq.store.commitlog import CommitLog
from pocketmq.store.config import BrokerRole, FlushDiskType, StoreConfig
from pocketmq.store.consume_queue import ConsumeQueue
from pocketmq.store.disk_guard import DiskGuard
from pocketmq.store.errors import StoreError, StoreNotRunningError
from pocketmq.store.flush import FlushConsumeQueueService, FlushRealTimeService, GroupCommitService, flush_commit_log
from pocketmq.store.index import IndexService, QueryResult
from pocketmq.store.listeners import ArrivalListener, GrowthListener, StoreListeners
from pocketmq.store.mapped_file import MappedFile, MappedFileAllocator, fsync_dir, is_no_space, run_flush_plan
from pocketmq.store.message import MessageExtBatch, MessageExtBrokerInner
from pocketmq.store.put_path import PutOutcome, PutPath, ReplicaWaiter
from pocketmq.store.queue_table import RELEASE_IDLE_S, ConsumeQueueTable
from pocketmq.store.reader import MessageFilter, MessageReader, RecordFilter
from pocketmq.store.recovery import apply_recovery, plan_recovery, rebuild_topic_queue_table
from pocketmq.store.reput import Reput, make_cut_durable
from pocketmq.store.results import GetMessageResult, PutMessageResult, PutMessageStatus
from pocketmq.store.retention import DiskState, RetentionService, disk_state

log = get_logger("pocketmq.store.message_store")


class _State(enum.Enum):
    NEW = "NEW"
    RUNNING = "RUNNING"
    STOPPED = "STOPPED"


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
        self._guard = DiskGuard(self.commit_log, config.commit_log_dir, config.disk_space_warning_level_ratio,
                                self._log, self._update_writable)
        self._cl_allocator.on_no_space = self._cq_allocator.on_no_space = self._guard.no_space_seen
        self.checkpoint = StoreCheckpoint()
        self._checkpoint_path = os.path.join(config.store_path_root_dir, "checkpoint")
        self._abort_path = os.path.join(config.store_path_root_dir, "abort")
        self._lock_fd: int | None = None
        self._state = _State.NEW
        self._is_slave = config.broker_role is BrokerRole.SLAVE
        self._sync_flush = config.flush_disk_type is FlushDiskType.SYNC_FLUSH
        self._queues = ConsumeQueueTable(config, self.commit_log, self._cq_allocator, self._discard_later,
                                         self._io_executor)
        self._listeners = StoreListeners(self._log)
        self._put = PutPath(config, self.commit_log, self._queues, self._listeners, lambda: self.is_running,
                            self._log, self._guard.no_space_seen)
        self._reput = Reput(self.commit_log, self._queues, self._listeners, self._cl_allocator, self._discard_later,
                            self._log)
        self._reader = MessageReader(config, self.commit_log, self._queues)
        #: the message index (None with ``messageIndexEnable=false``)
        self.index = (IndexService(config, self.commit_log, self.checkpoint, self._io_executor, self._log)
                      if config.message_index_enable else None)
        self._group_commit: GroupCommitService | None = None
        #: the flush and retention services, stopped with one call at shutdown
        self._services = Service(name="store")
        self._cq_flush: FlushConsumeQueueService | None = None
        self.retention: RetentionService | None = None
        #: what the last start-up recovery did (for logs and tests)
        self.recovery_summary: dict[str, object] = {}
        #: after an abnormal start, the log's max offset right after recovery (see ha.connection); else None
        self.recovered_max: int | None = None
        self._cut: asyncio.Future[list[MappedFile]] | None = None  # a slave's truncation being made durable

    # =================================================================================== lifecycle

    async def start(self) -> None:
        """Lock the directory, recover, and start the flush and retention services."""
        if self._state is not _State.NEW:
            raise StoreError("a MessageStore is started once; create a new one")
        loop = asyncio.get_running_loop()
        self._guard.attach(loop)
        self._state = _State.STOPPED  # until recovery succeeds; a failed store is not started again
        try:
            await loop.run_in_executor(None, self._open_and_recover)
        except BaseException:
            await loop.run_in_executor(None, self._close_files, False)
            raise
        cfg = self.config
        if self._sync_flush:
            self._group_commit = self._put.group_commit = self._services.add_child(GroupCommitService(
                self.commit_log, self._flush_executor, self.checkpoint, timeout_ms=cfg.sync_flush_timeout_ms,
                max_waiters=cfg.max_sync_flush_waiters))
        else:
            self._services.add_child(FlushRealTimeService(
                self.commit_log, self._flush_executor, self.checkpoint, interval_ms=cfg.flush_interval_commit_log_ms,
                least_pages=cfg.flush_commit_log_least_pages, thorough_ms=cfg.flush_commit_log_thorough_interval_ms))
        self._cq_flush = self._services.add_child(FlushConsumeQueueService(
            self._queues.mapped.copy, self.commit_log, self._io_executor, self.checkpoint, self._checkpoint_path,
            interval_ms=cfg.flush_interval_consume_queue_ms, least_pages=cfg.flush_consume_queue_least_pages,
            thorough_ms=cfg.flush_consume_queue_thorough_interval_ms, indexed_offset=self._indexed_offset))
        if self.index is not None:
            self._services.add_child(self.index)
            self._listeners.growth.append(self.index.on_growth)
        self._queues.on_over_bound = self._services.add_child(
            periodic("store-cq-release", RELEASE_IDLE_S, self._queues.release_idle)).trigger
        self.retention = self._services.add_child(RetentionService(
            cfg, self.commit_log, self._queues.__iter__, self._io_executor, on_disk_full=self._guard.on_ratio,
            recheck=self._guard.recheck))
        self._services.start()
        self._state = _State.RUNNING
        self._update_writable()
        self._log.info("store_started", flush=cfg.flush_disk_type.value, role=cfg.broker_role.value,
                       min_offset=self.min_phy_offset, max_offset=self.max_phy_offset,
                       queues=self._queues.count())

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
        if self.index is not None:
            await self.index.flush()
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
        self._queues.load()
        plan = plan_recovery(self.commit_log, loaded, abnormal=abnormal, check_crc=cfg.check_crc_on_recover)
        replayed = apply_recovery(plan, self.commit_log, list(self._queues), self._queues.dispatch)
        self.recovered_max = self.commit_log.max_offset if abnormal else None
        self.commit_log.topic_queue_table = rebuild_topic_queue_table(self._queues)
        for cq in self._queues:
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
        if self.index is not None:
            self.index.load(abnormal=abnormal, checkpoint_timestamp=loaded.index_msg_timestamp)
            self.index.tail_cut(max_offset)  # recovery may have cut records the index saw
        self.checkpoint.write(self._checkpoint_path)
        self._reput.offset = max_offset
        with open(self._abort_path, "wb") as f:
            os.fsync(f.fileno())
        fsync_dir(cfg.store_path_root_dir)
        self.recovery_summary = {
            "abnormal": abnormal, "scan_start": plan.scan_start, "replay_from": plan.replay_from,
            "truncate_at": plan.truncate_at, "stop_reason": plan.stop_reason, "replayed": replayed,
        }
        level = "warning" if plan.stop_reason else "info"
        getattr(self._log, level)("store_recovered", **self.recovery_summary)

    def _lock(self) -> None:
        fd = os.open(os.path.join(self.config.store_path_root_dir, "lock"), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise StoreError(f"{self.config.store_path_root_dir} is in use by another store") from None
        self._lock_fd = fd

    def _prepare_commit_log_file(self) -> None:
        """The file to write next, its first window reserved and warmed now, before any write (a cold page
        costs far more than a warm one); the next file requested. A full disk leaves the store not writable
        (it still serves reads). Blocking."""
        queue = self.commit_log.queue
        self._guard.disk = disk_state(self.config.commit_log_dir)
        try:
            if not queue.files or queue.files[-1].is_full:
                queue.roll(queue.max_offset, request_next=False)
            queue.request_next()
            last = queue.last
            if last is not None:
                last.reserve(last.wrote_position, last.wrote_position + queue.window, warm=queue.warm)
                queue.make_room(last, last.wrote_position)
        except OSError as exc:
            if not is_no_space(exc):
                raise
            self._guard.no_space_seen(self.config.commit_log_dir, exc)

    def _close_files(self, clean: bool) -> None:
        self._cl_allocator.close()
        self._cq_allocator.close()
        for mapped in self._all_mapped_files():
            mapped.close()
        if self.index is not None:
            self.index.close()
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
        for cq in self._queues:
            yield from cq.queue.files
        yield from self._queues.unclosed

    def _update_writable(self) -> None:
        self._put.writable = self._state is _State.RUNNING and not self._is_slave and self._guard.ok

    @property
    def not_writable_reason(self) -> str | None:
        """Why puts are refused now (None while they are taken), for the answer's remark."""
        if self._put.writable:
            return None
        disk = self._guard.reason()
        if disk is not None:
            return disk
        if self._is_slave:
            return "the store is a slave's"
        return "the store is not running"

    @property
    def disk_full(self) -> bool:
        """True while puts are refused for want of disk (a full disk met, or above the warning ratio)."""
        return self._guard.full

    @property
    def disk(self) -> DiskState | None:
        """The store's file system at the last check (start, then every retention run)."""
        return self._guard.disk

    @property
    def is_running(self) -> bool:
        """Between start() and shutdown()."""
        return self._state is _State.RUNNING

    @property
    def writable(self) -> bool:
        """True when puts are accepted (running, not a slave, disk not full)."""
        return self._put.writable

    def _discard_later(self, files: list[MappedFile]) -> None:
        if self.retention is not None:
            self.retention.discard(files)
        else:  # during recovery, in its own thread
            for mapped in files:
                mapped.destroy()

    # ====================================================================================== writes

    def put(self, msg: MessageExtBrokerInner) -> PutOutcome:
        """The one put path of a single message, for sends, send-backs and scheduled re-deliveries alike:
        append and index it, then wait for the disk and a replica (:meth:`pocketmq.store.put_path.PutPath.put`).

        Returns the result itself when there is nothing to wait for (ASYNC_FLUSH and no replica waiter,
        or the producer's WAIT=false; and the queue's consume-queue file has room): the broker answers
        such a send inside the read callback, with no task and no future. Otherwise an awaitable of the
        result; a queue's new consume-queue file is then made in a thread first, never on the loop. A
        put that would wait when the bound on waiting puts is reached is OS_PAGECACHE_BUSY (nothing
        stored)."""
        return self._put.put(msg)

    def put_batch(self, batch: MessageExtBatch) -> PutOutcome:
        """:meth:`put` for a batch (see :meth:`append_batch` for what a batch may not be)."""
        return self._put.put_batch(batch)

    async def put_message(self, msg: MessageExtBrokerInner) -> PutMessageResult:
        """:meth:`put`, awaited: for callers that are coroutines anyway."""
        outcome = self._put.put(msg)
        return outcome if isinstance(outcome, PutMessageResult) else await outcome

    async def put_messages(self, batch: MessageExtBatch) -> PutMessageResult:
        """:meth:`put_batch`, awaited."""
        outcome = self._put.put_batch(batch)
        return outcome if isinstance(outcome, PutMessageResult) else await outcome

    def append(self, msg: MessageExtBrokerInner) -> PutMessageResult:
        """Append and index one message now, with no flush or replica wait (puts go through :meth:`put`;
        replication tests and tools use this to write without waiting). Call :meth:`prepare_queue` first for
        a queue that is not :meth:`queue_ready`, or this creates its consume-queue file inline (a short
        blocking I/O, once per file)."""
        return self._put.append(msg)

    def append_batch(self, batch: MessageExtBatch) -> PutMessageResult:
        """Append and index a batch now, with no flush or replica wait (puts go through :meth:`put_batch`).
        Delayed, retry-topic and transactional batches are MESSAGE_ILLEGAL."""
        return self._put.append_batch(batch)

    def wait_for_flush(self, end_offset: int) -> asyncio.Future[PutMessageStatus]:
        """A future of PUT_OK once ``end_offset`` is on disk (at once for ASYNC_FLUSH), or
        FLUSH_DISK_TIMEOUT after ``sync_flush_timeout``."""
        return self._put.wait_for_flush(end_offset)

    def needs_flush_wait(self, wait_store_msg_ok: bool = True) -> bool:
        """True when a put must wait for the disk (SYNC_FLUSH and the producer's WAIT is not false)."""
        return self._sync_flush and wait_store_msg_ok

    def has_flush_capacity(self) -> bool:
        """False when the bound on waiting SYNC_FLUSH writers is reached."""
        return self._put.has_flush_capacity()

    def queue_ready(self, topic: str, queue_id: int) -> bool:
        """True when :meth:`append` to this queue will not have to create a consume-queue file."""
        return self._queues.is_ready(topic, queue_id)

    async def prepare_queue(self, topic: str, queue_id: int) -> bool:
        """Create the queue's next consume-queue file in a thread unless it is ready (see
        :meth:`queue_ready`); False when it cannot be created (answer CREATE_MAPEDFILE_FAILED)."""
        return await self._put.prepare_queue(topic, queue_id)

    async def create_queue_files(self, topic: str, queue_ids: Iterable[int]) -> None:
        """Make, in the allocation thread, each queue's first consume-queue file (empty, not mapped) unless it has
        one, so its first message only opens it; a failure is logged and left to that message."""
        await self._queues.create_first_files(topic, queue_ids)

    def set_replica_waiter(self, waiter: ReplicaWaiter | None) -> None:
        """On a SYNC_MASTER, every put that waits (WAIT not false) also waits for ``waiter`` (the broker
        injects ``ha.HAService``; the store knows no replication)."""
        self._put.replica = waiter

    # ------------------------------------------------------------------------------------- slave

    def append_to_commit_log(self, offset: int, data: bytes | memoryview, *, dispatch: bool = True) -> bool:
        """Slave side of replication: append bytes received from the master at ``offset`` (which must
        be this log's max offset) and dispatch every record they complete. False when the offset does
        not match or the bytes are not valid records (then nothing past the last valid record is
        kept); the caller reconnects and reports its real max offset.

        The replication client first makes sure of :meth:`commit_log_room` (awaiting
        :meth:`wait_commit_log_room`) and passes ``dispatch`` False, then calls :meth:`dispatch_replicated`
        (it acknowledges the transfer between the two, as RocketMQ's slave does before its reput): then
        nothing blocks the loop. A bare call (tools, tests) gets any missing file or reservation, of the
        commit log or a consume queue, made inline (blocking)."""
        if self._state is not _State.RUNNING or not self._reput.append(offset, data):
            return False
        return self._reput.dispatch(inline=True) if dispatch else True

    def dispatch_replicated(self) -> bool:
        """Check and index the records appended by :meth:`append_to_commit_log` since the last dispatch;
        False when they are not valid records (nothing past the last valid one is kept). Never blocks: it
        stops at a record whose consume queue needs a file or room (:attr:`dispatch_waiting`; await
        :meth:`prepare_dispatch` and call again)."""
        return self._state is _State.RUNNING and self._reput.dispatch()

    def commit_log_room(self, offset: int, size: int) -> bool:
        """Slave side: True when appending ``size`` bytes at ``offset`` will not block (``CommitLog.raw_room``)."""
        return (self._cut is None or self._cut.done()) and self.commit_log.raw_room(offset, size)

    async def wait_commit_log_room(self, offset: int, size: int) -> None:
        """Wait until :meth:`commit_log_room` holds (raises OSError: ENOSPC on a full disk)."""
        if self._cut is not None:
            await asyncio.wait([self._cut])
        await self.commit_log.wait_raw_room(offset, size)

    def _indexed_offset(self) -> int:
        """Offset before which every record is indexed: the max, or the record a slave's dispatch waits at."""
        return self._reput.offset if self._reput.waiting is not None else self.commit_log.max_offset

    @property
    def dispatch_behind_bytes(self) -> int:
        """Bytes of the commit log not yet in their consume queues (RocketMQ's ``dispatchBehindBytes``): 0 but
        while a slave's dispatch waits for a consume-queue file or room."""
        return self.commit_log.max_offset - self._indexed_offset()

    @property
    def dispatch_waiting(self) -> bool:
        """True when the last :meth:`dispatch_replicated` stopped before a record (see :meth:`prepare_dispatch`)."""
        return self._reput.waiting is not None

    async def prepare_dispatch(self) -> None:
        """Make, in the allocation thread, what the stopped dispatch needs (raises OSError)."""
        await self._reput.prepare()

    def reset_commit_log(self, offset: int) -> bool:
        """Slave side: drop the whole commit log and start an empty one whose first file begins at
        ``offset``, a file boundary at or past the current max offset. Replication uses it when the
        master sends its last file to a slave with an empty log, or its oldest file to a slave whose next
        bytes it has already deleted. Consume queues keep their units; those of dropped records read as
        removed (their min offsets move past them) and new records continue at their own queue offsets.
        False (and nothing changes) for any other offset. The old files are deleted in a thread; the
        new first file is taken from the allocator or, rarely, created here."""
        return self._state is _State.RUNNING and self._reput.reset(offset)

    async def truncate_commit_log(self, offset: int) -> bool:
        """Slave side: cut the log back to ``offset``, a record start before its max (the master restarted shorter),
        with consume queues and index walk (:meth:`store.reput.Reput.truncate`), durably (:meth:`commit_log_room`
        is False until :func:`store.reput.make_cut_durable` is done). False (no change) for any other offset."""
        removed = self._reput.truncate(offset) if self._state is _State.RUNNING else None
        if removed is None:
            return False
        if self.index is not None:
            self.index.tail_cut(offset)
        self._cut = asyncio.ensure_future(make_cut_durable(self.commit_log, removed, self.checkpoint,
                                                           self._checkpoint_path, self._flush_executor,
                                                           self._io_executor))
        unclosed = await asyncio.shield(self._cut)
        if self.retention is not None:
            self.retention.keep_unclosed(unclosed)
        return True

    # ============================================================================ listener hooks

    def add_arrival_listener(self, listener: ArrivalListener) -> None:
        """Call ``listener(topic, queue_id, max_offset, tags_code, store_timestamp)`` after each message
        is indexed (long polling). It runs inside the put: keep it cheap and non-blocking."""
        self._listeners.arrival.append(listener)

    def add_commitlog_growth_listener(self, listener: GrowthListener) -> None:
        """Call ``listener(max_offset)`` after each append (replication). Keep it cheap."""
        self._listeners.growth.append(listener)

    # ======================================================================================= reads

    def find_consume_queue(self, topic: str, queue_id: int) -> ConsumeQueue | None:
        """The consume queue of a topic queue, if it has ever had a message."""
        return self._queues.find(topic, queue_id)

    def get_messages(self, group: str, topic: str, queue_id: int, offset: int, max_count: int,
                     max_bytes: int | None = None, message_filter: MessageFilter | None = None,
                     record_filter: RecordFilter | None = None) -> GetMessageResult:
        """Read up to ``max_count`` messages (capped at ``max_transfer_count_on_message_in_memory``) and
        ``max_bytes`` (capped at ``max_transfer_bytes_on_message_in_memory``; at least one message is
        returned whatever its size) from queue offset ``offset``. ``message_filter`` sees each tag code,
        ``record_filter`` each record whose tag code passed.
        ``group`` is accepted for the broker's bookkeeping and not used by the store."""
        del group
        if self._state is not _State.RUNNING:
            raise StoreNotRunningError("the message store is not running")
        return self._reader.get_messages(topic, queue_id, offset, max_count, max_bytes, message_filter, record_filter)

    def get_max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        """Next queue offset to be written (0 for an unknown queue)."""
        return self._reader.max_offset_in_queue(topic, queue_id)

    def get_min_offset_in_queue(self, topic: str, queue_id: int) -> int:
        """First readable queue offset (0 for an unknown queue)."""
        return self._reader.min_offset_in_queue(topic, queue_id)

    def get_offset_in_queue_by_time(self, topic: str, queue_id: int, timestamp: int) -> int:
        """First queue offset stored at or after ``timestamp`` ms (see ConsumeQueue)."""
        return self._reader.offset_in_queue_by_time(topic, queue_id, timestamp)

    def get_earliest_message_time(self, topic: str, queue_id: int) -> int:
        """Store time of the oldest readable message of the queue; -1 if none."""
        return self._reader.earliest_message_time(topic, queue_id)

    def get_message_store_timestamp(self, topic: str, queue_id: int, offset: int) -> int:
        """Store time of the message at queue offset ``offset``; -1 if none."""
        return self._reader.message_store_timestamp(topic, queue_id, offset)

    def look_message_by_offset(self, phys_offset: int, size: int | None = None) -> MessageRecord | None:
        """Decode the record at a commit-log offset (e.g. from a message id); None if there is none."""
        return self.commit_log.look_message(phys_offset, size)

    def query_message(self, topic: str, key: str, max_num: int, begin: int, end: int) -> QueryResult:
        """The stored records of ``key`` (a KEYS key or a UNIQ_KEY) in ``topic`` stored in ``[begin, end]`` ms,
        newest first (see :class:`~pocketmq.store.index.IndexService`); none when the index is off."""
        if self.index is None:
            return QueryResult([], 0, 0)
        return self.index.query(topic, key, max_num, begin, end)

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
        return self._queues.topics()

    # ====================================================================================== admin

    async def delete_topic(self, topic: str) -> bool:
        """Remove a topic's consume queues (its records stay in the commit log until retention)."""
        queues = self._queues.remove_topic(topic)
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
            "consumeQueues": self._queues.count(),
            "syncFlushWaiters": self._group_commit.pending if self._group_commit else 0,
            "writable": self._put.writable,
            "diskFull": self.disk_full,
            "commitLogDiskRatio": self._guard.disk.ratio if self._guard.disk is not None else 0.0,
            "now": int(time.time() * 1000),
            **(self.index.stats() if self.index is not None else {}),
        }


__all__ = ["MessageStore"]
