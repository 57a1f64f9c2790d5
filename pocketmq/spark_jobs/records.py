"""One byte range of a commit-log file to Arrow record batches: the reader's core, without Spark.

One decoder, two speeds. The record format is defined once, in the model's :mod:`pocketmq.common.record` (the layout
table in its docstring, the named offsets and the ``struct`` layouts ``HEADER_STRUCTS``), and the reference
decoder is :func:`common.record.decode_record`, on the same :func:`~pocketmq.common.record.locate_record` that the
broker's recovery, the slave and the SDK's pull decoding use. This module adds no second definition of the
format:

* the reference path calls :func:`~pocketmq.common.record.decode_record` on every record (with ``expected_offset``:
  the PHYSICALOFFSET field must equal the record's position, so a range that starts anywhere but on a
  record boundary fails loudly instead of producing garbage) and builds the columns from its
  :class:`~pocketmq.common.record.MessageRecord` tuples;
* the vectorised path (numpy over a whole batch of IPv4 records, several times faster) reads the fixed header through
  a numpy record type *derived from* ``common.record.HEADER_STRUCTS[0]`` at import time, and the variable
  parts through the model's constants (``MAX_TOPIC_LENGTH``, ``PROPERTIES_LENGTH``, the separators). It
  applies the decoder's checks in the decoder's order and, when anything is unusual (IPv6 hosts, damage,
  text that is not UTF-8, a property name given twice), hands the batch to the reference path, so every
  error message is the decoder's own. A property-based test holds the two paths to identical batches.

Why not put the vectorised variant into :mod:`pocketmq.common.record`: the model is every process's dependency-free
ground floor and must not need numpy or pyarrow (the ``spark`` extra); the format stays there and only the
batch mechanics live here.

Blank end-of-file markers and the zeros after the last record end the range. The body CRC is not a reason
to stop: it becomes the ``body_crc_ok`` column, so an analysis can count damaged messages.

Columns (see :data:`COLUMNS`): the export they came from, the broker, each field of the record, the
properties as a map, and TAGS, KEYS (split on whitespace) and UNIQ_KEY taken out of it; the body only when
asked for, decompressed when asked for (``SYSFLAG`` bit 0, zlib — what RocketMQ 4.x producers use).

Speed. Columns are built in bulk (numpy, ``zip``), properties are split into the map with numpy and Arrow
kernels, hosts are formatted once per distinct host. The garbage collector is paused while a batch is built
(records hold no cycles; the collections a batch's allocations would trigger are pure cost).
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import mmap
import os
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pocketmq.common.errors import RecordFormatError
from pocketmq.common.message import NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR, MessageConst, parse_properties
from pocketmq.common.record import (
    END_FILE_MIN_BLANK_LENGTH,
    HEADER_STRUCTS,
    MAX_TOPIC_LENGTH,
    MESSAGE_MAGIC_CODE,
    PROPERTIES_LENGTH,
    RECORD_OVERHEAD,
    SIZE_AND_MAGIC,
    Blank,
    MessageRecord,
    decode_record,
    format_host,
)
from pocketmq.common.sysflag import MessageSysFlag
from pocketmq.spark_jobs.manifest import ExportError

DEFAULT_BATCH_ROWS = 32768
"""Rows per Arrow batch: fewer, larger batches read faster through Spark (``rmq-bench spark``)."""
BATCH_BYTES = 32 << 20
"""A batch also ends after this many bytes of records, so that big bodies keep batches (and memory) small."""
_CRC_MASK = 0x7FFFFFFF

_BASE_FIELDS: tuple[tuple[str, pa.DataType], ...] = (
    ("export", pa.string()),
    ("broker", pa.string()),
    ("topic", pa.string()),
    ("queue_id", pa.int32()),
    ("queue_offset", pa.int64()),
    ("physical_offset", pa.int64()),
    ("size", pa.int32()),
    ("sys_flag", pa.int32()),
    ("flag", pa.int32()),
    ("born_timestamp", pa.int64()),
    ("store_timestamp", pa.int64()),
    ("born_host", pa.string()),
    ("store_host", pa.string()),
    ("reconsume_times", pa.int32()),
    ("prepared_transaction_offset", pa.int64()),
    ("body_crc", pa.int32()),
    ("body_crc_ok", pa.bool_()),
    ("tags", pa.string()),
    ("keys", pa.list_(pa.string())),
    ("uniq_key", pa.string()),
    ("properties", pa.map_(pa.string(), pa.string())),
)
_BODY_FIELD = ("body", pa.binary())

COLUMNS: tuple[str, ...] = tuple(name for name, _ in _BASE_FIELDS)
"""Column names without the body (which, when asked for, comes last)."""


def arrow_schema(with_body: bool) -> pa.Schema:
    """The batches' schema."""
    fields = [*_BASE_FIELDS, _BODY_FIELD] if with_body else list(_BASE_FIELDS)
    return pa.schema([pa.field(name, typ) for name, typ in fields])


