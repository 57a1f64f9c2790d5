"""The commit-log record of RocketMQ 4.x, pure functions over bytes, no I/O: the one codec that the store
(appends, recovery, a slave's replay), the SDK (pull responses), the Spark reader and the admin tools use.

Record layout (all integers big-endian)::

    offset      size    field
    0           4       TOTALSIZE                 whole record, this field included
    4           4       MAGICCODE                 0xDAA320A7 message · 0xCBD43194 blank (end of file)
    8           4       BODYCRC                   zlib.crc32(body) & 0x7FFFFFFF
    12          4       QUEUEID
    16          4       FLAG                      the producer's flag, opaque to us
    20          8       QUEUEOFFSET               index in the topic queue's consume queue
    28          8       PHYSICALOFFSET            absolute commit-log offset of this record
    36          4       SYSFLAG                   :class:`~pocketmq.common.sysflag.MessageSysFlag`
    40          8       BORNTIMESTAMP             ms
    48          8|20    BORNHOST                  IPv4 4 B + port int32, or IPv6 16 B + port (SYSFLAG 0x10)
    B           8       STORETIMESTAMP            B = 56 | 68
    B+8         8|20    STOREHOSTADDRESS          IPv6 when SYSFLAG 0x20
    R           4       RECONSUMETIMES            R = B+16 | B+28
    R+4         8       PREPARED TRANSACTION OFFSET
    R+12        4       BODYLENGTH n
    R+16        n       BODY                      deflated when SYSFLAG 0x1
    ...         1       TOPICLENGTH t             a (signed in Java) byte, so 1 <= t <= 127
    ...         t       TOPIC                     UTF-8
    ...         2       PROPERTIESLENGTH p        a signed short, so p <= 32767
    ...         p       PROPERTIES                "k\\x01v\\x02k\\x01v" (UTF-8, :mod:`pocketmq.common.message`)

    size = 91 + n + t + p with two IPv4 hosts (+12 per IPv6 host).

RocketMQ 5.x writes a v2 record (magic 0xDAA320AB) whose TOPICLENGTH is a 2-byte short; a 4.x-compatible
client may receive one from a 5.x broker, so the decoder reads it in a pull response (``pulled``), never in
a commit-log file of ours.

A blank end-of-file marker is just ``TOTALSIZE = bytes left in the file`` and ``MAGICCODE = BLANK``
(8 bytes); the rest of the file after it is ignored. Zeros where a record would start are the end of the
written data (:attr:`~pocketmq.common.errors.RecordFormatError.END_OF_DATA`), not damage.

Hosts travel pre-encoded (``ip bytes + port int32``, 8 or 20 bytes) so that the hot paths pack and unpack
them as one ``s`` field; they become ``"ip:port"`` strings only when someone asks (:func:`format_host`).

Offset message id: upper-case hex of ``store ip + port int32 + physical offset int64``:
32 characters for IPv4, 56 for IPv6.

Writing a record is :mod:`pocketmq.common.record_encoder`'s. Decoding is :func:`locate_record` (validate one record
and find its parts) under three front ends, each building only what its caller needs: :func:`decode_record`
(every field, a :class:`MessageRecord`), :func:`check_record` (what dispatching needs, for recovery and a
slave: no body copy, no properties text) and the SDK's ``decode_messages`` (its ``MessageExt``).
Every malformed input raises :class:`~pocketmq.common.errors.RecordFormatError` with a fixed reason; never
``IndexError`` or ``struct.error``.
"""

from __future__ import annotations

import ipaddress
import struct
import zlib
from collections.abc import Iterator
from functools import lru_cache
from typing import Any, Literal, NamedTuple, overload

from pocketmq.common.errors import RecordFormatError
from pocketmq.common.message import (
    MessageConst,
    get_property,
    parse_properties,
    tags_code_of_bytes,
)
from pocketmq.common.sysflag import MessageSysFlag
from pocketmq.common.topic import RMQ_SYS_SCHEDULE_TOPIC

Buffer = bytes | bytearray | memoryview

MESSAGE_MAGIC_CODE = -626843481
"""0xDAA320A7 as a signed int32, the v1 message magic (what 4.x brokers, and ours, write)."""
MESSAGE_MAGIC_CODE_V2 = -626843477
"""0xDAA320AB: the 5.x record with a 2-byte topic length (read in pull responses only)."""
BLANK_MAGIC_CODE = -875286124
"""0xCBD43194 as a signed int32, the end-of-file blank marker."""

