"""The commit-log record of RocketMQ 4.x (magic v1), pure functions over bytes, no I/O.

Record layout (all integers big-endian, reference §4.1)::

    offset      size    field
    0           4       TOTALSIZE                 whole record, this field included
    4           4       MAGICCODE                 0xDAA320A7 message · 0xCBD43194 blank (end of file)
    8           4       BODYCRC                   zlib.crc32(body) & 0x7FFFFFFF
    12          4       QUEUEID
    16          4       FLAG                      the producer's flag, opaque to us
    20          8       QUEUEOFFSET               index in the topic queue's consume queue
    28          8       PHYSICALOFFSET            absolute commit-log offset of this record
    36          4       SYSFLAG                   bits below
    40          8       BORNTIMESTAMP             ms
    48          8|20    BORNHOST                  IPv4 4 B + port int32, or IPv6 16 B + port (SYSFLAG 0x10)
    B           8       STORETIMESTAMP            B = 56 | 68
    B+8         8|20    STOREHOSTADDRESS          IPv6 when SYSFLAG 0x20
    R           4       RECONSUMETIMES            R = B+16 | B+28
    R+4         8       PREPARED TRANSACTION OFFSET
    R+12        4       BODYLENGTH n
    R+16        n       BODY
    ...         1       TOPICLENGTH t             a (signed in Java) byte, so t <= 127
    ...         t       TOPIC                     UTF-8
    ...         2       PROPERTIESLENGTH p        a signed short, so p <= 32767
    ...         p       PROPERTIES                "k\\x01v\\x02k\\x01v" (UTF-8), trailing \\x02 optional

    size = 91 + n + t + p with two IPv4 hosts (+12 per IPv6 host).

A blank end-of-file marker is just ``TOTALSIZE = bytes left in the file`` and ``MAGICCODE = BLANK``
(8 bytes); the rest of the file after it is ignored.

Hosts travel through the store pre-encoded (``ip bytes + port int32``, 8 or 20 bytes) so that the hot path
packs them as one ``s`` field: the broker encodes a connection's address once, not once per message.

Batch body of SEND_BATCH_MESSAGE (reference §4.6), one entry after another::

    0   4   TOTALSIZE (22 + n + p)    4   4   MAGICCODE (unused, 0)    8   4   BODYCRC (unused, 0)
    12  4   FLAG                      16  4   BODYLENGTH n             20  n   BODY
    20+n 2  PROPERTIESLENGTH p        22+n p  PROPERTIES

Offset message id (reference §4.5): upper-case hex of ``store ip + port int32 + physical offset int64``:
32 characters for IPv4, 56 for IPv6.
"""

from __future__ import annotations

import functools
import ipaddress
import struct
import zlib
from collections.abc import Iterator, Mapping
from typing import NamedTuple

from store.errors import RecordFormatError

Buffer = bytes | bytearray | memoryview

MESSAGE_MAGIC_CODE = -626843481
"""0xDAA320A7 as a signed int32, the v1 message magic."""
BLANK_MAGIC_CODE = -875286124
"""0xCBD43194 as a signed int32, the end-of-file blank marker."""

END_FILE_MIN_BLANK_LENGTH = 8
"""A file always keeps room for a blank marker: a record is written only if ``size + 8 <= room``."""

MAX_TOPIC_LENGTH = 127
MAX_PROPERTIES_LENGTH = 32767
SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
"""Delayed messages live here; their consume-queue tag code is the delivery time, not a tag hash."""


