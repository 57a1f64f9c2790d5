"""The model's two format errors: bytes that are not a valid record, and decoded fields that do not have the
shape of a model object.

Both are ``ValueError``\\ s raised by pure functions. The layers above decide what they mean: the store turns a
:class:`RecordFormatError` into a truncation point, the SDK into its ``MessageDecodeError``, ``remoting`` a
:class:`FieldFormatError` into its ``BodyDecodeError`` (a wire error with a response code).
"""

from __future__ import annotations


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


class FieldFormatError(ValueError):
    """A decoded JSON or msgpack value that does not have the expected shape (a string where a number must
    be, an unknown enum name, a missing required field)."""
