"""Received messages: :class:`MessageExt` and the decoder of a ``PULL_MESSAGE`` response body.

The body of a pull response is the stored records concatenated, byte for byte as in the broker's commit
log (reference §4.5). The client has its own decoder because it must not import the broker's store.
Record layout (all integers big-endian, reference §4.1)::

    offset      size    field
    0           4       TOTALSIZE                 whole record, this field included
    4           4       MAGICCODE                 0xDAA320A7 (v1; 0xDAA320AB v2 of 5.x is read too)
    8           4       BODYCRC                   zlib.crc32(stored body) & 0x7FFFFFFF
    12          4       QUEUEID
    16          4       FLAG                      the producer's user flag
    20          8       QUEUEOFFSET               index in the consume queue
    28          8       PHYSICALOFFSET            commit-log offset of this record
    36          4       SYSFLAG                   0x1 compressed, 0x10 born host IPv6, 0x20 store host IPv6
    40          8       BORNTIMESTAMP             ms
    48          8|20    BORNHOST                  IPv4 4 B + port int32, or IPv6 16 B + port int32
    B           8       STORETIMESTAMP            B = 56 | 68
    B+8         8|20    STOREHOSTADDRESS
    R           4       RECONSUMETIMES            R = B+16 | B+28
    R+4         8       PREPARED TRANSACTION OFFSET
    R+12        4       BODYLENGTH n
    R+16        n       BODY                      zlib when SYSFLAG 0x1 (type in bits 8-10)
    ...         1|2     TOPICLENGTH t             1 byte in v1 (t <= 127), 2 bytes in v2
    ...         t       TOPIC                     UTF-8
    ...         2       PROPERTIESLENGTH p        signed short
    ...         p       PROPERTIES                "k\\x01v\\x02k\\x01v", trailing \\x02 optional

Speed: decoding runs for every consumed message, so a record costs one ``unpack_from`` over the response
bytes (the host layout is read from SYSFLAG's last byte first), one copy of the body, a dict lookup for the
topic name, and nothing else it can put off. The properties string is decoded
to ``str`` eagerly (so bad UTF-8 is caught here) but parsed into a dict only when someone asks for it;
single properties (``TAGS``, ``UNIQ_KEY``) are found by a scan of the string. The host strings and the
offset message id are built on first access from the raw host fields.

Every malformed input raises :class:`MessageDecodeError`; never ``IndexError`` or ``struct.error``.
"""

from __future__ import annotations

import ipaddress
import struct
import zlib
from collections.abc import Iterable
from functools import lru_cache

from client.core.compression import decompress_body
from client.core.errors import CompressionError, MQClientError
from client.message import (
    KEY_SEPARATOR,
    NAME_VALUE_SEPARATOR,
    PROPERTY_KEYS,
    PROPERTY_RETRY_TOPIC,
    PROPERTY_SEPARATOR,
    PROPERTY_TAGS,
    PROPERTY_TRANSACTION_PREPARED,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    RETRY_GROUP_TOPIC_PREFIX,
    MessageQueue,
    decode_properties,
    encode_properties,
)
from remoting.command import Body

__all__ = [
    "MESSAGE_MAGIC_CODE",
    "MESSAGE_MAGIC_CODE_V2",
    "MessageDecodeError",
    "MessageExt",
    "decode_messages",
    "encode_host",
    "offset_msg_id",
    "restore_retry_topic",
    "restore_retry_topics",
]

MESSAGE_MAGIC_CODE = -626843481
"""0xDAA320A7 as a signed int32: a v1 message record (what 4.x brokers, and ours, write)."""
MESSAGE_MAGIC_CODE_V2 = -626843477
"""0xDAA320AB: the 5.x record with a 2-byte topic length."""
BLANK_MAGIC_CODE = -875286124
"""0xCBD43194: an end-of-file blank marker, never part of a pull response."""

SYSFLAG_COMPRESSED = 0x1
SYSFLAG_BORNHOST_V6 = 0x10
SYSFLAG_STOREHOST_V6 = 0x20
_HOST_V6_SHIFT = 4  # (sysFlag >> 4) & 3 selects one of the four host layouts

IPV4_HOST_LENGTH = 8
IPV6_HOST_LENGTH = 20

_INT32 = struct.Struct(">i")
#: The last (least significant) byte of SYSFLAG, which holds the host bits; enough bytes to reach it are
#: needed before the header struct can be chosen.
_SYSFLAG_HOST_BYTE = 39
_PEEK_LENGTH = _SYSFLAG_HOST_BYTE + 1
_MAX_SHORT = 0x7FFF


def _header(born_len: int, store_len: int) -> struct.Struct:
    """Everything from TOTALSIZE to BODYLENGTH; each host (ip + port) comes out as one ``bytes`` field."""
    return struct.Struct(f">iiiiiqqiq{born_len}sq{store_len}siqi")


