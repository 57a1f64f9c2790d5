"""Consumer enums and delay levels (reference §8)."""

from __future__ import annotations

import pytest

from pocketmq.client.consumer.types import (
    ConsumeFromWhere,
    ConsumeResult,
    ConsumeType,
    MessageModel,
    delay_level_for_retry,
)
from pocketmq.common.config import DEFAULT_DELAY_LEVELS, DelayLevelError, parse_delay_levels


def test_default_delay_levels() -> None:
    levels = parse_delay_levels()
    assert len(levels) == 18
    s, m, h = 1000, 60_000, 3_600_000
    assert levels == (
        1 * s, 5 * s, 10 * s, 30 * s, 1 * m, 2 * m, 3 * m, 4 * m, 5 * m, 6 * m, 7 * m, 8 * m, 9 * m, 10 * m,
        20 * m, 30 * m, 1 * h, 2 * h,
    )  # fmt: skip
    assert parse_delay_levels(DEFAULT_DELAY_LEVELS) == levels


def test_short_levels_for_tests_and_days() -> None:
    assert parse_delay_levels("100ms  200ms\t1s 2d") == (100, 200, 1000, 2 * 86_400_000)


@pytest.mark.parametrize("text", ["", "   ", "1x", "s", "1.5s", "-1s", "1 s", "\u0661s"])
def test_bad_delay_levels(text: str) -> None:
    with pytest.raises(DelayLevelError):
        parse_delay_levels(text)


def test_retry_delay_levels() -> None:
    assert delay_level_for_retry(0) == 3  # 10 s
    assert delay_level_for_retry(15) == 18  # 2 h, the 16th and last retry


def test_java_names_for_heartbeats() -> None:
    assert ConsumeFromWhere.LAST_OFFSET.java_name == "CONSUME_FROM_LAST_OFFSET"
    assert ConsumeFromWhere.FIRST_OFFSET.java_name == "CONSUME_FROM_FIRST_OFFSET"
    assert ConsumeFromWhere.TIMESTAMP.java_name == "CONSUME_FROM_TIMESTAMP"
    assert MessageModel.CLUSTERING.value == "CLUSTERING"
    assert ConsumeType.CONSUME_PASSIVELY.value == "CONSUME_PASSIVELY"
    assert ConsumeResult.SUCCESS.value == "CONSUME_SUCCESS"


@pytest.mark.parametrize(
    ("enum_type", "raw", "member"),
    [
        (MessageModel, "CLUSTERING", MessageModel.CLUSTERING),
        (MessageModel, 1, MessageModel.CLUSTERING),
        (MessageModel, "0", MessageModel.BROADCASTING),
        (ConsumeType, 1, ConsumeType.CONSUME_PASSIVELY),
        (ConsumeType, "CONSUME_ACTIVELY", ConsumeType.CONSUME_ACTIVELY),
        (ConsumeFromWhere, 0, ConsumeFromWhere.LAST_OFFSET),
        (ConsumeFromWhere, 4, ConsumeFromWhere.FIRST_OFFSET),
        (ConsumeFromWhere, 5, ConsumeFromWhere.TIMESTAMP),
        (ConsumeFromWhere, "CONSUME_FROM_TIMESTAMP", ConsumeFromWhere.TIMESTAMP),
        (ConsumeFromWhere, "FIRST_OFFSET", ConsumeFromWhere.FIRST_OFFSET),
    ],
)
def test_from_wire_names_and_ordinals(enum_type: type, raw: object, member: object) -> None:
    assert enum_type.from_wire(raw) is member  # type: ignore[attr-defined]


@pytest.mark.parametrize("raw", ["NOPE", 9, None])
def test_from_wire_refuses_unknown(raw: object) -> None:
    with pytest.raises(ValueError):
        MessageModel.from_wire(raw)