def spark_ddl(with_body: bool) -> str:
    """The same schema as a Spark DDL string (so this module needs no pyspark)."""
    ddl = {pa.string(): "STRING", pa.int32(): "INT", pa.int64(): "BIGINT", pa.bool_(): "BOOLEAN",
           pa.binary(): "BINARY", pa.list_(pa.string()): "ARRAY<STRING>",
           pa.map_(pa.string(), pa.string()): "MAP<STRING, STRING>"}
    return ", ".join(f"{f.name} {ddl[f.type]}" for f in arrow_schema(with_body))


@dataclass(frozen=True, slots=True)
class FileRange:
    """``[start, end)`` of the file at ``path`` (file positions; ``start`` is a record boundary); records
    end at ``data_end`` at the latest. ``base_offset`` is the commit-log offset of file position 0."""

    export: str
    broker: str
    path: str
    base_offset: int
    start: int
    end: int
    data_end: int


@dataclass(frozen=True, slots=True)
class ReadOptions:
    """What the rows carry."""

    with_body: bool = False
    decompress: bool = False
    batch_rows: int = DEFAULT_BATCH_ROWS


def scan_range(rng: FileRange, options: ReadOptions = ReadOptions()) -> Iterator[pa.RecordBatch]:
    """The records of ``rng`` as record batches of at most ``options.batch_rows`` rows.

    Raises :class:`~pocketmq.spark_jobs.manifest.ExportError` naming the file and commit-log offset of the first
    record that is not valid, or where a file shorter than its manifest entry stops.
    """
    if rng.start >= min(rng.end, rng.data_end):
        return
    with open(rng.path, "rb") as fh:
        actual = os.fstat(fh.fileno()).st_size
        size = min(rng.data_end, actual)
        if size <= rng.start:
            raise _truncated(rng, size)
        mm = mmap.mmap(fh.fileno(), size, access=mmap.ACCESS_READ)
    try:
        yield from _scan(memoryview(mm), rng, size, options)
    finally:
        # After an error its traceback still holds views of the map; it is then unmapped when they go.
        with contextlib.suppress(BufferError):
            mm.close()


def _truncated(rng: FileRange, size: int) -> ExportError:
    offset = rng.base_offset + size
    return ExportError(f"{rng.path}: truncated at commit-log offset {offset} (file position {size}; the records "
                       f"up to offset {rng.base_offset + rng.data_end} are missing)", path=rng.path, offset=offset)


def _scan(view: memoryview, rng: FileRange, size: int, options: ReadOptions) -> Iterator[pa.RecordBatch]:
    pos = rng.start
    end = min(rng.end, size)
    truncated = size < min(rng.end, rng.data_end)
    data = np.frombuffer(view, np.uint8)
    gc_was_enabled = gc.isenabled()
    while pos < end:
        gc.disable()
        try:
            starts, pos, broken = _walk(view, pos, end, size, options.batch_rows)
            batch = None
            if starts:
                batch = _fast_batch(data, view, starts, rng, options)
                if batch is None:  # something the fast path does not take: the model's decoder decides
                    batch = build_batch(_decode_all(view, starts, rng, size), export=rng.export,
                                        broker=rng.broker, options=options)
        finally:
            if gc_was_enabled:
                gc.enable()
        if batch is not None:
            yield batch
        if broken and pos < end:
            _check_end(view, pos, rng, size, truncated)  # the chain stopped early: a proper end, or raise
            return
    if truncated:
        raise _truncated(rng, size)


def _walk(view: memoryview, pos: int, end: int, size: int, max_rows: int) -> tuple[list[int], int, bool]:
    """Follow TOTALSIZE from ``pos`` over message records while they fit, for at most ``max_rows`` records
    or :data:`BATCH_BYTES`: the starts, where it stopped, and whether something other than ``end`` or those
    limits stopped it (a blank marker, zeros or damage: :func:`_check_end` tells which).

    This is only the chain; each record is validated afterwards (vectorised, or by the decoder)."""
    starts: list[int] = []
    append = starts.append
    unpack = SIZE_AND_MAGIC.unpack_from
    limit = size - END_FILE_MIN_BLANK_LENGTH
    stop = min(end, pos + BATCH_BYTES)
    for _ in range(max_rows):
        if pos >= stop:
            return starts, pos, False
        if pos > limit:
            return starts, pos, True
        total, magic = unpack(view, pos)
        if magic != MESSAGE_MAGIC_CODE or total < _MIN_SIZE or pos + total > size:
            return starts, pos, True
        append(pos)
        pos += total
    return starts, pos, False


