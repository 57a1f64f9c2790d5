"""Messages, queues and send results as the producer puts them on the wire, and the batch's rules.

The properties string and its keys are the model's (:mod:`pocketmq.common.message`), as is the batch body's layout
(:mod:`pocketmq.common.batch`): a :class:`Message` keeps its properties as a dict under RocketMQ's keys, and
:meth:`MessageBatch.of` checks a batch and encodes its body.
"""

from __future__ import annotations

import datetime
import enum
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from pocketmq.client.core.errors import InvalidMessageError
from pocketmq.client.core.uniq import UniqIdGenerator, default_generator
from pocketmq.common.batch import BATCH_ENTRY_HEADER, BATCH_ENTRY_OVERHEAD
from pocketmq.common.message import NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR, MessageConst
from pocketmq.common.record import MAX_PROPERTIES_LENGTH, PROPERTIES_LENGTH
from pocketmq.common.topic import is_retry_topic
from pocketmq.remoting.codes import ResponseCode
from pocketmq.remoting.command import Body
from pocketmq.remoting.errors import InvalidHeaderError, error_for_response

__all__ = [
    "DEFAULT_REGION",
    "Message",
    "MessageBatch",
    "MessageQueue",
    "SendResult",
    "SendStatus",
    "encode_batch",
    "ensure_uniq_key",
    "send_result_from_response",
]

DEFAULT_REGION = "DefaultRegion"

# Hot-path copies of the keys a Message reads and writes on every send: a module global is cheaper to read
# than a class attribute, and Message() touches four.
_TAGS = MessageConst.PROPERTY_TAGS
_KEYS = MessageConst.PROPERTY_KEYS
_DELAY = MessageConst.PROPERTY_DELAY_TIME_LEVEL
_WAIT = MessageConst.PROPERTY_WAIT_STORE_MSG_OK
_UNIQ_KEY = MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX
_DELIVER_MS = MessageConst.PROPERTY_TIMER_DELIVER_MS
_DELAY_MS = MessageConst.PROPERTY_TIMER_DELAY_MS
_SHARDING_KEY = MessageConst.PROPERTY_SHARDING_KEY
_KEY_SEPARATOR = MessageConst.KEY_SEPARATOR
_WAIT_TRUE = "true"
_WAIT_FALSE = "false"
_PROPERTY_SEPARATOR = PROPERTY_SEPARATOR
_NAME_VALUE_SEPARATOR = NAME_VALUE_SEPARATOR


# -- message ---------------------------------------------------------------------------------------------


