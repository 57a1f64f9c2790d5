"""Many queues on disk (:mod:`pocketmq.store.queue_table`): consume queues are released when idle or past the
bound on mapped files and mapped again on use without losing anything; a reached limit is a clear error; idle
queues cost no memory at start; a queue reserves disk as it is used; truncation skips the holes of sparse files."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from pocketmq.common.record import MessageRecord, decode_record
from pocketmq.store import GetMessageStatus, MessageStore, PutMessageStatus
from pocketmq.store.errors import ConsumeQueueLimitError
from pocketmq.store.mapped_file import MappedFile
from pocketmq.store.queue_table import default_max_mapped
from tests.helpers import eventually
from tests.store.support import CL_FILE, check_consistency, exists, msg, small_config

pytestmark = pytest.mark.timeout(120)
QUEUES = 40


def mapped_consume_queue_files(root: Path) -> int:
    """Consume-queue files this process maps now (its ``/proc/self/maps`` lines under ``root``)."""
    prefix = str(root / "consumequeue")
    with open("/proc/self/maps") as f:
        return sum(1 for line in f if prefix in line)


def _body(buf: memoryview) -> bytes:
    record = decode_record(buf)
    assert isinstance(record, MessageRecord)
    return bytes(record.body)


def _this_hour() -> str:
    hour = time.localtime().tm_hour
    return f"{hour:02d};{(hour + 1) % 24:02d}"  # survives the test crossing an hour boundary


def pages_on_disk(path: Path) -> int:
    return os.stat(path).st_blocks * 512 // 4096


async def test_idle_queues_are_released_and_mapped_again_without_losing_anything(tmp_path: Path) -> None:
    config = small_config(tmp_path, max_open_consume_queue_files=8, mapped_file_size_consume_queue=20 * 1000)
    store = MessageStore(config)
    await store.start()
    table = store._queues
    try:
        for round_ in range(2):
            for q in range(QUEUES):
                result = await store.put_message(msg("Many", f"r{round_}q{q:02d}".encode(), queue_id=q))
                assert result.status is PutMessageStatus.PUT_OK
                assert table.mapped_files <= table.hard_max
            await eventually(lambda: table.mapped_files <= table.max_mapped, message="shrunk to the bound")
        assert table.releases > 0 and mapped_consume_queue_files(tmp_path) <= table.hard_max
        assert sum(1 for q in range(QUEUES) if (cq := store.find_consume_queue("Many", q)) and cq.released) > 20
        released = next(cq for q in range(QUEUES) if (cq := store.find_consume_queue("Many", q)) and cq.released)
        units = [released.get_unit(i) for i in range(3)]  # what a report walking every queue asks
        assert units[0] is not None and units[1] is not None and units[2] is None
        assert released.released is not None  # answered without mapping the queue again
        released.restore()
        assert [released.get_unit(i) for i in range(3)] == units
        for q in range(QUEUES):  # every read maps its queue again (and others go)
            got = store.get_messages("g", "Many", q, 0, 32)
            assert got.status is GetMessageStatus.FOUND and len(got.message_buffers) == 2
            assert [_body(b) for b in got.message_buffers] == [f"r{r}q{q:02d}".encode() for r in range(2)]
            got.release()
            assert store.get_max_offset_in_queue("Many", q) == 2
        check_consistency(store)
    finally:
        await store.shutdown()
    again = MessageStore(config)
    await again.start()
    try:
        assert again._queues.mapped_files <= config.max_open_consume_queue_files
        for q in range(QUEUES):
            assert again.get_max_offset_in_queue("Many", q) == 2
            assert (await again.put_message(msg("Many", b"third", queue_id=q))).status is PutMessageStatus.PUT_OK
        assert check_consistency(again) == 3 * QUEUES
    finally:
        await again.shutdown()


async def test_a_reached_limit_is_a_clear_error_and_the_store_goes_on(tmp_path: Path) -> None:
    """Nothing flushed (the flushes wait an hour) and only inline appends, which cannot wait for a shrink: past the
    hard bound an append is refused with CREATE_MAPEDFILE_FAILED and a read with ConsumeQueueLimitError naming the
    setting; a put, which can wait, gets through once a shrink has flushed and released idle queues."""
    config = small_config(tmp_path, max_open_consume_queue_files=2, flush_interval_consume_queue_ms=3_600_000,
                          flush_consume_queue_thorough_interval_ms=3_600_000)
    store = MessageStore(config)
    await store.start()
    table = store._queues
    try:
        statuses = [store.append(msg("Limit", b"x", queue_id=q)).status for q in range(table.hard_max + 3)]
        assert statuses == [PutMessageStatus.PUT_OK] * table.hard_max + [PutMessageStatus.CREATE_MAPEDFILE_FAILED] * 3
        assert table.mapped_files == table.hard_max
        await table.shrink()  # flushes and releases the least recently used
        assert table.mapped_files <= table.max_mapped
        released = [q for q in range(table.hard_max) if (cq := store.find_consume_queue("Limit", q)) and cq.released]
        assert released
        q = 0
        while store.append(msg("Fill", b"x", queue_id=q)).status is PutMessageStatus.PUT_OK:
            q += 1
        assert table.mapped_files == table.hard_max
        with pytest.raises(ConsumeQueueLimitError, match="maxOpenConsumeQueueFiles"):
            store.get_messages("g", "Limit", released[0], 0, 1)
        result = await store.put_message(msg("Limit", b"y", queue_id=released[0]))  # waits for a shrink instead
        assert result.status is PutMessageStatus.PUT_OK
        assert store.get_max_offset_in_queue("Limit", released[0]) == 2
        assert check_consistency(store) == table.hard_max + q + 1
    finally:
        await store.shutdown()


async def test_idle_queues_cost_nothing_at_start_and_a_used_queue_one_page(tmp_path: Path) -> None:
    config = small_config(tmp_path, mapped_file_size_consume_queue=20 * 300_000)
    store = MessageStore(config)
    await store.start()
    try:
        await store.create_queue_files("Idle", range(8))
        first = tmp_path / "consumequeue" / "Idle" / "3" / f"{0:020d}"
        assert exists(first) and pages_on_disk(first) == 0 and store.find_consume_queue("Idle", 3) is None
        assert (await store.put_message(msg("Idle", b"one", queue_id=3))).is_ok
        await eventually(lambda: store.get_max_offset_in_queue("Idle", 3) == 1, message="dispatched")
        await eventually(lambda: pages_on_disk(first) >= 1, message="the unit's page on disk")
        assert pages_on_disk(first) == 1  # one message: one page reserved, not the 64 KiB window
        assert not exists(tmp_path / "consumequeue" / "Idle" / "3" / f"{20 * 300_000:020d}")  # no next file yet
    finally:
        await store.shutdown()
    again = MessageStore(config)
    await again.start()
    try:
        assert again.topics() == {"Idle": [3]} and again._queues.mapped_files == 1
        assert again.find_consume_queue("Idle", 5) is None
        assert (await again.put_message(msg("Idle", b"two", queue_id=5))).is_ok
        assert again.get_max_offset_in_queue("Idle", 5) == 1 and again.get_max_offset_in_queue("Idle", 3) == 1
    finally:
        await again.shutdown()


async def test_a_busy_queue_grows_its_window_to_the_configured_one(tmp_path: Path) -> None:
    config = small_config(tmp_path, mapped_file_size_consume_queue=20 * 300_000, reserve_window_consume_queue=32768)
    store = MessageStore(config)
    await store.start()
    try:
        for i in range(3000):
            assert (await store.put_message(msg("Busy", str(i).encode()))).is_ok
        cq = store.find_consume_queue("Busy", 0)
        assert cq is not None and cq.queue.window == 32768
        assert cq.tail is not None and cq.tail.reserved >= 3000 * 20
    finally:
        await store.shutdown()


async def test_released_queues_follow_retention(tmp_path: Path) -> None:
    """Commit-log files deleted under released queues: their minimum moves on (the queue is mapped for it only
    when its first record is gone), reads answer OFFSET_TOO_SMALL, the rest reads as before."""
    config = small_config(tmp_path, delete_when=_this_hour(), file_reserved_time_hours=1,
                          flush_commit_log_thorough_interval_ms=50, flush_consume_queue_least_pages=0)
    store = MessageStore(config)
    await store.start()
    try:
        for i in range(200):  # ~3 commit-log files, two queues
            assert (await store.put_message(msg("R", bytes([i % 256]) * 900, queue_id=i % 2))).is_ok
        await eventually(lambda: store.flushed_phy_offset == store.max_phy_offset
                         and all(cq.queue.dirty_bytes() <= 0 for cq in store._queues))

        async def released() -> bool:  # unused since one sweep: released by the next, once no file is in the making
            await store._queues.release_idle()
            return all(store.find_consume_queue("R", q).released for q in (0, 1))  # type: ignore[union-attr]

        await eventually(released, message="both queues released")
        stamp = time.time() - 2 * 3600
        for mapped in store.commit_log.queue.files[:2]:
            os.utime(mapped.path, (stamp, stamp))
        assert store.retention is not None and await store.retention.run_once() == 2
        assert store.min_phy_offset == 2 * CL_FILE
        for q in (0, 1):
            cq = store.find_consume_queue("R", q)
            assert cq is not None and cq.min_offset > 0
            old = store.get_messages("g", "R", q, 0, 4)
            assert old.status is GetMessageStatus.OFFSET_TOO_SMALL and old.next_begin_offset == cq.min_offset
            assert store.get_messages("g", "R", q, cq.min_offset, 4).status is GetMessageStatus.FOUND
        check_consistency(store)
    finally:
        await store.shutdown()


def test_zero_from_zeroes_data_and_skips_the_holes(tmp_path: Path) -> None:
    mapped = MappedFile.create(str(tmp_path / f"{0:020d}"), 4 << 20)
    try:
        for offset in (100, 300_000, 4_000_000):
            mapped.view[offset:offset + 8] = b"\xff" * 8
        mapped.zero_from(200)
        assert bytes(mapped.view[100:108]) == b"\xff" * 8
        assert bytes(mapped.view[300_000:300_008]) == bytes(8) and bytes(mapped.view[4_000_000:4_000_008]) == bytes(8)
        mapped.zero_from(0)
        assert bytes(mapped.view[100:108]) == bytes(8)
    finally:
        mapped.close()


def test_the_default_bound_stays_inside_the_process_limits() -> None:
    import resource

    bound = default_max_mapped()
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    with open("/proc/sys/vm/max_map_count") as f:
        max_maps = int(f.read())
    assert 64 <= bound <= 10_000
    assert bound * 1.25 * 2 < soft or bound == 64  # two descriptors a file, a quarter more while shrinking
    assert bound * 1.25 < max_maps
