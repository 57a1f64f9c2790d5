"""Recovery in process: clean and abnormal restarts, consume queues rebuilt where they lag, garbage and
truncation past the end of the log, and the pure planning step."""

from __future__ import annotations

import os
import random
import shutil
from pathlib import Path

import pytest

from pocketmq.common.batch import BatchEntry, encode_batch_body
from pocketmq.store import MessageExtBatch, MessageStore, StoreConfig, StoreError
from pocketmq.store.checkpoint import StoreCheckpoint
from pocketmq.store.commitlog import CommitLog
from pocketmq.store.consume_queue import UNIT_SIZE
from pocketmq.store.mapped_file import MappedFileAllocator, file_name_for
from pocketmq.store.recovery import plan_recovery
from tests.helpers import eventually
from tests.store.support import CL_FILE, check_consistency, exists, msg, small_config, snapshot

Written = list[tuple[int, bytes]]  # (physical offset, record bytes) in log order


async def fill(s: MessageStore, count: int, seed: int) -> Written:
    """Append ``count`` messages over a few topics/queues (some in batches); return what was written."""
    rng = random.Random(seed)
    written: Written = []
    while len(written) < count:
        topic, queue_id = f"T{rng.randint(0, 2)}", rng.randint(0, 3)
        if rng.random() < 0.15:
            entries = [BatchEntry(0, rng.randbytes(rng.randint(0, 300)), f"TAGS\x01b{i}") for i in range(5)]
            result = await s.put_messages(MessageExtBatch(topic=topic, body=encode_batch_body(entries),
                                                          queue_id=queue_id))
        else:
            result = await s.put_message(msg(topic=topic, queue_id=queue_id, tags=f"t{rng.randint(0, 4)}",
                                             body=rng.randbytes(rng.randint(0, 2000))))
        assert result.is_ok and result.append_result is not None
        ar = result.append_result
        ends = [*ar.record_offsets[1:], ar.end_offset]
        for start, end in zip(ar.record_offsets, ends, strict=True):
            view = s.commit_log.get_message(start, end - start)
            assert view is not None
            written.append((start, bytes(view)))
    return written


def copy_live(src: Path, dst: Path) -> None:
    """Copy the files of a running store as a crash would leave them (the page cache survives a process
    crash). Files whose creation is in flight (``*.tmp``: the allocator's next commit-log file, a metadata
    write) are left out: they may be renamed while the copy runs, and recovery deletes such leftovers."""
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("*.tmp"))


def assert_prefix_kept(s: MessageStore, written: Written, at_least: int) -> int:
    """The store holds exactly a prefix of ``written`` (byte for byte) of at least ``at_least`` records."""
    kept = 0
    for phys, data in written:
        if phys + len(data) > s.max_phy_offset:
            break
        view = s.commit_log.get_message(phys, len(data))
        assert view is not None and bytes(view) == data, f"record at {phys} changed"
        kept += 1
    assert kept >= at_least, f"only {kept} of {at_least} records survived"
    assert kept == len(written) or s.max_phy_offset <= written[kept][0] + CL_FILE
    return kept


def read_file(path: Path) -> bytes:
    return path.read_bytes()


def write_file(path: Path, data: bytes) -> None:
    path.write_bytes(data)


def zero_units(cq_dir: Path, indexes: range, file_size: int) -> None:
    """Zero consume-queue units, as if their pages never reached the disk."""
    for index in indexes:
        byte = index * UNIT_SIZE
        with open(cq_dir / file_name_for(byte - byte % file_size), "r+b") as f:
            f.seek(byte % file_size)
            f.write(bytes(UNIT_SIZE))


