"""The checks a broker applies to a send, applied before sending.

Every failure raises :class:`pocketmq.client.errors.InvalidMessageError` (response code 13 MESSAGE_ILLEGAL) with a
message naming the rule. The producer runs, in order: :func:`check_message` on the message as given,
:func:`check_and_encode_properties` to get the header's properties string, then :func:`check_body_size`
on the body it will really send (after compression; for a batch, the encoded batch body).
"""

from __future__ import annotations

from collections.abc import Mapping

from pocketmq.client.core.errors import InvalidMessageError
from pocketmq.client.core.message import Message
from pocketmq.common.message import NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR, encode_properties
from pocketmq.common.record import MAX_PROPERTIES_LENGTH
from pocketmq.common.topic import (
    AUTO_CREATE_TOPIC_KEY_TOPIC,
    NOT_ALLOWED_SEND_TOPIC_SET,
    TOPIC_MAX_LENGTH,
    VALID_CHARACTERS,
    is_topic_or_group_illegal,
)

__all__ = [
    "CHARACTER_MAX_LENGTH",
    "DEFAULT_MAX_MESSAGE_SIZE",
    "RESERVED_PRODUCER_GROUPS",
    "check_and_encode_properties",
    "check_body_size",
    "check_group",
    "check_message",
    "check_producer_group",
    "check_topic",
]

CHARACTER_MAX_LENGTH = 255
DEFAULT_MAX_MESSAGE_SIZE = 4 * 1024 * 1024
#: Producer groups the RocketMQ client keeps for itself.
RESERVED_PRODUCER_GROUPS = frozenset({"DEFAULT_PRODUCER", "CLIENT_INNER_PRODUCER"})


def _check_name(kind: str, name: object, max_length: int) -> str:
    if not isinstance(name, str) or not name.strip():
        raise InvalidMessageError(f"the {kind} is blank")
    if len(name) > max_length:
        raise InvalidMessageError(f"the {kind} is {len(name)} characters long, over the limit {max_length}")
    if is_topic_or_group_illegal(name):
        raise InvalidMessageError(f"the {kind} {name!r} contains characters other than [{VALID_CHARACTERS}]")
    return name


def check_topic(topic: object, *, allow_system: bool = False) -> str:
    """A topic a user may send to: non-blank, at most 127 characters of ``[%|a-zA-Z0-9_-]``, not ``TBW102``
    and, unless ``allow_system``, not one of :data:`pocketmq.common.topic.NOT_ALLOWED_SEND_TOPIC_SET`."""
    name = _check_name("topic", topic, TOPIC_MAX_LENGTH)
    if name == AUTO_CREATE_TOPIC_KEY_TOPIC:
        raise InvalidMessageError(f"the topic {name} is the auto-create key topic and cannot be sent to")
    if not allow_system and name in NOT_ALLOWED_SEND_TOPIC_SET:
        raise InvalidMessageError(f"sending to the system topic {name} is forbidden")
    return name


def check_group(group: object) -> str:
    """A producer or consumer group name: non-blank, at most 255 characters of ``[%|a-zA-Z0-9_-]``."""
    return _check_name("group", group, CHARACTER_MAX_LENGTH)


def check_producer_group(group: object) -> str:
    """:func:`check_group`, and not one of the client's own reserved groups."""
    name = check_group(group)
    if name in RESERVED_PRODUCER_GROUPS:
        raise InvalidMessageError(f"the producer group cannot be {name}, please specify another one")
    return name


def check_message(message: object) -> Message:
    """The checks that do not depend on compression: a :class:`Message` with a legal topic, a non-empty
    bytes body and a non-negative delay level."""
    if not isinstance(message, Message):
        raise InvalidMessageError(f"expected a Message, got {type(message).__name__}")
    check_topic(message.topic)
    body = message.body
    if not isinstance(body, bytes | bytearray | memoryview):
        raise InvalidMessageError(f"the message body must be bytes, not {type(body).__name__}")
    if not len(body):
        raise InvalidMessageError("the message body is empty")
    try:
        delay_level = message.delay_level
    except ValueError:
        raise InvalidMessageError("the DELAY property is not an integer") from None
    if delay_level < 0:
        raise InvalidMessageError(f"the delay level must not be negative: {delay_level}")
    return message


def check_body_size(size: int, *, max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE) -> None:
    """The body as sent (after compression; a batch's whole encoded body) must not exceed the maximum."""
    if size > max_message_size:
        raise InvalidMessageError(f"the message body is {size} bytes, over the maximum of {max_message_size}")


def check_and_encode_properties(properties: Mapping[str, str]) -> str:
    """Encode properties for the request header, rejecting what would corrupt the encoding.

    Keys and values must be strings without ``\\x01``/``\\x02`` and the result at most 32767 UTF-8 bytes
    (the stored record's length field). A clean encoding holds exactly one ``\\x01`` per entry and one
    ``\\x02`` between entries, so counting them finds any stray separator in one C-speed pass.
    """
    try:
        text = encode_properties(properties)
    except TypeError:
        bad = next((k, v) for k, v in properties.items() if not (isinstance(k, str) and isinstance(v, str)))
        raise InvalidMessageError(f"message property {bad[0]!r} must have a str name and value") from None
    entries = len(properties)
    if text.count(NAME_VALUE_SEPARATOR) != entries or text.count(PROPERTY_SEPARATOR) != max(entries - 1, 0):
        raise InvalidMessageError("message property names and values must not contain \\x01 or \\x02")
    # A UTF-8 character is at most 4 bytes, so short strings need no encode to be measured.
    if len(text) * 4 > MAX_PROPERTIES_LENGTH and len(text.encode()) > MAX_PROPERTIES_LENGTH:
        raise InvalidMessageError(f"message properties exceed {MAX_PROPERTIES_LENGTH} bytes when encoded")
    return text
