"""Subscriptions: tag expressions, Java hash codes, the heartbeat shape and the client-side re-filter."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from client.consume_types import ConsumeFromWhere, ConsumeType, MessageModel
from client.subscription import (
    SubscriptionData,
    SubscriptionParseError,
    build_subscription,
    consumer_data_json,
    java_string_hash,
    parse_tags,
)

# Values printed by a JVM (``String.hashCode()``) on this machine. Note "TagA" is 2598919:
# 84*31^3 + 97*31^2 + 103*31 + 65.
JAVA_HASHES = {
    "": 0,
    "TagA": 2598919,
    "tagA": 3552231,
    "TagB": 2598920,
    "hello": 99162322,
    "TopicTest": -1902610879,
    "Hello World": -862545276,
    "a" * 20: 1542361408,
    "é": 233,
    "\U0001f600": 1772899,  # outside the BMP: two UTF-16 code units, as in Java
}


@pytest.mark.parametrize(("text", "expected"), JAVA_HASHES.items())
def test_java_string_hash(text: str, expected: int) -> None:
    assert java_string_hash(text) == expected


def _reference_hash(text: str) -> int:
    """The formula as written: s[0]*31^(n-1) + ... + s[n-1], then wrapped to a signed 32-bit int."""
    raw = text.encode("utf-16-be")
    units = [int.from_bytes(raw[i : i + 2], "big") for i in range(0, len(raw), 2)]
    n = len(units)
    total: int = sum(unit * 31 ** (n - 1 - i) for i, unit in enumerate(units)) % 2**32
    return total - 2**32 if total >= 2**31 else total


@given(st.text(max_size=40))
def test_java_string_hash_matches_the_formula(text: str) -> None:
    assert java_string_hash(text) == _reference_hash(text)


@pytest.mark.parametrize("expression", ["*", "", None, "  *  "])
def test_subscribe_all(expression: str | None) -> None:
    sub = build_subscription("T", expression, now_ms=lambda: 1234)
    assert sub.sub_string == "*"
    assert sub.tags_set == []
    assert sub.code_set == []
    assert sub.sub_version == 1234
    assert sub.is_all
    assert sub.matches(None)
    assert sub.matches("anything")


def test_subscribe_tags() -> None:
    sub = build_subscription("T", "TagA || TagB||TagA ||  ", now_ms=lambda: 1)
    assert sub.sub_string == "TagA || TagB||TagA ||  "
    assert sub.tags_set == ["TagA", "TagB"]
    assert sub.code_set == [2598919, 2598920]
    assert sub.expression_type == "TAG"
    assert not sub.is_all
    assert sub.matches("TagA")
    assert sub.matches("TagB")
    assert not sub.matches("TagC")
    assert not sub.matches(None)
    assert not sub.matches("TagA || TagB")


def test_sub_version_defaults_to_the_wall_clock() -> None:
    assert build_subscription("T", "*").sub_version > 1_600_000_000_000


@pytest.mark.parametrize("expression", ["||", " || || "])
def test_expression_without_tags_is_refused(expression: str) -> None:
    with pytest.raises(SubscriptionParseError):
        build_subscription("T", expression)


def test_only_tag_expressions_are_supported() -> None:
    with pytest.raises(SubscriptionParseError, match="SQL92"):
        build_subscription("T", "a > 1", expression_type="SQL92")


def test_parse_tags() -> None:
    assert parse_tags(" a ||b|| c ") == ["a", "b", "c"]
    assert parse_tags("*") == []


def test_heartbeat_shape_and_round_trip() -> None:
    sub = build_subscription("T", "TagA || TagB", now_ms=lambda: 1_700_000_000_000)
    data = sub.to_json_dict()
    assert data == {
        "classFilterMode": False,
        "topic": "T",
        "subString": "TagA || TagB",
        "tagsSet": ["TagA", "TagB"],
        "codeSet": [2598919, 2598920],
        "subVersion": 1_700_000_000_000,
        "expressionType": "TAG",
    }
    assert SubscriptionData.from_json_dict(json.loads(json.dumps(data))) == sub
    assert SubscriptionData.from_json_dict(data).matches("TagB")


def test_lenient_heartbeat_forms_from_other_clients() -> None:
    sub = SubscriptionData.from_json_dict({"topic": "T", "subString": "*", "subVersion": "17"})
    assert (sub.sub_version, sub.tags_set, sub.code_set, sub.is_all) == (17, [], [], True)
    with pytest.raises(SubscriptionParseError):
        SubscriptionData.from_json_dict({"subString": "*"})
    with pytest.raises(SubscriptionParseError):
        SubscriptionData.from_json_dict({"topic": "T", "subVersion": "x"})


def test_consumer_data_json() -> None:
    sub = build_subscription("T", "*", now_ms=lambda: 5)
    data = consumer_data_json(
        "G",
        [sub],
        consume_type=ConsumeType.CONSUME_PASSIVELY,
        message_model=MessageModel.BROADCASTING,
        consume_from_where=ConsumeFromWhere.FIRST_OFFSET,
    )
    assert data == {
        "groupName": "G",
        "consumeType": "CONSUME_PASSIVELY",
        "messageModel": "BROADCASTING",
        "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET",
        "subscriptionDataSet": [sub.to_json_dict()],
        "unitMode": False,
    }