def damage_commit_log(directory: Path, start: int, end: int, rng: random.Random) -> None:
    """Cut files short or flip bytes (always to a different value) at 1-4 random offsets in [start, end]."""
    for _ in range(rng.randint(1, 4)):
        offset = rng.randint(start, end)
        path = directory / file_name_for(offset - offset % CL_FILE)
        if not path.exists():
            continue
        data = bytearray(path.read_bytes())
        at = offset % CL_FILE
        if rng.random() < 0.3:
            del data[at:]
        else:
            for i in range(at, at + min(rng.randint(1, 600), len(data) - at)):
                data[i] ^= rng.randint(1, 255)
        path.write_bytes(bytes(data))


def covered(checkpoint_path: str, offset: int) -> bool:
    """True once the checkpoint on disk says everything before ``offset`` is flushed."""
    checkpoint = StoreCheckpoint.load(checkpoint_path)
    return checkpoint.logics_offset == checkpoint.physic_offset == offset


async def reopen(config: StoreConfig) -> MessageStore:
    s = MessageStore(config)
    await s.start()
    return s


async def test_clean_restart_continues_offsets(tmp_path: Path) -> None:
    config = small_config(tmp_path)
    s = await reopen(config)
    written = await fill(s, 300, seed=1)
    max_offset = s.max_phy_offset
    queue_max = s.get_max_offset_in_queue("T1", 2)
    await s.shutdown()
    assert not exists(os.path.join(config.store_path_root_dir, "abort"))
    s = await reopen(config)
    try:
        assert s.recovery_summary["abnormal"] is False and s.recovery_summary["replayed"] == 0
        assert s.max_phy_offset == max_offset
        assert check_consistency(s) == len(written)
        result = await s.put_message(msg(topic="T1", queue_id=2))
        assert result.append_result is not None
        assert result.append_result.wrote_offset == max_offset
        assert result.append_result.queue_offset == queue_max
    finally:
        await s.shutdown()


async def test_abnormal_recovery_of_a_live_copy(tmp_path: Path) -> None:
    s = await reopen(small_config(tmp_path / "live"))
    try:
        written = await fill(s, 250, seed=2)
        copy_live(tmp_path / "live", tmp_path / "copy")  # what a crash would leave (page cache intact)
    finally:
        await s.shutdown()
    copy = await reopen(small_config(tmp_path / "copy"))
    try:
        assert copy.recovery_summary["abnormal"] is True
        assert copy.max_phy_offset == written[-1][0] + len(written[-1][1])
        assert_prefix_kept(copy, written, len(written))
        assert check_consistency(copy) == len(written)
    finally:
        await copy.shutdown()


async def test_lagging_consume_queues_are_rebuilt(tmp_path: Path) -> None:
    config = small_config(tmp_path / "live", flush_consume_queue_thorough_interval_ms=20,
                          flush_commit_log_thorough_interval_ms=20)
    s = await reopen(config)
    checkpoint_path = os.path.join(config.store_path_root_dir, "checkpoint")
    try:
        for i in range(100):
            await s.put_message(msg(body=bytes([i]) * 100))
        first_max = s.max_phy_offset
        await eventually(lambda: covered(checkpoint_path, first_max), timeout=5)
        stale = read_file(Path(checkpoint_path))
        for i in range(100):
            await s.put_message(msg(body=bytes([i]) * 100))
        copy_live(tmp_path / "live", tmp_path / "copy")
    finally:
        await s.shutdown()
    copy_root = tmp_path / "copy"
    write_file(copy_root / "checkpoint", stale)
    zero_units(copy_root / "consumequeue" / "T" / "0", range(100, 200), config.mapped_file_size_consume_queue)
    copy = await reopen(small_config(copy_root))
    try:
        assert copy.recovery_summary["replay_from"] == first_max
        assert copy.get_max_offset_in_queue("T", 0) == 200
        assert check_consistency(copy) == 200
    finally:
        await copy.shutdown()


