"""A batch body written as commit-log records (:func:`common.record_encoder.encode_batch_records_into`): the typed
loop the compiled build runs and the ``struct`` loop the plain source runs write the very same bytes, units and
errors, and each record equals the reference encoder's. Both loops run here in whichever build is active (the
compiled build runs the typed one compiled, the pure build runs it as Python)."""

from __future__ import annotations

import struct
from collections.abc import Callable

import pytest

from pocketmq.common import record_encoder
from pocketmq.common.batch import BatchEntry, encode_batch_body
from pocketmq.common.errors import RecordFormatError
from pocketmq.common.message import java_string_hash, tags_code_of_bytes
from pocketmq.common.record import HEADER_STRUCTS, MESSAGE_MAGIC_CODE, MessageRecord, decode_record, message_id
from pocketmq.common.record_encoder import (
    count_batch_entries,
    encode_batch_records_into,
    encode_record,
    joined_message_ids,
    topic_field,
)

Writer = Callable[..., tuple[int, list[tuple[int, int, int]]]]
WRITERS: dict[str, Writer] = {
    "typed": record_encoder._batch_records_typed,
    "struct": record_encoder._batch_records_struct,
}
V4_BORN = b"\x7f\x00\x00\x01\x00\x00\x30\x39"
V4_STORE = b"\x7f\x00\x00\x01\x00\x00\x2a\x9f"
V6_BORN = bytes(range(16)) + b"\x00\x00\x01\x02"


def tag_code_of(props: bytes, value: bytes, plain: bool) -> int:
    """What the commit log answers: the cached plain case, else the full parse."""
    return java_string_hash(value.decode()) if plain else tags_code_of_bytes(props)


ENTRIES = [
    BatchEntry(7, b"first body", "TAGS\x01TagA\x02KEYS\x01k1 k2\x02UNIQ_KEY\x01u1"),
    BatchEntry(0, b"", "TAGS\x01TagA\x02UNIQ_KEY\x01u2"),  # the same tag: its code is reused
    BatchEntry(-1, b"x" * 3000, "TAGS\x01TagB"),
    BatchEntry(2, b"\x00\x01\x02", ""),  # no properties at all
    BatchEntry(3, b"trailing", "TAGS\x01TagB\x02"),  # a trailing separator: no second one before the extra
    BatchEntry(4, b"not a key", "XTAGS\x01TagB\x02K\x01v"),  # TAGS inside a key: the full parse decides
    BatchEntry(5, b"two tags", "TAGS\x01first\x02TAGS\x01\u00e9last"),  # the last one wins
    BatchEntry(6, b"empty tag", "TAGS\x01"),
    BatchEntry(0x7FFFFFFF, b"big flag", "TAGS\x01-neg-hash-\x02a\x01b"),
]


def write(writer: Writer, entries: list[BatchEntry] | bytes, *, extra: bytes = b"CLUSTER\x01c1", variant: int = 0,
          born: bytes = V4_BORN, queue_offset: int = 41, w: int = 16) -> tuple[bytes, int, list[tuple[int, int, int]]]:
    body = entries if isinstance(entries, bytes) else encode_batch_body(entries)
    dst = bytearray(w + len(body) * 2 + 4096)
    end, units = writer(memoryview(dst), w, 1 << 40, HEADER_STRUCTS[variant], body, topic_field("Topic\u00e9"),
                        extra, 0x10 * variant | 0x2000, 3, queue_offset, 1_700_000_000_123, born, 1_700_000_000_456,
                        V4_STORE, tag_code_of)
    return bytes(dst), end, units


@pytest.mark.parametrize("extra", [b"CLUSTER\x01c1", b""])
@pytest.mark.parametrize(("variant", "born"), [(0, V4_BORN), (1, V6_BORN)])
def test_both_loops_write_the_reference_records(extra: bytes, variant: int, born: bytes) -> None:
    results = {name: write(writer, ENTRIES, extra=extra, variant=variant, born=born)
               for name, writer in WRITERS.items()}
    assert results["typed"] == results["struct"]
    data, end, units = results["typed"]
    assert [u[0] for u in units] == [(1 << 40) + pos for pos in _positions(units, 16)]
    pos = 16
    for i, (entry, (phys, size, tags)) in enumerate(zip(ENTRIES, units, strict=True)):
        props = entry.properties
        if extra:
            props = f"{props}{'' if not props or props.endswith(chr(2)) else chr(2)}{extra.decode()}"
        reference = encode_record(
            topic="Topic\u00e9", body=entry.body, properties=props, queue_id=3, flag=entry.flag,
            queue_offset=41 + i, physical_offset=phys, sys_flag=0x2000, born_timestamp=1_700_000_000_123,
            born_host=born, store_timestamp=1_700_000_000_456, store_host=V4_STORE,
        )
        assert data[pos:pos + size] == reference, i
        record = decode_record(reference)
        assert isinstance(record, MessageRecord)
        assert tags == tags_code_of_bytes(entry.properties.encode()), i
        pos += size
    assert pos == end
    assert not any(data[end:])


