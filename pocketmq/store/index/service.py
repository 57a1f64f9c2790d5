"""``IndexService``: RocketMQ 4.9's message index (``IndexService``), built behind the commit log.

What it indexes. Every record's ``UNIQ_KEY`` and each space-separated key of ``KEYS``, as ``topic#key``
(rolled-back transaction halves are skipped, as in RocketMQ), in files under ``<storePath>/index/`` named by
their creation time (``yyyyMMddHHmmssSSS``), each holding ``maxIndexNum - 1`` keys (:mod:`pocketmq.store.index.file`);
a full file is followed by a new one.

How it is fed. RocketMQ's reput thread builds the index with the consume queues. Here the put path (a
master) and the reput (a slave) already tell every commit-log growth to the store's growth listeners; the
service's listener only wakes it (:meth:`IndexService.trigger`, a flag and a future), and the service then
walks the records written since its last run (one :func:`~pocketmq.common.record.locate_record` per record) in
slices of :data:`SLICE_RECORDS`, yielding to the loop between slices. So a send pays one listener call, and the
index work happens after the send's answer is written, batched by however many sends came meanwhile;
under load a slice covers many sends. The walk never writes past the entries' reserved window: it waits
(without blocking the loop) for the next window, or for the next file, both made in the store's I/O thread;
when that fails (a full disk) the walk pauses :data:`ROOM_RETRY_S` and tries again.

Durability. Index writes are memory writes to the mapping; every ``flushCommitLogThoroughInterval`` (the
commit log's own full-flush cadence, 10 s: each flush writes every slot page touched since the last one,
spread over the file's slots, so a shorter cadence rewrites the same pages more often) the files written
since the last flush are fdatasync-ed in the I/O thread and the checkpoint's ``indexMsgTimestamp``
becomes the newest store time they hold. At start after a crash (the ``abort`` file), files whose end time
is past the checkpoint's ``indexMsgTimestamp`` are dropped, as RocketMQ does, and the index is rebuilt from
the commit log after the newest entry left (the whole log when none is left), in the background.

Retention. Files whose newest record is older than the commit log's first offset are deleted (never the
one being written), in the I/O thread.

Queries (:meth:`IndexService.query`) read the files newest first and stop at ``maxNum`` (at most
``maxMsgsNumBatch``) or at the first file that begins before the time range, then read the records: a
record whose topic or keys do not match (a hash collision, or a record the commit log no longer holds) is
left out.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import os
import time
from typing import NamedTuple

from pocketmq.common.errors import RecordFormatError
from pocketmq.common.logs import Logger
from pocketmq.common.message import MessageConst, get_property
from pocketmq.common.service import Service
from pocketmq.store.checkpoint import StoreCheckpoint
from pocketmq.store.commitlog import CommitLog
from pocketmq.store.config import StoreConfig
from pocketmq.store.dispatch_kernel import Walk, index_span
from pocketmq.store.index.file import IndexFile, file_size
from pocketmq.store.mapped_file import MappedFile, fsync_dir

SLICE_RECORDS = 256
"""Records indexed between two yields to the event loop (a slice is a few milliseconds)."""
WALK_PAUSE_S = 0.001
"""Least time between two walks: under load a walk then covers every send of a millisecond or more, instead
of paying its set-up for the few sends of one loop iteration (queries see records at most ~1 ms later)."""
ENTRY_WINDOW = 1 << 20
"""Bytes of entries reserved ahead of the writer (52,428 keys); refilled when half is used."""
RETENTION_INTERVAL_S = 10.0
ROOM_RETRY_S = 1.0
"""Pause of the walk after a reservation or a file creation failed (a full disk): it is not retried per send."""
_NAME_DIGITS = 17


class QueryResult(NamedTuple):
    """The records found (raw stored bytes, newest first) and the index's newest entry, as RocketMQ's
    ``QueryMessageResult`` reports it (``indexLastUpdateTimestamp``, ``indexLastUpdatePhyoffset``)."""

    records: list[bytes]
    index_last_update_timestamp: int
    index_last_update_phyoffset: int


def index_file_name(millis: int) -> str:
    """``yyyyMMddHHmmssSSS`` of ``millis`` in local time, as RocketMQ names index files."""
    return time.strftime("%Y%m%d%H%M%S", time.localtime(millis / 1000)) + f"{millis % 1000:03d}"


def record_matches(properties: str, key: str) -> bool:
    """True when ``key`` is the record's UNIQ_KEY or one of its KEYS."""
    if get_property(properties, MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX) == key:
        return True
    keys = get_property(properties, MessageConst.PROPERTY_KEYS)
    return keys is not None and key in keys.split(MessageConst.KEY_SEPARATOR)


