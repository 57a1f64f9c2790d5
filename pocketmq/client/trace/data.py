"""RocketMQ 4.9's message-trace data: the contexts a traced client writes and their text format.

A trace message's body is one or more contexts, each ended by ``\\u0002`` (``FIELD_SPLITOR``), their fields
separated by ``\\u0001`` (``CONTENT_SPLITOR``), booleans as ``true``/``false`` (``TraceDataEncoder``):

* ``Pub``: type, timestamp, regionId, groupName, topic, msgId, tags, keys, storeHost, bodyLength, costTime,
  msgType (ordinal), offsetMsgId, success;
* ``SubBefore`` (one per message of a consumed batch): type, timestamp, regionId, groupName, requestId,
  msgId, retryTimes, keys;
* ``SubAfter``: type, requestId, msgId, costTime, success, keys, contextCode, timestamp.

A Java ``null`` is written as ``null``. The trace message is keyed (``KEYS``) by each context's message id and
keys, and here also by the offset message id of a ``Pub``, so the index finds a message's traces by either id.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

CONTENT_SPLITOR = "\x01"
FIELD_SPLITOR = "\x02"
TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"
"""RocketMQ's default trace topic (``TopicValidator.RMQ_SYS_TRACE_TOPIC``)."""


class TraceType(enum.Enum):
    Pub = "Pub"
    SubBefore = "SubBefore"
    SubAfter = "SubAfter"
    EndTransaction = "EndTransaction"


class MessageType(enum.IntEnum):
    """RocketMQ's ``MessageType`` (the ordinal is written)."""

    Normal_Msg = 0
    Trans_Msg_Half = 1
    Trans_msg_Commit = 2
    Delay_Msg = 3


class ConsumeReturnType(enum.IntEnum):
    """RocketMQ's ``ConsumeReturnType``: the ``contextCode`` of a ``SubAfter``."""

    SUCCESS = 0
    TIME_OUT = 1
    EXCEPTION = 2
    RETURNNULL = 3
    FAILED = 4


@dataclass(slots=True)
class TraceBean:
    """One message of a context."""

    msg_id: str = ""
    topic: str = ""
    tags: str | None = None
    keys: str | None = None
    store_host: str = ""
    body_length: int = 0
    msg_type: MessageType = MessageType.Normal_Msg
    offset_msg_id: str = ""
    retry_times: int = 0


@dataclass(slots=True)
class TraceContext:
    """One traced event: a send (``Pub``), or the start or end of consuming a batch."""

    trace_type: TraceType
    timestamp: int = 0
    region_id: str = ""
    group_name: str = ""
    cost_time: int = 0
    success: bool = True
    request_id: str = ""
    context_code: int = 0
    beans: list[TraceBean] = field(default_factory=list)


def _text(value: str | None) -> str:
    return "null" if value is None else value


def _bool(value: bool) -> str:
    return "true" if value else "false"


def encode_context(ctx: TraceContext) -> tuple[str, list[str]]:
    """The context's trace data and the keys its trace message is indexed by."""
    parts: list[str] = []
    t = ctx.trace_type.value
    if ctx.trace_type is TraceType.Pub:
        b = ctx.beans[0]
        fields = [t, str(ctx.timestamp), ctx.region_id, ctx.group_name, b.topic, b.msg_id, _text(b.tags),
                  _text(b.keys), b.store_host, str(b.body_length), str(ctx.cost_time), str(int(b.msg_type)),
                  b.offset_msg_id, _bool(ctx.success)]
        parts.append(CONTENT_SPLITOR.join(fields) + FIELD_SPLITOR)
    elif ctx.trace_type is TraceType.SubBefore:
        for b in ctx.beans:
            fields = [t, str(ctx.timestamp), ctx.region_id, ctx.group_name, ctx.request_id, b.msg_id,
                      str(b.retry_times), _text(b.keys)]
            parts.append(CONTENT_SPLITOR.join(fields) + FIELD_SPLITOR)
    elif ctx.trace_type is TraceType.SubAfter:
        for b in ctx.beans:
            fields = [t, ctx.request_id, b.msg_id, str(ctx.cost_time), _bool(ctx.success), _text(b.keys),
                      str(ctx.context_code), str(ctx.timestamp)]
            parts.append(CONTENT_SPLITOR.join(fields) + FIELD_SPLITOR)
    else:
        raise ValueError(f"cannot encode a {t} context")
    keys: list[str] = []
    for b in ctx.beans:
        keys.append(b.msg_id)
        if b.offset_msg_id:
            keys.append(b.offset_msg_id)
        if b.keys:
            keys.append(b.keys)
    return "".join(parts), keys


def decode_trace_data(text: str) -> list[TraceContext]:
    """The contexts of a trace message body (RocketMQ's ``decoderFromTraceDataString``); unknown or
    malformed contexts are skipped."""
    found: list[TraceContext] = []
    for item in text.split(FIELD_SPLITOR):
        line = item.split(CONTENT_SPLITOR)
        try:
            ctx = _decode_line(line)
        except (ValueError, IndexError):
            continue
        if ctx is not None:
            found.append(ctx)
    return found


def _decode_line(line: list[str]) -> TraceContext | None:
    kind = line[0]
    if kind == TraceType.Pub.value:
        bean = TraceBean(topic=line[4], msg_id=line[5], tags=line[6], keys=line[7], store_host=line[8],
                         body_length=int(line[9]), msg_type=MessageType(int(line[11])))
        ctx = TraceContext(TraceType.Pub, timestamp=int(line[1]), region_id=line[2], group_name=line[3],
                           cost_time=int(line[10]), beans=[bean])
        if len(line) == 13:
            ctx.success = line[12] == "true"
        elif len(line) >= 14:
            bean.offset_msg_id = line[12]
            ctx.success = line[13] == "true"
        return ctx
    if kind == TraceType.SubBefore.value:
        bean = TraceBean(msg_id=line[5], retry_times=int(line[6]), keys=line[7])
        return TraceContext(TraceType.SubBefore, timestamp=int(line[1]), region_id=line[2], group_name=line[3],
                            request_id=line[4], beans=[bean])
    if kind == TraceType.SubAfter.value:
        bean = TraceBean(msg_id=line[2], keys=line[5])
        ctx = TraceContext(TraceType.SubAfter, request_id=line[1], cost_time=int(line[3]),
                           success=line[4] == "true", beans=[bean])
        if len(line) >= 7:
            ctx.context_code = int(line[6])
        if len(line) >= 8:
            ctx.timestamp = int(line[7])
        return ctx
    return None
