"""``ConfigJournal``: a versioned config table (topics, subscription groups) kept on disk as RocketMQ's JSON
snapshot plus an append-only journal of the changes since, so that one change costs one short line, not a
rewrite of the whole file.

Files (``<name>`` is ``topics.json`` or ``subscriptionGroup.json``)::

    <name>                RocketMQ's format (``{"dataVersion":{...},"<tableKey>":{name: config, ...}}``), replaced
                          atomically (temporary file, fsync, rename, directory fsync)
    <name>.journal        one line per change since that snapshot:
                          <crc32 of the JSON, 8 hex digits> <JSON>\\n
                          JSON = {"v":{"counter":c,"timestamp":t},"put":{config}}  or  {"v":{...},"del":"name"}
    <name>.journal.old    the journal a compaction under way is folding into the next snapshot

Every change bumps the table's ``DataVersion``; a line carries the version after its change, and loading
replays, over the snapshot, the lines of ``.journal.old`` and then of ``.journal`` whose counter is above the
snapshot's. A kill in the middle of a line leaves a line without its newline or with a CRC that does not match:
loading stops there and cuts the journal back to the last whole line, so the table read is always the one after
some prefix of the changes.

Writes: a change's line is appended on the event loop (one ``write`` of ~200 bytes to an ``O_APPEND`` file: into
the page cache, like the commit log's writes through its map), so when the change's request is answered a
process kill loses nothing; a thread ``fdatasync``\\ s behind the writes, at most one at a time, so no writer ever
waits for the disk. The journal is folded into a new snapshot (compaction) once it holds as many changes as the
table has entries (at least :data:`COMPACT_MIN_ENTRIES`) and no change came for :data:`COMPACT_QUIET_S`, or at
once past four times that; at close; and when the whole table is replaced (a slave taking its master's). A
compaction renames the journal to ``.journal.old`` and starts a new one (on the loop: two metadata calls), then a
thread writes the snapshot, encoded entry by entry so that the loop keeps getting the GIL, and removes the old
journal. Compaction costs time proportional to the table, once per as many changes: a constant amount per change.
A write that fails (a full disk) stops the appends until a snapshot has been written: the snapshot holds every
change, and a journal never gets a line after a torn one.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import errno
import json
import os
import time
import zlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pocketmq.common.files import write_atomically
from pocketmq.common.logs import get_logger
from pocketmq.common.service import Service
from pocketmq.common.topic_config import DataVersion

log = get_logger("pocketmq.broker.config_journal")

_V = TypeVar("_V")

JOURNAL_SUFFIX = ".journal"
OLD_SUFFIX = ".journal.old"
#: Journal lines before a compaction is considered, whatever the table's size.
COMPACT_MIN_ENTRIES = 1000
#: Seconds without a change before a due compaction runs (a burst of creations is not interrupted by one).
COMPACT_QUIET_S = 1.0
#: Past this many times the compaction threshold, compaction runs even while changes keep coming.
COMPACT_FORCE_FACTOR = 4


@dataclass(frozen=True, slots=True)
class JournalEntry:
    """One change: ``value`` is the config's JSON for a put, None for a deletion of ``name``."""

    version: DataVersion
    name: str
    value: dict[str, Any] | None


def encode_entry(version: DataVersion, name: str, value: dict[str, Any] | None) -> bytes:
    """One journal line."""
    record: dict[str, Any] = {"v": version.to_json_dict()}
    if value is None:
        record["del"] = name
    else:
        record["put"] = value
    text = json.dumps(record, separators=(",", ":"), ensure_ascii=False).encode()
    return b"%08x %s\n" % (zlib.crc32(text), text)


def decode_entry(line: bytes, name_of: Callable[[dict[str, Any]], str]) -> JournalEntry | None:
    """A whole line (without its newline) back to its entry; None when it is damaged."""
    crc, _, text = line.partition(b" ")
    try:
        if len(crc) != 8 or int(crc, 16) != zlib.crc32(text):
            return None
        record = json.loads(text)
        version = DataVersion.from_json_dict(record["v"])
        if "del" in record:
            return JournalEntry(version, str(record["del"]), None)
        value = record["put"]
        if not isinstance(value, dict):
            return None
        return JournalEntry(version, name_of(value), value)
    except (ValueError, KeyError, TypeError):
        return None


