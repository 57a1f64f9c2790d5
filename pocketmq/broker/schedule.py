"""``ScheduleMessageService``: delivers delayed messages (and retries) when they fall due.

The store parks a message with a DELAY property in ``SCHEDULE_TOPIC_XXXX``, queue ``level - 1``, with its
delivery time as the consume-queue tag code. This service (masters only) walks each level's queue in
order every ``interval`` and re-puts each message whose time has come to its real topic and queue,
stripped of the scheduling properties, through the store's one put path (``put``: the broker passes
``MessageStore.put_message``, so on a SYNC_MASTER a re-delivery waits for a slave as a send does). Progress
per level is ``delayOffset.json``; it advances only after the re-put is stored, so a crash re-delivers at
most the message in flight and never early.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

from pocketmq.broker.metadata import DelayOffsets
from pocketmq.common.logs import get_logger
from pocketmq.common.message import MessageConst, encode_properties, parse_properties
from pocketmq.common.record import decode_record
from pocketmq.common.service import PeriodicService
from pocketmq.common.topic import RMQ_SYS_SCHEDULE_TOPIC
from pocketmq.store.message import MessageExtBrokerInner
from pocketmq.store.message_store import MessageStore
from pocketmq.store.results import GetMessageStatus, PutMessageResult

log = get_logger("pocketmq.broker.schedule")

_SCHEDULE_PROPS = (MessageConst.PROPERTY_DELAY_TIME_LEVEL, MessageConst.PROPERTY_REAL_TOPIC,
                   MessageConst.PROPERTY_REAL_QUEUE_ID)


def restore_message(record: Any) -> MessageExtBrokerInner:
    """The message a scheduled record stands for, back on its real topic and queue."""
    props = parse_properties(record.properties)
    topic = props.get(MessageConst.PROPERTY_REAL_TOPIC, record.topic)
    queue_id = int(props.get(MessageConst.PROPERTY_REAL_QUEUE_ID, "0") or 0)
    for name in _SCHEDULE_PROPS:
        props.pop(name, None)
    return MessageExtBrokerInner(
        topic=topic, body=bytes(record.body), queue_id=queue_id, flag=record.flag,
        properties=encode_properties(props), sys_flag=record.sys_flag, born_timestamp=record.born_timestamp,
        born_host=bytes(record.born_host), reconsume_times=record.reconsume_times,
    )


class ScheduleMessageService(PeriodicService):
    """Delivers due delayed messages every ``interval`` seconds, the first round at start."""

    name = "schedule-message"

    def __init__(self, store: MessageStore, levels: int,
                 put: Callable[[MessageExtBrokerInner], Awaitable[PutMessageResult]], *,
                 offsets: DelayOffsets, interval: float = 0.1) -> None:
        super().__init__(interval, initial_delay=0)
        self.store = store
        self.levels = levels
        self.put = put
        self.offsets = offsets

    async def tick(self) -> None:
        await self.deliver_due()

    async def deliver_due(self, now_ms: int | None = None) -> int:
        """Deliver every message due by ``now_ms``; returns how many were delivered."""
        delivered = 0
        for level in range(1, self.levels + 1):
            delivered += await self._deliver_level(level, int(time.time() * 1000) if now_ms is None else now_ms)
        return delivered

    async def _deliver_level(self, level: int, now_ms: int) -> int:
        queue_id = level - 1
        offset = self.offsets.offset_table.get(level, 0)
        result = self.store.get_messages("SCHEDULE", RMQ_SYS_SCHEDULE_TOPIC, queue_id, offset, 32)
        if result.status is not GetMessageStatus.FOUND:
            if result.status in (GetMessageStatus.OFFSET_TOO_SMALL, GetMessageStatus.OFFSET_OVERFLOW_BADLY):
                self._advance(level, result.next_begin_offset)
            result.release()
            return 0
        due = []
        for buffer, queue_offset, deliver_at in zip(result.message_buffers, result.message_queue_offsets,
                                                    result.tags_codes, strict=False):
            if deliver_at > now_ms:
                break
            due.append((queue_offset, restore_message(decode_record(buffer, 0, check_crc=False))))
        result.release()
        delivered = 0
        for queue_offset, msg in due:
            stored = await self.put(msg)
            if not stored.status.is_stored:
                log.warning("scheduled_delivery_failed", level=level, offset=queue_offset, status=stored.status.name)
                break
            self._advance(level, queue_offset + 1)
            delivered += 1
        return delivered

    def _advance(self, level: int, offset: int) -> None:
        self.offsets.advance(level, offset)
