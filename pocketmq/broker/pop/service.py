"""``PopService``: RocketMQ 5's POP consumption on a master: pop (normal and FIFO), ack, batch ack, change of
invisible time, and the bookkeeping behind them (:class:`~pocketmq.broker.pop.state.PopState`), made durable as
check-point and ack records in the revive topic (:class:`~pocketmq.broker.pop.revive_log.ReviveLog`).

A pop reads up to ``maxMsgNums`` messages from the POP retry topic ``%RETRY%<group>_<topic>`` and the topic's
queues (one queue, or all from a random one), writes one check point per queue it read from, and answers only
once they are stored (as durable as a message). A FIFO pop (``order=true``) serves a queue only when nothing of
it is in flight and invisible: it hands out the queue's oldest unacked messages again, with how often each was
delivered before (``orderCountInfo``), or the next ones. An ack or change of invisible time names its message
by the receipt handle; a handle that does not name the message's current check point (unknown, malformed,
another group's, superseded, or past its invisible time) is refused with a clear remark, and nothing changes.

Recovery (:meth:`PopService.recover`): the last snapshot of ``rmq_sys_POP_STATE_<cluster>`` and a replay of the
revive queues from the offsets it names rebuild the state after any stop, a SIGKILL included; expired messages
are then revived at once. Snapshots are written every ``popStateSnapshotInterval`` ms when something changed.

The module is longer than 600 lines because every change of a message's state (pop, ack, batch ack, change of
invisible time, settle) is here beside the others: each one's undo on a failed write relies on the same locks
and ownership rules, which are easier to check in one place.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from pocketmq.broker.metadata import ConsumerOffsetManager, SubscriptionGroupManager
from pocketmq.broker.pop.long_polling import PopLongPollingService
from pocketmq.broker.pop.records import AckMsg, PopCheckPoint, PopSnapshot, pop_state_topic
from pocketmq.broker.pop.redeliver import dead_letter_message
from pocketmq.broker.pop.revive_log import ReviveLog, now_ms, stored
from pocketmq.broker.pop.state import LiveCheckPoint, PopState, QueueKey, QueueState
from pocketmq.broker.status import put_status_to_response
from pocketmq.broker.topic_manager import TopicConfigManager
from pocketmq.common.errors import RecordFormatError
from pocketmq.common.logs import get_logger
from pocketmq.common.pop import (
    ACK_TAG,
    BATCH_ACK_TAG,
    CK_TAG,
    POP_ORDER_REVIVE_QUEUE,
    PopFormatError,
    ReceiptHandle,
    msg_offset_entry,
    order_count_entries,
    pop_retry_topic,
    revive_topic,
    start_offset_entry,
)
from pocketmq.common.topic import is_retry_topic
from pocketmq.common.topic_config import PermName
from pocketmq.remoting.codes import ResponseCode
from pocketmq.store.message_store import MessageStore
from pocketmq.store.put_path import PutOutcome
from pocketmq.store.results import GetMessageResult, GetMessageStatus, PutMessageResult

log = get_logger("pocketmq.broker.pop")

MessageFilter = Callable[[int], bool]
AckEntry = tuple[str, str, int, ReceiptHandle, list[int]]
"""(group, topic as stored, queue id, receipt handle, offsets): one check point's offsets a batch ack names."""
RecordFilter = Callable[[memoryview], bool]
_READ_WRITE = PermName.PERM_READ | PermName.PERM_WRITE
_MOVED = (GetMessageStatus.OFFSET_TOO_SMALL, GetMessageStatus.OFFSET_OVERFLOW_BADLY,
          GetMessageStatus.OFFSET_FOUND_NULL)
_SKIPPED = (GetMessageStatus.NO_MATCHED_MESSAGE, GetMessageStatus.MESSAGE_WAS_REMOVING)


class PopError(Exception):
    """A request the POP service refuses: its response code and remark."""

    def __init__(self, code: int, remark: str) -> None:
        super().__init__(remark)
        self.code = code
        self.remark = remark