def read_journal(path: str, name_of: Callable[[dict[str, Any]], str]) -> tuple[list[JournalEntry], int]:
    """The whole entries of the journal at ``path`` (none when it is missing) and the byte length they take:
    reading stops at the first damaged or unfinished line. Blocking."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return [], 0
    entries: list[JournalEntry] = []
    good = 0
    while good < len(data):
        end = data.find(b"\n", good)
        if end < 0:
            break
        entry = decode_entry(data[good:end], name_of)
        if entry is None:
            break
        entries.append(entry)
        good = end + 1
    return entries, good


def cut_journal(path: str, length: int) -> None:
    """Drop what follows the last whole line (a write a kill interrupted), durably. Blocking."""
    with contextlib.suppress(FileNotFoundError):
        if os.path.getsize(path) > length:
            log.warning("config_journal_tail_cut", path=path, kept_bytes=length)
            fd = os.open(path, os.O_WRONLY)
            try:
                os.ftruncate(fd, length)
                os.fsync(fd)
            finally:
                os.close(fd)


def replay(path: str, after: DataVersion, name_of: Callable[[dict[str, Any]], str]) -> Iterator[JournalEntry]:
    """The entries of ``.journal.old`` and ``.journal`` newer than the snapshot version ``after``, in order; a
    damaged tail is cut off first. Blocking."""
    out: list[JournalEntry] = []
    for journal in (path + OLD_SUFFIX, path + JOURNAL_SUFFIX):
        entries, length = read_journal(journal, name_of)
        cut_journal(journal, length)
        out.extend(e for e in entries if e.version.counter > after.counter)
    return iter(out)


def encode_snapshot(version: DataVersion, table_key: str, table: Mapping[str, _V],
                    to_json: Callable[[_V], dict[str, Any]]) -> bytes:
    """RocketMQ's file for ``table``, one entry at a time (a thread encoding it gives the GIL back between
    entries)."""
    parts = ['{\n\t"dataVersion":', json.dumps(version.to_json_dict(), separators=(",", ":")),
             f',\n\t"{table_key}":{{']
    first = True
    for name, value in table.items():
        parts.append("\n\t\t" if first else ",\n\t\t")
        parts.append(json.dumps(name, ensure_ascii=False))
        parts.append(":")
        parts.append(json.dumps(to_json(value), separators=(",", ":"), ensure_ascii=False))
        first = False
    parts.append("\n\t}\n}\n")
    return "".join(parts).encode()


class ConfigJournal(Service, Generic[_V]):
    """Persistence of one table (module docstring). ``table`` and ``version`` read the live table on the event
    loop; its values are never changed in place (a change puts a new value), so a shallow copy is a snapshot. The
    service's loop runs the compactions; changes are written as they are recorded."""

    def __init__(self, path: str, table_key: str, *, table: Callable[[], Mapping[str, _V]],
                 version: Callable[[], DataVersion], to_json: Callable[[_V], dict[str, Any]]) -> None:
        super().__init__(name=f"journal-{os.path.basename(path)}")
        self.path = path
        self.table_key = table_key
        self._table = table
        self._version = version
        self._to_json = to_json
        self._fd: int | None = None
        #: a snapshot must be written before lines are appended again (the table was replaced, or a write failed)
        self._rewrite = False
        self._entries = 0
        self._last_change = 0.0
        self._writer = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="journal-write")
        self._syncer = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="journal-sync")
        self._written = 0
        self._syncing = False
        self._closed = False

    # -- recording (event loop) ---------------------------------------------------------------------------------

    def put(self, version: DataVersion, name: str, value: _V) -> None:
        """Record that ``name`` now holds ``value`` (``version`` is the table's after the change)."""
        self._record(encode_entry(version, name, self._to_json(value)))

    def delete(self, version: DataVersion, name: str) -> None:
        """Record that ``name`` was removed."""
        self._record(encode_entry(version, name, None))

    def rewrite(self) -> None:
        """Write the whole table as a new snapshot next (the table was replaced as a whole)."""
        self._rewrite = True
        self.trigger()

    def _record(self, line: bytes) -> None:
        if self._closed:
            return
        self._entries += 1
        self._last_change = time.monotonic()
        if not self._rewrite:
            try:
                _write_all(self._open(), line)
            except OSError as exc:
                log.error("config_journal_write_failed", path=self.path, error=str(exc), retry="full_snapshot")
                self._rewrite = True  # the snapshot holds this change and the ones until it is written
            else:
                self._written += 1
                self._sync_soon()
        if self._rewrite or self._entries >= self._threshold():
            self.trigger()

    def _open(self) -> int:
        if self._fd is None:
            os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
            self._fd = os.open(self.path + JOURNAL_SUFFIX, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        return self._fd

    # -- making it durable --------------------------------------------------------------------------------------

    def _sync_soon(self) -> None:
        """One ``fdatasync`` at a time, in the sync thread; lines written meanwhile get the next one."""
        if self._syncing or self._fd is None or not self.running:
            return
        self._syncing = True
        target, fd = self._written, self._fd
        future = asyncio.get_running_loop().run_in_executor(self._syncer, os.fdatasync, fd)
        future.add_done_callback(lambda done: self._synced(done, target))

    def _synced(self, done: asyncio.Future[None], target: int) -> None:
        self._syncing = False
        if done.cancelled():
            return
        exc = done.exception()
        if exc is not None and not (isinstance(exc, OSError) and exc.errno == errno.EBADF):  # rotated away
            log.error("config_journal_sync_failed", path=self.path, error=str(exc))
        if self._written > target:
            self._sync_soon()

    # -- compaction ---------------------------------------------------------------------------------------------

    async def run(self) -> None:
        while True:
            await self._sleep_or_trigger(COMPACT_QUIET_S if self._compaction_waiting() else None)
            if self._rewrite or self._compaction_due():
                await self._compact()

    def _threshold(self) -> int:
        return max(COMPACT_MIN_ENTRIES, len(self._table()))

    def _compaction_waiting(self) -> bool:
        return self._entries >= self._threshold()

    def _compaction_due(self) -> bool:
        threshold = self._threshold()
        if self._entries >= COMPACT_FORCE_FACTOR * threshold:
            return True
        return self._entries >= threshold and time.monotonic() - self._last_change >= COMPACT_QUIET_S

    async def _compact(self) -> None:
        """Start a new journal, write the table as it is now as the snapshot, drop the old journal."""
        old = self._rotate()
        snapshot = (self._version().copy(), dict(self._table()))
        self._rewrite, self._entries = False, 0
        try:
            await asyncio.get_running_loop().run_in_executor(self._writer, self._write_snapshot, snapshot, old)
        except OSError as exc:
            log.error("config_journal_snapshot_failed", path=self.path, error=str(exc), retry="next_change")
            self._rewrite = True

    def _rotate(self) -> int | None:
        """On the loop: the journal becomes ``.journal.old`` (its fd returned) and appends go to a new one."""
        old, self._fd = self._fd, None
        if old is not None:
            os.rename(self.path + JOURNAL_SUFFIX, self.path + OLD_SUFFIX)
        return old

    def _write_snapshot(self, snapshot: tuple[DataVersion, dict[str, _V]], old_fd: int | None) -> None:
        """Blocking (writer thread)."""
        version, table = snapshot
        write_atomically(self.path, encode_snapshot(version, self.table_key, table, self._to_json))
        if old_fd is not None:
            os.close(old_fd)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path + OLD_SUFFIX)  # a kill before this leaves lines the snapshot already covers

    async def close(self) -> None:
        """Fold everything into a new snapshot (durable when this returns) and release the threads; after the
        service is stopped."""
        if self._closed:
            return
        self._closed = True
        try:
            await self._compact()
        finally:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
            self._writer.shutdown(wait=True)
            self._syncer.shutdown(wait=True)


def _write_all(fd: int, data: bytes) -> None:
    while data:
        written = os.write(fd, data)
        data = data[written:]
