"""``TimerMessageService``: delivers timer messages at their millisecond (RocketMQ 5's ``TimerMessageStore``, re-cut).

The store keeps each waiting timer message in ``rmq_sys_wheel_timer`` queue 0 with its delivery time as the
consume-queue tag code (:mod:`pocketmq.store.timer`): that queue is the persistent timer log, replicated and
recovered as every queue is. This service (masters only) keeps the pending ones in a :class:`TimerWheel` in
memory (16 bytes each, in per-second buckets), and every ``timerTickMs`` (10 ms) re-puts each due message to its
real topic and queue through the store's one put path, keeping ``TIMER_OUT_MS`` and adding ``TIMER_ENQUEUE_MS``
and ``TIMER_DEQUEUE_MS`` as RocketMQ does.

Durability. Once a second (when something fired) a checkpoint record in ``rmq_sys_TIMER_CHECKPOINT`` (queue 0)
says ``readTimeMs``: every timer due before it has fired and its message is stored, and ``queueOffset``: no
timer below it in the timer queue is still pending. At start, the service reads the last checkpoint and scans
the timer queue from ``queueOffset``, taking back every timer due at or after ``readTimeMs``. ``readTimeMs`` is
never later than the time it was taken, so a timer put after a checkpoint (due after its put) is never skipped;
one that fired after the last checkpoint fires again after a crash (at least once, never early, never lost).
The checkpoint is a record too: a slave holds it byte for byte.

Recall (RocketMQ 5.3). A recall is a marker timer message due just after the message it recalls, with
``TIMER_DEL_UNIQKEY`` = ``<real topic>+<UNIQ_KEY>`` (:mod:`pocketmq.common.recall`). A marker is noted when it
arrives or is recovered, so its key is known before the original is due; a timer whose key is noted is dropped
when due instead of delivered, and a marker is never delivered: its key is forgotten when it is due. Both are
recovered as any timer, so a recall survives a restart and a failover.
"""

from __future__ import annotations

import array
import asyncio
import bisect
import heapq
import json
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from pocketmq.broker.redeliver import redelivered, stored_message
from pocketmq.broker.topic_manager import TopicConfigManager
from pocketmq.common.logs import get_logger
from pocketmq.common.message import MessageConst, encode_properties, get_property, parse_properties
from pocketmq.common.recall import delete_key
from pocketmq.common.record import MessageRecord, parse_host_port
from pocketmq.common.service import PeriodicService
from pocketmq.common.topic import RMQ_SYS_WHEEL_TIMER_TOPIC
from pocketmq.common.topic_config import PermName
from pocketmq.remoting.codes import RequestCode, ResponseCode
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.connection import Connection, Handler
from pocketmq.store.consume_queue import BLANK_UNIT_SIZE, CQ_UNIT
from pocketmq.store.message import MessageExtBrokerInner
from pocketmq.store.message_store import MessageStore
from pocketmq.store.results import PutMessageResult

log = get_logger("pocketmq.broker.timer")

TIMER_TOPIC = RMQ_SYS_WHEEL_TIMER_TOPIC
TIMER_CHECKPOINT_TOPIC = "rmq_sys_TIMER_CHECKPOINT"
_CHUNK_SHIFT = 16
"""Pending timers are counted per 65536 queue offsets: the lowest chunk with one is the scan start."""
_FIRE_BATCH = 4096
"""Timers fired per tick at most; the rest fire in the next tick, which follows at once."""
_RETRY_AFTER_MS = 1000
_CHECKPOINT_EVERY_MS = 1000
_SCAN_BATCH = 4096
_LATENESS_KEPT = 100_000
"""Recent lateness samples kept for the metrics' percentiles (a bounded window)."""
_REAL_TOPIC = MessageConst.PROPERTY_REAL_TOPIC
_REAL_QID = MessageConst.PROPERTY_REAL_QUEUE_ID
_DEL_KEY = MessageConst.PROPERTY_TIMER_DEL_UNIQKEY
_DEL_MARKER = _DEL_KEY + "\x01"
_UNIQ_KEY = MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX


