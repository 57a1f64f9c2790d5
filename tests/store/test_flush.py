"""Flushing: SYNC_FLUSH group commit (one flush releases many writers, timeouts become statuses, the wait
is bounded), ASYNC_FLUSH in the background, and the checkpoint; flushes never run on the event loop."""

from __future__ import annotations

import asyncio
import itertools
import os
import threading
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

import pocketmq.store.flush
import pocketmq.store.mapped_file
from pocketmq.store import FlushDiskType, MessageStore, PutMessageStatus
from pocketmq.store.checkpoint import StoreCheckpoint
from pocketmq.store.flush import PagedFlushService
from pocketmq.store.mapped_file import MappedFile
from tests.helpers import eventually
from tests.store.support import msg, small_config


class FlushSpy:
    """Counts commit-log flushes, records their threads, and can hold them back."""

    def __init__(self) -> None:
        self.calls = 0
        self.threads: set[int] = set()
        self.gate = threading.Event()
        self.gate.set()
        self._real = pocketmq.store.mapped_file.run_flush_plan

    def __call__(self, plan: list[tuple[MappedFile, int]]) -> None:
        self.threads.add(threading.get_ident())
        self.gate.wait(timeout=30)
        self.calls += 1
        self._real(plan)


@pytest.fixture
def spy(monkeypatch: pytest.MonkeyPatch) -> FlushSpy:
    flush_spy = FlushSpy()
    monkeypatch.setattr(pocketmq.store.flush, "run_flush_plan", flush_spy)
    return flush_spy


@pytest.fixture
async def sync_store(tmp_path: Path, spy: FlushSpy) -> AsyncIterator[MessageStore]:
    s = MessageStore(small_config(tmp_path, flush_disk_type=FlushDiskType.SYNC_FLUSH, sync_flush_timeout_ms=300,
                                  max_sync_flush_waiters=100))
    await s.start()
    yield s
    spy.gate.set()
    await s.shutdown()


async def test_group_commit_releases_many_writers_per_flush(sync_store: MessageStore, spy: FlushSpy) -> None:
    results = await asyncio.gather(*(sync_store.put_message(msg(body=bytes(100))) for _ in range(100)))
    assert all(r.status is PutMessageStatus.PUT_OK for r in results)
    assert sync_store.flushed_phy_offset == sync_store.max_phy_offset
    ends = [r.append_result.end_offset for r in results if r.append_result]
    assert max(ends) == sync_store.max_phy_offset
    assert 1 <= spy.calls <= 10  # 100 writers, a handful of flushes
    assert threading.get_ident() not in spy.threads


async def test_flush_timeout_is_a_status_and_the_loop_stays_free(sync_store: MessageStore, spy: FlushSpy) -> None:
    spy.gate.clear()
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    task = asyncio.create_task(ticker())
    result = await sync_store.put_message(msg())
    task.cancel()
    assert result.status is PutMessageStatus.FLUSH_DISK_TIMEOUT
    assert result.status.is_stored and result.append_result is not None
    assert ticks >= 10  # the event loop kept running while the disk "hung"
    spy.gate.set()
    assert (await sync_store.put_message(msg())).status is PutMessageStatus.PUT_OK
    assert sync_store.get_max_offset_in_queue("T", 0) == 2


async def test_waiting_writers_are_bounded(sync_store: MessageStore, spy: FlushSpy) -> None:
    spy.gate.clear()
    waiting = [asyncio.create_task(sync_store.put_message(msg())) for _ in range(100)]
    await eventually(lambda: sync_store.runtime_info()["syncFlushWaiters"] == 100, timeout=5)
    busy = await sync_store.put_message(msg())
    assert busy.status is PutMessageStatus.OS_PAGECACHE_BUSY and busy.append_result is None
    no_wait = await sync_store.put_message(msg(wait_store_msg_ok=False))  # WAIT=false skips the flush wait
    assert no_wait.status is PutMessageStatus.PUT_OK
    spy.gate.set()
    assert all(r.status is PutMessageStatus.PUT_OK for r in await asyncio.gather(*waiting))


