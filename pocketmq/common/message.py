"""Message properties: RocketMQ's ``MessageConst`` keys, the properties string, one-property lookups, and the
tag code (Java's ``String.hashCode`` of ``TAGS``) that consume queues store and pulls filter on.

Properties string::

    key \\x01 value \\x02 key \\x01 value            RocketMQ 4.9.3+ (what we write)
    key \\x01 value \\x02 key \\x01 value \\x02       older clients (read as well)

Reading (:func:`parse_properties`): items are the stretches between ``\\x02`` separators; an item is a pair
when it holds a ``\\x01`` after a non-empty name (the value runs to the item's end and may hold ``\\x01``);
other items are skipped, as RocketMQ 4.9 skips them. A name given twice: the last item wins. The single
lookups (:func:`get_property` over text or bytes, :func:`tags_code_of`) give exactly the value
:func:`parse_properties` would, without parsing the rest; the hot paths (the consumer's ``tags``, the commit
log's tag code) need one property of many.
"""

from __future__ import annotations

import functools
import operator
import struct
from collections.abc import Mapping
from typing import Any, AnyStr


class MessageConst:
    """Well-known property keys, under RocketMQ's Java names (``org.apache.rocketmq.common.message``)."""

    PROPERTY_KEYS = "KEYS"
    PROPERTY_TAGS = "TAGS"
    PROPERTY_WAIT_STORE_MSG_OK = "WAIT"
    PROPERTY_DELAY_TIME_LEVEL = "DELAY"
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
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX = "UNIQ_KEY"
    PROPERTY_MSG_REGION = "MSG_REGION"
    PROPERTY_TRACE_SWITCH = "TRACE_ON"
    PROPERTY_CLUSTER = "CLUSTER"
    PROPERTY_CONSUME_START_TIMESTAMP = "CONSUME_START_TIME"
    #: How many times the broker has checked a transaction's state back (on the half message's copies).
    PROPERTY_TRANSACTION_CHECK_TIMES = "TRANSACTION_CHECK_TIMES"
    #: Seconds a half message is left alone before its first check-back (instead of transactionTimeOut).
    PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS = "CHECK_IMMUNITY_TIME_IN_SECONDS"
    #: The half-queue offset of the first half message a copy was made from.
    PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET = "TRAN_PREPARED_QUEUE_OFFSET"
    #: Request-reply: the id that matches a reply to its request (a UUID, set by the requester).
    PROPERTY_CORRELATION_ID = "CORRELATION_ID"
    #: Request-reply: the client id of the requester, whose connection the broker pushes the reply to.
    PROPERTY_MESSAGE_REPLY_TO_CLIENT = "REPLY_TO_CLIENT"
    #: Request-reply: how long (ms) the requester waits for the reply.
    PROPERTY_MESSAGE_TTL = "TTL"
    #: Request-reply: when (epoch ms) the reply reached the requesting client.
    PROPERTY_REPLY_MESSAGE_ARRIVE_TIME = "ARRIVE_TIME"
    #: Request-reply: when (epoch ms) the broker pushed the reply.
    PROPERTY_PUSH_REPLY_TIME = "PUSH_REPLY_TIME"
    #: ``reply`` on a reply message: the producer sends it with SEND_REPLY_MESSAGE(_V2).
    PROPERTY_MESSAGE_TYPE = "MSG_TYPE"

    #: Keys are space-separated inside ``KEYS``.
    KEY_SEPARATOR = " "
    # --- RocketMQ 5: POP, timers, FIFO ---
    #: A popped message's check-point info (``pocketmq.common.pop``), set by the client from the pop response.
    PROPERTY_POP_CK = "POP_CK"
    PROPERTY_POP_CK_OFFSET = "POP_CK_OFFSET"
    #: When a revived message was first popped (ms).
    PROPERTY_FIRST_POP_TIME = "1ST_POP_TIME"
    #: A FIFO message's message group: one group goes to one queue.
    PROPERTY_SHARDING_KEY = "__SHARDINGKEY"
    #: A timer message's delivery time: absolute (ms since the epoch), or relative in seconds or ms.
    PROPERTY_TIMER_DELIVER_MS = "TIMER_DELIVER_MS"
    PROPERTY_TIMER_DELAY_SEC = "TIMER_DELAY_SEC"
    PROPERTY_TIMER_DELAY_MS = "TIMER_DELAY_MS"
    #: Set by the broker on a stored timer message: when it fires (ms); kept on the delivered message.
    PROPERTY_TIMER_OUT_MS = "TIMER_OUT_MS"
    PROPERTY_TIMER_ENQUEUE_MS = "TIMER_ENQUEUE_MS"
    PROPERTY_TIMER_DEQUEUE_MS = "TIMER_DEQUEUE_MS"
    PROPERTY_TIMER_ROLL_TIMES = "TIMER_ROLL_TIMES"
    PROPERTY_TIMER_DEL_UNIQKEY = "TIMER_DEL_UNIQKEY"
    PROPERTY_DLQ_ORIGIN_TOPIC = "DLQ_ORIGIN_TOPIC"
    PROPERTY_DLQ_ORIGIN_MESSAGE_ID = "DLQ_ORIGIN_MESSAGE_ID"
    # --- end RocketMQ 5 ---
    #: The ``MSG_TYPE`` of a reply (RocketMQ's ``MixAll.REPLY_MESSAGE_FLAG``).
    REPLY_MESSAGE_FLAG = "reply"


NAME_VALUE_SEPARATOR = "\x01"
PROPERTY_SEPARATOR = "\x02"


