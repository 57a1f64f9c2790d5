"""The store side of transactions (RocketMQ's ``TransactionalMessageBridge`` and ``TransactionalMessageUtil``).

What each message the transaction machinery writes looks like, byte for byte as RocketMQ 4.9 writes it:

* the **half message**: the producer's message on ``RMQ_SYS_TRANS_HALF_TOPIC`` queue 0, its transaction bits reset
  to "not a transaction" (so it gets a consume-queue entry there), ``REAL_TOPIC``/``REAL_QID`` appended;
* the **committed message**: the half's body, flag, hosts and properties (the whole string, as RocketMQ's
  ``endMessageTransaction`` keeps it) on the real topic and queue, sys flag with the COMMIT type, the prepared
  transaction offset = the half's commit-log offset;
* the **op record**: ``RMQ_SYS_TRANS_OP_HALF_TOPIC`` queue 0, tag ``d``, body = the half's queue offset in decimal;
* the **copy** a check-back appends: the half again with ``TRANSACTION_CHECK_TIMES`` set and the first half's
  queue offset in ``TRAN_PREPARED_QUEUE_OFFSET``;
* the **discarded** message: the half on ``TRANS_CHECK_MAX_TIME_TOPIC`` queue 0.

Progress of the check-back scan is the consume offset of the system group ``CID_SYS_RMQ_TRANS`` in the half and
op queues, persisted with every other consumer offset (``consumerOffset.json``) and copied to slaves.
"""

from __future__ import annotations

from pocketmq.broker.metadata import ConsumerOffsetManager
from pocketmq.common.message import MessageConst, encode_properties, get_property, join_properties, parse_properties
from pocketmq.common.record import MessageRecord, decode_record
from pocketmq.common.record_encoder import encode_record
from pocketmq.common.sysflag import MessageSysFlag
from pocketmq.common.topic import (
    RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC,
    RMQ_SYS_TRANS_HALF_TOPIC,
    RMQ_SYS_TRANS_OP_HALF_TOPIC,
)
from pocketmq.store.message import MessageExtBrokerInner
from pocketmq.store.message_store import MessageStore
from pocketmq.store.results import GetMessageStatus

TRANS_SYS_GROUP = "CID_SYS_RMQ_TRANS"
"""The system consumer group whose offsets in the half and op queues are the check-back's progress."""
REMOVE_TAG = "d"
"""Tag of every op record."""
_HOST_BITS = MessageSysFlag.BORNHOST_V6 | MessageSysFlag.STOREHOST_V6
_TXN_CLEAR = ~MessageSysFlag.TRANSACTION_MASK
_REAL_TOPIC = MessageConst.PROPERTY_REAL_TOPIC
_REAL_QID = MessageConst.PROPERTY_REAL_QUEUE_ID
_ORIGIN = MessageConst.PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET
_CHECK_TIMES = MessageConst.PROPERTY_TRANSACTION_CHECK_TIMES
_OP_PROPERTIES = f"{MessageConst.PROPERTY_TAGS}\x01{REMOVE_TAG}"


def to_half_message(msg: MessageExtBrokerInner) -> None:
    """Turn a prepared send into its half message, in place (RocketMQ's ``parseHalfMessageInner``)."""
    msg.properties = join_properties(msg.properties, f"{_REAL_TOPIC}\x01{msg.topic}\x02{_REAL_QID}\x01{msg.queue_id}")
    msg.sys_flag &= _TXN_CLEAR
    msg.topic = RMQ_SYS_TRANS_HALF_TOPIC
    msg.queue_id = 0


def transaction_key(properties: str, queue_offset: int) -> str:
    """The identity of a transaction across its half message and copies: the queue offset of its first half
    message (kept on copies in ``TRAN_PREPARED_QUEUE_OFFSET``; see :mod:`pocketmq.broker.transaction.book`). Not the
    ``UNIQ_KEY``: a client that sends one message object twice sends two transactions with one key."""
    origin = get_property(properties, _ORIGIN)
    return origin if origin and origin.isdigit() else str(queue_offset)


