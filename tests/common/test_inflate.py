"""Bounded inflation: the three ways it refuses, and a body exactly at the bound."""

from __future__ import annotations

import zlib

import pytest

from pocketmq.common.inflate import InflateError, inflate_bounded


def test_inflates_up_to_the_bound() -> None:
    assert inflate_bounded(zlib.compress(b"a" * 100), 100) == b"a" * 100


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (zlib.compress(b"a" * 101), "inflates beyond 100 bytes"),
        (zlib.compress(b"a" * 50)[:-4], "truncated"),
        (b"not zlib at all", "corrupt"),
    ],
)
def test_refusals_say_why(data: bytes, reason: str) -> None:
    with pytest.raises(InflateError, match=reason):
        inflate_bounded(data, 100)
