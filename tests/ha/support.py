"""Helpers of the replication tests: small stores, a master and slaves in one event loop, comparisons
of commit-log files and consume queues, and a transport that captures what a connection writes."""

from __future__ import annotations

import asyncio
import os
import random
from pathlib import Path
from typing import Any

from pocketmq.ha import HAClient, HAConfig, HAService
from pocketmq.store import BrokerRole, MessageStore, StoreConfig
from tests.helpers import eventually
from tests.store.support import msg

CL_FILE = 64 * 1024


def store_config(root: Path, **overrides: Any) -> StoreConfig:
    """64 KiB commit-log files, 64-unit consume-queue files, fast flushes, retention only by hand."""
    values: dict[str, Any] = {
        "store_path_root_dir": str(root),
        "mapped_file_size_commit_log": CL_FILE,
        "mapped_file_size_consume_queue": 20 * 64,
        "flush_interval_commit_log_ms": 20,
        "flush_interval_consume_queue_ms": 20,
        "clean_resource_interval_ms": 3_600_000,
    }
    values.update(overrides)
    return StoreConfig(**values)


def ha_config(**overrides: Any) -> HAConfig:
    """Loopback, port 0, short timeouts."""
    values: dict[str, Any] = {
        "ha_listen_host": "127.0.0.1",
        "ha_listen_port": 0,
        "slave_timeout": 0.5,
        "reconnect_backoff_initial": 0.02,
        "reconnect_backoff_max": 0.2,
    }
    values.update(overrides)
    return HAConfig(**values)


def append_messages(store: MessageStore, count: int, *, size: int = 1000, seed: int = 0) -> int:
    """Append ``count`` messages of about ``size`` bytes over two topics and four queues; returns the
    store's max offset afterwards."""
    rng = random.Random(seed)
    for i in range(count):
        topic = ("TopicA", "TopicB")[i % 2]
        body = rng.randbytes(rng.randint(size // 2, size))
        result = store.append(msg(topic=topic, queue_id=i % 4, body=body, tags=f"tag{i % 3}", keys=f"k{i}"))
        assert result.status.name == "PUT_OK", result.status
    return store.max_phy_offset


def _read_files(directory: str) -> dict[str, bytes]:
    out = {}
    for name in sorted(os.listdir(directory)):
        if name.isdigit():
            with open(os.path.join(directory, name), "rb") as f:
                out[name] = f.read()
    return out


async def commit_log_files(store: MessageStore) -> dict[str, bytes]:
    """Name -> bytes of every commit-log file on disk (read in a thread)."""
    return await asyncio.to_thread(_read_files, store.config.commit_log_dir)


async def assert_commit_logs_identical(master: MessageStore, slave: MessageStore) -> list[str]:
    """The slave's commit-log files equal the master's, byte for byte, from the slave's first file on; a
    file only one side has must be all zeros (created ahead, never written). Returns the names compared."""
    first = slave.min_phy_offset
    assert master.max_phy_offset == slave.max_phy_offset
    mine, theirs = await commit_log_files(master), await commit_log_files(slave)
    compared = []
    for name in sorted(set(mine) | set(theirs)):
        if int(name) < first:
            continue
        a, b = mine.get(name), theirs.get(name)
        if a is None or b is None:
            present = a if a is not None else b
            assert present is not None and not any(present), f"{name} has data on one side only"
            continue
        assert a == b, f"commit-log file {name} differs"
        compared.append(name)
    return compared


def queue_messages(store: MessageStore, topic: str, queue_id: int, start: int | None = None) -> list[bytes]:
    """Every message of a queue from ``start`` (default: its min offset) as raw record bytes."""
    offset = store.get_min_offset_in_queue(topic, queue_id) if start is None else start
    end = store.get_max_offset_in_queue(topic, queue_id)
    out: list[bytes] = []
    while offset < end:
        result = store.get_messages("g", topic, queue_id, offset, 32)
        assert result.message_buffers, (topic, queue_id, offset, result.status)
        out += [bytes(b) for b in result.message_buffers]
        offset = result.next_begin_offset
    return out


async def assert_queues_serve_the_same(master: MessageStore, slave: MessageStore) -> int:
    """Once the slave has indexed what it holds (its dispatch may wait for a consume-queue file after the
    bytes are in), for every queue the slave has, it serves exactly the master's messages from its first
    readable offset to the end. Returns the number of messages compared."""
    await eventually(lambda: slave.dispatch_behind_bytes == 0, message="slave dispatched")
    total = 0
    assert set(slave.topics()) <= set(master.topics())
    for topic, queue_ids in master.topics().items():
        for queue_id in queue_ids:
            assert slave.get_max_offset_in_queue(topic, queue_id) == master.get_max_offset_in_queue(topic, queue_id)
            start = slave.get_min_offset_in_queue(topic, queue_id)
            theirs = queue_messages(slave, topic, queue_id, start)
            mine = queue_messages(master, topic, queue_id, start)
            assert theirs == mine, (topic, queue_id)
            total += len(mine)
    return total


class Cluster:
    """A master (store + HAService) and slaves (store + HAClient) in the test's event loop."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.stores: list[MessageStore] = []
        self.services: list[HAService] = []
        self.clients: list[HAClient] = []

    async def start_store(self, name: str, *, slave: bool = False, **overrides: Any) -> MessageStore:
        if slave:
            overrides.setdefault("broker_role", BrokerRole.SLAVE)
        store = MessageStore(store_config(self.root / name, **overrides))
        await store.start()
        self.stores.append(store)
        return store

    async def start_master(self, *, ha: dict[str, Any] | None = None,
                           **store_overrides: Any) -> tuple[MessageStore, HAService]:
        store = await self.start_store("master", **store_overrides)
        service = HAService(store, ha_config(**(ha or {})))
        await service.start()
        self.services.append(service)
        return store, service

    async def start_slave(self, name: str = "slave") -> MessageStore:
        return await self.start_store(name, slave=True)

    def start_client(self, store: MessageStore, service: HAService | None, **overrides: Any) -> HAClient:
        address = f"127.0.0.1:{service.port}" if service is not None else None
        client = HAClient(store, ha_config(**overrides), master_address=address)
        client.start()
        self.clients.append(client)
        return client

    async def stop_store(self, store: MessageStore) -> None:
        await store.shutdown()
        self.stores.remove(store)

    async def close(self) -> None:
        for client in self.clients:
            await client.stop()
        for service in self.services:
            await service.stop()
        for store in self.stores:
            await store.shutdown()


class FakeTransport(asyncio.Transport):
    """Captures writes; never sends. With ``protocol`` set, reports itself full after each write."""

    def __init__(self, protocol: asyncio.Protocol | None = None) -> None:
        super().__init__()
        self.aborted = False
        self.writes: list[bytes] = []
        self.protocol = protocol

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.9", 4242) if name == "peername" else default

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass

    def write(self, data: Any) -> None:
        self.writes.append(bytes(data))

    def writelines(self, list_of_data: Any) -> None:
        self.writes.append(b"".join(bytes(d) for d in list_of_data))
        if self.protocol is not None:
            self.protocol.pause_writing()

    def abort(self) -> None:
        self.aborted = True

    def is_closing(self) -> bool:
        return self.aborted