END_FILE_MIN_BLANK_LENGTH = 8
"""A file always keeps room for a blank marker: a record is written only if ``size + 8 <= room``."""

MAX_TOPIC_LENGTH = 127
MAX_PROPERTIES_LENGTH = 32767
_MAX_TOPIC_LENGTH_V2 = 0x7FFF
_TOPIC_LENGTH_LIMITS = (MAX_TOPIC_LENGTH, _MAX_TOPIC_LENGTH_V2)
"""Indexed by the width of TOPICLENGTH minus one (v1: one byte, v2: two)."""

# Named offsets of the fixed part that does not depend on the host variants.
TOTAL_SIZE_OFFSET = 0
MAGIC_CODE_OFFSET = 4
BODY_CRC_OFFSET = 8
QUEUE_ID_OFFSET = 12
FLAG_OFFSET = 16
QUEUE_OFFSET_OFFSET = 20
PHYSICAL_OFFSET_OFFSET = 28
SYS_FLAG_OFFSET = 36
BORN_TIMESTAMP_OFFSET = 40
BORN_HOST_OFFSET = 48

IPV4_HOST_LENGTH = 8
IPV6_HOST_LENGTH = 20

SIZE_AND_MAGIC = struct.Struct(">ii")
INT32 = struct.Struct(">i")
INT64 = struct.Struct(">q")
PROPERTIES_LENGTH = struct.Struct(">h")


def _header_struct(born_len: int, store_len: int) -> struct.Struct:
    # TOTALSIZE MAGIC BODYCRC QUEUEID FLAG QUEUEOFFSET PHYSICALOFFSET SYSFLAG BORNTS BORNHOST
    # STORETS STOREHOST RECONSUMETIMES PREPAREDOFFSET BODYLENGTH
    return struct.Struct(f">iiiiiqqiq{born_len}sq{store_len}siqi")


HEADER_STRUCTS: tuple[struct.Struct, ...] = (
    _header_struct(IPV4_HOST_LENGTH, IPV4_HOST_LENGTH),
    _header_struct(IPV6_HOST_LENGTH, IPV4_HOST_LENGTH),
    _header_struct(IPV4_HOST_LENGTH, IPV6_HOST_LENGTH),
    _header_struct(IPV6_HOST_LENGTH, IPV6_HOST_LENGTH),
)
"""The 15 fixed fields up to BODYLENGTH, indexed by :func:`host_variant`."""

RECORD_OVERHEAD: tuple[int, ...] = tuple(s.size + 1 + 2 for s in HEADER_STRUCTS)
"""Record size minus body, topic and properties bytes: 91, 103, 103, 115."""

_MIN_RECORD_SIZE = RECORD_OVERHEAD[0]
_HEADER_SIZES = tuple(s.size for s in HEADER_STRUCTS)
_HEADER_UNPACKERS = tuple(s.unpack_from for s in HEADER_STRUCTS)
_HOST_V6_BITS = MessageSysFlag.BORNHOST_V6 | MessageSysFlag.STOREHOST_V6
_HOST_V6_SHIFT = 4
#: SYSFLAG's last byte holds the host bits: the header struct is chosen from it before anything is unpacked.
_SYSFLAG_HOST_BYTE = SYS_FLAG_OFFSET + 3
_PEEK_LENGTH = _SYSFLAG_HOST_BYTE + 1


def host_variant(sys_flag: int) -> int:
    """0..3: bit 0 set for an IPv6 born host, bit 1 for an IPv6 store host (index into HEADER_STRUCTS)."""
    return (sys_flag & _HOST_V6_BITS) >> _HOST_V6_SHIFT


def store_timestamp_offset(sys_flag: int) -> int:
    """Offset of STORETIMESTAMP inside a record with this SYSFLAG."""
    return BORN_HOST_OFFSET + (IPV6_HOST_LENGTH if sys_flag & MessageSysFlag.BORNHOST_V6 else IPV4_HOST_LENGTH)


def record_size(sys_flag: int, body_length: int, topic_length: int, properties_length: int) -> int:
    """Size of the record that would hold these parts."""
    return RECORD_OVERHEAD[host_variant(sys_flag)] + body_length + topic_length + properties_length


def body_crc(body: Buffer) -> int:
    """BODYCRC as RocketMQ computes it: CRC-32 with the sign bit cleared."""
    return zlib.crc32(body) & 0x7FFFFFFF


# --------------------------------------------------------------------------------------------- hosts