class MessageSysFlag:
    """Bits of SYSFLAG (reference §4.1)."""

    COMPRESSED = 0x1
    MULTI_TAGS = 0x2
    TRANSACTION_NOT_TYPE = 0x0
    TRANSACTION_PREPARED_TYPE = 0x4
    TRANSACTION_COMMIT_TYPE = 0x8
    TRANSACTION_ROLLBACK_TYPE = 0xC
    TRANSACTION_MASK = 0xC
    BORNHOST_V6 = 0x10
    STOREHOST_V6 = 0x20
    NEED_UNWRAP = 0x40
    INNER_BATCH = 0x80

    @staticmethod
    def transaction_type(sys_flag: int) -> int:
        """The transaction bits (2-3) of ``sys_flag``."""
        return sys_flag & MessageSysFlag.TRANSACTION_MASK

    @staticmethod
    def is_dispatched(sys_flag: int) -> bool:
        """Prepared and rolled-back transaction halves get no queue offset and no consume-queue entry."""
        txn = sys_flag & MessageSysFlag.TRANSACTION_MASK
        return txn in (MessageSysFlag.TRANSACTION_NOT_TYPE, MessageSysFlag.TRANSACTION_COMMIT_TYPE)


class MessageConst:
    """Well-known property keys (reference §4.1)."""

    KEYS = "KEYS"
    TAGS = "TAGS"
    WAIT = "WAIT"
    DELAY = "DELAY"
    RETRY_TOPIC = "RETRY_TOPIC"
    REAL_TOPIC = "REAL_TOPIC"
    REAL_QID = "REAL_QID"
    TRAN_MSG = "TRAN_MSG"
    PGROUP = "PGROUP"
    MIN_OFFSET = "MIN_OFFSET"
    MAX_OFFSET = "MAX_OFFSET"
    ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"
    RECONSUME_TIME = "RECONSUME_TIME"
    MAX_RECONSUME_TIMES = "MAX_RECONSUME_TIMES"
    UNIQ_KEY = "UNIQ_KEY"  # Java: PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX
    MSG_REGION = "MSG_REGION"
    TRACE_ON = "TRACE_ON"
    CLUSTER = "CLUSTER"
    CONSUME_START_TIME = "CONSUME_START_TIME"


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
_HOST_V6_BITS = MessageSysFlag.BORNHOST_V6 | MessageSysFlag.STOREHOST_V6


def host_variant(sys_flag: int) -> int:
    """0..3: bit 0 set for an IPv6 born host, bit 1 for an IPv6 store host (index into HEADER_STRUCTS)."""
    return (sys_flag & _HOST_V6_BITS) >> 4


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


def format_host(raw: Buffer) -> str:
    """``"ip:port"`` (IPv6 in brackets) from an encoded host field."""
    ip, port = decode_host(raw)
    return f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"


def host_sys_flags(born_host: Buffer, store_host: Buffer) -> int:
    """The SYSFLAG bits implied by the lengths of the two host fields."""
    flags = 0
    if len(born_host) == IPV6_HOST_LENGTH:
        flags |= MessageSysFlag.BORNHOST_V6
    if len(store_host) == IPV6_HOST_LENGTH:
        flags |= MessageSysFlag.STOREHOST_V6
    return flags


# ---------------------------------------------------------------------------------------- message id


def message_id(store_host: bytes, physical_offset: int) -> str:
    """The offset message id (``msgId`` of a send response): hex of store host + physical offset."""
    return store_host.hex().upper() + f"{physical_offset:016X}"


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


# ---------------------------------------------------------------------------------------- properties

NAME_VALUE_SEPARATOR = "\x01"
PROPERTY_SEPARATOR = "\x02"


def encode_properties(properties: Mapping[str, str]) -> str:
    """``k\\x01v\\x02k\\x01v`` without a trailing separator (the 4.9.3+ form)."""
    return PROPERTY_SEPARATOR.join(f"{k}{NAME_VALUE_SEPARATOR}{v}" for k, v in properties.items())


def parse_properties(text: str) -> dict[str, str]:
    """Parse either form (with or without the trailing ``\\x02``); pairs without ``\\x01`` are skipped."""
    result: dict[str, str] = {}
    for item in text.split(PROPERTY_SEPARATOR):
        name, sep, value = item.partition(NAME_VALUE_SEPARATOR)
        if sep and name:
            result[name] = value
    return result