def _check_end(view: memoryview, pos: int, rng: FileRange, size: int, truncated: bool) -> None:
    """The chain stopped at ``pos`` inside the range: a blank marker or zeros end it properly; anything else
    raises :class:`ExportError`, worded by the model's decoder."""
    base = rng.base_offset
    try:
        record = decode_record(view, pos, limit=size, check_crc=False, expected_offset=base + pos)
    except RecordFormatError as exc:
        if exc.is_end_of_data and not truncated:
            return
        if truncated and exc.reason in ("truncated record", RecordFormatError.END_OF_DATA):
            raise _truncated(rng, size) from None
        raise ExportError(f"{rng.path}: bad record at commit-log offset {base + pos} (file position {pos}): "
                          f"{exc.reason}", path=rng.path, offset=base + pos) from None
    if not isinstance(record, Blank):  # the walk declines only what the decoder rejects; keep it that way
        raise ExportError(f"{rng.path}: reader stopped at a valid record at commit-log offset {base + pos}",
                          path=rng.path, offset=base + pos)


def _decode_all(view: memoryview, starts: list[int], rng: FileRange, size: int) -> list[MessageRecord]:
    """The reference path: :func:`pocketmq.common.record.decode_record` on every start (errors name file and offset)."""
    records = []
    base = rng.base_offset
    for pos in starts:
        try:
            record = decode_record(view, pos, limit=size, check_crc=False, expected_offset=base + pos)
        except RecordFormatError as exc:
            raise ExportError(f"{rng.path}: bad record at commit-log offset {base + pos} (file position {pos}): "
                              f"{exc.reason}", path=rng.path, offset=base + pos) from None
        assert isinstance(record, MessageRecord)  # the walk only passes message magics
        records.append(record)
    return records


# ------------------------------------------------------------------------------------------- fast path


def _numpy_header_dtype() -> np.dtype[Any]:
    """The fixed part of a record with two IPv4 hosts as a numpy record type, derived from the decoder's own
    ``struct`` layout (``common.record.HEADER_STRUCTS[0]``) so that the byte layout is written down once."""
    codes = {"i": ">i4", "q": ">i8"}
    names = [*MessageRecord._fields[:14], "body_length"]
    fields, count = [], ""
    for char in HEADER_STRUCTS[0].format.lstrip("<>!=@"):
        if char.isdigit():
            count += char
            continue
        fields.append(f"V{count}" if char == "s" else codes[char])
        count = ""
    dtype = np.dtype(list(zip(names, fields, strict=True)))
    assert dtype.itemsize == HEADER_STRUCTS[0].size
    return dtype


_HEADER = _numpy_header_dtype()
_HEADER_SIZE = _HEADER.itemsize
_HEADER_SPAN = np.arange(_HEADER_SIZE, dtype=np.int64)
_MIN_SIZE = RECORD_OVERHEAD[0]
_HOST_V6 = MessageSysFlag.BORNHOST_V6 | MessageSysFlag.STOREHOST_V6
_TAIL_LENGTHS = 1 + PROPERTIES_LENGTH.size
"""After the body: the TOPICLENGTH byte and the PROPERTIESLENGTH short, at the least."""


