"""``TransactionalMessageService``: prepare, commit and rollback of transactional messages on a master, and the
start-up load that rebuilds the bookkeeping from the store.

Commit writes the real message and then the op record(s) in the same event-loop step (both queues'
consume-queue files are made ready first; the real message is put with WAIT=false, so the store appends it at
once; the op record's put then waits for the disk and, on a SYNC_MASTER, a slave, which covers both). A broker
killed between the two appends leaves a committed message with no op record:
:meth:`TransactionalMessageService.load` finds it at the tail of the half's real queue (the two appends are
adjacent) and writes the missing op record before anything is checked back, so a restart never commits a
transaction twice. Each outcome is marked in the book before anything is written, so two END_TRANSACTIONs
racing for one transaction write once.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from pocketmq.broker.metadata import ConsumerOffsetManager
from pocketmq.broker.status import put_status_to_response
from pocketmq.broker.transaction.book import TransactionBook
from pocketmq.broker.transaction.bridge import (
    TransactionalMessageBridge,
    real_destination,
    transaction_key,
)
from pocketmq.common.logs import get_logger
from pocketmq.common.message import MessageConst, get_property
from pocketmq.common.record import MessageRecord, decode_record
from pocketmq.common.sysflag import MessageSysFlag
from pocketmq.common.topic import RMQ_SYS_TRANS_OP_HALF_TOPIC
from pocketmq.remoting.codes import ResponseCode
from pocketmq.remoting.headers import EndTransactionRequestHeader
from pocketmq.store.message import MessageExtBrokerInner
from pocketmq.store.message_store import MessageStore
from pocketmq.store.results import GetMessageStatus, PutMessageResult, PutMessageStatus

log = get_logger("pocketmq.broker.transaction")

LOAD_CHUNK = 32
"""Records read per store call while loading (the loop gets a turn between calls)."""
REPAIR_TAIL = 64
"""Consume-queue entries read at the tail of each real queue with unresolved halves, looking for a commit whose op
record a crash cut off."""
_COMMIT = MessageSysFlag.TRANSACTION_COMMIT_TYPE
_ROLLBACK = MessageSysFlag.TRANSACTION_ROLLBACK_TYPE
_NOT = MessageSysFlag.TRANSACTION_NOT_TYPE
_PGROUP = MessageConst.PROPERTY_PRODUCER_GROUP
_OP_TOPIC = RMQ_SYS_TRANS_OP_HALF_TOPIC


@dataclass(slots=True)
class TransactionCounters:
    """What the metrics report: half messages stored, outcomes, check-backs sent, halves discarded."""

    half: int = 0
    committed: int = 0
    rolled_back: int = 0
    checked: int = 0
    discarded: int = 0

    def samples(self) -> list[tuple[tuple[str, ...], float]]:
        return [(("half",), self.half), (("committed",), self.committed), (("rolled_back",), self.rolled_back),
                (("checked",), self.checked), (("discarded",), self.discarded)]


@dataclass(frozen=True, slots=True)
class EndOutcome:
    """END_TRANSACTION's answer: a response code and remark, or no answer at all (``code`` None)."""

    code: int | None
    remark: str | None = None