def now_ms() -> int:
    return int(time.time() * 1000)


class TimerWheel:
    """Pending timers as (due ms, timer-queue offset): per-second buckets of ``array('q')`` (pairs), a heap of
    bucket seconds, and the bucket being drained kept sorted."""

    def __init__(self) -> None:
        self._buckets: dict[int, array.array[int]] = {}
        self._seconds: list[int] = []
        self._current: list[tuple[int, int]] = []
        self._current_at = 0
        self._current_second = -1
        self._chunks: dict[int, int] = {}
        self.pending = 0

    def add(self, due: int, offset: int) -> None:
        second = due // 1000
        if second == self._current_second:
            bisect.insort(self._current, (due, offset), lo=self._current_at)
        else:
            bucket = self._buckets.get(second)
            if bucket is None:
                bucket = self._buckets[second] = array.array("q")
                heapq.heappush(self._seconds, second)
            bucket.append(due)
            bucket.append(offset)
        chunk = offset >> _CHUNK_SHIFT
        self._chunks[chunk] = self._chunks.get(chunk, 0) + 1
        self.pending += 1

    def pop_due(self, now: int, limit: int) -> list[tuple[int, int]]:
        """Up to ``limit`` timers due at ``now`` or before, earliest first."""
        out: list[tuple[int, int]] = []
        while len(out) < limit:
            if self._current_at >= len(self._current):
                if not self._seconds or self._seconds[0] > now // 1000:
                    break
                self._open(heapq.heappop(self._seconds))
                continue
            due, offset = self._current[self._current_at]
            if due > now:
                break
            self._current_at += 1
            out.append((due, offset))
        if self._current_at >= len(self._current) and self._current:
            self._current, self._current_at, self._current_second = [], 0, -1
        for _due, offset in out:
            self._forget(offset)
        return out

    def _open(self, second: int) -> None:
        bucket = self._buckets.pop(second)
        self._current = sorted(zip(bucket[::2], bucket[1::2], strict=True))
        self._current_at, self._current_second = 0, second

    def _forget(self, offset: int) -> None:
        chunk = offset >> _CHUNK_SHIFT
        left = self._chunks[chunk] - 1
        if left:
            self._chunks[chunk] = left
        else:
            del self._chunks[chunk]
        self.pending -= 1

    def min_due(self) -> int | None:
        if self._current_at < len(self._current):
            return self._current[self._current_at][0]
        if not self._seconds:
            return None
        return min(self._buckets[self._seconds[0]][::2])

    def min_offset(self) -> int | None:
        """A queue offset at or below every pending timer's."""
        return min(self._chunks) << _CHUNK_SHIFT if self._chunks else None


@dataclass(frozen=True, slots=True)
class TimerCheckpoint:
    read_time_ms: int
    queue_offset: int

    def encode(self) -> bytes:
        return json.dumps({"queueOffset": self.queue_offset, "readTimeMs": self.read_time_ms},
                          separators=(",", ":"), sort_keys=True).encode()

    @classmethod
    def decode(cls, raw: bytes) -> TimerCheckpoint:
        data = json.loads(raw)
        return cls(int(data["readTimeMs"]), int(data["queueOffset"]))


