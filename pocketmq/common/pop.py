"""RocketMQ 5's POP vocabulary on the wire: receipt handles (``extraInfo``), the offset-info strings of a POP
response, POP retry topic names, the revive topic, and the ``BATCH_ACK_MESSAGE`` body. Pure functions over
strings and bytes; the broker (``pocketmq.broker.pop``) and the SDK (``pocketmq.client.consumer.simple``) share them.

Receipt handle (RocketMQ's ``ExtraInfoUtil.buildExtraInfo`` and ``ReceiptHandle.encode``), fields joined by one
space (``MessageConst.KEY_SEPARATOR``)::

    ckQueueOffset popTime invisibleTime reviveQid retry brokerName queueId [queueOffset [commitLogOffset]]

``ckQueueOffset`` is the first queue offset of the pop that handed the message out (its check point's start),
``retry`` is ``0`` for a message of the topic itself, ``1`` for one of its POP retry topic
``%RETRY%<group>_<topic>`` (``2``: the ``+`` form of 5.x's ``enableRetryTopicV2``), ``reviveQid`` 999 marks a FIFO
(``order=true``) pop. A RocketMQ 5 client puts the first eight fields in the message's ``POP_CK`` property; a 5.x
proxy appends the message's commit-log offset and hands that to gRPC clients as the receipt handle. Both forms
are accepted back in ``ACK_MESSAGE`` and ``CHANGE_MESSAGE_INVISIBLETIME`` (``extraInfo``).

POP response headers (``ExtraInfoUtil.buildStartOffsetInfo`` / ``buildMsgOffsetInfo`` /
``buildQueueOffsetOrderCountInfo``), entries joined by ``;``::

    startOffsetInfo   retry queueId startOffset
    msgOffsetInfo     retry queueId offset,offset,...
    orderCountInfo    retry qo<queueId>%<queueOffset> count    (one per message delivered before)
                      retry queueId minCount                   (one per queue, for older clients)
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from json.encoder import encode_basestring_ascii
from typing import Any

from pocketmq.common.topic import RETRY_GROUP_TOPIC_PREFIX

SEPARATOR = " "
"""Between the fields of a receipt handle and of an offset-info entry (``MessageConst.KEY_SEPARATOR``)."""
POP_ORDER_REVIVE_QUEUE = 999
"""The ``reviveQid`` of a FIFO pop (RocketMQ's ``KeyBuilder.POP_ORDER_REVIVE_QUEUE``)."""
NORMAL_TOPIC = "0"
RETRY_TOPIC = "1"
RETRY_TOPIC_V2 = "2"
REVIVE_TOPIC_PREFIX = "rmq_sys_REVIVE_LOG_"
"""The revive topic of a cluster is this prefix and the cluster name (``PopAckConstants.REVIVE_TOPIC``)."""
REVIVE_GROUP = "CID_RMQ_SYS_REVIVE_GROUP"
CK_TAG = "ck"
ACK_TAG = "ack"
BATCH_ACK_TAG = "bAck"
POP_MAX_MSG_NUMS = 32
"""A POP asks for at most this many messages (RocketMQ refuses more with INVALID_PARAMETER)."""
_RETRY_V1_SEPARATOR = "_"
_RETRY_V2_SEPARATOR = "+"
_QUEUE_OFFSET_PREFIX = "qo"


class PopFormatError(ValueError):
    """A receipt handle, offset-info string or batch-ack body that does not have RocketMQ's shape."""


# -- topic names ----------------------------------------------------------------------------------------


def revive_topic(cluster_name: str) -> str:
    """``rmq_sys_REVIVE_LOG_<cluster>``: the topic of POP check points and acks."""
    return REVIVE_TOPIC_PREFIX + cluster_name


def pop_retry_topic(topic: str, group: str, v2: bool = False) -> str:
    """Where a group's expired POP messages of ``topic`` come back: ``%RETRY%<group>_<topic>`` (``+`` with v2)."""
    return RETRY_GROUP_TOPIC_PREFIX + group + (_RETRY_V2_SEPARATOR if v2 else _RETRY_V1_SEPARATOR) + topic


def is_pop_retry_topic_v2(topic: str) -> bool:
    return topic.startswith(RETRY_GROUP_TOPIC_PREFIX) and _RETRY_V2_SEPARATOR in topic


def retry_marker(topic: str) -> str:
    """``0`` for a topic, ``1`` for a retry topic, ``2`` for a v2 POP retry topic (``ExtraInfoUtil.getRetry``)."""
    if is_pop_retry_topic_v2(topic):
        return RETRY_TOPIC_V2
    if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
        return RETRY_TOPIC
    return NORMAL_TOPIC


def real_topic(topic: str, group: str, marker: str) -> str:
    """The topic a handle's message is stored in, from the consumed ``topic`` and the handle's retry marker."""
    if marker == NORMAL_TOPIC:
        return topic
    if marker == RETRY_TOPIC:
        return pop_retry_topic(topic, group)
    if marker == RETRY_TOPIC_V2:
        return pop_retry_topic(topic, group, v2=True)
    raise PopFormatError(f"retry marker {marker!r} is not 0, 1 or 2")


def normal_topic(topic: str, group: str) -> str:
    """The consumed topic behind a POP retry topic of ``group`` (the topic itself otherwise)."""
    for separator in (_RETRY_V2_SEPARATOR, _RETRY_V1_SEPARATOR):
        prefix = RETRY_GROUP_TOPIC_PREFIX + group + separator
        if topic.startswith(prefix):
            return topic[len(prefix):]
    return topic


# -- receipt handles ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ReceiptHandle:
    """A POP receipt handle (RocketMQ's ``ReceiptHandle``; see the module docstring). ``offset`` and
    ``commit_log_offset`` are -1 when the text had fewer fields."""

    start_offset: int
    retrieve_time: int
    invisible_time: int
    revive_queue_id: int
    topic_type: str
    broker_name: str
    queue_id: int
    offset: int = -1
    commit_log_offset: int = -1

    @property
    def next_visible_time(self) -> int:
        """When the message becomes visible again unless acked (ms)."""
        return self.retrieve_time + self.invisible_time

    @property
    def is_order(self) -> bool:
        return self.revive_queue_id == POP_ORDER_REVIVE_QUEUE

    @property
    def is_retry(self) -> bool:
        return self.topic_type in (RETRY_TOPIC, RETRY_TOPIC_V2)

    def real_topic(self, topic: str, group: str) -> str:
        return real_topic(topic, group, self.topic_type)

    def extra_info(self) -> str:
        """The eight-field form (a message's ``POP_CK``)."""
        return SEPARATOR.join(map(str, (self.start_offset, self.retrieve_time, self.invisible_time,
                                        self.revive_queue_id, self.topic_type, self.broker_name, self.queue_id,
                                        self.offset)))

    def encode(self) -> str:
        """The nine-field form a 5.x proxy gives gRPC clients (``POP_CK`` and the commit-log offset)."""
        return self.extra_info() + SEPARATOR + str(self.commit_log_offset)

    @classmethod
    def decode(cls, text: str) -> ReceiptHandle:
        """Parse a handle of seven to nine fields; :class:`PopFormatError` names what is wrong."""
        if not isinstance(text, str) or not text:
            raise PopFormatError("the receipt handle is empty")
        parts = text.split(SEPARATOR)
        if not 7 <= len(parts) <= 9:
            raise PopFormatError(f"a receipt handle has 7 to 9 space-separated fields, not {len(parts)}")
        try:
            numbers = [int(parts[i]) for i in (0, 1, 2, 3, 6)]
            tail = [int(p) for p in parts[7:]]
        except ValueError:
            raise PopFormatError(f"a receipt handle field is not a number: {text!r}") from None
        marker = parts[4]
        if marker not in (NORMAL_TOPIC, RETRY_TOPIC, RETRY_TOPIC_V2):
            raise PopFormatError(f"the receipt handle's retry field is {marker!r}, not 0, 1 or 2")
        if not parts[5]:
            raise PopFormatError("the receipt handle names no broker")
        start, pop_time, invisible, revive_qid, queue_id = numbers
        offset = tail[0] if tail else -1
        return cls(start, pop_time, invisible, revive_qid, marker, parts[5], queue_id, offset,
                   tail[1] if len(tail) > 1 else -1)


def build_extra_info(start_offset: int, pop_time: int, invisible_time: int, revive_qid: int, topic: str,
                     broker_name: str, queue_id: int, queue_offset: int) -> str:
    """A message's ``POP_CK`` (``ExtraInfoUtil.buildExtraInfo`` with the message's queue offset)."""
    return ReceiptHandle(start_offset, pop_time, invisible_time, revive_qid, retry_marker(topic), broker_name,
                         queue_id, queue_offset).extra_info()


# -- POP response offset infos --------------------------------------------------------------------------


def start_offset_entry(topic: str, queue_id: int, start_offset: int) -> str:
    return f"{retry_marker(topic)}{SEPARATOR}{queue_id}{SEPARATOR}{start_offset}"


def msg_offset_entry(topic: str, queue_id: int, offsets: Iterable[int]) -> str:
    return f"{retry_marker(topic)}{SEPARATOR}{queue_id}{SEPARATOR}{','.join(map(str, offsets))}"


def order_count_entries(topic: str, queue_id: int, counts: dict[int, int], min_count: int) -> list[str]:
    """One ``qo<queueId>%<offset>`` entry per message delivered before, then the queue's minimum count."""
    marker = retry_marker(topic)
    entries = [f"{marker}{SEPARATOR}{_QUEUE_OFFSET_PREFIX}{queue_id}%{offset}{SEPARATOR}{count}"
               for offset, count in counts.items()]
    entries.append(f"{marker}{SEPARATOR}{queue_id}{SEPARATOR}{min_count}")
    return entries


def join_entries(entries: Sequence[str]) -> str:
    return ";".join(entries)


def info_key(marker: str, queue: int | str) -> str:
    """The map key of an offset-info entry: ``retry@queueId`` (or ``retry@qo<queueId>%<offset>``)."""
    return f"{marker}@{queue}"


def queue_offset_key(queue_id: int, offset: int) -> str:
    return f"{_QUEUE_OFFSET_PREFIX}{queue_id}%{offset}"


def _entries(text: str | None) -> list[list[str]]:
    if not text:
        return []
    entries = []
    for entry in text.split(";"):
        parts = entry.split(SEPARATOR)
        if len(parts) != 3:
            raise PopFormatError(f"an offset-info entry has 3 fields: {entry!r}")
        entries.append(parts)
    return entries


def parse_start_offset_info(text: str | None) -> dict[str, int]:
    """``retry@queueId -> start offset``."""
    try:
        return {info_key(m, q): int(v) for m, q, v in _entries(text)}
    except ValueError as exc:
        raise PopFormatError(f"bad startOffsetInfo {text!r}: {exc}") from None


def parse_msg_offset_info(text: str | None) -> dict[str, list[int]]:
    """``retry@queueId -> the popped queue offsets``."""
    try:
        return {info_key(m, q): [int(o) for o in v.split(",")] for m, q, v in _entries(text)}
    except ValueError as exc:
        raise PopFormatError(f"bad msgOffsetInfo {text!r}: {exc}") from None


def parse_order_count_info(text: str | None) -> dict[str, int]:
    """``retry@queueId`` or ``retry@qo<queueId>%<offset>`` -> how often delivered before."""
    try:
        return {info_key(m, q): int(v) for m, q, v in _entries(text)}
    except ValueError as exc:
        raise PopFormatError(f"bad orderCountInfo {text!r}: {exc}") from None


# -- BATCH_ACK_MESSAGE body -----------------------------------------------------------------------------


@dataclass(slots=True)
class BatchAck:
    """One group of a ``BatchAckMessageRequestBody``: the acked messages of one pop of one queue, as a bit set
    of offsets relative to ``start_offset`` (JSON keys ``c t r so q rq pt it b``; ``b`` is the little-endian
    ``BitSet.toByteArray`` in base64, as fastjson writes a ``byte[]``)."""

    consumer_group: str
    topic: str
    retry: str
    start_offset: int
    queue_id: int
    revive_queue_id: int
    pop_time: int
    invisible_time: int
    offsets: list[int] = field(default_factory=list)
    """The acked queue offsets (``start_offset`` plus each set bit)."""

    def bit_set(self) -> str:
        """``b``: the offsets as a bit set relative to ``start_offset``, in base64."""
        offsets, start = self.offsets, self.start_offset
        if offsets and offsets == list(range(offsets[0], offsets[0] + len(offsets))):  # a run: a whole pop
            bits = ((1 << len(offsets)) - 1) << (offsets[0] - start)
        else:
            bits = 0
            for offset in offsets:
                bits |= 1 << (offset - start)
        return base64.b64encode(bits.to_bytes((bits.bit_length() + 7) // 8, "little")).decode()

    def to_json_dict(self) -> dict[str, Any]:
        return {"b": self.bit_set(), "c": self.consumer_group, "it": self.invisible_time,
                "pt": self.pop_time, "q": self.queue_id, "r": self.retry, "rq": self.revive_queue_id,
                "so": self.start_offset, "t": self.topic}

    @classmethod
    def from_json_dict(cls, d: Any) -> BatchAck:
        if not isinstance(d, dict):
            raise PopFormatError("a batch ack is not an object")
        try:
            start = int(_pick(d, "so", "startOffset"))
            offsets = _bit_offsets(start, _bit_set(_pick(d, "b", "bitSet")))
            return cls(str(_pick(d, "c", "consumerGroup")), str(_pick(d, "t", "topic")),
                       str(_pick(d, "r", "retry")), start, int(_pick(d, "q", "queueId")),
                       int(_pick(d, "rq", "reviveQueueId")), int(_pick(d, "pt", "popTime")),
                       int(_pick(d, "it", "invisibleTime")), offsets)
        except (KeyError, TypeError, ValueError) as exc:
            raise PopFormatError(f"bad batch ack {d!r}: {exc}") from None


def _pick(d: dict[str, Any], short: str, long: str) -> Any:
    """A field under its fastjson name or its alternate (Java) name."""
    if short in d:
        return d[short]
    return d[long]


_MAX_BIT_SET_BYTES = 1024
"""A batch ack covers one pop (at most 32 messages); a longer bit set is refused, not expanded."""


def _bit_offsets(start: int, bits: int) -> list[int]:
    """``start`` plus the position of each set bit, in order."""
    if not bits & (bits + 1):  # every bit up to the highest set: a whole pop acked, the common case
        return list(range(start, start + bits.bit_length()))
    return [start + i for i, digit in enumerate(bin(bits)[:1:-1]) if digit == "1"]


def _bit_set(raw: Any) -> int:
    if isinstance(raw, str):
        data = base64.b64decode(raw, validate=True)
    elif isinstance(raw, list):
        data = bytes((int(b) & 0xFF) for b in raw)
    else:
        raise TypeError("the bit set is neither base64 text nor a byte array")
    if len(data) > _MAX_BIT_SET_BYTES:
        raise ValueError(f"a bit set of {len(data)} bytes")
    return int.from_bytes(data, "little")


def encode_batch_ack_body(broker_name: str, acks: Sequence[BatchAck]) -> bytes:
    """``BatchAckMessageRequestBody`` as a Java client sends it (fastjson: sorted keys, compact). Sent once per
    receive: formatted directly, the bytes ``json.dumps(sort_keys=True)`` of the ``to_json_dict`` form give."""
    return ('{"acks":[' + ",".join([_batch_ack_json(a) for a in acks]) + '],"brokerName":'
            + encode_basestring_ascii(broker_name) + "}").encode()


def _batch_ack_json(ack: BatchAck) -> str:
    return (f'{{"b":"{ack.bit_set()}","c":{encode_basestring_ascii(ack.consumer_group)},'
            f'"it":{ack.invisible_time},"pt":{ack.pop_time},"q":{ack.queue_id},'
            f'"r":{encode_basestring_ascii(ack.retry)},"rq":{ack.revive_queue_id},"so":{ack.start_offset},'
            f'"t":{encode_basestring_ascii(ack.topic)}}}')


def decode_batch_ack_body(body: bytes | None) -> tuple[str | None, list[BatchAck]]:
    """``(brokerName, acks)`` of a ``BATCH_ACK_MESSAGE`` body; :class:`PopFormatError` when it is not one."""
    if not body:
        return None, []
    try:
        data = json.loads(bytes(body))
    except (ValueError, UnicodeDecodeError) as exc:
        raise PopFormatError(f"the batch ack body is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise PopFormatError("the batch ack body is not an object")
    acks = data.get("acks")
    if acks is None:
        acks = []
    if not isinstance(acks, list):
        raise PopFormatError("the batch ack body's acks is not a list")
    broker = data.get("brokerName")
    return (str(broker) if broker is not None else None), [BatchAck.from_json_dict(a) for a in acks]
