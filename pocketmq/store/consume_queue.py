"""Consume queues: one index per topic queue over the commit log.

Unit layout (20 bytes, big-endian)::

    offset  size  field
    0       8     commit-log offset of the record
    8       4     record size
    12      8     tag code: Java hashCode of TAGS (0 without tags); for SCHEDULE_TOPIC_XXXX the delivery time

Unit ``i`` of a queue (its *logical* or queue offset) sits at byte ``i * 20`` of the queue's files, which
live in ``consumequeue/<topic>/<queueId>/`` and are named by byte offset (0, 6000000, ...). A queue that
starts past 0 (its first record was deleted before the queue was built, or it was built on a slave) has
the units before its first real one filled with blank units ``(0, 0x7FFFFFFF, 0)``, as RocketMQ does.

Units are written in commit-log order, so their commit-log offsets ascend; recovery uses that to reject
a damaged tail, and truncation to a commit-log offset is a binary search.

Like the commit log, a queue's files are sparse with a small reserved window ahead of the writer
(``reserveWindowConsumeQueue``, see :mod:`pocketmq.store.mapped_file`): the put path makes sure of the room for a
unit (:meth:`ConsumeQueue.has_room`) before it appends the record, so a unit never goes past the window. The window
starts at half a page and doubles with each reservation up to ``reserveWindowConsumeQueue``: a queue that got one
message holds one page of disk, a busy one the whole window. The next file is created when the last one is half
written, not when it is started (a store of many queues would otherwise hold two files, maps and descriptors
each).

A queue's files are mapped while it is used and can be *released* (:meth:`ConsumeQueue.release`): unmapped and
closed, with what reads and writes need to map them again (:class:`Released`) kept; the next read or write maps
them again (:meth:`ConsumeQueue.restore`: an open and an ``mmap`` per file) without the caller noticing. The
store's :class:`~pocketmq.store.queue_table.ConsumeQueueTable` decides which queues are released (idle ones, and
the least recently used when its bound on mapped files is reached); ``before_map`` is its hook, told before the
queue maps files (it may release others, or refuse with a clear error when nothing can be released).
"""

from __future__ import annotations

import concurrent.futures
import mmap
import os
import struct
from collections.abc import Callable
from dataclasses import dataclass

from pocketmq.common.logs import get_logger
from pocketmq.store.config import CQ_STORE_UNIT_SIZE
from pocketmq.store.mapped_file import (
    DEFAULT_WINDOW,
    MappedFile,
    MappedFileAllocator,
    MappedFileQueue,
    file_name_for,
    wait_shared,
)

log = get_logger("pocketmq.store.consume_queue")

CQ_UNIT = struct.Struct(">qiq")
UNIT_SIZE = CQ_STORE_UNIT_SIZE
BLANK_UNIT_SIZE = 0x7FFFFFFF
"""Size field of a blank (filler) unit."""
_BLANK_UNIT = CQ_UNIT.pack(0, BLANK_UNIT_SIZE, 0)

#: commit-log offset, size -> store timestamp (-1 if the record is gone)
StoreTimeLookup = Callable[[int, int], int]
#: files that left the queue, to be destroyed in a thread
Discard = Callable[[list[MappedFile]], None]
#: told before a queue maps ``count`` more files (may raise OSError: no room under the store's bound)
BeforeMap = Callable[["ConsumeQueue", int], None]
#: first_phys of a released queue with no unit: no commit-log minimum reaches it
_NO_RECORD = (1 << 63) - 1
#: The window a new queue starts with (it doubles at each reservation up to ``reserveWindowConsumeQueue``).
FIRST_WINDOW = mmap.PAGESIZE // 2


@dataclass(slots=True)
class Released:
    """What a released queue keeps of its files: where each starts, the last one's positions, the queue's
    offsets, its first readable unit (None: the queue is empty) and the commit-log offset of that unit's record
    (-1 for a blank unit)."""

    starts: list[int]
    wrote: int
    reserved: int
    min_offset: int
    max_offset: int
    first_unit: tuple[int, int, int] | None
    first_phys: int


