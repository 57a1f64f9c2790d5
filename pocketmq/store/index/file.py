"""``IndexFile``: one of RocketMQ 4.9's message index files, byte for byte.

Layout (big-endian)::

    header, 40 bytes: beginTimestamp 8, endTimestamp 8, beginPhyOffset 8, endPhyOffset 8,
                      hashSlotCount 4, indexCount 4
    hashSlotNum slots of 4 bytes: the number of the newest entry whose key hash falls in the slot (0: none)
    indexNum entries of 20 bytes: keyHash 4, phyOffset 8, timeDiff 4 (seconds after beginTimestamp),
                                  prevIndex 4 (the slot's previous entry, 0 ends the chain)

Entry number 0 is never used (``indexCount`` starts at 1, as RocketMQ's), so a file holds ``indexNum - 1``
keys. A key is ``topic#key`` and its hash ``abs(String.hashCode())`` (0 for ``Integer.MIN_VALUE``).

The file is a :class:`~pocketmq.store.mapped_file.MappedFile` (sparse, mapped). The header and the slots are
reserved when the file is made (slots are written at random places); the entries, written in order, are
reserved a window at a time ahead of the writer, by the index service, in a thread (:meth:`IndexFile.room`).
The header is written into the mapping after every batch of keys (:meth:`IndexFile.write_header`), so a
killed process leaves a header that matches its entries; an entry or a slot past ``indexCount`` is ignored
by readers, as in RocketMQ.

Everything here runs on the event loop except what says "blocking".
"""

from __future__ import annotations

import struct

from pocketmq.common.message import java_hash
from pocketmq.store.mapped_file import MappedFile

HEADER_SIZE = 40
SLOT_SIZE = 4
ENTRY_SIZE = 20
INVALID_INDEX = 0
_HEADER = struct.Struct(">qqqqii")
_SLOT = struct.Struct(">i")
_ENTRY = struct.Struct(">iqii")
_INT_MAX = 0x7FFFFFFF


def key_hash(key: str) -> int:
    """RocketMQ's ``indexKeyHashMethod``: ``abs(key.hashCode())``, 0 when that overflows."""
    return positive_hash(java_hash(key))


def positive_hash(h: int) -> int:
    """``abs`` of a Java hash as RocketMQ takes it (``Integer.MIN_VALUE`` gives 0)."""
    return 0 if h == -0x80000000 else abs(h)


def file_size(hash_slot_num: int, index_num: int) -> int:
    """Bytes of a file with these counts."""
    return HEADER_SIZE + hash_slot_num * SLOT_SIZE + index_num * ENTRY_SIZE


