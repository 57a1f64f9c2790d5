"""Helpers shared by the store tests: tiny configurations, message factories, a consistency checker."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pocketmq.common.message import encode_properties
from pocketmq.common.record import MessageRecord, decode_record
from pocketmq.common.sysflag import MessageSysFlag
from pocketmq.store import MessageExtBrokerInner, MessageStore, StoreConfig
from pocketmq.store.consume_queue import BLANK_UNIT_SIZE

CL_FILE = 64 * 1024
CQ_FILE = 20 * 64


def exists(path: str | Path) -> bool:
    """Blocking file checks live in these small helpers, so async tests stay free of them."""
    return Path(path).exists()


def names_in(directory: str | Path) -> list[str]:
    """Sorted file names of a directory."""
    return sorted(p.name for p in Path(directory).iterdir())


def snapshot(directory: str | Path) -> dict[str, bytes]:
    """Every file of a directory with its contents."""
    return {p.name: p.read_bytes() for p in Path(directory).iterdir() if p.is_file()}


def small_config(root: Path | str, **overrides: Any) -> StoreConfig:
    """Tiny files (64 KiB commit log, 64-unit consume queues), fast flushes, retention only by hand."""
    values: dict[str, Any] = {
        "store_path_root_dir": str(root),
        "mapped_file_size_commit_log": CL_FILE,
        "mapped_file_size_consume_queue": CQ_FILE,
        "flush_interval_commit_log_ms": 20,
        "flush_interval_consume_queue_ms": 20,
        "clean_resource_interval_ms": 3_600_000,
        # Tests decide retention themselves: how full the host's disk is must not change their outcome.
        "disk_max_used_space_ratio": 100,
        "disk_space_clean_forcibly_ratio": 100,
        "disk_space_warning_level_ratio": 100,
    }
    values.update(overrides)
    return StoreConfig(**values)


def msg(topic: str = "T", body: bytes = b"hello", queue_id: int = 0, tags: str | None = None,
        keys: str | None = None, **kwargs: Any) -> MessageExtBrokerInner:
    """A message with optional TAGS/KEYS properties."""
    props = {}
    if tags is not None:
        props["TAGS"] = tags
    if keys is not None:
        props["KEYS"] = keys
    props.update(kwargs.pop("props", {}))
    return MessageExtBrokerInner(topic=topic, body=body, queue_id=queue_id, properties=encode_properties(props),
                                 **kwargs)


def record_at(store: MessageStore, phys: int, size: int) -> MessageRecord:
    """Decode (with CRC check) the record stored at ``phys``."""
    view = store.commit_log.get_message(phys, size)
    assert view is not None, f"no record at {phys}"
    record = decode_record(view, check_crc=True, expected_offset=phys)
    assert isinstance(record, MessageRecord)
    return record


def check_consistency(store: MessageStore) -> int:
    """Assert that the consume queues and the commit log agree exactly; returns the number of records.

    Every unit points at a valid record (CRC checked) of its topic and queue whose QUEUEOFFSET is the
    unit's index; every dispatchable record of the commit log is indexed at its QUEUEOFFSET; the
    queue-offset table equals the consume queues' max offsets.
    """
    for topic, queue_ids in store.topics().items():
        for queue_id in queue_ids:
            cq = store.find_consume_queue(topic, queue_id)
            assert cq is not None
            for index in range(cq.min_offset, cq.max_offset):
                unit = cq.get_unit(index)
                assert unit is not None
                phys, size, _tags = unit
                if size == BLANK_UNIT_SIZE:
                    continue
                record = record_at(store, phys, size)
                assert (record.topic, record.queue_id, record.queue_offset) == (topic, queue_id, index)
            assert store.commit_log.topic_queue_table.get(topic, {}).get(queue_id, 0) == cq.max_offset
    scanner = store.commit_log.scan(store.min_phy_offset, check_crc=True, written_only=True)
    count = 0
    for request in scanner:
        count += 1
        if not MessageSysFlag.is_dispatched(request.sys_flag):
            continue
        cq = store.find_consume_queue(request.topic, request.queue_id)
        assert cq is not None, f"no consume queue for {request.topic}/{request.queue_id}"
        unit = cq.get_unit(request.consume_queue_offset)
        assert unit is not None and unit[:2] == (request.commit_log_offset, request.msg_size), (
            f"record at {request.commit_log_offset} not indexed at {request.consume_queue_offset}")
    assert scanner.error is None, scanner.error
    assert scanner.end_offset == store.max_phy_offset
    return count
