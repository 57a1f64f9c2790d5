"""The Raft files: round trips, a torn tail cut at load, compaction, damage refused; and the message codec."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pocketmq.controller.raft.core import LogOp, Snapshot
from pocketmq.controller.raft.messages import (
    AppendRequest,
    AppendResponse,
    Entry,
    RaftCodecError,
    SnapshotRequest,
    SnapshotResponse,
    VoteRequest,
    VoteResponse,
    decode_message,
    encode_message,
)
from pocketmq.controller.raft.storage import RaftStorage, StorageError


def entries(first: int, last: int, term: int = 1) -> tuple[Entry, ...]:
    return tuple(Entry(term, i, f"e{i}".encode()) for i in range(first, last + 1))


def reopen(path: Path) -> RaftStorage:
    storage = RaftStorage(str(path))
    return storage


def test_hard_state_and_entries_survive_a_reopen(tmp_path: Path) -> None:
    storage = RaftStorage(str(tmp_path))
    assert storage.load().entries == []
    storage.persist((3, "n1"), [LogOp(entries=entries(1, 5))])
    storage.persist(None, [LogOp(truncate_from=4), LogOp(entries=entries(4, 6, term=3))])
    storage.close()
    state = reopen(tmp_path).load()
    assert (state.term, state.voted_for) == (3, "n1")
    assert [(e.index, e.term) for e in state.entries] == [(1, 1), (2, 1), (3, 1), (4, 3), (5, 3), (6, 3)]
    assert state.cut_bytes == 0


def test_a_torn_last_record_is_cut(tmp_path: Path) -> None:
    storage = RaftStorage(str(tmp_path))
    storage.load()
    storage.persist((1, None), [LogOp(entries=entries(1, 3))])
    size = storage.log_bytes
    storage.close()
    with open(tmp_path / "raft.log", "r+b") as f:
        f.truncate(size - 3)  # the last record lost its last bytes
    state = reopen(tmp_path).load()
    assert [e.index for e in state.entries] == [1, 2]
    assert state.cut_bytes > 0
    assert os.path.getsize(tmp_path / "raft.log") < size - 3


def test_a_damaged_record_ends_the_log_there(tmp_path: Path) -> None:
    storage = RaftStorage(str(tmp_path))
    storage.load()
    storage.persist(None, [LogOp(entries=entries(1, 4))])
    storage.close()
    data = bytearray((tmp_path / "raft.log").read_bytes())
    data[-2] ^= 0xFF  # a body byte of the last record
    (tmp_path / "raft.log").write_bytes(bytes(data))
    assert [e.index for e in reopen(tmp_path).load().entries] == [1, 2, 3]


def test_snapshot_compacts_the_log_and_later_appends_follow(tmp_path: Path) -> None:
    storage = RaftStorage(str(tmp_path))
    storage.load()
    storage.persist(None, [LogOp(entries=entries(1, 10))])
    before = storage.log_bytes
    storage.persist(None, [LogOp(snapshot=Snapshot(7, 1, b"state@7"))])
    assert storage.log_bytes < before
    storage.persist(None, [LogOp(entries=entries(11, 12, term=2)), LogOp(truncate_from=12)])
    storage.close()
    state = reopen(tmp_path).load()
    assert state.snapshot == Snapshot(7, 1, b"state@7")
    assert [e.index for e in state.entries] == [8, 9, 10, 11]


def test_a_snapshot_past_the_log_drops_it(tmp_path: Path) -> None:
    storage = RaftStorage(str(tmp_path))
    storage.load()
    storage.persist(None, [LogOp(entries=entries(1, 3))])
    storage.persist(None, [LogOp(snapshot=Snapshot(9, 2, b"s")), LogOp(truncate_from=10)])
    storage.persist(None, [LogOp(entries=entries(10, 11, term=2))])
    storage.close()
    state = reopen(tmp_path).load()
    assert state.snapshot is not None and state.snapshot.index == 9
    assert [e.index for e in state.entries] == [10, 11]


def test_damaged_meta_is_refused(tmp_path: Path) -> None:
    storage = RaftStorage(str(tmp_path))
    storage.load()
    storage.persist((5, "n2"), [])
    storage.close()
    data = bytearray((tmp_path / "raft.meta").read_bytes())
    data[10] ^= 1
    (tmp_path / "raft.meta").write_bytes(bytes(data))
    with pytest.raises(StorageError):
        reopen(tmp_path).load()


@pytest.mark.parametrize("message", [
    VoteRequest(3, "n1", 10, 2, True),
    VoteResponse(3, "n2", False, False),
    AppendRequest(4, "n0", 9, 3, (Entry(4, 10, b"\x00data"), Entry(4, 11, b"")), 8, 12.5),
    AppendResponse(4, "n1", True, 11, 12.5),
    SnapshotRequest(5, "n0", 100, 4, b"{}", 1.0),
    SnapshotResponse(5, "n2", 100, 1.0),
])
def test_messages_round_trip(message: object) -> None:
    assert decode_message(encode_message(message)) == message  # type: ignore[arg-type]


@pytest.mark.parametrize("body", [b"", b"\x93\x01\x02", b"\x94\x09\x01\xa1a\x00", b"\xc1", b"\x93\x01\xff\xa1a"])
def test_garbage_is_a_codec_error(body: bytes) -> None:
    with pytest.raises(RaftCodecError):
        decode_message(body)
