"""``PutPath``: the store's one way in for writes, RocketMQ's ``asyncPutMessage`` then ``handleDiskFlushAndHA``.

:meth:`PutPath.put` (one message: sends, send-backs, scheduled re-deliveries) and :meth:`PutPath.put_batch`
append and index, then wait for the disk (the SYNC_FLUSH group commit) and, on a SYNC_MASTER, a replica (a
:class:`ReplicaWaiter` the broker injects) side by side, each under its own timeout; a timeout comes back as a
status (FLUSH_DISK_TIMEOUT, FLUSH_SLAVE_TIMEOUT, SLAVE_NOT_AVAILABLE), never as an exception. When there is
nothing to wait for the result is returned at once, with no task or future (the broker's hot path); otherwise
an awaitable of it. :meth:`PutPath.append` and :meth:`PutPath.append_batch` are the bare append the put is
built on: pack the record into the mapped file, assign its offsets and write its consume-queue unit in one
call, with no lock and no await. A delayed message is rewritten first (:mod:`pocketmq.store.delay`).

Nothing is written past the reserved window (:mod:`store.mapped_file`). A queue whose consume-queue file is full
(or missing, or not reserved for the next unit) gets its file and room in a thread before the append, and a
record the commit log's window does not cover yet (NOT_RESERVED, nothing written) waits for the reservation and
is appended then: never a blocking call on the loop (:meth:`PutPath.put`). :meth:`PutPath.append` makes both
inline (a short blocking call, rare). A reservation that fails with a full disk makes the store refuse puts
(SERVICE_NOT_AVAILABLE, through ``no_space``) until the retention tick finds space again.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Awaitable, Callable
from typing import Protocol

from pocketmq.common.logs import Logger
from pocketmq.common.message import tags_code_of
from pocketmq.common.sysflag import MessageSysFlag
from pocketmq.common.topic import RMQ_SYS_SCHEDULE_TOPIC, is_retry_topic
from pocketmq.store.commitlog import CommitLog
from pocketmq.store.config import StoreConfig
from pocketmq.store.consume_queue import UNIT_SIZE, ConsumeQueue
from pocketmq.store.delay import DELAY_MARKER, deliver_time, schedule
from pocketmq.store.flush import GroupCommitService
from pocketmq.store.listeners import StoreListeners
from pocketmq.store.mapped_file import NoSpaceHandler, is_no_space
from pocketmq.store.message import MessageExtBatch, MessageExtBrokerInner
from pocketmq.store.queue_table import ConsumeQueueTable
from pocketmq.store.results import AppendMessageStatus, PutMessageResult, PutMessageStatus
from pocketmq.store.timer import TIMER_MARKER, schedule_timer

PutOutcome = PutMessageResult | Awaitable[PutMessageResult]
"""What a put gives: the result, or an awaitable of it when the put has to wait."""


class ReplicaWaiter(Protocol):
    """What a SYNC_MASTER's put waits on next to the disk flush (``ha.HAService`` is one; the broker
    injects it with ``MessageStore.set_replica_waiter``, so the store imports no replication)."""

    def has_room(self) -> bool:
        """False when the bound on puts waiting for a replica is reached (the put is refused)."""

    def wait_for_replica(self, end_offset: int) -> asyncio.Future[PutMessageStatus]:
        """Already running when returned; PUT_OK once a slave holds ``end_offset``, otherwise
        FLUSH_SLAVE_TIMEOUT or SLAVE_NOT_AVAILABLE. Never raises."""


_PUT_OK = PutMessageStatus.PUT_OK
_APPEND_OK = AppendMessageStatus.PUT_OK
_TXN_MASK = MessageSysFlag.TRANSACTION_MASK
_TXN_COMMIT = MessageSysFlag.TRANSACTION_COMMIT_TYPE
_NOT_RESERVED = AppendMessageStatus.NOT_RESERVED
_INLINE_ATTEMPTS = 4
_LATER_ATTEMPTS = 64
"""A put that waited for a reservation appends again; others woken by the same reservation may take the room
first (each wait is for a whole refill, so a handful of attempts is the most seen)."""
_STATUS_OF_APPEND = {
    AppendMessageStatus.MESSAGE_SIZE_EXCEEDED: PutMessageStatus.MESSAGE_ILLEGAL,
    AppendMessageStatus.PROPERTIES_SIZE_EXCEEDED: PutMessageStatus.PROPERTIES_SIZE_EXCEEDED,
    AppendMessageStatus.UNKNOWN_ERROR: PutMessageStatus.CREATE_MAPEDFILE_FAILED,
    AppendMessageStatus.END_OF_FILE: PutMessageStatus.UNKNOWN_ERROR,
    AppendMessageStatus.NOT_RESERVED: PutMessageStatus.CREATE_MAPEDFILE_FAILED,
}


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


class PutPath:
    """The writes of one store (see the module docstring). The store sets :attr:`writable` (running, not a
    slave, disk not full) and, once its services run, :attr:`group_commit` (SYNC_FLUSH) and :attr:`replica`;
    ``is_running`` is asked only to say why a put is refused; ``no_space`` is told of a full disk met while a
    put waited for a file or a reservation."""

    def __init__(self, config: StoreConfig, commit_log: CommitLog, queues: ConsumeQueueTable,
                 listeners: StoreListeners, is_running: Callable[[], bool], log: Logger,
                 no_space: NoSpaceHandler) -> None:
        self.writable = False
        self._no_space = no_space
        self.group_commit: GroupCommitService | None = None
        self.replica: ReplicaWaiter | None = None
        self._commit_log = commit_log
        self._queues = queues
        self._cq_table = queues.queues
        self._delay_levels = config.delay_levels_ms
        self._timer_max_delay_ms = config.timer_max_delay_sec * 1000
        self._arrival = listeners.arrival
        self._growth = listeners.growth
        self._notify_arrival = listeners.notify_arrival
        self._notify_growth = listeners.notify_growth
        self._is_running = is_running
        self._log = log

    # ------------------------------------------------------------------------------------------ append

    def append(self, msg: MessageExtBrokerInner) -> PutMessageResult:
        """Append and index one message now, with no flush or replica wait (files and reservations made
        inline when needed)."""
        result = self._append(msg, True)
        return result if result is not None else self._inline(functools.partial(self._append, msg, True))

    def _inline(self, attempt: Callable[[], PutMessageResult | None]) -> PutMessageResult:
        """Retry an inline append that found the commit log's window short, reserving in this thread first."""
        for _attempt in range(_INLINE_ATTEMPTS):
            try:
                self._commit_log.reserve_now()
            except OSError as exc:
                return self._refused(exc)
            result = attempt()
            if result is not None:
                return result
        return PutMessageResult(PutMessageStatus.CREATE_MAPEDFILE_FAILED)

    def _append(self, msg: MessageExtBrokerInner, inline_file: bool) -> PutMessageResult | None:
        """:meth:`append`; None when the commit log's window does not cover the record yet (nothing written)
        and, with ``inline_file`` False, when the consume queue needs a file or room first."""
        if not self.writable:
            return self._not_writable()
        props = msg.properties
        if TIMER_MARKER in props:
            timed = schedule_timer(msg, int(time.time() * 1000), self._timer_max_delay_ms)
            if timed is None:
                return PutMessageResult(PutMessageStatus.WHEEL_TIMER_MSG_ILLEGAL)
            msg = timed
            props = msg.properties
        if DELAY_MARKER in props and msg.topic != RMQ_SYS_SCHEDULE_TOPIC:
            msg = schedule(msg, self._delay_levels)
            props = msg.properties
        topic = msg.topic
        queue_id = msg.queue_id
        txn = msg.sys_flag & _TXN_MASK
        cq: ConsumeQueue | None = None
        if txn == 0 or txn == _TXN_COMMIT:
            queues = self._cq_table.get(topic)
            cq = queues.get(queue_id) if queues is not None else None
            tail = cq.tail if cq is not None else None
            if cq is None or tail is None or (tail.wrote_position + UNIT_SIZE > tail.limit and not cq.has_room()):
                if not inline_file:
                    return None
                try:
                    cq = self._queues.ready(topic, queue_id)
                except OSError as exc:
                    return self._no_cq_file(topic, exc)
        result = self._commit_log.append_message(msg)
        if result.status is not _APPEND_OK:
            if result.status is _NOT_RESERVED:
                return None
            return PutMessageResult(_STATUS_OF_APPEND[result.status], result)
        if cq is not None:
            tags = msg.tags_code
            if tags is None:
                tags = tags_code_of(props) if props else 0
            if topic == RMQ_SYS_SCHEDULE_TOPIC:
                tags = deliver_time(self._delay_levels, queue_id + 1, result.store_timestamp)
            try:
                cq.put(result.logics_offset, result.wrote_offset, result.wrote_bytes, tags)
            except OSError as exc:
                self._unindexed(cq, result.logics_offset, exc)
            if self._arrival:
                self._notify_arrival(topic, queue_id, result.logics_offset + 1, tags, result.store_timestamp)
        if self._growth:
            self._notify_growth(result.wrote_offset + result.wrote_bytes)
        return PutMessageResult(_PUT_OK, result)

    def append_batch(self, batch: MessageExtBatch) -> PutMessageResult:
        """Append and index a batch now, with no flush or replica wait. Delayed, retry-topic and
        transactional batches are MESSAGE_ILLEGAL."""
        result = self._append_batch(batch, True)
        return result if result is not None else self._inline(functools.partial(self._append_batch, batch, True))

    def _append_batch(self, batch: MessageExtBatch, inline_file: bool) -> PutMessageResult | None:
        """:meth:`append_batch`; None as for :meth:`_append`."""
        if not self.writable:
            return self._not_writable()
        if (is_retry_topic(batch.topic) or DELAY_MARKER in batch.properties
                or batch.sys_flag & _TXN_MASK not in (0, _TXN_COMMIT)):
            return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL)
        if inline_file:
            try:
                cq = self._queues.ready(batch.topic, batch.queue_id)
            except OSError as exc:
                return self._no_cq_file(batch.topic, exc)
        else:
            found = self._queues.find(batch.topic, batch.queue_id)
            if found is None or not found.has_room():
                return None
            cq = found
        result, dispatch = self._commit_log.append_batch(batch)
        if result.status is not _APPEND_OK:
            if result.status is _NOT_RESERVED:
                return None
            return PutMessageResult(_STATUS_OF_APPEND[result.status], result)
        try:
            cq.put_many(result.logics_offset, dispatch)
        except OSError as exc:
            self._unindexed(cq, result.logics_offset, exc)
        if self._arrival:
            index = result.logics_offset
            for _phys, _size, tags in dispatch:
                index += 1
                self._notify_arrival(batch.topic, batch.queue_id, index, tags, result.store_timestamp)
        if self._growth:
            self._notify_growth(result.end_offset)
        return PutMessageResult(_PUT_OK, result)

    def _refused(self, exc: OSError) -> PutMessageResult:
        """The answer to a put whose file or reservation failed: a full disk stops puts (SERVICE_NOT_AVAILABLE),
        anything else is CREATE_MAPEDFILE_FAILED."""
        if is_no_space(exc):
            self._no_space(str(exc.filename or ""), exc)
            return self._not_writable()
        self._log.error("put_file_or_reservation_failed", error=str(exc))
        return PutMessageResult(PutMessageStatus.CREATE_MAPEDFILE_FAILED)

    def _not_writable(self) -> PutMessageResult:
        if not self._is_running():
            self._log.warning("put_refused", reason="store_not_running")
        return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE)

    def _no_cq_file(self, topic: str, exc: OSError) -> PutMessageResult:
        self._log.error("consume_queue_file_creation_failed", topic=topic, error=str(exc))
        return PutMessageResult(PutMessageStatus.CREATE_MAPEDFILE_FAILED)

    def _unindexed(self, cq: ConsumeQueue, index: int, exc: OSError) -> None:
        # Only a consume-queue roll-over inside a batch can get here (the first file of every put is made
        # before appending). The record is in the commit log; the next start re-indexes it.
        self._log.error("consume_queue_write_failed", topic=cq.topic, queue_id=cq.queue_id, offset=index,
                        error=str(exc), repair="at_next_start")

    async def prepare_queue(self, topic: str, queue_id: int) -> bool:
        """Create the queue's next consume-queue file and reserve room in it, in threads, unless it is ready;
        False when that fails (answer CREATE_MAPEDFILE_FAILED, or SERVICE_NOT_AVAILABLE once a full disk
        has made the store not writable)."""
        if self._queues.is_ready(topic, queue_id):
            return True
        try:
            await self._queues.ensure_file(topic, queue_id)
        except OSError as exc:
            self._log.error("consume_queue_file_creation_failed", topic=topic, error=str(exc))
            if is_no_space(exc):
                self._no_space(str(exc.filename or ""), exc)
            return False
        return True

    # -------------------------------------------------------------------------------------------- put

    def put(self, msg: MessageExtBrokerInner) -> PutOutcome:
        """The one put path of a single message: append and index it, then wait for the disk and a replica
        (:meth:`_flush_and_replica`). The result itself when there is nothing to wait for (ASYNC_FLUSH and
        no replica waiter, or the producer's WAIT=false; and the queue's consume-queue file and the commit
        log's window have room); otherwise an awaitable of it. A put that would wait when the bound on
        waiting puts is reached is OS_PAGECACHE_BUSY (nothing stored)."""
        wait = msg.wait_store_msg_ok and (self.group_commit is not None or self.replica is not None)
        if wait and not self._room_to_wait():
            return PutMessageResult(PutMessageStatus.OS_PAGECACHE_BUSY)
        result = self._append(msg, False)
        if result is None:
            target = self._target(msg)
            return self._put_later(target.topic, target.queue_id, functools.partial(self._append, msg, False), wait)
        return self._flush_and_replica(result) if wait else result

    def put_batch(self, batch: MessageExtBatch) -> PutOutcome:
        """:meth:`put` for a batch (see :meth:`append_batch` for what a batch may not be)."""
        wait = batch.wait_store_msg_ok and (self.group_commit is not None or self.replica is not None)
        if wait and not self._room_to_wait():
            return PutMessageResult(PutMessageStatus.OS_PAGECACHE_BUSY)
        result = self._append_batch(batch, False)
        if result is None:
            return self._put_later(batch.topic, batch.queue_id, functools.partial(self._append_batch, batch, False),
                                   wait)
        return self._flush_and_replica(result) if wait else result

    def _target(self, msg: MessageExtBrokerInner) -> MessageExtBrokerInner:
        """The message as :meth:`_append` rewrites it (a timer or a delayed message): its queue needs the room."""
        if TIMER_MARKER in msg.properties:
            msg = schedule_timer(msg, int(time.time() * 1000), self._timer_max_delay_ms) or msg
        return schedule(msg, self._delay_levels) if DELAY_MARKER in msg.properties else msg

    def has_flush_capacity(self) -> bool:
        """False when the bound on waiting SYNC_FLUSH writers is reached."""
        return self.group_commit is None or self.group_commit.has_room()

    def _room_to_wait(self) -> bool:
        replica = self.replica
        return self.has_flush_capacity() and (replica is None or replica.has_room())

    async def _put_later(self, topic: str, queue_id: int, attempt: Callable[[], PutMessageResult | None],
                         wait: bool) -> PutMessageResult:
        """Make the queue's consume-queue file and room, and the commit log's reservation, in threads, then
        append (``attempt``) and wait as :meth:`put` does."""
        result: PutMessageResult | None = None
        for _attempt in range(_LATER_ATTEMPTS):
            if not self.writable:
                return self._not_writable()
            if not await self.prepare_queue(topic, queue_id):
                return self._not_writable() if not self.writable else PutMessageResult(
                    PutMessageStatus.CREATE_MAPEDFILE_FAILED)
            try:
                await self._commit_log.wait_room()
            except OSError as exc:
                return self._refused(exc)
            if wait and not self._room_to_wait():
                return PutMessageResult(PutMessageStatus.OS_PAGECACHE_BUSY)
            result = attempt()
            if result is not None:
                break
        if result is None:
            return PutMessageResult(PutMessageStatus.CREATE_MAPEDFILE_FAILED)
        if not wait or result.status is not _PUT_OK:
            return result
        outcome = self._flush_and_replica(result)
        return outcome if isinstance(outcome, PutMessageResult) else await outcome

    def wait_for_flush(self, end_offset: int) -> asyncio.Future[PutMessageStatus]:
        """A future of PUT_OK once ``end_offset`` is on disk (at once for ASYNC_FLUSH), or
        FLUSH_DISK_TIMEOUT after ``sync_flush_timeout``."""
        if self.group_commit is not None:
            return self.group_commit.wait_for(end_offset)
        future: asyncio.Future[PutMessageStatus] = asyncio.get_running_loop().create_future()
        future.set_result(_PUT_OK)
        return future

    def _flush_and_replica(self, result: PutMessageResult) -> PutOutcome:
        """RocketMQ's handleDiskFlushAndHA: wait for the disk (SYNC_FLUSH group commit) and a replica (a
        SYNC_MASTER's waiter) side by side, each under its own timeout, which comes back as a status, never
        as an exception. The result itself when both are settled already (e.g. no slave under ASYNC_FLUSH)."""
        append = result.append_result
        if result.status is not _PUT_OK or append is None:
            return result
        end = append.end_offset
        flushed = self.group_commit.wait_for(end) if self.group_commit is not None else None
        replicated = self.replica.wait_for_replica(end) if self.replica is not None else None
        if (flushed is None or flushed.done()) and (replicated is None or replicated.done()):
            return _settle(result, _PUT_OK if flushed is None else flushed.result(),
                           _PUT_OK if replicated is None else replicated.result())
        return _settle_later(result, flushed, replicated)
