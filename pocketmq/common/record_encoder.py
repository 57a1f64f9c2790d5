# cython: boundscheck=False, wraparound=False
"""Writing the commit-log record whose layout :mod:`pocketmq.common.record` sets out (the decoder lives there).

:func:`encode_record_into` writes one record into a buffer (the reference for the commit log's inlined append,
which :class:`pocketmq.store.commitlog.CommitLog` keeps for its hot path), :func:`encode_record` builds one as ``bytes``
for tests and tools, :func:`encode_blank_into` writes the end-of-file marker, and :func:`topic_field` checks and
encodes TOPICLENGTH + TOPIC. Pure functions over bytes, no I/O.

:func:`encode_batch_records_into` turns a whole SEND_BATCH_MESSAGE body (:mod:`pocketmq.common.batch`) into records in
one pass. It has two implementations with one contract: :func:`_batch_records_typed`, which the compiled build
types through ``record_encoder.pxd`` (C integers, direct byte stores, one header template per batch, the tag
code of a run of equal tags computed once), and :func:`_batch_records_struct`, the ``struct``-based loop the
plain source runs (the typed one read as Python does a Python operation per byte). The module picks the typed
one exactly when it was compiled; the tests check that both write the same bytes.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable
from types import FunctionType

from pocketmq.common.errors import RecordFormatError
from pocketmq.common.record import (
    BLANK_MAGIC_CODE,
    HEADER_STRUCTS,
    MAX_PROPERTIES_LENGTH,
    MAX_TOPIC_LENGTH,
    MESSAGE_MAGIC_CODE,
    PROPERTIES_LENGTH,
    SIZE_AND_MAGIC,
    Buffer,
    body_crc,
    host_sys_flags,
    host_variant,
    message_id,
    record_size,
)
from pocketmq.common.sysflag import MessageSysFlag

_HOST_V6_BITS = MessageSysFlag.BORNHOST_V6 | MessageSysFlag.STOREHOST_V6

#: ``(physical offset, size, tags code)`` of each record a batch wrote, in order (the consume queue's units).
BatchUnits = list[tuple[int, int, int]]
#: ``tag_code_of(properties, value, plain)``: the tags code of properties whose last ``TAGS\x01`` is followed
#: by ``value``; ``plain`` says that match starts an item (at the start or after a separator).
TagCodeOf = Callable[[bytes, bytes, bool], int]

_ENTRY_HEAD = struct.Struct(">i8xii")
"""TOTALSIZE, FLAG, BODYLENGTH of a batch entry (MAGICCODE and BODYCRC are unused placeholders)."""
_ENTRY_BODY_OFFSET = 20
"""Where an entry's body starts (after TOTALSIZE, MAGICCODE, BODYCRC, FLAG, BODYLENGTH)."""
_TAGS_KEY = b"TAGS\x01"


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


def encode_batch_records_into(
    dst: memoryview | bytearray, w: int, base: int, header: struct.Struct, src: bytes, tfield: bytes,
    extra: bytes, sys_flag: int, queue_id: int, queue_offset: int, born_ts: int, born_host: bytes, now: int,
    store_host: bytes, tag_code_of: TagCodeOf,
) -> tuple[int, BatchUnits]:
    """Write one record per entry of the batch body ``src`` at ``dst[w:]`` (the file starting at commit-log
    offset ``base``), with consecutive queue offsets from ``queue_offset``; ``extra`` (header properties,
    may be empty) is appended to each entry's properties. Returns the position after the last record and
    each record's unit. ``RecordFormatError`` when the entries do not tile ``src`` or a record's properties
    would exceed 32767 bytes; records written before that stay in ``dst`` (the caller clears them).
    ``dst`` must have room for every record (the caller bounds it from the entry count)."""
    return _BATCH_RECORDS(dst, w, base, header, src, tfield, extra, sys_flag, queue_id, queue_offset, born_ts,
                          born_host, now, store_host, tag_code_of)


