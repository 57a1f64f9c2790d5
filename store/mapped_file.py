"""Fixed-size memory-mapped files named by their start offset, and the directory that holds them.

A :class:`MappedFile` is one file of exactly ``file_size`` bytes named by the 20-digit offset of its first
byte (``00000000001073741824``). Writers append at ``wrote_position``; ``flushed_position`` is how far the
file is known to be on disk. A :class:`MappedFileQueue` is the ordered list of them in one directory (the
commit log, or one consume queue).

Blocking work never happens on the event loop; the methods that block say so ("blocking") and the
callers run them in a thread. Three measurements on this project's machine decided how:

* ``mmap.flush()`` (msync) holds the GIL in CPython 3.11 for the whole call (a 70 ms loop stall for
  128 MiB of dirty pages), while ``os.fdatasync`` releases it. On Linux msync(MS_SYNC) of a shared file
  mapping is an fsync of that file's range, and dirty mmap pages are ordinary dirty page-cache pages, so
  ``fdatasync(fd)`` flushes exactly the same data; we use it there and msync elsewhere.
* The first write to a never-touched page of a sparse file costs ~25x a warm write (page allocation,
  zeroing, block reservation) and runs under the GIL. So new files are created one ahead by
  :class:`MappedFileAllocator` in a background thread: ``posix_fallocate`` reserves the blocks (a full
  disk then fails the creation cleanly instead of raising SIGBUS on a later write) and reading the file
  with ``preadv`` (which releases the GIL, unlike ``madvise``/``MAP_POPULATE``) puts its pages in the page
  cache, which brings the first-write cost down to a minor fault. Writing zeros instead would also dirty
  every page, so the first SYNC_FLUSH on the new file would have to write the whole file.
* File creation uses a temporary name and a rename, so a crash never leaves a short file that the next
  start would have to guess about.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import mmap
import os
import sys
from collections.abc import Iterator

from common.logs import get_logger
from store.errors import StoreError

log = get_logger("store.mapped_file")

FILE_NAME_DIGITS = 20
_CHUNK = 1 << 20
_WARM_CHUNK = 16 << 20
"""Big reads: between two reads the warming thread needs the GIL back, and a busy event loop hands it
over only every switch interval (5 ms); with 1 MiB reads warming fell behind a 200 MB/s writer."""
_ZEROS = bytes(_CHUNK)
_TMP_SUFFIX = ".tmp"
_USE_FDATASYNC = sys.platform.startswith("linux")


def file_name_for(offset: int) -> str:
    """The 20-digit zero-padded name of the file starting at ``offset``."""
    return f"{offset:0{FILE_NAME_DIGITS}d}"


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
    """

    __slots__ = (
        "_closed",
        "fd",
        "file_from_offset",
        "file_size",
        "flushed_position",
        "mm",
        "path",
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
        self._closed = False

    # ------------------------------------------------------------------------------------ lifecycle

    @classmethod
    def create(cls, path: str, file_size: int) -> MappedFile:
        """Create a zero-filled file of ``file_size`` bytes and map it. Blocking."""
        tmp = path + _TMP_SUFFIX
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.ftruncate(fd, file_size)
            with contextlib.suppress(OSError, AttributeError):
                # Reserve the blocks now: running out of disk must fail here, not as SIGBUS on a write.
                # (Filesystems without fallocate keep the sparse file.)
                os.posix_fallocate(fd, 0, file_size)
            os.rename(tmp, path)
            fsync_dir(os.path.dirname(path) or ".")
            mm = mmap.mmap(fd, file_size)
            # The first write into a new file's mapping cost 2 ms (fallocated) to 25 ms (sparse) here unless
            # its first page had been read; after reading 4 KiB it costs ~10 µs.
            os.preadv(fd, [bytearray(mmap.PAGESIZE)], 0)
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

    def warm(self, start: int = 0, end: int | None = None) -> None:
        """Bring ``[start, end)`` of the file into the page cache without dirtying it (see module
        docstring). Blocking; safe while the event loop is already writing into the file (it only reads)."""
        buf = bytearray(min(_WARM_CHUNK, self.file_size))
        pos = start - start % len(buf)
        stop = self.file_size if end is None else min(end, self.file_size)
        while pos < stop and not self._closed:
            with contextlib.suppress(OSError):
                os.preadv(self.fd, [buf], pos)
            pos += len(buf)

    def close(self) -> bool:
        """Unmap and close. Returns False (and stays open) while a reader still holds a view of the
        file; call again later. Blocking (munmap of a large mapping)."""
        if self._closed:
            return True
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
        records past the new end can never be mistaken for live ones). Blocking."""
        while pos < self.file_size:
            end = min(pos - pos % _CHUNK + _CHUNK, self.file_size)
            if self.view[pos:end] != _ZEROS[:end - pos]:
                self.view[pos:end] = _ZEROS[:end - pos]
            pos = end


class MappedFileAllocator:
    """Creates files one ahead in a background thread (RocketMQ's AllocateMappedFileService).

    :meth:`request` starts creating the file that will be needed next; :meth:`take` hands it over,
    waiting only if creation is still running (a roll-over that outruns creation waits for the create,
    never for the warm-up, which runs after the file is handed over). Without an executor everything
    happens in the caller's thread (recovery, tests).
    """

    def __init__(self, executor: concurrent.futures.Executor | None, *, take_timeout: float = 10.0) -> None:
        self._executor = executor
        self._take_timeout = take_timeout
        self._pending: dict[str, concurrent.futures.Future[MappedFile]] = {}

    def request(self, path: str, file_size: int, *, warm: bool) -> concurrent.futures.Future[MappedFile] | None:
        """Start creating ``path`` in the background; the returned future completes when the file can be
        taken. None when there is no executor or the file exists already."""
        pending = self._pending.get(path)
        if pending is not None:
            return pending
        if self._executor is None:
            return None
        created: concurrent.futures.Future[MappedFile] = concurrent.futures.Future()
        self._pending[path] = created
        self._executor.submit(_allocate, path, file_size, warm, created)
        return created

    def take(self, path: str, file_size: int) -> MappedFile:
        """The file at ``path``, created now if nobody requested it. Raises OSError when it cannot be."""
        created = self._pending.pop(path, None)
        if created is None:
            return _create_or_open(path, file_size)
        try:
            return created.result(timeout=self._take_timeout)
        except concurrent.futures.TimeoutError:
            raise OSError(f"creating {path} took more than {self._take_timeout}s") from None

    def warm_later(self, mapped: MappedFile, start: int) -> None:
        """Warm a file already in use (the current file at start-up) from ``start`` in the background."""
        if self._executor is not None:
            self._executor.submit(mapped.warm, start)

    def discard_pending(self, directory: str, *, keep: str | None = None) -> None:
        """Forget files requested under ``directory`` (a deleted topic, a reset log), except ``keep``;
        each is destroyed once created."""
        prefix = os.path.join(directory, "")
        for path in [p for p in self._pending if p.startswith(prefix) and p != keep]:
            self._pending.pop(path).add_done_callback(_destroy_created)

    def close(self) -> None:
        """Close files requested but never taken (shutdown); their names stay, harmless and zero-filled.
        A file still being created is closed the moment its creation ends, so its warm-up stops at once
        instead of reading the whole file while the process waits to exit."""
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
    (pre-allocated and never written, or zeroed by recovery), so it is reused as it is."""
    if os.path.exists(path):
        return MappedFile.open_existing(path, file_size)
    return MappedFile.create(path, file_size)


def _allocate(path: str, file_size: int, warm: bool, created: concurrent.futures.Future[MappedFile]) -> None:
    try:
        mapped = _create_or_open(path, file_size)
    except BaseException as exc:
        created.set_exception(exc)
        log.error("mapped_file_creation_failed", path=path, error=str(exc))
        return
    created.set_result(mapped)
    if warm:
        mapped.warm()


class MappedFileQueue:
    """The ordered files of one directory, each ``mapped_file_size`` bytes, covering a contiguous range
    of offsets ``[min_offset, max_offset)``.

    The list is changed only on the event loop (roll-over appends, retention and truncation remove);
    blocking work on removed files (unlink, munmap) is the caller's to run in a thread.
    """

    def __init__(self, store_dir: str, mapped_file_size: int, allocator: MappedFileAllocator | None = None,
                 *, warm: bool = False) -> None:
        self.store_dir = store_dir
        self.mapped_file_size = mapped_file_size
        self.allocator = allocator or MappedFileAllocator(None)
        self.warm = warm
        self.files: list[MappedFile] = []
        self.flushed_where = 0

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
        self.files.append(mapped)
        if request_next:
            self.request_next()
        return mapped

    def request_next(self) -> None:
        """Ask the allocator to create the file after the last one."""
        last = self.last
        if last is not None:
            self.request_file(last.file_end_offset)

    def request_file(self, start_offset: int) -> concurrent.futures.Future[MappedFile] | None:
        """Ask the allocator to create the file that will hold ``start_offset``."""
        start = start_offset - start_offset % self.mapped_file_size
        path = os.path.join(self.store_dir, file_name_for(start))
        return self.allocator.request(path, self.mapped_file_size, warm=self.warm)

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
        """Record the result of a flush plan (on the loop)."""
        for mapped, position in plan:
            mapped.flushed_position = max(mapped.flushed_position, position)
        self.flushed_where = max(self.flushed_where, target)


def run_flush_plan(plan: list[tuple[MappedFile, int]]) -> None:
    """Flush each (file, position) of a plan. Blocking: run in a thread."""
    for mapped, position in plan:
        mapped.flush(position)
