"""The reader's core without Spark: commit-log ranges to Arrow batches.

* Files packed by hand from the reference's table (IPv4 and IPv6 hosts, a blank marker, an old client's
  trailing separator, a compressed body) decode to exactly the expected rows.
* The vectorised path gives the same batches as the store's decoder (``decode_record`` + ``parse_properties``)
  on generated records, and stops with the decoder's own reason, file and offset on damage.
"""

from __future__ import annotations

import itertools
import tempfile
import zlib
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pocketmq.common.errors import RecordFormatError
from pocketmq.common.message import parse_properties
from pocketmq.common.record import MessageRecord, decode_record, encode_host
from pocketmq.common.record_encoder import encode_record
from pocketmq.spark_jobs.manifest import ExportError
from pocketmq.spark_jobs.records import (
    FileRange,
    ReadOptions,
    _decode_all,
    _fast_batch,
    _walk,
    build_batch,
    properties_columns,
    scan_range,
)
from tests.spark.support import HandRecord, patch, write_hand_commit_log

FILE = 4096


def whole_file(path: Path, base: int = 0, export: str = "e", broker: str = "b") -> FileRange:
    size = path.stat().st_size
    return FileRange(export, broker, str(path), base, 0, size, size)


def rows(path: Path, base: int = 0, **options: object) -> list[dict[str, object]]:
    batches = list(scan_range(whole_file(path, base), ReadOptions(**options)))  # type: ignore[arg-type]
    return [row for b in batches for row in b.to_pylist()]


@pytest.fixture
def hand_built(tmp_path: Path) -> tuple[Path, list[HandRecord]]:
    """Two 4 KiB files: three records and a blank marker, then two records and zeros."""
    text = b"hello compressed world " * 40
    records = [
        HandRecord("TopicA", b"plain", "TAGS\x01tagA\x02KEYS\x01k1 k2\x02UNIQ_KEY\x01AB01", queue_id=1, queue_offset=7,
                   flag=3, born_timestamp=1_000, store_timestamp=1_004, born_host=("192.168.1.2", 40001),
                   store_host=("10.0.0.1", 10911)),
        HandRecord("TopicA", b"v6 born", "TAGS\x01tagB", queue_id=2, queue_offset=8, born_timestamp=2_000,
                   store_timestamp=2_001, born_host=("2001:db8::1", 50000), store_host=("10.0.0.1", 10911),
                   reconsume_times=2),
        HandRecord("TopicB", b"v6 store", "", born_timestamp=3_000, store_timestamp=3_009,
                   born_host=("10.1.1.1", 1), store_host=("fe80::2", 10912), prepared_transaction_offset=99),
        HandRecord("TopicB", zlib.compress(text), "KEYS\x01only\x02", sys_flag=0x1, queue_offset=1,
                   born_timestamp=4_000, store_timestamp=4_000, born_host=("::1", 7), store_host=("::2", 8)),
        HandRecord("TopicC", b"bad crc", "TAGS\x01x", body_crc=12345, born_timestamp=5_000, store_timestamp=5_002),
    ]
    write_hand_commit_log(tmp_path / "commitlog", [records[:3], records[3:]], FILE)
    return tmp_path / "commitlog", records


def test_hand_built_rocketmq_files_decode_field_by_field(hand_built: tuple[Path, list[HandRecord]]) -> None:
    commitlog, records = hand_built
    first = rows(commitlog / f"{0:020d}")
    second = rows(commitlog / f"{FILE:020d}", FILE, with_body=True, decompress=True)
    assert [r["physical_offset"] for r in first + second] == [r.physical_offset for r in records]
    a, b, c = first
    assert a == {
        "export": "e", "broker": "b", "topic": "TopicA", "queue_id": 1, "queue_offset": 7, "physical_offset": 0,
        "size": 91 + 5 + 6 + len("TAGS\x01tagA\x02KEYS\x01k1 k2\x02UNIQ_KEY\x01AB01"), "sys_flag": 0, "flag": 3,
        "born_timestamp": 1_000, "store_timestamp": 1_004, "born_host": "192.168.1.2:40001",
        "store_host": "10.0.0.1:10911", "reconsume_times": 0, "prepared_transaction_offset": 0,
        "body_crc": zlib.crc32(b"plain") & 0x7FFFFFFF, "body_crc_ok": True, "tags": "tagA", "keys": ["k1", "k2"],
        "uniq_key": "AB01", "properties": [("TAGS", "tagA"), ("KEYS", "k1 k2"), ("UNIQ_KEY", "AB01")],
    }
    assert (b["born_host"], b["store_host"], b["sys_flag"], b["reconsume_times"]) == (
        "[2001:db8::1]:50000", "10.0.0.1:10911", 0x10, 2)
    assert b["size"] == 103 + 7 + 6 + len("TAGS\x01tagB")
    assert (c["born_host"], c["store_host"], c["sys_flag"], c["properties"], c["tags"], c["keys"]) == (
        "10.1.1.1:1", "[fe80::2]:10912", 0x20, [], None, None)
    assert c["prepared_transaction_offset"] == 99
    d, e = second
    assert (d["born_host"], d["store_host"], d["sys_flag"]) == ("[::1]:7", "[::2]:8", 0x31)
    assert d["size"] == 115 + len(zlib.compress(b"hello compressed world " * 40)) + 6 + len("KEYS\x01only\x02")
    assert d["body"] == b"hello compressed world " * 40  # inflated
    assert d["properties"] == [("KEYS", "only")] and d["keys"] == ["only"]  # trailing \x02 of old clients
    assert (e["body_crc_ok"], e["body_crc"], e["body"]) == (False, 12345, b"bad crc")  # a row, not an error


