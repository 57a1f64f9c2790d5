"""Messages, queues, send results and the batch body, as the producer puts them on the wire.

Properties string (reference §4.1)::

    key \\x01 value \\x02 key \\x01 value            RocketMQ 4.9.3+ (what we write)
    key \\x01 value \\x02 key \\x01 value \\x02       older clients (we read both)

Batch body of ``SEND_BATCH_MESSAGE`` (320), one entry per message, all big-endian (reference §4.6)::

    offset  size  field
    0       4     TOTALSIZE   whole entry, this field included (= 22 + body + properties)
    4       4     MAGICCODE   0 (the broker writes the real one)
    8       4     BODYCRC     0 (the broker computes it)
    12      4     FLAG        the message's user flag
    16      4     BODY length
    20      n     BODY        never compressed in a batch
    20+n    2     PROPERTIES length (bytes, <= 32767)
    22+n    p     PROPERTIES  UTF-8, including the entry's own UNIQ_KEY

The broker stores each entry as a full record under the request header's topic, queue and sysFlag, and
appends the header's properties (``i``) to each entry's.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from client.core.errors import InvalidMessageError
from client.core.uniq import UniqIdGenerator, default_generator
from remoting.codes import ResponseCode
from remoting.command import Body
from remoting.errors import InvalidHeaderError, error_for_response

__all__ = [
    "NAME_VALUE_SEPARATOR",
    "PROPERTY_DELAY_TIME_LEVEL",
    "PROPERTY_KEYS",
    "PROPERTY_MSG_REGION",
    "PROPERTY_SEPARATOR",
    "PROPERTY_TAGS",
    "PROPERTY_TRACE_SWITCH",
    "PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX",
    "PROPERTY_WAIT_STORE_MSG_OK",
    "RETRY_GROUP_TOPIC_PREFIX",
    "Message",
    "MessageBatch",
    "MessageQueue",
    "SendResult",
    "SendStatus",
    "decode_properties",
    "encode_batch",
    "encode_properties",
    "ensure_uniq_key",
    "send_result_from_response",
]

NAME_VALUE_SEPARATOR = "\x01"
PROPERTY_SEPARATOR = "\x02"

# Well-known property keys (RocketMQ's MessageConst names).
PROPERTY_KEYS = "KEYS"
PROPERTY_TAGS = "TAGS"
PROPERTY_WAIT_STORE_MSG_OK = "WAIT"
PROPERTY_DELAY_TIME_LEVEL = "DELAY"
PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX = "UNIQ_KEY"
PROPERTY_MSG_REGION = "MSG_REGION"
PROPERTY_TRACE_SWITCH = "TRACE_ON"
PROPERTY_RETRY_TOPIC = "RETRY_TOPIC"
PROPERTY_REAL_TOPIC = "REAL_TOPIC"
PROPERTY_REAL_QUEUE_ID = "REAL_QID"
PROPERTY_TRANSACTION_PREPARED = "TRAN_MSG"
PROPERTY_PRODUCER_GROUP = "PGROUP"
PROPERTY_MIN_OFFSET = "MIN_OFFSET"
PROPERTY_MAX_OFFSET = "MAX_OFFSET"
PROPERTY_ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"
PROPERTY_RECONSUME_TIME = "RECONSUME_TIME"
PROPERTY_MAX_RECONSUME_TIMES = "MAX_RECONSUME_TIMES"
PROPERTY_CLUSTER = "CLUSTER"
PROPERTY_CONSUME_START_TIMESTAMP = "CONSUME_START_TIME"

#: Keys space-separated inside ``KEYS``.
KEY_SEPARATOR = " "
RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
DEFAULT_REGION = "DefaultRegion"
#: The properties field of a stored record has a 2-byte length (reference §4.1).
MAX_PROPERTIES_BYTES = 0x7FFF

_WAIT_TRUE = "true"
_WAIT_FALSE = "false"


# -- properties ------------------------------------------------------------------------------------------


def encode_properties(properties: Mapping[str, str]) -> str:
    """``key\\x01value\\x02...`` without a trailing separator. Keys and values must be ``str``."""
    return PROPERTY_SEPARATOR.join(map(NAME_VALUE_SEPARATOR.join, properties.items()))


def decode_properties(text: str) -> dict[str, str]:
    """Parse a properties string written with or without a trailing ``\\x02``; items without ``\\x01``
    are skipped, as RocketMQ does."""
    result: dict[str, str] = {}
    if not text:
        return result
    for item in text.split(PROPERTY_SEPARATOR):
        name, sep, value = item.partition(NAME_VALUE_SEPARATOR)
        if sep:
            result[name] = value
    return result


# -- message ---------------------------------------------------------------------------------------------


class Message:
    """A message to send. Tags, keys, delay level and the wait flag live in ``properties`` under RocketMQ's
    keys (``TAGS``, ``KEYS``, ``DELAY``, ``WAIT``), so the properties string is all the broker needs.

    ``keys`` may be one string (already space-separated) or a list of keys. Explicit keyword arguments win
    over the same keys in ``properties``. The producer adds ``UNIQ_KEY`` on first send and keeps it across
    retries.
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
    ) -> None:
        self.topic = topic
        self.body = body
        self.flag = flag
        props: dict[str, str] = dict(properties) if properties else {}
        if tags:
            props[PROPERTY_TAGS] = tags
        if keys:
            props[PROPERTY_KEYS] = keys if isinstance(keys, str) else KEY_SEPARATOR.join(keys)
        if delay_level:
            props[PROPERTY_DELAY_TIME_LEVEL] = str(delay_level)
        props[PROPERTY_WAIT_STORE_MSG_OK] = _WAIT_TRUE if wait_store_msg_ok else _WAIT_FALSE
        self.properties = props

    @property
    def tags(self) -> str | None:
        return self.properties.get(PROPERTY_TAGS)

    @property
    def keys(self) -> str | None:
        """The space-separated keys, as stored."""
        return self.properties.get(PROPERTY_KEYS)

    @property
    def key_list(self) -> list[str]:
        keys = self.properties.get(PROPERTY_KEYS)
        return keys.split(KEY_SEPARATOR) if keys else []

    @property
    def delay_level(self) -> int:
        raw = self.properties.get(PROPERTY_DELAY_TIME_LEVEL)
        return int(raw) if raw else 0

    @delay_level.setter
    def delay_level(self, level: int) -> None:
        if level:
            self.properties[PROPERTY_DELAY_TIME_LEVEL] = str(level)
        else:
            self.properties.pop(PROPERTY_DELAY_TIME_LEVEL, None)

    @property
    def wait_store_msg_ok(self) -> bool:
        """``WAIT``: absent or anything but ``"false"`` means wait for the store (flush / replica)."""
        return self.properties.get(PROPERTY_WAIT_STORE_MSG_OK) != _WAIT_FALSE

    @property
    def uniq_key(self) -> str | None:
        """The client-side message id, once the producer (or :func:`ensure_uniq_key`) has set it."""
        return self.properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)

    def __repr__(self) -> str:
        return (
            f"Message(topic={self.topic!r}, body=<{len(self.body)} bytes>, flag={self.flag}, "
            f"properties={self.properties!r})"
        )