class TimerMessageService(PeriodicService):
    """See the module docstring. :meth:`recover` before :meth:`start`; :meth:`on_arrival` is the store's
    arrival listener (a timer put joins the wheel)."""

    name = "timer-message"

    def __init__(self, store: MessageStore, topics: TopicConfigManager, store_addr: str, tick_ms: int = 10) -> None:
        super().__init__(tick_ms / 1000, initial_delay=0)
        self.store = store
        self.topics = topics
        self.wheel = TimerWheel()
        self._host = parse_host_port(store_addr)
        self._retry: deque[tuple[int, int, int]] = deque()  # (next attempt, due, offset)
        self._last_checkpoint = 0
        self.fired_since_checkpoint = 0
        self.lateness: deque[int] = deque(maxlen=_LATENESS_KEPT)
        self.fired = 0
        self.recovered = 0
        #: pending timers per real topic (RocketMQ's ``timingCount``: GET_TIMER_METRICS)
        self.pending_by_topic: dict[str, int] = {}
        #: recall keys of the pending markers, with how many markers name each (module docstring)
        self.recalls: dict[str, int] = {}
        #: timers dropped because they were recalled
        self.recalled = 0

    # -- recovery ----------------------------------------------------------------------------------------

    async def recover(self) -> None:
        """Take back the pending timers: scan the timer queue from the last checkpoint."""
        for topic, queues in ((TIMER_TOPIC, 1), (TIMER_CHECKPOINT_TOPIC, 1)):
            self.topics.create_system_topic(topic, queues, PermName.PERM_READ | PermName.PERM_WRITE)
        checkpoint = self._last_checkpoint_record()
        cq = self.store.find_consume_queue(TIMER_TOPIC, 0)
        if cq is None:
            return
        read_time = checkpoint.read_time_ms if checkpoint else 0
        offset = max(checkpoint.queue_offset if checkpoint else 0, cq.min_offset)
        # The end is read again each batch: a unit dispatched while the scan yields (a takeover's replicated tail)
        # is scanned, and none can come between the last read and the arrival listener (no yield after it).
        while offset < (end := cq.max_offset):
            units = cq.get_units(offset, min(_SCAN_BATCH, end - offset))
            if units is None:
                offset += 1
                continue
            for phys, size, due in CQ_UNIT.iter_unpack(units):
                if size != BLANK_UNIT_SIZE and due >= read_time:
                    self.wheel.add(due, offset)
                    self._arrived(self.store.look_message_by_offset(phys, size))
                    self.recovered += 1
                offset += 1
            units.release()
            await asyncio.sleep(0)
        log.info("timers_recovered", pending=self.wheel.pending, read_time_ms=read_time, scanned_to=offset)

    def _last_checkpoint_record(self) -> TimerCheckpoint | None:
        record = self._record_at(TIMER_CHECKPOINT_TOPIC, self.store.get_max_offset_in_queue(
            TIMER_CHECKPOINT_TOPIC, 0) - 1)
        if record is None:
            return None
        try:
            return TimerCheckpoint.decode(record.body)
        except (ValueError, KeyError, TypeError) as exc:
            log.warning("timer_checkpoint_unreadable", error=str(exc))
            return None

    def on_arrival(self, topic: str, queue_id: int, max_offset: int, tags_code: int, store_timestamp: int) -> None:
        if topic == TIMER_TOPIC:
            self.wheel.add(tags_code, max_offset - 1)
            self._arrived(self._record_at(TIMER_TOPIC, max_offset - 1))

    def _arrived(self, record: MessageRecord | None) -> None:
        """A pending timer counted in; a recall marker's key noted."""
        self._count(record, 1)
        if record is not None and _DEL_MARKER in record.properties:
            key = get_property(record.properties, _DEL_KEY)
            if key:
                self.recalls[key] = self.recalls.get(key, 0) + 1

    def _recall_drops(self, record: MessageRecord) -> bool:
        """Whether a due timer is not delivered: a recall marker (its key forgotten) or a recalled message."""
        key = get_property(record.properties, _DEL_KEY) if _DEL_MARKER in record.properties else None
        if key:  # an empty key names nothing: such a timer is delivered, as it was never noted
            left = self.recalls.get(key, 0) - 1
            if left > 0:
                self.recalls[key] = left
            else:
                self.recalls.pop(key, None)
        else:
            uniq = get_property(record.properties, _UNIQ_KEY)
            topic = get_property(record.properties, _REAL_TOPIC)
            if uniq is None or topic is None or delete_key(topic, uniq) not in self.recalls:
                return False
            self.recalled += 1
        self._count(record, -1)
        self.fired_since_checkpoint += 1
        return True

    def _count(self, record: MessageRecord | None, delta: int, topic: str | None = None) -> None:
        """Count a pending timer of ``topic`` (else the record's real topic) in or out."""
        if topic is None:
            topic = get_property(record.properties, _REAL_TOPIC) if record is not None else None
            if topic is None:
                return
        count = self.pending_by_topic.get(topic, 0) + delta
        if count > 0:
            self.pending_by_topic[topic] = count
        else:
            self.pending_by_topic.pop(topic, None)

    # -- firing ------------------------------------------------------------------------------------------

    async def tick(self) -> None:
        now = now_ms()
        due = self._due_retries(now)
        due.extend(self.wheel.pop_due(now, _FIRE_BATCH - len(due)))
        if due:
            await self._fire(due, now)
            if len(due) >= _FIRE_BATCH:
                self.trigger()  # more are due: the next tick at once
        if now - self._last_checkpoint >= _CHECKPOINT_EVERY_MS and self.fired_since_checkpoint:
            await self.write_checkpoint(now)

    def _due_retries(self, now: int) -> list[tuple[int, int]]:
        out: list[tuple[int, int]] = []
        while self._retry and self._retry[0][0] <= now and len(out) < _FIRE_BATCH:
            _at, due, offset = self._retry.popleft()
            out.append((due, offset))
        return out

    async def _fire(self, due: list[tuple[int, int]], now: int) -> None:
        waits: list[tuple[int, int, str, asyncio.Future[PutMessageResult] | PutMessageResult]] = []
        for deliver, offset in due:
            record = self._record_at(TIMER_TOPIC, offset)
            if record is None:
                log.warning("timer_message_gone", offset=offset, due=deliver)
                continue
            if self.recalls and self._recall_drops(record):  # no recall pending: no property read
                continue
            msg = self._real_message(record, now)
            outcome = self.store.put(msg)
            waits.append((deliver, offset, msg.topic, outcome if isinstance(outcome, PutMessageResult)
                          else asyncio.ensure_future(outcome)))
        for deliver, offset, topic, outcome in waits:
            result = outcome if isinstance(outcome, PutMessageResult) else await outcome
            if result.status.is_stored and result.append_result is not None:
                self.fired += 1
                self.fired_since_checkpoint += 1
                self.lateness.append(result.append_result.store_timestamp - deliver)
                self._count(None, -1, topic)
            else:
                log.warning("timer_fire_not_stored", status=result.status.name, offset=offset)
                self._retry.append((now + _RETRY_AFTER_MS, deliver, offset))

    def _real_message(self, record: MessageRecord, now: int) -> MessageExtBrokerInner:
        """The timer message back on its real topic and queue, without REAL_TOPIC/REAL_QID, with the times."""
        text = record.properties
        head, sep, tail = text.rpartition("\x02" + _REAL_TOPIC + "\x01")
        topic, _, qid_item = tail.partition("\x02")
        if sep and qid_item.startswith(_REAL_QID + "\x01") and "\x02" not in qid_item:
            queue_id = int(qid_item[len(_REAL_QID) + 1:] or 0)  # what the store appended, last: cut it off
        else:  # someone else's layout: parse it all
            props = parse_properties(text)
            topic, queue_id = props.pop(_REAL_TOPIC, record.topic), int(props.pop(_REAL_QID, "0") or 0)
            head = encode_properties(props)
        properties = (f"{head}\x02{MessageConst.PROPERTY_TIMER_ENQUEUE_MS}\x01{record.store_timestamp}"
                      f"\x02{MessageConst.PROPERTY_TIMER_DEQUEUE_MS}\x01{now}")
        return redelivered(record, topic=topic, queue_id=queue_id, properties=properties,
                           reconsume_times=record.reconsume_times)

    def _record_at(self, topic: str, offset: int) -> MessageRecord | None:
        return stored_message(self.store, topic, 0, offset)

    # -- checkpoint --------------------------------------------------------------------------------------

    def checkpoint(self, now: int) -> TimerCheckpoint:
        """What is true now (see the module docstring): no fire is in flight between ticks."""
        dues = [d for d in (self.wheel.min_due(), min((d for _a, d, _o in self._retry), default=None))
                if d is not None]
        offsets = [o for o in (self.wheel.min_offset(), min((o for _a, _d, o in self._retry), default=None))
                   if o is not None]
        read_time = min([now + 1, *dues])  # every timer due up to ``now`` fired (or is still in ``dues``)
        queue_offset = min(offsets) if offsets else self.store.get_max_offset_in_queue(TIMER_TOPIC, 0)
        return TimerCheckpoint(read_time, queue_offset)

    async def write_checkpoint(self, now: int | None = None) -> None:
        now = now_ms() if now is None else now
        checkpoint = self.checkpoint(now)
        msg = MessageExtBrokerInner(topic=TIMER_CHECKPOINT_TOPIC, body=checkpoint.encode(), queue_id=0,
                                    properties="TAGS\x01checkpoint", born_timestamp=now, born_host=self._host)
        outcome = self.store.put(msg)
        result = outcome if isinstance(outcome, PutMessageResult) else await outcome
        if result.status.is_stored:
            self._last_checkpoint, self.fired_since_checkpoint = now, 0

    # -- metrics -----------------------------------------------------------------------------------------

    def lateness_percentiles(self) -> dict[str, float]:
        """p50/p99/max lateness (ms) of the recent fires (store time of the delivered message minus due)."""
        if not self.lateness:
            return {}
        ordered = sorted(self.lateness)

        def pick(quantile: float) -> float:
            return float(ordered[min(len(ordered) - 1, int(quantile * len(ordered)))])

        return {"p50": pick(0.5), "p99": pick(0.99), "max": float(ordered[-1])}

    def runtime_info(self) -> dict[str, str]:
        """GET_BROKER_RUNTIME_INFO keys: pending timers, how far the oldest one is overdue, fires since start, and
        the recent lateness percentiles (ms)."""
        due = self.wheel.min_due()
        info = {"timerPending": str(self.wheel.pending + len(self._retry)), "timerFired": str(self.fired),
                "timerRecalled": str(self.recalled),
                "timerOverdueMs": str(max(0, now_ms() - due) if due is not None else 0)}
        info.update({f"timerLateness{name.title()}Ms": f"{value:.0f}"
                     for name, value in self.lateness_percentiles().items()})
        return info

    def metrics_body(self) -> bytes:
        """GET_TIMER_METRICS' body as RocketMQ 5's ``TimerMetricsSerializeWrapper`` serialises it: ``timingCount``
        (per real topic, the timers waiting and when the count was read) and a ``dataVersion``."""
        now = now_ms()
        table = {topic: {"count": count, "timeStamp": now} for topic, count in sorted(self.pending_by_topic.items())}
        return json.dumps({"dataVersion": {"counter": self.fired, "stateVersion": 0, "timestamp": now},
                           "timingCount": table}, separators=(",", ":")).encode()


class TimerMetricsProcessor:
    """GET_TIMER_METRICS (RocketMQ 5's code 61): a master's pending timers per topic; a slave, which delivers no
    timer, answers REQUEST_CODE_NOT_SUPPORTED (the console shows "n/a")."""

    def __init__(self, timer: Callable[[], TimerMessageService | None], broker_name: str) -> None:
        self._timer = timer
        self.broker_name = broker_name

    def handlers(self) -> dict[int, Handler]:
        return {RequestCode.GET_TIMER_METRICS: self.timer_metrics}

    def timer_metrics(self, req: RemotingCommand, conn: Connection) -> RemotingCommand:
        timer = self._timer()
        if timer is None:
            return req.response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                                f"the broker[{self.broker_name}] is a slave: its master delivers the timers")
        return req.response(ResponseCode.SUCCESS, None, None, timer.metrics_body())