def test_rows_match_the_store_decoder(hand_built: tuple[Path, list[HandRecord]]) -> None:
    commitlog, _ = hand_built
    path = commitlog / f"{FILE:020d}"
    data = path.read_bytes()
    decoded = []
    pos = 0
    while pos < len(data) and any(data[pos:pos + 8]):
        record = decode_record(data, pos, check_crc=False, expected_offset=FILE + pos)
        assert isinstance(record, MessageRecord)
        decoded.append(record)
        pos += record.total_size
    for row, record in zip(rows(path, FILE, with_body=True), decoded, strict=True):
        assert row["body"] == record.body and row["topic"] == record.topic
        assert row["born_host"] == record.born_host_address and row["store_host"] == record.store_host_address
        assert dict(row["properties"]) == record.properties_map  # type: ignore[call-overload]
        assert row["tags"] == record.tags and (row["keys"] or []) == record.keys


# ------------------------------------------------------------------------------------------- equivalence

names = st.sampled_from(["TAGS", "KEYS", "UNIQ_KEY", "A", "é", ""])
values = st.text(alphabet=st.sampled_from(["a", " ", "\x01", "\x02", "ü", "k"]), max_size=6)
properties = st.lists(st.tuples(names, values), max_size=5).map(
    lambda items: "\x02".join(f"{k}\x01{v}" for k, v in items)) | st.text(
    alphabet=st.sampled_from(["\x01", "\x02", "T", "A", "G", "S", "é"]), max_size=12)


@dataclass(frozen=True)
class Spec:
    """What :func:`write_records` writes for one record."""

    topic: str
    body: bytes
    properties: str
    queue_id: int = 0
    born_host: bytes = encode_host("10.0.0.1", 1)
    store_host: bytes = encode_host("10.0.0.2", 3)
    compressed: bool = False


records = st.builds(
    Spec,
    topic=st.text(alphabet=st.sampled_from(["T", "o", "p", "ï", "%"]), min_size=1, max_size=8),
    body=st.binary(max_size=40),
    properties=properties,
    queue_id=st.integers(0, 7),
    born_host=st.sampled_from([encode_host("10.0.0.1", 1), encode_host("::1", 2)]),
    store_host=st.sampled_from([encode_host("10.0.0.2", 3), encode_host("fe80::1", 4)]),
    compressed=st.booleans(),
)


def write_records(path: Path, specs: list[Spec], base: int = 0) -> int:
    data = bytearray()
    for i, spec in enumerate(specs):
        body = zlib.compress(spec.body) if spec.compressed else spec.body
        data += encode_record(topic=spec.topic, body=body, properties=spec.properties, queue_id=spec.queue_id,
                              queue_offset=i, physical_offset=base + len(data), sys_flag=1 if spec.compressed else 0,
                              born_timestamp=i, store_timestamp=i + 5, born_host=spec.born_host,
                              store_host=spec.store_host)
    path.write_bytes(bytes(data) + bytes(64))
    return len(data)


def reference(path: Path, end: int, options: ReadOptions) -> pa.Table:
    """The store's decoder on every record, then plain Python columns (parse_properties, format_host)."""
    view = memoryview(path.read_bytes())
    starts, pos = [], 0
    while pos < end:
        record = decode_record(view, pos, check_crc=False)
        assert isinstance(record, MessageRecord)
        starts.append(pos)
        pos += record.total_size
    rng = FileRange("e", "b", str(path), 0, 0, end, end)
    return pa.Table.from_batches([build_batch(_decode_all(view, starts, rng, end), export="e", broker="b",
                                              options=options)])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(records, min_size=1, max_size=30), st.integers(1, 9), st.booleans())
def test_fast_path_equals_the_store_decoder(specs: list[Spec], batch_rows: int, body: bool) -> None:
    options = ReadOptions(with_body=body, decompress=body, batch_rows=batch_rows)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"{0:020d}"
        end = write_records(path, specs)
        fast = pa.Table.from_batches(list(scan_range(FileRange("e", "b", str(path), 0, 0, end + 64, end + 64),
                                                     options)))
        assert fast.equals(reference(path, end, options))