async def test_append_then_wait_for_flush(sync_store: MessageStore) -> None:
    result = sync_store.append(msg())
    assert result.is_ok and result.append_result is not None
    assert sync_store.needs_flush_wait() and not sync_store.needs_flush_wait(False)
    assert sync_store.has_flush_capacity()
    status = await sync_store.wait_for_flush(result.append_result.end_offset)
    assert status is PutMessageStatus.PUT_OK
    assert sync_store.flushed_phy_offset >= result.append_result.end_offset


async def test_shutdown_answers_waiting_writers(tmp_path: Path, spy: FlushSpy) -> None:
    s = MessageStore(small_config(tmp_path, flush_disk_type=FlushDiskType.SYNC_FLUSH))
    await s.start()
    spy.gate.clear()
    waiting = [asyncio.create_task(s.put_message(msg())) for _ in range(5)]
    await eventually(lambda: s.runtime_info()["syncFlushWaiters"] == 5, timeout=5)
    spy.gate.set()
    await s.shutdown()
    assert all(r.status is PutMessageStatus.PUT_OK for r in await asyncio.gather(*waiting))


async def test_async_flush_and_checkpoint_catch_up(tmp_path: Path, spy: FlushSpy) -> None:
    s = MessageStore(small_config(tmp_path, flush_commit_log_thorough_interval_ms=100,
                                  flush_consume_queue_thorough_interval_ms=100))
    await s.start()
    try:
        ready = s.wait_for_flush(10**9)
        assert ready.done() and ready.result() is PutMessageStatus.PUT_OK  # ASYNC_FLUSH never waits
        for _ in range(20):
            assert (await s.put_message(msg(body=bytes(50)))).is_ok
        target = s.max_phy_offset
        await eventually(lambda: s.flushed_phy_offset == target, timeout=5, message="async flush")
        path = os.path.join(s.config.store_path_root_dir, "checkpoint")
        def checkpointed() -> bool:
            written = StoreCheckpoint.load(path)
            return written.logics_offset == written.physic_offset == target

        await eventually(checkpointed, timeout=5, message="checkpoint")
        checkpoint = StoreCheckpoint.load(path)
        assert checkpoint.has_offsets and checkpoint.physic_offset == target
        assert threading.get_ident() not in spy.threads
    finally:
        await s.shutdown()


async def test_periodic_flush_asks_for_least_pages_and_for_everything_each_thorough_interval() -> None:
    class Probe(PagedFlushService):
        def __init__(self) -> None:
            super().__init__(interval_ms=10, least_pages=4, thorough_ms=80)
            self.asked: list[tuple[float, int]] = []

        async def flush(self, least_pages: int) -> None:
            self.asked.append((asyncio.get_running_loop().time(), least_pages))

    probe = Probe()
    started = asyncio.get_running_loop().time()
    probe.start()
    await eventually(lambda: sum(least == 0 for _t, least in probe.asked) >= 2, timeout=5)
    await probe.stop()
    assert probe.asked[0][0] - started >= 0.009 and probe.asked[0][1] == 4  # one interval first
    assert {least for _t, least in probe.asked} == {0, 4}
    thorough = [started] + [t for t, least in probe.asked if least == 0]
    assert all(b - a >= 0.079 for a, b in itertools.pairwise(thorough))


def test_checkpoint_layout_and_fallbacks(tmp_path: Path) -> None:
    checkpoint = StoreCheckpoint(11, 22, 0, 3000, 2000, True)
    data = checkpoint.encode()
    assert len(data) == 4096
    assert data[:24] == (11).to_bytes(8, "big") + (22).to_bytes(8, "big") + bytes(8)  # RocketMQ's three stamps
    assert StoreCheckpoint.decode(data) == checkpoint
    rocketmq_only = StoreCheckpoint.decode(data[:24] + bytes(4072))
    assert (rocketmq_only.physic_msg_timestamp, rocketmq_only.has_offsets) == (11, False)
    torn = StoreCheckpoint.decode(data[:30] + b"\xff" + data[31:])
    assert not torn.has_offsets
    path = str(tmp_path / "checkpoint")
    assert StoreCheckpoint.load(path) == StoreCheckpoint()
    checkpoint.write(path)
    assert StoreCheckpoint.load(path) == checkpoint
