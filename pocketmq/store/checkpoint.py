"""The ``checkpoint`` file: how far the commit log and the consume queues are known to be on disk.

Layout (4096 bytes, big-endian)::

    offset  size  field
    0       8     physicMsgTimestamp   store time of the last flushed commit-log record
    8       8     logicsMsgTimestamp   store time up to which consume queues are flushed (RocketMQ)
    16      8     indexMsgTimestamp    store time up to which the index files are flushed (RocketMQ)
    24      8     physicOffset         PocketMQ: commit-log offset flushed
    32      8     logicsOffset         PocketMQ: every consume-queue unit of a record before this offset
                                       is flushed
    40      4     magic 0x504D5131     PocketMQ ("PMQ1"): the two offsets are present
    44      4     crc32 of bytes 0..43 PocketMQ: the offsets are whole (not torn)
    48..4095      zero

RocketMQ reads only the first 24 bytes, so the file stays interchangeable; recovery prefers the exact
offsets and falls back to the timestamps (RocketMQ's rule) when the extension is absent or damaged.
The file is rewritten with one ``pwrite`` + ``fdatasync``, from a thread.
"""

from __future__ import annotations

import os
import struct
import zlib
from dataclasses import dataclass

CHECKPOINT_FILE_SIZE = 4096
_LAYOUT = struct.Struct(">qqqqqI")
_CRC = struct.Struct(">I")
_MAGIC = 0x504D5131


@dataclass(slots=True)
class StoreCheckpoint:
    """The checkpoint's values; ``has_offsets`` is False for a RocketMQ (or damaged) checkpoint."""

    physic_msg_timestamp: int = 0
    logics_msg_timestamp: int = 0
    index_msg_timestamp: int = 0
    physic_offset: int = 0
    logics_offset: int = 0
    has_offsets: bool = False

    def encode(self) -> bytes:
        """The whole 4096-byte file."""
        head = _LAYOUT.pack(self.physic_msg_timestamp, self.logics_msg_timestamp, self.index_msg_timestamp,
                            self.physic_offset, self.logics_offset, _MAGIC)
        data = head + _CRC.pack(zlib.crc32(head))
        return data + bytes(CHECKPOINT_FILE_SIZE - len(data))

    @classmethod
    def decode(cls, data: bytes) -> StoreCheckpoint:
        """Parse a checkpoint file's bytes (short or empty input gives zeros)."""
        if len(data) < 24:
            return cls()
        if len(data) < _LAYOUT.size + 4:
            physic, logics, index = struct.unpack_from(">qqq", data)
            return cls(physic, logics, index)
        physic, logics, index, poff, loff, magic = _LAYOUT.unpack_from(data)
        (crc,) = _CRC.unpack_from(data, _LAYOUT.size)
        valid = magic == _MAGIC and crc == zlib.crc32(data[:_LAYOUT.size]) and poff >= 0 and loff >= 0
        if not valid:
            return cls(physic, logics, index)
        return cls(physic, logics, index, poff, loff, True)

    @classmethod
    def load(cls, path: str) -> StoreCheckpoint:
        """Read ``path``; zeros when it does not exist. Blocking."""
        try:
            with open(path, "rb") as f:
                return cls.decode(f.read(CHECKPOINT_FILE_SIZE))
        except FileNotFoundError:
            return cls()

    def write(self, path: str) -> None:
        """Write and fdatasync ``path`` (created if missing). Blocking."""
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            os.pwrite(fd, self.encode(), 0)
            os.fdatasync(fd)
        finally:
            os.close(fd)
