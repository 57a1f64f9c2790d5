"""The consumer's subscriptions: building one from ``subscribe``'s arguments with the SDK's rules, and a
consumer group's heartbeat entry. (The subscription itself is the model's: tests/common/test_subscription.py.)"""

from __future__ import annotations

import pytest

from pocketmq.client.consumer.subscription import SubscriptionParseError, build_subscription, consumer_data_json
from pocketmq.client.consumer.types import ConsumeFromWhere, ConsumeType, MessageModel


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


def test_tag_and_sql92_expressions_are_supported() -> None:
    sql = build_subscription("T", "a > 1", expression_type="SQL92", now_ms=lambda: 5)
    assert (sql.sub_string, sql.expression_type, sql.sub_version, sql.tags_set) == ("a > 1", "SQL92", 5, [])
    with pytest.raises(SubscriptionParseError, match="SQL92"):
        build_subscription("T", "a >", expression_type="SQL92")
    with pytest.raises(SubscriptionParseError, match="only TAG and SQL92"):
        build_subscription("T", "x", expression_type="GROOVY")


def test_heartbeat_shape() -> None:
    sub = build_subscription("T", "TagA || TagB", now_ms=lambda: 1_700_000_000_000)
    assert sub.to_json_dict() == {
        "classFilterMode": False,
        "topic": "T",
        "subString": "TagA || TagB",
        "tagsSet": ["TagA", "TagB"],
        "codeSet": [2598919, 2598920],
        "subVersion": 1_700_000_000_000,
        "expressionType": "TAG",
    }


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
