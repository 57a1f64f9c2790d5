"""The MessageStore surface: configuration, lifecycle, topics, admin reads."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from pocketmq.common.config import parse_delay_levels
from pocketmq.store import (
    BrokerRole,
    FlushDiskType,
    GetMessageStatus,
    MessageStore,
    StoreConfig,
    StoreError,
    StoreNotRunningError,
)
from pocketmq.store.config import PROPERTY_NAMES, parse_delete_when
from pocketmq.store.mapped_file import MappedFile
from tests.store.support import check_consistency, exists, msg, small_config


def test_config_defaults_are_rocketmqs() -> None:
    config = StoreConfig(store_path_root_dir="/tmp/x")
    assert config.mapped_file_size_commit_log == 1 << 30
    assert config.mapped_file_size_consume_queue == 300_000 * 20
    assert config.flush_disk_type is FlushDiskType.ASYNC_FLUSH
    assert (config.flush_interval_commit_log_ms, config.flush_commit_log_least_pages) == (500, 4)
    assert config.flush_commit_log_thorough_interval_ms == 10_000
    assert (config.flush_interval_consume_queue_ms, config.sync_flush_timeout_ms) == (1000, 5000)
    assert config.max_message_size == 4 * 1024 * 1024
    assert (config.delete_when, config.file_reserved_time_hours, config.disk_max_used_space_ratio) == ("04", 72, 75)
    assert config.commit_log_dir == "/tmp/x/commitlog"
    assert config.delay_levels_ms[:3] == (1000, 5000, 10_000) and len(config.delay_levels_ms) == 18
    assert config.delete_hours == frozenset({4})
    assert config.store_host_bytes == bytes([127, 0, 0, 1, 0, 0, 0x2A, 0x9F])


def test_config_from_properties() -> None:
    config = StoreConfig.from_properties({
        "storePathRootDir": "/data/store", "flushDiskType": "SYNC_FLUSH", "brokerRole": "SLAVE",
        "mappedFileSizeCommitLog": "65536", "fileReservedTime": "48", "deleteWhen": "04;16",
        "checkCRCOnRecover": "false", "brokerName": "ignored-here", "listenPort": "10911",
    }, store_host="10.0.0.1:10911")
    assert config.flush_disk_type is FlushDiskType.SYNC_FLUSH and config.broker_role is BrokerRole.SLAVE
    assert (config.mapped_file_size_commit_log, config.file_reserved_time_hours) == (65536, 48.0)
    assert config.delete_hours == frozenset({4, 16}) and config.check_crc_on_recover is False
    assert config.store_host == "10.0.0.1:10911"
    assert "storePathRootDir" in PROPERTY_NAMES
    with pytest.raises(ValueError, match="flushDiskType"):
        StoreConfig.from_properties({"storePathRootDir": "/x", "flushDiskType": "SOMETIMES"})


@pytest.mark.parametrize("overrides", [
    {"store_path_root_dir": ""}, {"mapped_file_size_consume_queue": 30}, {"mapped_file_size_commit_log": 100},
    {"max_message_size": 0}, {"delete_when": "25"}, {"delete_when": "4;x"}, {"message_delay_level": "1x"},
    {"disk_max_used_space_ratio": 0}, {"store_host": "nohost"}, {"sync_flush_timeout_ms": 0},
])
def test_bad_config_is_refused(overrides: dict[str, object]) -> None:
    values: dict[str, object] = {"store_path_root_dir": "/x", **overrides}
    with pytest.raises(ValueError):
        StoreConfig(**values)  # type: ignore[arg-type]


def test_delay_and_hour_parsers() -> None:
    assert parse_delay_levels("1s 2m 3h 1d") == (1000, 120_000, 10_800_000, 86_400_000)
    assert parse_delete_when("04; 16") == frozenset({4, 16})


async def test_delete_topic(store: MessageStore) -> None:
    for i in range(70):
        await store.put_message(msg(topic="Gone", queue_id=i % 2))
    await store.put_message(msg(topic="Kept"))
    root = Path(store.config.consume_queue_dir)
    assert store.topics() == {"Gone": [0, 1], "Kept": [0]}
    assert await store.delete_topic("Gone")
    assert not await store.delete_topic("Gone")
    assert not exists(root / "Gone")
    assert store.get_messages("g", "Gone", 0, 0, 32).status is GetMessageStatus.NO_MESSAGE_IN_QUEUE
    assert store.get_max_offset_in_queue("Gone", 0) == 0
    again = await store.put_message(msg(topic="Gone"))
    assert again.append_result is not None and again.append_result.queue_offset == 0
    assert store.get_messages("g", "Gone", 0, 0, 32).message_count == 1


async def test_runtime_info_and_reads_after_shutdown(tmp_path: Path) -> None:
    s = MessageStore(small_config(tmp_path))
    with pytest.raises(StoreNotRunningError):
        s.get_messages("g", "T", 0, 0, 1)
    await s.start()
    await s.put_message(msg())
    info = s.runtime_info()
    assert info["commitLogMaxOffset"] == s.max_phy_offset and info["writable"] is True
    assert info["consumeQueues"] == 1 and info["commitLogFiles"] == 1
    assert s.is_running and s.min_phy_offset == 0
    check_consistency(s)
    await s.shutdown()
    await s.shutdown()  # idempotent
    assert not s.is_running
    with pytest.raises(StoreNotRunningError):
        s.get_messages("g", "T", 0, 0, 1)
    assert not s.append_to_commit_log(s.max_phy_offset, b"x")


async def test_prepare_queue_then_append_without_file_creation(store: MessageStore,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    assert not store.queue_ready("N", 3)
    assert await store.prepare_queue("N", 3)
    assert store.queue_ready("N", 3)
    created_here: list[str] = []
    original = MappedFile.create

    def spy(path: str, size: int) -> MappedFile:
        if threading.current_thread() is threading.main_thread():
            created_here.append(path)
        return original(path, size)

    monkeypatch.setattr(MappedFile, "create", spy)
    result = store.append(msg(topic="N", queue_id=3))
    assert result.is_ok and store.get_max_offset_in_queue("N", 3) == 1
    assert created_here == []  # no file was created on the event loop
    assert await store.prepare_queue("N", 3)  # ready: nothing to do


async def test_a_failed_start_releases_the_directory(tmp_path: Path) -> None:
    config = small_config(tmp_path)
    misaligned = Path(config.commit_log_dir) / "00000000000000000100"
    write_bytes(misaligned, bytes(10))
    with pytest.raises(StoreError, match="multiple of the file size"):
        await MessageStore(config).start()
    remove(misaligned)
    s = MessageStore(config)
    await s.start()  # the lock was released
    await s.shutdown()


def write_bytes(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def remove(path: Path) -> None:
    path.unlink()