def ensure_uniq_key(message: Message, generator: UniqIdGenerator | None = None) -> str:
    """The message's ``UNIQ_KEY``, set first if missing (so retries of the same message keep one id)."""
    props = message.properties
    uniq = props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
    if uniq is None:
        uniq = (generator or default_generator()).next_id()
        props[PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = uniq
    return uniq


@dataclass(frozen=True, slots=True, order=True)
class MessageQueue:
    """One queue of a topic on one broker group. Frozen: route caches share instances, and nothing may
    re-point a cached queue at another broker (RocketMQ bug #7779)."""

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

    A plain record, not a frozen one: one is built per message sent, and a frozen dataclass costs ~1 µs more
    to build (measured: 1.23 against 0.21 µs)."""

    status: SendStatus
    msg_id: str
    offset_msg_id: str
    message_queue: MessageQueue
    queue_offset: int
    region_id: str = DEFAULT_REGION
    trace_on: bool = True
    transaction_id: str | None = None


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
        region_id=fields.get(PROPERTY_MSG_REGION) or DEFAULT_REGION,
        trace_on=fields.get(PROPERTY_TRACE_SWITCH) != _WAIT_FALSE,
        transaction_id=fields.get("transactionId"),
    )


# -- batch -----------------------------------------------------------------------------------------------

_ENTRY_HEAD = struct.Struct(">iiiii")  # TOTALSIZE, MAGICCODE, BODYCRC, FLAG, BODY length
_PROPS_LEN = struct.Struct(">h")
#: TOTALSIZE + MAGICCODE + BODYCRC + FLAG + body length + properties length.
BATCH_ENTRY_OVERHEAD = _ENTRY_HEAD.size + _PROPS_LEN.size


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
        props = {PROPERTY_WAIT_STORE_MSG_OK: _WAIT_TRUE if wait else _WAIT_FALSE}
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
    if not batch:
        raise InvalidMessageError("a batch needs at least one message")
    first = batch[0]
    for message in batch:
        if message.delay_level > 0:
            raise InvalidMessageError("a delay level is not supported for batch messages")
        if message.topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            raise InvalidMessageError(f"retry topics are not supported for batch messages: {message.topic}")
        if message.topic != first.topic:
            raise InvalidMessageError(
                f"all messages of a batch must have one topic: {first.topic!r} and {message.topic!r}"
            )
        if message.wait_store_msg_ok != first.wait_store_msg_ok:
            raise InvalidMessageError("all messages of a batch must have the same wait_store_msg_ok")
        if not message.body:
            raise InvalidMessageError("the body of a batch message is empty")


def append_batch_entry(parts: list[bytes | bytearray | memoryview], body: bytes | bytearray | memoryview, flag: int,
                       props: bytes) -> int:
    """Append one inner message of a ``SEND_BATCH_MESSAGE`` body to ``parts``; returns its encoded size.
    Raises :class:`InvalidMessageError` for properties over 32767 bytes."""
    if len(props) > MAX_PROPERTIES_BYTES:
        raise InvalidMessageError(f"message properties are {len(props)} bytes, over {MAX_PROPERTIES_BYTES}")
    size = BATCH_ENTRY_OVERHEAD + len(body) + len(props)
    parts.append(_ENTRY_HEAD.pack(size, 0, 0, flag, len(body)))
    parts.append(body)
    parts.append(_PROPS_LEN.pack(len(props)))
    parts.append(props)
    return size


def _encode_entries(batch: Sequence[Message], max_size: int | None) -> bytes:
    parts: list[bytes | bytearray | memoryview] = []
    total = 0
    for message in batch:
        total += append_batch_entry(parts, message.body, message.flag, encode_properties(message.properties).encode())
        if max_size is not None and total > max_size:
            raise InvalidMessageError(f"the batch body exceeds the maximum message size {max_size}")
    return b"".join(parts)