#: Indexed by ``(sysFlag >> 4) & 3``: bit 0 born host IPv6, bit 1 store host IPv6.
_HEADERS: tuple[struct.Struct, ...] = (
    _header(IPV4_HOST_LENGTH, IPV4_HOST_LENGTH),
    _header(IPV6_HOST_LENGTH, IPV4_HOST_LENGTH),
    _header(IPV4_HOST_LENGTH, IPV6_HOST_LENGTH),
    _header(IPV6_HOST_LENGTH, IPV6_HOST_LENGTH),
)
_MAX_TOPIC_LENGTH_V1 = 127
#: Topic names are few; decoded names are shared between messages. Cleared when full (a bound, not an LRU).
_TOPIC_CACHE_LIMIT = 1024
_topic_cache: dict[bytes, str] = {}


class MessageDecodeError(MQClientError):
    """A pull response body is not a sequence of valid message records.

    ``position`` is the byte offset of the bad record in the body. The body was corrupted on the way or
    written by something that is not a RocketMQ 4.x broker; retrying the same pull gives the same bytes.
    """

    retriable = False

    def __init__(self, message: str, *, position: int) -> None:
        self.position = position
        super().__init__(f"{message} (record at byte {position})")


# -- hosts and ids ---------------------------------------------------------------------------------------


@lru_cache(maxsize=4096)
def _format_host(raw: bytes) -> str:
    """``"ip:port"`` from an 8- or 20-byte host field; IPv6 in brackets, ``""`` for an empty field."""
    if not raw:
        return ""
    port = _INT32.unpack_from(raw, len(raw) - 4)[0]
    if len(raw) == IPV4_HOST_LENGTH:
        return f"{raw[0]}.{raw[1]}.{raw[2]}.{raw[3]}:{port}"
    return f"[{ipaddress.IPv6Address(raw[:16])}]:{port}"


def encode_host(address: str) -> bytes:
    """The BORNHOST/STOREHOST field for ``"1.2.3.4:10911"`` or ``"[::1]:10911"`` (8 or 20 bytes)."""
    host, sep, port = address.rpartition(":")
    if not sep or not host:
        raise ValueError(f"address {address!r} is not ip:port")
    return ipaddress.ip_address(host.strip("[]")).packed + _INT32.pack(int(port))


def offset_msg_id(store_host: bytes, commit_log_offset: int) -> str:
    """The broker's message id (reference §4.5): upper-case hex of store ip + port int32 + offset int64."""
    return store_host.hex().upper() + format(commit_log_offset & 0xFFFFFFFFFFFFFFFF, "016X")


#: ``name -> ("\x02name\x01", "name\x01")`` for the property names looked up so far (bounded).
_MARKERS: dict[str, tuple[str, str]] = {}
_MARKERS_LIMIT = 256


def _markers(name: str) -> tuple[str, str]:
    key = name + NAME_VALUE_SEPARATOR
    markers = (PROPERTY_SEPARATOR + key, key)
    if len(_MARKERS) < _MARKERS_LIMIT:
        _MARKERS[name] = markers
    return markers