class IndexFile:
    """One index file (see the module docstring); ``mapped`` is its mapping, ``slot_num``/``index_num``
    its counts. The header fields are attributes, written into the mapping by :meth:`write_header`."""

    __slots__ = ("begin_phy_offset", "begin_timestamp", "end_phy_offset", "end_timestamp", "entries_at",
                 "hash_slot_count", "index_count", "index_num", "mapped", "slot_num")

    def __init__(self, mapped: MappedFile, slot_num: int, index_num: int) -> None:
        self.mapped = mapped
        self.slot_num = slot_num
        self.index_num = index_num
        self.entries_at = HEADER_SIZE + slot_num * SLOT_SIZE
        header: tuple[int, int, int, int, int, int] = _HEADER.unpack_from(mapped.view, 0)
        self.begin_timestamp: int = header[0]
        self.end_timestamp: int = header[1]
        self.begin_phy_offset: int = header[2]
        self.end_phy_offset: int = header[3]
        self.hash_slot_count: int = header[4]
        self.index_count: int = max(1, header[5])

    @property
    def name(self) -> str:
        """The file name (its creation time)."""
        return self.mapped.path.rsplit("/", 1)[-1]

    @property
    def is_full(self) -> bool:
        """True when no entry fits any more."""
        return self.index_count >= self.index_num

    @property
    def is_empty(self) -> bool:
        """True when no key was put."""
        return self.index_count <= 1

    def start_after(self, end_phy_offset: int, end_timestamp: int) -> None:
        """A new file continues its predecessor: begin and end start at where that one ended (RocketMQ)."""
        self.begin_phy_offset = self.end_phy_offset = end_phy_offset
        self.begin_timestamp = self.end_timestamp = end_timestamp

    def entry_end(self, extra: int) -> int:
        """File position just past the entry ``extra`` entries after the next one to write."""
        return self.entries_at + (self.index_count + extra) * ENTRY_SIZE

    def room(self, count: int) -> int:
        """How many of the next ``count`` entries may be written now (reserved and within the file)."""
        fit = min(count, self.index_num - self.index_count)
        reserved = (self.mapped.reserved - self.entries_at) // ENTRY_SIZE - self.index_count
        return max(0, min(fit, reserved))

    def put_keys(self, hashes: list[int], phy_offset: int, store_timestamp: int) -> None:
        """Add the keys of one record, by their :func:`key_hash` (the caller checked :meth:`room`); the header
        is updated in memory. The index's hot path: one call per record, locals only."""
        view, slots, entries_at = self.mapped.view, self.slot_num, self.entries_at
        count, begin, used = self.index_count, self.begin_timestamp, self.hash_slot_count
        if count <= 1:
            begin = self.begin_timestamp = store_timestamp
            self.begin_phy_offset = phy_offset
        diff = 0 if begin <= 0 else min(_INT_MAX, max(0, (store_timestamp - begin) // 1000))
        unpack_slot, pack_slot, pack_entry = _SLOT.unpack_from, _SLOT.pack_into, _ENTRY.pack_into
        for h in hashes:
            slot_at = HEADER_SIZE + (h % slots) * SLOT_SIZE
            (previous,) = unpack_slot(view, slot_at)
            if previous <= INVALID_INDEX or previous > count:
                previous = INVALID_INDEX
                used += 1
            pack_entry(view, entries_at + count * ENTRY_SIZE, h, phy_offset, diff, previous)
            pack_slot(view, slot_at, count)
            count += 1
        self.index_count, self.hash_slot_count = count, used
        self.end_phy_offset = phy_offset
        self.end_timestamp = store_timestamp

    def write_header(self) -> None:
        """Write the header fields into the mapping."""
        _HEADER.pack_into(self.mapped.view, 0, self.begin_timestamp, self.end_timestamp, self.begin_phy_offset,
                          self.end_phy_offset, self.hash_slot_count, self.index_count)

    def time_matched(self, begin: int, end: int) -> bool:
        """RocketMQ's ``isTimeMatched``: the file's time span meets ``[begin, end]``."""
        first, last = self.begin_timestamp, self.end_timestamp
        return (begin < first and end > last) or first <= begin <= last or first <= end <= last

    def select(self, key: str, max_num: int, begin: int, end: int, found: list[int]) -> None:
        """Append to ``found`` the physical offsets of the entries of ``key`` stored in ``[begin, end]``,
        newest first, until ``found`` holds ``max_num`` (RocketMQ's ``selectPhyOffset``)."""
        count = self.index_count
        if count <= 1 or self.mapped.closed:
            return
        h = key_hash(key)
        view = self.mapped.view
        (number,) = _SLOT.unpack_from(view, HEADER_SIZE + (h % self.slot_num) * SLOT_SIZE)
        if number <= INVALID_INDEX or number >= count:
            return
        base_time = self.begin_timestamp
        for _step in range(count):
            if len(found) >= max_num:
                return
            read_hash, phy_offset, diff, previous = _ENTRY.unpack_from(view, self.entries_at + number * ENTRY_SIZE)
            if diff < 0:
                return
            stamp = base_time + diff * 1000
            if read_hash == h and begin <= stamp <= end:
                found.append(phy_offset)
            if previous <= INVALID_INDEX or previous >= count or previous == number or stamp < begin:
                return
            number = previous

    def flush(self) -> None:
        """Make the file durable (header included). Blocking."""
        self.mapped.flush(self.mapped.file_size)
