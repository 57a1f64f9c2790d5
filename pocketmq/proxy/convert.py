"""Messages between ``apache.rocketmq.v2`` and the remoting model, as RocketMQ 5's proxy converts them
(``SendMessageActivity.buildMessageProperty``, ``GrpcConverter.buildMessage``). Pure functions, no I/O.

gRPC → remoting (:func:`outgoing`): the client's ``message_id`` becomes ``UNIQ_KEY``; ``tag`` → ``TAGS``, ``keys`` →
``KEYS`` (space-joined); ``message_group`` → ``__SHARDINGKEY``; ``delivery_timestamp`` → ``TIMER_DELIVER_MS``; a
TRANSACTION message gets ``TRAN_MSG=true`` and the prepared sys flag, with the topic as its producer group
(``PGROUP``), as the Java proxy does so that any proxy can answer its check-back; ``born_host`` → ``__BORNHOST``
and ``born_timestamp`` → ``BORN_TIMESTAMP`` and the record's born time; user properties are kept as they are,
except that a system property name among them is refused. The limits and the refusals are the Java proxy's.

remoting → gRPC (:func:`incoming`): the reverse; ``message_id`` is ``UNIQ_KEY`` (the offset id when there is none),
the body digest MD5, ``delivery_attempt`` the reconsume times + 1, ``receipt_handle`` the popped message's handle.

Topic message types (:func:`message_type_of`, :func:`check_message_type`): a topic's ``message.type`` attribute
(NORMAL, FIFO, DELAY, TRANSACTION, MIXED) names what it accepts; a message's type is read from its properties.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from google.protobuf.timestamp_pb2 import Timestamp

from pocketmq.client.core.message_ext import MessageExt
from pocketmq.common.message import MessageConst
from pocketmq.common.sysflag import MessageSysFlag
from pocketmq.proxy.apis import definition_pb2 as pb
from pocketmq.proxy.errors import Code, ProxyError

PROPERTY_TRACE_CONTEXT = "TRACE_CONTEXT"
PROPERTY_BORN_HOST = "__BORNHOST"
PROPERTY_BORN_TIMESTAMP = "BORN_TIMESTAMP"
TOPIC_MESSAGE_TYPE_ATTRIBUTE = "message.type"
"""The topic attribute naming the message types a topic accepts (RocketMQ 5's ``TopicAttributes``)."""

SYSTEM_PROPERTY_KEYS = frozenset({
    "TRACE_ON", "MSG_REGION", "KEYS", "TAGS", "WAIT", "DELAY", "RETRY_TOPIC", "REAL_TOPIC", "REAL_QID", "TRAN_MSG",
    "PGROUP", "MIN_OFFSET", "MAX_OFFSET", "BUYER_ID", "ORIGIN_MESSAGE_ID", "TRANSFER_FLAG", "CORRECTION_FLAG",
    "MQ2_FLAG", "RECONSUME_TIME", "UNIQ_KEY", "MAX_RECONSUME_TIMES", "CONSUME_START_TIME", "POP_CK",
    "POP_CK_OFFSET", "1ST_POP_TIME", "TRAN_PREPARED_QUEUE_OFFSET", "DUP_INFO", "EXTEND_UNIQ_INFO", "INSTANCE_ID",
    "CORRELATION_ID", "REPLY_TO_CLIENT", "TTL", "ARRIVE_TIME", "PUSH_REPLY_TIME", "CLUSTER", "MSG_TYPE",
    "INNER_MULTI_QUEUE_OFFSET", "TIMER_DELAY_LEVEL", "TIMER_DELAY_SEC", "TIMER_DELIVER_MS", "TIMER_ENQUEUE_MS",
    "TIMER_DEQUEUE_MS", "TIMER_ROLL_TIMES", "TIMER_OUT_MS", "TIMER_DEL_UNIQKEY", "TIMER_DELAY_MS", "__BORNHOST",
    "BORN_TIMESTAMP", "DLQ_ORIGIN_TOPIC", "DLQ_ORIGIN_MESSAGE_ID", "__CRC32#", "__SHARDINGKEY",
    "CHECK_IMMUNITY_TIME_IN_SECONDS", "TRANSACTION_CHECK_TIMES", "TRACE_CONTEXT",
})
"""RocketMQ's ``MessageConst.STRING_HASH_SET``: property names a user property may not take, and that a received
message does not show among its user properties."""

_TOPIC_TYPES: dict[str, tuple[int, ...]] = {
    "NORMAL": (pb.NORMAL,),
    "FIFO": (pb.FIFO,),
    "DELAY": (pb.DELAY,),
    "TRANSACTION": (pb.TRANSACTION,),
    "MIXED": (pb.NORMAL, pb.FIFO, pb.DELAY, pb.TRANSACTION),
}


@dataclass(frozen=True, slots=True)
class Limits:
    """The checks of ``SendMessageActivity`` (the Java proxy's defaults)."""

    max_body_size: int = 4 * 1024 * 1024
    max_user_property_size: int = 16 * 1024
    user_property_max_num: int = 128
    max_message_group_size: int = 64
    max_delay_ms: int = 24 * 3600 * 1000
    max_transaction_recovery_s: int = 3600


@dataclass(slots=True)
class Outgoing:
    """A gRPC message made ready for SEND_MESSAGE_V2."""

    topic: str
    body: bytes
    properties: dict[str, str]
    sys_flag: int
    born_timestamp: int
    message_group: str

    @property
    def uniq_key(self) -> str:
        return self.properties[MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX]


# -- topic message types ------------------------------------------------------------------------------------


def accepted_types(attributes: Mapping[str, str]) -> tuple[int, ...]:
    """The gRPC message types a topic with these attributes accepts (NORMAL when the attribute is absent)."""
    return _TOPIC_TYPES.get(attributes.get(TOPIC_MESSAGE_TYPE_ATTRIBUTE, "NORMAL"), (pb.MESSAGE_TYPE_UNSPECIFIED,))


def message_type_of(properties: Mapping[str, str]) -> int:
    """``TopicMessageType.parseFromMessageProperty``: TRANSACTION, DELAY, FIFO or NORMAL."""
    if properties.get(MessageConst.PROPERTY_TRANSACTION_PREPARED) == "true":
        return pb.TRANSACTION
    if any(key in properties for key in (MessageConst.PROPERTY_DELAY_TIME_LEVEL, MessageConst.PROPERTY_TIMER_DELIVER_MS,
                                         MessageConst.PROPERTY_TIMER_DELAY_SEC, MessageConst.PROPERTY_TIMER_DELAY_MS)):
        return pb.DELAY
    if MessageConst.PROPERTY_SHARDING_KEY in properties:
        return pb.FIFO
    return pb.NORMAL


def check_message_type(attributes: Mapping[str, str], properties: Mapping[str, str]) -> None:
    """``DefaultTopicMessageTypeValidator``: MESSAGE_PROPERTY_CONFLICT_WITH_TYPE unless the topic accepts it."""
    expected = attributes.get(TOPIC_MESSAGE_TYPE_ATTRIBUTE, "NORMAL")
    actual = message_type_of(properties)
    if actual not in accepted_types(attributes):
        raise ProxyError(Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
                         f"TopicMessageType validate failed, the expected type is {expected}, "
                         f"but actual type is {pb.MessageType.Name(actual)}")


# -- gRPC -> remoting ---------------------------------------------------------------------------------------


def _has_control(text: str) -> bool:
    """Java's ``CharMatcher.javaIsoControl``: U+0000-U+001F and U+007F-U+009F."""
    return any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in text)