def get_property(text: str, name: str) -> str | None:
    """One property's value without parsing the whole string (the hot path only needs TAGS)."""
    marker = name + NAME_VALUE_SEPARATOR
    start = 0
    while True:
        at = text.find(marker, start)
        if at < 0:
            return None
        if at == 0 or text[at - 1] == PROPERTY_SEPARATOR:
            begin = at + len(marker)
            end = text.find(PROPERTY_SEPARATOR, begin)
            return text[begin:] if end < 0 else text[begin:end]
        start = at + 1


def join_properties(first: str, second: str) -> str:
    """``first`` followed by ``second``, with one separator between them when both are non-empty."""
    if not second:
        return first
    if not first or first.endswith(PROPERTY_SEPARATOR):
        return first + second
    return first + PROPERTY_SEPARATOR + second


def get_property_bytes(data: Buffer, marker: bytes) -> bytes | None:
    """One property's value from raw properties bytes; ``marker`` is ``b"NAME\\x01"``."""
    raw = data if isinstance(data, bytes) else bytes(data)
    start = 0
    while True:
        at = raw.find(marker, start)
        if at < 0:
            return None
        if at == 0 or raw[at - 1] == 2:
            begin = at + len(marker)
            end = raw.find(b"\x02", begin)
            return raw[begin:] if end < 0 else raw[begin:end]
        start = at + 1


_DELAY_MARKER = b"DELAY\x01"