class IndexService(Service):
    """The index of one store (see the module docstring). :meth:`load` (blocking) before :meth:`start`;
    ``executor`` runs the blocking work (file creation, reservation, flush, deletion)."""

    name = "store-index"

    def __init__(self, config: StoreConfig, commit_log: CommitLog, checkpoint: StoreCheckpoint,
                 executor: concurrent.futures.Executor, log: Logger) -> None:
        super().__init__()
        self.directory = os.path.join(config.store_path_root_dir, "index")
        self.files: list[IndexFile] = []
        #: commit-log offset where the next walk starts
        self.offset = 0
        self._config = config
        self._slots = config.max_hash_slot_num
        self._entries = config.max_index_num
        self._size = file_size(self._slots, self._entries)
        self._commit_log = commit_log
        self._checkpoint = checkpoint
        self._executor = executor
        self._log = log
        self._last_indexed = -1
        self._dirty: dict[str, IndexFile] = {}
        self._error_offset = -1
        #: after a failed reservation or file creation (a full disk), the walk waits until this loop time
        self._retry_at = 0.0
        self._last_name = ""
        #: a reservation or file creation failed and has not succeeded since (said once)
        self._room_failing = False
        #: the next file being made in the I/O thread (a shutdown meanwhile closes it in :meth:`close`)
        self._creating: concurrent.futures.Future[IndexFile] | None = None

    # ------------------------------------------------------------------------------------ lifecycle

    def load(self, *, abnormal: bool, checkpoint_timestamp: int) -> None:
        """Open the files of the index directory and decide where indexing resumes (see the module
        docstring). Call after the commit log's recovery. Blocking."""
        os.makedirs(self.directory, exist_ok=True)
        for name in sorted(os.listdir(self.directory)):
            path = os.path.join(self.directory, name)
            if len(name) != _NAME_DIGITS or not name.isdigit():
                if name.endswith(".tmp"):
                    os.unlink(path)
                continue
            self._load_file(path, abnormal, checkpoint_timestamp)
        self._resume()
        last = self.files[-1] if self.files else None
        if last is not None and not last.is_full:
            try:
                last.mapped.reserve(0, last.entry_end(0) + ENTRY_WINDOW, warm=False)
            except OSError as exc:  # a full disk: the walk waits for room as it does while running
                self._room_failed(exc)
        self._log.info("index_loaded", files=len(self.files), resume_offset=self.offset, abnormal=abnormal)

    def _load_file(self, path: str, abnormal: bool, checkpoint_timestamp: int) -> None:
        if os.path.getsize(path) != self._size:
            self._log.warning("index_file_of_other_size_dropped", path=path, expected=self._size)
            os.unlink(path)
            return
        mapped = MappedFile.open_existing(path, self._size)
        if mapped.data_end() == 0:  # made and never written (its header is a hole, not read: see mapped_file)
            self._log.warning("index_file_empty_dropped", path=path)
            mapped.destroy()
            return
        index = IndexFile(mapped, self._slots, self._entries)
        if abnormal and index.end_timestamp > checkpoint_timestamp:
            self._log.warning("index_file_dropped_after_crash", path=path, end_timestamp=index.end_timestamp,
                              checkpoint=checkpoint_timestamp)
            index.mapped.destroy()
            return
        self.files.append(index)

    def _resume(self) -> None:
        min_offset = self._commit_log.min_offset
        last = self.files[-1] if self.files else None
        if last is not None and (last.end_phy_offset > 0 or not last.is_empty) and last.end_phy_offset >= min_offset:
            self.offset = self._last_indexed = last.end_phy_offset
        else:
            self.offset, self._last_indexed = min_offset, -1
        self._checkpoint.index_msg_timestamp = last.end_timestamp if last is not None else 0

    def close(self) -> None:
        """Write the headers, flush and unmap every file (and a file made for a walk that shutdown
        cancelled: the I/O thread runs this after it). Blocking (at shutdown)."""
        creating, self._creating = self._creating, None
        made = [creating.result()] if (creating is not None and creating.done() and not creating.cancelled()
                                       and creating.exception() is None) else []
        for index in self.files + [f for f in made if f not in self.files]:
            if not index.mapped.closed:
                index.write_header()
                with contextlib.suppress(OSError):
                    index.flush()
                index.mapped.close()

    def on_growth(self, max_offset: int) -> None:
        """The store's growth listener: wake the walk."""
        del max_offset
        self.trigger()

    async def run(self) -> None:
        interval = self._config.flush_commit_log_thorough_interval_ms / 1000
        loop = asyncio.get_running_loop()
        next_flush = next_retention = loop.time()
        while True:
            await self._sleep_or_trigger(max(0.0, min(next_flush, next_retention) - loop.time()))
            await self.build()
            await asyncio.sleep(WALK_PAUSE_S)  # the sends of the pause are indexed by the next walk, together
            now = loop.time()
            if now >= next_flush:
                next_flush = now + interval
                await self.flush()
            if now >= next_retention:
                next_retention = now + RETENTION_INTERVAL_S
                await self.delete_expired()

    # ------------------------------------------------------------------------------------------ build

    def tail_cut(self, offset: int) -> None:
        """The commit log was cut back to ``offset``: walk from there again (entries of the records cut stay
        in the files; :meth:`query` checks every record it returns against the commit log)."""
        if self.offset > offset:
            self.offset = offset
            self._last_indexed = min(self._last_indexed, offset - 1)  # new records will come there

    async def build(self) -> None:
        """Index every record written since the last walk, a slice at a time."""
        commit_log = self._commit_log
        if asyncio.get_running_loop().time() < self._retry_at:
            return
        if self.offset > commit_log.max_offset:  # a tail cut (recovery, or a slave's invalid bytes)
            self.tail_cut(commit_log.max_offset)
        if self.offset < commit_log.min_offset:  # retention went past the walk
            self.offset = commit_log.min_offset
        while self.offset < commit_log.max_offset:
            need = self._slice()
            if need is None:
                await asyncio.sleep(0)
                continue
            if need < 0:
                return
            if not await self._make_room(need):
                return

    def _slice(self) -> int | None:
        """Index up to :data:`SLICE_RECORDS` records. None: more to do; -1: caught up (or stopped at bytes
        that are not a record yet); n > 0: the next record needs ``n`` entries that have no room.

        One parse per record (:func:`~pocketmq.common.record.locate_record`, the commit log's own validation) gives
        everything; the commit log's scanner would parse each record once more, for what the consume queues
        need and the index does not. The records of each commit-log file go to one
        :func:`~pocketmq.store.dispatch_kernel.index_span` (compiled: typed loops over the two mappings)."""
        queue = self._commit_log.queue
        index = self.files[-1] if self.files else None
        walk = Walk(self._last_indexed, index.room(self._entries) if index is not None else 0, SLICE_RECORDS)
        most = self._entries - 1
        offset = self.offset
        base = offset
        need: int | None = -1
        try:
            while walk.done < SLICE_RECORDS:
                mapped = queue.find(offset)
                if mapped is None:
                    break
                base, limit, size = mapped.file_from_offset, mapped.wrote_position, mapped.file_size
                walk.pos = offset - base
                if walk.pos >= limit and limit < size:
                    break  # the end of the written data
                walk.blank = False
                index_span(walk, mapped.view, limit, size, base, index, most)
                offset = base + walk.pos
                if walk.need:
                    need = walk.need
                    break
                if walk.pos < size:
                    break  # the end of the written data, or of the slice
            if walk.done >= SLICE_RECORDS and need == -1:
                need = None
        except (RecordFormatError, UnicodeDecodeError) as exc:
            offset = base + walk.pos
            self._stopped_at(offset, exc)
        self.offset = offset
        self._last_indexed = walk.last
        if index is not None and walk.touched:
            index.write_header()
            self._dirty[index.name] = index
        return need

    def _stopped_at(self, offset: int, exc: Exception) -> None:
        """The walk met bytes that are not a whole record: a slave's next bytes not all here yet (quiet), or
        damage (logged once per place; the walk waits there)."""
        quiet = isinstance(exc, RecordFormatError) and (exc.reason == "truncated record" or exc.is_end_of_data)
        if not quiet and offset != self._error_offset:
            self._error_offset = offset
            self._log.warning("index_walk_stopped", offset=offset, reason=str(exc))

    async def _make_room(self, need: int) -> bool:
        """Reserve the next window of entries, or make the next file (the current one is full, or there is
        none); False when that failed (logged; the walk is retried on the next wake)."""
        loop = asyncio.get_running_loop()
        index = self.files[-1] if self.files else None
        try:
            if index is None or index.index_count + need > index.index_num:
                if index is not None:
                    self._dirty[index.name] = index
                creating = self._creating = self._executor.submit(self._new_file, index)
                self.files.append(await asyncio.wrap_future(creating))
                self._creating = None
            else:
                end = index.entry_end(need) + ENTRY_WINDOW
                reserve = functools.partial(index.mapped.reserve, 0, end, warm=False)
                await loop.run_in_executor(self._executor, reserve)
        except OSError as exc:
            self._room_failed(exc)
            self._retry_at = loop.time() + ROOM_RETRY_S
            return False
        self._room_failing = False
        return True

    def _room_failed(self, exc: OSError) -> None:
        """Log a failed reservation or file creation once until one succeeds (a full disk lasts)."""
        if not self._room_failing:
            self._log.error("index_room_failed", error=str(exc), retry_in_s=ROOM_RETRY_S)
        self._room_failing = True

    def _new_file(self, previous: IndexFile | None) -> IndexFile:
        """Create the next file (sparse; its header, slots and first entries reserved). Blocking."""
        millis = int(time.time() * 1000)
        name = index_file_name(millis)
        while name <= self._last_name or os.path.exists(os.path.join(self.directory, name)):
            millis += 1
            name = index_file_name(millis)
        self._last_name = name
        path = os.path.join(self.directory, name)
        mapped = MappedFile.create(path, self._size)
        try:
            index = IndexFile(mapped, self._slots, self._entries)
            mapped.reserve(0, index.entry_end(0) + ENTRY_WINDOW, warm=False)
        except OSError:
            mapped.destroy()
            raise
        if previous is not None:
            index.start_after(previous.end_phy_offset, previous.end_timestamp)
        index.write_header()
        self._log.info("index_file_created", path=path, previous_end_offset=index.end_phy_offset)
        return index

    # ------------------------------------------------------------------------------------- durability

    async def flush(self) -> None:
        """fdatasync the files written since the last flush, then advance the checkpoint's
        ``indexMsgTimestamp`` (written with the next checkpoint)."""
        if not self._dirty:
            return
        dirty, self._dirty = list(self._dirty.values()), {}
        stamp = self.files[-1].end_timestamp if self.files else 0
        try:
            await asyncio.get_running_loop().run_in_executor(self._executor, _flush_all, dirty)
        except OSError as exc:
            self._log.error("index_flush_failed", error=str(exc))
            for index in dirty:
                self._dirty[index.name] = index
            return
        self._checkpoint.index_msg_timestamp = max(self._checkpoint.index_msg_timestamp, stamp)

    async def delete_expired(self) -> None:
        """Delete the files whose newest record is before the commit log's first offset (never the last)."""
        min_offset = self._commit_log.min_offset
        expired = [f for f in self.files[:-1] if f.end_phy_offset < min_offset]
        if not expired:
            return
        self.files = [f for f in self.files if f not in expired]
        for index in expired:
            self._dirty.pop(index.name, None)
        await asyncio.get_running_loop().run_in_executor(self._executor, _destroy_all, expired, self.directory)
        self._log.info("index_files_deleted", count=len(expired), commit_log_min_offset=min_offset)

    # ----------------------------------------------------------------------------------------- query

    def query_offsets(self, topic: str, key: str, max_num: int, begin: int, end: int) -> tuple[list[int], int, int]:
        """Physical offsets of the records of ``key`` stored in ``[begin, end]`` (ms), newest first, at
        most ``max_num`` (capped at ``maxMsgsNumBatch``), with the newest entry's time and offset."""
        max_num = max(0, min(max_num, self._config.max_msgs_num_batch))
        found: list[int] = []
        full_key = f"{topic}#{key}"
        files = self.files
        if not files:
            return found, 0, 0
        last = files[-1]
        for index in reversed(files):
            if len(found) >= max_num:
                break
            if index.time_matched(begin, end):
                index.select(full_key, max_num, begin, end, found)
            if index.begin_timestamp < begin:
                break
        return found, last.end_timestamp, last.end_phy_offset

    def query(self, topic: str, key: str, max_num: int, begin: int, end: int) -> QueryResult:
        """The stored records of ``key`` in ``topic`` (see :meth:`query_offsets`); a record the commit log
        no longer holds, or whose topic or keys do not match (hash collisions), is left out."""
        offsets, stamp, phy = self.query_offsets(topic, key, max_num, begin, end)
        records: list[bytes] = []
        seen: set[int] = set()
        for offset in offsets:
            if offset in seen:
                continue
            seen.add(offset)
            record = self._commit_log.look_message(offset)
            if record is None or record.topic != topic or not record_matches(record.properties, key):
                continue
            view = self._commit_log.get_message(offset, record.total_size)
            if view is not None:
                records.append(bytes(view))
        return QueryResult(records, stamp, phy)

    def stats(self) -> dict[str, object]:
        """Runtime figures: files, where the walk is, the newest entry."""
        last = self.files[-1] if self.files else None
        return {"indexFiles": len(self.files), "indexOffset": self.offset,
                "indexLastUpdateTimestamp": last.end_timestamp if last else 0,
                "indexLastUpdatePhyoffset": last.end_phy_offset if last else 0}


def _flush_all(files: list[IndexFile]) -> None:
    for index in files:
        if not index.mapped.closed:
            index.flush()


def _destroy_all(files: list[IndexFile], directory: str) -> None:
    for index in files:
        index.mapped.destroy()
    fsync_dir(directory)

