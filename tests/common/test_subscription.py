"""Subscriptions (``SubscriptionData``, ``FilterAPI``): tag expressions, the two filters (the broker's by
tag code, the consumer's by tag string) and the heartbeat JSON form in every client's dialect."""

from __future__ import annotations

import json

import pytest

from pocketmq.common.errors import FieldFormatError
from pocketmq.common.message import java_string_hash
from pocketmq.common.subscription import SubscriptionData, build_subscription_data, is_sub_all, parse_tags


def test_parse_tags() -> None:
    assert parse_tags(" a ||b|| c ") == ["a", "b", "c"]
    assert parse_tags("b || a || b") == ["b", "a"]
    assert parse_tags("*") == []
    assert parse_tags(None) == []
    assert parse_tags("||") == []
    assert is_sub_all(None) and is_sub_all(" * ") and is_sub_all("") and not is_sub_all("||")


@pytest.mark.parametrize("expression", ["*", "", None, "  *  "])
def test_build_takes_all(expression: str | None) -> None:
    sub = build_subscription_data("T", expression, 7)
    assert sub == SubscriptionData("T", "*", [], [], 7)
    assert sub.is_all and sub.matches("x") and sub.matches(None)
    assert sub.tags_code_filter() is None


def test_build_tags_and_both_filters() -> None:
    sub = build_subscription_data("T", " TagA || TagB||TagA ", 1)
    assert (sub.sub_string, sub.tags_set, sub.code_set) == (" TagA || TagB||TagA ", ["TagA", "TagB"],
                                                           [2598919, 2598920])
    accepts = sub.tags_code_filter()
    assert accepts is not None
    assert accepts(java_string_hash("TagA")) and accepts(java_string_hash("TagB")) and not accepts(0)
    assert sub.matches("TagB") and not sub.matches("TagC") and not sub.matches(None)


def test_an_expression_without_tags_matches_nothing_on_the_broker() -> None:
    sub = build_subscription_data("T", "||", 1)
    accepts = sub.tags_code_filter()
    assert accepts is not None and not accepts(0) and not accepts(java_string_hash(""))


def test_heartbeat_json_is_byte_exact() -> None:
    sub = build_subscription_data("T", "TagA || TagB", 1_700_000_000_000)
    assert json.dumps(sub.to_json_dict(), separators=(",", ":")) == (
        '{"classFilterMode":false,"topic":"T","subString":"TagA || TagB","tagsSet":["TagA","TagB"],'
        '"codeSet":[2598919,2598920],"subVersion":1700000000000,"expressionType":"TAG"}'
    )
    assert SubscriptionData.from_json_dict(json.loads(json.dumps(sub.to_json_dict()))) == sub


def test_heartbeat_dialects() -> None:
    cpp = SubscriptionData.from_json_dict({"topic": "T", "subString": "a || b", "tagsSet": ["b", "a", "b"],
                                          "codeSet": [98, "97", "x", True], "subVersion": "17"})
    assert (cpp.tags_set, cpp.code_set, cpp.sub_version) == (["b", "a"], [98, 97, 0], 17)
    bare = SubscriptionData.from_json_dict({"topic": "T"})
    assert bare == SubscriptionData("T")
    assert bare.tags_code_filter() is None
    odd = SubscriptionData.from_json_dict({"topic": "T", "subVersion": "x", "subString": None,
                                          "expressionType": None, "classFilterMode": "yes"})
    assert (odd.sub_version, odd.sub_string, odd.expression_type, odd.class_filter_mode) == (0, "*", "TAG", False)
    for bad in ({"subString": "*"}, {"topic": ""}, {"topic": 5}):
        with pytest.raises(FieldFormatError, match="without a topic"):
            SubscriptionData.from_json_dict(bad)
