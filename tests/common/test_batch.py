"""The SEND_BATCH_MESSAGE body (reference §4.6): byte layout, round trip, damage."""

from __future__ import annotations

import struct

import pytest

from pocketmq.common.batch import (
    BATCH_ENTRY_OVERHEAD,
    BatchEntry,
    append_batch_entry,
    decode_batch_body,
    encode_batch_body,
)
from pocketmq.common.errors import RecordFormatError


def corrupt(data: bytes, offset: int, value: bytes) -> bytes:
    return data[:offset] + value + data[offset + len(value):]


def test_batch_body_round_trip_and_layout() -> None:
    entries = [BatchEntry(1, b"one", "TAGS\x01a"), BatchEntry(0, b"", ""), BatchEntry(5, b"x" * 300, "K\x01v\x02")]
    body = encode_batch_body(entries)
    first = struct.pack(">iiiii", 22 + 3 + 6, 0, 0, 1, 3) + b"one" + struct.pack(">h", 6) + b"TAGS\x01a"
    assert body.startswith(first)
    assert decode_batch_body(body) == entries


def test_one_entry_byte_literal() -> None:
    parts: list[bytes | bytearray | memoryview] = []
    size = append_batch_entry(parts, b"body", -1, b"K\x01v")
    assert size == BATCH_ENTRY_OVERHEAD + 4 + 3 == 29
    assert b"".join(parts) == bytes.fromhex(
        "0000001D"  # TOTALSIZE 29
        "00000000"  # MAGICCODE (the broker writes the real one)
        "00000000"  # BODYCRC (the broker computes it)
        "FFFFFFFF"  # FLAG -1
        "00000004" "626F6479"  # BODY "body"
        "0003" "4B0176"  # PROPERTIES "K\x01v"
    )


@pytest.mark.parametrize("damage", ["truncate", "size", "props", "utf8"])
def test_bad_batch_body_rejected(damage: str) -> None:
    body = encode_batch_body([BatchEntry(0, b"one", "a\x01b"), BatchEntry(0, b"two", "")])
    if damage == "truncate":
        body = body[:-3]
    elif damage == "size":
        body = corrupt(body, 0, struct.pack(">i", 5))
    elif damage == "props":
        body = corrupt(body, 20 + 3, struct.pack(">h", 40))
    else:
        body = corrupt(body, 20 + 3 + 2, b"\xff")
    with pytest.raises(RecordFormatError):
        decode_batch_body(body)
