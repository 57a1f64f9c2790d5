"""Received messages: :class:`MessageExt` and the decoding of a ``PULL_MESSAGE`` response body.

The body of a pull response is the stored records concatenated, byte for byte as in the broker's commit
log; the record format and its validation are the model's (:mod:`pocketmq.common.record`, whose
docstring has the layout), and :func:`decode_messages` builds a :class:`MessageExt` from each record that
:func:`pocketmq.common.record.locate_record` finds. A pull response may come from a 5.x broker, so the v2 record
(2-byte topic length) is read too, and bodies are inflated (SYSFLAG 0x1) here.

Speed: decoding runs for every consumed message, so a record costs one ``unpack_from`` over the response
bytes (in :func:`~pocketmq.common.record.locate_record`), one copy of the body, a dict lookup for the topic name,
and nothing else it can put off: the header fields reach :class:`MessageExt` as the one tuple
``unpack_from`` made. The properties string is decoded to ``str`` eagerly (so bad UTF-8 is caught here)
but parsed into a dict only when someone asks for it; single properties (``TAGS``, ``UNIQ_KEY``) are found
by a scan of the string (:func:`pocketmq.common.message.get_property`). The host strings and the offset message id
are built on first access from the raw host fields.

Every malformed input raises :class:`MessageDecodeError`; never ``IndexError`` or ``struct.error``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from pocketmq.client.core.compression import decompress_body
from pocketmq.client.core.errors import CompressionError, MQClientError
from pocketmq.client.core.message import MessageQueue
from pocketmq.common.errors import RecordFormatError
from pocketmq.common.message import MessageConst, encode_properties, get_property, parse_properties
from pocketmq.common.record import (
    MESSAGE_MAGIC_CODE,
    TOPIC_NAMES,
    format_host,
    locate_record,
    message_id,
    parse_host_port,
    remember_topic,
)
from pocketmq.common.sysflag import MessageSysFlag
from pocketmq.common.topic import retry_topic
from pocketmq.remoting.command import Body

__all__ = [
    "MessageDecodeError",
    "MessageExt",
    "decode_messages",
    "restore_retry_topic",
    "restore_retry_topics",
]

_KEYS = MessageConst.PROPERTY_KEYS
_TAGS = MessageConst.PROPERTY_TAGS
_UNIQ_KEY = MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX
_COMPRESSED = MessageSysFlag.COMPRESSED


class MessageDecodeError(MQClientError):
    """A pull response body is not a sequence of valid message records.

    ``position`` is the byte offset of the bad record in the body; the message starts with the record
    decoder's reason (:class:`pocketmq.common.errors.RecordFormatError`). The body was corrupted on the way or written
    by something that is not a RocketMQ broker; retrying the same pull gives the same bytes.
    """

    retriable = False

    def __init__(self, message: str, *, position: int) -> None:
        self.position = position
        super().__init__(f"{message} (record at byte {position})")


# -- the message -----------------------------------------------------------------------------------------


class MessageExt:
    """A message as a consumer receives it (RocketMQ's ``MessageExt`` / ``MessageClientExt``).

    ``msg_id`` is the producer's ``UNIQ_KEY`` when it has one, else ``offset_msg_id`` (store host and
    commit-log offset). ``sys_flag`` is the stored one: bit 0x1 still says the record was compressed even
    after the decoder inflated ``body``. ``store_size`` is the record's size in the commit log.
    ``broker_name`` is filled by the pull that fetched the message.
    """

    __slots__ = (
        "_born_host_raw",
        "_properties",
        "_properties_text",
        "_store_host_raw",
        "body",
        "body_crc",
        "born_timestamp",
        "broker_name",
        "commit_log_offset",
        "flag",
        "prepared_transaction_offset",
        "queue_id",
        "queue_offset",
        "reconsume_times",
        "store_size",
        "store_timestamp",
        "sys_flag",
        "topic",
    )

    def __init__(self, fields: tuple[Any, ...], body: bytes, topic: str, properties_text: str,
                 broker_name: str = "") -> None:
        # Raw on purpose: the decoder calls this once per message with the header fields as the record
        # decoder unpacked them (common.record.HEADER_STRUCTS order). Use :meth:`of` otherwise.
        (self.store_size, _magic, self.body_crc, self.queue_id, self.flag, self.queue_offset,
         self.commit_log_offset, self.sys_flag, self.born_timestamp, self._born_host_raw, self.store_timestamp,
         self._store_host_raw, self.reconsume_times, self.prepared_transaction_offset, _body_length) = fields
        self.topic = topic
        self.body = body
        self._properties_text = properties_text
        self._properties: dict[str, str] | None = None
        self.broker_name = broker_name

    @classmethod
    def of(
        cls,
        topic: str,
        body: bytes,
        *,
        queue_id: int = 0,
        queue_offset: int = 0,
        commit_log_offset: int = 0,
        sys_flag: int = 0,
        born_timestamp: int = 0,
        born_host: str = "",
        store_timestamp: int = 0,
        store_host: str = "",
        reconsume_times: int = 0,
        prepared_transaction_offset: int = 0,
        body_crc: int = 0,
        flag: int = 0,
        properties: dict[str, str] | None = None,
        store_size: int = 0,
        broker_name: str = "",
    ) -> MessageExt:
        """Build a message from readable fields (tests, send-back fallbacks, tools)."""
        born = parse_host_port(born_host) if born_host else b""
        store = parse_host_port(store_host) if store_host else b""
        text = encode_properties(properties) if properties else ""
        fields = (
            store_size, MESSAGE_MAGIC_CODE, body_crc, queue_id, flag, queue_offset, commit_log_offset, sys_flag,
            born_timestamp, born, store_timestamp, store, reconsume_times, prepared_transaction_offset, len(body),
        )  # fmt: skip
        return cls(fields, body, topic, text, broker_name)

    # -- properties --------------------------------------------------------------------------------------

    @property
    def properties(self) -> dict[str, str]:
        """All properties, parsed on first access; later changes go through this dict."""
        props = self._properties
        if props is None:
            props = self._properties = parse_properties(self._properties_text)
        return props

    def get_property(self, name: str) -> str | None:
        """One property, without parsing the others when they have not been parsed yet."""
        props = self._properties
        if props is not None:
            return props.get(name)
        return get_property(self._properties_text, name)

    def put_property(self, name: str, value: str) -> None:
        self.properties[name] = value

    def add_property(self, name: str, value: str) -> None:
        """Set one property without parsing the others first (the last item of a name wins for every reader)."""
        add_property_each((self,), name, (value,))

    def clear_property(self, name: str) -> None:
        self.properties.pop(name, None)

    @property
    def tags(self) -> str | None:
        # get_property inlined: the consumer's tag re-filter reads this for every pulled message.
        props = self._properties
        if props is not None:
            return props.get(_TAGS)
        return get_property(self._properties_text, _TAGS)

    @property
    def keys(self) -> str | None:
        """The space-separated keys, as stored."""
        return self.get_property(_KEYS)

    @property
    def key_list(self) -> list[str]:
        keys = self.get_property(_KEYS)
        return keys.split(MessageConst.KEY_SEPARATOR) if keys else []

    @property
    def uniq_key(self) -> str | None:
        return self.get_property(_UNIQ_KEY)

    # -- ids and hosts -----------------------------------------------------------------------------------

    @property
    def offset_msg_id(self) -> str:
        """The broker's id of the record (store host + commit-log offset)."""
        return message_id(self._store_host_raw, self.commit_log_offset)

    @property
    def msg_id(self) -> str:
        """``UNIQ_KEY`` if the producer set one, else :attr:`offset_msg_id` (``MessageClientExt.getMsgId``)."""
        uniq = self.get_property(_UNIQ_KEY)
        return uniq if uniq is not None else self.offset_msg_id

    @property
    def transaction_id(self) -> str | None:
        """For a message of a committed transaction, its ``UNIQ_KEY`` (as the Java client sets it)."""
        if self.get_property(MessageConst.PROPERTY_TRANSACTION_PREPARED) == "true":
            return self.uniq_key
        return None

    @property
    def born_host(self) -> str:
        """The producer's ``"ip:port"`` (IPv6 in brackets)."""
        return format_host(self._born_host_raw)

    @property
    def store_host(self) -> str:
        """The storing broker's ``"ip:port"`` (IPv6 in brackets)."""
        return format_host(self._store_host_raw)

    @property
    def message_queue(self) -> MessageQueue:
        return MessageQueue(self.topic, self.broker_name, self.queue_id)

    def __repr__(self) -> str:
        # Never the body: logs must not carry message contents.
        return (
            f"MessageExt(topic={self.topic!r}, queue_id={self.queue_id}, queue_offset={self.queue_offset}, "
            f"msg_id={self.msg_id!r}, body=<{len(self.body)} bytes>, reconsume_times={self.reconsume_times})"
        )


