"""``ConfigJournal``: a versioned config table (topics, subscription groups) kept on disk as RocketMQ's JSON
snapshot plus an append-only journal of the changes since, so that one change costs one short line, not a
rewrite of the whole file.

Files (``<name>`` is ``topics.json`` or ``subscriptionGroup.json``)::

    <name>            RocketMQ's format (``{"dataVersion":{...},"<tableKey>":{name: config, ...}}``), replaced
                      atomically (temporary file, fsync, rename, directory fsync)
    <name>.journal    one line per change since that snapshot:
                      <crc32 of the JSON, 8 hex digits> <JSON>\\n
                      JSON = {"v":{"counter":c,"timestamp":t},"put":{config}}  or  {"v":{...},"del":"name"}

Every change bumps the table's ``DataVersion``; a line carries the version after its change, and loading
replays, over the snapshot, the lines whose counter is above the snapshot's. A kill in the middle of a line
leaves a line without its newline or with a CRC that does not match: loading stops there and cuts the
journal back to the last whole line, so the table read is always the one after some prefix of the changes.

Writes: changes are queued on the event loop; a writer thread appends them (all that queued meanwhile in one
``write``) and :meth:`ConfigJournal.written` resolves once they are in the kernel (a process kill then loses
none, as RocketMQ's synchronous ``persist`` would not either); a second thread ``fdatasync``\\ s behind it, so
the writer never waits for the disk. The journal is folded into a new snapshot (compaction) once it holds
as many changes as the table has entries (at least :data:`COMPACT_MIN_ENTRIES`) and no change came for
:data:`COMPACT_QUIET_S`, or at once past four times that; at close; and when the whole table is replaced (a
slave taking its master's). The snapshot is encoded entry by entry in the writer thread, so the event loop
keeps getting the GIL while a large table is written. Compaction costs time proportional to the table, once per
as many changes: a constant amount per change.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
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
#: Journal lines before a compaction is considered, whatever the table's size.
COMPACT_MIN_ENTRIES = 1000
#: Seconds without a change before a due compaction runs (a burst of creations is not interrupted by one).
COMPACT_QUIET_S = 1.0
#: Past this many times the compaction threshold, compaction runs even while changes keep coming.
COMPACT_FORCE_FACTOR = 4
#: Lines queued and not yet written beyond which they are dropped for a full snapshot (which holds them all).
MAX_QUEUED_LINES = 100_000


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
    """The journal's entries newer than the snapshot version ``after``; a damaged tail is cut off first.
    Blocking."""
    entries, length = read_journal(path + JOURNAL_SUFFIX, name_of)
    cut_journal(path + JOURNAL_SUFFIX, length)
    return (e for e in entries if e.version.counter > after.counter)


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
    loop; its values are never changed in place (a change puts a new value), so a shallow copy is a snapshot."""

    def __init__(self, path: str, table_key: str, *, table: Callable[[], Mapping[str, _V]],
                 version: Callable[[], DataVersion], to_json: Callable[[_V], dict[str, Any]]) -> None:
        super().__init__(name=f"journal-{os.path.basename(path)}")
        self.path = path
        self.table_key = table_key
        self._table = table
        self._version = version
        self._to_json = to_json
        self._lines: list[bytes] = []
        self._waiters: list[asyncio.Future[None]] = []
        self._rewrite = False
        self._entries = 0
        self._last_change = 0.0
        self._fd: int | None = None
        self._writer = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="journal-write")
        self._syncer = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="journal-sync")
        self._sync_pending = False
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
        if len(self._lines) >= MAX_QUEUED_LINES:
            self._lines.clear()
            self._rewrite = True
        else:
            self._lines.append(line)
        self._entries += 1
        self._last_change = time.monotonic()
        self.trigger()

    async def written(self) -> None:
        """Wait until every change recorded so far is written (handed to the kernel; the disk follows)."""
        if not self._lines or self._closed or not self.running:
            return
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        await waiter

    # -- writing ------------------------------------------------------------------------------------------------

    async def run(self) -> None:
        while True:
            await self._sleep_or_trigger(COMPACT_QUIET_S if self._compaction_waiting() else None)
            await self._drain()

    def _threshold(self) -> int:
        return max(COMPACT_MIN_ENTRIES, len(self._table()))

    def _compaction_waiting(self) -> bool:
        return self._entries >= self._threshold()

    def _compaction_due(self) -> bool:
        threshold = self._threshold()
        if self._entries >= COMPACT_FORCE_FACTOR * threshold:
            return True
        return self._entries >= threshold and time.monotonic() - self._last_change >= COMPACT_QUIET_S

    async def _drain(self) -> None:
        """Write what is queued (or a snapshot in its place when one is due), then wake the waiters."""
        lines, waiters = self._lines, self._waiters
        self._lines, self._waiters = [], []
        snapshot: tuple[DataVersion, dict[str, _V]] | None = None
        if self._rewrite or self._compaction_due():
            snapshot = (self._version().copy(), dict(self._table()))
            self._rewrite, self._entries, lines = False, 0, []
        if not lines and snapshot is None:
            _wake(waiters)
            return
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(self._writer, self._write, lines, snapshot)
        except OSError as exc:
            log.error("config_journal_write_failed", path=self.path, error=str(exc), retry="full_snapshot")
            self._rewrite = True  # the next snapshot holds everything the lost lines held
        finally:
            _wake(waiters)
        if not self._sync_pending:
            self._sync_pending = True
            loop.run_in_executor(self._syncer, self._sync).add_done_callback(self._synced)

    def _synced(self, done: asyncio.Future[None]) -> None:
        self._sync_pending = False
        if not done.cancelled() and done.exception() is not None:
            log.error("config_journal_sync_failed", path=self.path, error=str(done.exception()))

    def _open(self) -> int:
        if self._fd is None:
            os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
            self._fd = os.open(self.path + JOURNAL_SUFFIX, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        return self._fd

    def _write(self, lines: list[bytes], snapshot: tuple[DataVersion, dict[str, _V]] | None) -> None:
        """Blocking (writer thread): append ``lines``, or replace the snapshot and empty the journal."""
        fd = self._open()
        if snapshot is not None:
            version, table = snapshot
            write_atomically(self.path, encode_snapshot(version, self.table_key, table, self._to_json))
            os.ftruncate(fd, 0)  # a kill before this leaves lines the snapshot's version already covers
            return
        data = b"".join(lines)
        while data:
            written = os.write(fd, data)
            data = data[written:]

    def _sync(self) -> None:
        """Blocking (sync thread)."""
        fd = self._fd
        if fd is not None:
            os.fdatasync(fd)

    async def close(self) -> None:
        """Fold everything into a new snapshot, make it durable, release the threads (after the service is
        stopped)."""
        if self._closed:
            return
        self._closed = True
        waiters, self._waiters, self._lines = self._waiters, [], []
        snapshot = (self._version().copy(), dict(self._table()))
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(self._writer, self._write, [], snapshot)
            await loop.run_in_executor(self._syncer, self._sync)
        except OSError as exc:
            log.error("config_journal_close_failed", path=self.path, error=str(exc))
        finally:
            _wake(waiters)
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
            self._writer.shutdown(wait=True)
            self._syncer.shutdown(wait=True)


def _wake(waiters: list[asyncio.Future[None]]) -> None:
    for waiter in waiters:
        if not waiter.done():
            waiter.set_result(None)
