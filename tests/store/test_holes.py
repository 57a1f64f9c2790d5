"""Start-up never touches a page of a store file that has no block behind it.

On tmpfs even a read fault of a hole allocates the page, so on a full tmpfs it raises SIGBUS; recovery therefore
reads and zeroes only a file's data (``MappedFile.data_ranges``). The tmpfs test measures that directly: a read
of a hole turns it into data, so no file may have more data after a restart than before it, beyond what the store
reserved (fallocate leaves tmpfs pages "not up to date", which SEEK_DATA counts as holes).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from pocketmq.store import MessageStore
from pocketmq.store.mapped_file import MappedFile
from tests.broker.disk_mounts import mounted
from tests.store.support import CL_FILE, check_consistency, msg, small_config

PAGE = os.sysconf("SC_PAGE_SIZE")


def data_end(path: Path) -> int:
    """Offset past the last data page of ``path`` (0 when it is all hole)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        end, pos, size = 0, 0, os.fstat(fd).st_size
        while pos < size:
            try:
                begin = os.lseek(fd, pos, os.SEEK_DATA)
            except OSError:
                break
            end = pos = os.lseek(fd, begin, os.SEEK_HOLE)
        return end
    finally:
        os.close(fd)


def test_data_ranges_are_the_written_pages_and_zeroing_skips_holes(tmp_path: Path) -> None:
    mapped = MappedFile.create(str(tmp_path / file_name(0)), 1 << 20)
    try:
        assert list(mapped.data_ranges()) == [] and mapped.data_end() == 0
        mapped.view[0:10_000] = b"\x01" * 10_000
        mapped.view[512 << 10:(512 << 10) + 100] = b"\x02" * 100
        first, second = (0, 3 * PAGE), (512 << 10, (512 << 10) + PAGE)
        assert list(mapped.data_ranges()) == [first, second]
        assert list(mapped.data_ranges(5 * PAGE)) == [second] and mapped.data_end() == second[1]
        mapped.zero_from(5000)
        assert bytes(mapped.view[:5000]) == b"\x01" * 5000 and not any(mapped.view[5000:])
        assert list(mapped.data_ranges()) == [first, second]  # zeroed in place, no hole filled
    finally:
        mapped.destroy()


def file_name(offset: int) -> str:
    return f"{offset:020d}"


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Path]:
    with mounted("tmpfs", tmp_path, 16) as disk:
        yield disk


def store_files(root: Path) -> dict[Path, int]:
    return {path: data_end(path) for path in root.rglob("*") if path.is_file() and path.stat().st_size >= PAGE}


async def test_a_restart_after_a_crash_reads_no_hole(tmpfs: Path) -> None:
    root = tmpfs / "store"
    config = small_config(root, reserve_window_commit_log=16 << 10, reserve_window_consume_queue=PAGE,
                          max_hash_slot_num=1000, max_index_num=4000)
    first = MessageStore(config)
    await first.start()
    i = 0
    while first.max_phy_offset < 2 * CL_FILE + CL_FILE // 2:
        assert (await first.put_message(msg(queue_id=i % 2, body=bytes([i % 256]) * 700, keys=f"k{i}"))).is_ok
        i += 1
    await first.shutdown()
    (root / "abort").write_bytes(b"")  # as a crash leaves it: recovery is abnormal
    before = store_files(root)
    assert any(end == 0 for end in before.values())  # the next commit-log file, made ahead and never written

    second = MessageStore(config)
    await second.start()
    try:
        reserved = {Path(m.path): m.reserved for m in second._all_mapped_files()}
        if second.index is not None:
            reserved.update({Path(f.mapped.path): f.mapped.reserved for f in second.index.files})
        for path, end in store_files(root).items():
            assert end <= max(before.get(path, 0), -(-reserved.get(path, 0) // PAGE) * PAGE), path
        assert second.recovery_summary["abnormal"] is True
        assert check_consistency(second) == i
        assert (await second.put_message(msg(body=b"after"))).is_ok
    finally:
        await second.shutdown()