def test_the_vectorised_path_takes_ipv4_batches(tmp_path: Path) -> None:
    """The equivalence above is only worth something if the fast path runs: it must not give up on the
    common case (IPv4 hosts, distinct property names)."""
    import numpy as np

    specs = [Spec("Topic", bytes(range(i % 50)), f"TAGS\x01t{i % 3}\x02KEYS\x01a b\x02UNIQ_KEY\x01{i}", i % 4,
                  compressed=i % 5 == 0) for i in range(100)]
    path = tmp_path / f"{0:020d}"
    end = write_records(path, specs)
    view = memoryview(path.read_bytes())
    rng = FileRange("e", "b", str(path), 0, 0, end, end)
    starts = [r.physical_offset for r in _decode_all(view, _walk(view, 0, end, end, 1000)[0], rng, end)]
    options = ReadOptions(with_body=True, decompress=True)
    batch = _fast_batch(np.frombuffer(view, np.uint8), view, starts, rng, options)
    assert batch is not None
    assert pa.Table.from_batches([batch]).equals(reference(path, end, options))


@settings(max_examples=100, deadline=None)
@given(st.lists(properties, min_size=1, max_size=10))
def test_vectorised_properties_equal_parse_properties(texts: list[str]) -> None:
    properties_map, tags, keys, uniq = properties_columns(pa.array(texts, pa.string()))
    for text, m, t, k, u in zip(texts, properties_map.to_pylist(), tags.to_pylist(), keys.to_pylist(),
                                uniq.to_pylist(), strict=True):
        expected = parse_properties(text)
        assert dict(m) == expected and len(m) == len(expected)
        assert t == expected.get("TAGS") and u == expected.get("UNIQ_KEY")
        assert (k or []) == expected.get("KEYS", "").split()


def test_ranges_split_at_record_boundaries_cover_every_record_once(tmp_path: Path) -> None:
    specs = [Spec("T", bytes(20 + i % 7), f"UNIQ_KEY\x01{i}") for i in range(200)]
    path = tmp_path / f"{0:020d}"
    end = write_records(path, specs)
    bounds = [0]
    pos = 0
    view = path.read_bytes()
    while pos < end:
        record = decode_record(view, pos)
        assert isinstance(record, MessageRecord)
        pos += record.total_size
        if len(bounds) < 8 and pos - bounds[-1] > end // 8:
            bounds.append(pos)
    bounds.append(end)
    seen = []
    for start, stop in itertools.pairwise(bounds):
        rng = FileRange("e", "b", str(path), 0, start, stop, end)
        seen += [r["uniq_key"] for b in scan_range(rng, ReadOptions(batch_rows=16)) for r in b.to_pylist()]
    assert seen == [str(i) for i in range(200)]


# ------------------------------------------------------------------------------------------- damage


@pytest.mark.parametrize(("offset", "data", "reason"), [
    (4, b"\x00\x00\x00\x01", "bad magic code"),
    (0, b"\x00\x00\x00\x10", "bad total size"),
    (28, b"\x00\x00\x00\x00\x00\x00\x00\x05", "physical offset mismatch"),
    (84, b"\x00\x00\xff\x00", "bad body length"),
    (-1, b"\xff", "properties is not UTF-8"),
])
def test_damage_stops_with_the_decoders_reason_file_and_offset(tmp_path: Path, offset: int, data: bytes,
                                                               reason: str) -> None:
    specs = [Spec("T", b"x" * 30, "TAGS\x01a") for _ in range(20)]
    base = 3 * FILE
    path = tmp_path / f"{base:020d}"
    write_records(path, specs, base)
    victim_pos = 12 * (91 + 30 + 1 + len("TAGS\x01a"))
    victim = decode_record(path.read_bytes(), victim_pos)
    assert isinstance(victim, MessageRecord)
    where = victim_pos + (offset if offset >= 0 else victim.total_size + offset)
    patch(path, where, data)
    with pytest.raises(RecordFormatError) as decoder:
        decode_record(path.read_bytes(), victim_pos, check_crc=False, expected_offset=base + victim_pos)
    assert decoder.value.reason == reason
    with pytest.raises(ExportError) as caught:
        rows(path, base, batch_rows=5)
    assert caught.value.path == str(path) and caught.value.offset == base + victim_pos
    assert f"commit-log offset {base + victim_pos}" in str(caught.value) and reason in str(caught.value)


def test_a_file_shorter_than_its_range_is_reported_as_truncated(tmp_path: Path) -> None:
    specs = [Spec("T", b"y" * 50, "") for _ in range(10)]
    path = tmp_path / f"{0:020d}"
    end = write_records(path, specs)
    with open(path, "r+b") as f:
        f.truncate(end // 2)
    with pytest.raises(ExportError, match=f"truncated at commit-log offset {end // 2}") as caught:
        list(scan_range(FileRange("e", "b", str(path), 0, 0, end, end)))
    assert caught.value.offset == end // 2
