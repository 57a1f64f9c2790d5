"""The replication wire protocol: pure encoders and incremental
decoders, no I/O.

There is no handshake and no framing beyond this; all integers are big-endian and signed::

    slave -> master   offset report    | max_offset:int64 |                      8 bytes
    master -> slave   transfer         | from_offset:int64 | size:int32 | body |  12 + size bytes

An offset report is both the slave's request (the first one says where to start) and its acknowledgement
(every later one says how far its commit log now reaches). The master looks only at the **last complete
8-byte word** of what it has read: words are aligned on the stream, so a report split across reads is
put back together and older reports in the same read are superseded. A transfer carries ``size`` raw
commit-log bytes that belong at ``from_offset``; ``size`` 0 is a heartbeat that still carries the
offset of the next transfer. Consecutive transfers on one connection are contiguous.

Decoders keep bounded state: the report decoder at most 7 carried bytes, the transfer decoder one
fixed read buffer (4 MiB on the slave, RocketMQ's size) that the socket reads straight into
(:meth:`TransferDecoder.get_buffer`), so a body is handed on as a view of that buffer with no copy.
"""

from __future__ import annotations

import struct

from pocketmq.ha.errors import (
    InvalidOffsetReportError,
    MalformedTransferError,
    ReadBufferFullError,
    TransferGapError,
    TransferTooLargeError,
)

OFFSET_REPORT = struct.Struct(">q")
"""Slave -> master: the slave's max commit-log offset."""
OFFSET_REPORT_SIZE = OFFSET_REPORT.size  # 8

TRANSFER_HEADER = struct.Struct(">qi")
"""Master -> slave: from_offset, size; followed by ``size`` bytes."""
TRANSFER_HEADER_SIZE = TRANSFER_HEADER.size  # 12

DEFAULT_READ_BUFFER_SIZE = 4 * 1024 * 1024
"""The slave's read buffer (RocketMQ's ``READ_MAX_BUFFER_SIZE``)."""

_MAX_INT64 = (1 << 63) - 1
_MAX_INT32 = (1 << 31) - 1
_COMPACT_BELOW = 64 * 1024
"""Move the unparsed tail to the front of the read buffer once less than this is free after it."""


def encode_offset_report(offset: int) -> bytes:
    """The 8 bytes a slave sends to report (acknowledge) its max offset."""
    if not 0 <= offset <= _MAX_INT64:
        raise ValueError(f"offset {offset} out of range")
    return OFFSET_REPORT.pack(offset)


def encode_transfer_header(from_offset: int, size: int) -> bytes:
    """The 12-byte header of a transfer of ``size`` bytes at ``from_offset`` (size 0: a heartbeat)."""
    if not 0 <= from_offset <= _MAX_INT64 or not 0 <= size <= _MAX_INT32:
        raise ValueError(f"bad transfer header: from_offset={from_offset} size={size}")
    return TRANSFER_HEADER.pack(from_offset, size)


class OffsetReportDecoder:
    """Master side: feed what was read, get the last complete report in it (or None).

    Only the newest report matters (an acknowledgement supersedes the older ones), so nothing but a
    partial word of at most 7 bytes is ever kept between reads.
    """

    __slots__ = ("_partial",)

    def __init__(self) -> None:
        self._partial = b""

    @property
    def buffered(self) -> int:
        """Bytes of an incomplete report carried to the next read (0..7)."""
        return len(self._partial)

    def feed(self, data: bytes | bytearray | memoryview) -> int | None:
        """The last complete report once ``data`` is added; None if no word completed. Raises
        :class:`InvalidOffsetReportError` for a negative report."""
        partial = self._partial
        carried = len(partial)
        total = carried + len(data)
        if total < OFFSET_REPORT_SIZE:
            self._partial = partial + bytes(data)
            return None
        end = total - total % OFFSET_REPORT_SIZE  # end of the last complete word, in stream positions
        start = end - OFFSET_REPORT_SIZE
        if start >= carried:
            (offset,) = OFFSET_REPORT.unpack_from(data, start - carried)
        else:
            (offset,) = OFFSET_REPORT.unpack(partial[start:] + bytes(data[:end - carried]))
        self._partial = bytes(data[end - carried:])
        if offset < 0:
            raise InvalidOffsetReportError(offset)
        return int(offset)