def encode_host(ip: str, port: int) -> bytes:
    """``ip bytes + port int32``: 8 bytes for IPv4, 20 for IPv6 (the BORNHOST/STOREHOST fields)."""
    if not 0 <= port <= 0xFFFF:
        raise ValueError(f"port {port} out of range")
    return ipaddress.ip_address(ip).packed + INT32.pack(port)


def parse_host_port(address: str) -> bytes:
    """Encode ``"1.2.3.4:10911"`` or ``"[::1]:10911"`` (as :func:`encode_host`)."""
    host, sep, port = address.rpartition(":")
    if not sep or not host:
        raise ValueError(f"address {address!r} is not host:port")
    return encode_host(host.strip("[]"), int(port))


def decode_host(raw: Buffer) -> tuple[str, int]:
    """``(ip, port)`` from an encoded 8- or 20-byte host field."""
    data = bytes(raw)
    if len(data) == IPV4_HOST_LENGTH:
        return str(ipaddress.IPv4Address(data[:4])), INT32.unpack_from(data, 4)[0]
    if len(data) == IPV6_HOST_LENGTH:
        return str(ipaddress.IPv6Address(data[:16])), INT32.unpack_from(data, 16)[0]
    raise ValueError(f"host field of {len(data)} bytes")


@lru_cache(maxsize=4096)
def format_host(raw: bytes) -> str:
    """``"ip:port"`` from an 8- or 20-byte host field; IPv6 in brackets, ``""`` for an empty field.

    Cached: a consumer or a scan meets the same few hosts over and over."""
    if not raw:
        return ""
    if len(raw) == IPV4_HOST_LENGTH:
        return f"{raw[0]}.{raw[1]}.{raw[2]}.{raw[3]}:{INT32.unpack_from(raw, 4)[0]}"
    ip, port = decode_host(raw)
    return f"[{ip}]:{port}"


def host_sys_flags(born_host: Buffer, store_host: Buffer) -> int:
    """The SYSFLAG bits implied by the lengths of the two host fields."""
    flags = 0
    if len(born_host) == IPV6_HOST_LENGTH:
        flags |= MessageSysFlag.BORNHOST_V6
    if len(store_host) == IPV6_HOST_LENGTH:
        flags |= MessageSysFlag.STOREHOST_V6
    return flags


# ---------------------------------------------------------------------------------------- message id


_HOST_HEX: dict[bytes, str] = {}
"""Upper-case hex of store hosts: one broker has one, a consumer meets a few (bounded like TOPIC_NAMES)."""


def message_id(store_host: bytes, physical_offset: int) -> str:
    """The offset message id (``msgId`` of a send response): hex of store host + physical offset."""
    prefix = _HOST_HEX.get(store_host) if type(store_host) is bytes else None
    if prefix is None:
        prefix = store_host.hex().upper()
        if type(store_host) is bytes:
            if len(_HOST_HEX) >= TOPIC_NAMES_MAX:
                _HOST_HEX.clear()
            _HOST_HEX[store_host] = prefix
    return prefix + format(physical_offset & 0xFFFFFFFFFFFFFFFF, "016X")


def decode_message_id(msg_id: str) -> tuple[str, int, int]:
    """``(store ip, store port, physical offset)`` from an offset message id (32 or 56 hex chars)."""
    try:
        raw = bytes.fromhex(msg_id)
    except ValueError as exc:
        raise ValueError(f"message id {msg_id!r} is not hex") from exc
    if len(raw) not in (IPV4_HOST_LENGTH + 8, IPV6_HOST_LENGTH + 8):
        raise ValueError(f"message id {msg_id!r} has {len(raw)} bytes, want 16 or 28")
    ip, port = decode_host(raw[:-8])
    return ip, port, INT64.unpack_from(raw, len(raw) - 8)[0]


# ------------------------------------------------------------------------------------------- decode