@pytest.mark.parametrize("abort", [False, True])
async def test_recovery_without_checkpoint(tmp_path: Path, abort: bool) -> None:
    config = small_config(tmp_path)
    s = await reopen(config)
    written = await fill(s, 200, seed=3)
    await s.shutdown()
    os.unlink(os.path.join(config.store_path_root_dir, "checkpoint"))
    if abort:
        write_file(Path(config.store_path_root_dir, "abort"), b"")
    s = await reopen(config)
    try:
        assert s.recovery_summary["abnormal"] is abort
        assert check_consistency(s) == len(written)
    finally:
        await s.shutdown()


async def test_garbage_and_truncation_past_the_end(tmp_path: Path) -> None:
    base = tmp_path / "base"
    s = await reopen(small_config(base, flush_consume_queue_thorough_interval_ms=20,
                                  flush_commit_log_thorough_interval_ms=20))
    written = await fill(s, 150, seed=4)
    stable_end = s.max_phy_offset
    checkpoint_path = base / "checkpoint"
    await eventually(lambda: covered(str(checkpoint_path), stable_end), timeout=5)
    stale = read_file(checkpoint_path)
    written += await fill(s, 150, seed=5)  # not covered by the checkpoint we will keep
    live_copy = tmp_path / "live"
    copy_live(base, live_copy)
    await s.shutdown()
    write_file(live_copy / "checkpoint", stale)
    rng = random.Random(11)
    end = written[-1][0] + len(written[-1][1])
    for case in range(12):
        root = tmp_path / f"case{case}"
        shutil.copytree(live_copy, root)
        point = rng.randint(stable_end, end + CL_FILE // 2)  # somewhere past what the checkpoint covers
        damage_commit_log(root / "commitlog", point, end + CL_FILE, rng)
        survivors = sum(1 for phys, record in written if phys + len(record) <= point)
        recovered = await reopen(small_config(root))
        try:
            kept = assert_prefix_kept(recovered, written, survivors)
            assert check_consistency(recovered) == kept
            before = recovered.max_phy_offset
            result = await recovered.put_message(msg(topic="after", body=b"new"))
            assert result.append_result is not None
            assert result.append_result.wrote_offset in (before, before - before % CL_FILE + CL_FILE)
        finally:
            await recovered.shutdown()
        again = await reopen(small_config(root))  # nothing of the garbage comes back later
        try:
            assert check_consistency(again) == kept + 1
        finally:
            await again.shutdown()


async def test_plan_reads_only_and_stops_at_the_first_bad_record(tmp_path: Path) -> None:
    config = small_config(tmp_path)
    s = await reopen(config)
    written = await fill(s, 120, seed=6)
    await s.shutdown()
    victim_phys, victim = written[100]
    path = Path(config.commit_log_dir) / file_name_for(victim_phys - victim_phys % CL_FILE)
    data = bytearray(path.read_bytes())
    data[victim_phys % CL_FILE + len(victim) - 1] ^= 0xFF  # last property byte: CRC still fine, so ...
    data[victim_phys % CL_FILE + 100] ^= 0xFF  # ... damage the body too
    path.write_bytes(bytes(data))
    os.unlink(os.path.join(config.store_path_root_dir, "checkpoint"))
    before = snapshot(config.commit_log_dir)
    commit_log = CommitLog(config, MappedFileAllocator(None))
    commit_log.queue.load()
    plan = plan_recovery(commit_log, StoreCheckpoint(), abnormal=True, check_crc=True)
    for mapped in commit_log.queue.files:
        mapped.close()
    assert plan.truncate_at == victim_phys
    assert plan.stop_reason == "body CRC mismatch"
    assert plan.scan_start == 0 and plan.replay_from == 0
    assert snapshot(config.commit_log_dir) == before


async def test_a_second_store_on_the_same_directory_is_refused(tmp_path: Path) -> None:
    s = await reopen(small_config(tmp_path))
    try:
        with pytest.raises(StoreError, match="in use"):
            await MessageStore(small_config(tmp_path)).start()
        with pytest.raises(StoreError):
            await s.start()
    finally:
        await s.shutdown()