def _native(column: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    return column.astype(column.dtype.newbyteorder("="))


def _gather(data: np.ndarray[Any, Any], starts: np.ndarray[Any, Any],
            lengths: np.ndarray[Any, Any]) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """Variable-length slices ``data[starts[i]:starts[i] + lengths[i]]`` laid end to end: (offsets, bytes).

    The byte positions are one cumulative sum: +1 inside a slice, a jump at each slice's first byte."""
    offsets = np.zeros(len(lengths) + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    total = int(offsets[-1])
    if total == 0:
        return offsets, np.zeros(0, np.uint8)
    used = lengths > 0
    first, begin = offsets[:-1][used], starts[used]
    steps = np.ones(total, np.int64)
    steps[0] = begin[0]
    # jump from the previous slice's last byte to this slice's first one
    steps[first[1:]] = begin[1:] - (begin[:-1] + lengths[used][:-1] - 1)
    return offsets, data[np.cumsum(steps)]


def _arrow_strings(offsets: np.ndarray[Any, Any], values: np.ndarray[Any, Any], binary: bool = False) -> pa.Array:
    typ = pa.binary() if binary else pa.string()
    array = pa.Array.from_buffers(typ, len(offsets) - 1, [None, pa.py_buffer(offsets.astype(np.int32)),
                                                           pa.py_buffer(values)])
    array.validate(full=True)  # UTF-8 as strictly as bytes.decode(): invalid text goes to the decoder
    return array


def _slices(values: np.ndarray[Any, Any], offsets: np.ndarray[Any, Any]) -> list[bytes]:
    raw = values.tobytes()
    bounds = offsets.tolist()
    return [raw[a:b] for a, b in itertools.pairwise(bounds)]


def _hosts(column: np.ndarray[Any, Any]) -> pa.Array:
    """8-byte host fields to ``ip:port`` strings, formatted once per distinct host."""
    encoded = pa.array(column.view(">u8").astype(np.uint64)).dictionary_encode()
    names = pa.array([format_host(int(v).to_bytes(8, "big")) for v in encoded.dictionary.to_pylist()], pa.string())
    return names.take(encoded.indices)


def _fast_batch(data: np.ndarray[Any, Any], view: memoryview, starts_list: list[int], rng: FileRange,
                options: ReadOptions) -> pa.RecordBatch | None:
    """The decoder's checks and fields for IPv4 records, vectorised; None when any record needs the decoder
    (IPv6 hosts, damage, text that is not UTF-8) — it then decodes the batch and words the error.

    The checks are :func:`pocketmq.common.record.decode_record`'s, in its order: magic (the walk), TOTALSIZE within the
    file (the walk), BODYLENGTH, TOPICLENGTH, PROPERTIESLENGTH adding up to TOTALSIZE, PHYSICALOFFSET equal
    to the record's position, UTF-8 topic and properties. The tests hold the two paths to the same output.
    """
    n = len(starts_list)
    starts = np.array(starts_list, dtype=np.int64)
    try:
        header = data[starts[:, None] + _HEADER_SPAN].view(_HEADER).reshape(n)
        sys_flag = _native(header["sys_flag"])
        if (sys_flag & _HOST_V6).any():
            return None
        ends = starts + header["total_size"].astype(np.int64)
        body_start = starts + _HEADER_SIZE
        body_length = header["body_length"].astype(np.int64)
        body_end = body_start + body_length
        if not ((body_length >= 0) & (body_end + _TAIL_LENGTHS <= ends)).all():
            return None
        topic_length = data[body_end].astype(np.int64)
        topic_end = body_end + 1 + topic_length
        if not ((topic_length > 0) & (topic_length <= MAX_TOPIC_LENGTH)
                & (topic_end + PROPERTIES_LENGTH.size <= ends)).all():
            return None
        props_length = ((data[topic_end].astype(np.int64) << 8) | data[topic_end + 1]).astype(np.int16)
        props_start = topic_end + PROPERTIES_LENGTH.size
        if not ((props_length >= 0) & (props_start + props_length == ends)).all():
            return None
        physical = header["physical_offset"].astype(np.int64)
        if not (physical == starts + rng.base_offset).all():
            return None
        topic = _arrow_strings(*_gather(data, body_end + 1, topic_length))
        props_offsets, props_bytes = _gather(data, props_start, props_length.astype(np.int64))
        _arrow_strings(props_offsets, props_bytes)  # the UTF-8 check
    except (IndexError, pa.ArrowInvalid):
        return None
    stored_crc = _native(header["body_crc"])
    crc = zlib.crc32
    crc_ok = np.array([crc(view[a:b]) for a, b in zip(body_start.tolist(), body_end.tolist(), strict=True)],
                      dtype=np.int64) & _CRC_MASK == stored_crc
    parsed = _parse_properties(props_bytes, props_offsets)
    if parsed is None:  # a repeated property name: parse_properties decides which value counts
        parsed = _properties_columns_python(pa.array([b.decode() for b in _slices(props_bytes, props_offsets)]))
    properties, tags, keys, uniq = parsed
    arrays = [
        pa.array([rng.export] * n, pa.string()),
        pa.array([rng.broker] * n, pa.string()),
        topic,
        pa.array(_native(header["queue_id"])),
        pa.array(_native(header["queue_offset"])),
        pa.array(physical),
        pa.array(_native(header["total_size"])),
        pa.array(sys_flag),
        pa.array(_native(header["flag"])),
        pa.array(_native(header["born_timestamp"])),
        pa.array(_native(header["store_timestamp"])),
        _hosts(header["born_host"]),
        _hosts(header["store_host"]),
        pa.array(_native(header["reconsume_times"])),
        pa.array(_native(header["prepared_transaction_offset"])),
        pa.array(stored_crc),
        pa.array(crc_ok),
        tags,
        keys,
        uniq,
        properties,
    ]
    if options.with_body:
        bodies = _arrow_strings(*_gather(data, body_start, body_length), binary=True)
        if options.decompress and (sys_flag & MessageSysFlag.COMPRESSED).any():
            bodies = pa.array(_bodies(bodies.to_pylist(), sys_flag.tolist()), pa.binary())
        arrays.append(bodies)
    return pa.RecordBatch.from_arrays(arrays, schema=arrow_schema(options.with_body))


# ------------------------------------------------------------------------------------------- columns


def build_batch(records: Sequence[MessageRecord], *, export: str, broker: str,
                options: ReadOptions = ReadOptions()) -> pa.RecordBatch:
    """Decoded records to one record batch of :func:`arrow_schema`."""
    n = len(records)
    (total, _magic, body_crc, queue_id, flag, queue_offset, physical, sys_flag, born_ts, born_host, store_ts,
     store_host, reconsume, prepared, body, topic, props) = zip(*records, strict=True)
    hosts = {h: format_host(h) for h in {*born_host, *store_host}}
    crc_ok = [zlib.crc32(b) & _CRC_MASK == c for b, c in zip(body, body_crc, strict=True)]
    properties, tags, keys, uniq = _properties_columns_python(pa.array(props, pa.string()))
    arrays = [
        pa.array([export] * n, pa.string()),
        pa.array([broker] * n, pa.string()),
        pa.array(topic, pa.string()),
        pa.array(queue_id, pa.int32()),
        pa.array(queue_offset, pa.int64()),
        pa.array(physical, pa.int64()),
        pa.array(total, pa.int32()),
        pa.array(sys_flag, pa.int32()),
        pa.array(flag, pa.int32()),
        pa.array(born_ts, pa.int64()),
        pa.array(store_ts, pa.int64()),
        pa.array([hosts[h] for h in born_host], pa.string()),
        pa.array([hosts[h] for h in store_host], pa.string()),
        pa.array(reconsume, pa.int32()),
        pa.array(prepared, pa.int64()),
        pa.array(body_crc, pa.int32()),
        pa.array(crc_ok, pa.bool_()),
        tags,
        keys,
        uniq,
        properties,
    ]
    if options.with_body:
        arrays.append(pa.array(_bodies(body, sys_flag) if options.decompress else body, pa.binary()))
    return pa.RecordBatch.from_arrays(arrays, schema=arrow_schema(options.with_body))


def _bodies(bodies: Sequence[bytes], sys_flags: Sequence[int]) -> list[bytes]:
    """Bodies with compressed ones inflated: SYSFLAG bit 0 with compression type (bits 8-10) 0 or 3 = zlib,
    what RocketMQ 4.x producers write. LZ4/ZSTD bodies (4.9.4+ types 1, 2) and bodies that do not inflate
    stay as stored."""
    out = []
    for body, flags in zip(bodies, sys_flags, strict=True):
        if MessageSysFlag.is_zlib_compressed(flags):
            with contextlib.suppress(zlib.error):
                body = zlib.decompress(body)
        out.append(body)
    return out


PropertyColumns = tuple[pa.Array, pa.Array, pa.Array, pa.Array]
_TAGS = MessageConst.PROPERTY_TAGS
_KEYS = MessageConst.PROPERTY_KEYS
_UNIQ_KEY = MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX
_LOOKUPS = (_TAGS, _KEYS, _UNIQ_KEY)
_NAME_VALUE = ord(NAME_VALUE_SEPARATOR)
_PROPERTY = ord(PROPERTY_SEPARATOR)


def properties_columns(props: pa.StringArray) -> PropertyColumns:
    """``(properties map, TAGS, KEYS list, UNIQ_KEY)`` from raw properties strings.

    Same meaning as :func:`pocketmq.common.message.parse_properties`, which is used as it is for a batch where a
    name repeats within one message (the last value wins there; a vectorised map would keep both).
    """
    offsets = np.frombuffer(props.buffers()[1], np.int32, len(props) + 1, props.offset * 4).astype(np.int64)
    data_buffer = props.buffers()[2]
    data = np.frombuffer(data_buffer, np.uint8) if data_buffer is not None else np.zeros(0, np.uint8)
    parsed = _parse_properties(data, offsets)
    return parsed if parsed is not None else _properties_columns_python(props)


def _parse_properties(data: np.ndarray[Any, Any], offsets: np.ndarray[Any, Any]) -> PropertyColumns | None:
    """Vectorised :func:`pocketmq.common.message.parse_properties` over properties laid end to end (``data`` bytes,
    ``offsets`` of n + 1 rows, valid UTF-8). None when a name repeats inside a message.

    Items are the stretches between ``\x02`` separators and row ends; an item is a pair when it holds a
    ``\x01`` after at least one byte (an empty name, or no ``\x01``, and the item is skipped). ``\x01`` and
    ``\x02`` are ASCII, so cutting valid UTF-8 at them leaves valid UTF-8.
    """
    n = len(offsets) - 1
    separators = np.flatnonzero(data == _PROPERTY)
    starts = np.sort(np.concatenate([offsets[:-1], separators + 1]))
    ends = np.sort(np.concatenate([separators, offsets[1:]]))
    name_value = np.flatnonzero(data == _NAME_VALUE)
    at = np.searchsorted(name_value, starts)
    split = name_value[np.minimum(at, max(len(name_value) - 1, 0))] if len(name_value) else ends
    pair = (at < len(name_value)) & (split < ends) & (split > starts)
    starts, ends, split = starts[pair], ends[pair], split[pair]
    parent = np.searchsorted(offsets, starts, side="right") - 1
    names = _strings(data, starts, split - starts)
    values = _strings(data, split + 1, ends - split - 1)
    encoded = names.dictionary_encode()
    codes = np.asarray(encoded.indices, dtype=np.int64)
    if len(codes) and _repeats(parent, codes, len(encoded.dictionary)):
        return None
    map_offsets = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(parent, minlength=n), out=map_offsets[1:])
    properties = pa.MapArray.from_arrays(pa.array(map_offsets.astype(np.int32)), names, values)
    dictionary = encoded.dictionary.to_pylist()
    looked_up = []
    for name in _LOOKUPS:
        where = np.full(n, -1, np.int64)
        if name in dictionary:
            items = np.flatnonzero(codes == dictionary.index(name))
            where[parent[items]] = items
        looked_up.append(values.take(pa.array(where, mask=where < 0)))
    tags, keys_text, uniq = looked_up
    return properties, tags, split_keys(keys_text), uniq


def _strings(data: np.ndarray[Any, Any], starts: np.ndarray[Any, Any], lengths: np.ndarray[Any, Any]) -> pa.Array:
    offsets, values = _gather(data, starts, lengths)
    return pa.Array.from_buffers(pa.string(), len(lengths), [None, pa.py_buffer(offsets.astype(np.int32)),
                                                            pa.py_buffer(values)])


def _repeats(parent: np.ndarray[Any, Any], codes: np.ndarray[Any, Any], distinct: int) -> bool:
    """Does any message carry a property name twice? (``parent`` is sorted: a message's items are adjacent.)"""
    if distinct <= 62:
        bits = np.left_shift(np.int64(1), codes)
        firsts = np.flatnonzero(np.diff(parent, prepend=-1))
        return bool((np.add.reduceat(bits, firsts) != np.bitwise_or.reduceat(bits, firsts)).any())
    keys = np.sort(parent * distinct + codes)
    return bool((keys[1:] == keys[:-1]).any())


def split_keys(keys_text: pa.Array) -> pa.Array:
    """KEYS split on whitespace as ``str.split()`` does; null when there is no key."""
    trimmed = pc.utf8_trim_whitespace(keys_text)
    trimmed = pc.if_else(pc.equal(trimmed, ""), pa.scalar(None, pa.string()), trimmed)
    return pc.utf8_split_whitespace(trimmed)


def _properties_columns_python(props: pa.StringArray) -> PropertyColumns:
    parsed = [parse_properties(p) for p in props.to_pylist()]
    properties = pa.array([list(d.items()) for d in parsed], pa.map_(pa.string(), pa.string()))
    tags = pa.array([d.get(_TAGS) for d in parsed], pa.string())
    keys = split_keys(pa.array([d.get(_KEYS) for d in parsed], pa.string()))
    uniq = pa.array([d.get(_UNIQ_KEY) for d in parsed], pa.string())
    return properties, tags, keys, uniq
