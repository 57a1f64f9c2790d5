"""KVConfigManager: table operations, bounds, and atomic persistence as RocketMQ's kvConfig.json."""

from __future__ import annotations

import asyncio
import json
import os
import threading
from pathlib import Path

import pytest

from pocketmq.namesrv.kvconfig import KVConfigError, KVConfigFullError, KVConfigManager
from pocketmq.remoting.errors import InvalidHeaderError

NS = "ORDER_TOPIC_CONFIG"


def test_put_get_delete() -> None:
    kv = KVConfigManager(None)
    assert kv.put_kv_config(NS, "TopicA", "broker-a:4;broker-b:4")
    assert not kv.put_kv_config(NS, "TopicA", "broker-a:4;broker-b:4")  # unchanged
    assert kv.get_kv_config(NS, "TopicA") == "broker-a:4;broker-b:4"
    assert kv.put(NS, "TopicA", "broker-a:8")
    assert kv.get(NS, "TopicA") == "broker-a:8"
    assert kv.get(NS, "Missing") is None
    assert kv.get("OTHER", "TopicA") is None
    assert len(kv) == 1
    assert kv.delete_kv_config(NS, "TopicA")
    assert not kv.delete(NS, "TopicA")
    assert kv.get(NS, "TopicA") is None
    assert len(kv) == 0


def test_kv_list_by_namespace_is_a_copy() -> None:
    kv = KVConfigManager(None)
    kv.put(NS, "A", "1")
    kv.put(NS, "B", "2")
    kv.put("OTHER", "A", "x")
    table = kv.get_kv_list_by_namespace(NS)
    assert table == {"A": "1", "B": "2"}
    assert table is not None
    table["C"] = "3"
    assert kv.get_kv_list_by_namespace(NS) == {"A": "1", "B": "2"}
    assert kv.get_kv_list_by_namespace("NONE") is None
    kv.delete("OTHER", "A")
    assert kv.get_kv_list_by_namespace("OTHER") is None  # emptied namespaces disappear


def test_persist_writes_rocketmq_layout(tmp_path: Path) -> None:
    path = tmp_path / "namesrv" / "kvConfig.json"
    kv = KVConfigManager(path)
    kv.put(NS, "TopicA", "broker-a:4;broker-b:4")
    kv.put("ns2", "ключ", "значение")
    kv.persist()
    assert (
        path.read_bytes()
        == (
            '{"configTable":{"ORDER_TOPIC_CONFIG":{"TopicA":"broker-a:4;broker-b:4"},"ns2":{"ключ":"значение"}}}'
        ).encode()
    )
    assert [p.name for p in path.parent.iterdir()] == ["kvConfig.json"]  # no temp file left behind


def test_load_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "kvConfig.json"
    first = KVConfigManager(path)
    first.put(NS, "TopicA", "broker-a:4")
    first.put(NS, "TopicB", "broker-b:2")
    first.persist()
    second = KVConfigManager(path)
    second.load()
    assert second.get_kv_list_by_namespace(NS) == {"TopicA": "broker-a:4", "TopicB": "broker-b:2"}
    assert len(second) == 2


def test_load_reads_a_java_written_file(tmp_path: Path) -> None:
    path = tmp_path / "kvConfig.json"
    path.write_text('{\n\t"configTable":{\n\t\t"ORDER_TOPIC_CONFIG":{\n\t\t\t"T":"broker-a:4"\n\t\t}\n\t}\n}')
    kv = KVConfigManager(path)
    kv.load()
    assert kv.get(NS, "T") == "broker-a:4"


def test_load_without_file_or_path_is_empty(tmp_path: Path) -> None:
    kv = KVConfigManager(tmp_path / "absent.json")
    kv.load()
    assert len(kv) == 0
    no_path = KVConfigManager(None)
    no_path.load()
    no_path.put(NS, "k", "v")
    no_path.persist()  # nothing to write to: a no-op


