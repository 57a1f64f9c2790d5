"""The message index inside one store: keys and unique keys found, file roll-over, time bounds, the file
format read back by an independent reader, recovery after a crash, retention, and the index switched off."""

from __future__ import annotations

import struct
import time
from pathlib import Path

from pocketmq.common.message import java_string_hash
from pocketmq.store import MessageStore
from pocketmq.store.checkpoint import StoreCheckpoint
from pocketmq.store.index.file import key_hash
from tests.helpers import eventually
from tests.store.support import msg, names_in, small_config
from tests.store.test_retention import age, this_hour


async def _started(root: Path, **overrides: object) -> MessageStore:
    store = MessageStore(small_config(root, max_hash_slot_num=64, max_index_num=100, **overrides))
    await store.start()
    return store


def _keys_found(store: MessageStore, topic: str, key: str, max_num: int = 64) -> int:
    return len(store.query_message(topic, key, max_num, 0, 2**62).records)


def _independent_entries(path: Path, slots: int) -> list[tuple[int, int, int, int]]:
    """Read an index file as RocketMQ's reader does, with nothing from pocketmq.store.index."""
    data = path.read_bytes()
    header = struct.unpack_from(">qqqqii", data, 0)
    count = header[5]
    at = 40 + slots * 4
    return [struct.unpack_from(">iqii", data, at + i * 20) for i in range(1, count)]


async def test_keys_and_unique_keys_found_newest_first(tmp_path: Path) -> None:
    store = await _started(tmp_path / "s")
    try:
        for i in range(10):
            store.append(msg("T", f"b{i}".encode(), keys=f"order-{i % 3} all", props={"UNIQ_KEY": f"U{i:04d}"}))
        await eventually(lambda: _keys_found(store, "T", "all") == 10)
        records = store.query_message("T", "order-1", 64, 0, 2**62).records
        assert len(records) == 3
        offsets = [struct.unpack_from(">q", r, 28)[0] for r in records]
        assert offsets == sorted(offsets, reverse=True)
        assert _keys_found(store, "T", "U0007") == 1
        assert _keys_found(store, "T", "nothing") == 0
        assert _keys_found(store, "Other", "all") == 0
        assert len(store.query_message("T", "all", 4, 0, 2**62).records) == 4
    finally:
        await store.shutdown()


async def test_format_read_by_independent_reader(tmp_path: Path) -> None:
    store = await _started(tmp_path / "s")
    try:
        store.append(msg("T", b"x", keys="k1"))
        await eventually(lambda: _keys_found(store, "T", "k1") == 1)
        await store.index.flush()  # type: ignore[union-attr]
        names = names_in(tmp_path / "s" / "index")
        assert len(names) == 1 and len(names[0]) == 17 and names[0].isdigit()
        assert (tmp_path / "s" / "index" / names[0]).stat().st_size == 40 + 64 * 4 + 100 * 20
        entries = _independent_entries(tmp_path / "s" / "index" / names[0], 64)
        expected = abs(java_string_hash("T#k1"))
        assert [e[0] for e in entries] == [expected] and entries[0][1] == 0 and entries[0][3] == 0
        assert key_hash("T#k1") == expected
    finally:
        await store.shutdown()


async def test_roll_over_keeps_old_keys(tmp_path: Path) -> None:
    store = await _started(tmp_path / "s")
    try:
        for i in range(250):
            store.append(msg("T", b"x", keys=f"k{i} same"))
        await eventually(lambda: store.index is not None and store.index.offset == store.max_phy_offset)
        assert len(names_in(tmp_path / "s" / "index")) >= 5  # 2 keys a message, 99 a file
        assert _keys_found(store, "T", "k0") == 1 and _keys_found(store, "T", "k249") == 1
        assert _keys_found(store, "T", "same") == 64  # capped at maxMsgsNumBatch
    finally:
        await store.shutdown()


