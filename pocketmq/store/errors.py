"""Errors raised by the store.

Expected outcomes of puts and gets are status enums (:mod:`pocketmq.store.results`), never exceptions. Exceptions
are kept for three things: bytes that are not a valid record (the model's
:class:`~pocketmq.common.errors.RecordFormatError`, which recovery and the decoders catch and turn into a truncation
point or a clear message), a store that cannot start (:class:`StoreError`), and calls made on a store that is
not running (:class:`StoreNotRunningError`).
"""

from __future__ import annotations

import errno


class StoreError(Exception):
    """The store cannot do what was asked: bad directory layout, locked directory, bad configuration."""


class StoreNotRunningError(StoreError):
    """A read or write reached a store that was never started or is already shut down."""


class ConsumeQueueLimitError(StoreError, OSError):
    """The store's bound on mapped consume-queue files (``maxOpenConsumeQueueFiles``) is reached and no mapped
    queue can be released now; the message says what to raise."""

    def __init__(self, message: str) -> None:
        super().__init__(errno.EMFILE, message)
