"""The index walk's kernel (:mod:`pocketmq.store.dispatch_kernel`): the walk of the running build (typed when compiled)
writes the same index bytes and stops at the same place as the plain walk, key by key."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from pocketmq.common.errors import RecordFormatError
from pocketmq.common.record import BLANK_MAGIC_CODE, SIZE_AND_MAGIC, locate_record
from pocketmq.common.record_encoder import encode_record
from pocketmq.store import dispatch_kernel as kernel
from pocketmq.store.dispatch_kernel import Walk, index_span, key_hashes, topic_seed
from pocketmq.store.index.file import IndexFile, file_size
from pocketmq.store.mapped_file import MappedFile
from tests.index.kernel_sample import SLOTS, index_digest, records


@contextmanager
def _sample_index(tmp_path: Path) -> Iterator[IndexFile]:
    mapped = MappedFile.create(str(tmp_path / "20240101000000000"), file_size(SLOTS, 64))
    try:
        mapped.reserve(0, mapped.file_size, warm=False)
        yield IndexFile(mapped, SLOTS, 64)
    finally:
        mapped.destroy()


def test_the_walk_writes_what_the_plain_walk_writes(tmp_path: Path) -> None:
    assert index_digest(str(tmp_path)) == index_digest(str(tmp_path), kernel._span_plain)


def test_every_record_is_walked_and_the_rollback_skipped(tmp_path: Path) -> None:
    data = records()
    with _sample_index(tmp_path) as index:
        walk = Walk(-1, index.room(64), 1000)
        index_span(walk, memoryview(bytearray(data)), len(data), len(data), 0, index, 5)
        assert walk.pos == len(data) and walk.done == 22 and walk.need == 0
        assert walk.touched == 15  # records with at least one key; the rolled-back half is not indexed
        assert index.index_count - 1 == 33  # every key, capped at 5 per record (two records of 7 keys)


def test_a_record_without_room_stops_the_walk_before_it(tmp_path: Path) -> None:
    data = records()
    with _sample_index(tmp_path) as index:
        walk = Walk(-1, 4, 1000)  # the first record has 3 keys, the second 2
        index_span(walk, memoryview(bytearray(data)), len(data), len(data), 0, index, 5)
        assert walk.need == 2 and walk.done == 1 and index.index_count == 4 and walk.room == 1
        first = encode_record(topic="TopicA", body=b"x", properties="UNIQ_KEY\x01AC1100010001\x02KEYS\x01k1 k2",
                              store_timestamp=1_700_000_000_000, born_timestamp=1_700_000_000_000)
        assert walk.pos == len(first)


def test_the_budget_bounds_the_records_walked(tmp_path: Path) -> None:
    data = records()
    walk = Walk(-1, 0, 3)
    index_span(walk, memoryview(bytearray(data)), len(data), len(data), 0, None, 5)
    assert walk.done == 0 and walk.need == 3  # no index file yet: the first record with keys asks for room
    walk = Walk(len(data), 0, 3)  # all already indexed: nothing needs room, the budget ends the span
    index_span(walk, memoryview(bytearray(data)), len(data), len(data), 0, None, 5)
    assert walk.done == 3 and walk.need == 0 and walk.last == len(data)


def test_a_read_only_span_is_walked_too(tmp_path: Path) -> None:
    data = records()
    walk = Walk(len(data), 0, 100)
    index_span(walk, memoryview(data), len(data), len(data), 0, None, 5)
    assert walk.done == 22 and walk.pos == len(data)


@pytest.mark.parametrize("span", [index_span, kernel._span_plain], ids=["build", "plain"])
def test_a_blank_marker_ends_the_file(span: Callable[..., None]) -> None:
    data = records()
    buf = bytearray(len(data) + 64)
    buf[:len(data)] = data
    SIZE_AND_MAGIC.pack_into(buf, len(data), 64, BLANK_MAGIC_CODE)
    walk = Walk(len(buf), 0, 100)
    span(walk, memoryview(buf), len(buf), len(buf), 0, None, 5)
    assert walk.blank and walk.pos == len(buf) and walk.done == 22


@pytest.mark.parametrize("span", [index_span, kernel._span_plain], ids=["build", "plain"])
def test_damage_stops_the_walk_at_the_damaged_record(span: Callable[..., None]) -> None:
    data = bytearray(records())
    second = SIZE_AND_MAGIC.unpack_from(data, 0)[0]
    third = second + SIZE_AND_MAGIC.unpack_from(data, second)[0]
    data[third + 4] ^= 0xFF  # its magic code
    walk = Walk(len(data), 0, 100)
    with pytest.raises(RecordFormatError) as raised:
        span(walk, memoryview(data), len(data), len(data), 0, None, 5)
    assert walk.pos == third and walk.done == 2
    with pytest.raises(RecordFormatError) as direct:
        locate_record(memoryview(data), third, len(data), False, None, False)
    assert raised.value.reason == direct.value.reason


def test_key_hashes_of_raw_properties() -> None:
    seed = topic_seed(b"TopicA")
    from pocketmq.store.index.file import key_hash

    assert key_hashes("TopicA", seed, "KEYS\x01caf\u00e9  k".encode(), 5) == [key_hash("TopicA#caf\u00e9"),
                                                                               key_hash("TopicA#k")]
    assert key_hashes("TopicA", seed, b"UNIQ_KEY\x01u\x02KEYS\x01a b c", 2) == [key_hash("TopicA#u"),
                                                                                  key_hash("TopicA#a")]