class TransactionalMessageService:
    """The transaction state of one master's store."""

    def __init__(self, store: MessageStore, offsets: ConsumerOffsetManager, *, born_host: bytes,
                 max_tracked: int = 1_000_000, on_stored: Callable[[str, int, int], None] | None = None) -> None:
        self.store = store
        #: ``(topic, messages, bytes)`` for each committed message stored (the broker's put statistics)
        self.on_stored = on_stored
        self.bridge = TransactionalMessageBridge(store, offsets)
        self.book = TransactionBook(max_tracked)
        self.counters = TransactionCounters()
        self.born_host = born_host
        self.loaded = False

    # -- the send path ---------------------------------------------------------------------------------------

    def half_stored(self, properties: str, queue_offset: int, real_topic: str) -> None:
        """A half message was stored at ``queue_offset`` of the half queue."""
        self.counters.half += 1
        self.book.track(transaction_key(properties, queue_offset), queue_offset, real_topic,
                        get_property(properties, _PGROUP) or "")

    # -- END_TRANSACTION -------------------------------------------------------------------------------------

    def end(self, header: EndTransactionRequestHeader) -> EndOutcome | Awaitable[EndOutcome]:
        """Commit or roll back the half message the header names (RocketMQ's checks and remarks). The outcome
        itself when every put was answered at once (ASYNC_FLUSH on an ASYNC_MASTER: no task), else an
        awaitable of it."""
        kind = header.commit_or_rollback
        if kind == _NOT:
            return EndOutcome(None)  # "pending status": RocketMQ answers nothing
        if kind not in (_COMMIT, _ROLLBACK):
            return EndOutcome(ResponseCode.SYSTEM_ERROR, f"illegal commitOrRollback {kind}: 0, 8 or 12 expected")
        record = self.bridge.look_half(header.commit_log_offset)
        problem = _check_prepare(record, header)
        if problem is not None or record is None:
            return EndOutcome(ResponseCode.SYSTEM_ERROR, problem)
        key = transaction_key(record.properties, record.queue_offset)
        targets = self.book.targets(key, record.queue_offset)
        if targets is None:
            return EndOutcome(ResponseCode.SYSTEM_ERROR,
                              f"the half message at offset {record.queue_offset} is already resolved or discarded; "
                              "nothing written")
        self.book.mark(key, targets)  # before any write: a racing END_TRANSACTION finds it resolved
        if kind == _ROLLBACK:
            return self._write_outcome(key, targets, None)
        real = self.bridge.committed_message(record)
        if real is None:
            self.book.mark(key, targets, resolved=False)
            return EndOutcome(ResponseCode.SYSTEM_ERROR, "the half message has no REAL_TOPIC/REAL_QID")
        if not (self.store.queue_ready(real.topic, real.queue_id) and self.store.queue_ready(_OP_TOPIC, 0)):
            return self._commit_when_ready(key, targets, real)
        return self._write_outcome(key, targets, real)

    def _write_outcome(self, key: str, targets: list[int],
                       real: MessageExtBrokerInner | None) -> EndOutcome | Awaitable[EndOutcome]:
        """Append the committed message (``real``; None for a rollback) and the op records. With both queues'
        consume-queue files ready the appends follow each other in this loop step: no other write between them."""
        commit = real is not None
        try:
            if real is not None:
                stored = self.store.put(real)
                if not isinstance(stored, PutMessageResult):
                    return self._end_later(key, targets, stored, real.topic)
                if not stored.status.is_stored:
                    return self._not_written(key, targets, stored.status)
                self._count_stored(real.topic, stored)
            ops = self.put_ops(targets)
        except BaseException:
            self.book.mark(key, targets, resolved=False)
            raise
        if isinstance(ops, PutMessageStatus):
            return self._outcome(key, targets, commit, ops)
        return self._outcome_later(key, targets, commit, ops)

    async def _commit_when_ready(self, key: str, targets: list[int], real: MessageExtBrokerInner) -> EndOutcome:
        """Create the real queue's and the op queue's next consume-queue files first (in a thread), so the two
        appends of the commit stay adjacent."""
        try:
            ready = (await self.store.prepare_queue(real.topic, real.queue_id)
                     and await self.store.prepare_queue(_OP_TOPIC, 0))
        except BaseException:
            self.book.mark(key, targets, resolved=False)
            raise
        if not ready:
            return self._not_written(key, targets, PutMessageStatus.CREATE_MAPEDFILE_FAILED)
        outcome = self._write_outcome(key, targets, real)
        return outcome if isinstance(outcome, EndOutcome) else await outcome

    async def _end_later(self, key: str, targets: list[int], stored: Awaitable[PutMessageResult],
                         topic: str) -> EndOutcome:
        """A commit whose real message had to wait (a consume-queue file to create first)."""
        try:
            result = await stored
            if not result.status.is_stored:
                return self._not_written(key, targets, result.status)
            self._count_stored(topic, result)
            ops = self.put_ops(targets)
            status = ops if isinstance(ops, PutMessageStatus) else await ops
        except BaseException:
            self.book.mark(key, targets, resolved=False)
            raise
        return self._outcome(key, targets, True, status)

    async def _outcome_later(self, key: str, targets: list[int], commit: bool,
                             ops: Awaitable[PutMessageStatus]) -> EndOutcome:
        try:
            status = await ops
        except BaseException:
            if not commit:
                self.book.mark(key, targets, resolved=False)
            raise
        return self._outcome(key, targets, commit, status)

    def _count_stored(self, topic: str, result: PutMessageResult) -> None:
        append = result.append_result
        if self.on_stored is not None and append is not None:
            self.on_stored(topic, append.msg_num, append.wrote_bytes)

    def _not_written(self, key: str, targets: list[int], status: PutMessageStatus) -> EndOutcome:
        self.book.mark(key, targets, resolved=False)
        code, remark = put_status_to_response(status)
        return EndOutcome(code, remark)

    def _outcome(self, key: str, targets: list[int], commit: bool, status: PutMessageStatus) -> EndOutcome:
        """The answer once the op records are written. The book's mark is taken back only when nothing was
        written: once the real message is stored the transaction stays committed here even without op record."""
        if not status.is_stored and not commit:
            return self._not_written(key, targets, status)
        if commit:
            self.counters.committed += 1
        else:
            self.counters.rolled_back += 1
        if not status.is_stored:
            return EndOutcome(ResponseCode.SYSTEM_ERROR,
                              f"committed, but the op record was not written ({status.name})")
        # As RocketMQ's sendFinalMessage: flush and replica timeouts still mean the outcome is stored.
        return EndOutcome(ResponseCode.SUCCESS)

    def put_ops(self, targets: list[int]) -> PutMessageStatus | Awaitable[PutMessageStatus]:
        """Op records for ``targets``, appended one after the other (the last waits for the disk and a replica);
        the status at once when the store answered every put at once."""
        now = int(time.time() * 1000)
        status = PutMessageStatus.PUT_OK
        for i, offset in enumerate(targets):
            stored = self.store.put(self.bridge.op_message(offset, self.born_host, now, wait=i == len(targets) - 1))
            if not isinstance(stored, PutMessageResult):
                return self._ops_later(targets, i, stored, now)
            if not stored.status.is_stored:
                log.error("transaction_op_write_failed", half_offset=offset, status=stored.status.name)
                return stored.status
            status = stored.status
        return status

    async def _ops_later(self, targets: list[int], index: int, stored: Awaitable[PutMessageResult],
                         now: int) -> PutMessageStatus:
        while True:
            result = await stored
            if not result.status.is_stored:
                log.error("transaction_op_write_failed", half_offset=targets[index], status=result.status.name)
                return result.status
            index += 1
            if index == len(targets):
                return result.status
            outcome = self.store.put(self.bridge.op_message(targets[index], self.born_host, now,
                                                            wait=index == len(targets) - 1))
            stored = outcome if not isinstance(outcome, PutMessageResult) else _ready(outcome)

    async def write_ops(self, targets: list[int]) -> PutMessageStatus:
        """:meth:`put_ops`, awaited."""
        ops = self.put_ops(targets)
        return ops if isinstance(ops, PutMessageStatus) else await ops

    # -- start-up --------------------------------------------------------------------------------------------

    async def load(self) -> None:
        """Rebuild the book from the stored progress, op records and half messages; repair commits a crash cut
        off from their op records. Called on a master before it serves."""
        half, op = self.bridge.load_progress()
        book = self.book
        book.reset(max(half, self.bridge.half_min_offset()), op)
        await self._load_ops()
        unresolved_queues = await self._load_halves()
        repaired = await self._repair(unresolved_queues)
        self.bridge.save_progress(book.half_progress, book.op_progress)
        self.loaded = True
        log.info("transactions_loaded", half_progress=book.half_progress, op_progress=book.op_progress,
                 pending=len(book.pending), repaired=repaired)

    async def read_new_ops(self, limit: int) -> bool:
        """Read op records past ``book.op_read`` (at most ``limit``); True when all are read."""
        book = self.book
        end = self.bridge.op_max_offset()
        while book.op_read < end and limit > 0:
            ops, next_offset = self.bridge.read_ops(book.op_read, min(LOAD_CHUNK, limit))
            for op_offset, half_offset in ops:
                book.op_read_at(op_offset, half_offset)
            if next_offset <= book.op_read and not ops:
                break  # nothing readable there now
            book.op_skip_to(next_offset)
            limit -= len(ops) or 1
            await asyncio.sleep(0)
        return book.op_read >= end

    async def _load_ops(self) -> None:
        await self.read_new_ops(1 << 62)

    async def _load_halves(self) -> set[tuple[str, int]]:
        book = self.book
        offset, end = book.half_progress, self.bridge.half_max_offset()
        queues: set[tuple[str, int]] = set()
        while offset < end:
            records, next_offset = self.bridge.read_halves(offset, LOAD_CHUNK)
            for record in records:
                dest = real_destination(record)
                topic = dest[0] if dest else ""
                key = transaction_key(record.properties, record.queue_offset)
                book.track(key, record.queue_offset, topic, get_property(record.properties, _PGROUP) or "")
                book.note_loaded(key, record.queue_offset)
                if dest is not None and not book.is_done(record.queue_offset):
                    queues.add(dest)
            if next_offset <= offset:
                break
            offset = next_offset
            await asyncio.sleep(0)
        return queues

    async def _repair(self, queues: set[tuple[str, int]]) -> int:
        """Write the op records of committed messages that have none (a crash between the two appends)."""
        repaired = 0
        for topic, queue_id in sorted(queues):
            for record in self._queue_tail(topic, queue_id):
                if record.sys_flag & MessageSysFlag.TRANSACTION_MASK != _COMMIT:
                    continue
                half = self.bridge.look_half(record.prepared_transaction_offset)
                if half is None:
                    continue
                key = transaction_key(half.properties, half.queue_offset)
                targets = self.book.targets(key, half.queue_offset)
                if not targets:
                    continue
                self.book.mark(key, targets)
                status = await self.write_ops(targets)
                log.warning("transaction_op_repaired", half_offset=half.queue_offset, topic=topic, queue=queue_id,
                            status=status.name)
                repaired += 1
        return repaired

    def _queue_tail(self, topic: str, queue_id: int) -> list[MessageRecord]:
        end = self.store.get_max_offset_in_queue(topic, queue_id)
        start = max(self.store.get_min_offset_in_queue(topic, queue_id), end - REPAIR_TAIL)
        records: list[MessageRecord] = []
        while start < end:
            result = self.store.get_messages("CID_SYS_RMQ_TRANS", topic, queue_id, start, REPAIR_TAIL)
            try:
                if result.status is not GetMessageStatus.FOUND:
                    break
                for buffer in result.message_buffers:
                    record = decode_record(buffer, 0, check_crc=False)
                    if isinstance(record, MessageRecord):
                        records.append(record)
                if result.next_begin_offset <= start:
                    break
                start = result.next_begin_offset
            finally:
                result.release()
        return records

    # -- views -----------------------------------------------------------------------------------------------

    def runtime_info(self) -> dict[str, str]:
        """GET_BROKER_RUNTIME_INFO keys: unresolved half messages (tracked) per real topic and producer group."""
        unresolved = self.book.unresolved()
        detail = ";".join(f"{topic}@{group}={count}" for (topic, group), count in sorted(unresolved.items()))
        return {"transactionHalfPending": str(sum(unresolved.values())),
                "transactionHalfPendingByTopicGroup": detail,
                "transactionHalfProgress": str(self.book.half_progress),
                "transactionHalfMaxOffset": str(self.bridge.half_max_offset())}


def _check_prepare(record: MessageRecord | None, header: EndTransactionRequestHeader) -> str | None:
    """RocketMQ's ``checkPrepareMessage``: the half must exist and match the header's group and offsets."""
    if record is None:
        return f"Find prepared transaction message failed: no half message at commit-log offset " \
               f"{header.commit_log_offset}"
    group = get_property(record.properties, _PGROUP)
    if group != header.producer_group:
        return f"The producer group wrong: the half message belongs to {group}, not {header.producer_group}"
    if record.queue_offset != header.tran_state_table_offset:
        return f"The transaction state table offset wrong: {header.tran_state_table_offset}, " \
               f"the half message is at {record.queue_offset}"
    return None


async def _ready(result: PutMessageResult) -> PutMessageResult:
    return result