@dataclass(frozen=True, slots=True)
class PopSettings:
    broker_name: str
    cluster_name: str
    revive_queue_num: int = 8
    pop_from_retry_probability: int = 20
    inflight_threshold: int = 10_000
    max_invisible_time: int = 12 * 3600 * 1000


@dataclass(slots=True)
class PopRequest:
    group: str
    topic: str
    queue_id: int
    max_nums: int
    invisible_time: int
    init_mode: int
    order: bool = False
    attempt_id: str | None = None
    message_filter: MessageFilter | None = None
    record_filter: RecordFilter | None = None


@dataclass(slots=True)
class PopResult:
    pop_time: int
    invisible_time: int
    revive_qid: int
    rest_num: int = 0
    buffers: list[memoryview] = field(default_factory=list)
    start_infos: list[str] = field(default_factory=list)
    msg_infos: list[str] = field(default_factory=list)
    order_infos: list[str] = field(default_factory=list)
    #: a check point that could not be stored: (code, remark) when nothing else was found
    failure: tuple[int, str] | None = None
    #: results to release once the body is written
    reads: list[GetMessageResult] = field(default_factory=list)

    @property
    def found(self) -> bool:
        return bool(self.buffers)

    def body(self) -> bytes:
        return b"".join(self.buffers)

    def release(self) -> None:
        for result in self.reads:
            result.release()
        self.reads = []
        self.buffers = []


@dataclass(slots=True)
class _QueueRead:
    key: QueueKey
    state: QueueState
    live: LiveCheckPoint
    read: GetMessageResult
    buffers: list[memoryview]
    offsets: list[int]
    dead: list[int]


