"""A slave whose reserved window cannot keep up with its master: replication waits for the store's allocation
thread (reading from the master stops meanwhile) and never reserves or creates a file on the event loop, and the
slave still ends byte-identical."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Coroutine
from typing import Any

import pytest

from pocketmq.store import MessageStore
from pocketmq.store import mapped_file as mapped_file_module
from tests.ha.support import Cluster, append_messages, assert_commit_logs_identical, assert_queues_serve_the_same
from tests.helpers import eventually


class _Calls:
    """Where the slave's blocking file work ran: (thread id, what, path) of each call."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.seen: list[tuple[int, str, str]] = []

    def add(self, what: str, path: str) -> None:
        if path.startswith(self.root):
            self.seen.append((threading.get_ident(), what, path))


def _watch_slave_file_work(monkeypatch: pytest.MonkeyPatch, calls: _Calls) -> None:
    """Record every fallocate, file creation and inline reservation of the slave's files; slow the
    reservations down (2 ms each) so that a master at full speed outruns the slave's 4 KiB windows."""
    real_reserve = mapped_file_module.MappedFile.reserve
    real_create = mapped_file_module.MappedFile.create.__func__  # type: ignore[attr-defined]
    real_reserve_now = mapped_file_module.MappedFileQueue.reserve_now
    real_fallocate = os.posix_fallocate
    fds: dict[int, str] = {}

    def reserve(self: mapped_file_module.MappedFile, start: int, end: int, *, warm: bool) -> None:
        if self.path.startswith(calls.root):
            fds[self.fd] = self.path
            time.sleep(0.002)
        real_reserve(self, start, end, warm=warm)

    def fallocate(fd: int, offset: int, length: int) -> None:
        calls.add("fallocate", fds.get(fd, ""))
        real_fallocate(fd, offset, length)

    def create(cls: type[mapped_file_module.MappedFile], path: str, file_size: int) -> mapped_file_module.MappedFile:
        calls.add("create", path)
        return real_create(cls, path, file_size)  # type: ignore[no-any-return]

    def reserve_now(self: mapped_file_module.MappedFileQueue, mapped: mapped_file_module.MappedFile, end: int) -> None:
        calls.add("reserve_now", mapped.path)
        real_reserve_now(self, mapped, end)

    monkeypatch.setattr(mapped_file_module.MappedFile, "reserve", reserve)
    monkeypatch.setattr(mapped_file_module.MappedFile, "create", classmethod(create))
    monkeypatch.setattr(mapped_file_module.MappedFileQueue, "reserve_now", reserve_now)
    monkeypatch.setattr(os, "posix_fallocate", fallocate)  # the module calls os.posix_fallocate


def _count_waits(slave: MessageStore) -> dict[str, int]:
    """Count the replication client's waits for the slave store (wrapping the two store calls)."""
    counts = {"commit_log": 0, "dispatch": 0}
    wait_room, prepare = slave.wait_commit_log_room, slave.prepare_dispatch

    def counted_wait_room(offset: int, size: int) -> Coroutine[Any, Any, None]:
        counts["commit_log"] += 1
        return wait_room(offset, size)

    def counted_prepare() -> Coroutine[Any, Any, None]:
        counts["dispatch"] += 1
        return prepare()

    slave.wait_commit_log_room = counted_wait_room  # type: ignore[method-assign]
    slave.prepare_dispatch = counted_prepare  # type: ignore[method-assign]
    return counts


async def test_slave_faster_than_its_window_waits_off_the_loop_and_ends_identical(
        cluster: Cluster, monkeypatch: pytest.MonkeyPatch) -> None:
    master, service = await cluster.start_master()
    slave = await cluster.start_store("slave", slave=True, reserve_window_commit_log=4096,
                                      reserve_window_consume_queue=4096)
    calls = _Calls(str(cluster.root / "slave"))
    _watch_slave_file_work(monkeypatch, calls)
    waits = _count_waits(slave)
    loop_thread = threading.get_ident()
    cluster.start_client(slave, service)
    await eventually(lambda: service.connection_count == 1, message="slave attached")
    append_messages(master, 300)  # ~230 KB at once: transfers far larger than the slave's window
    for round_no in range(4):
        append_messages(master, 200, seed=round_no + 1)
        await eventually(lambda: slave.max_phy_offset == master.max_phy_offset, timeout=30.0,
                         message="slave caught up")
    assert waits["commit_log"] > 10, waits  # the window really was behind, many times
    assert waits["dispatch"] > 0, waits  # and consume-queue files were made while replication waited
    assert len(await assert_commit_logs_identical(master, slave)) >= 10
    assert await assert_queues_serve_the_same(master, slave) == 1100
    kinds = {what for _thread, what, _path in calls.seen}
    assert {"fallocate", "create"} <= kinds, kinds
    assert "reserve_now" not in kinds, "a reservation was made inline"
    on_loop = [(what, path) for thread, what, path in calls.seen if thread == loop_thread]
    assert on_loop == [], f"blocking file work on the event loop: {on_loop[:5]}"
