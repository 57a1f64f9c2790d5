"""Topic rules (``TopicValidator``): legal names, system topics, retry and DLQ topics."""

from __future__ import annotations

import pytest

from pocketmq.common.topic import (
    NOT_ALLOWED_SEND_TOPIC_SET,
    dlq_topic,
    is_dlq_topic,
    is_retry_topic,
    is_topic_or_group_illegal,
    retry_topic,
    validate_topic,
)


def test_retry_and_dlq_topic_names() -> None:
    assert retry_topic("G") == "%RETRY%G"
    assert dlq_topic("G") == "%DLQ%G"
    assert is_retry_topic("%RETRY%G") and not is_retry_topic("G")
    assert is_dlq_topic("%DLQ%G") and not is_dlq_topic("%RETRY%G")


@pytest.mark.parametrize(("topic", "problem"), [
    ("", "The specified topic is blank."),
    ("   ", "The specified topic is blank."),
    ("t" * 128, "The specified topic is longer than topic max length 127."),
    ("a b", "The specified topic[a b] contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"),
    ("abc\n", "The specified topic[abc\n] contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"),
    ("t" * 127, None),
    ("%RETRY%G|x-y_1", None),
])
def test_validate_topic(topic: str, problem: str | None) -> None:
    assert validate_topic(topic) == problem


def test_names() -> None:
    assert not is_topic_or_group_illegal("Orders_1-%|")
    assert is_topic_or_group_illegal("主题")
    assert is_topic_or_group_illegal("")


def test_system_topics_no_producer_may_send_to() -> None:
    assert {
        "SCHEDULE_TOPIC_XXXX", "RMQ_SYS_TRANS_HALF_TOPIC", "RMQ_SYS_TRANS_OP_HALF_TOPIC",
        "TRANS_CHECK_MAX_TIME_TOPIC", "SELF_TEST_TOPIC", "OFFSET_MOVED_EVENT",
    } == NOT_ALLOWED_SEND_TOPIC_SET