class PopService:
    """POP on one master (see the module docstring)."""

    def __init__(self, *, store: MessageStore, topics: TopicConfigManager, groups: SubscriptionGroupManager,
                 offsets: ConsumerOffsetManager, hold: PopLongPollingService, settings: PopSettings,
                 store_addr: str) -> None:
        self.store = store
        self.topics = topics
        self.groups = groups
        self.offsets = offsets
        self.hold = hold
        self.settings = settings
        self.state = PopState(settings.revive_queue_num)
        self.log = ReviveLog(store, revive_topic(settings.cluster_name), pop_state_topic(settings.cluster_name),
                             store_addr)
        self._random = random.Random()
        self._changed = False
        self._changing: set[tuple[QueueKey, int]] = set()
        #: counters since start (metrics)
        self.counters = {"popped": 0, "acked": 0, "revived": 0, "dead_lettered": 0, "changed": 0}

    # -- lifecycle ----------------------------------------------------------------------------------------

    def create_system_topics(self) -> None:
        self.topics.create_system_topic(self.log.revive_topic, self.settings.revive_queue_num, _READ_WRITE)
        self.topics.create_system_topic(self.log.state_topic, 1, _READ_WRITE)

    async def recover(self) -> dict[str, int]:
        """Rebuild the state from the last snapshot and the revive queues after it (blocking reads: the store
        serves them from its mapped files). Returns counts for the log."""
        self.create_system_topics()
        snapshot = self._last_snapshot()
        if snapshot is None:
            snapshot = PopSnapshot([self.log.revive_start(i) for i in range(self.settings.revive_queue_num)], {})
        self.state.restore(snapshot)
        counts = {"check_points": 0, "acks": 0, "bad_records": 0}
        for queue_id in range(self.settings.revive_queue_num):
            start = snapshot.revive_offsets[queue_id] if queue_id < len(snapshot.revive_offsets) else 0
            for offset, tag, body in self.log.records(queue_id, max(start, self.log.revive_start(queue_id))):
                self._replay(queue_id, offset, tag, body, counts)
                if offset % 4096 == 0:
                    await asyncio.sleep(0)  # a long replay must not starve the loop
        for key in self.state.queues:
            self._commit(key)
        counts["inflight"] = sum(self.state.inflight_by_group.values())
        # a fresh snapshot shortens the next replay; a broker that never popped writes nothing
        self._changed = bool(counts["check_points"] or counts["acks"] or counts["bad_records"])
        log.info("pop_state_recovered", **counts)
        return counts

    def _last_snapshot(self) -> PopSnapshot | None:
        record = self.log.last_snapshot()
        if record is None:
            return None
        try:
            return PopSnapshot.decode(record.body)
        except PopFormatError as exc:
            log.warning("pop_snapshot_unreadable", error=str(exc))
            return None

    def _replay(self, queue_id: int, offset: int, tag: str, body: bytes, counts: dict[str, int]) -> None:
        try:
            if tag == CK_TAG:
                self.state.replay_check_point(PopCheckPoint.decode(body), queue_id, offset)
                counts["check_points"] += 1
            elif tag in (ACK_TAG, BATCH_ACK_TAG):
                self.state.apply_ack(AckMsg.decode(body))
                counts["acks"] += 1
        except (PopFormatError, RecordFormatError):
            counts["bad_records"] += 1

    async def write_snapshot(self, force: bool = False) -> None:
        """Store a snapshot when the state changed since the last one (``force``: in any case)."""
        if not (self._changed or force):
            return
        self._changed = False
        ends = [self.log.revive_end(i) for i in range(self.settings.revive_queue_num)]
        result = await self.log.put_snapshot(self.state.snapshot(ends, now_ms()))
        if not result.status.is_stored:
            self._changed = True
            log.warning("pop_snapshot_not_stored", status=result.status.name)

    # -- offsets ------------------------------------------------------------------------------------------

    def _init_offset(self, key: QueueKey, init_mode: int) -> int:
        """Where a queue's first pop by a group starts: its committed offset, else RocketMQ's ``getInitOffset``
        (the first message for ``initMode`` 0 and retry topics, else the last one, or the first while the queue
        still holds its first message)."""
        topic, group, queue_id = key
        committed = self.offsets.query_offset(group, topic, queue_id)
        if committed >= 0:
            return committed
        low = self.store.get_min_offset_in_queue(topic, queue_id)
        if init_mode == 0 or is_retry_topic(topic) or low <= 0:
            offset = low
        else:
            offset = max(self.store.get_max_offset_in_queue(topic, queue_id) - 1, 0)
        self.offsets.commit_offset(group, topic, queue_id, offset)
        return offset

    def _commit(self, key: QueueKey) -> None:
        """The group's committed offset follows the oldest message in flight (never past it)."""
        state = self.state.queues.get(key)
        if state is None:
            return
        committed = state.committed()
        if committed >= 0:
            topic, group, queue_id = key
            self.offsets.commit_offset(group, topic, queue_id, committed)
        self._changed = True

    # -- pop ----------------------------------------------------------------------------------------------

    def pop(self, req: PopRequest) -> PopResult | Awaitable[PopResult]:
        """Read what the request may have and register its check points, synchronously; the result at once
        when nothing was read, else an awaitable of it once the check points are stored."""
        now = now_ms()
        result = PopResult(now, req.invisible_time, POP_ORDER_REVIVE_QUEUE if req.order else 0)
        reads: list[_QueueRead] = []
        for topic, queue_id in self._candidates(req):
            want = req.max_nums - sum(len(r.offsets) for r in reads)
            if want <= 0:
                result.rest_num += self._backlog(topic, req.group, queue_id)
                continue
            read, rest = self._read_queue(req, topic, queue_id, want, now)
            result.rest_num += rest
            if read is not None:
                reads.append(read)
        if not reads:
            return result
        if not req.order:
            result.revive_qid = reads[0].live.revive_qid
        return self._store_check_points(req, result, reads)

    def _candidates(self, req: PopRequest) -> list[tuple[str, int]]:
        """(topic, queue) in the order they are tried: the POP retry topic first one time in five (RocketMQ's
        ``popFromRetryProbability``), then the topic's queues from a random one, then the retry topic."""
        config = self.topics.get(req.topic)
        if config is None:
            return []
        if req.queue_id >= 0:
            main = [(req.topic, req.queue_id)]
        else:
            count = config.read_queue_nums
            first = self._random.randrange(count) if count else 0
            main = [(req.topic, (first + i) % count) for i in range(count)]
        if req.order:
            return main
        retry_name = pop_retry_topic(req.topic, req.group)
        retry_config = self.topics.get(retry_name)
        retry = [(retry_name, q) for q in range(retry_config.read_queue_nums)] if retry_config else []
        if self._random.randrange(100) < self.settings.pop_from_retry_probability:
            return retry + main
        return main + retry

    def _backlog(self, topic: str, group: str, queue_id: int) -> int:
        state = self.state.queues.get((topic, group, queue_id))
        start = state.pop_offset if state is not None and state.pop_offset >= 0 else \
            self.offsets.query_offset(group, topic, queue_id)
        return max(0, self.store.get_max_offset_in_queue(topic, queue_id) - max(start, 0))

    def _read_queue(self, req: PopRequest, topic: str, queue_id: int, want: int,
                    now: int) -> tuple[_QueueRead | None, int]:
        key = (topic, req.group, queue_id)
        state = self.state.queue(key)
        if state.locked:
            return None, self._backlog(topic, req.group, queue_id)
        if state.pop_offset < 0:
            state.pop_offset = self._init_offset(key, req.init_mode)
        if req.order:
            if state.blocked(now, req.attempt_id):
                return None, 0
            oldest = state.oldest()
            start = state.pop_offset if oldest is None else min(oldest, state.pop_offset)
        else:
            if len(state.owners) >= self.settings.inflight_threshold:
                return None, self._backlog(topic, req.group, queue_id)
            start = state.pop_offset
        got = self._get(req, topic, queue_id, start, want)
        if got.status in _MOVED and start == state.pop_offset and got.next_begin_offset != start:
            log.info("pop_offset_corrected", topic=topic, group=req.group, queue_id=queue_id, offset=start,
                     to=got.next_begin_offset)
            got.release()
            start = state.pop_offset = got.next_begin_offset
            self._commit(key)
            got = self._get(req, topic, queue_id, start, want)
        rest = max(0, got.max_offset - got.next_begin_offset)
        if got.status is not GetMessageStatus.FOUND:
            if got.status in _SKIPPED and start == state.pop_offset and got.next_begin_offset > start:
                state.pop_offset = got.next_begin_offset
                self._commit(key)
            got.release()
            return None, rest
        return self._take(req, key, state, got, start, now), rest

    def _get(self, req: PopRequest, topic: str, queue_id: int, offset: int, want: int) -> GetMessageResult:
        return self.store.get_messages(req.group, topic, queue_id, offset, want, None, req.message_filter,
                                       req.record_filter)

    def _take(self, req: PopRequest, key: QueueKey, state: QueueState, got: GetMessageResult, start: int,
              now: int) -> _QueueRead | None:
        """Register the check point of what was read (a FIFO pop skips the acked messages it re-read)."""
        buffers, offsets = got.message_buffers, got.message_queue_offsets
        if req.order:
            keep = [i for i, o in enumerate(offsets) if o >= state.pop_offset or o in state.owners]
            buffers, offsets = [buffers[i] for i in keep], [offsets[i] for i in keep]
        if not offsets:
            state.pop_offset = max(state.pop_offset, got.next_begin_offset)
            got.release()
            return None
        ck = PopCheckPoint(key[0], req.group, key[2], start, now, req.invisible_time, self.settings.broker_name,
                           list(offsets), req.order)
        live = self.state.register(ck, self.state.revive_qid(key))
        live.revive_offset = self.log.revive_end(live.revive_qid)  # the floor of its record, for snapshots
        state.pending, state.locked = live, True
        state.pop_offset = max(state.pop_offset, got.next_begin_offset)
        if req.order:
            state.attempt_id = req.attempt_id
        dead = self._past_max_attempts(req.group, state, offsets) if req.order else []
        if dead:
            keep = [i for i, o in enumerate(offsets) if o not in dead]
            buffers, offsets = [buffers[i] for i in keep], [offsets[i] for i in keep]
        self._changed = True
        return _QueueRead(key, state, live, got, list(buffers), list(offsets), dead)

    def _past_max_attempts(self, group: str, state: QueueState, offsets: list[int]) -> list[int]:
        config = self.groups.find_or_create(group)
        limit = config.retry_max_times if config is not None else 16
        return [o for o in offsets if state.counts.get(o, 0) > limit]

    def _store_check_points(self, req: PopRequest, result: PopResult,
                            reads: list[_QueueRead]) -> PopResult | Awaitable[PopResult]:
        """Write one check point per queue read; the result at once when the store had nothing to wait for."""
        outcomes: list[PutOutcome] = []
        try:
            for read in reads:
                outcomes.append(self.log.put_check_point(read.live.ck, read.live.revive_qid))
        except BaseException:
            self._undo_unstored(reads, [])
            raise
        if not any(read.dead for read in reads) and all(isinstance(o, PutMessageResult) for o in outcomes):
            puts = [o for o in outcomes if isinstance(o, PutMessageResult)]
            return self._finish_pop(req, result, reads, puts)[0]
        return self._finish_pop_later(req, result, reads, outcomes)

    async def _finish_pop_later(self, req: PopRequest, result: PopResult, reads: list[_QueueRead],
                                outcomes: list[PutOutcome]) -> PopResult:
        try:
            puts = await asyncio.gather(*(stored(o) for o in outcomes))
        except BaseException:
            self._undo_unstored(reads, [])
            raise
        result, done = self._finish_pop(req, result, reads, puts)
        for read in done:
            if read.dead:
                await self._dead_letter_in_order(read)
        return result

    def _finish_pop(self, req: PopRequest, result: PopResult, reads: list[_QueueRead],
                    puts: list[PutMessageResult]) -> tuple[PopResult, list[_QueueRead]]:
        done: list[_QueueRead] = []
        try:
            for read, put in zip(reads, puts, strict=True):
                if self._settle_pop(read, put):
                    done.append(read)
                elif result.failure is None:
                    result.failure = put_status_to_response(put.status)  # type: ignore[assignment]
        finally:
            self._undo_unstored(reads, done)
        for read in done:
            self._add_to_result(req, result, read)
        if result.rest_num > 0 and result.found:
            self.hold.wake(req.topic, req.group)  # let other parked consumers take the rest
        return result, done

    def _undo_unstored(self, reads: list[_QueueRead], done: list[_QueueRead]) -> None:
        for read in reads:
            if read not in done and read.state.pending is read.live:
                self._undo_pop(read)

    def _settle_pop(self, read: _QueueRead, put: PutMessageResult) -> bool:
        state, live = read.state, read.live
        state.pending, state.locked = None, False
        append = put.append_result
        if not put.status.is_stored or append is None:
            log.warning("pop_check_point_not_stored", topic=live.ck.topic, group=live.ck.group,
                        queue_id=live.ck.queue_id, status=put.status.name)
            self._undo_pop(read)
            return False
        live.stored, live.revive_offset = True, append.queue_offset
        self.counters["popped"] += len(read.offsets)
        self._commit(read.key)
        return True

    def _undo_pop(self, read: _QueueRead) -> None:
        """A check point that was not stored: its messages were not handed out, pop them again."""
        state = read.state
        state.pending, state.locked = None, False
        self.state.unregister(read.live)
        state.pop_offset = min(state.pop_offset, read.live.ck.start_offset)
        read.read.release()
        self._commit(read.key)

    def _add_to_result(self, req: PopRequest, result: PopResult, read: _QueueRead) -> None:
        topic, _group, queue_id = read.key
        result.reads.append(read.read)
        if not read.offsets:
            return
        result.buffers.extend(read.buffers)
        result.start_infos.append(start_offset_entry(topic, queue_id, read.live.ck.start_offset))
        result.msg_infos.append(msg_offset_entry(topic, queue_id, read.offsets))
        if req.order:
            counts = {o: read.state.counts.get(o, 0) for o in read.offsets}
            delivered = {o: c for o, c in counts.items() if c > 0}
            result.order_infos.extend(order_count_entries(topic, queue_id, delivered, min(counts.values())))

    async def _dead_letter_in_order(self, read: _QueueRead) -> None:
        """FIFO messages delivered more than the group's ``retryMaxTimes``: to ``%DLQ%<group>``, then settled."""
        for offset in read.dead:
            record = self.log.record_at(read.key[0], read.key[2], offset)
            if record is not None:
                put = await self.log.put(dead_letter_message(record, read.live.ck, self.topics))
                if not put.status.is_stored:
                    continue  # still in flight: tried again at its next delivery
                self.counters["dead_lettered"] += 1
            settled = self.settle(read.live, [offset])
            if not isinstance(settled, bool):
                await settled

    # -- settle (ack, revive) -----------------------------------------------------------------------------

    def settle(self, live: LiveCheckPoint, offsets: list[int]) -> bool | Awaitable[bool]:
        """Settle ``offsets`` of ``live`` now and write their ack record; on failure they are in flight again.
        Whether it was stored, or an awaitable of it when the store has to wait."""
        settled = self.state.settle_many(live, offsets)
        if not settled:
            return False
        live.pending_acks += 1
        key = (live.ck.topic, live.ck.group, live.ck.queue_id)
        self._commit(key)
        ack = AckMsg(live.ck.topic, live.ck.group, live.ck.queue_id, live.ck.start_offset, live.ck.pop_time,
                     live.ck.broker_name, settled)
        try:
            outcome = self.log.put_ack(ack, live.revive_qid)
        except BaseException:
            self._ack_stored(live, key, settled, None)
            raise
        if isinstance(outcome, PutMessageResult):
            return self._ack_stored(live, key, settled, outcome)
        return self._ack_later(live, key, settled, outcome)

    async def _ack_later(self, live: LiveCheckPoint, key: QueueKey, settled: list[int],
                         outcome: Awaitable[PutMessageResult]) -> bool:
        try:
            put = await outcome
        except BaseException:
            self._ack_stored(live, key, settled, None)
            raise
        return self._ack_stored(live, key, settled, put)

    def _ack_stored(self, live: LiveCheckPoint, key: QueueKey, settled: list[int],
                    put: PutMessageResult | None) -> bool:
        """An ack record was written (``put``), failed, or was abandoned (None): settled for good, or in flight
        again."""
        ok = put is not None and put.status.is_stored
        if not ok:
            if put is not None:
                log.warning("pop_ack_not_stored", status=put.status.name, topic=live.ck.topic, group=live.ck.group)
            self.state.reown(live, settled)
        self.state.ack_done(live)
        self._commit(key)
        if live.ck.order:
            self.hold.wake(live.ck.topic, live.ck.group)
        return ok

    # -- ack and change of invisible time -----------------------------------------------------------------

    def find(self, group: str, topic: str, queue_id: int, offset: int, handle: ReceiptHandle,
             now: int) -> LiveCheckPoint:
        """The check point that owns the message a handle names, or :class:`PopError` saying why not."""
        if handle.broker_name != self.settings.broker_name:
            raise PopError(ResponseCode.NO_MESSAGE, f"the receipt handle is for broker {handle.broker_name}, "
                                                    f"this is {self.settings.broker_name}")
        if handle.offset >= 0 and handle.offset != offset:
            raise PopError(ResponseCode.NO_MESSAGE, f"the receipt handle names offset {handle.offset}, "
                                                    f"the request {offset}")
        if self._changing and ((topic, group, queue_id), offset) in self._changing:
            raise PopError(ResponseCode.SYSTEM_BUSY, "a change of this message's invisible time is in progress")
        live = self.state.find((topic, group, queue_id, handle.start_offset, handle.retrieve_time), offset)
        if live is None:
            raise PopError(ResponseCode.NO_MESSAGE, self._why_unknown(group, topic, queue_id, offset, handle, now))
        if live.deadline <= now:
            raise PopError(ResponseCode.NO_MESSAGE, f"the receipt handle expired at {live.deadline} (now {now}): "
                                                    "the message is visible again")
        return live

    def _why_unknown(self, group: str, topic: str, queue_id: int, offset: int, handle: ReceiptHandle,
                     now: int) -> str:
        where = f"group {group}, topic {topic}, queue {queue_id}, offset {offset}"
        if handle.next_visible_time <= now:
            return f"the receipt handle expired at {handle.next_visible_time} ({where})"
        state = self.state.queues.get((topic, group, queue_id))
        if state is None:
            return f"no message of {where} is in flight: the handle is another group's or topic's"
        if offset in state.owners:
            return f"the receipt handle of {where} is stale: the message's invisible time was changed since"
        return f"no message of {where} is in flight: it was acked or revived already"

    def ack(self, group: str, topic: str, queue_id: int, offset: int,
            handle: ReceiptHandle) -> Awaitable[None] | None:
        """Ack one message: done (None), or an awaitable while its record is stored; :class:`PopError` if the
        handle does not name it or the record could not be stored."""
        live = self.find(group, topic, queue_id, offset, handle, now_ms())
        outcome = self.settle(live, [offset])
        if isinstance(outcome, bool):
            self._acked(outcome, 1)
            return None
        return self._ack_done_later(outcome)

    async def _ack_done_later(self, outcome: Awaitable[bool]) -> None:
        self._acked(await outcome, 1)

    def _acked(self, ok: bool, count: int) -> None:
        if not ok:
            raise PopError(ResponseCode.SYSTEM_ERROR, "the ack record could not be stored; the message stays "
                                                      "in flight")
        self.counters["acked"] += count

    def batch_ack(self, acks: list[AckEntry]) -> list[str] | Awaitable[list[str]]:
        """Ack the offsets of each (group, topic, queue, handle, offsets); the problems of those refused (the rest
        are acked), one ack record per check point. The problems at once when no record had to be waited for."""
        now = now_ms()
        problems: list[str] = []
        by_check_point: dict[int, tuple[LiveCheckPoint, list[int]]] = {}
        for group, topic, queue_id, handle, offsets in acks:
            key = (topic, group, queue_id, handle.start_offset, handle.retrieve_time)
            state = self.state.queues.get((topic, group, queue_id))
            owners = state.owners if state is not None and handle.broker_name == self.settings.broker_name else {}
            for offset in offsets:
                live = owners.get(offset)
                # the common case inline; anything else through find(), which says why
                if live is None or live.ck.key != key or live.deadline <= now or self._changing:
                    try:
                        live = self.find(group, topic, queue_id, offset, handle, now)
                    except PopError as exc:
                        problems.append(exc.remark)
                        continue
                entry = by_check_point.get(id(live))
                if entry is None:
                    by_check_point[id(live)] = (live, [offset])
                else:
                    entry[1].append(offset)
        waits: list[tuple[list[int], Awaitable[bool]]] = []
        for live, owned in by_check_point.values():
            outcome = self.settle(live, owned)
            if isinstance(outcome, bool):
                self._batch_acked(outcome, owned, problems)
            else:
                waits.append((owned, outcome))
        return self._batch_ack_later(waits, problems) if waits else problems

    async def _batch_ack_later(self, waits: list[tuple[list[int], Awaitable[bool]]],
                               problems: list[str]) -> list[str]:
        results = await asyncio.gather(*(outcome for _offsets, outcome in waits))
        for (offsets, _outcome), ok in zip(waits, results, strict=True):
            self._batch_acked(ok, offsets, problems)
        return problems

    def _batch_acked(self, ok: bool, offsets: list[int], problems: list[str]) -> None:
        if ok:
            self.counters["acked"] += len(offsets)
        else:
            problems.append(f"the ack record of offsets {offsets} could not be stored")

    async def change_invisible_time(self, group: str, topic: str, queue_id: int, offset: int,
                                    handle: ReceiptHandle, invisible_time: int) -> tuple[int, int]:
        """Make the message invisible for ``invisible_time`` ms from now: a new check point takes it over.
        Returns the new handle's (popTime, invisibleTime)."""
        if not 0 <= invisible_time <= self.settings.max_invisible_time:
            raise PopError(ResponseCode.INVALID_PARAMETER, f"invisibleTime {invisible_time} is out of range "
                                                           f"[0, {self.settings.max_invisible_time}] ms")
        now = now_ms()
        live = self.find(group, topic, queue_id, offset, handle, now)
        old = live.ck
        if old.order:  # RocketMQ keeps a FIFO message's pop time and moves its deadline
            pop_time, invisible = old.pop_time, now + invisible_time - old.pop_time
        else:
            pop_time, invisible = now, invisible_time
        ck = PopCheckPoint(topic, group, queue_id, offset, pop_time, invisible, old.broker_name, [offset], old.order)
        key = (topic, group, queue_id)
        self._changing.add((key, offset))
        try:
            put = await stored(self.log.put_check_point(ck, live.revive_qid))
        finally:
            self._changing.discard((key, offset))
        append = put.append_result
        if not put.status.is_stored or append is None:
            code, remark = put_status_to_response(put.status)
            raise PopError(code, f"the new check point could not be stored ({remark}); the message keeps its "
                                 "invisible time")
        if self.state.find(old.key, offset) is live:  # still in flight: the new check point takes it over
            new = self.state.register(ck, live.revive_qid)
            new.stored, new.revive_offset = True, append.queue_offset
        self.counters["changed"] += 1
        self._commit(key)
        if old.order:
            self.hold.wake(topic, group)
        return pop_time, invisible

    # -- notification -------------------------------------------------------------------------------------

    def has_message(self, group: str, topic: str, queue_id: int, order: bool, attempt_id: str | None) -> bool:
        """Whether a pop of the group would find something (NOTIFICATION)."""
        config = self.topics.get(topic)
        if config is None:
            return False
        now = now_ms()
        queues = [queue_id] if queue_id >= 0 else list(range(config.read_queue_nums))
        candidates = [(topic, q) for q in queues]
        if not order:
            retry = pop_retry_topic(topic, group)
            retry_config = self.topics.get(retry)
            if retry_config is not None:
                candidates += [(retry, q) for q in range(retry_config.read_queue_nums)]
        for name, q in candidates:
            state = self.state.queues.get((name, group, q))
            if order and state is not None:
                if state.blocked(now, attempt_id):
                    continue
                if state.owners:
                    return True
            if self._backlog(name, group, q) > 0:
                return True
        return False

    # -- views --------------------------------------------------------------------------------------------

    def runtime_info(self) -> dict[str, str]:
        """GET_BROKER_RUNTIME_INFO keys: messages in flight (in all, per group), the revive backlog (expired, not
        revived yet), and the counters since start."""
        by_group = self.state.inflight_by_group
        info = {"popInflight": str(sum(by_group.values())),
                "popInflightByGroup": ";".join(f"{g}={n}" for g, n in sorted(by_group.items())),
                "popReviveBacklog": str(self.state.expired_count(now_ms()))}
        info.update({f"popMessages{name.title().replace('_', '')}": str(n) for name, n in self.counters.items()})
        return info
