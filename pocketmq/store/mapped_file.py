"""Fixed-size memory-mapped files named by their start offset, and the directory that holds them.

A :class:`MappedFile` is one file of exactly ``file_size`` bytes named by the 20-digit offset of its first
byte (``00000000001073741824``). Writers append at ``wrote_position``; ``flushed_position`` is how far the
file is known to be on disk. A :class:`MappedFileQueue` is the ordered list of them in one directory (the
commit log, or one consume queue).

Blocking work never happens on the event loop; the methods that block say so ("blocking") and the
callers run them in a thread. Three facts decided how (the measurements: docs/design/store.md):

* ``mmap.flush()`` (msync) holds the GIL in CPython 3.11 for the whole call (a loop stall of tens of
  milliseconds for a large dirty range), while ``os.fdatasync`` releases it. On Linux msync(MS_SYNC) of a shared file
  mapping is an fsync of that file's range, and dirty mmap pages are ordinary dirty page-cache pages, so
  ``fdatasync(fd)`` flushes exactly the same data; we use it there and msync elsewhere.
* The first write to a never-touched page of a sparse file costs many times a warm write (page allocation,
  zeroing, block reservation) and runs under the GIL; writing into a hole of a full file system raises
  SIGBUS. Files are created sparse (their size costs no disk, as RocketMQ's default), and each
  :class:`MappedFileQueue` keeps a bounded *window* ahead of its write position reserved: in a background
  thread ``posix_fallocate`` reserves the blocks of the next stretch (a full disk then fails that call
  cleanly with ENOSPC) and ``posix_fadvise(WILLNEED)`` puts its pages in the page cache, which brings the
  first-write cost down to a minor fault. Writing zeros instead would also dirty every page, so a
  SYNC_FLUSH would have to write them all. Writers never write past what is reserved:
  :meth:`MappedFileQueue.make_room` is the non-blocking check (it asks for the next stretch when half the
  window is used; the window crosses into the next file, which the allocator creates one ahead), and a
  writer it turns away waits for the reservation (:meth:`MappedFileQueue.wait_room`); only code that runs
  before the store serves (recovery) reserves in its own thread (:meth:`MappedFileQueue.reserve_now`).
* How the window is warmed decides the event loop's worst case. Reading a reserved (unwritten) range
  makes the kernel zero-fill its page-cache pages inside the call, in one stretch without a preemption
  point, during which a runnable loop thread may wait for a CPU; a warm-up that reads a whole stretch with
  one ``preadv`` also zeroes a buffer as large under the GIL and reads past the window (read-ahead),
  leaving read-ahead marks whose hit by a write fault makes the *loop* thread read (zero-fill) the next
  read-ahead stretch. So the window is warmed with ``posix_fadvise(WILLNEED)``
  in 1 MiB steps (exactly the range, no read-ahead marks, no buffer, one short kernel stretch per step),
  and the file being written is mapped ``MADV_RANDOM`` (a write fault on a page the warm-up has not reached
  reads that page, not 8 MiB around it); a full file goes back to ``MADV_NORMAL`` for readers.
* File creation uses a temporary name and a rename, so a crash never leaves a short file that the next
  start would have to guess about.
* Reading a hole through a mapping is not harmless either: on tmpfs the read fault allocates the page, so
  on a full tmpfs it raises SIGBUS just as a write does (ext4 maps a zero page). Start-up code that examines
  files of unknown extent (recovery's scans, cutting a tail) therefore reads only the file's data
  (:meth:`MappedFile.data_ranges`, ``SEEK_DATA``/``SEEK_HOLE``; a hole reads as zeros, so nothing is lost by
  skipping it), and a loaded file has nothing reserved until a writer reserves it.

This module is longer than 600 lines: the file, the allocator and the queue share one reservation protocol
(the queue asks, the allocator's thread reserves and publishes ``reserved``, the writer reads ``limit``),
which is easier to check in one place than across three.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import errno
import mmap
import os
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import TypeVar

from pocketmq.common.logs import get_logger
from pocketmq.store.errors import StoreError

log = get_logger("pocketmq.store.mapped_file")
_T = TypeVar("_T")

FILE_NAME_DIGITS = 20
_CHUNK = 1 << 20
_WARM_STEP = 1 << 20
"""Bytes warmed per ``posix_fadvise`` call: the kernel zero-fills a reserved range without a preemption point,
so each call is one short stretch after which the loop thread can have the CPU (see the module
docstring). Between two calls the warming thread needs the GIL back (at most a 5 ms switch interval from a
busy loop), so warming keeps up with >= 200 MB/s writers."""
_HAS_FADVISE = hasattr(os, "posix_fadvise")
_HAS_SEEK_DATA = hasattr(os, "SEEK_DATA")
_HAS_MADVISE = hasattr(mmap, "MADV_RANDOM")
_ZEROS = bytes(_CHUNK)
_PAGE = mmap.PAGESIZE
_NO_SPACE = (errno.ENOSPC, errno.EDQUOT)
_NO_FALLOCATE = (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS)
"""File systems without fallocate keep the file sparse (nothing better can be done there)."""
_ROOM_ATTEMPTS = 4
DEFAULT_WINDOW = 1 << 20

#: Told (from any thread) when reserving or creating a file failed with a full disk: (path, error).
NoSpaceHandler = Callable[[str, OSError], None]
_TMP_SUFFIX = ".tmp"
_USE_FDATASYNC = sys.platform.startswith("linux")


def file_name_for(offset: int) -> str:
    """The 20-digit zero-padded name of the file starting at ``offset``."""
    return f"{offset:0{FILE_NAME_DIGITS}d}"


def is_no_space(exc: BaseException) -> bool:
    """True for ENOSPC (or a quota: EDQUOT)."""
    return isinstance(exc, OSError) and exc.errno in _NO_SPACE


def _page_up(n: int) -> int:
    return -(-n // _PAGE) * _PAGE


def _unreserved_from(mapped: MappedFile) -> int:
    """Where a reservation of ``mapped`` starts: past what is reserved and past what is written (the
    written bytes of a file loaded at start-up have their blocks; reading them again would be waste)."""
    written = mapped.wrote_position
    return max(mapped.reserved, written - written % _PAGE)


async def wait_shared(future: concurrent.futures.Future[_T]) -> _T:
    """Await a future of the allocation thread that other writers may be awaiting too: a waiter that is
    cancelled (a closed connection, a put given up) must not cancel the work the others wait for, as
    ``asyncio.wrap_future`` alone would."""
    return await asyncio.shield(asyncio.wrap_future(future))


def fsync_dir(path: str) -> None:
    """Make a directory's entries (new, renamed, deleted files) durable. Blocking."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class MappedFile:
    """One fixed-size, ``mmap``-ed file of a :class:`MappedFileQueue`.

    ``view`` is a memoryview of the whole mapping: writers pack into it, readers slice it (zero-copy).
    The positions are plain ints written only from the event loop (flush results are applied there too).
    ``reserved``: bytes ``[0, reserved)`` have their blocks reserved (published by the thread that reserved
    them, after the ``posix_fallocate`` and the warm-up); ``limit`` (<= ``reserved``, loop-owned) is how far
    a writer may go before it asks :meth:`MappedFileQueue.make_room` again.
    """

    __slots__ = (
        "_closed",
        "_lock",
        "fd",
        "file_from_offset",
        "file_size",
        "flushed_position",
        "limit",
        "mm",
        "path",
        "reserved",
        "view",
        "wrote_position",
    )

    def __init__(self, path: str, file_size: int, fd: int, mm: mmap.mmap) -> None:
        self.path = path
        self.file_size = file_size
        self.file_from_offset = int(os.path.basename(path))
        self.fd = fd
        self.mm = mm
        self.view = memoryview(mm)
        self.wrote_position = 0
        self.flushed_position = 0
        self.reserved = 0
        self.limit = 0
        self._closed = False
        self._lock = threading.Lock()

    # ------------------------------------------------------------------------------------ lifecycle

    @classmethod
    def create(cls, path: str, file_size: int) -> MappedFile:
        """Create a sparse, zero-filled file of ``file_size`` bytes and map it (nothing reserved). Blocking."""
        tmp = path + _TMP_SUFFIX
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.ftruncate(fd, file_size)
            os.rename(tmp, path)
            fsync_dir(os.path.dirname(path) or ".")
            mm = mmap.mmap(fd, file_size)
        except BaseException:
            os.close(fd)
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        return cls(path, file_size, fd, mm)

    @classmethod
    def open_existing(cls, path: str, file_size: int) -> MappedFile:
        """Map an existing file of ``file_size`` bytes (a shorter one is extended with zeros). Blocking."""
        fd = os.open(path, os.O_RDWR)
        try:
            actual = os.fstat(fd).st_size
            if actual > file_size:
                raise StoreError(f"{path} is {actual} bytes, expected {file_size}")
            if actual < file_size:
                # Cut short (by hand, or by a filesystem that lost the end): the missing part reads as
                # zeros, which recovery treats as the end of the data.
                log.warning("mapped_file_short_extended", path=path,
                            size=actual, expected=file_size)
                os.ftruncate(fd, file_size)
            mm = mmap.mmap(fd, file_size)
        except BaseException:
            os.close(fd)
            raise
        return cls(path, file_size, fd, mm)

    def reserve(self, start: int, end: int, *, warm: bool) -> None:
        """Reserve the blocks of ``[start, end)`` (widened to pages, capped at the file) with
        ``posix_fallocate`` and, with ``warm``, read them into the page cache; then publish ``reserved``.
        Raises OSError (ENOSPC on a full disk; nothing is published then). Blocking; safe while the event
        loop writes into the reserved part (it only reads), and a file closed meanwhile is left alone."""
        with self._lock:
            if self._closed:
                return
            start = max(start, self.reserved)
            start -= start % _PAGE
            end = min(self.file_size, _page_up(end))
            if end <= self.reserved:
                return
            try:
                os.posix_fallocate(self.fd, start, end - start)
            except OSError as exc:
                if exc.errno not in _NO_FALLOCATE:
                    raise
            if warm:
                self.warm(start, end)
            self.reserved = end

    def warm(self, start: int = 0, end: int | None = None) -> None:
        """Bring ``[start, end)`` of the file into the page cache without dirtying it, in short steps (see
        the module docstring). Blocking; safe while the event loop is already writing into the file (the
        kernel only adds pages that are missing)."""
        stop = self.file_size if end is None else min(end, self.file_size)
        pos = start - start % _PAGE
        buf = None if _HAS_FADVISE else bytearray(_WARM_STEP)
        while pos < stop and not self._closed:
            step = min(_WARM_STEP, stop - pos)
            with contextlib.suppress(OSError):
                if buf is None:
                    os.posix_fadvise(self.fd, pos, step, os.POSIX_FADV_WILLNEED)
                else:  # pragma: no cover - no posix_fadvise (not Linux)
                    os.preadv(self.fd, [memoryview(buf)[:step]], pos)
            pos += step

    def write_ahead_only(self, on: bool) -> None:
        """``MADV_RANDOM`` while the file is being written (``on``): a fault reads just its page, never the
        read-around (the device's read-ahead) that would zero-fill reserved pages on the event loop;
        ``MADV_NORMAL`` once
        it is full, so readers of old data get read-ahead again. Cheap (flags of the mapping)."""
        if _HAS_MADVISE and not self._closed:
            with contextlib.suppress(OSError, ValueError):
                self.mm.madvise(mmap.MADV_RANDOM if on else mmap.MADV_NORMAL)

    def close(self) -> bool:
        """Unmap and close. Returns False (and stays open) while a reader still holds a view of the
        file; call again later. Blocking (munmap of a large mapping; waits for a reservation under way)."""
        if self._closed:
            return True
        with self._lock:
            try:
                self.view.release()
                self.mm.close()
            except BufferError:
                return False
            self._closed = True
            os.close(self.fd)
        return True

    def destroy(self) -> bool:
        """Delete the file (the name goes at once; the mapping when no reader holds a view). Blocking."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
        return self.close()

    @property
    def closed(self) -> bool:
        """True once unmapped."""
        return self._closed

    # ------------------------------------------------------------------------------------ positions

    @property
    def file_end_offset(self) -> int:
        """Offset just past the file."""
        return self.file_from_offset + self.file_size

    @property
    def is_full(self) -> bool:
        """True when nothing more can be appended."""
        return self.wrote_position >= self.file_size

    def select(self, pos: int, size: int) -> memoryview | None:
        """A zero-copy view of ``size`` bytes at ``pos`` (file-relative), if they are written."""
        if pos < 0 or size < 0 or pos + size > self.wrote_position or self._closed:
            return None
        return self.view[pos:pos + size]

    def last_modified(self) -> float:
        """mtime of the file (the kernel updates it as pages are written through the mapping)."""
        try:
            return os.stat(self.path).st_mtime
        except FileNotFoundError:
            return 0.0

    # ---------------------------------------------------------------------------------------- flush

    def flush(self, position: int) -> int:
        """Make the file durable up to ``position`` (file-relative); returns ``position``. Blocking.

        With fdatasync the whole file is flushed, which is what every caller wants anyway: all pages
        written so far, in one call.
        """
        if self._closed:
            return self.flushed_position
        if _USE_FDATASYNC:
            os.fdatasync(self.fd)
        else:  # pragma: no cover - non-Linux
            start = self.flushed_position - self.flushed_position % mmap.PAGESIZE
            if position > start:
                self.mm.flush(start, position - start)
        return position

    def zero_from(self, pos: int) -> None:
        """Zero every non-zero byte from ``pos`` to the end of the file (after a truncation, so that old
        records past the new end can never be mistaken for live ones). Only the file's data is read and
        written (holes are zeros already, and touching one could need a page the disk no longer has).
        Blocking."""
        for start, stop in self.data_ranges(pos):
            while start < stop:
                end = min(start - start % _CHUNK + _CHUNK, stop)
                if self.view[start:end] != _ZEROS[:end - start]:
                    self.view[start:end] = _ZEROS[:end - start]
                start = end

    def data_ranges(self, start: int = 0) -> Iterator[tuple[int, int]]:
        """The ``[from, to)`` ranges at or after ``start`` that may hold non-zero bytes: the file's data
        as ``SEEK_DATA``/``SEEK_HOLE`` see it (whole pages; reserved pages never written may count as
        holes, which read as zeros anyway). The rest of the file when the file system cannot tell.
        Blocking (one ``lseek`` per boundary)."""
        stop = self.file_size
        if not _HAS_SEEK_DATA:  # pragma: no cover - not Linux
            if start < stop:
                yield start, stop
            return
        while start < stop and not self._closed:
            try:
                begin = os.lseek(self.fd, start, os.SEEK_DATA)
            except OSError as exc:
                if exc.errno != errno.ENXIO:  # ENXIO: no data past ``start``
                    yield start, stop
                return
            if begin >= stop:
                return
            end = min(os.lseek(self.fd, begin, os.SEEK_HOLE), stop)
            yield begin, end
            start = end

    def data_end(self) -> int:
        """Offset just past the file's last data page (0 for a file that is all hole): what start-up code
        may read of a file whose positions are not known yet. Blocking."""
        return max((stop for _start, stop in self.data_ranges()), default=0)


#: A reservation to make: (file, or the future of a file still being created; start; end), file-relative.
ReserveJob = tuple["MappedFile | concurrent.futures.Future[MappedFile]", int, int]


class MappedFileAllocator:
    """Creates files one ahead and reserves windows, in a background thread (RocketMQ's
    AllocateMappedFileService).

    :meth:`request` starts creating the file that will be needed next (sparse; with ``reserve`` its first
    bytes reserved too); :meth:`take` hands it over, waiting only if creation is still running.
    :meth:`reserve` runs reservations in the same thread, after the creations asked for before them.
    Without an executor everything happens in the caller's thread (recovery, tests). A full disk (ENOSPC)
    met creating or reserving is told to :attr:`on_no_space`, from the thread that met it.
    """

    def __init__(self, executor: concurrent.futures.Executor | None, *, take_timeout: float = 10.0) -> None:
        self._executor = executor
        self._take_timeout = take_timeout
        self._pending: dict[str, concurrent.futures.Future[MappedFile]] = {}
        self.on_no_space: NoSpaceHandler | None = None
        self._no_space_said = False

    def request(self, path: str, file_size: int, *, warm: bool,
                reserve: int = 0) -> concurrent.futures.Future[MappedFile] | None:
        """Start creating ``path`` in the background, with its first ``reserve`` bytes reserved; the returned
        future completes when the file can be taken. None when there is no executor."""
        pending = self._pending.get(path)
        if pending is not None:
            return pending
        if self._executor is None:
            return None
        created: concurrent.futures.Future[MappedFile] = concurrent.futures.Future()
        self._pending[path] = created
        self._executor.submit(self._allocate, path, file_size, warm, reserve, created)
        return created

    async def run(self, fn: Callable[..., object], *args: object) -> None:
        """Run ``fn(*args)`` in the allocator's thread, after the creations asked for before it (here without an
        executor)."""
        if self._executor is None:
            fn(*args)
            return
        await wait_shared(self._executor.submit(fn, *args))

    def pending(self, path: str) -> concurrent.futures.Future[MappedFile] | None:
        """The creation under way (or done, not yet taken) of ``path``, if any."""
        return self._pending.get(path)

    def take(self, path: str, file_size: int) -> MappedFile:
        """The file at ``path``, created now if nobody requested it. Raises OSError when it cannot be."""
        created = self._pending.pop(path, None)
        if created is None:
            try:
                return _create_or_open(path, file_size)
            except OSError as exc:
                self.report_failure(path, exc)
                raise
        try:
            return created.result(timeout=self._take_timeout)
        except concurrent.futures.TimeoutError:
            raise OSError(f"creating {path} took more than {self._take_timeout}s") from None

    def reserve(self, jobs: Sequence[ReserveJob], *, warm: bool) -> concurrent.futures.Future[None]:
        """Make the reservations ``jobs`` in the background (now, without an executor); the future fails
        with the OSError that stopped them."""
        if self._executor is not None:
            return self._executor.submit(self._reserve, jobs, warm)
        done: concurrent.futures.Future[None] = concurrent.futures.Future()
        try:
            self._reserve(jobs, warm)
        except OSError as exc:
            done.set_exception(exc)
        else:
            done.set_result(None)
        return done

    def _reserve(self, jobs: Sequence[ReserveJob], warm: bool) -> None:
        for item, start, end in jobs:
            mapped = item if isinstance(item, MappedFile) else item.result()
            try:
                mapped.reserve(start, end, warm=warm)
            except OSError as exc:
                self.report_failure(mapped.path, exc)
                raise
            self._no_space_said = False

    def report_failure(self, path: str, exc: OSError) -> None:
        """Log a failed creation or reservation (a full disk once, until a reservation succeeds again: the
        writers retry while it lasts); tell :attr:`on_no_space` when the disk is full."""
        no_space = is_no_space(exc)
        if not (no_space and self._no_space_said):
            log.error("mapped_file_reservation_failed", path=path, error=str(exc))
        self._no_space_said = no_space
        if no_space and self.on_no_space is not None:
            self.on_no_space(path, exc)

    def _allocate(self, path: str, file_size: int, warm: bool, reserve: int,
                  created: concurrent.futures.Future[MappedFile]) -> None:
        try:
            mapped = _create_or_open(path, file_size)
        except BaseException as exc:
            created.set_exception(exc)
            if isinstance(exc, OSError):
                self.report_failure(path, exc)
            return
        if reserve:
            with contextlib.suppress(OSError):  # reported; the writer asks again before writing there
                self._reserve([(mapped, 0, reserve)], warm)
        created.set_result(mapped)

    def discard_pending(self, directory: str, *, keep: str | None = None) -> None:
        """Forget files requested under ``directory`` (a deleted topic, a reset log), except ``keep``;
        each is destroyed once created."""
        prefix = os.path.join(directory, "")
        for path in [p for p in self._pending if p.startswith(prefix) and p != keep]:
            self._pending.pop(path).add_done_callback(_destroy_created)

    def close(self) -> None:
        """Close files requested but never taken (shutdown); their names stay, harmless and zero-filled
        (sparse, or reserved and never written)."""
        for created in self._pending.values():
            created.add_done_callback(_close_created)
        self._pending.clear()


def _close_created(created: concurrent.futures.Future[MappedFile]) -> None:
    if not created.cancelled() and created.exception() is None:
        created.result().close()


def _destroy_created(created: concurrent.futures.Future[MappedFile]) -> None:
    if not created.cancelled() and created.exception() is None:
        created.result().destroy()


def _create_or_open(path: str, file_size: int) -> MappedFile:
    """A new file, or the one already at ``path``: a file past the end of a queue is always all zeros
    (created and never written, or zeroed by recovery), so it is reused as it is."""
    if os.path.exists(path):
        return MappedFile.open_existing(path, file_size)
    return MappedFile.create(path, file_size)


class MappedFileQueue:
    """The ordered files of one directory, each ``mapped_file_size`` bytes, covering a contiguous range
    of offsets ``[min_offset, max_offset)``, with a reserved window of ``window`` bytes ahead of the
    writer (see the module docstring). ``tail_margin`` bytes at the end of each file are left to the
    writer's own roll-over logic (the commit log's blank marker): ``limit`` never reaches into them.

    The list is changed only on the event loop (roll-over appends, retention and truncation remove);
    blocking work on removed files (unlink, munmap) is the caller's to run in a thread.
    """

    # Slots: a store of tens of thousands of consume queues holds one of these each.
    __slots__ = ("_half", "_refill", "_target", "allocator", "files", "flushed_where", "mapped_file_size",
                 "max_window", "store_dir", "tail_margin", "warm", "window")

    def __init__(self, store_dir: str, mapped_file_size: int, allocator: MappedFileAllocator | None = None,
                 *, warm: bool = False, window: int = DEFAULT_WINDOW, tail_margin: int = 0,
                 initial_window: int | None = None) -> None:
        self.store_dir = store_dir
        self.mapped_file_size = mapped_file_size
        self.allocator = allocator or MappedFileAllocator(None)
        self.warm = warm
        #: The window grows from ``initial_window`` (when given) by doubling at each reservation up to this,
        #: so a queue that gets a message now and then keeps a page reserved, a busy one the whole window.
        self.max_window = _page_up(max(window, _PAGE))
        self.window = self.max_window if initial_window is None else min(max(initial_window, 1), self.max_window)
        self.tail_margin = tail_margin
        self.files: list[MappedFile] = []
        self.flushed_where = 0
        self._half = self.window // 2
        self._refill: concurrent.futures.Future[None] | None = None
        self._target = 0
        """Offset (across files) the last reservation asked for reaches."""

    # ----------------------------------------------------------------------------------------- load

    def load(self) -> None:
        """Map every file of the directory (positions at the file end, recovery sets the real ones).
        Leftover ``.tmp`` files of an interrupted creation are removed. Blocking."""
        os.makedirs(self.store_dir, exist_ok=True)
        names = sorted(os.listdir(self.store_dir))
        for name in names:
            if name.endswith(_TMP_SUFFIX):
                os.unlink(os.path.join(self.store_dir, name))
        for name in names:
            if len(name) != FILE_NAME_DIGITS or not name.isdigit():
                continue
            if int(name) % self.mapped_file_size:
                raise StoreError(f"{self.store_dir}/{name} does not start at a multiple of the file size")
            mapped = MappedFile.open_existing(os.path.join(self.store_dir, name), self.mapped_file_size)
            mapped.wrote_position = mapped.flushed_position = self.mapped_file_size
            if self.files and self.files[-1].file_end_offset != mapped.file_from_offset:
                log.warning("mapped_file_gap", dir=self.store_dir, file=name)
            self.files.append(mapped)

    # ------------------------------------------------------------------------------------ accessors

    @property
    def first(self) -> MappedFile | None:
        """The oldest file."""
        return self.files[0] if self.files else None

    @property
    def last(self) -> MappedFile | None:
        """The file being written."""
        return self.files[-1] if self.files else None

    @property
    def min_offset(self) -> int:
        """First offset still on disk (0 when empty)."""
        return self.files[0].file_from_offset if self.files else 0

    @property
    def max_offset(self) -> int:
        """Offset just past the last written byte."""
        last = self.last
        return last.file_from_offset + last.wrote_position if last else 0

    def find(self, offset: int) -> MappedFile | None:
        """The file containing ``offset``, or None (deleted, not yet written, or out of range)."""
        files = self.files
        if not files:
            return None
        index = (offset - files[0].file_from_offset) // self.mapped_file_size
        if 0 <= index < len(files):
            mapped = files[index]
            if mapped.file_from_offset <= offset < mapped.file_end_offset:
                return mapped
        for mapped in files:  # only after a gap, which load() warned about
            if mapped.file_from_offset <= offset < mapped.file_end_offset:
                return mapped
        return None

    def files_from(self, offset: int) -> Iterator[MappedFile]:
        """Files that end after ``offset``, in order."""
        for mapped in self.files:
            if mapped.file_end_offset > offset:
                yield mapped

    # ------------------------------------------------------------------------------------ roll-over

    def roll(self, start_offset: int | None = None, *, request_next: bool = True) -> MappedFile:
        """Add the next file (starting at ``start_offset`` when the queue is empty) and ask the allocator
        to prepare the one after it. Raises OSError when the file cannot be created."""
        last = self.last
        if last is not None:
            start = last.file_end_offset
        else:
            start = start_offset or 0
            start -= start % self.mapped_file_size
            self.flushed_where = start
        path = os.path.join(self.store_dir, file_name_for(start))
        mapped = self.allocator.take(path, self.mapped_file_size)
        if last is not None:
            last.write_ahead_only(False)
        mapped.write_ahead_only(True)
        self.files.append(mapped)
        if request_next:
            self.request_next()
        return mapped

    def request_next(self) -> None:
        """Ask the allocator to create the file after the last one (sparse: the window reaches into it
        when the writer comes near)."""
        last = self.last
        if last is not None:
            self.request_file(last.file_end_offset)

    def request_file(self, start_offset: int, *, reserve: int = 0) -> concurrent.futures.Future[MappedFile] | None:
        """Ask the allocator to create the file that will hold ``start_offset``, its first ``reserve`` bytes
        reserved."""
        start = start_offset - start_offset % self.mapped_file_size
        path = os.path.join(self.store_dir, file_name_for(start))
        return self.allocator.request(path, self.mapped_file_size, warm=self.warm, reserve=reserve)

    # ----------------------------------------------------------------------------------- reservation

    def make_room(self, mapped: MappedFile, end: int) -> bool:
        """True when ``mapped`` is reserved up to ``end`` (file-relative), so a writer may write there.
        Never blocks: when half the window is used (or ``end`` is not reserved) it asks the allocator's
        thread for the next stretch, up to ``end`` + the window, into the next file if the window crosses
        it; and it sets ``mapped.limit``, the point where a writer must ask again."""
        refill = self._refill
        if refill is not None and refill.done():
            self._refill = refill = None
        base = mapped.file_from_offset
        reserved = mapped.reserved
        if refill is None and (end > reserved or base + end + self._half > self._target):
            refill = self._refill = self._request_window(mapped, end)
        # While a reservation runs, or when none can reach further now (the next file is not requested),
        # the writer goes on to what is reserved; otherwise it asks again when half the window is used.
        idle = refill is not None or self._target <= base + end + self._half
        limit = reserved if idle else min(reserved, self._target - base - self._half)
        mapped.limit = max(0, min(limit, mapped.file_size - self.tail_margin))
        return end <= reserved

    def _request_window(self, mapped: MappedFile, end: int) -> concurrent.futures.Future[None] | None:
        base = mapped.file_from_offset
        target = base + end + self.window
        jobs: list[ReserveJob] = []
        if mapped.reserved < min(mapped.file_size, end + self.window):
            jobs.append((mapped, _unreserved_from(mapped), end + self.window))
        reach = min(target, mapped.file_end_offset)
        if target > mapped.file_end_offset and mapped is self.last:
            following = self.allocator.pending(os.path.join(self.store_dir, file_name_for(mapped.file_end_offset)))
            if following is not None:
                jobs.append((following, 0, target - mapped.file_end_offset))
                reach = target
        self._target = reach
        if not jobs:
            return None
        if self.window < self.max_window:
            self.window = min(self.window * 2, self.max_window)
            self._half = self.window // 2
        return self.allocator.reserve(jobs, warm=self.warm)

    async def wait_room(self, mapped: MappedFile, end: int) -> None:
        """Wait (without blocking the loop) until ``mapped`` is reserved up to ``end``. Raises the OSError
        that stopped the reservation (ENOSPC on a full disk)."""
        for _attempt in range(_ROOM_ATTEMPTS):
            if self.make_room(mapped, end):
                return
            refill = self._refill
            if refill is not None:
                await wait_shared(refill)
        if not self.make_room(mapped, end):
            raise OSError(errno.EIO, f"could not reserve {mapped.path} up to {end}")

    def reserve_now(self, mapped: MappedFile, end: int) -> None:
        """Reserve ``mapped`` up to ``end`` in the caller's thread: ``posix_fallocate`` of just what is missing,
        no warm-up (the write that needs it faults those pages in anyway), then the window in the background as
        usual. Raises OSError (ENOSPC on a full disk). Blocking: it is for recovery, which runs in a thread of
        its own before the store serves anything, and for the bare appends of tools and tests. A running
        store's writers never get here (puts and a slave's replicated bytes and their dispatch wait for the
        allocation thread instead: ``wait_room``, ``CommitLog.wait_raw_room``, ``ConsumeQueue.prepare_unit``)."""
        if end > mapped.reserved:
            try:
                mapped.reserve(_unreserved_from(mapped), end, warm=False)
            except OSError as exc:
                self.allocator.report_failure(mapped.path, exc)
                raise
        self.make_room(mapped, end)

    def ensure_room(self, mapped: MappedFile, end: int) -> None:
        """:meth:`make_room`, or :meth:`reserve_now` when the window is behind. Blocking when it is."""
        if end > mapped.limit and not self.make_room(mapped, end):
            self.reserve_now(mapped, end)

    def reservation(self) -> concurrent.futures.Future[None] | None:
        """The reservation under way, if any (shutdown waits for it before closing the files)."""
        return self._refill

    # ------------------------------------------------------------------------------------ truncation

    def truncate(self, offset: int) -> list[MappedFile]:
        """Drop everything at and after ``offset``: files that start after it leave the list (returned for
        the caller to destroy), the file containing it gets its positions set there. The caller zeroes
        that file's tail (:meth:`MappedFile.zero_from`) before anything new is written."""
        removed = [m for m in self.files if m.file_from_offset > offset]
        self.files = [m for m in self.files if m.file_from_offset <= offset]
        for mapped in self.files:
            if mapped.file_end_offset > offset:
                pos = offset - mapped.file_from_offset
                mapped.wrote_position = pos
                mapped.flushed_position = min(mapped.flushed_position, pos)
        self.flushed_where = min(self.flushed_where, offset)
        return removed

    def remove_head(self, count: int) -> list[MappedFile]:
        """Take the ``count`` oldest files out of the list (retention); never the last one."""
        count = max(0, min(count, len(self.files) - 1))
        removed, self.files = self.files[:count], self.files[count:]
        return removed

    # ----------------------------------------------------------------------------------------- flush

    def dirty_bytes(self) -> int:
        """Bytes written but not yet flushed."""
        return self.max_offset - self.flushed_where

    def flush_plan(self) -> tuple[list[tuple[MappedFile, int]], int]:
        """What to flush now: (file, position) pairs from ``flushed_where`` to the end, and the offset
        that will be durable once they are done. Taken on the loop, run in a thread."""
        target = self.max_offset
        plan = [(m, m.wrote_position) for m in self.files_from(self.flushed_where)
                if m.file_from_offset + m.flushed_position < m.file_from_offset + m.wrote_position]
        return plan, target

    def apply_flushed(self, plan: list[tuple[MappedFile, int]], target: int) -> None:
        """Record the result of a flush plan (on the loop). A flush planned before a truncation (a slave cut back
        to its master's log) says nothing of what is written past the cut since: ``target`` is capped at
        the max offset."""
        for mapped, position in plan:
            mapped.flushed_position = max(mapped.flushed_position, min(position, mapped.wrote_position))
        self.flushed_where = max(self.flushed_where, min(target, self.max_offset))


def run_flush_plan(plan: list[tuple[MappedFile, int]]) -> None:
    """Flush each (file, position) of a plan. Blocking: run in a thread."""
    for mapped, position in plan:
        mapped.flush(position)