async def test_time_range_bounds(tmp_path: Path) -> None:
    store = await _started(tmp_path / "s")
    try:
        store.append(msg("T", b"old", keys="k"))
        await eventually(lambda: _keys_found(store, "T", "k") == 1)
        first = store.query_message("T", "k", 8, 0, 2**62)
        stamp = first.index_last_update_timestamp
        await eventually(lambda: time.time() * 1000 > stamp + 2100)  # the index keeps seconds
        store.append(msg("T", b"new", keys="k"))
        await eventually(lambda: _keys_found(store, "T", "k") == 2)
        now = int(time.time() * 1000)
        assert len(store.query_message("T", "k", 8, stamp + 2000, now + 1000).records) == 1
        assert len(store.query_message("T", "k", 8, 0, stamp + 500).records) == 1
        assert len(store.query_message("T", "k", 8, now + 5000, now + 9000).records) == 0
    finally:
        await store.shutdown()


async def test_rebuilt_after_crash(tmp_path: Path) -> None:
    root = tmp_path / "s"
    store = await _started(root)
    for i in range(150):
        store.append(msg("T", b"x", keys=f"k{i}"))
    await eventually(lambda: store.index is not None and store.index.offset == store.max_phy_offset)
    # A crash: the abort file stays; the index files hold entries past the checkpoint's indexMsgTimestamp.
    await store.shutdown()
    (root / "abort").write_bytes(b"")
    store = await _started(root)
    try:
        await eventually(lambda: _keys_found(store, "T", "k0") == 1 and _keys_found(store, "T", "k149") == 1)
        assert all(_keys_found(store, "T", f"k{i}") == 1 for i in range(150))
    finally:
        await store.shutdown()


async def test_clean_restart_resumes_without_duplicates(tmp_path: Path) -> None:
    root = tmp_path / "s"
    store = await _started(root)
    store.append(msg("T", b"x", keys="a"))
    await eventually(lambda: _keys_found(store, "T", "a") == 1)
    await store.shutdown()
    store = await _started(root)
    try:
        store.append(msg("T", b"y", keys="a"))
        await eventually(lambda: _keys_found(store, "T", "a") == 2)
        assert store.index is not None and sum(f.index_count - 1 for f in store.index.files) == 2
    finally:
        await store.shutdown()


async def test_index_off_costs_no_files(tmp_path: Path) -> None:
    store = MessageStore(small_config(tmp_path / "s", message_index_enable=False))
    await store.start()
    try:
        store.append(msg("T", b"x", keys="a"))
        assert store.index is None and _keys_found(store, "T", "a") == 0
        assert not (tmp_path / "s" / "index").exists()
    finally:
        await store.shutdown()


async def test_retention_deletes_index_files_of_deleted_records(tmp_path: Path) -> None:
    store = MessageStore(small_config(tmp_path / "s", delete_when=this_hour(), file_reserved_time_hours=1,
                                      max_hash_slot_num=16, max_index_num=20))
    await store.start()
    try:
        for i in range(160):
            store.append(msg("T", bytes(2000), keys=f"k{i}"))
        assert store.index is not None and store.retention is not None
        await eventually(lambda: store.index is not None and store.index.offset == store.max_phy_offset)
        before = len(store.index.files)
        age(store, 3, hours=2)
        await eventually(lambda: store.commit_log.flushed_offset == store.max_phy_offset)
        assert await store.retention.run_once() == 3
        await store.index.delete_expired()
        assert 0 < len(store.index.files) < before
        assert all(f.end_phy_offset >= store.min_phy_offset for f in store.index.files)
        assert len(names_in(tmp_path / "s" / "index")) == len(store.index.files)
        assert _keys_found(store, "T", "k159") == 1 and _keys_found(store, "T", "k0") == 0
    finally:
        await store.shutdown()


async def test_checkpoint_keeps_index_msg_timestamp(tmp_path: Path) -> None:
    root = tmp_path / "s"
    store = await _started(root)
    store.append(msg("T", b"x", keys="a"))
    await eventually(lambda: _keys_found(store, "T", "a") == 1)
    stamp = store.query_message("T", "a", 1, 0, 2**62).index_last_update_timestamp
    await store.shutdown()
    assert StoreCheckpoint.load(str(root / "checkpoint")).index_msg_timestamp == stamp > 0
