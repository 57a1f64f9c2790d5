"""The body of SEND_BATCH_MESSAGE (RocketMQ's ``MessageDecoder.encodeMessages``): the producer encodes it,
the broker splits it and stores each entry as a full record (:mod:`pocketmq.common.record`).

One entry per message, all big-endian::

    offset  size  field
    0       4     TOTALSIZE   whole entry, this field included (= 22 + body + properties)
    4       4     MAGICCODE   0 (the broker writes the real one)
    8       4     BODYCRC     0 (the broker computes it)
    12      4     FLAG        the message's user flag
    16      4     BODYLENGTH n
    20      n     BODY        never compressed in a batch
    20+n    2     PROPERTIESLENGTH p (<= 32767)
    22+n    p     PROPERTIES  UTF-8, including the entry's own UNIQ_KEY

The broker stores each entry under the request header's topic, queue and sysFlag, and appends the header's
properties to each entry's. The commit log turns a body into records in one pass without splitting it into
entries first (:func:`pocketmq.common.record_encoder.encode_batch_records_into`, compiled); :func:`decode_batch_body`
is the reference reading.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from pocketmq.common.errors import RecordFormatError
from pocketmq.common.record import PROPERTIES_LENGTH, Buffer

BATCH_ENTRY_HEADER = struct.Struct(">iiiii")
"""TOTALSIZE, MAGICCODE, BODYCRC, FLAG, BODYLENGTH of one batch entry."""
BATCH_ENTRY_OVERHEAD = BATCH_ENTRY_HEADER.size + PROPERTIES_LENGTH.size


class BatchEntry(NamedTuple):
    """One message of a batch body: its flag, body and own properties string."""

    flag: int
    body: bytes
    properties: str


def append_batch_entry(parts: list[Buffer], body: Buffer, flag: int, props: bytes) -> int:
    """Append one entry to ``parts`` (joined into the body later, so bodies are not copied twice); returns
    the entry's size. ``props`` must be at most 32767 bytes (the producer has checked them)."""
    size = BATCH_ENTRY_OVERHEAD + len(body) + len(props)
    parts.append(BATCH_ENTRY_HEADER.pack(size, 0, 0, flag, len(body)))
    parts.append(body)
    parts.append(PROPERTIES_LENGTH.pack(len(props)))
    parts.append(props)
    return size


def encode_batch_body(entries: list[BatchEntry]) -> bytes:
    """A whole body from entries (tests, tools, benchmarks); the inverse of :func:`decode_batch_body`."""
    parts: list[Buffer] = []
    for entry in entries:
        append_batch_entry(parts, entry.body, entry.flag, entry.properties.encode())
    return b"".join(parts)


def decode_batch_body(data: Buffer) -> list[BatchEntry]:
    """Split a body into entries; ``RecordFormatError`` if the sizes do not add up."""
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