class Transfer:
    """One decoded transfer. ``body`` is a view into the decoder's buffer, valid only until the decoder is
    given more bytes (use it, or copy it, before the next read)."""

    __slots__ = ("body", "from_offset")

    def __init__(self, from_offset: int, body: memoryview) -> None:
        self.from_offset = from_offset
        self.body = body

    @property
    def size(self) -> int:
        """Bytes carried (0 for a heartbeat)."""
        return len(self.body)

    @property
    def end_offset(self) -> int:
        """Offset just past the carried bytes."""
        return self.from_offset + len(self.body)

    @property
    def is_heartbeat(self) -> bool:
        """True for a header with no body."""
        return not self.body

    def __repr__(self) -> str:
        return f"Transfer(from_offset={self.from_offset}, size={len(self.body)})"


class TransferDecoder:
    """Slave side: an incremental decoder of transfers over one fixed, bounded read buffer.

    Socket code reads straight into :meth:`get_buffer` and calls :meth:`buffer_updated`; tests and
    stream readers may :meth:`feed` bytes instead (a copy). :meth:`next_transfer` returns complete
    transfers one by one. A body larger than the buffer can hold (minus the header), a negative offset
    or size, and a transfer that does not start where the previous one ended raise named
    :class:`pocketmq.ha.errors.HAProtocolError` subclasses; after one the decoder must be discarded.
    """

    __slots__ = ("_buf", "_end", "_expected", "_max_body", "_start", "_view")

    def __init__(self, capacity: int = DEFAULT_READ_BUFFER_SIZE) -> None:
        if capacity <= TRANSFER_HEADER_SIZE:
            raise ValueError(f"read buffer of {capacity} bytes cannot hold a transfer")
        self._buf = bytearray(capacity)
        self._view = memoryview(self._buf)
        self._start = 0  # first unparsed byte
        self._end = 0  # end of the received bytes
        self._max_body = capacity - TRANSFER_HEADER_SIZE
        self._expected: int | None = None  # from_offset the next transfer must carry

    @property
    def capacity(self) -> int:
        """Size of the read buffer."""
        return len(self._buf)

    @property
    def buffered(self) -> int:
        """Received bytes not yet returned as transfers."""
        return self._end - self._start

    @property
    def expected_offset(self) -> int | None:
        """``from_offset`` the next transfer must carry (None before the first one)."""
        return self._expected

    def _compact(self) -> None:
        """Move the unparsed bytes to the front of the buffer."""
        if self._start == self._end:
            self._start = self._end = 0
        elif self._start > 0:
            pending = self._end - self._start
            # memoryview slice assignment is a memmove, safe for the overlapping ranges
            self._view[:pending] = self._view[self._start:self._end]
            self._start, self._end = 0, pending

    def get_buffer(self) -> memoryview:
        """Free space to receive into (never empty). Invalidates bodies returned earlier."""
        if self._start == self._end or len(self._buf) - self._end < _COMPACT_BELOW:
            self._compact()
        room = self._view[self._end:]
        if not room:
            # Unreachable while next_transfer() is drained after each read: a complete transfer is never
            # larger than the buffer, and a partial one always leaves room after compaction.
            raise ReadBufferFullError(1, 0)
        return room

    def buffer_updated(self, nbytes: int) -> None:
        """``nbytes`` were written at the start of the last :meth:`get_buffer` view."""
        if not 0 <= nbytes <= len(self._buf) - self._end:
            raise ReadBufferFullError(nbytes, len(self._buf) - self._end)
        self._end += nbytes

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        """Copy ``data`` in (for callers that do not read into :meth:`get_buffer`). Raises
        :class:`ReadBufferFullError` when it does not fit next to the bytes not yet decoded."""
        size = len(data)
        if size > len(self._buf) - self._end:
            self._compact()
            if size > len(self._buf) - self._end:
                raise ReadBufferFullError(size, len(self._buf) - self._end)
        self._view[self._end:self._end + size] = data
        self._end += size

    def next_transfer(self) -> Transfer | None:
        """The next complete transfer, or None until more bytes arrive."""
        start = self._start
        available = self._end - start
        if available < TRANSFER_HEADER_SIZE:
            return None
        from_offset, size = TRANSFER_HEADER.unpack_from(self._buf, start)
        if from_offset < 0 or size < 0:
            raise MalformedTransferError(from_offset, size)
        if size > self._max_body:
            raise TransferTooLargeError(size, self._max_body)
        if self._expected is not None and from_offset != self._expected:
            raise TransferGapError(self._expected, from_offset)
        end = start + TRANSFER_HEADER_SIZE + size
        if end > self._end:
            return None
        self._start = end
        self._expected = from_offset + size
        return Transfer(from_offset, self._view[start + TRANSFER_HEADER_SIZE:end])