# -- decoding --------------------------------------------------------------------------------------------


def decode_messages(
    body: Body,
    *,
    decompress: bool = True,
    check_crc: bool = False,
    broker_name: str = "",
    properties_suffix: str = "",
) -> list[MessageExt]:
    """Decode the concatenated records of a pull response body, in order.

    Compressed bodies are inflated when ``decompress`` (the stored ``sys_flag`` is kept). With
    ``check_crc`` each stored body is checked against BODYCRC. Every message gets ``broker_name`` and
    ``properties_suffix`` (``\\x02``-led items appended to its properties text: the pull path's
    MIN_OFFSET/MAX_OFFSET; empty items are skipped by every reader, so a trailing ``\\x02`` before it is
    harmless). Raises :class:`MessageDecodeError` for a truncated or inconsistent record, a wrong magic code,
    bad UTF-8 in the topic or properties, a CRC mismatch, or a body that cannot be inflated.
    """
    # One loop and one call per record on the good path: this runs for every consumed message, and a Python
    # call costs as much as decoding a field. The pull's own per-message stamping happens here too, so that a
    # pull touches each message once.
    data = body if isinstance(body, bytes) else bytes(body)
    end = len(data)
    pos = 0
    messages: list[MessageExt] = []
    append = messages.append
    topics = TOPIC_NAMES
    inflated = _COMPRESSED if decompress else 0
    suffix = properties_suffix
    try:
        while pos < end:
            fields, body_start, body_end, topic_start, props_start = locate_record(
                data, pos, end, check_crc, None, True)
            record_end = pos + fields[0]
            stored_body = data[body_start:body_end]
            if fields[7] & inflated:
                stored_body = _inflate(stored_body, fields[7], pos)
            raw_topic = data[topic_start:props_start - 2]
            topic = topics.get(raw_topic)
            if topic is None:
                topic = remember_topic(raw_topic)
            props = data[props_start:record_end].decode() if props_start != record_end else ""
            if suffix:
                props += suffix
            append(MessageExt(fields, stored_body, topic, props, broker_name))
            pos = record_end
    except RecordFormatError as exc:
        raise MessageDecodeError(exc.reason, position=pos) from None
    except UnicodeDecodeError as exc:
        raise MessageDecodeError(f"invalid UTF-8 in topic or properties: {exc.reason}", position=pos) from None
    return messages


