"""The power-loss simulation keeps exactly the prefix the checkpoint says was flushed."""

from __future__ import annotations

from pathlib import Path

from pocketmq.chaos.control import CQ_UNIT, drop_unflushed
from pocketmq.store.checkpoint import StoreCheckpoint

FILE_SIZE = 64 * 1024


def cq_entry(offset: int, size: int = 100) -> bytes:
    return offset.to_bytes(8, "big") + size.to_bytes(4, "big") + bytes(8)


def test_the_commit_log_and_consume_queues_are_cut_to_the_checkpoint(tmp_path: Path) -> None:
    store = tmp_path / "store"
    (store / "commitlog").mkdir(parents=True)
    first, second = store / "commitlog" / f"{0:020d}", store / "commitlog" / f"{FILE_SIZE:020d}"
    first.write_bytes(b"\x01" * FILE_SIZE)
    second.write_bytes(b"\x02" * 1000 + bytes(FILE_SIZE - 1000))
    cq_dir = store / "consumequeue" / "T" / "0"
    cq_dir.mkdir(parents=True)
    cq = cq_dir / f"{0:020d}"
    cq.write_bytes(b"".join(cq_entry(o) for o in (0, 100, FILE_SIZE + 100, FILE_SIZE + 500)) + bytes(CQ_UNIT * 4))
    StoreCheckpoint(physic_offset=FILE_SIZE + 300, logics_offset=FILE_SIZE, has_offsets=True).write(
        str(store / "checkpoint"))

    dropped = drop_unflushed(str(store))

    assert dropped == {"flushed_offset": FILE_SIZE + 300, "commitlog_bytes_dropped": 700, "cq_entries_dropped": 2}
    assert first.read_bytes() == b"\x01" * FILE_SIZE  # flushed whole: untouched
    data = second.read_bytes()
    assert len(data) == FILE_SIZE and data[:300] == b"\x02" * 300 and data[300:] == bytes(FILE_SIZE - 300)
    entries = cq.read_bytes()
    assert entries[:2 * CQ_UNIT] == cq_entry(0) + cq_entry(100) and entries[2 * CQ_UNIT:] == bytes(CQ_UNIT * 6)


def test_a_store_without_a_checkpoint_loses_everything(tmp_path: Path) -> None:
    store = tmp_path / "store"
    (store / "commitlog").mkdir(parents=True)
    log = store / "commitlog" / f"{0:020d}"
    log.write_bytes(b"\x05" * 4096)
    assert drop_unflushed(str(store))["commitlog_bytes_dropped"] == 4096
    assert log.read_bytes() == bytes(4096)


def test_a_record_acknowledged_with_sync_flush_is_kept_past_a_lagging_checkpoint(tmp_path: Path) -> None:
    store = tmp_path / "store"
    (store / "commitlog").mkdir(parents=True)
    log = store / "commitlog" / f"{0:020d}"
    data = bytearray(b"\x03" * 1000 + bytes(FILE_SIZE - 1000))
    data[600:604] = (200).to_bytes(4, "big")  # the record at 600 is 200 bytes long
    log.write_bytes(bytes(data))
    StoreCheckpoint(physic_offset=100, logics_offset=0, has_offsets=True).write(str(store / "checkpoint"))
    dropped = drop_unflushed(str(store), durable_record=600)
    assert dropped["flushed_offset"] == 800 and dropped["commitlog_bytes_dropped"] == 200
    assert log.read_bytes()[:800] == bytes(data[:800]) and log.read_bytes()[800:] == bytes(FILE_SIZE - 800)