def _check_tag(tag: str) -> None:
    if not tag:
        return
    if not tag.strip():
        raise ProxyError(Code.ILLEGAL_MESSAGE_TAG, "tag cannot be the char sequence of whitespace")
    if "|" in tag:
        raise ProxyError(Code.ILLEGAL_MESSAGE_TAG, "tag cannot contain '|'")
    if _has_control(tag):
        raise ProxyError(Code.ILLEGAL_MESSAGE_TAG, "tag cannot contain control character")


def _check_key(key: str) -> None:
    if key and not key.strip():
        raise ProxyError(Code.ILLEGAL_MESSAGE_KEY, "key cannot be the char sequence of whitespace")
    if _has_control(key):
        raise ProxyError(Code.ILLEGAL_MESSAGE_KEY, "key cannot contain control character")


def _check_group(group: str, limits: Limits) -> None:
    if not group.strip():
        raise ProxyError(Code.ILLEGAL_MESSAGE_GROUP, "message group cannot be the char sequence of whitespace")
    if len(group.encode()) >= limits.max_message_group_size:
        raise ProxyError(Code.ILLEGAL_MESSAGE_GROUP,
                         f"message group exceed the max size {limits.max_message_group_size}")
    if _has_control(group):
        raise ProxyError(Code.ILLEGAL_MESSAGE_GROUP, "message group cannot contain control character")