def encode_properties(properties: Mapping[str, str]) -> str:
    """``k\\x01v\\x02k\\x01v`` without a trailing separator (the 4.9.3+ form). Names and values must be ``str``
    (``TypeError`` otherwise: the producer's validator relies on it)."""
    return PROPERTY_SEPARATOR.join(map(NAME_VALUE_SEPARATOR.join, properties.items()))


def parse_properties(text: str) -> dict[str, str]:
    """Parse either form (see the module docstring for what is skipped and which value wins)."""
    result: dict[str, str] = {}
    if not text:
        return result
    for item in text.split(PROPERTY_SEPARATOR):
        name, sep, value = item.partition(NAME_VALUE_SEPARATOR)
        if sep and name:
            result[name] = value
    return result


def join_properties(first: str, second: str) -> str:
    """``first`` followed by ``second``, with one separator between them when both are non-empty."""
    if not second:
        return first
    if not first or first.endswith(PROPERTY_SEPARATOR):
        return first + second
    return first + PROPERTY_SEPARATOR + second


#: ``name -> ("\x02name\x01", "name\x01", "\x02")`` for the names looked up so far, ``str`` and ``bytes``
#: names alike (bounded: names are few).
_MARKERS: dict[str | bytes, tuple[Any, Any, Any]] = {}
_MARKERS_LIMIT = 512


def _markers(name: str | bytes) -> tuple[Any, Any, Any]:
    markers: tuple[Any, Any, Any]
    if isinstance(name, str):
        first = name + NAME_VALUE_SEPARATOR
        markers = (PROPERTY_SEPARATOR + first, first, PROPERTY_SEPARATOR)
    else:
        first_bytes = name + b"\x01"
        markers = (b"\x02" + first_bytes, first_bytes, b"\x02")
    if len(_MARKERS) < _MARKERS_LIMIT:
        _MARKERS[name] = markers
    return markers


def get_property(text: AnyStr, name: AnyStr) -> AnyStr | None:
    """One property's value from a properties string (or its UTF-8 bytes, with a ``bytes`` name), exactly as
    :func:`parse_properties` would give it, without parsing the rest.

    An item starts at the start or after a ``\\x02``, so ``\\x02name\\x01`` marks an item of that name after
    another and ``name\\x01`` at the start marks the first item. The last item of a name wins: the last inner
    match decides when there is one, the first item only when there is none.
    """
    if not name:
        return None
    inner, first, separator = _MARKERS.get(name) or _markers(name)
    at = text.rfind(inner)
    if at >= 0:
        start = at + len(inner)
    elif text.startswith(first):
        start = len(first)
    else:
        return None
    end = text.find(separator, start)
    return text[start:] if end < 0 else text[start:end]


_POWERS_OF_31 = [1]
"""``31**i mod 2**32`` for i = 0, 1, ...: grown on demand, bounded by the longest string hashed."""


def java_hash(text: str) -> int:
    """Java's ``String.hashCode()`` (over UTF-16 code units, int32 overflow), uncached: for strings seen once
    (the index's unique keys), which would only push the tag codes out of :func:`java_string_hash`'s cache.

    Code units, not code points: a character outside the BMP counts as its two surrogates, as in Java.
    """
    units: bytes | tuple[int, ...] = text.encode("ascii") if text.isascii() else struct.unpack(
        f">{len(text.encode('utf-16-be')) // 2}H", text.encode("utf-16-be"))
    return java_hash_after(0, units)


def java_hash_after(prefix_hash: int, units: bytes | tuple[int, ...]) -> int:
    """The ``String.hashCode()`` of a string made of a prefix whose hash is ``prefix_hash`` followed by the
    UTF-16 code ``units`` (ASCII bytes are their own code units): ``hash("topic#" + key)`` from the topic's
    hash and the key's raw bytes, with no string built. One ``sum(map(...))`` over the units and the powers
    of 31, in C."""
    powers = _POWERS_OF_31
    n = len(units)
    while len(powers) <= n:
        powers.append(powers[-1] * 31 & 0xFFFFFFFF)
    h: int = (prefix_hash * powers[n] + sum(map(operator.mul, units[::-1], powers))) & 0xFFFFFFFF
    return h - 0x100000000 if h & 0x80000000 else h


java_string_hash = functools.lru_cache(maxsize=8192)(java_hash)
""":func:`java_hash`, cached: the tag code of a message (tags repeat)."""


_TAGS = MessageConst.PROPERTY_TAGS
_TAGS_BYTES = _TAGS.encode()


_TAGS_FIRST = _TAGS + NAME_VALUE_SEPARATOR
_TAGS_VALUE_AT = len(_TAGS_FIRST)


def tags_code_of(properties: str) -> int:
    """Tag code of a properties string: hash of TAGS, 0 when there is none or it is empty.

    The store computes this for every message it appends, so the usual case is inline: the last
    ``TAGS\x01`` starts an item (then it is the last TAGS item); only when it sits inside a value does the
    general lookup decide."""
    at = properties.rfind(_TAGS_FIRST)
    if at < 0:
        return 0
    if at and properties[at - 1] != PROPERTY_SEPARATOR:
        tags = get_property(properties, _TAGS)
    else:
        start = at + _TAGS_VALUE_AT
        end = properties.find(PROPERTY_SEPARATOR, start)
        tags = properties[start:] if end < 0 else properties[start:end]
    return java_string_hash(tags) if tags else 0


def tags_code_of_bytes(properties: bytes) -> int:
    """:func:`tags_code_of` for raw properties bytes (batch entries, records); bad UTF-8 is replaced."""
    raw = get_property(properties, _TAGS_BYTES)
    return java_string_hash(raw.decode(errors="replace")) if raw else 0
