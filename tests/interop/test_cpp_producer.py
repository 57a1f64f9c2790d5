"""Interoperability: the PyPI ``rocketmq==0.4.4`` client (Apache's C++ client via ctypes) produces to a
PocketMQ cluster running as real processes; the messages are then read back from the broker's store with
bodies, tags and keys intact."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from pocketmq.common.message import parse_properties
from pocketmq.common.record import decode_records
from pocketmq.store.config import StoreConfig
from pocketmq.store.message_store import MessageStore
from tests.procs import TEST_COMMIT_LOG_FILE_SIZE, Proc, start_broker, start_namesrv

rocketmq = pytest.importorskip("rocketmq.client", reason="rocketmq==0.4.4 ships a Linux x86_64 wheel only")


@pytest.fixture
def cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Proc, Proc, Path]]:
    monkeypatch.setenv("HOME", str(tmp_path))  # the C++ client writes its logs under ~/logs
    ns = start_namesrv(kv_dir=tmp_path)
    store_dir = tmp_path / "store"
    broker = start_broker(namesrv=ns.addr, store_dir=store_dir)
    yield ns, broker, store_dir
    broker.kill()
    ns.kill()


async def read_topic(store_dir: Path, topic: str) -> list[tuple[bytes, dict[str, str]]]:
    store = MessageStore(StoreConfig(store_path_root_dir=str(store_dir),
                                     mapped_file_size_commit_log=TEST_COMMIT_LOG_FILE_SIZE))
    await store.start()
    try:
        out = []
        for queue_id in range(8):
            result = store.get_messages("check", topic, queue_id, 0, 1000)
            for buffer in result.message_buffers:
                out += [(bytes(r.body), parse_properties(r.properties)) for r in decode_records(buffer)]
        return out
    finally:
        await store.shutdown()


def test_cpp_producer_sends_with_tbw102_fallback(cluster: tuple[Proc, Proc, Path]) -> None:
    ns, broker, store_dir = cluster
    producer = rocketmq.Producer("InteropProducer", timeout=5000)
    producer.set_namesrv_addr(ns.addr)
    producer.start()
    sent = []
    try:
        for i in range(20):
            msg = rocketmq.Message("CppTopic")  # does not exist yet: the client falls back to TBW102's route
            msg.set_tags(f"tag{i % 3}")
            msg.set_keys(f"key-{i}")
            msg.set_body(f"cpp-body-{i}")
            result = producer.send_sync(msg)
            assert result.status == rocketmq.SendStatus.OK, result
            assert result.msg_id
            sent.append(i)
    finally:
        producer.shutdown()
    broker.signal(signal.SIGTERM)
    assert broker.popen.wait(20) == 0
    stored = asyncio.run(read_topic(store_dir, "CppTopic"))
    by_body = {body: props for body, props in stored}
    assert len(stored) == len(sent) == 20
    for i in sent:
        props = by_body[f"cpp-body-{i}".encode()]
        assert props["TAGS"] == f"tag{i % 3}"
        assert props["KEYS"] == f"key-{i}"
    assert os.path.exists(store_dir / "config" / "topics.json")
