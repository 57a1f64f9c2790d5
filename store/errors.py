"""Errors raised by the store.

Expected outcomes of puts and gets are status enums (:mod:`store.results`), never exceptions. Exceptions
are kept for three things: bytes that are not a valid record (:class:`RecordFormatError`, which recovery
and the decoders catch and turn into a truncation point or a clear message), a store that cannot start
(:class:`StoreError`), and calls made on a store that is not running (:class:`StoreNotRunningError`).
"""

from __future__ import annotations


class StoreError(Exception):
    """The store cannot do what was asked: bad directory layout, locked directory, bad configuration."""


class StoreNotRunningError(StoreError):
    """A read or write reached a store that was never started or is already shut down."""


class RecordFormatError(ValueError):
    """Bytes that are not a valid record (commit-log record, batch entry, consume-queue unit).

    ``reason`` is a short fixed phrase (good for tests and logs); ``offset`` is where the bad record starts,
    relative to whatever buffer the caller passed, or absolute when the caller knows it.
    """

    #: ``reason`` for a region of zero bytes: the normal end of the written part of a file, not damage.
    END_OF_DATA = "end of data"

    def __init__(self, reason: str, offset: int = -1) -> None:
        super().__init__(f"{reason} at offset {offset}" if offset >= 0 else reason)
        self.reason = reason
        self.offset = offset

    @property
    def is_end_of_data(self) -> bool:
        """True when the bytes are simply unwritten (zeros), as opposed to damaged."""
        return self.reason == self.END_OF_DATA