class Message:
    """A message to send. Tags, keys, delay level and the wait flag live in ``properties`` under RocketMQ's
    keys (``TAGS``, ``KEYS``, ``DELAY``, ``WAIT``), so the properties string is all the broker needs.

    ``keys`` may be one string (already space-separated) or a list of keys. Explicit keyword arguments win
    over the same keys in ``properties``. The producer adds ``UNIQ_KEY`` on first send and keeps it across
    retries.

    RocketMQ 5: ``deliver_at`` (a ``datetime``, or epoch milliseconds) or ``delay`` (a ``timedelta``, or seconds)
    makes a timer message, delivered at that millisecond (``TIMER_DELIVER_MS`` / ``TIMER_DELAY_MS``, the
    broker's clock for a delay), at most ``timerMaxDelaySec`` (3 days) ahead. ``message_group`` makes a FIFO
    message (``__SHARDINGKEY``): the producer sends every message of a group to one queue (RocketMQ 5's proxy's
    hash), where FIFO consumers take them in order.
    """

    __slots__ = ("body", "flag", "properties", "topic")

    def __init__(
        self,
        topic: str,
        body: Body,
        *,
        tags: str | None = None,
        keys: str | Iterable[str] | None = None,
        properties: Mapping[str, str] | None = None,
        delay_level: int = 0,
        flag: int = 0,
        wait_store_msg_ok: bool = True,
        deliver_at: datetime.datetime | int | None = None,
        delay: datetime.timedelta | float | None = None,
        message_group: str | None = None,
    ) -> None:
        self.topic = topic
        self.body = body
        self.flag = flag
        if deliver_at is not None or delay is not None or message_group is not None:
            properties = _rocketmq5_properties(properties, deliver_at, delay, message_group, delay_level)
        if not (properties or tags or keys or delay_level):
            # The usual message: WAIT alone, one dict display instead of five steps.
            self.properties = {_WAIT: _WAIT_TRUE if wait_store_msg_ok else _WAIT_FALSE}
            return
        props: dict[str, str] = dict(properties) if properties else {}
        if tags:
            props[_TAGS] = tags
        if keys:
            props[_KEYS] = keys if isinstance(keys, str) else _KEY_SEPARATOR.join(keys)
        if delay_level:
            props[_DELAY] = str(delay_level)
        props[_WAIT] = _WAIT_TRUE if wait_store_msg_ok else _WAIT_FALSE
        self.properties = props

    @property
    def tags(self) -> str | None:
        return self.properties.get(_TAGS)

    @property
    def keys(self) -> str | None:
        """The space-separated keys, as stored."""
        return self.properties.get(_KEYS)

    @property
    def key_list(self) -> list[str]:
        keys = self.properties.get(_KEYS)
        return keys.split(_KEY_SEPARATOR) if keys else []

    @property
    def delay_level(self) -> int:
        raw = self.properties.get(_DELAY)
        return int(raw) if raw else 0

    @delay_level.setter
    def delay_level(self, level: int) -> None:
        if level:
            self.properties[_DELAY] = str(level)
        else:
            self.properties.pop(_DELAY, None)

    @property
    def message_group(self) -> str | None:
        """The FIFO message group (``__SHARDINGKEY``)."""
        return self.properties.get(_SHARDING_KEY)

    @property
    def wait_store_msg_ok(self) -> bool:
        """``WAIT``: absent or anything but ``"false"`` means wait for the store (flush / replica)."""
        return self.properties.get(_WAIT) != _WAIT_FALSE

    @property
    def uniq_key(self) -> str | None:
        """The client-side message id, once the producer (or :func:`ensure_uniq_key`) has set it."""
        return self.properties.get(_UNIQ_KEY)

    def __repr__(self) -> str:
        return (
            f"Message(topic={self.topic!r}, body=<{len(self.body)} bytes>, flag={self.flag}, "
            f"properties={self.properties!r})"
        )


def _rocketmq5_properties(properties: Mapping[str, str] | None, deliver_at: datetime.datetime | int | None,
                          delay: datetime.timedelta | float | None, message_group: str | None,
                          delay_level: int) -> dict[str, str]:
    """``properties`` with the timer and message-group properties of :class:`Message`'s keyword arguments."""
    props = dict(properties) if properties else {}
    if deliver_at is not None and delay is not None:
        raise InvalidMessageError("give deliver_at or delay, not both")
    if (deliver_at is not None or delay is not None) and delay_level:
        raise InvalidMessageError("a timer message (deliver_at, delay) cannot have a delay level too")
    if isinstance(deliver_at, datetime.datetime):
        props[_DELIVER_MS] = str(int(deliver_at.timestamp() * 1000))
    elif deliver_at is not None:
        props[_DELIVER_MS] = str(int(deliver_at))
    if delay is not None:
        seconds = delay.total_seconds() if isinstance(delay, datetime.timedelta) else float(delay)
        if seconds < 0:
            raise InvalidMessageError("delay must not be negative")
        props[_DELAY_MS] = str(int(seconds * 1000))
    if message_group is not None:
        if not message_group or not message_group.strip():
            raise InvalidMessageError("message_group must not be blank")
        props[_SHARDING_KEY] = message_group
    return props


def ensure_uniq_key(message: Message, generator: UniqIdGenerator | None = None) -> str:
    """The message's ``UNIQ_KEY``, set first if missing (so retries of the same message keep one id)."""
    props = message.properties
    uniq = props.get(_UNIQ_KEY)
    if uniq is None:
        uniq = (generator or default_generator()).next_id()
        props[_UNIQ_KEY] = uniq
    return uniq