def _positions(units: list[tuple[int, int, int]], start: int) -> list[int]:
    out = []
    for _phys, size, _tags in units:
        out.append(start)
        start += size
    return out


def test_the_header_fields_that_vary_per_record() -> None:
    entry = BatchEntry(0x01020304, b"body", "")
    data, _end, units = write(WRITERS["typed"], [entry, entry], extra=b"", queue_offset=0x0102030405060708)
    header = HEADER_STRUCTS[0]
    first = header.unpack_from(data, 16)
    second = header.unpack_from(data, 16 + units[0][1])
    assert first[:2] == (units[0][1], MESSAGE_MAGIC_CODE)
    assert (first[4], first[5], first[6]) == (0x01020304, 0x0102030405060708, 1 << 40 | 16)
    assert (second[5], second[6]) == (0x0102030405060709, units[1][0])
    assert first[-1] == 4


BAD_BODIES = {
    "truncated": encode_batch_body(ENTRIES)[:-1],
    "short tail": encode_batch_body(ENTRIES) + b"\x00" * 5,
    "negative size": struct.pack(">iiiii", -30, 0, 0, 0, 4) + b"body" + struct.pack(">h", 0),
    "negative body": struct.pack(">iiiii", 26, 0, 0, 0, -4) + b"body" + struct.pack(">h", 0),
    "body past entry": struct.pack(">iiiii", 26, 0, 0, 0, 5) + b"body" + struct.pack(">h", 0),
    "props past entry": struct.pack(">iiiii", 26, 0, 0, 0, 4) + b"body" + struct.pack(">h", 1),
    "negative props": struct.pack(">iiiii", 26, 0, 0, 0, 4) + b"body" + struct.pack(">h", -1),
    "zero size": bytes(22),
}


@pytest.mark.parametrize("name", sorted(BAD_BODIES))
def test_both_loops_refuse_the_same_damage(name: str) -> None:
    errors = {}
    for writer_name, writer in WRITERS.items():
        with pytest.raises(RecordFormatError) as info:
            write(writer, BAD_BODIES[name])
        errors[writer_name] = str(info.value)
    assert errors["typed"] == errors["struct"]


def test_properties_over_the_limit_with_the_extra() -> None:
    body = encode_batch_body([BatchEntry(0, b"b", "K\x01" + "v" * 32_760)])
    for writer in WRITERS.values():
        with pytest.raises(RecordFormatError, match="properties too long"):
            write(writer, body, extra=b"CLUSTER\x01c1")
        assert write(writer, body, extra=b"")[1] > 0


def test_typed_loop_never_writes_past_the_buffer() -> None:
    body = encode_batch_body(ENTRIES)
    dst = bytearray(100)
    with pytest.raises(RecordFormatError, match="overrun the buffer"):
        record_encoder._batch_records_typed(memoryview(dst), 0, 0, HEADER_STRUCTS[0], body, b"\x01T", b"", 0, 0, 0,
                                            0, V4_BORN, 0, V4_STORE, tag_code_of)


def test_the_active_loop_is_the_one_of_the_build() -> None:
    body = encode_batch_body(ENTRIES)
    dst = bytearray(len(body) * 2 + 4096)
    end, units = encode_batch_records_into(memoryview(dst), 0, 0, HEADER_STRUCTS[0], body, b"\x01T", b"", 0, 0, 0, 0,
                                           V4_BORN, 0, V4_STORE, tag_code_of)
    assert (end, len(units)) == (sum(u[1] for u in units), len(ENTRIES))
    expected = record_encoder._batch_records_typed if record_encoder.COMPILED else record_encoder._batch_records_struct
    assert record_encoder._BATCH_RECORDS is expected


def test_count_entries() -> None:
    body = encode_batch_body(ENTRIES)
    assert count_batch_entries(body) == len(ENTRIES)
    assert count_batch_entries(b"") == 0
    for bad in (body[:-1], body + b"\x00" * 22, bytes(22), struct.pack(">i", -1) + bytes(18)):
        with pytest.raises(RecordFormatError):
            count_batch_entries(bad)


@pytest.mark.parametrize("host", [V4_STORE, V6_BORN])
def test_joined_message_ids(host: bytes) -> None:
    offsets = [0, 1, 0xABCDEF, (1 << 63) - 1, 123_456_789_012]
    expected = ",".join(message_id(host, off) for off in offsets)
    assert joined_message_ids(host, offsets) == expected
    prefix = message_id(host, 0)[:-16]
    assert record_encoder._joined_ids_typed(prefix, offsets) == expected
    assert record_encoder._joined_ids_format(prefix, offsets) == expected
    assert joined_message_ids(host, []) == "" and joined_message_ids(host, [5]) == message_id(host, 5)