def _batch_records_struct(
    dst: memoryview | bytearray, w: int, base: int, header: struct.Struct, src: bytes, tfield: bytes,
    extra: bytes, sys_flag: int, queue_id: int, queue_offset: int, born_ts: int, born_host: bytes, now: int,
    store_host: bytes, tag_code_of: TagCodeOf,
) -> tuple[int, BatchUnits]:
    """:func:`encode_batch_records_into` for the plain source: ``struct`` does the fields, slices the bytes."""
    view = memoryview(src)
    pack = header.pack_into
    hsize = header.size
    tlen = len(tfield)
    unpack_head = _ENTRY_HEAD.unpack_from
    unpack_len = PROPERTIES_LENGTH.unpack_from
    pack_len = PROPERTIES_LENGTH.pack_into
    crc32 = zlib.crc32
    find = src.find
    rfind = src.rfind
    extra_len = len(extra)
    sep_extra = b"\x02" + extra
    end = len(src)
    units: BatchUnits = []
    last_value = b""
    last_code = 0
    have_last = False
    pos = 0
    while pos < end:
        if end - pos < _ENTRY_BODY_OFFSET + 2:
            raise RecordFormatError("truncated batch entry", pos)
        entry_total, flag, body_len = unpack_head(view, pos)
        body_start = pos + _ENTRY_BODY_OFFSET
        body_end = body_start + body_len
        entry_end = pos + entry_total
        if body_len < 0 or body_end + 2 > entry_end or entry_end > end:
            raise RecordFormatError("bad batch entry size", pos)
        props_len = unpack_len(view, body_end)[0]
        if props_len < 0 or body_end + 2 + props_len != entry_end:
            raise RecordFormatError("bad batch entry size", pos)
        props_start = body_end + 2
        at = rfind(_TAGS_KEY, props_start, entry_end)  # the last TAGS item wins, as in a dict
        if at < 0:
            tags = 0
        else:
            value_end = find(b"\x02", at + 5, entry_end)
            value = src[at + 5:entry_end if value_end < 0 else value_end]
            plain = at == props_start or src[at - 1] == 2
            if plain and have_last and value == last_value:
                tags = last_code
            else:
                tags = tag_code_of(src[props_start:entry_end], value, plain)
                last_value, last_code, have_last = value, tags, plain
        stored_len = props_len
        tail = extra
        if extra_len:
            if props_len and src[entry_end - 1] != 2:
                tail = sep_extra
            stored_len += len(tail)
            if stored_len > MAX_PROPERTIES_LENGTH:
                raise RecordFormatError("properties too long", pos)
        size = hsize + body_len + tlen + 2 + stored_len
        phys = base + w
        entry_body = view[body_start:body_end]
        pack(dst, w, size, MESSAGE_MAGIC_CODE, crc32(entry_body) & 0x7FFFFFFF, queue_id, flag, queue_offset,
             phys, sys_flag, born_ts, born_host, now, store_host, 0, 0, body_len)
        p = w + hsize
        q = p + body_len
        dst[p:q] = entry_body
        p = q + tlen
        dst[q:p] = tfield
        q = p + 2 + props_len
        dst[p:q] = view[body_end:entry_end]  # PROPERTIESLENGTH + properties, as in the entry
        if extra_len:
            pack_len(dst, p, stored_len)
            dst[q:q + len(tail)] = tail
        units.append((phys, size, tags))
        w += size
        queue_offset += 1
        pos = entry_end
    return w, units


