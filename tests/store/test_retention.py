"""Retention: expired files go at the deleteWhen hour or when the disk fills; never the file being written;
readers of a deleted range get a status, not an exception."""

from __future__ import annotations

import os
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

import pocketmq.store.retention
from pocketmq.store import GetMessageStatus, MessageStore, PutMessageStatus
from pocketmq.store.consume_queue import ConsumeQueue
from pocketmq.store.retention import RetentionService
from tests.helpers import eventually
from tests.store.support import CL_FILE, check_consistency, exists, msg, small_config


def this_hour() -> str:
    hour = time.localtime().tm_hour
    return f"{hour:02d};{(hour + 1) % 24:02d}"  # survives the test crossing an hour boundary


def other_hours() -> str:
    hour = time.localtime().tm_hour
    return f"{(hour + 5) % 24:02d}"


async def filled(s: MessageStore, files: int) -> None:
    """Write until ``files`` commit-log files are full and wait until they are flushed."""
    i = 0
    while len(s.commit_log.queue.files) <= files:
        assert (await s.put_message(msg(queue_id=i % 2, body=bytes([i % 256]) * 1000))).is_ok
        i += 1
    last_start = s.commit_log.queue.files[-1].file_from_offset
    await eventually(lambda: s.flushed_phy_offset >= last_start, timeout=10, message="flush")


def age(s: MessageStore, count: int, hours: float) -> None:
    """Make the first ``count`` commit-log files look ``hours`` old."""
    stamp = time.time() - hours * 3600
    for mapped in s.commit_log.queue.files[:count]:
        os.utime(mapped.path, (stamp, stamp))


@pytest.fixture
async def timed_store(tmp_path: Path) -> AsyncIterator[MessageStore]:
    s = MessageStore(small_config(tmp_path, delete_when=this_hour(), file_reserved_time_hours=1,
                                  flush_commit_log_thorough_interval_ms=50))
    await s.start()
    yield s
    await s.shutdown()


async def test_expired_files_go_at_the_delete_hour(timed_store: MessageStore) -> None:
    s = timed_store
    await filled(s, 5)
    age(s, 3, hours=2)
    paths = [m.path for m in s.commit_log.queue.files[:4]]
    assert s.retention is not None
    assert await s.retention.run_once() == 3
    assert s.min_phy_offset == 3 * CL_FILE
    assert [exists(p) for p in paths] == [False, False, False, True]
    for queue_id in (0, 1):
        cq = s.find_consume_queue("T", queue_id)
        assert cq is not None and cq.min_offset > 0
        unit = cq.get_unit(cq.min_offset)
        assert unit is not None and unit[0] >= s.min_phy_offset
        old = s.get_messages("g", "T", queue_id, 0, 32)
        assert (old.status, old.next_begin_offset) == (GetMessageStatus.OFFSET_TOO_SMALL, cq.min_offset)
        assert s.get_messages("g", "T", queue_id, cq.min_offset, 32).status is GetMessageStatus.FOUND
    check_consistency(s)
    assert await s.retention.run_once() == 0  # nothing else is old


async def test_never_the_current_file_nor_unflushed_ones(timed_store: MessageStore) -> None:
    s = timed_store
    await filled(s, 2)
    age(s, len(s.commit_log.queue.files), hours=100)
    assert s.retention is not None
    deleted = await s.retention.run_once()
    assert deleted == len(s.commit_log.queue.files[:0]) + 2
    assert len(s.commit_log.queue.files) == 1
    assert (await s.put_message(msg())).is_ok