@pytest.mark.parametrize(
    "content",
    [
        b"not json",
        b"[]",
        b'{"other":{}}',
        b'{"configTable":[]}',
        b'{"configTable":{"ns":[]}}',
        b'{"configTable":{"ns":{"k":1}}}',
        b"\xff",
    ],
)
def test_load_rejects_corrupt_file(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "kvConfig.json"
    path.write_bytes(content)
    with pytest.raises(KVConfigError):
        KVConfigManager(path).load()


def test_persist_replaces_the_file_atomically(tmp_path: Path) -> None:
    path = tmp_path / "kvConfig.json"
    path.write_text("old contents")
    kv = KVConfigManager(path)
    kv.put(NS, "k", "v")
    inode_before = path.stat().st_ino
    kv.persist()
    assert json.loads(path.read_bytes()) == {"configTable": {NS: {"k": "v"}}}
    assert path.stat().st_ino != inode_before  # a new file was renamed into place, not rewritten


def test_failed_persist_leaves_old_file_and_no_temp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "kvConfig.json"
    kv = KVConfigManager(path)
    kv.put(NS, "k", "v1")
    kv.persist()
    kv.put(NS, "k", "v2")

    def broken_fsync(fd: int) -> None:
        raise OSError("disk on fire")

    monkeypatch.setattr(os, "fsync", broken_fsync)
    with pytest.raises(OSError, match="disk on fire"):
        kv.persist()
    monkeypatch.undo()
    assert json.loads(path.read_bytes()) == {"configTable": {NS: {"k": "v1"}}}
    assert [p.name for p in tmp_path.iterdir()] == ["kvConfig.json"]


def reload_and_list(path: Path) -> tuple[dict[str, str] | None, list[str]]:
    reloaded = KVConfigManager(path)
    reloaded.load()
    return reloaded.get_kv_list_by_namespace(NS), [p.name for p in path.parent.iterdir()]


async def test_concurrent_persists_from_threads_end_with_the_latest_table(tmp_path: Path) -> None:
    path = tmp_path / "kvConfig.json"
    kv = KVConfigManager(path)
    for i in range(50):
        kv.put(NS, f"T{i}", str(i))
    await asyncio.gather(*(asyncio.to_thread(kv.persist) for _ in range(8)))
    table, files = await asyncio.to_thread(reload_and_list, path)
    assert table == {f"T{i}": str(i) for i in range(50)}
    assert files == ["kvConfig.json"]


def test_mutation_during_persist_is_safe(tmp_path: Path) -> None:
    kv = KVConfigManager(tmp_path / "kvConfig.json")
    stop = threading.Event()

    def writer() -> None:
        i = 0
        while not stop.is_set():
            kv.put(NS, f"k{i % 500}", "v" * (i % 7))
            kv.delete(NS, f"k{(i + 250) % 500}")
            i += 1

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        for _ in range(30):
            kv.persist()
    finally:
        stop.set()
        thread.join()
    kv.persist()
    reloaded = KVConfigManager(tmp_path / "kvConfig.json")
    reloaded.load()
    assert reloaded.get_kv_list_by_namespace(NS) == kv.get_kv_list_by_namespace(NS)


def test_entry_count_is_bounded() -> None:
    kv = KVConfigManager(None, max_entries=3)
    for key in "abc":
        kv.put(NS, key, "v")
    with pytest.raises(KVConfigFullError):
        kv.put(NS, "d", "v")
    kv.put(NS, "a", "replaced")  # replacing is not growing the count
    kv.delete(NS, "b")
    kv.put(NS, "d", "v")
    assert len(kv) == 3


def test_sizes_are_bounded() -> None:
    kv = KVConfigManager(None, max_key_length=8, max_value_length=16, max_total_chars=40)
    with pytest.raises(KVConfigFullError):
        kv.put(NS[:8], "k", "v" * 17)
    with pytest.raises(KVConfigFullError):
        kv.put("n" * 9, "k", "v")
    with pytest.raises(KVConfigFullError):
        kv.put("ns", "k" * 9, "v")
    kv.put("ns", "k1", "v" * 16)  # 20 chars
    kv.put("ns", "k2", "v" * 16)  # 40 chars
    with pytest.raises(KVConfigFullError):
        kv.put("ns", "k3", "v")
    assert not kv.put("ns", "k1", "v" * 16)  # an unchanged value is fine ...
    kv.put("ns", "k1", "v")  # ... and shrinking frees room
    kv.put("ns", "k3", "v" * 10)
    assert kv.get_kv_list_by_namespace("ns") == {"k1": "v", "k2": "v" * 16, "k3": "v" * 10}


@pytest.mark.parametrize(("namespace", "key", "value"), [("", "k", "v"), ("ns", "", "v"), ("ns", "k", None)])
def test_empty_names_and_missing_values_are_refused(namespace: str, key: str, value: str) -> None:
    kv = KVConfigManager(None)
    with pytest.raises(InvalidHeaderError):
        kv.put(namespace, key, value)
    assert len(kv) == 0
