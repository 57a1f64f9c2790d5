"""Helpers of the analytics tests: commit-log records packed by hand from the reference's table (§4.1),
small stores written through the real :class:`pocketmq.store.MessageStore`, and ways to damage them."""

from __future__ import annotations

import asyncio
import shutil
import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pocketmq.common.message import encode_properties
from pocketmq.common.record import Blank, MessageRecord, decode_record, encode_host
from pocketmq.store import MessageExtBrokerInner, MessageStore, StoreConfig
from tests.client.pull_records import Record

BLANK = 0xCBD43194


def _address(host: tuple[str, int]) -> str:
    ip, port = host
    return f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"


@dataclass
class HandRecord:
    """The fields of one record; :meth:`pack` lays them out field by field as reference §4.1 lists them
    (through the consumer tests' independent encoder, :class:`tests.client.pull_records.Record`)."""

    topic: str
    body: bytes
    properties: str = ""
    queue_id: int = 0
    flag: int = 0
    queue_offset: int = 0
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: tuple[str, int] = ("127.0.0.1", 40000)
    store_timestamp: int = 0
    store_host: tuple[str, int] = ("127.0.0.1", 10911)
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0
    body_crc: int | None = None
    physical_offset: int = field(default=0)

    def pack(self, physical_offset: int) -> bytes:
        self.physical_offset = physical_offset
        return Record(
            topic=self.topic, body=self.body, queue_id=self.queue_id, flag=self.flag, queue_offset=self.queue_offset,
            physical_offset=physical_offset, sys_flag=self.sys_flag, born_timestamp=self.born_timestamp,
            born_host=_address(self.born_host), store_timestamp=self.store_timestamp,
            store_host=_address(self.store_host), reconsume_times=self.reconsume_times,
            prepared_offset=self.prepared_transaction_offset, properties=self.properties, body_crc=self.body_crc,
        ).encode()


def write_hand_commit_log(commitlog: Path, files: Sequence[Sequence[HandRecord]], file_size: int) -> None:
    """One commit-log file per list of records, each closed by a blank marker except the last (zeros)."""
    commitlog.mkdir(parents=True, exist_ok=True)
    for index, records in enumerate(files):
        start = index * file_size
        data = bytearray()
        for record in records:
            data += record.pack(start + len(data))
        if index < len(files) - 1:
            data += struct.pack(">iI", file_size - len(data), BLANK)
        assert len(data) <= file_size
        (commitlog / f"{start:020d}").write_bytes(bytes(data) + bytes(file_size - len(data)))


# ------------------------------------------------------------------------------------------- real stores

STORE_FILE_SIZE = 64 * 1024


def store_config(root: Path, file_size: int = STORE_FILE_SIZE) -> StoreConfig:
    return StoreConfig(store_path_root_dir=str(root), mapped_file_size_commit_log=file_size,
                       mapped_file_size_consume_queue=20 * 256, warm_mapped_file=False,
                       flush_interval_commit_log_ms=20, flush_interval_consume_queue_ms=20,
                       clean_resource_interval_ms=3_600_000)


def message(i: int, topic: str = "T", body: bytes | None = None, **props: str) -> MessageExtBrokerInner:
    properties = {"TAGS": f"tag{i % 3}", "KEYS": f"k{i} shared", "UNIQ_KEY": f"U{i:08d}", **props}
    return MessageExtBrokerInner(topic=topic, body=body if body is not None else f"body-{i}".encode() * 20,
                                 queue_id=i % 4, properties=encode_properties(properties),
                                 born_timestamp=1_700_000_000_000 + i, born_host=encode_host("10.0.0.7", 5000))


async def fill_store(root: Path, count: int, file_size: int = STORE_FILE_SIZE) -> None:
    """A store with ``count`` messages (several files), shut down cleanly."""
    store = MessageStore(store_config(root, file_size))
    await store.start()
    try:
        for i in range(count):
            result = store.append(message(i))
            assert result.status.name == "PUT_OK", result
            if i % 200 == 0:
                await asyncio.sleep(0)
    finally:
        await store.shutdown()


def make_store(root: Path, count: int, file_size: int = STORE_FILE_SIZE) -> Path:
    asyncio.run(fill_store(root, count, file_size))
    return root


def commit_log_files(root: Path) -> list[Path]:
    return sorted(p for p in (root / "commitlog").iterdir() if p.name.isdigit())


def data_files(root: Path) -> list[Path]:
    """The commit-log files holding records (not the pre-allocated next one)."""
    return [p for p in commit_log_files(root) if records_of(p)]


def records_of(path: Path) -> list[tuple[int, MessageRecord]]:
    """(file position, record) of every record of one commit-log file."""
    data = path.read_bytes()
    base = int(path.name)
    out, pos = [], 0
    while pos + 8 <= len(data) and any(data[pos:pos + 8]):
        record = decode_record(data, pos, expected_offset=base + pos)
        if isinstance(record, Blank):
            break
        out.append((pos, record))
        pos += record.total_size
    return out


def copy_store(source: Path, target: Path) -> Path:
    shutil.copytree(source, target)
    (target / "lock").unlink(missing_ok=True)
    return target


def blank_out_from(path: Path, pos: int) -> None:
    """Replace the record at ``pos`` and everything after it in the file with a blank marker (the record
    is gone, the next file still starts where it did)."""
    with open(path, "r+b") as f:
        size = f.seek(0, 2)
        f.seek(pos)
        f.write(struct.pack(">iI", size - pos, BLANK) + bytes(size - pos - 8))


def patch(path: Path, pos: int, data: bytes) -> None:
    with open(path, "r+b") as f:
        f.seek(pos)
        f.write(data)
