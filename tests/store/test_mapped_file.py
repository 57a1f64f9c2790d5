"""MappedFile, MappedFileQueue and the background allocator, on real files."""

from __future__ import annotations

import concurrent.futures
import ctypes
import errno
import os
import threading
from pathlib import Path

import pytest

from pocketmq.store.errors import StoreError
from pocketmq.store.mapped_file import (
    MappedFile,
    MappedFileAllocator,
    MappedFileQueue,
    file_name_for,
    is_no_space,
    run_flush_plan,
)

SIZE = 8192


def test_file_names_are_20_digit_offsets() -> None:
    assert file_name_for(0) == "00000000000000000000"
    assert file_name_for(1073741824) == "00000000001073741824"


def test_create_select_flush_close(tmp_path: Path) -> None:
    path = str(tmp_path / file_name_for(SIZE))
    mapped = MappedFile.create(path, SIZE)
    assert os.path.getsize(path) == SIZE
    assert os.stat(path).st_blocks == 0  # sparse: its size costs no disk
    assert not os.path.exists(path + ".tmp")
    assert mapped.file_from_offset == SIZE and mapped.file_end_offset == 2 * SIZE
    mapped.view[0:5] = b"hello"
    assert mapped.select(0, 5) is None  # not written yet as far as readers know
    mapped.wrote_position = 5
    view = mapped.select(0, 5)
    assert view is not None and bytes(view) == b"hello"
    assert mapped.select(3, 5) is None
    assert mapped.flush(5) == 5
    assert not mapped.close()  # a reader still holds a view
    view.release()
    assert mapped.close()
    with open(path, "rb") as f:
        assert f.read(5) == b"hello"


def test_open_existing_extends_short_and_rejects_long(tmp_path: Path) -> None:
    short = tmp_path / file_name_for(0)
    short.write_bytes(b"abc")
    mapped = MappedFile.open_existing(str(short), SIZE)
    assert os.path.getsize(short) == SIZE
    assert bytes(mapped.view[:4]) == b"abc\x00"
    mapped.close()
    long = tmp_path / file_name_for(SIZE)
    long.write_bytes(bytes(SIZE + 1))
    with pytest.raises(StoreError):
        MappedFile.open_existing(str(long), SIZE)


def test_zero_from_clears_only_the_tail(tmp_path: Path) -> None:
    mapped = MappedFile.create(str(tmp_path / file_name_for(0)), 3 * (1 << 20))
    mapped.view[:] = b"\x07" * len(mapped.view)
    mapped.zero_from(1000)
    assert bytes(mapped.view[:1000]) == b"\x07" * 1000
    assert not any(mapped.view[1000:])
    mapped.close()


def test_warm_reads_without_changing(tmp_path: Path) -> None:
    mapped = MappedFile.create(str(tmp_path / file_name_for(0)), SIZE)
    mapped.view[10:12] = b"ok"
    mapped.warm()
    assert bytes(mapped.view[10:12]) == b"ok"
    mapped.close()


def test_queue_roll_find_truncate_and_load(tmp_path: Path) -> None:
    queue = MappedFileQueue(str(tmp_path / "q"), SIZE)
    first = queue.roll(0)
    first.wrote_position = SIZE
    second = queue.roll()
    second.wrote_position = 100
    assert [m.file_from_offset for m in queue.files] == [0, SIZE]
    assert (queue.min_offset, queue.max_offset) == (0, SIZE + 100)
    assert queue.find(0) is first and queue.find(SIZE - 1) is first and queue.find(SIZE + 5) is second
    assert queue.find(3 * SIZE) is None and queue.find(-1) is None
    third = queue.roll()
    removed = queue.truncate(SIZE + 50)
    assert removed == [third]
    assert second.wrote_position == 50 and queue.max_offset == SIZE + 50
    third.destroy()
    for m in queue.files:
        m.close()
    (tmp_path / "q" / "garbage.tmp").write_bytes(b"x")
    again = MappedFileQueue(str(tmp_path / "q"), SIZE)
    again.load()
    assert [m.file_from_offset for m in again.files] == [0, SIZE]
    assert not (tmp_path / "q" / "garbage.tmp").exists()
    head = again.remove_head(5)  # never the last file
    assert [m.file_from_offset for m in head] == [0]
    for m in head + again.files:
        m.close()


def test_queue_rejects_misaligned_file(tmp_path: Path) -> None:
    (tmp_path / file_name_for(100)).write_bytes(bytes(SIZE))
    with pytest.raises(StoreError):
        MappedFileQueue(str(tmp_path), SIZE).load()