def _inflate(stored: bytes, sys_flag: int, pos: int) -> bytes:
    try:
        return bytes(decompress_body(stored, sys_flag))
    except CompressionError as exc:
        raise MessageDecodeError(str(exc), position=pos) from exc


# -- retry topics ----------------------------------------------------------------------------------------


def restore_retry_topic(message: MessageExt, consumer_group: str) -> bool:
    """Give a message pulled from ``%RETRY%<group>`` back its original topic (property ``RETRY_TOPIC``).

    Only messages that are in this group's retry topic are touched, as the Java consumer does
    (``resetRetryAndNamespace``). Returns whether the topic changed.
    """
    if message.topic != retry_topic(consumer_group):
        return False
    original = message.get_property(MessageConst.PROPERTY_RETRY_TOPIC)
    if not original:
        return False
    message.topic = original
    return True


def restore_retry_topics(messages: Iterable[MessageExt], consumer_group: str) -> None:
    """:func:`restore_retry_topic` for each message (the consumer runs it on every pulled batch)."""
    retry = retry_topic(consumer_group)
    for message in messages:
        if message.topic == retry:
            restore_retry_topic(message, consumer_group)


def add_property_each(messages: Sequence[MessageExt], name: str, values: Iterable[str]) -> None:
    """:meth:`MessageExt.add_property` of one name for many messages (a pop's receipt handles): no other property
    is parsed, and the loop is one call, not one per message."""
    marker = f"\x02{name}\x01"
    for msg, value in zip(messages, values, strict=True):
        props = msg._properties
        if props is not None:
            props[name] = value
        elif msg._properties_text:
            msg._properties_text += marker + value
        else:
            msg._properties_text = f"{name}\x01{value}"