@dataclass(frozen=True, slots=True, order=True)
class MessageQueue:
    """One queue of a topic on one broker group. Frozen: route caches share instances, and nothing may
    re-point a cached queue at another broker (apache/rocketmq#7779)."""

    topic: str
    broker_name: str
    queue_id: int
    _hash: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Queues key the offset, process-queue and fault tables on every pull and ack: hash once.
        object.__setattr__(self, "_hash", hash((self.topic, self.broker_name, self.queue_id)))

    def __hash__(self) -> int:
        return self._hash

    def __reduce__(self) -> tuple[type[MessageQueue], tuple[str, str, int]]:
        # Rebuilt through __init__, so a queue unpickled in another process hashes with that process's seed.
        return (MessageQueue, (self.topic, self.broker_name, self.queue_id))


# -- results ---------------------------------------------------------------------------------------------


class SendStatus(enum.Enum):
    """Outcome of a stored message. Only ``SEND_OK`` means flushed and replicated as configured; the others
    mean stored on the master but a wait (flush, slave) timed out or no slave was there."""

    SEND_OK = ResponseCode.SUCCESS
    FLUSH_DISK_TIMEOUT = ResponseCode.FLUSH_DISK_TIMEOUT
    FLUSH_SLAVE_TIMEOUT = ResponseCode.FLUSH_SLAVE_TIMEOUT
    SLAVE_NOT_AVAILABLE = ResponseCode.SLAVE_NOT_AVAILABLE

    @classmethod
    def from_response_code(cls, code: int) -> SendStatus | None:
        """The status for a send response code, or ``None`` when the code is an error."""
        return _STATUS_BY_CODE.get(code)


_STATUS_BY_CODE: dict[int, SendStatus] = {int(status.value): status for status in SendStatus}


@dataclass(slots=True)
class SendResult:
    """What a send returns. ``msg_id`` is the client's ``UNIQ_KEY`` (comma-joined for a batch);
    ``offset_msg_id`` is the broker's id (store host + commitlog offset), comma-joined for a batch.

    A plain record, not a frozen one: one is built per message sent, and a frozen dataclass costs several times
    as much to build (docs/design/decisions.md)."""

    status: SendStatus
    msg_id: str
    offset_msg_id: str
    message_queue: MessageQueue
    queue_offset: int
    region_id: str = DEFAULT_REGION
    trace_on: bool = True
    transaction_id: str | None = None
    #: A timer message's recall handle, for :meth:`pocketmq.client.producer.producer.Producer.recall_message`.
    recall_handle: str | None = None


def _required_int(ext_fields: Mapping[str, str], name: str) -> int:
    raw = ext_fields.get(name)
    if raw is None:
        raise InvalidHeaderError(f"send response lacks {name}")
    try:
        return int(raw)
    except ValueError:
        raise InvalidHeaderError(f"send response has a non-integer {name}: {raw!r}") from None


def send_result_from_response(
    code: int,
    ext_fields: Mapping[str, str] | None,
    *,
    message_queue: MessageQueue,
    msg_id: str,
    remark: str | None = None,
    addr: str | None = None,
) -> SendResult:
    """Turn a send response into a :class:`SendResult`, or raise the broker's error for a non-store code.

    ``message_queue`` is the queue the request named; the result carries the queue id the broker reports
    (a new object when it differs, never a mutated one).
    """
    status = _STATUS_BY_CODE.get(code)
    if status is None:
        raise error_for_response(code, remark, addr)
    fields = ext_fields or {}
    offset_msg_id = fields.get("msgId")
    if offset_msg_id is None:
        raise InvalidHeaderError("send response lacks msgId")
    queue_id = _required_int(fields, "queueId")
    queue = message_queue if queue_id == message_queue.queue_id else replace(message_queue, queue_id=queue_id)
    return SendResult(
        status=status,
        msg_id=msg_id,
        offset_msg_id=offset_msg_id,
        message_queue=queue,
        queue_offset=_required_int(fields, "queueOffset"),
        region_id=fields.get(MessageConst.PROPERTY_MSG_REGION) or DEFAULT_REGION,
        trace_on=fields.get(MessageConst.PROPERTY_TRACE_SWITCH) != _WAIT_FALSE,
        transaction_id=fields.get("transactionId"),
        recall_handle=fields.get("recallHandle"),
    )


