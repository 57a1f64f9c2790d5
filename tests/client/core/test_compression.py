"""Body compression threshold, sysFlag bit and bounded decompression."""

from __future__ import annotations

import os
import zlib

import pytest

from pocketmq.client.core.compression import SYSFLAG_COMPRESSED, compress_body, decompress_body
from pocketmq.client.core.errors import CompressionError

TEXT = b"PocketMQ compresses text. " * 400  # 10400 bytes, very compressible


def test_small_bodies_are_sent_as_is() -> None:
    body = TEXT[:4095]
    out, flag = compress_body(body)
    assert out is body and flag == 0


def test_threshold_is_inclusive_and_uses_zlib_level_5() -> None:
    body = TEXT[:4096]
    out, flag = compress_body(body)
    assert flag == SYSFLAG_COMPRESSED
    assert out == zlib.compress(body, 5)
    assert zlib.decompress(out) == body


def test_threshold_and_level_are_configurable() -> None:
    out, flag = compress_body(b"a" * 100, compress_over=50, level=9)
    assert flag == SYSFLAG_COMPRESSED and out == zlib.compress(b"a" * 100, 9)


def test_incompressible_body_stays_plain() -> None:
    body = os.urandom(8192)
    out, flag = compress_body(body)
    assert out is body and flag == 0


def test_decompress_by_sysflag() -> None:
    packed, flag = compress_body(TEXT)
    assert decompress_body(packed, flag) == TEXT
    assert decompress_body(packed, flag | 0x2 | (3 << 8)) == TEXT  # type 3 is zlib too
    assert decompress_body(TEXT, 0x2) is TEXT


@pytest.mark.parametrize(("kind", "name"), [(1, "LZ4"), (2, "ZSTD"), (5, "5")])
def test_other_compression_types_are_refused(kind: int, name: str) -> None:
    with pytest.raises(CompressionError, match=f"type {name} is not supported"):
        decompress_body(zlib.compress(TEXT), SYSFLAG_COMPRESSED | (kind << 8))


def test_corrupt_truncated_and_oversized_bodies() -> None:
    packed = zlib.compress(TEXT)
    with pytest.raises(CompressionError, match="corrupt"):
        decompress_body(b"not zlib at all", SYSFLAG_COMPRESSED)
    with pytest.raises(CompressionError, match="truncated"):
        decompress_body(packed[: len(packed) // 2], SYSFLAG_COMPRESSED)
    with pytest.raises(CompressionError, match="inflates beyond 1000 bytes"):
        decompress_body(packed, SYSFLAG_COMPRESSED, max_size=1000)
    assert decompress_body(packed, SYSFLAG_COMPRESSED, max_size=len(TEXT)) == TEXT
