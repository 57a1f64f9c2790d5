"""The store's configuration: one frozen dataclass, RocketMQ's ``MessageStoreConfig`` defaults.

:meth:`StoreConfig.from_properties` reads RocketMQ's camelCase property names (``flushDiskType``,
``mappedFileSizeCommitLog``, ...) so a broker can hand it the store part of a ``broker.properties`` file;
:data:`PROPERTY_NAMES` lists the keys it understands, so the broker can reject the ones nobody does.
"""

from __future__ import annotations

import enum
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pocketmq.common.config import DEFAULT_DELAY_LEVELS, from_named_properties, parse_delay_levels
from pocketmq.common.record import parse_host_port

CQ_STORE_UNIT_SIZE = 20
OS_PAGE_SIZE = 4096


class FlushDiskType(enum.Enum):
    """When a put is acknowledged: after the page-cache write, or after the disk flush."""

    ASYNC_FLUSH = "ASYNC_FLUSH"
    SYNC_FLUSH = "SYNC_FLUSH"


class BrokerRole(enum.Enum):
    """The store only cares whether it is a SLAVE (then it accepts only replicated bytes)."""

    ASYNC_MASTER = "ASYNC_MASTER"
    SYNC_MASTER = "SYNC_MASTER"
    SLAVE = "SLAVE"




def parse_delete_when(text: str) -> frozenset[int]:
    """``"04"`` or ``"04;16"`` -> the hours of the day at which expired files are deleted."""
    hours = set()
    for item in text.split(";"):
        item = item.strip()
        if not item.isdigit() or not 0 <= int(item) <= 23:
            raise ValueError(f"bad deleteWhen hour {item!r} in {text!r}")
        hours.add(int(item))
    return frozenset(hours)