# -- batch -----------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MessageBatch:
    """Messages of one topic encoded as one ``SEND_BATCH_MESSAGE`` body.

    ``properties`` are the request header's (``WAIT`` only); ``msg_id`` joins the inner ``UNIQ_KEY`` values
    with commas, as RocketMQ's batch ``SendResult`` does.
    """

    topic: str
    body: bytes
    properties: dict[str, str]
    msg_id: str
    wait_store_msg_ok: bool
    messages: tuple[Message, ...]

    @classmethod
    def of(
        cls,
        messages: Iterable[Message],
        *,
        generator: UniqIdGenerator | None = None,
        max_size: int | None = None,
    ) -> MessageBatch:
        """Check the batch rules, give each message its ``UNIQ_KEY`` and encode the body.

        Raises :class:`InvalidMessageError` for an empty batch, a delay level, a ``%RETRY%`` topic, mixed
        topics or mixed ``WAIT`` flags, an empty body, properties over 32767 bytes, or a body over
        ``max_size``.
        """
        batch = tuple(messages)
        _check_batch(batch)
        gen = generator or default_generator()
        ids = [ensure_uniq_key(message, gen) for message in batch]
        body = _encode_entries(batch, max_size)
        wait = batch[0].wait_store_msg_ok
        props = {_WAIT: _WAIT_TRUE if wait else _WAIT_FALSE}
        return cls(batch[0].topic, body, props, ",".join(ids), wait, batch)


def encode_batch(
    messages: Sequence[Message],
    *,
    generator: UniqIdGenerator | None = None,
    max_size: int | None = None,
) -> bytes:
    """The ``SEND_BATCH_MESSAGE`` body for ``messages`` (see :meth:`MessageBatch.of` for the rules)."""
    return MessageBatch.of(messages, generator=generator, max_size=max_size).body


def _check_batch(batch: Sequence[Message]) -> None:
    """The batch rules, message by message and in this order for each (the first broken rule is reported)."""
    if not batch:
        raise InvalidMessageError("a batch needs at least one message")
    first = batch[0]
    topic = first.topic
    first_retry = is_retry_topic(topic)
    wait = first.properties.get(_WAIT) != _WAIT_FALSE
    for message in batch:
        props = message.properties
        delay = props.get(_DELAY)
        if delay and int(delay) > 0:
            raise InvalidMessageError("a delay level is not supported for batch messages")
        if _DELIVER_MS in props or _DELAY_MS in props or MessageConst.PROPERTY_TIMER_DELAY_SEC in props:
            raise InvalidMessageError("timer messages (deliver_at, delay) cannot be sent in a batch")
        if message.topic != topic:
            if is_retry_topic(message.topic):
                raise InvalidMessageError(f"retry topics are not supported for batch messages: {message.topic}")
            raise InvalidMessageError(
                f"all messages of a batch must have one topic: {first.topic!r} and {message.topic!r}"
            )
        if first_retry:
            raise InvalidMessageError(f"retry topics are not supported for batch messages: {topic}")
        if (props.get(_WAIT) != _WAIT_FALSE) != wait:
            raise InvalidMessageError("all messages of a batch must have the same wait_store_msg_ok")
        if not message.body:
            raise InvalidMessageError("the body of a batch message is empty")


def _encode_entries(batch: Sequence[Message], max_size: int | None) -> bytes:
    """The body: each message's entry (:func:`pocketmq.common.batch.append_batch_entry`'s layout, inlined here: one
    ``struct`` call and a list extension per message)."""
    parts: list[bytes | bytearray | memoryview] = []
    add = parts.extend
    pack_head = BATCH_ENTRY_HEADER.pack
    pack_len = PROPERTIES_LENGTH.pack
    join_items = _PROPERTY_SEPARATOR.join
    join_pair = _NAME_VALUE_SEPARATOR.join
    total = 0
    for message in batch:
        props = join_items(map(join_pair, message.properties.items())).encode()
        props_len = len(props)
        if props_len > MAX_PROPERTIES_LENGTH:
            raise InvalidMessageError(f"message properties are {props_len} bytes, over {MAX_PROPERTIES_LENGTH}")
        body = message.body
        body_len = len(body)
        size = BATCH_ENTRY_OVERHEAD + body_len + props_len
        add((pack_head(size, 0, 0, message.flag, body_len), body, pack_len(props_len), props))
        total += size
        if max_size is not None and total > max_size:
            raise InvalidMessageError(f"the batch body exceeds the maximum message size {max_size}")
    return b"".join(parts)
