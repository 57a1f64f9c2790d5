"""Body compression as RocketMQ 4.x producers and consumers do it.

A single message whose body is at least ``compress_over`` bytes (4096) is deflated with zlib at level 5
and the record's sysFlag gets bit 0x1 (COMPRESSED). Batches are never compressed. Consumers look at the
same bit, and at the compression type in sysFlag bits 8-10 (0 and 3 mean zlib, 1 LZ4, 2 ZSTD; 4.9.4+),
to inflate. Inflating is bounded by ``max_size`` so a small hostile body cannot expand without limit.
"""

from __future__ import annotations

import zlib

from pocketmq.client.core.errors import CompressionError
from pocketmq.common.inflate import InflateError, inflate_bounded
from pocketmq.remoting.command import Body

__all__ = [
    "COMPRESS_LEVEL",
    "COMPRESS_OVER",
    "MAX_DECOMPRESSED_SIZE",
    "SYSFLAG_COMPRESSED",
    "SYSFLAG_MULTI_TAGS",
    "compress_body",
    "decompress_body",
]

#: sysFlag bits (MessageSysFlag).
SYSFLAG_COMPRESSED = 0x1
SYSFLAG_MULTI_TAGS = 0x2
SYSFLAG_BORNHOST_V6 = 0x10
SYSFLAG_STOREHOST_V6 = 0x20
SYSFLAG_INNER_BATCH = 0x80
_COMPRESSION_TYPE_SHIFT = 8
_COMPRESSION_TYPE_MASK = 0x7 << _COMPRESSION_TYPE_SHIFT
_ZLIB_TYPES = frozenset({0, 3})
_TYPE_NAMES = {1: "LZ4", 2: "ZSTD"}

COMPRESS_OVER = 4096
COMPRESS_LEVEL = 5
#: A compressed body is at most 4 MiB on the wire; a plain one this large is beyond any sane consumer.
MAX_DECOMPRESSED_SIZE = 128 * 1024 * 1024


def compress_body(
    body: Body, *, compress_over: int = COMPRESS_OVER, level: int = COMPRESS_LEVEL
) -> tuple[Body, int]:
    """``(body to send, sysFlag bits to add)``: zlib at ``level`` when ``len(body) >= compress_over``.

    RocketMQ keeps the deflated body even when it is larger; we keep the original instead (flag 0), which
    a consumer reads the same way and saves it an inflate.
    """
    if len(body) < compress_over:
        return body, 0
    packed = zlib.compress(body, level)
    if len(packed) >= len(body):
        return body, 0
    return packed, SYSFLAG_COMPRESSED


def decompress_body(body: Body, sys_flag: int, *, max_size: int = MAX_DECOMPRESSED_SIZE) -> Body:
    """The plain body of a stored message: inflated if sysFlag says it is compressed, else ``body`` itself.

    Raises :class:`CompressionError` for LZ4/ZSTD (not supported), corrupt data, or output over ``max_size``.
    """
    if not sys_flag & SYSFLAG_COMPRESSED:
        return body
    kind = (sys_flag & _COMPRESSION_TYPE_MASK) >> _COMPRESSION_TYPE_SHIFT
    if kind not in _ZLIB_TYPES:
        raise CompressionError(f"compression type {_TYPE_NAMES.get(kind, kind)} is not supported")
    try:
        return inflate_bounded(body, max_size)
    except InflateError as exc:
        raise CompressionError(f"compressed body: {exc}") from None
