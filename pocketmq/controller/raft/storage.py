"""``RaftStorage``: a Raft node's durable state in three files of one directory. Blocking: the node runs every call
in its own single thread, never on the event loop.

Layouts (all integers big-endian)::

    raft.meta      magic "RFTM":u32 · crc32:u32 · term:u64 · votedForLength:u16 · votedFor (UTF-8)
    raft.snapshot  magic "RFTS":u32 · crc32:u32 · index:u64 · term:u64 · dataLength:u32 · data
    raft.log       records: magic "RFTL":u32 · crc32:u32 · dataLength:u32 · term:u64 · index:u64 · data

Each CRC32 covers what follows it in the file or record. ``raft.meta`` and ``raft.snapshot`` are replaced
atomically (a temporary file, fsync, rename, fsync of the directory). ``raft.log`` is appended to and fdatasync'd
after each batch; a conflicting suffix is cut with ``ftruncate`` and fsync'd. When a snapshot is saved the entries
it covers are dropped by writing the rest to a new log that replaces the old one (compaction stays bounded: the node
snapshots every ``snapshot_every`` applied entries).

Loading is plan-then-apply: records are read until the first one that is torn or damaged, or not
the next index; the file is cut there (a crash in the middle of an append), entries a snapshot already covers are
skipped (a crash between the snapshot and the log's rewrite).
"""

from __future__ import annotations

import os
import struct
import zlib
from dataclasses import dataclass, field

from pocketmq.common.files import write_atomically
from pocketmq.controller.raft.core import LogOp, Snapshot
from pocketmq.controller.raft.messages import Entry

__all__ = ["LoadedState", "RaftStorage", "StorageError"]

META = struct.Struct(">IIQH")
META_MAGIC = 0x5246544D  # "RFTM"
SNAP = struct.Struct(">IIQQI")
SNAP_MAGIC = 0x52465453  # "RFTS"
RECORD = struct.Struct(">IIIQQ")
RECORD_MAGIC = 0x5246544C  # "RFTL"
MAX_RECORD_DATA = 16 * 1024 * 1024
"""A record claiming more than this is damage, not an entry (controller events are a few hundred bytes)."""


class StorageError(OSError):
    """A Raft file that exists but cannot be trusted (bad magic or CRC in the meta or snapshot file)."""


@dataclass(slots=True)
class LoadedState:
    term: int = 0
    voted_for: str | None = None
    snapshot: Snapshot | None = None
    entries: list[Entry] = field(default_factory=list)
    #: bytes cut from the end of the log because the last records were torn
    cut_bytes: int = 0