@dataclass(frozen=True, kw_only=True)
class StoreConfig:
    """Everything the store can be told. Sizes are bytes, intervals milliseconds unless named otherwise."""

    store_path_root_dir: str = field(metadata={"default": "store"})
    """The store's directory: commit log, consume queues, index, metadata, checkpoint (a broker's default is
    ``store`` in its working directory)."""
    store_path_commit_log: str = ""
    """Defaults to ``<root>/commitlog``."""
    mapped_file_size_commit_log: int = 1 << 30
    """Size of each commit-log file (created sparse)."""
    mapped_file_size_consume_queue: int = 300_000 * CQ_STORE_UNIT_SIZE
    """Size of each consume-queue file: 300,000 units of 20 bytes."""
    flush_disk_type: FlushDiskType = FlushDiskType.ASYNC_FLUSH
    """ASYNC_FLUSH: a put is answered after the page-cache write; SYNC_FLUSH: after the disk flush."""
    broker_role: BrokerRole = BrokerRole.ASYNC_MASTER
    flush_interval_commit_log_ms: int = 500
    """ASYNC_FLUSH: how often the commit log is flushed."""
    flush_commit_log_least_pages: int = 4
    """A periodic commit-log flush writes only once this many pages are dirty (not the thorough one)."""
    flush_commit_log_thorough_interval_ms: int = 10_000
    """Every this often a periodic commit-log flush writes whatever is dirty."""
    flush_interval_consume_queue_ms: int = 1000
    """How often the consume queues are flushed."""
    flush_consume_queue_least_pages: int = 2
    """A periodic consume-queue flush writes only once this many pages are dirty (not the thorough one)."""
    flush_consume_queue_thorough_interval_ms: int = 60_000
    """Every this often a periodic consume-queue flush writes whatever is dirty."""
    sync_flush_timeout_ms: int = 5000
    """SYNC_FLUSH: a put whose flush takes longer is answered FLUSH_DISK_TIMEOUT (it is stored)."""
    max_sync_flush_waiters: int = 65_536
    """Bound on producers waiting for a SYNC_FLUSH; past it puts get OS_PAGECACHE_BUSY (nothing stored)."""
    max_message_size: int = 4 * 1024 * 1024
    """Largest record the store accepts, header and properties included (a batch: all its records)."""
    delete_when: str = "04"
    """Hours of the day (``04``, ``04;16``) at which expired commit-log files are deleted."""
    file_reserved_time_hours: float = 72
    """A commit-log file whose last write is older than this is expired."""
    disk_max_used_space_ratio: int = 75
    """Percent of the disk above which expired files are deleted at any hour."""
    disk_space_clean_forcibly_ratio: int = 85
    """Percent above which, with ``cleanFileForciblyEnable=true``, the oldest files are deleted even if not expired
    (never the one being written)."""
    disk_space_warning_level_ratio: int = 90
    """Percent above which puts are refused (SERVICE_NOT_AVAILABLE) until space is freed."""
    clean_resource_interval_ms: int = 10_000
    """How often retention runs (and a full disk is checked again)."""
    clean_file_forcibly_enable: bool = False
    """RocketMQ's forced cleaning: above ``diskSpaceCleanForciblyRatio`` (or the warning ratio) delete the oldest
    commit-log files whatever their age, unconsumed messages included. Off by default (RocketMQ's default is on):
    a full disk then refuses sends and deletes nothing younger than ``fileReservedTime``."""
    delete_files_batch_max: int = 10
    check_crc_on_recover: bool = True
    """Recovery checks every record's body CRC (a record that fails ends the valid log)."""
    store_host: str = "127.0.0.1:10911"
    """``brokerIP1:listenPort``, written into every record and message id."""
    warm_mapped_file: bool = True
    """Also read each reserved window into the page cache (see ``mapped_file``); off, it is only reserved."""
    reserve_window_commit_log: int = field(default=32 << 20, metadata={"unit": "bytes"})
    """Bytes of commit log kept reserved (``posix_fallocate``) and warmed ahead of the write position, in the
    background; refilled when half of it is used. The disk a store takes is its data plus this window."""
    reserve_window_consume_queue: int = field(default=64 << 10, metadata={"unit": "bytes"})
    """The same window for each consume queue."""
    max_transfer_bytes_on_message_in_memory: int = 256 * 1024
    """Most body bytes one pull answers (at least one message, whatever its size)."""
    max_transfer_count_on_message_in_memory: int = 32
    """Most messages one pull answers."""
    access_message_in_memory_max_ratio: int = 40
    """Share of the machine's memory taken as "hot": a pull reading further behind the log's end is told
    to read from a slave (with ``slaveReadEnable``)."""
    message_delay_level: str = DEFAULT_DELAY_LEVELS
    """The delays of levels 1, 2, ... (``1s 5s 10s ...``; units ms, s, m, h, d)."""
    message_index_enable: bool = True
    """Build the message index (``index/``) that queries by key and unique key read."""
    max_hash_slot_num: int = 5_000_000
    """Hash slots per index file."""
    max_index_num: int = 20_000_000
    """Keys per index file (plus one: entry 0 is never used); a full file is followed by a new one."""
    max_msgs_num_batch: int = 64
    """Most records one query by key answers."""
    default_query_max_num: int = 32
    """``maxNum`` of a query by unique key (the client's own is ignored, as in RocketMQ)."""
    timer_max_delay_sec: int = field(default=3 * 24 * 3600, metadata={"unit": "s"})
    """Timer messages (``TIMER_DELIVER_MS``...) may be due at most this far ahead; later ones are refused."""
    max_open_consume_queue_files: int = field(default=0, metadata={"unit": "count"})
    """Consume-queue files mapped at once (each a map and two descriptors); idle queues are released and
    mapped again when used. 0: derived from ``ulimit -n`` and ``vm.max_map_count`` (``store.queue_table``)."""

    def __post_init__(self) -> None:
        _check(bool(self.store_path_root_dir), "store_path_root_dir must be set")
        _check(self.mapped_file_size_commit_log >= OS_PAGE_SIZE, "mapped_file_size_commit_log below 4096")
        _check(self.mapped_file_size_consume_queue >= CQ_STORE_UNIT_SIZE
               and self.mapped_file_size_consume_queue % CQ_STORE_UNIT_SIZE == 0,
               "mapped_file_size_consume_queue must be a positive multiple of 20")
        _check(self.max_message_size > 0, "max_message_size must be positive")
        _check(self.reserve_window_commit_log >= OS_PAGE_SIZE, "reserve_window_commit_log below 4096")
        _check(self.reserve_window_consume_queue >= OS_PAGE_SIZE, "reserve_window_consume_queue below 4096")
        _check(self.sync_flush_timeout_ms > 0, "sync_flush_timeout_ms must be positive")
        _check(self.max_sync_flush_waiters > 0, "max_sync_flush_waiters must be positive")
        _check(self.file_reserved_time_hours > 0, "file_reserved_time_hours must be positive")
        for name in ("disk_max_used_space_ratio", "disk_space_clean_forcibly_ratio",
                     "disk_space_warning_level_ratio", "access_message_in_memory_max_ratio"):
            _check(1 <= getattr(self, name) <= 100, f"{name} must be a percentage")
        for name in ("flush_interval_commit_log_ms", "flush_interval_consume_queue_ms",
                     "clean_resource_interval_ms", "max_transfer_bytes_on_message_in_memory",
                     "max_transfer_count_on_message_in_memory", "delete_files_batch_max"):
            _check(getattr(self, name) > 0, f"{name} must be positive")
        for name in ("max_hash_slot_num", "max_msgs_num_batch", "default_query_max_num"):
            _check(getattr(self, name) > 0, f"{name} must be positive")
        _check(self.max_index_num >= 2, "max_index_num must be at least 2")
        _check(self.timer_max_delay_sec > 0, "timer_max_delay_sec must be positive")
        _check(self.max_open_consume_queue_files >= 0, "max_open_consume_queue_files must not be negative")
        parse_delete_when(self.delete_when)
        parse_delay_levels(self.message_delay_level)
        parse_host_port(self.store_host)

    @property
    def commit_log_dir(self) -> str:
        """Directory of the commit-log files."""
        return self.store_path_commit_log or os.path.join(self.store_path_root_dir, "commitlog")

    @property
    def consume_queue_dir(self) -> str:
        """``<root>/consumequeue`` (then ``<topic>/<queueId>/``)."""
        return os.path.join(self.store_path_root_dir, "consumequeue")

    @property
    def config_dir(self) -> str:
        """``<root>/config``: topics.json, consumerOffset.json, ..."""
        return os.path.join(self.store_path_root_dir, "config")

    @property
    def delay_levels_ms(self) -> tuple[int, ...]:
        """Delay of each level (index 0 = level 1) in ms."""
        return parse_delay_levels(self.message_delay_level)

    @property
    def delete_hours(self) -> frozenset[int]:
        """Hours of the day when expired files are deleted."""
        return parse_delete_when(self.delete_when)

    @property
    def store_host_bytes(self) -> bytes:
        """``store_host`` as the record's STOREHOSTADDRESS field."""
        return parse_host_port(self.store_host)

    @classmethod
    def from_properties(cls, properties: Mapping[str, str], **overrides: Any) -> StoreConfig:
        """Build from RocketMQ property names (keys not in :data:`PROPERTY_NAMES` are ignored here; the
        broker decides what an unknown key means). ``overrides`` use field names and win."""
        return from_named_properties(cls, properties, PROPERTY_NAMES, overrides)