class MessageRecord(NamedTuple):
    """Every field of one stored record (what the Spark reader and the admin tools see)."""

    total_size: int
    magic_code: int
    body_crc: int
    queue_id: int
    flag: int
    queue_offset: int
    physical_offset: int
    sys_flag: int
    born_timestamp: int
    born_host: bytes
    store_timestamp: int
    store_host: bytes
    reconsume_times: int
    prepared_transaction_offset: int
    body: bytes
    topic: str
    properties: str

    @property
    def born_host_address(self) -> str:
        """``ip:port`` of the producer."""
        return format_host(self.born_host)

    @property
    def store_host_address(self) -> str:
        """``ip:port`` of the broker that stored the record."""
        return format_host(self.store_host)

    @property
    def msg_id(self) -> str:
        """The offset message id of this record."""
        return message_id(self.store_host, self.physical_offset)

    @property
    def properties_map(self) -> dict[str, str]:
        """The properties as a dict."""
        return parse_properties(self.properties)

    @property
    def tags(self) -> str | None:
        """The TAGS property."""
        return get_property(self.properties, MessageConst.PROPERTY_TAGS)

    @property
    def keys(self) -> list[str]:
        """The KEYS property split on spaces."""
        keys = get_property(self.properties, MessageConst.PROPERTY_KEYS)
        return keys.split() if keys else []


class Blank(NamedTuple):
    """The end-of-file marker: ``size`` bytes (the rest of the file) carry no record."""

    size: int


class DispatchRequest(NamedTuple):
    """What a consume queue needs from one record (built by the commit log, recovery and the slave)."""

    topic: str
    queue_id: int
    commit_log_offset: int
    msg_size: int
    tags_code: int
    store_timestamp: int
    consume_queue_offset: int
    sys_flag: int
    delay_level: int


RecordParts = tuple[tuple[Any, ...], int, int, int, int]
"""What :func:`locate_record` found: (the 15 header fields of ``HEADER_STRUCTS``, body start, body end, topic
start, properties start); the record ends at ``pos + fields[0]``. A plain tuple: one is built per record."""

TOPIC_NAMES: dict[bytes, str] = {}
"""Decoded topic names by their bytes: a scan or a consumer meets the same few topics over and over. Bounded
by :data:`TOPIC_NAMES_MAX` (cleared when full: a bound, not an LRU)."""
TOPIC_NAMES_MAX = 4096


def remember_topic(raw: bytes) -> str:
    """Decode a topic name and keep it in :data:`TOPIC_NAMES` (bad UTF-8 raises ``UnicodeDecodeError``).
    Callers look the cache up themselves first (the hit is the hot path)."""
    topic = raw.decode()
    if len(TOPIC_NAMES) >= TOPIC_NAMES_MAX:
        TOPIC_NAMES.clear()
    TOPIC_NAMES[raw] = topic
    return topic


@overload
def locate_record(
    buf: Buffer, pos: int, limit: int, check_crc: bool, expected_offset: int | None, pulled: Literal[True], /
) -> RecordParts: ...


@overload
def locate_record(
    buf: Buffer, pos: int, limit: int, check_crc: bool, expected_offset: int | None, pulled: bool, /
) -> RecordParts | Blank: ...


def locate_record(
    buf: Buffer, pos: int, limit: int, check_crc: bool, expected_offset: int | None, pulled: bool, /
) -> RecordParts | Blank:
    """Validate the record at ``buf[pos:]`` (which must end by ``limit``) and locate its parts.

    ``pulled`` says the bytes are a pull response: the v2 magic is read, and a blank marker or zeros are not
    an end but damage. Otherwise (a commit-log file or an export) a blank marker is returned as
    :class:`Blank` and zeros raise with reason :attr:`~pocketmq.common.errors.RecordFormatError.END_OF_DATA`. With
    ``expected_offset`` the PHYSICALOFFSET field must equal it; with ``check_crc`` BODYCRC must match.
    Raises :class:`~pocketmq.common.errors.RecordFormatError` for anything else that is not a whole, valid record.
    """
    # Positional and flat on purpose: this runs for every record a consumer, a recovery or a reader meets.
    # The good path tests only what makes a record valid (every other rule follows from these: TOTALSIZE
    # covers header, body, topic and properties exactly, and nothing is read before it is known to exist or
    # is harmless to read); anything else goes to _explain, which applies the rules one by one, in the store's
    # order, so that the reason (recovery plans, export manifests and errors carry it) is always the same.
    try:
        variant = (buf[pos + _SYSFLAG_HOST_BYTE] >> _HOST_V6_SHIFT) & 3
        fields = _HEADER_UNPACKERS[variant](buf, pos)
        magic = fields[1]
        if magic == MESSAGE_MAGIC_CODE:
            wide = 0
        elif pulled and magic == MESSAGE_MAGIC_CODE_V2:
            wide = 1
        else:
            return _explain(buf, pos, limit, check_crc, expected_offset, pulled)
        end = pos + fields[0]
        body_start = pos + _HEADER_SIZES[variant]
        body_end = body_start + fields[14]
        if body_end < body_start or end > limit:
            return _explain(buf, pos, limit, check_crc, expected_offset, pulled)
        if wide:
            topic_len = buf[body_end] << 8 | buf[body_end + 1]
            topic_ok = 0 < topic_len <= _MAX_TOPIC_LENGTH_V2
        else:
            topic_len = buf[body_end]
            topic_ok = 0 < topic_len <= MAX_TOPIC_LENGTH
        topic_start = body_end + 1 + wide
        props_start = topic_start + topic_len + 2
        props_len = buf[props_start - 2] << 8 | buf[props_start - 1]
    except (IndexError, struct.error):
        return _explain(buf, pos, limit, check_crc, expected_offset, pulled)
    if not topic_ok or props_len > MAX_PROPERTIES_LENGTH or props_start + props_len != end or (
            expected_offset is not None and fields[6] != expected_offset) or (
            check_crc and fields[2] != zlib.crc32(buf[body_start:body_end]) & 0x7FFFFFFF):
        return _explain(buf, pos, limit, check_crc, expected_offset, pulled)
    return fields, body_start, body_end, topic_start, props_start


