"""A small commit-log span and index file for checking :mod:`pocketmq.store.dispatch_kernel` byte for byte: records
whose properties cover every case the walk meets (UNIQ_KEY and KEYS, repeated items, empty keys and runs of
spaces, non-ASCII keys and topics, IPv6 hosts, rolled-back transaction halves, more keys than a record may
index), written into a tiny index file (few slots: long chains and collisions). Used by
``tests/index/test_kernel.py`` and ``tests/test_compiled.py`` (the compiled and the plain build must write the
same bytes).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable

from pocketmq.common.record_encoder import encode_record
from pocketmq.common.sysflag import MessageSysFlag
from pocketmq.store.dispatch_kernel import Walk, index_span
from pocketmq.store.index.file import IndexFile, file_size
from pocketmq.store.mapped_file import MappedFile

SLOTS = 7
ENTRIES = 64
MOST = 5
_PROPERTIES = (
    "UNIQ_KEY\x01AC1100010001\x02KEYS\x01k1 k2",
    "KEYS\x01 a  b \x02TAGS\x01t",
    "TAGS\x01x\x02UNIQ_KEY\x01first\x02UNIQ_KEY\x01second",
    "UNIQ_KEY\x01\x02KEYS\x01",
    "KEYS\x01caf\u00e9 \U0001F600 plain",
    "KEYS\x01k1 k2 k3 k4 k5 k6 k7",
    "XKEYS\x01no\x02X\x01KEYS\x01no",
    "",
    "KEYS\x01only",
)


def records() -> bytes:
    """The span: one record per case, under an ASCII and a non-ASCII topic, and a rolled-back half."""
    out = bytearray()
    stamp = 1_700_000_000_000
    for topic in ("TopicA", "T\u00f3pico"):
        for properties in _PROPERTIES:
            out += encode_record(topic=topic, body=b"x", properties=properties, physical_offset=len(out),
                                 store_timestamp=stamp, born_timestamp=stamp)
            stamp += 1500
    out += encode_record(topic="TopicA", body=b"r", properties="KEYS\x01rolled",
                         sys_flag=MessageSysFlag.TRANSACTION_ROLLBACK_TYPE, physical_offset=len(out))
    for born, stored in ((bytes(20), bytes(8)), (bytes(8), bytes(20)), (bytes(20), bytes(20))):  # IPv6 hosts
        out += encode_record(topic="TopicA", body=b"6", properties="KEYS\x01v6", physical_offset=len(out),
                             born_host=born, store_host=stored, store_timestamp=stamp)
        stamp += 1000
    return bytes(out)


def index_digest(directory: str, span: Callable[..., None] = index_span) -> str:
    """SHA-256 of the index file that ``span`` writes for :func:`records` (in ``directory``, removed after)."""
    data = records()
    path = os.path.join(directory, "20240101000000000")
    size = file_size(SLOTS, ENTRIES)
    mapped = MappedFile.create(path, size)
    try:
        mapped.reserve(0, size, warm=False)
        index = IndexFile(mapped, SLOTS, ENTRIES)
        walk = Walk(-1, index.room(ENTRIES), 1000)
        view = memoryview(bytearray(data))
        span(walk, view, len(data), len(data), 0, index, MOST)
        index.write_header()
        return hashlib.sha256(bytes(mapped.view)).hexdigest() + f" {walk.pos} {walk.last} {walk.done} {walk.touched}"
    finally:
        mapped.destroy()
