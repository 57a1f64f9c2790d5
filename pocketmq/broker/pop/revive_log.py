"""``ReviveLog``: how POP writes its records (:mod:`pocketmq.broker.pop.records`) to the commit log and reads them
and the consumed messages back. Every write goes through the store's one put path, so a record is as durable as
a message: flushed as the store flushes, and on a SYNC_MASTER replicated before the put completes; a slave gets
the records byte for byte with the rest of the log.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Iterator

from pocketmq.broker.pop.records import SNAPSHOT_TAG, AckMsg, PopCheckPoint, PopSnapshot
from pocketmq.broker.redeliver import stored_message
from pocketmq.common.errors import RecordFormatError
from pocketmq.common.message import MessageConst, get_property
from pocketmq.common.pop import CK_TAG
from pocketmq.common.record import MessageRecord, decode_record, parse_host_port
from pocketmq.store.message import MessageExtBrokerInner
from pocketmq.store.message_store import MessageStore
from pocketmq.store.put_path import PutOutcome
from pocketmq.store.results import GetMessageStatus, PutMessageResult

_TAGS = MessageConst.PROPERTY_TAGS
_READ_BATCH = 32


def now_ms() -> int:
    return int(time.time() * 1000)


async def stored(outcome: PutOutcome) -> PutMessageResult:
    """The result of a put, waited for when it is not there yet."""
    return outcome if isinstance(outcome, PutMessageResult) else await outcome


class ReviveLog:
    """Records of one broker: check points and acks in ``revive_topic``, snapshots in ``state_topic`` (queue 0)."""

    def __init__(self, store: MessageStore, revive_topic: str, state_topic: str, store_addr: str) -> None:
        self.store = store
        self.revive_topic = revive_topic
        self.state_topic = state_topic
        self._host = parse_host_port(store_addr)

    # -- writes -------------------------------------------------------------------------------------------

    def _message(self, topic: str, queue_id: int, tag: str, body: bytes) -> MessageExtBrokerInner:
        return MessageExtBrokerInner(topic=topic, body=body, queue_id=queue_id, properties=f"{_TAGS}\x01{tag}",
                                     born_timestamp=now_ms(), born_host=self._host)

    async def put(self, msg: MessageExtBrokerInner) -> PutMessageResult:
        return await stored(self.store.put(msg))

    def put_check_point(self, ck: PopCheckPoint, revive_qid: int) -> PutOutcome:
        """The store's outcome as it is: the result itself when there is nothing to wait for."""
        return self.store.put(self._message(self.revive_topic, revive_qid, CK_TAG, ck.encode()))

    def put_ack(self, ack: AckMsg, revive_qid: int) -> PutOutcome:
        return self.store.put(self._message(self.revive_topic, revive_qid, ack.tag, ack.encode()))

    def put_snapshot(self, snapshot: PopSnapshot) -> Awaitable[PutMessageResult]:
        return self.put(self._message(self.state_topic, 0, SNAPSHOT_TAG, snapshot.encode()))

    # -- reads --------------------------------------------------------------------------------------------

    def record_at(self, topic: str, queue_id: int, offset: int) -> MessageRecord | None:
        """The stored message at a queue offset; None when it is gone (or never was)."""
        return stored_message(self.store, topic, queue_id, offset)

    def revive_end(self, queue_id: int) -> int:
        return self.store.get_max_offset_in_queue(self.revive_topic, queue_id)

    def revive_start(self, queue_id: int) -> int:
        return self.store.get_min_offset_in_queue(self.revive_topic, queue_id)

    def last_snapshot(self) -> MessageRecord | None:
        end = self.store.get_max_offset_in_queue(self.state_topic, 0)
        return self.record_at(self.state_topic, 0, end - 1) if end > 0 else None

    def records(self, queue_id: int, offset: int) -> Iterator[tuple[int, str, bytes]]:
        """``(queue offset, tag, body)`` of the revive queue's records from ``offset`` to its end."""
        while True:
            result = self.store.get_messages("REVIVE", self.revive_topic, queue_id, offset, _READ_BATCH)
            try:
                if result.status is not GetMessageStatus.FOUND:
                    if result.status in (GetMessageStatus.OFFSET_TOO_SMALL, GetMessageStatus.OFFSET_FOUND_NULL,
                                         GetMessageStatus.NO_MATCHED_MESSAGE, GetMessageStatus.MESSAGE_WAS_REMOVING) \
                            and result.next_begin_offset > offset:
                        offset = result.next_begin_offset
                        continue
                    return
                decoded = []
                for buffer, queue_offset in zip(result.message_buffers, result.message_queue_offsets, strict=True):
                    try:
                        record = decode_record(buffer, 0, check_crc=False)
                    except RecordFormatError:
                        continue
                    if isinstance(record, MessageRecord):
                        decoded.append((queue_offset, get_property(record.properties, _TAGS) or "",
                                        bytes(record.body)))
                offset = result.next_begin_offset
            finally:
                result.release()
            yield from decoded