def test_queue_empty_roll_starts_at_aligned_offset(tmp_path: Path) -> None:
    queue = MappedFileQueue(str(tmp_path), SIZE)
    mapped = queue.roll(3 * SIZE + 77)
    assert mapped.file_from_offset == 3 * SIZE
    assert queue.flushed_where == 3 * SIZE
    mapped.close()


def test_flush_plan_and_apply(tmp_path: Path) -> None:
    queue = MappedFileQueue(str(tmp_path), SIZE)
    a = queue.roll(0)
    a.wrote_position = SIZE
    b = queue.roll()
    b.wrote_position = 10
    plan, target = queue.flush_plan()
    assert [(m.file_from_offset, pos) for m, pos in plan] == [(0, SIZE), (SIZE, 10)]
    assert target == SIZE + 10 and queue.dirty_bytes() == SIZE + 10
    run_flush_plan(plan)
    queue.apply_flushed(plan, target)
    assert queue.flushed_where == SIZE + 10 and queue.dirty_bytes() == 0
    assert queue.flush_plan()[0] == []
    a.close()
    b.close()


def test_allocator_creates_ahead_in_its_thread(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    executor = concurrent.futures.ThreadPoolExecutor(1)
    allocator = MappedFileAllocator(executor)
    threads: list[str] = []
    original = MappedFile.create

    def spy(path: str, size: int) -> MappedFile:
        threads.append(threading.current_thread().name)
        return original(path, size)

    monkeypatch.setattr(MappedFile, "create", spy)
    try:
        queue = MappedFileQueue(str(tmp_path), SIZE, allocator, warm=True)
        first = queue.roll(0)  # nobody asked ahead: made here (and the next one requested)
        assert threads[0] == threading.current_thread().name
        future = allocator.request(os.path.join(str(tmp_path), file_name_for(SIZE)), SIZE, warm=True)
        assert future is not None
        future.result(timeout=10)
        assert threads[-1] != threading.current_thread().name
        first.wrote_position = SIZE
        second = queue.roll()
        assert second is future.result()
    finally:
        allocator.close()
        executor.shutdown(wait=True)
    for m in queue.files:
        m.close()
    assert sorted(os.listdir(tmp_path)) == [file_name_for(0), file_name_for(SIZE), file_name_for(2 * SIZE)]


def test_closing_the_allocator_mid_creation_closes_the_file(tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Shutdown while the next file is still being created: that file is closed as soon as it exists."""
    executor = concurrent.futures.ThreadPoolExecutor(1)
    allocator = MappedFileAllocator(executor)
    creating, release = threading.Event(), threading.Event()
    original_create = MappedFile.create

    def slow_create(path: str, size: int) -> MappedFile:
        creating.set()
        assert release.wait(10)
        return original_create(path, size)

    monkeypatch.setattr(MappedFile, "create", slow_create)
    future = allocator.request(os.path.join(str(tmp_path), file_name_for(0)), SIZE, warm=True, reserve=SIZE)
    assert future is not None and creating.wait(10)
    allocator.close()  # the file is not created yet
    release.set()
    executor.shutdown(wait=True)
    assert future.result().closed


def blocks(path: str | Path) -> int:
    """Bytes of disk a file takes."""
    return os.stat(path).st_blocks * 512


def test_reserve_allocates_and_publishes_only_the_range(tmp_path: Path) -> None:
    mapped = MappedFile.create(str(tmp_path / file_name_for(0)), 1 << 20)
    mapped.reserve(100, 5000, warm=True)  # widened to pages
    assert mapped.reserved == 8192 and blocks(mapped.path) == 8192
    mapped.reserve(0, 4096, warm=False)  # already reserved: nothing to do
    assert mapped.reserved == 8192
    mapped.reserve(0, 2 << 20, warm=False)  # capped at the file
    assert mapped.reserved == 1 << 20 and blocks(mapped.path) == 1 << 20
    mapped.close()
    mapped.reserve(0, 1, warm=True)  # a closed file is left alone


def test_window_stays_ahead_of_the_writer_and_crosses_into_the_next_file(tmp_path: Path) -> None:
    executor = concurrent.futures.ThreadPoolExecutor(1)
    window = 64 * 1024
    queue = MappedFileQueue(str(tmp_path), 256 * 1024, MappedFileAllocator(executor), warm=True, window=window)
    try:
        first = queue.roll(0)  # the next one is requested (sparse)
        assert not queue.make_room(first, 100)  # nothing reserved yet: a reservation is asked for
        wait_reservation(queue)
        assert queue.make_room(first, 100) and first.reserved >= 100 + window
        assert first.limit <= first.reserved
        written = 0
        while written < first.file_size - 100:  # a writer that only writes where make_room said yes
            end = min(written + 1000, first.file_size)
            if end > first.limit and not queue.make_room(first, end):
                wait_reservation(queue)
                continue
            written = first.wrote_position = end
            assert blocks(first.path) <= _page_up(written) + window + 4096
        wait_reservation(queue)
        following = queue.allocator.pending(os.path.join(str(tmp_path), file_name_for(first.file_size)))
        assert following is not None
        second = following.result(timeout=10)
        assert 0 < second.reserved <= window and blocks(second.path) == second.reserved
    finally:
        queue.allocator.close()
        executor.shutdown(wait=True)
        for m in queue.files:
            m.close()


def test_reserve_now_and_a_full_disk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    queue = MappedFileQueue(str(tmp_path), 256 * 1024, MappedFileAllocator(None), window=16384)
    seen: list[tuple[str, int | None]] = []
    queue.allocator.on_no_space = lambda path, exc: seen.append((path, exc.errno))
    mapped = queue.roll(0)
    queue.reserve_now(mapped, 5000)
    assert mapped.reserved >= 5000

    def full(fd: int, offset: int, length: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "posix_fallocate", full)
    reserved = mapped.reserved
    with pytest.raises(OSError) as caught:
        queue.reserve_now(mapped, reserved + 100)
    assert is_no_space(caught.value) and mapped.reserved == reserved  # nothing published
    assert seen and seen[0] == (mapped.path, errno.ENOSPC)
    mapped.close()


def wait_reservation(queue: MappedFileQueue) -> None:
    pending = queue.reservation()
    if pending is not None:
        pending.result(timeout=10)


def _page_up(n: int) -> int:
    return -(-n // 4096) * 4096


def test_allocator_reuses_an_existing_zero_file(tmp_path: Path) -> None:
    path = tmp_path / file_name_for(0)
    path.write_bytes(bytes(SIZE))
    inode = os.stat(path).st_ino
    mapped = MappedFileAllocator(None).take(str(path), SIZE)
    assert os.stat(path).st_ino == inode
    mapped.close()


def _vm_flags(mapped: MappedFile) -> list[str]:
    """The kernel's VmFlags of the mapping of ``mapped`` (from /proc/self/smaps)."""
    anchor = ctypes.c_char.from_buffer(mapped.mm)
    address = ctypes.addressof(anchor)
    del anchor  # release the export, or the file could not be closed
    with open("/proc/self/smaps") as smaps:
        inside = False
        for line in smaps:
            head = line.split()[0]
            if "-" in head and ":" not in head:
                start, end = (int(x, 16) for x in head.split("-"))
                inside = start <= address < end
            elif inside and line.startswith("VmFlags:"):
                return line.split()[1:]
    raise AssertionError("mapping not found in /proc/self/smaps")


@pytest.mark.skipif(not os.path.exists("/proc/self/smaps"), reason="needs Linux's /proc/self/smaps")
def test_the_file_being_written_is_mapped_random_read_until_the_next_roll(tmp_path: Path) -> None:
    """A write fault on the file being written must not read around it (``MADV_RANDOM``: VmFlags ``rr``); once
    full, the file reads ahead again for its readers."""
    queue = MappedFileQueue(str(tmp_path), SIZE)
    first = queue.roll()
    assert "rr" in _vm_flags(first)
    first.wrote_position = SIZE
    second = queue.roll()
    assert "rr" in _vm_flags(second) and "rr" not in _vm_flags(first)
    for mapped in (first, second):
        assert mapped.close()


def test_warm_reads_a_reserved_range_in_steps_without_writing(tmp_path: Path) -> None:
    """The warm-up only reads (fadvise): the file stays zeros and its disk use is what was reserved."""
    mapped = MappedFile.create(str(tmp_path / file_name_for(0)), 4 << 20)
    try:
        mapped.reserve(0, 3 << 20, warm=True)  # three 1 MiB steps
        assert mapped.reserved == 3 << 20
        assert not any(mapped.view[:4 << 20])
        assert os.stat(mapped.path).st_blocks * 512 <= (3 << 20) + 64 * 1024
    finally:
        assert mapped.close()
