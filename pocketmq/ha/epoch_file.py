"""``EpochFileCache``: the epoch file of controller mode, ``<epoch, start offset>`` per master epoch this log holds
data of (RocketMQ 5's ``EpochFileCache`` and its ``epochFileCheckpoint`` file, same format).

File (UTF-8 text, RocketMQ's ``CheckpointFile``)::

    2               number of entries
    773307083       CRC32 (masked to 31 bits, as RocketMQ's UtilAll.crc32) of the entry lines below, newlines included
    7-7000          epoch-startOffset, one line per entry, epochs and start offsets increasing
    8-8000

An entry's end is the next entry's start; the last one's end is the log's max offset. A master that takes over
appends ``<its epoch, its max offset>`` before it takes a write; a slave appends the master's entries as the data it
copies reaches their start. The file is replaced atomically and fsync'd on every change (blocking: callers run the
writes in a thread); a damaged file falls back to ``<file>.bak`` as RocketMQ's reader does.

:func:`find_consistent_point` is RocketMQ's truncation rule: from the newest local epoch down, the first epoch both
logs have *with the same start offset* is shared up to the smaller of the two ends; everything after is cut.
"""

from __future__ import annotations

import itertools
import os
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

from pocketmq.common.files import write_atomically

__all__ = ["Epoch", "EpochFileCache", "EpochFileError", "find_consistent_point", "parse_epoch_file",
           "render_epoch_file"]

MAX_ENTRIES = 1_000_000
"""Entries read from a file at most (a file claiming more is damaged)."""


class EpochFileError(ValueError):
    """An epoch file that cannot be trusted."""


@dataclass(frozen=True, slots=True)
class Epoch:
    epoch: int
    start_offset: int


def render_epoch_file(entries: Sequence[Epoch]) -> bytes:
    body = "".join(f"{e.epoch}-{e.start_offset}\n" for e in entries)
    crc = zlib.crc32(body.encode()) & 0x7FFFFFFF
    return f"{len(entries)}\n{crc}\n{body}".encode()


def parse_epoch_file(data: bytes) -> list[Epoch]:
    """The entries of an epoch file; :class:`EpochFileError` when it is not one (or its CRC or count is wrong)."""
    try:
        text = data.decode()
    except UnicodeDecodeError:
        raise EpochFileError("not UTF-8") from None
    lines = text.splitlines()
    if len(lines) < 2:
        raise EpochFileError("missing the count and CRC lines")
    try:
        count, crc = int(lines[0]), int(lines[1])
    except ValueError:
        raise EpochFileError("bad count or CRC line") from None
    body_lines = [line for line in lines[2:] if line]
    if count != len(body_lines) or count > MAX_ENTRIES:
        raise EpochFileError(f"expected {count} entries, found {len(body_lines)}")
    body = "".join(line + "\n" for line in body_lines)
    if crc != 0 and zlib.crc32(body.encode()) & 0x7FFFFFFF != crc:
        raise EpochFileError("CRC mismatch")
    entries = []
    for line in body_lines:
        epoch, sep, start = line.partition("-")
        if not sep or not epoch.isdigit() or not start.isdigit():
            raise EpochFileError(f"bad entry {line!r}")
        entries.append(Epoch(int(epoch), int(start)))
    for before, after in itertools.pairwise(entries):
        if after.epoch <= before.epoch or after.start_offset < before.start_offset:
            raise EpochFileError(f"entries out of order: {before} then {after}")
    return entries


def find_consistent_point(local: Sequence[Epoch], local_max: int, other: Sequence[Epoch], other_max: int) -> int:
    """Where two logs stop agreeing (RocketMQ's ``findConsistentPoint``), or -1 when they share no epoch."""
    other_by_epoch = {e.epoch: i for i, e in enumerate(other)}
    for i in range(len(local) - 1, -1, -1):
        entry = local[i]
        j = other_by_epoch.get(entry.epoch)
        if j is None or other[j].start_offset != entry.start_offset:
            continue
        local_end = local[i + 1].start_offset if i + 1 < len(local) else local_max
        other_end = other[j + 1].start_offset if j + 1 < len(other) else other_max
        return min(local_end, other_end)
    return -1


class EpochFileCache:
    """The entries in memory and on disk (see the module docstring). ``path`` None keeps them in memory only."""

    def __init__(self, path: str | None) -> None:
        self.path = path
        self.entries: list[Epoch] = []

    def load(self) -> list[Epoch]:
        """Read the file (or its ``.bak``); an absent file is an empty cache. Blocking."""
        if self.path is None:
            return self.entries
        errors = []
        for candidate in (self.path, self.path + ".bak"):
            try:
                with open(candidate, "rb") as f:
                    self.entries = parse_epoch_file(f.read())
                return self.entries
            except FileNotFoundError:
                continue
            except EpochFileError as exc:
                errors.append(f"{candidate}: {exc}")
        if errors:
            raise EpochFileError("; ".join(errors))
        self.entries = []
        return self.entries

    @property
    def last_epoch(self) -> int:
        return self.entries[-1].epoch if self.entries else 0

    def entry_of(self, offset: int) -> Epoch | None:
        """The entry whose range holds ``offset`` (None before the first)."""
        found = None
        for entry in self.entries:
            if entry.start_offset > offset:
                break
            found = entry
        return found

    def can_append(self, entry: Epoch) -> bool:
        last = self.entries[-1] if self.entries else None
        return last is None or (entry.epoch > last.epoch and entry.start_offset >= last.start_offset)

    def append(self, entry: Epoch) -> bool:
        """Add a newer epoch and write the file (blocking); False (nothing changes) when it is not newer."""
        if not self.can_append(entry):
            return False
        if self.entries and self.entries[-1].start_offset == entry.start_offset:
            self.entries[-1] = entry  # the previous epoch holds no data: the newer one replaces it
        else:
            self.entries.append(entry)
        self._write()
        return True

    def truncate_suffix(self, offset: int) -> None:
        """Drop the entries that start at or past ``offset`` (the log was cut back there) and write (blocking)."""
        kept = [e for e in self.entries if e.start_offset < offset]
        if kept != self.entries:
            self.entries = kept
            self._write()

    def replace_all(self, entries: Sequence[Epoch]) -> None:
        """Write ``entries`` (blocking)."""
        self.entries = list(entries)
        self._write()

    def _write(self) -> None:
        if self.path is None:
            return
        data = render_epoch_file(self.entries)
        if os.path.exists(self.path):
            os.replace(self.path, self.path + ".bak")
        write_atomically(self.path, data)
