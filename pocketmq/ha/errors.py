"""Errors of the replication package.

Bad bytes from a peer are :class:`HAProtocolError` subclasses, raised by the pure decoders of
:mod:`pocketmq.ha.wire`; the socket layers catch them, log them with the peer's address and close that one
connection (a replication link has no error response: closing it is the answer). None of them is
retriable on the same connection; the slave reconnects and reports its real offset.
"""

from __future__ import annotations


class HAError(Exception):
    """Base of every replication error."""


class HAProtocolError(HAError):
    """Bytes from a replication peer that break the protocol."""


class InvalidOffsetReportError(HAProtocolError):
    """A slave's 8-byte offset report is negative (no real commit log has such an offset)."""

    def __init__(self, offset: int) -> None:
        super().__init__(f"offset report {offset} is negative")
        self.offset = offset


class MalformedTransferError(HAProtocolError):
    """A master's 12-byte transfer header has a negative offset or size."""

    def __init__(self, from_offset: int, size: int) -> None:
        super().__init__(f"bad transfer header: from_offset={from_offset} size={size}")
        self.from_offset = from_offset
        self.size = size


class TransferTooLargeError(HAProtocolError):
    """A transfer's body would not fit in the slave's bounded read buffer."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"transfer of {size} bytes exceeds the {limit}-byte limit")
        self.size = size
        self.limit = limit


class TransferGapError(HAProtocolError):
    """A transfer does not start where the previous one on the same connection ended (the master's stream
    of ``from_offset`` values must be contiguous; heartbeats carry the next offset too)."""

    def __init__(self, expected: int, got: int) -> None:
        super().__init__(f"transfer starts at {got}, expected {expected}")
        self.expected = expected
        self.got = got


class ReadBufferFullError(HAProtocolError):
    """More bytes were fed than the bounded read buffer can hold."""

    def __init__(self, fed: int, room: int) -> None:
        super().__init__(f"{fed} bytes fed with room for {room}")
        self.fed = fed
        self.room = room