def _user_properties(message: pb.Message, limits: Limits) -> tuple[dict[str, str], int]:
    user = dict(message.user_properties)
    if len(user) > limits.user_property_max_num:
        raise ProxyError(Code.MESSAGE_PROPERTIES_TOO_LARGE,
                         f"too many user properties, max is {limits.user_property_max_num}")
    size = 0
    for key, value in user.items():
        if key in SYSTEM_PROPERTY_KEYS:
            raise ProxyError(Code.ILLEGAL_MESSAGE_PROPERTY_KEY, f"property is used by system: {key}")
        if _has_control(key):
            raise ProxyError(Code.ILLEGAL_MESSAGE_PROPERTY_KEY, "the key of property cannot contain control character")
        if _has_control(value):
            raise ProxyError(Code.ILLEGAL_MESSAGE_PROPERTY_KEY,
                             "the value of property cannot contain control character")
        size += len(key.encode()) + len(value.encode())
    return user, size


def outgoing(message: pb.Message, *, limits: Limits, remote_host: Callable[[], str],
             now_ms: int | None = None) -> Outgoing:
    """A gRPC message as SEND_MESSAGE_V2 carries it; :class:`ProxyError` with the Java proxy's code otherwise.
    ``remote_host()`` (the caller's address) is asked for only when the message names no born host."""
    body = message.body
    if not body:
        raise ProxyError(Code.MESSAGE_BODY_EMPTY, "message body cannot be empty")
    if limits.max_body_size > 0 and len(body) > limits.max_body_size:
        raise ProxyError(Code.MESSAGE_BODY_TOO_LARGE, f"message body cannot exceed the max {limits.max_body_size}")
    system = message.system_properties
    props, size = _user_properties(message, limits)
    tag = system.tag
    _check_tag(tag)
    if tag:
        props[MessageConst.PROPERTY_TAGS] = tag
        size += len(tag.encode())
    for key in system.keys:
        _check_key(key)
        size += len(key.encode())
    if system.keys:
        props[MessageConst.PROPERTY_KEYS] = MessageConst.KEY_SEPARATOR.join(system.keys)
    if size > limits.max_user_property_size:
        raise ProxyError(Code.MESSAGE_PROPERTIES_TOO_LARGE,
                         f"the total size of user property is too large, max is {limits.max_user_property_size}")
    if not system.message_id.strip():
        raise ProxyError(Code.ILLEGAL_MESSAGE_ID, "message id cannot be empty")
    props[MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = system.message_id
    sys_flag = 0
    if system.body_encoding == pb.GZIP:
        sys_flag |= MessageSysFlag.COMPRESSED
    topic = message.topic.name
    if system.message_type == pb.TRANSACTION:
        sys_flag |= MessageSysFlag.TRANSACTION_PREPARED_TYPE
        props[MessageConst.PROPERTY_TRANSACTION_PREPARED] = "true"
        if system.HasField("orphaned_transaction_recovery_duration"):
            seconds = system.orphaned_transaction_recovery_duration.seconds
            if limits.max_transaction_recovery_s > 0 and seconds > limits.max_transaction_recovery_s:
                raise ProxyError(Code.BAD_REQUEST, "the max transaction recovery time of message is too large, "
                                                   f"max is {limits.max_transaction_recovery_s}")
            props[MessageConst.PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS] = str(seconds)
    now = int(time.time() * 1000) if now_ms is None else now_ms
    if system.HasField("delivery_timestamp"):
        deliver_ms = system.delivery_timestamp.ToMilliseconds()
        if limits.max_delay_ms > 0 and deliver_ms - now > limits.max_delay_ms:
            raise ProxyError(Code.ILLEGAL_DELIVERY_TIME,
                             f"the max delay time of message is too large, max is {limits.max_delay_ms}")
        props[MessageConst.PROPERTY_TIMER_DELIVER_MS] = str(deliver_ms)
    props[MessageConst.PROPERTY_RECONSUME_TIME] = str(system.delivery_attempt)
    props[MessageConst.PROPERTY_PRODUCER_GROUP] = topic
    group = system.message_group
    if group:
        _check_group(group, limits)
        props[MessageConst.PROPERTY_SHARDING_KEY] = group
    if system.trace_context:
        props[PROPERTY_TRACE_CONTEXT] = system.trace_context
    born_host = system.born_host.strip() or remote_host()
    if born_host:
        props[PROPERTY_BORN_HOST] = born_host
    born = system.born_timestamp.ToMilliseconds() if system.HasField("born_timestamp") else now
    props[PROPERTY_BORN_TIMESTAMP] = str(born)
    return Outgoing(topic, body, props, sys_flag, born, group)


# -- remoting -> gRPC ---------------------------------------------------------------------------------------


def _timestamp(ms: int) -> Timestamp:
    stamp = Timestamp()
    stamp.FromMilliseconds(ms)
    return stamp


def incoming(msg: MessageExt, *, topic: str, receipt_handle: str | None = None) -> pb.Message:
    """A stored message as ``GrpcConverter.buildMessage`` gives it to a 5.x client (``topic``: the consumed one)."""
    props = msg.properties
    system = pb.SystemProperties(
        message_id=props.get(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or msg.offset_msg_id,
        body_digest=pb.Digest(type=pb.MD5, checksum=hashlib.md5(msg.body).hexdigest().upper()),
        body_encoding=pb.IDENTITY,
        message_type=message_type_of(props),  # type: ignore[arg-type]
        born_timestamp=_timestamp(msg.born_timestamp),
        born_host=props.get(PROPERTY_BORN_HOST) or msg.born_host,
        store_timestamp=_timestamp(msg.store_timestamp),
        store_host=msg.store_host,
        queue_id=msg.queue_id,
        queue_offset=msg.queue_offset,
        delivery_attempt=msg.reconsume_times + 1,
    )
    tag = props.get(MessageConst.PROPERTY_TAGS)
    if tag is not None:
        system.tag = tag
    keys = props.get(MessageConst.PROPERTY_KEYS)
    if keys:
        system.keys.extend(k for k in keys.split(MessageConst.KEY_SEPARATOR) if k)
    deliver = props.get(MessageConst.PROPERTY_TIMER_DELIVER_MS)
    if deliver is not None and deliver.lstrip("-").isdigit():
        system.delivery_timestamp.CopyFrom(_timestamp(int(deliver)))
    group = props.get(MessageConst.PROPERTY_SHARDING_KEY)
    if group is not None:
        system.message_group = group
    if receipt_handle is not None:
        system.receipt_handle = receipt_handle
    trace = props.get(PROPERTY_TRACE_CONTEXT)
    if trace is not None:
        system.trace_context = trace
    origin_topic = props.get(MessageConst.PROPERTY_DLQ_ORIGIN_TOPIC)
    origin_id = props.get(MessageConst.PROPERTY_DLQ_ORIGIN_MESSAGE_ID)
    if origin_topic is not None and origin_id is not None:
        system.dead_letter_queue.CopyFrom(pb.DeadLetterQueue(topic=origin_topic, message_id=origin_id))
    user = {k: v for k, v in props.items() if k not in SYSTEM_PROPERTY_KEYS}
    return pb.Message(topic=pb.Resource(name=topic), user_properties=user, system_properties=system, body=msg.body)


# -- transaction ids ----------------------------------------------------------------------------------------

_TX_SEPARATOR = " "


def encode_transaction_id(broker_name: str, commit_log_offset: int, queue_offset: int, uniq_key: str) -> str:
    """What a half message's ``transaction_id`` is to a 5.x client: where the half is stored, so that whichever proxy
    gets the client's EndTransaction can build END_TRANSACTION (RocketMQ's proxy keeps this in memory instead)."""
    return _TX_SEPARATOR.join((broker_name, str(commit_log_offset), str(queue_offset), uniq_key))


@dataclass(frozen=True, slots=True)
class TransactionRef:
    broker_name: str
    commit_log_offset: int
    queue_offset: int
    uniq_key: str


def decode_transaction_id(text: str) -> TransactionRef:
    """:func:`encode_transaction_id`'s parts; INVALID_TRANSACTION_ID when ``text`` is not one."""
    parts = text.split(_TX_SEPARATOR)
    if len(parts) != 4 or not parts[0] or not parts[3]:
        raise ProxyError(Code.INVALID_TRANSACTION_ID, f"transaction id {text[:80]!r} is not one this proxy issued")
    try:
        return TransactionRef(parts[0], int(parts[1]), int(parts[2]), parts[3])
    except ValueError:
        raise ProxyError(Code.INVALID_TRANSACTION_ID, f"transaction id {text[:80]!r} is malformed") from None