PROPERTY_NAMES: dict[str, str] = {
    "storePathRootDir": "store_path_root_dir",
    "storePathCommitLog": "store_path_commit_log",
    "mappedFileSizeCommitLog": "mapped_file_size_commit_log",
    "mappedFileSizeConsumeQueue": "mapped_file_size_consume_queue",
    "flushDiskType": "flush_disk_type",
    "brokerRole": "broker_role",
    "flushIntervalCommitLog": "flush_interval_commit_log_ms",
    "flushCommitLogLeastPages": "flush_commit_log_least_pages",
    "flushCommitLogThoroughInterval": "flush_commit_log_thorough_interval_ms",
    "flushIntervalConsumeQueue": "flush_interval_consume_queue_ms",
    "flushConsumeQueueLeastPages": "flush_consume_queue_least_pages",
    "flushConsumeQueueThoroughInterval": "flush_consume_queue_thorough_interval_ms",
    "syncFlushTimeout": "sync_flush_timeout_ms",
    "maxMessageSize": "max_message_size",
    "deleteWhen": "delete_when",
    "fileReservedTime": "file_reserved_time_hours",
    "diskMaxUsedSpaceRatio": "disk_max_used_space_ratio",
    # System properties in RocketMQ (rocketmq.broker.diskSpace...); config keys here.
    "diskSpaceCleanForciblyRatio": "disk_space_clean_forcibly_ratio",
    "diskSpaceWarningLevelRatio": "disk_space_warning_level_ratio",
    "cleanResourceInterval": "clean_resource_interval_ms",
    "cleanFileForciblyEnable": "clean_file_forcibly_enable",
    "checkCRCOnRecover": "check_crc_on_recover",
    "warmMapedFileEnable": "warm_mapped_file",
    # PocketMQ's own: RocketMQ pre-allocates whole files or nothing.
    "reserveWindowCommitLog": "reserve_window_commit_log",
    "reserveWindowConsumeQueue": "reserve_window_consume_queue",
    "maxTransferBytesOnMessageInMemory": "max_transfer_bytes_on_message_in_memory",
    "maxTransferCountOnMessageInMemory": "max_transfer_count_on_message_in_memory",
    "accessMessageInMemoryMaxRatio": "access_message_in_memory_max_ratio",
    "messageDelayLevel": "message_delay_level",
    "messageIndexEnable": "message_index_enable",
    "maxHashSlotNum": "max_hash_slot_num",
    "maxIndexNum": "max_index_num",
    "maxMsgsNumBatch": "max_msgs_num_batch",
    "defaultQueryMaxNum": "default_query_max_num",
    "timerMaxDelaySec": "timer_max_delay_sec",
    # PocketMQ's own: the bound on mapped consume-queue files.
    "maxOpenConsumeQueueFiles": "max_open_consume_queue_files",
}
"""RocketMQ property name -> StoreConfig field."""


def _check(ok: bool, message: str) -> None:
    if not ok:
        raise ValueError(message)