async def test_reading_a_deleted_range_is_a_status(timed_store: MessageStore) -> None:
    s = timed_store
    await filled(s, 4)
    held = s.get_messages("g", "T", 0, 0, 4)  # a pull response still being sent
    assert held.status is GetMessageStatus.FOUND
    first = s.commit_log.queue.files[0]
    age(s, 3, hours=2)  # about 90 messages of queue 0: more than its first consume-queue file (64)
    assert s.retention is not None
    assert await s.retention.run_once() == 3
    assert not exists(first.path) and not first.closed  # unlinked, still mapped for the reader
    assert bytes(held.message_buffers[0][:4]) != b"\x00\x00\x00\x00"
    cq = s.find_consume_queue("T", 0)
    assert cq is not None
    cq.min_logic_offset = 0  # the moment between the commit-log deletion and the queue's correction
    removing = s.get_messages("g", "T", 0, 0, 4)
    assert removing.status is GetMessageStatus.MESSAGE_WAS_REMOVING
    assert removing.next_begin_offset == 64  # the end of the first consume-queue file
    held.release()
    await s.retention.run_once()
    assert first.closed


def pressure_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, usage: dict[str, float],
                   **overrides: Any) -> MessageStore:
    """A store with RocketMQ's disk ratios (75/85/90) and a disk whose used fraction is ``usage["ratio"]``."""
    monkeypatch.setattr(pocketmq.store.retention, "disk_state",
                        lambda _path: pocketmq.store.retention.DiskState(usage["ratio"], 1 << 40, 1 << 39))
    return MessageStore(small_config(tmp_path, delete_when=other_hours(), file_reserved_time_hours=1,
                                     flush_commit_log_thorough_interval_ms=50, disk_max_used_space_ratio=75,
                                     disk_space_clean_forcibly_ratio=85, disk_space_warning_level_ratio=90,
                                     **overrides))


