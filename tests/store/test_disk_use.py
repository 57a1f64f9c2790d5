"""Disk that follows the data: a store takes what it wrote plus its reserved windows (real files, st_blocks)."""

from __future__ import annotations

import os
from pathlib import Path

from pocketmq.store import MessageStore
from pocketmq.store.consume_queue import UNIT_SIZE
from tests.store.support import msg, small_config

METADATA_SLACK = 64 * 1024
"""checkpoint, lock, abort, config files: a few pages each."""


def disk_use(root: Path) -> int:
    """Bytes of disk every file under ``root`` takes (st_blocks, so sparse files count what they hold)."""
    return sum(os.stat(os.path.join(d, f)).st_blocks * 512 for d, _dirs, files in os.walk(root) for f in files)


def size_of(path: str) -> int:
    return os.path.getsize(path)


async def test_disk_use_is_the_data_plus_the_windows(tmp_path: Path) -> None:
    window, cq_window, queues, body = 1 << 20, 16 * 1024, 4, bytes(1000)
    s = MessageStore(small_config(tmp_path, mapped_file_size_commit_log=8 << 20,
                                  mapped_file_size_consume_queue=6000 * UNIT_SIZE,
                                  reserve_window_commit_log=window, reserve_window_consume_queue=cq_window))
    await s.start()
    try:
        for i in range(12_000):  # ~13 MiB: one roll-over, the window crossing into the next file
            assert (await s.put_message(msg(body=body, queue_id=i % queues))).is_ok
        written = s.max_phy_offset
        units = sum(s.get_max_offset_in_queue("T", q) for q in range(queues)) * UNIT_SIZE
        used = disk_use(tmp_path)
        assert written <= used <= written + window + units + queues * cq_window + METADATA_SLACK, (used, written)
    finally:
        await s.shutdown()


async def test_an_idle_store_with_rocketmq_file_sizes_takes_its_window(tmp_path: Path) -> None:
    config = small_config(tmp_path, mapped_file_size_commit_log=1 << 30, mapped_file_size_consume_queue=6_000_000)
    s = MessageStore(config)
    await s.start()
    try:
        assert size_of(os.path.join(config.commit_log_dir, "00000000000000000000")) == 1 << 30
        used = disk_use(tmp_path)
        assert config.reserve_window_commit_log <= used <= 64 << 20
    finally:
        await s.shutdown()
    assert disk_use(tmp_path) <= 64 << 20