def _explain(
    buf: Buffer, pos: int, limit: int, check_crc: bool, expected_offset: int | None, pulled: bool
) -> RecordParts | Blank:
    """:func:`locate_record` for what its good path did not take: the rules one by one, in order, raising
    with the first one broken (or a blank marker, or a record that is valid after all)."""
    avail = limit - pos
    if avail < _PEEK_LENGTH:
        return _locate_short(buf, pos, limit, pulled)
    variant = (buf[pos + _SYSFLAG_HOST_BYTE] >> _HOST_V6_SHIFT) & 3
    header_size = _HEADER_SIZES[variant]
    if avail < header_size:
        return _locate_short(buf, pos, limit, pulled)
    fields = _HEADER_UNPACKERS[variant](buf, pos)
    total = fields[0]
    magic = fields[1]
    if not _is_message_magic(magic, pulled):
        return _odd_magic(total, magic, avail, pos, pulled)
    wide = int(magic == MESSAGE_MAGIC_CODE_V2)
    if not header_size + 3 + wide <= total <= avail:
        raise RecordFormatError("truncated record" if _MIN_RECORD_SIZE <= total > avail else "bad total size", pos)
    end = pos + total
    body_start = pos + header_size
    body_len = fields[14]
    body_end = body_start + body_len
    if body_len < 0 or body_end + 3 + wide > end:
        raise RecordFormatError("bad body length", pos)
    topic_start = body_end + 1 + wide
    topic_len = int.from_bytes(buf[body_end:topic_start], "big")
    props_start = topic_start + topic_len + 2
    if not 0 < topic_len <= _TOPIC_LENGTH_LIMITS[wide] or props_start > end:
        raise RecordFormatError("bad topic length", pos)
    props_len = buf[props_start - 2] << 8 | buf[props_start - 1]
    if props_len > MAX_PROPERTIES_LENGTH or props_start + props_len != end:
        raise RecordFormatError("size mismatch", pos)
    if expected_offset is not None and fields[6] != expected_offset:
        raise RecordFormatError("physical offset mismatch", pos)
    if check_crc and fields[2] != zlib.crc32(buf[body_start:body_end]) & 0x7FFFFFFF:
        raise RecordFormatError("body CRC mismatch", pos)
    return fields, body_start, body_end, topic_start, props_start


def _is_message_magic(magic: int, pulled: bool) -> bool:
    return magic == MESSAGE_MAGIC_CODE or (pulled and magic == MESSAGE_MAGIC_CODE_V2)


def _odd_magic(total: int, magic: int, avail: int, pos: int, pulled: bool) -> Blank:
    """A magic other than a message's: a blank marker (in a file), the zeros after the data, or damage."""
    if magic == BLANK_MAGIC_CODE and not pulled:
        if total < END_FILE_MIN_BLANK_LENGTH:
            raise RecordFormatError("bad blank marker size", pos)
        if total > avail:
            raise RecordFormatError("truncated record", pos)
        return Blank(total)
    if total == 0 and magic == 0 and not pulled:
        raise RecordFormatError(RecordFormatError.END_OF_DATA, pos)
    raise RecordFormatError("bad magic code", pos)