@functools.lru_cache(maxsize=8192)
def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode()`` (over UTF-16 code units, int32 overflow): the tag code of a message."""
    h = 0
    units = text.encode("ascii") if text.isascii() else struct.unpack(
        f">{len(text.encode('utf-16-be')) // 2}H", text.encode("utf-16-be"))
    for unit in units:
        h = (31 * h + unit) & 0xFFFFFFFF
    return h - 0x100000000 if h & 0x80000000 else h


def tags_code_of(properties: str) -> int:
    """Tag code of a properties string: hash of TAGS, 0 when there is none (hot path: no full parse)."""
    at = properties.find("TAGS\x01")
    if at < 0:
        return 0
    if at and properties[at - 1] != PROPERTY_SEPARATOR:
        tags = get_property(properties, MessageConst.TAGS)
        return java_string_hash(tags) if tags else 0
    end = properties.find(PROPERTY_SEPARATOR, at + 5)
    tags = properties[at + 5:] if end < 0 else properties[at + 5:end]
    return java_string_hash(tags) if tags else 0


def tags_code_of_bytes(properties: bytes) -> int:
    """:func:`tags_code_of` for raw properties bytes (batch entries, records)."""
    at = properties.find(b"TAGS\x01")
    if at < 0:
        return 0
    if at and properties[at - 1] != 2:
        raw = get_property_bytes(properties, b"TAGS\x01")
    else:
        end = properties.find(b"\x02", at + 5)
        raw = properties[at + 5:] if end < 0 else properties[at + 5:end]
    return java_string_hash(raw.decode(errors="replace")) if raw else 0


# ------------------------------------------------------------------------------------------- encode


def encode_record_into(
    buf: Buffer | bytearray,
    pos: int,
    *,
    total_size: int,
    body_crc_value: int,
    queue_id: int,
    flag: int,
    queue_offset: int,
    physical_offset: int,
    sys_flag: int,
    born_timestamp: int,
    born_host: bytes,
    store_timestamp: int,
    store_host: bytes,
    reconsume_times: int,
    prepared_transaction_offset: int,
    body: Buffer,
    topic_field: bytes,
    properties: bytes,
) -> None:
    """Write one record at ``buf[pos:pos + total_size]``.

    ``topic_field`` is the TOPICLENGTH byte followed by the topic (see :func:`topic_field`); ``sys_flag``
    must carry the host bits that match the host lengths (see :func:`host_sys_flags`). The commit log has
    an inlined copy of this for its hot path; this one is the reference and what tests and tools use.
    """
    header = HEADER_STRUCTS[host_variant(sys_flag)]
    header.pack_into(
        buf, pos, total_size, MESSAGE_MAGIC_CODE, body_crc_value, queue_id, flag, queue_offset,
        physical_offset, sys_flag, born_timestamp, born_host, store_timestamp, store_host, reconsume_times,
        prepared_transaction_offset, len(body),
    )
    p = pos + header.size
    end = p + len(body)
    buf[p:end] = body  # type: ignore[index]
    p, end = end, end + len(topic_field)
    buf[p:end] = topic_field  # type: ignore[index]
    PROPERTIES_LENGTH.pack_into(buf, end, len(properties))
    p = end + 2
    buf[p:p + len(properties)] = properties  # type: ignore[index]


def topic_field(topic: str) -> bytes:
    """TOPICLENGTH byte + UTF-8 topic; ``ValueError`` when longer than 127 bytes."""
    raw = topic.encode()
    if not raw or len(raw) > MAX_TOPIC_LENGTH:
        raise ValueError(f"topic of {len(raw)} bytes (1..{MAX_TOPIC_LENGTH} allowed)")
    return bytes((len(raw),)) + raw


def encode_record(
    *,
    topic: str,
    body: bytes,
    properties: str = "",
    queue_id: int = 0,
    flag: int = 0,
    queue_offset: int = 0,
    physical_offset: int = 0,
    sys_flag: int = 0,
    born_timestamp: int = 0,
    born_host: bytes = b"\x7f\x00\x00\x01\x00\x00\x00\x00",
    store_timestamp: int = 0,
    store_host: bytes = b"\x7f\x00\x00\x01\x00\x00\x2a\x9f",
    reconsume_times: int = 0,
    prepared_transaction_offset: int = 0,
) -> bytes:
    """One whole record as ``bytes`` (tests, tools). Host bits of ``sys_flag`` are set from the hosts."""
    sys_flag = (sys_flag & ~_HOST_V6_BITS) | host_sys_flags(born_host, store_host)
    tfield = topic_field(topic)
    props = properties.encode()
    size = record_size(sys_flag, len(body), len(tfield) - 1, len(props))
    out = bytearray(size)
    encode_record_into(
        out, 0, total_size=size, body_crc_value=body_crc(body), queue_id=queue_id, flag=flag,
        queue_offset=queue_offset, physical_offset=physical_offset, sys_flag=sys_flag,
        born_timestamp=born_timestamp, born_host=born_host, store_timestamp=store_timestamp,
        store_host=store_host, reconsume_times=reconsume_times,
        prepared_transaction_offset=prepared_transaction_offset, body=body, topic_field=tfield,
        properties=props,
    )
    return bytes(out)


def encode_blank_into(buf: Buffer | bytearray, pos: int, size: int) -> None:
    """The 8-byte end-of-file marker claiming the ``size`` bytes left in the file."""
    SIZE_AND_MAGIC.pack_into(buf, pos, size, BLANK_MAGIC_CODE)


# ------------------------------------------------------------------------------------------- decode


class MessageRecord(NamedTuple):
    """Every field of one stored record (what a pull client or the Spark reader sees)."""

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
        return get_property(self.properties, MessageConst.TAGS)

    @property
    def keys(self) -> list[str]:
        """The KEYS property split on spaces."""
        keys = get_property(self.properties, MessageConst.KEYS)
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


_Parsed = tuple[tuple[int | bytes, ...], int, int, int, int]
"""What :func:`_parse` found: (header fields, body start, body end = topic-length byte, topic end =
properties-length field, properties end); a plain tuple, as it is built once per record scanned."""

_TOPIC_NAMES: dict[bytes, str] = {}
"""Decoded topic names by their bytes (a scan meets the same few topics over and over)."""
_TOPIC_NAMES_MAX = 4096


def _parse(buf: Buffer, pos: int, limit: int, check_crc: bool, expected_offset: int | None) -> _Parsed | Blank:
    """Validate the record at ``pos`` (which must end by ``limit``) and locate its parts."""
    avail = limit - pos
    if avail < 8:
        if avail > 0 and not any(bytes(buf[pos:limit])):
            raise RecordFormatError(RecordFormatError.END_OF_DATA, pos)
        raise RecordFormatError("truncated record", pos)
    total, magic = SIZE_AND_MAGIC.unpack_from(buf, pos)
    if magic == BLANK_MAGIC_CODE:
        if total < END_FILE_MIN_BLANK_LENGTH:
            raise RecordFormatError("bad blank marker size", pos)
        if total > avail:
            raise RecordFormatError("truncated record", pos)
        return Blank(total)
    if magic != MESSAGE_MAGIC_CODE:
        if total == 0 and magic == 0:
            raise RecordFormatError(RecordFormatError.END_OF_DATA, pos)
        raise RecordFormatError("bad magic code", pos)
    if total < _MIN_RECORD_SIZE:
        raise RecordFormatError("bad total size", pos)
    if total > avail:
        raise RecordFormatError("truncated record", pos)
    sys_flag = INT32.unpack_from(buf, pos + SYS_FLAG_OFFSET)[0]
    header = HEADER_STRUCTS[host_variant(sys_flag)]
    if total < header.size + 3:
        raise RecordFormatError("bad total size", pos)
    fields = header.unpack_from(buf, pos)
    body_len = fields[14]
    body_start = pos + header.size
    body_end = body_start + body_len
    if body_len < 0 or body_end + 3 > pos + total:
        raise RecordFormatError("bad body length", pos)
    topic_len = buf[body_end]
    if not 0 < topic_len <= MAX_TOPIC_LENGTH:
        raise RecordFormatError("bad topic length", pos)
    topic_end = body_end + 1 + topic_len
    if topic_end + 2 > pos + total:
        raise RecordFormatError("bad topic length", pos)
    props_len = PROPERTIES_LENGTH.unpack_from(buf, topic_end)[0]
    props_end = topic_end + 2 + props_len
    if props_len < 0 or props_end != pos + total:
        raise RecordFormatError("size mismatch", pos)
    if expected_offset is not None and fields[6] != expected_offset:
        raise RecordFormatError("physical offset mismatch", pos)
    if check_crc and fields[2] != zlib.crc32(buf[body_start:body_end]) & 0x7FFFFFFF:
        raise RecordFormatError("body CRC mismatch", pos)
    return fields, body_start, body_end, topic_end, props_end


def _text(buf: Buffer, start: int, end: int, pos: int, what: str) -> str:
    try:
        return bytes(buf[start:end]).decode()
    except UnicodeDecodeError:
        raise RecordFormatError(f"{what} is not UTF-8", pos) from None


def decode_record(
    buf: Buffer,
    pos: int = 0,
    *,
    limit: int | None = None,
    check_crc: bool = True,
    expected_offset: int | None = None,
) -> MessageRecord | Blank:
    """Decode the record at ``buf[pos:]``; :class:`Blank` for an end-of-file marker.

    Raises :class:`~store.errors.RecordFormatError` for anything that is not a whole, valid record:
    bad magic, sizes that do not add up, a record running past ``limit`` (default: end of ``buf``),
    a body CRC mismatch (when ``check_crc``), or a PHYSICALOFFSET other than ``expected_offset``.
    """
    parsed = _parse(buf, pos, len(buf) if limit is None else limit, check_crc, expected_offset)
    if isinstance(parsed, Blank):
        return parsed
    f, body_start, body_end, topic_end, props_end = parsed
    return MessageRecord(
        f[0], f[1], f[2], f[3], f[4], f[5], f[6], f[7], f[8], f[9], f[10], f[11], f[12], f[13],  # type: ignore[arg-type]
        bytes(buf[body_start:body_end]),
        _text(buf, body_end + 1, topic_end, pos, "topic"),
        _text(buf, topic_end + 2, props_end, pos, "properties"),
    )


def decode_records(buf: Buffer, *, check_crc: bool = True) -> Iterator[MessageRecord]:
    """Records laid end to end (a pull response body, an exported commit-log range); stops at a blank
    marker or at the zeros after the last record; raises on damage."""
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


def check_record(
    buf: Buffer,
    pos: int,
    limit: int,
    *,
    base_offset: int,
    check_crc: bool = True,
) -> DispatchRequest | Blank:
    """Validate the record at ``buf[pos:]`` of a file that starts at commit-log offset ``base_offset``
    and return what dispatching it needs (recovery, slave replay). Raises ``RecordFormatError``."""
    parsed = _parse(buf, pos, limit, check_crc, base_offset + pos)
    if isinstance(parsed, Blank):
        return parsed
    f, _body_start, body_end, topic_end, props_end = parsed
    raw_topic = bytes(buf[body_end + 1:topic_end])
    topic = _TOPIC_NAMES.get(raw_topic)
    if topic is None:
        topic = _text(buf, body_end + 1, topic_end, pos, "topic")
        if len(_TOPIC_NAMES) >= _TOPIC_NAMES_MAX:
            _TOPIC_NAMES.clear()
        _TOPIC_NAMES[raw_topic] = topic
    props = bytes(buf[topic_end + 2:props_end])
    tags_code = tags_code_of_bytes(props)
    delay_level = 0
    if topic == SCHEDULE_TOPIC:
        delay = get_property_bytes(props, _DELAY_MARKER)
        delay_level = int(delay) if delay and delay.isdigit() else 0
    return DispatchRequest(
        topic, f[3], f[6], f[0], tags_code, f[10], f[5], f[7], delay_level,  # type: ignore[arg-type]
    )


# --------------------------------------------------------------------------------------- batch body

BATCH_ENTRY_HEADER = struct.Struct(">iiiii")
"""TOTALSIZE, MAGICCODE, BODYCRC, FLAG, BODYLENGTH of one batch entry."""
BATCH_ENTRY_OVERHEAD = BATCH_ENTRY_HEADER.size + 2


class BatchEntry(NamedTuple):
    """One message of a batch body: its flag, body and own properties string."""

    flag: int
    body: bytes
    properties: str


def decode_batch_body(data: Buffer) -> list[BatchEntry]:
    """Split a SEND_BATCH_MESSAGE body into entries; ``RecordFormatError`` if the sizes do not add up."""
    entries: list[BatchEntry] = []
    view = memoryview(data)
    pos, end = 0, len(view)
    while pos < end:
        if end - pos < BATCH_ENTRY_OVERHEAD:
            raise RecordFormatError("truncated batch entry", pos)
        total, _magic, _crc, flag, body_len = BATCH_ENTRY_HEADER.unpack_from(view, pos)
        body_start = pos + BATCH_ENTRY_HEADER.size
        body_end = body_start + body_len
        if body_len < 0 or total > end - pos or body_end + 2 > pos + total:
            raise RecordFormatError("bad batch entry size", pos)
        props_len = PROPERTIES_LENGTH.unpack_from(view, body_end)[0]
        if props_len < 0 or body_end + 2 + props_len != pos + total:
            raise RecordFormatError("bad batch entry size", pos)
        try:
            props = bytes(view[body_end + 2:pos + total]).decode()
        except UnicodeDecodeError:
            raise RecordFormatError("batch properties are not UTF-8", pos) from None
        entries.append(BatchEntry(flag, bytes(view[body_start:body_end]), props))
        pos += total
    return entries


def encode_batch_body(entries: list[BatchEntry]) -> bytes:
    """The inverse of :func:`decode_batch_body` (the client side, tests)."""
    out = bytearray()
    for entry in entries:
        props = entry.properties.encode()
        total = BATCH_ENTRY_OVERHEAD + len(entry.body) + len(props)
        out += BATCH_ENTRY_HEADER.pack(total, 0, 0, entry.flag, len(entry.body))
        out += entry.body
        out += PROPERTIES_LENGTH.pack(len(props))
        out += props
    return bytes(out)