def _batch_records_typed(
    dst: memoryview | bytearray, w: int, base: int, header: struct.Struct, src: bytes, tfield: bytes,
    extra: bytes, sys_flag: int, queue_id: int, queue_offset: int, born_ts: int, born_host: bytes, now: int,
    store_host: bytes, tag_code_of: TagCodeOf,
) -> tuple[int, BatchUnits]:
    """:func:`encode_batch_records_into` for the compiled build (``record_encoder.pxd`` types every local):
    the fixed fields come from one template per batch, the six that vary are stored byte by byte."""
    hsize = header.size
    template = bytearray(hsize)
    header.pack_into(template, 0, 0, MESSAGE_MAGIC_CODE, 0, queue_id, 0, 0, 0, sys_flag, born_ts, born_host, now,
                     store_host, 0, 0, 0)
    tmpl = template  # typed views of the Python objects (the compiled build reads and writes them directly)
    out = dst
    data = src
    tf = tfield
    ex = extra
    crc_view = memoryview(src)
    crc32 = zlib.crc32
    tlen = len(tfield)
    extra_len = len(extra)
    cap = len(dst)
    max_props = MAX_PROPERTIES_LENGTH
    end = len(src)
    units: BatchUnits = []
    last_start = last_len = last_code = 0
    have_last = False
    pos = 0
    while pos < end:
        if end - pos < _ENTRY_BODY_OFFSET + 2:
            raise RecordFormatError("truncated batch entry", pos)
        b0, b1, b2, b3 = data[pos], data[pos + 1], data[pos + 2], data[pos + 3]
        entry_total = b0 << 24 | b1 << 16 | b2 << 8 | b3
        b0, b1, b2, b3 = data[pos + 16], data[pos + 17], data[pos + 18], data[pos + 19]
        body_len = b0 << 24 | b1 << 16 | b2 << 8 | b3
        if entry_total >= 0x80000000 or body_len >= 0x80000000:  # negative as int32
            raise RecordFormatError("bad batch entry size", pos)
        body_start = pos + _ENTRY_BODY_OFFSET
        body_end = body_start + body_len
        entry_end = pos + entry_total
        if body_end + 2 > entry_end or entry_end > end:
            raise RecordFormatError("bad batch entry size", pos)
        b0, b1 = data[body_end], data[body_end + 1]
        props_len = b0 << 8 | b1
        props_start = body_end + 2
        if props_len >= 0x8000 or props_start + props_len != entry_end:
            raise RecordFormatError("bad batch entry size", pos)
        tags = 0
        at = entry_end - 5  # the last TAGS item wins, as in a dict
        while at >= props_start:
            if (data[at] == 84 and data[at + 1] == 65 and data[at + 2] == 71 and data[at + 3] == 83
                    and data[at + 4] == 1):  # b"TAGS\x01"
                break
            at -= 1
        if at >= props_start:
            value_start = at + 5
            value_end = value_start
            while value_end < entry_end and data[value_end] != 2:
                value_end += 1
            value_len = value_end - value_start
            plain = at == props_start or data[at - 1] == 2
            same = plain and have_last and value_len == last_len
            i = 0
            while same and i < value_len:
                same = data[value_start + i] == data[last_start + i]
                i += 1
            if same:
                tags = last_code
            else:
                tags = tag_code_of(src[props_start:entry_end], src[value_start:value_end], plain)
                last_start, last_len, last_code, have_last = value_start, value_len, tags, plain
        stored_len = props_len
        sep = 0
        if extra_len:
            if props_len and data[entry_end - 1] != 2:
                sep = 1
            stored_len += sep + extra_len
            if stored_len > max_props:
                raise RecordFormatError("properties too long", pos)
        size = hsize + body_len + tlen + 2 + stored_len
        if w + size > cap:
            raise RecordFormatError("batch records overrun the buffer", pos)
        phys = base + w
        crc = crc32(crc_view[body_start:body_end]) & 0x7FFFFFFF
        for i in range(hsize):
            out[w + i] = tmpl[i]
        out[w] = size >> 24 & 255
        out[w + 1] = size >> 16 & 255
        out[w + 2] = size >> 8 & 255
        out[w + 3] = size & 255
        out[w + 8] = crc >> 24 & 255
        out[w + 9] = crc >> 16 & 255
        out[w + 10] = crc >> 8 & 255
        out[w + 11] = crc & 255
        for i in range(4):
            out[w + 16 + i] = data[pos + 12 + i]  # FLAG, as in the entry
        for i in range(8):
            out[w + 27 - i] = queue_offset >> (8 * i) & 255
            out[w + 35 - i] = phys >> (8 * i) & 255
        p = w + hsize
        for i in range(4):
            out[p - 4 + i] = data[pos + 16 + i]  # BODYLENGTH, as in the entry
        out[p:p + body_len] = data[body_start:body_end]
        p += body_len
        for i in range(tlen):
            out[p + i] = tf[i]
        p += tlen
        for i in range(props_len + 2):  # PROPERTIESLENGTH + properties, as in the entry
            out[p + i] = data[body_end + i]
        if extra_len:
            out[p] = stored_len >> 8 & 255
            out[p + 1] = stored_len & 255
            q = p + 2 + props_len
            if sep:
                out[q] = 2
                q += 1
            for i in range(extra_len):
                out[q + i] = ex[i]
        units.append((phys, size, tags))
        w += size
        queue_offset += 1
        pos = entry_end
    return w, units