def real_destination(record: MessageRecord) -> tuple[str, int] | None:
    """(REAL_TOPIC, REAL_QID) of a half message; None when it lacks them."""
    topic = get_property(record.properties, _REAL_TOPIC)
    qid = get_property(record.properties, _REAL_QID)
    if not topic or qid is None or not qid.isdigit():
        return None
    return topic, int(qid)


def check_times(record: MessageRecord) -> int:
    raw = get_property(record.properties, _CHECK_TIMES)
    return int(raw) if raw is not None and raw.isdigit() else 0


class TransactionalMessageBridge:
    """Reads and writes of the half, op and discard queues for one broker's store."""

    def __init__(self, store: MessageStore, offsets: ConsumerOffsetManager) -> None:
        self.store = store
        self.offsets = offsets

    # -- progress ------------------------------------------------------------------------------------------

    def load_progress(self) -> tuple[int, int]:
        """(half, op) progress: the committed offsets of ``CID_SYS_RMQ_TRANS``, else each queue's min offset."""
        half = self.offsets.query_offset(TRANS_SYS_GROUP, RMQ_SYS_TRANS_HALF_TOPIC, 0)
        op = self.offsets.query_offset(TRANS_SYS_GROUP, RMQ_SYS_TRANS_OP_HALF_TOPIC, 0)
        if half < 0:
            half = self.store.get_min_offset_in_queue(RMQ_SYS_TRANS_HALF_TOPIC, 0)
        if op < 0:
            op = self.store.get_min_offset_in_queue(RMQ_SYS_TRANS_OP_HALF_TOPIC, 0)
        return half, op

    def save_progress(self, half: int, op: int) -> None:
        """Remember the progress (not at all on a broker that never had a half message: nothing to write)."""
        if half == op == 0 and self.offsets.query_offset(TRANS_SYS_GROUP, RMQ_SYS_TRANS_HALF_TOPIC, 0) < 0:
            return
        self.offsets.commit_offset(TRANS_SYS_GROUP, RMQ_SYS_TRANS_HALF_TOPIC, 0, half)
        self.offsets.commit_offset(TRANS_SYS_GROUP, RMQ_SYS_TRANS_OP_HALF_TOPIC, 0, op)

    # -- reads ---------------------------------------------------------------------------------------------

    def half_max_offset(self) -> int:
        return self.store.get_max_offset_in_queue(RMQ_SYS_TRANS_HALF_TOPIC, 0)

    def half_min_offset(self) -> int:
        return self.store.get_min_offset_in_queue(RMQ_SYS_TRANS_HALF_TOPIC, 0)

    def op_max_offset(self) -> int:
        return self.store.get_max_offset_in_queue(RMQ_SYS_TRANS_OP_HALF_TOPIC, 0)

    def read_halves(self, offset: int, count: int) -> tuple[list[MessageRecord], int]:
        """Up to ``count`` half messages from queue offset ``offset``, and the offset to read next."""
        return self._read(RMQ_SYS_TRANS_HALF_TOPIC, offset, count)

    def read_ops(self, offset: int, count: int) -> tuple[list[tuple[int, int | None]], int]:
        """Up to ``count`` op records from ``offset`` as (op offset, half offset or None when the body is not one),
        and the offset to read next."""
        records, next_offset = self._read(RMQ_SYS_TRANS_OP_HALF_TOPIC, offset, count)
        out: list[tuple[int, int | None]] = []
        for record in records:
            text = record.body.decode("ascii", "replace").strip()
            out.append((record.queue_offset, int(text) if text.isdigit() else None))
        return out, next_offset

    def _read(self, topic: str, offset: int, count: int) -> tuple[list[MessageRecord], int]:
        result = self.store.get_messages(TRANS_SYS_GROUP, topic, 0, offset, count)
        try:
            if result.status is not GetMessageStatus.FOUND:
                return [], max(result.next_begin_offset, offset) if result.status in (
                    GetMessageStatus.OFFSET_TOO_SMALL, GetMessageStatus.MESSAGE_WAS_REMOVING,
                    GetMessageStatus.OFFSET_FOUND_NULL) else offset
            records = []
            for buffer in result.message_buffers:
                record = decode_record(buffer, 0, check_crc=False)
                if isinstance(record, MessageRecord):
                    records.append(record)
            return records, result.next_begin_offset
        finally:
            result.release()

    def look_half(self, commit_log_offset: int) -> MessageRecord | None:
        """The record at a commit-log offset, if it is a half message."""
        if commit_log_offset < 0:
            return None
        record = self.store.look_message_by_offset(commit_log_offset)
        if record is None or record.topic != RMQ_SYS_TRANS_HALF_TOPIC:
            return None
        return record

    # -- messages ------------------------------------------------------------------------------------------

    @staticmethod
    def committed_message(record: MessageRecord) -> MessageExtBrokerInner | None:
        """The real message of a committed half (None when the half lacks its real topic or queue)."""
        dest = real_destination(record)
        if dest is None:
            return None
        sys_flag = (record.sys_flag & ~_HOST_BITS & _TXN_CLEAR) | MessageSysFlag.TRANSACTION_COMMIT_TYPE
        return MessageExtBrokerInner(
            topic=dest[0], body=bytes(record.body), queue_id=dest[1], flag=record.flag,
            properties=record.properties, sys_flag=sys_flag, born_timestamp=record.born_timestamp,
            born_host=bytes(record.born_host), reconsume_times=record.reconsume_times,
            prepared_transaction_offset=record.physical_offset, wait_store_msg_ok=False,
        )

    @staticmethod
    def op_message(half_offset: int, born_host: bytes, now_ms: int, wait: bool) -> MessageExtBrokerInner:
        return MessageExtBrokerInner(
            topic=RMQ_SYS_TRANS_OP_HALF_TOPIC, body=str(half_offset).encode(), queue_id=0,
            properties=_OP_PROPERTIES, born_timestamp=now_ms, born_host=born_host, wait_store_msg_ok=wait,
        )

    @staticmethod
    def copy_message(record: MessageRecord, times: int) -> MessageExtBrokerInner:
        """The half again at the end of the half queue, with ``TRANSACTION_CHECK_TIMES`` = ``times``."""
        props = parse_properties(record.properties)
        props[_CHECK_TIMES] = str(times)
        props.setdefault(_ORIGIN, str(record.queue_offset))
        return MessageExtBrokerInner(
            topic=RMQ_SYS_TRANS_HALF_TOPIC, body=bytes(record.body), queue_id=0, flag=record.flag,
            properties=encode_properties(props), sys_flag=record.sys_flag & ~_HOST_BITS,
            born_timestamp=record.born_timestamp, born_host=bytes(record.born_host),
            reconsume_times=record.reconsume_times, wait_store_msg_ok=False,
        )

    @staticmethod
    def discard_message(record: MessageRecord) -> MessageExtBrokerInner:
        """The half moved to ``TRANS_CHECK_MAX_TIME_TOPIC`` (RocketMQ's ``resolveDiscardMsg``)."""
        return MessageExtBrokerInner(
            topic=RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC, body=bytes(record.body), queue_id=0, flag=record.flag,
            properties=record.properties, sys_flag=record.sys_flag & ~_HOST_BITS,
            born_timestamp=record.born_timestamp, born_host=bytes(record.born_host),
            reconsume_times=record.reconsume_times, wait_store_msg_ok=False,
        )

    @staticmethod
    def check_body(record: MessageRecord) -> bytes:
        """CHECK_TRANSACTION_STATE's body: the half message encoded as stored, on its real topic and queue."""
        dest = real_destination(record) or (record.topic, record.queue_id)
        return encode_record(
            topic=dest[0], body=bytes(record.body), properties=record.properties, queue_id=dest[1],
            flag=record.flag, queue_offset=record.queue_offset, physical_offset=record.physical_offset,
            sys_flag=record.sys_flag, born_timestamp=record.born_timestamp, born_host=bytes(record.born_host),
            store_timestamp=record.store_timestamp, store_host=bytes(record.store_host),
            reconsume_times=record.reconsume_times, prepared_transaction_offset=record.prepared_transaction_offset,
        )