def _locate_short(buf: Buffer, pos: int, limit: int, pulled: bool) -> Blank:
    """Fewer bytes are left than a record header: a blank marker, the zeros after the data, or an error."""
    avail = limit - pos
    if avail < SIZE_AND_MAGIC.size:
        if not pulled and avail > 0 and not any(bytes(buf[pos:limit])):
            raise RecordFormatError(RecordFormatError.END_OF_DATA, pos)
        raise RecordFormatError("truncated record", pos)
    total, magic = SIZE_AND_MAGIC.unpack_from(buf, pos)
    if not _is_message_magic(magic, pulled):
        return _odd_magic(total, magic, avail, pos, pulled)
    if total < _MIN_RECORD_SIZE or total <= avail:
        # A record that fits in fewer bytes than its own header cannot add up.
        raise RecordFormatError("bad total size", pos)
    raise RecordFormatError("truncated record", pos)


def _text(buf: Buffer, start: int, end: int, pos: int, what: str) -> str:
    try:
        return bytes(buf[start:end]).decode()
    except UnicodeDecodeError:
        raise RecordFormatError(f"{what} is not UTF-8", pos) from None


def _topic(buf: Buffer, start: int, end: int, pos: int) -> str:
    raw = bytes(buf[start:end])
    topic = TOPIC_NAMES.get(raw)
    if topic is None:
        try:
            topic = remember_topic(raw)
        except UnicodeDecodeError:
            raise RecordFormatError("topic is not UTF-8", pos) from None
    return topic


_new_tuple = tuple.__new__
"""``_new_tuple(MessageRecord, values)``: a named tuple built from a tuple in one C call, not through its
generated ``__new__`` with one argument per field (which costs about as much as locating the record)."""


def decode_record(
    buf: Buffer,
    pos: int = 0,
    *,
    limit: int | None = None,
    check_crc: bool = True,
    expected_offset: int | None = None,
) -> MessageRecord | Blank:
    """Decode the record at ``buf[pos:]`` of a commit-log file (or an export); :class:`Blank` for an
    end-of-file marker.

    Raises :class:`~pocketmq.common.errors.RecordFormatError` for anything that is not a whole, valid record:
    bad magic, sizes that do not add up, a record running past ``limit`` (default: end of ``buf``),
    a body CRC mismatch (when ``check_crc``), or a PHYSICALOFFSET other than ``expected_offset``.
    """
    parts = locate_record(buf, pos, len(buf) if limit is None else limit, check_crc, expected_offset, False)
    if isinstance(parts, Blank):
        return parts
    f, body_start, body_end, topic_start, props_start = parts
    return _new_tuple(MessageRecord, (
        *f[:14],
        bytes(buf[body_start:body_end]),
        _topic(buf, topic_start, props_start - 2, pos),
        _text(buf, props_start, pos + f[0], pos, "properties"),
    ))


def decode_records(buf: Buffer, *, check_crc: bool = True) -> Iterator[MessageRecord]:
    """Records laid end to end (an exported commit-log range, a file); stops at a blank marker or at the
    zeros after the last record; raises on damage."""
    pos = 0
    while pos < len(buf):
        try:
            record = decode_record(buf, pos, check_crc=check_crc)
        except RecordFormatError as exc:
            if exc.is_end_of_data:
                return
            raise
        if isinstance(record, Blank):
            return
        yield record
        pos += record.total_size


_DELAY = MessageConst.PROPERTY_DELAY_TIME_LEVEL.encode()


def check_record(
    buf: Buffer,
    pos: int,
    limit: int,
    *,
    base_offset: int,
    check_crc: bool = True,
) -> DispatchRequest | Blank:
    """Validate the record at ``buf[pos:]`` of a file that starts at commit-log offset ``base_offset``
    and return what dispatching it needs (recovery, slave replay). Raises ``RecordFormatError``.

    The properties are not decoded to text (only TAGS and, for delayed messages, DELAY are read), so a
    record with bad UTF-8 there is still dispatched, as RocketMQ does."""
    parts = locate_record(buf, pos, limit, check_crc, base_offset + pos, False)
    if isinstance(parts, Blank):
        return parts
    f, _body_start, _body_end, topic_start, props_start = parts
    topic = _topic(buf, topic_start, props_start - 2, pos)
    props = bytes(buf[props_start:pos + f[0]])
    delay_level = 0
    if topic == RMQ_SYS_SCHEDULE_TOPIC:
        delay = get_property(props, _DELAY)
        delay_level = int(delay) if delay and delay.isdigit() else 0
    return _new_tuple(DispatchRequest, (
        topic, f[3], f[6], f[0], tags_code_of_bytes(props), f[10], f[5], f[7], delay_level,
    ))