async def test_disk_pressure_deletes_only_expired_files_by_default(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    usage = {"ratio": 0.5}
    s = pressure_store(tmp_path, monkeypatch, usage)
    await s.start()
    try:
        await filled(s, 6)
        age(s, 1, hours=2)
        assert s.retention is not None
        assert await s.retention.run_once() == 0  # not the hour, disk fine
        usage["ratio"] = 0.80  # above diskMaxUsedSpaceRatio: expired files go at any hour
        assert await s.retention.run_once() == 1
        kept = [m.path for m in s.commit_log.queue.files]
        for ratio in (0.86, 0.95, 1.0):  # above the forced ratio, and full: nothing unexpired goes
            usage["ratio"] = ratio
            assert await s.retention.run_once() == 0
        assert [m.path for m in s.commit_log.queue.files] == kept and all(exists(p) for p in kept)
        assert s.retention.deleted["forced"].files == 0 and s.retention.deleted["expired"].files == 1
        assert not s.writable  # above the warning level: puts are refused
        assert (await s.put_message(msg())).status is PutMessageStatus.SERVICE_NOT_AVAILABLE
        for queue_id in (0, 1):  # and everything kept is readable
            cq = s.find_consume_queue("T", queue_id)
            assert cq is not None
            got = s.get_messages("g", "T", queue_id, cq.min_offset, 32)
            assert got.status is GetMessageStatus.FOUND
            got.release()
        usage["ratio"] = 0.5
        await s.retention.run_once()
        assert s.writable and (await s.put_message(msg())).is_ok
        check_consistency(s)
    finally:
        await s.shutdown()


async def test_forced_cleaning_when_enabled_counts_the_backlog_it_drops(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """cleanFileForciblyEnable=true: above the forced ratio the oldest files go although none expired, and the
    count of each group's unconsumed messages that went with them is exact."""
    usage = {"ratio": 0.5}
    s = pressure_store(tmp_path, monkeypatch, usage, clean_file_forcibly_enable=True)
    offsets: dict[str, dict[int, int]] = {"T@behind": {0: 5, 1: 0}, "T@ahead": {0: 10_000, 1: 10_000}}
    retention = await start_with_offsets(s, offsets)
    try:
        await filled(s, 6)
        queues = [s.find_consume_queue("T", q) for q in (0, 1)]
        assert all(cq is not None for cq in queues)
        min_before = [cq.min_offset for cq in queues if cq is not None]
        usage["ratio"] = 0.86
        deleted = await retention.run_once()
        assert deleted >= 1 and s.min_phy_offset == deleted * CL_FILE
        min_after = [cq.min_offset for cq in queues if cq is not None]
        assert min_after[0] > 5 and min_after[1] > 0  # both queues lost messages "behind" had not consumed
        forced = retention.deleted["forced"]
        assert (forced.files, forced.bytes) == (deleted, deleted * CL_FILE)
        assert forced.dropped == {("behind", "T"): (min_after[0] - 5) + (min_after[1] - min_before[1])}
        assert retention.deleted["expired"].files == 0
        old = s.get_messages("behind", "T", 0, 5, 32)
        assert (old.status, old.next_begin_offset) == (GetMessageStatus.OFFSET_TOO_SMALL, min_after[0])
        check_consistency(s)
    finally:
        await s.shutdown()


async def test_the_report_says_what_is_reclaimable_and_who_holds_the_rest(tmp_path: Path) -> None:
    s = MessageStore(small_config(tmp_path, delete_when=other_hours(), file_reserved_time_hours=1,
                                  flush_commit_log_thorough_interval_ms=50))
    offsets: dict[str, dict[int, int]] = {}
    retention = await start_with_offsets(s, offsets)
    try:
        await filled(s, 6)
        await retention.run_once()
        report = retention.report
        assert report is not None and report.reclaimable_bytes == 0  # no group: every message is held
        assert {(h.group, h.topic) for h in report.holders} == {("(none)", "T")}
        assert report.held_bytes == s.max_phy_offset
        age(s, 1, hours=2)
        cq0, cq1 = s.find_consume_queue("T", 0), s.find_consume_queue("T", 1)
        assert cq0 is not None and cq1 is not None
        # "g" has consumed queue 0 past the third file and queue 1 past the fourth; "h" is at the start of queue 1
        third, fourth = 3 * CL_FILE, 4 * CL_FILE
        offsets["T@g"] = {0: next(i for i in range(cq0.max_offset) if unit_at(cq0, i) >= third),
                          1: next(i for i in range(cq1.max_offset) if unit_at(cq1, i) >= fourth)}
        await retention.run_once()  # not the hour, disk fine: nothing deleted
        report = retention.report
        assert report is not None
        assert (report.expired_bytes, report.consumed_bytes) == (CL_FILE, 2 * CL_FILE)
        assert report.held_bytes == s.max_phy_offset - third
        assert [(h.group, h.topic) for h in report.holders] == [("g", "T")]
        holder = report.holders[0]
        assert holder.bytes == s.max_phy_offset - third and third <= holder.oldest < fourth
        assert holder.messages == (cq0.max_offset - offsets["T@g"][0]) + (cq1.max_offset - offsets["T@g"][1])
        offsets["T@h"] = {0: cq0.max_offset, 1: 0}
        await retention.run_once()
        report = retention.report
        assert report is not None and report.consumed_bytes == 0 and report.expired_bytes == CL_FILE
        assert [h.group for h in report.holders] == ["h", "g"]  # the oldest backlog first
        assert report.holders[0].messages == cq1.max_offset
    finally:
        await s.shutdown()


async def start_with_offsets(s: MessageStore, offsets: dict[str, dict[int, int]]) -> RetentionService:
    """Start the store; its retention reads ``offsets`` as the consumer groups' (the broker hands it its tables)."""
    await s.start()
    assert s.retention is not None
    s.retention.offsets = lambda: offsets
    return s.retention


def unit_at(cq: ConsumeQueue, index: int) -> int:
    unit = cq.get_unit(index)
    assert unit is not None
    return unit[0]


async def test_manual_request_ignores_the_hour(tmp_path: Path) -> None:
    s = MessageStore(small_config(tmp_path, delete_when=other_hours(), file_reserved_time_hours=1,
                                  flush_commit_log_thorough_interval_ms=50))
    await s.start()
    try:
        await filled(s, 3)
        age(s, 2, hours=2)
        assert s.retention is not None
        assert await s.retention.run_once() == 0
        s.request_delete_expired_files()
        assert await s.retention.run_once() == 2
    finally:
        await s.shutdown()
