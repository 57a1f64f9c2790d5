"""Offset tables: dirty tracking for commits, and the BROADCASTING consumer's atomic offsets file."""

from __future__ import annotations

import asyncio
import json
import os
import threading
from pathlib import Path

import pytest

from pocketmq.client.consumer.offset_store import (
    LocalOffsetStore,
    OffsetStoreError,
    OffsetTable,
    RemoteOffsetStore,
    local_offset_store_path,
)
from pocketmq.client.core.message import MessageQueue

Q0 = MessageQueue("T", "broker-a", 0)
Q1 = MessageQueue("T", "broker-a", 1)
R0 = MessageQueue("%RETRY%G", "broker-b", 0)


def test_read_unknown_is_minus_one() -> None:
    table = OffsetTable()
    assert table.read(Q0) == -1
    assert Q0 not in table


def test_increase_only() -> None:
    table = RemoteOffsetStore()
    assert table.update(Q0, 10, increase_only=True)
    assert not table.update(Q0, 5, increase_only=True)
    assert table.read(Q0) == 10
    assert table.update(Q0, 5)  # a reset may move it back
    assert table.read(Q0) == 5
    assert not table.update(Q0, 5)


def test_snapshot_holds_changes_until_committed() -> None:
    table = RemoteOffsetStore()
    table.update(Q0, 10)
    table.update(Q1, 3)
    table.set_committed(R0, 7)  # read from the broker: nothing to send back
    snap = table.snapshot()
    assert snap == {Q0: 10, Q1: 3}
    assert table.snapshot(all_entries=True) == {Q0: 10, Q1: 3, R0: 7}
    # the commit is in flight when Q0 moves on: only Q1 is done
    table.update(Q0, 12)
    table.mark_committed(snap)
    assert table.snapshot() == {Q0: 12}
    table.mark_committed({Q0: 12})
    assert table.snapshot() == {}


def test_failed_commit_is_sent_again() -> None:
    table = RemoteOffsetStore()
    table.update(Q0, 1)
    assert table.snapshot() == {Q0: 1}
    assert table.snapshot() == {Q0: 1}  # no mark_committed: still there


def test_negative_offsets_are_not_committed() -> None:
    table = OffsetTable()
    table.update(Q0, -1)
    assert table.snapshot() == {}
    assert table.snapshot(all_entries=True) == {}


def test_remove_and_copies() -> None:
    table = OffsetTable()
    table.update(Q0, 1)
    table.update(R0, 2)
    assert table.offsets("T") == {Q0: 1}
    assert table.offsets() == {Q0: 1, R0: 2}
    table.remove(Q0)
    table.remove(Q0)
    assert Q0 not in table
    assert table.snapshot() == {R0: 2}
    assert len(table) == 1


# -- local file -----------------------------------------------------------------------------------------


def test_default_path() -> None:
    assert local_offset_store_path("10.0.0.1@42", "G") == Path.home() / ".rocketmq_offsets/10.0.0.1@42/G/offsets.json"
    assert local_offset_store_path("c", "G", "/x") == Path("/x/c/G/offsets.json")
    assert LocalOffsetStore.for_client("c", "G", "/x").path == Path("/x/c/G/offsets.json")


def test_persist_and_load(tmp_path: Path) -> None:
    path = tmp_path / "c" / "G" / "offsets.json"
    store = LocalOffsetStore(path)
    store.load()  # no file yet: empty
    assert len(store) == 0
    store.update(Q0, 10)
    store.update(R0, 3)
    store.update(Q1, -1)  # "none": not written
    store.persist()
    assert store.snapshot() == {}
    assert json.loads(path.read_text()) == {
        "offsetTable": [
            {"topic": "%RETRY%G", "brokerName": "broker-b", "queueId": 0, "offset": 3},
            {"topic": "T", "brokerName": "broker-a", "queueId": 0, "offset": 10},
        ]
    }
    again = LocalOffsetStore(path)
    again.load()
    assert again.offsets() == {Q0: 10, R0: 3}
    assert again.snapshot() == {}  # loaded values are committed ones
    assert [p.name for p in path.parent.iterdir()] == ["offsets.json"]  # no temp files left


def test_crash_during_write_keeps_the_old_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "offsets.json"
    store = LocalOffsetStore(path)
    store.update(Q0, 1)
    store.persist()
    before = path.read_bytes()
    store.update(Q0, 2)

    def crash(src: str, dst: str) -> None:
        raise OSError("disk gone")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OffsetStoreError, match="disk gone"):
        store.persist()
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["offsets.json"]
    assert store.snapshot() == {Q0: 2}  # still to be written


@pytest.mark.parametrize(
    "content",
    [b"", b"not json", b"[]", b'{"offsetTable":[{"topic":"T"}]}', b'{"offsetTable":[{"topic":"T","brokerName":"b",'
     b'"queueId":"x","offset":1}]}', b"\xff\xfe"],
)  # fmt: skip
def test_corrupt_file_is_a_named_error(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "offsets.json"
    path.write_bytes(content)
    with pytest.raises(OffsetStoreError):
        LocalOffsetStore(path).load()


def test_unreadable_path_is_a_named_error(tmp_path: Path) -> None:
    (tmp_path / "offsets.json").mkdir()
    store = LocalOffsetStore(tmp_path / "offsets.json")
    with pytest.raises(OffsetStoreError):
        store.load()
    store.update(Q0, 1)
    with pytest.raises(OffsetStoreError):
        store.persist()


async def test_persist_in_a_thread_while_the_loop_updates(tmp_path: Path) -> None:
    store = LocalOffsetStore(tmp_path / "offsets.json")
    stop = threading.Event()

    def writer() -> int:
        count = 0
        while not stop.is_set():
            store.persist()
            count += 1
        return count

    task = asyncio.create_task(asyncio.to_thread(writer))
    for i in range(2000):
        store.update(MessageQueue("T", "b", i % 50), i, increase_only=True)
        if i % 100 == 0:
            await asyncio.sleep(0)
    stop.set()
    assert await task > 0
    store.persist()
    again = LocalOffsetStore(store.path)
    again.load()
    assert again.offsets() == store.offsets()