def _scan_property(text: str, name: str) -> str | None:
    """One property's value from a properties string without parsing all of it.

    Agrees with :func:`client.message.decode_properties`: an item starts at the string's start or after a
    ``\x02`` (values cannot hold ``\x02``), and the last item of a name wins, as a dict built in order.
    """
    inner, first = _MARKERS.get(name) or _markers(name)
    at = text.rfind(inner)
    if at >= 0:
        start = at + len(inner)
    elif text.startswith(first):
        start = len(first)
    else:
        return None
    end = text.find(PROPERTY_SEPARATOR, start)
    return text[start:] if end < 0 else text[start:end]


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

    def __init__(
        self,
        topic: str,
        body: bytes,
        queue_id: int,
        queue_offset: int,
        commit_log_offset: int,
        sys_flag: int,
        born_timestamp: int,
        born_host_raw: bytes,
        store_timestamp: int,
        store_host_raw: bytes,
        reconsume_times: int,
        prepared_transaction_offset: int,
        body_crc: int,
        flag: int,
        properties_text: str,
        store_size: int,
        broker_name: str = "",
    ) -> None:
        # Positional and raw on purpose: the decoder calls this once per message. Use :meth:`of` otherwise.
        self.topic = topic
        self.body = body
        self.queue_id = queue_id
        self.queue_offset = queue_offset
        self.commit_log_offset = commit_log_offset
        self.sys_flag = sys_flag
        self.born_timestamp = born_timestamp
        self._born_host_raw = born_host_raw
        self.store_timestamp = store_timestamp
        self._store_host_raw = store_host_raw
        self.reconsume_times = reconsume_times
        self.prepared_transaction_offset = prepared_transaction_offset
        self.body_crc = body_crc
        self.flag = flag
        self._properties_text = properties_text
        self._properties: dict[str, str] | None = None
        self.store_size = store_size
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
        born = encode_host(born_host) if born_host else b""
        store = encode_host(store_host) if store_host else b""
        text = encode_properties(properties) if properties else ""
        return cls(
            topic, body, queue_id, queue_offset, commit_log_offset, sys_flag, born_timestamp, born,
            store_timestamp, store, reconsume_times, prepared_transaction_offset, body_crc, flag, text,
            store_size, broker_name,
        )  # fmt: skip

    # -- properties --------------------------------------------------------------------------------------

    @property
    def properties(self) -> dict[str, str]:
        """All properties, parsed on first access; later changes go through this dict."""
        props = self._properties
        if props is None:
            props = self._properties = decode_properties(self._properties_text)
        return props

    def get_property(self, name: str) -> str | None:
        """One property, without parsing the others when they have not been parsed yet."""
        props = self._properties
        if props is not None:
            return props.get(name)
        return _scan_property(self._properties_text, name)

    def put_property(self, name: str, value: str) -> None:
        self.properties[name] = value

    def clear_property(self, name: str) -> None:
        self.properties.pop(name, None)

    def _append_properties_text(self, suffix: str) -> None:
        """Add ``\\x02``-led items to the properties without parsing them (the pull path's MIN/MAX_OFFSET).

        Empty items are skipped by every reader, so a trailing ``\\x02`` before ``suffix`` is harmless.
        """
        props = self._properties
        if props is None:
            self._properties_text += suffix
        else:
            props.update(decode_properties(suffix))

    @property
    def tags(self) -> str | None:
        return self.get_property(PROPERTY_TAGS)

    @property
    def keys(self) -> str | None:
        """The space-separated keys, as stored."""
        return self.get_property(PROPERTY_KEYS)

    @property
    def key_list(self) -> list[str]:
        keys = self.get_property(PROPERTY_KEYS)
        return keys.split(KEY_SEPARATOR) if keys else []

    @property
    def uniq_key(self) -> str | None:
        return self.get_property(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)

    # -- ids and hosts -----------------------------------------------------------------------------------

    @property
    def offset_msg_id(self) -> str:
        """The broker's id of the record (store host + commit-log offset, reference §4.5)."""
        return offset_msg_id(self._store_host_raw, self.commit_log_offset)

    @property
    def msg_id(self) -> str:
        """``UNIQ_KEY`` if the producer set one, else :attr:`offset_msg_id` (``MessageClientExt.getMsgId``)."""
        uniq = self.get_property(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
        return uniq if uniq is not None else self.offset_msg_id

    @property
    def transaction_id(self) -> str | None:
        """For a message of a committed transaction, its ``UNIQ_KEY`` (as the Java client sets it)."""
        if self.get_property(PROPERTY_TRANSACTION_PREPARED) == "true":
            return self.uniq_key
        return None

    @property
    def born_host(self) -> str:
        """The producer's ``"ip:port"`` (IPv6 in brackets)."""
        return _format_host(self._born_host_raw)

    @property
    def store_host(self) -> str:
        """The storing broker's ``"ip:port"`` (IPv6 in brackets)."""
        return _format_host(self._store_host_raw)

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


def decode_messages(body: Body, *, decompress: bool = True, check_crc: bool = False) -> list[MessageExt]:
    """Decode the concatenated records of a pull response body, in order.

    Compressed bodies are inflated when ``decompress`` (the stored ``sys_flag`` is kept). With
    ``check_crc`` each stored body is checked against BODYCRC. Raises :class:`MessageDecodeError` for a
    truncated or inconsistent record, a wrong magic code, bad UTF-8 in the topic or properties, a CRC
    mismatch, or a body that cannot be inflated.
    """
    # One loop, no helper calls on the good path: this runs for every consumed message, and a Python call
    # costs as much as decoding a field. Every length is checked before it is used, so a bad record ends
    # in MessageDecodeError, never in IndexError or struct.error.
    data = body if isinstance(body, bytes) else bytes(body)
    end = len(data)
    pos = 0
    messages: list[MessageExt] = []
    append = messages.append
    topics = _topic_cache
    try:
        while pos < end:
            if end - pos < _PEEK_LENGTH:
                raise MessageDecodeError(f"truncated record: {end - pos} bytes left", position=pos)
            # The host layout, hence the header struct, depends on the SYSFLAG bits in its last byte.
            header = _HEADERS[(data[pos + _SYSFLAG_HOST_BYTE] >> _HOST_V6_SHIFT) & 3]
            body_start = pos + header.size
            if body_start > end:
                raise MessageDecodeError(f"truncated record: {end - pos} bytes left", position=pos)
            (
                total, magic, body_crc, queue_id, flag, queue_offset, commit_log_offset, sys_flag, born_timestamp,
                born_host, store_timestamp, store_host, reconsume_times, prepared_offset, body_len,
            ) = header.unpack_from(data, pos)  # fmt: skip
            if magic == MESSAGE_MAGIC_CODE:
                topic_len_size, max_topic_len = 1, _MAX_TOPIC_LENGTH_V1
            elif magic == MESSAGE_MAGIC_CODE_V2:
                topic_len_size, max_topic_len = 2, _MAX_SHORT
            else:
                raise MessageDecodeError(f"bad magic code {magic & 0xFFFFFFFF:#010x}", position=pos)
            record_end = pos + total
            if total < header.size + topic_len_size + 2 or record_end > end:
                raise MessageDecodeError(f"bad TOTALSIZE {total} with {end - pos} bytes left", position=pos)
            body_end = body_start + body_len
            topic_start = body_end + topic_len_size
            if body_len < 0 or topic_start + 2 > record_end:
                raise MessageDecodeError(f"BODYLENGTH {body_len} overruns TOTALSIZE {total}", position=pos)
            # Lengths read from bytes are unsigned; Java reads them signed, so "too big" means "negative".
            topic_len = data[body_end] if topic_len_size == 1 else data[body_end] << 8 | data[body_end + 1]
            props_start = topic_start + topic_len + 2
            if topic_len > max_topic_len or props_start > record_end:
                raise MessageDecodeError(f"bad TOPICLENGTH {topic_len} in TOTALSIZE {total}", position=pos)
            props_len = data[props_start - 2] << 8 | data[props_start - 1]
            if props_len > _MAX_SHORT or props_start + props_len != record_end:
                raise MessageDecodeError(f"PROPERTIESLENGTH {props_len} disagrees with TOTALSIZE {total}", position=pos)
            stored_body = data[body_start:body_end]
            if check_crc and zlib.crc32(stored_body) & 0x7FFFFFFF != body_crc:
                raise MessageDecodeError(f"body CRC mismatch at queue offset {queue_offset}", position=pos)
            if decompress and sys_flag & SYSFLAG_COMPRESSED:
                stored_body = _inflate(stored_body, sys_flag, pos)
            raw_topic = data[topic_start : props_start - 2]
            topic = topics.get(raw_topic)
            if topic is None:
                topic = _remember_topic(raw_topic)
            append(
                MessageExt(
                    topic, stored_body, queue_id, queue_offset, commit_log_offset, sys_flag, born_timestamp,
                    born_host, store_timestamp, store_host, reconsume_times, prepared_offset, body_crc, flag,
                    data[props_start:record_end].decode() if props_len else "", total,
                )
            )  # fmt: skip
            pos = record_end
    except UnicodeDecodeError as exc:
        raise MessageDecodeError(f"invalid UTF-8 in topic or properties: {exc.reason}", position=pos) from None
    return messages


def _inflate(stored: bytes, sys_flag: int, pos: int) -> bytes:
    try:
        return bytes(decompress_body(stored, sys_flag))
    except CompressionError as exc:
        raise MessageDecodeError(str(exc), position=pos) from exc


def _remember_topic(raw: bytes) -> str:
    """Decode a topic name and keep it for the next records (bad UTF-8 raises ``UnicodeDecodeError``)."""
    topic = raw.decode()
    if len(_topic_cache) >= _TOPIC_CACHE_LIMIT:
        _topic_cache.clear()
    _topic_cache[raw] = topic
    return topic


# -- retry topics ----------------------------------------------------------------------------------------


def restore_retry_topic(message: MessageExt, consumer_group: str) -> bool:
    """Give a message pulled from ``%RETRY%<group>`` back its original topic (property ``RETRY_TOPIC``).

    Only messages that are in this group's retry topic are touched, as the Java consumer does
    (``resetRetryAndNamespace``). Returns whether the topic changed.
    """
    if message.topic != RETRY_GROUP_TOPIC_PREFIX + consumer_group:
        return False
    original = message.get_property(PROPERTY_RETRY_TOPIC)
    if not original:
        return False
    message.topic = original
    return True


def restore_retry_topics(messages: Iterable[MessageExt], consumer_group: str) -> None:
    """:func:`restore_retry_topic` for each message (the consumer runs it on every pulled batch)."""
    retry_topic = RETRY_GROUP_TOPIC_PREFIX + consumer_group
    for message in messages:
        if message.topic == retry_topic:
            restore_retry_topic(message, consumer_group)