class RaftStorage:
    """The files of one node (see the module docstring)."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self.meta_path = os.path.join(directory, "raft.meta")
        self.snapshot_path = os.path.join(directory, "raft.snapshot")
        self.log_path = os.path.join(directory, "raft.log")
        self._log_fd: int | None = None
        #: index -> byte position of its record in raft.log, for entries in the file
        self._positions: dict[int, int] = {}
        self._size = 0

    # ================================================================================================= load

    def load(self) -> LoadedState:
        """Read everything (creating the directory when missing) and open the log for appends."""
        os.makedirs(self.directory, exist_ok=True)
        state = LoadedState()
        state.term, state.voted_for = self._read_meta()
        state.snapshot = self._read_snapshot()
        base = state.snapshot.index if state.snapshot else 0
        state.entries, state.cut_bytes = self._read_log(base)
        return state

    def _read_meta(self) -> tuple[int, str | None]:
        try:
            with open(self.meta_path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return 0, None
        if len(data) < META.size:
            raise StorageError(f"{self.meta_path}: truncated")
        magic, crc, term, length = META.unpack_from(data)
        if magic != META_MAGIC or zlib.crc32(data[8:]) != crc or len(data) != META.size + length:
            raise StorageError(f"{self.meta_path}: bad magic, length or CRC")
        voted = data[META.size:].decode()
        return term, voted or None

    def _read_snapshot(self) -> Snapshot | None:
        try:
            with open(self.snapshot_path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return None
        if len(data) < SNAP.size:
            raise StorageError(f"{self.snapshot_path}: truncated")
        magic, crc, index, term, length = SNAP.unpack_from(data)
        if magic != SNAP_MAGIC or zlib.crc32(data[8:]) != crc or len(data) != SNAP.size + length:
            raise StorageError(f"{self.snapshot_path}: bad magic, length or CRC")
        return Snapshot(index, term, data[SNAP.size:])

    def _read_log(self, base: int) -> tuple[list[Entry], int]:
        try:
            with open(self.log_path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            data = b""
        entries: list[Entry] = []
        positions: dict[int, int] = {}
        pos = 0
        expected: int | None = None
        while pos + RECORD.size <= len(data):
            magic, crc, length, term, index = RECORD.unpack_from(data, pos)
            end = pos + RECORD.size + length
            if magic != RECORD_MAGIC or length > MAX_RECORD_DATA or end > len(data):
                break
            if zlib.crc32(memoryview(data)[pos + 8:end]) != crc or (expected is not None and index != expected):
                break
            positions[index] = pos
            if index > base:
                entries.append(Entry(term, index, data[pos + RECORD.size:end]))
            expected = index + 1
            pos = end
        cut = len(data) - pos
        fd = os.open(self.log_path, os.O_RDWR | os.O_CREAT, 0o644)
        if cut:
            os.ftruncate(fd, pos)
            os.fsync(fd)
        self._log_fd = fd
        self._positions = positions
        self._size = pos
        if entries and entries[0].index != base + 1:
            entries = []  # a gap after the snapshot: the log is of no use (the leader sends what is missing)
        return entries, cut

    # ================================================================================================ write

    def persist(self, hard_state: tuple[int, str | None] | None, ops: list[LogOp]) -> None:
        """Make ``hard_state`` and ``ops`` durable, in order."""
        if hard_state is not None:
            self._write_meta(*hard_state)
        appended = False
        for op in ops:
            if op.snapshot is not None:
                if appended:
                    self._sync_log()
                    appended = False
                self._save_snapshot(op.snapshot)
            if op.truncate_from is not None:
                if appended:
                    self._sync_log()
                    appended = False
                self._truncate(op.truncate_from)
            if op.entries:
                self._append(op.entries)
                appended = True
        if appended:
            self._sync_log()

    def _fd(self) -> int:
        if self._log_fd is None:
            raise StorageError("the Raft log is not open (load() first)")
        return self._log_fd

    def _write_meta(self, term: int, voted_for: str | None) -> None:
        voted = (voted_for or "").encode()
        body = struct.pack(">QH", term, len(voted)) + voted
        write_atomically(self.meta_path, struct.pack(">II", META_MAGIC, zlib.crc32(body)) + body)

    def _append(self, entries: tuple[Entry, ...]) -> None:
        chunks = []
        position = self._size
        for entry in entries:
            header = struct.pack(">IQQ", len(entry.data), entry.term, entry.index)
            crc = zlib.crc32(entry.data, zlib.crc32(header))
            record = struct.pack(">II", RECORD_MAGIC, crc) + header + entry.data
            self._positions[entry.index] = position
            position += len(record)
            chunks.append(record)
        os.lseek(self._fd(), self._size, os.SEEK_SET)
        for chunk in chunks:
            view = memoryview(chunk)
            while view:
                view = view[os.write(self._fd(), view):]
        self._size = position

    def _sync_log(self) -> None:
        os.fdatasync(self._fd())

    def _truncate(self, index: int) -> None:
        position = self._positions.get(index)
        if position is None:
            return  # not in the file (already cut, or covered by the snapshot)
        for dropped in [i for i in self._positions if i >= index]:
            del self._positions[dropped]
        os.ftruncate(self._fd(), position)
        os.fsync(self._fd())
        self._size = position

    def _save_snapshot(self, snapshot: Snapshot) -> None:
        body = struct.pack(">QQI", snapshot.index, snapshot.term, len(snapshot.data)) + snapshot.data
        write_atomically(self.snapshot_path, struct.pack(">II", SNAP_MAGIC, zlib.crc32(body)) + body)
        self._compact(snapshot.index)

    def _compact(self, index: int) -> None:
        """Rewrite the log without the entries up to ``index`` (saved in the snapshot)."""
        keep_from = self._positions.get(index + 1)
        fd = self._fd()
        tail = b""
        if keep_from is not None:
            os.lseek(fd, keep_from, os.SEEK_SET)
            tail = _read_all(fd, self._size - keep_from)
        write_atomically(self.log_path, tail)
        os.close(fd)
        self._log_fd = os.open(self.log_path, os.O_RDWR, 0o644)
        shift = keep_from or 0
        self._positions = {i: p - shift for i, p in self._positions.items() if i > index} if keep_from is not None \
            else {}
        self._size = len(tail)

    def close(self) -> None:
        if self._log_fd is not None:
            os.close(self._log_fd)
            self._log_fd = None

    @property
    def log_bytes(self) -> int:
        """Size of raft.log."""
        return self._size


def _read_all(fd: int, size: int) -> bytes:
    parts = []
    while size > 0:
        chunk = os.read(fd, size)
        if not chunk:
            break
        parts.append(chunk)
        size -= len(chunk)
    return b"".join(parts)