class ConsumeQueue:
    """The index of one topic queue."""

    # Slots: a store of tens of thousands of queues holds one of these each, most of them released.
    __slots__ = ("_discard", "_half", "before_map", "file_size", "max_physic_offset", "min_logic_offset", "queue",
                 "queue_id", "released", "tail", "topic", "used")

    def __init__(self, topic: str, queue_id: int, root_dir: str, file_size: int,
                 allocator: MappedFileAllocator, discard: Discard | None = None, *,
                 window: int = DEFAULT_WINDOW, warm: bool = False) -> None:
        self.topic = topic
        self.queue_id = queue_id
        self.file_size = file_size
        self.queue = MappedFileQueue(os.path.join(root_dir, topic, str(queue_id)), file_size, allocator,
                                     warm=warm, window=window, initial_window=FIRST_WINDOW)
        self._discard = discard or _destroy_now
        self._half = file_size // 2 - (file_size // 2) % UNIT_SIZE
        #: first readable unit (blank fillers and units whose record was deleted are before it)
        self.min_logic_offset = 0
        #: commit-log offset just past the record of the last unit
        self.max_physic_offset = 0
        #: the last file (the one written), kept in step with ``queue.files`` by :meth:`_sync_tail`
        self.tail: MappedFile | None = None
        #: set by every write and read, cleared by the table's sweep (its "recently used" bit)
        self.used = False
        #: not None while the files are released (unmapped)
        self.released: Released | None = None
        self.before_map: BeforeMap | None = None

    def _sync_tail(self) -> None:
        files = self.queue.files
        self.tail = files[-1] if files else None

    # ------------------------------------------------------------------------------------ mapping

    def release(self) -> list[MappedFile] | None:
        """Unmap the queue's files (returned, for the caller to close, in a thread once the store runs), keeping
        what is needed to map them again. None (nothing done) when the queue has no files, is released already,
        or cannot be released now: units not yet flushed, or the creation of its next file under way. A next file
        created and not taken yet is closed too (it is all zeros; a later roll opens it). A reservation under way
        may finish on the closed file or find it closed (``MappedFile.reserve`` holds its lock either way); the
        queue mapped again asks for what its window still lacks."""
        queue = self.queue
        files = queue.files
        if not files or self.released is not None or queue.dirty_bytes() > 0:
            return None
        tail = files[-1]
        closing = list(files)
        following = queue.allocator.pending(os.path.join(queue.store_dir, file_name_for(tail.file_end_offset)))
        if following is not None:
            if not following.done():
                return None
            if following.exception() is None:
                closing.append(queue.allocator.take(following.result().path, self.file_size))
        min_offset, max_offset = self.min_offset, self.max_offset
        first = self.get_unit(min_offset) if min_offset < max_offset else None
        # An empty queue has nothing retention could remove; a blank first unit sends the check to the files.
        first_phys = _NO_RECORD if first is None else (-1 if first[1] == BLANK_UNIT_SIZE else first[0])
        self.released = Released([m.file_from_offset for m in files], tail.wrote_position, tail.reserved,
                                 min_offset, max_offset, first, first_phys)
        queue.files = []
        self.tail = None
        return closing

    def restore(self) -> None:
        """Map a released queue's files again (an open and an ``mmap`` each). Raises OSError when that fails or
        the store's bound on mapped files leaves no room (the queue then stays released)."""
        released = self.released
        if released is None:
            return
        if self.before_map is not None:
            self.before_map(self, len(released.starts))
        files: list[MappedFile] = []
        try:
            for start in released.starts:
                files.append(MappedFile.open_existing(os.path.join(self.queue.store_dir, file_name_for(start)),
                                                      self.file_size))
        except BaseException:
            for mapped in files:
                mapped.close()
            raise
        for mapped in files[:-1]:
            mapped.wrote_position = mapped.flushed_position = mapped.reserved = self.file_size
        tail = files[-1]
        tail.wrote_position = tail.flushed_position = released.wrote
        tail.reserved = released.reserved
        if not tail.is_full:
            tail.write_ahead_only(True)
        self.queue.files = files
        self.released = None
        self._sync_tail()

    def _roll(self, start_offset: int | None = None) -> MappedFile:
        """The queue's next file (its first at ``start_offset``), mapped now; the one after it is asked for
        when this one is half written, not now."""
        if self.before_map is not None:
            self.before_map(self, 1)
        return self.queue.roll(start_offset, request_next=False)

    # ------------------------------------------------------------------------------------- offsets

    @property
    def max_offset(self) -> int:
        """Next unit index to be written (the queue's max offset)."""
        released = self.released
        if released is not None:
            return released.max_offset
        return self.queue.max_offset // UNIT_SIZE

    @property
    def min_offset(self) -> int:
        """First readable unit index."""
        released = self.released
        if released is not None:
            return released.min_offset
        return max(self.min_logic_offset, self.queue.min_offset // UNIT_SIZE)

    def prepare(self, index: int) -> None:
        """Make sure unit ``index`` (the next one) has a file to go into, creating it here if needed.
        Raises OSError when it cannot be created."""
        self.restore()
        queue = self.queue
        if not queue.files:
            mapped = self._roll(index * UNIT_SIZE)
            self.min_logic_offset = index
            self._fill_blanks(mapped, index * UNIT_SIZE)
        elif queue.files[-1].is_full:
            self._roll()
        self._sync_tail()

    def request_file_for(self, index: int) -> concurrent.futures.Future[MappedFile] | None:
        """Ask the allocator for the file that will hold unit ``index``, reserved up to a window past it
        (None if nothing to wait for)."""
        if self.released is not None:
            return None
        files = self.queue.files
        if files and not files[-1].is_full:
            return None
        byte = index * UNIT_SIZE
        return self.queue.request_file(byte, reserve=byte % self.file_size + UNIT_SIZE + self.queue.window)

    def has_room(self) -> bool:
        """True when the next unit has a file and reserved room in it. Never blocks (it may ask for the
        next stretch of the window in the background)."""
        tail = self.tail
        if tail is None:
            return False
        end = tail.wrote_position + UNIT_SIZE
        return end <= tail.limit or (end <= self.file_size and self.queue.make_room(tail, end))

    def can_put(self, index: int) -> bool:
        """True when :meth:`put` of unit ``index`` will neither create a file nor reserve in the caller's thread
        (the unit is there already, or it and any blank units before it fit the reserved part of the last
        file). Never blocks (it may ask for the next stretch in the background); :meth:`prepare_unit` makes
        it true. A gap that reaches past the last file is left to :meth:`put` (only a damaged log has one)."""
        tail = self.tail
        if tail is None:
            return False
        byte = index * UNIT_SIZE
        if byte < tail.file_from_offset + tail.wrote_position:
            return True
        end = byte + UNIT_SIZE - tail.file_from_offset
        if end > self.file_size:  # a later file: the plain roll-over waits, a gap across files is put's
            return not (tail.is_full and byte < tail.file_end_offset + self.file_size)
        return end <= tail.limit or self.queue.make_room(tail, end)

    async def prepare_unit(self, index: int) -> None:
        """Create (in the allocator's thread) the file unit ``index`` goes into and wait until its room is
        reserved, so that :meth:`can_put` holds (raises OSError)."""
        self.restore()
        future = self.request_file_for(index)
        if future is not None:
            await wait_shared(future)
            self.prepare(index)
        tail = self.tail
        if tail is not None and not tail.is_full:
            end = index * UNIT_SIZE + UNIT_SIZE - tail.file_from_offset
            if 0 < end <= self.file_size:
                await self.queue.wait_room(tail, end)

    async def wait_room(self) -> None:
        """Wait until the next unit has reserved room in the last file (raises OSError)."""
        tail = self.tail
        if tail is not None and tail.wrote_position < self.file_size:
            await self.queue.wait_room(tail, tail.wrote_position + UNIT_SIZE)

    def reserve_now(self) -> None:
        """Reserve room for the next unit in this thread unless it has some (raises OSError). Blocking."""
        tail = self.tail
        if tail is not None and tail.wrote_position < self.file_size:
            self.queue.ensure_room(tail, tail.wrote_position + UNIT_SIZE)

    # ------------------------------------------------------------------------------------------ put

    def put(self, index: int, phys_offset: int, size: int, tags_code: int) -> None:
        """Write unit ``index``. The usual case (the next unit, room in the current file) is :meth:`try_put`,
        a single ``pack_into``; everything else (first unit, roll-over, a unit already present after a
        replay, a gap, the end of the reserved part) takes :meth:`_put_slow`. Raises OSError when a file cannot be
        created or reserved."""
        if not self.try_put(index, phys_offset, size, tags_code):
            self._put_slow(index, phys_offset, size, tags_code)

    def try_put(self, index: int, phys_offset: int, size: int, tags_code: int) -> bool:
        """:meth:`put`'s usual case only (the next unit, room in the current file): True when the unit was
        written, False (nothing written) for anything else. Never blocks."""
        tail = self.tail
        if tail is None:
            return False
        pos = tail.wrote_position
        if pos + UNIT_SIZE > tail.limit or tail.file_from_offset + pos != index * UNIT_SIZE:
            return False
        CQ_UNIT.pack_into(tail.view, pos, phys_offset, size, tags_code)
        tail.wrote_position = pos + UNIT_SIZE
        self.max_physic_offset = phys_offset + size
        self.used = True
        if pos == self._half:
            self.queue.request_next()
        return True

    def put_many(self, index: int, units: list[tuple[int, int, int]]) -> None:
        """Write consecutive units from ``index`` (a batch): one ``pack_into`` each while they fit."""
        tail = self.tail
        count = len(units)
        if tail is not None:
            pos = tail.wrote_position
            if pos + count * UNIT_SIZE <= tail.limit and tail.file_from_offset + pos == index * UNIT_SIZE:
                view = tail.view
                pack = CQ_UNIT.pack_into
                for phys, size, tags in units:
                    pack(view, pos, phys, size, tags)
                    pos += UNIT_SIZE
                tail.wrote_position = pos
                phys, size, _tags = units[-1]
                self.max_physic_offset = phys + size
                self.used = True
                if pos > self._half >= pos - count * UNIT_SIZE:
                    self.queue.request_next()
                return
        for phys, size, tags in units:
            self.put(index, phys, size, tags)
            index += 1

    def _put_slow(self, index: int, phys_offset: int, size: int, tags_code: int) -> None:
        try:
            self._put_slow_unsynced(index, phys_offset, size, tags_code)
        finally:
            self._sync_tail()

    def _put_slow_unsynced(self, index: int, phys_offset: int, size: int, tags_code: int) -> None:
        target = index * UNIT_SIZE
        self.restore()
        queue = self.queue
        if not queue.files:
            mapped = self._roll(target)
            self.min_logic_offset = index
            self._fill_blanks(mapped, target)
        else:
            current = queue.max_offset
            if target < current:
                return  # already indexed (replay after recovery)
            if target - current > self.file_size:
                log.error("consume_queue_gap_too_large", topic=self.topic, action="queue_restarted",
                          queue_id=self.queue_id, expected=current // UNIT_SIZE, got=index)
                removed, queue.files = queue.files, []
                self._discard(removed)
                self._put_slow_unsynced(index, phys_offset, size, tags_code)
                return
            if target > current:
                log.warning("consume_queue_gap_filled", topic=self.topic, filler="blank_units",
                            queue_id=self.queue_id, expected=current // UNIT_SIZE, got=index)
                while queue.max_offset < target:
                    last = queue.last
                    mapped = last if last is not None and not last.is_full else self._roll()
                    self._fill_blanks(mapped, min(target, mapped.file_end_offset))
        tail = queue.last
        if tail is None or tail.is_full:
            tail = self._roll()
        pos = tail.wrote_position
        queue.ensure_room(tail, pos + UNIT_SIZE)
        CQ_UNIT.pack_into(tail.view, pos, phys_offset, size, tags_code)
        tail.wrote_position = pos + UNIT_SIZE
        self.max_physic_offset = phys_offset + size

    def _fill_blanks(self, mapped: MappedFile, until: int) -> None:
        pos = mapped.wrote_position
        end = until - mapped.file_from_offset
        if end > pos:
            self.queue.ensure_room(mapped, end)
            mapped.view[pos:end] = _BLANK_UNIT * ((end - pos) // UNIT_SIZE)
            mapped.wrote_position = end

    # ---------------------------------------------------------------------------------------- reads

    def get_units(self, index: int, max_units: int) -> memoryview | None:
        """Up to ``max_units`` consecutive units from ``index``, within one file (zero-copy). A released queue
        is mapped again first (raises OSError when the store's bound leaves no room)."""
        if self.released is not None:
            self.restore()
        self.used = True
        byte = index * UNIT_SIZE
        mapped = self.queue.find(byte)
        if mapped is None:
            return None
        pos = byte - mapped.file_from_offset
        size = min(max_units * UNIT_SIZE, mapped.wrote_position - pos)
        return mapped.select(pos, size) if size > 0 else None

    def get_unit(self, index: int) -> tuple[int, int, int] | None:
        """(commit-log offset, size, tag code) of unit ``index``. A released queue answers from what it kept or
        with one ``pread`` of the file, without being mapped (reports walk every queue)."""
        released = self.released
        if released is not None:
            return self._released_unit(released, index)
        view = self.get_units(index, 1)
        return None if view is None else CQ_UNIT.unpack(view)

    def _released_unit(self, released: Released, index: int) -> tuple[int, int, int] | None:
        if index == released.min_offset:
            return released.first_unit
        byte = index * UNIT_SIZE
        starts = released.starts
        if not starts or index < released.min_offset or byte < starts[0]:
            return None
        start = starts[min((byte - starts[0]) // self.file_size, len(starts) - 1)]
        pos = byte - start
        if pos < 0 or pos + UNIT_SIZE > (released.wrote if start == starts[-1] else self.file_size):
            return None
        fd = os.open(os.path.join(self.queue.store_dir, file_name_for(start)), os.O_RDONLY)
        try:
            data = os.pread(fd, UNIT_SIZE, pos)
        finally:
            os.close(fd)
        return CQ_UNIT.unpack(data) if len(data) == UNIT_SIZE else None

    def get_offset_in_queue_by_time(self, timestamp: int, store_time: StoreTimeLookup) -> int:
        """The first queue offset whose message was stored at or after ``timestamp`` (ms): the min offset
        if all are later, the max offset if all are earlier. Binary search, one commit-log read per step."""
        lo, hi = self.min_offset, self.max_offset
        while lo < hi:
            mid = (lo + hi) // 2
            unit = self.get_unit(mid)
            stored = -1 if unit is None or unit[1] == BLANK_UNIT_SIZE else store_time(unit[0], unit[1])
            if stored < timestamp:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def get_earliest_message_time(self, store_time: StoreTimeLookup) -> int:
        """Store time of the first readable message, -1 if none."""
        index = self.min_offset
        if index >= self.max_offset:
            return -1
        unit = self.get_unit(index)
        return -1 if unit is None else store_time(unit[0], unit[1])

    # ------------------------------------------------------------------------------ recovery, trims

    def load(self) -> None:
        """Map the queue's files. Blocking."""
        self.queue.load()
        self._sync_tail()

    def recover(self) -> None:
        """Find the last valid unit of the loaded files (scanning from the third-last file) and drop
        what follows it. A unit is valid when its size is positive and its record starts at or after
        the end of the previous one. Only the files' data is read. Blocking."""
        files = self.queue.files
        if not files:
            return
        start = max(0, len(files) - 3)
        prev_end = -1
        end_offset = files[start].file_from_offset
        for mapped in files[start:]:
            pos = 0
            data = mapped.data_end()  # past it the file is a hole: zeros, never read (see mapped_file)
            for phys, size, _tags in CQ_UNIT.iter_unpack(mapped.view[:data - data % UNIT_SIZE]):
                if size == BLANK_UNIT_SIZE and phys == 0:
                    pos += UNIT_SIZE
                    continue
                if size <= 0 or phys < 0 or phys < prev_end:
                    break
                prev_end = phys + size
                pos += UNIT_SIZE
            end_offset = mapped.file_from_offset + pos
            if pos < self.file_size:
                break
        self._cut(end_offset)
        self.max_physic_offset = max(prev_end, 0)
        if self.queue.files:
            self.min_logic_offset = max(self.min_logic_offset, self.queue.min_offset // UNIT_SIZE)

    def truncate_by_physical_offset(self, phys_offset: int, discard: Discard | None = None) -> None:
        """Drop every unit from the end back to the last one whose record starts before ``phys_offset``
        (the point from which recovery re-indexes the commit log, or where a slave's log was cut back to its
        master's). Files that leave the queue go to ``discard`` (destroyed here when None). Walking back
        from the end rather than searching also drops the holes a crash leaves in the part being
        re-indexed (zero units of pages that never reached the disk). Before that point every unit is
        known to be on disk, so no hole can hide there. Blocking (zero-fills the cut file). A released queue
        whose last record ends before ``phys_offset`` has nothing to drop and stays released."""
        if self.released is not None:
            if self.max_physic_offset <= phys_offset:
                return
            self.restore()
        floor = self.queue.min_offset // UNIT_SIZE
        index = self.max_offset
        while index > floor:
            unit = self.get_unit(index - 1)
            if unit is not None:
                phys, size, _tags = unit
                if (size == BLANK_UNIT_SIZE and phys == 0) or (size > 0 and 0 <= phys < phys_offset):
                    break
            index -= 1
        if index < self.max_offset:
            self._cut(index * UNIT_SIZE, discard)
        last = self.get_unit(index - 1) if index > floor else None
        self.max_physic_offset = last[0] + last[1] if last and last[1] != BLANK_UNIT_SIZE else 0

    def _released_untouched_by(self, commit_log_min_offset: int) -> bool:
        """True for a released queue that a commit-log minimum of ``commit_log_min_offset`` leaves as it is: no
        file but its last (which is never deleted) and its first readable unit's record still there."""
        released = self.released
        return (released is not None and len(released.starts) <= 1
                and released.first_phys >= commit_log_min_offset)

    def _cut(self, byte_offset: int, discard: Discard | None = None) -> None:
        removed = self.queue.truncate(byte_offset)
        for mapped in self.queue.files:
            if mapped.file_end_offset > byte_offset:
                mapped.zero_from(byte_offset - mapped.file_from_offset)
        (discard or _destroy_now)(removed)
        self._sync_tail()
        if self.queue.files and self.queue.max_offset == self.queue.min_offset:
            # An empty queue keeps its (empty) first file, which may start past 0.
            self.min_logic_offset = self.queue.min_offset // UNIT_SIZE

    def correct_min_offset(self, commit_log_min_offset: int) -> None:
        """Move ``min_logic_offset`` past units whose records were deleted (and past blank fillers)."""
        if self.released is not None:
            if self.released.first_phys >= commit_log_min_offset:
                return
            self.restore()
        lo = max(self.min_logic_offset, self.queue.min_offset // UNIT_SIZE)
        hi = self.max_offset
        while lo < hi:
            mid = (lo + hi) // 2
            unit = self.get_unit(mid)
            if unit is not None and unit[1] != BLANK_UNIT_SIZE and unit[0] >= commit_log_min_offset:
                hi = mid
            else:
                lo = mid + 1
        self.min_logic_offset = lo

    def delete_expired(self, commit_log_min_offset: int) -> list[MappedFile]:
        """Take out of the queue the files whose every record is gone from the commit log (never the
        last file); returns them for the caller to destroy in a thread."""
        if self._released_untouched_by(commit_log_min_offset):
            return []
        self.restore()
        count = 0
        for mapped in self.queue.files[:-1]:
            if not mapped.is_full or mapped.file_end_offset > self.queue.flushed_where:
                break
            phys, size, _tags = CQ_UNIT.unpack_from(mapped.view, self.file_size - UNIT_SIZE)
            if phys + size > commit_log_min_offset:
                break
            count += 1
        removed = self.queue.remove_head(count)
        self.correct_min_offset(commit_log_min_offset)
        return removed

    def dirty_bytes(self) -> int:
        """Bytes written but not flushed."""
        return self.queue.dirty_bytes()


def _destroy_now(files: list[MappedFile]) -> None:
    for mapped in files:
        mapped.destroy()
