"""Bounded zlib inflation, for every compressed thing that arrives from a peer (message bodies, compressed
broker registrations): the output may never exceed a caller's bound, so a small "zip bomb" cannot exhaust memory.
"""

from __future__ import annotations

import zlib

__all__ = ["InflateError", "inflate_bounded"]


class InflateError(ValueError):
    """The data is corrupt, truncated, or inflates beyond the bound; the message says which."""


def inflate_bounded(data: bytes | bytearray | memoryview, max_size: int) -> bytes:
    """``data`` inflated (zlib stream), at most ``max_size`` bytes; :class:`InflateError` otherwise."""
    inflater = zlib.decompressobj()
    try:
        plain = inflater.decompress(data, max_size)
    except zlib.error as exc:
        raise InflateError(f"corrupt: {exc}") from None
    if inflater.unconsumed_tail:
        raise InflateError(f"inflates beyond {max_size} bytes")
    if not inflater.eof:
        raise InflateError("truncated")
    return plain