def count_batch_entries(src: bytes) -> int:
    """Number of entries of a batch body, hopping from TOTALSIZE to TOTALSIZE (one 4-byte read per entry; the
    full check happens while writing); ``RecordFormatError`` when they do not tile the body exactly. Typed by
    ``record_encoder.pxd`` in the compiled build; as Python it is as fast as a ``struct`` loop."""
    data = src
    count = pos = 0
    end = len(src)
    while pos < end:
        if end - pos < _ENTRY_BODY_OFFSET + 2:
            raise RecordFormatError("truncated batch entry", pos)
        b0, b1, b2, b3 = data[pos], data[pos + 1], data[pos + 2], data[pos + 3]
        size = b0 << 24 | b1 << 16 | b2 << 8 | b3
        if size < _ENTRY_BODY_OFFSET + 2 or size >= 0x80000000:  # too small, or negative as int32
            raise RecordFormatError("bad batch entry size", pos)
        pos += size
        count += 1
    if pos != end:
        raise RecordFormatError("batch entries overrun the body", pos)
    return count


def joined_message_ids(store_host: bytes, offsets: list[int]) -> str:
    """The offset message ids of records at ``offsets`` (one store host), joined by commas: a batch's ``msgId``
    in its send response."""
    prefix = message_id(store_host, 0)
    return _JOINED_IDS(prefix[:len(prefix) - 16], offsets)  # (no negative index: the module is wraparound=False)


def _joined_ids_format(prefix: str, offsets: list[int]) -> str:
    """:func:`joined_message_ids` for the plain source (after the store host's hex ``prefix``)."""
    return ",".join([f"{prefix}{off:016X}" for off in offsets])


def _joined_ids_typed(prefix: str, offsets: list[int]) -> str:
    """:func:`joined_message_ids` for the compiled build: the hex digits stored straight into one buffer."""
    n = len(offsets)
    if n == 0:
        return ""
    raw = prefix.encode("ascii")
    plen = len(raw)
    buf = bytearray(n * (plen + 17) - 1)
    out = buf
    pre = raw
    digits = _HEX_DIGITS
    p = 0
    for k in range(n):
        if k:
            out[p] = 44  # ","
            p += 1
        for i in range(plen):
            out[p + i] = pre[i]
        p += plen
        off = offsets[k]  # a physical offset: never negative
        for i in range(16):
            out[p + 15 - i] = digits[off >> (4 * i) & 15]
        p += 16
    return buf.decode("ascii")


_HEX_DIGITS = b"0123456789ABCDEF"


COMPILED = not isinstance(_batch_records_typed, FunctionType)
"""True when this module runs compiled (a compiled function is not a Python ``function``)."""
_BATCH_RECORDS = _batch_records_typed if COMPILED else _batch_records_struct
_JOINED_IDS = _joined_ids_typed if COMPILED else _joined_ids_format
