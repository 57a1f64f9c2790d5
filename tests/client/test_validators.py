"""The broker's checks, run on the client before sending."""

from __future__ import annotations

from contextlib import AbstractContextManager

import pytest

from pocketmq.client.core.errors import InvalidMessageError
from pocketmq.client.core.message import Message
from pocketmq.client.core.validators import (
    check_and_encode_properties,
    check_body_size,
    check_group,
    check_message,
    check_producer_group,
    check_topic,
)
from pocketmq.common.topic import NOT_ALLOWED_SEND_TOPIC_SET


def _fails(needle: str) -> AbstractContextManager[pytest.ExceptionInfo[InvalidMessageError]]:
    return pytest.raises(InvalidMessageError, match=needle)


@pytest.mark.parametrize("topic", ["T", "a-b_c|d%e", "x" * 127, "%RETRY%group", "0123"])
def test_legal_topics(topic: str) -> None:
    assert check_topic(topic) == topic


@pytest.mark.parametrize(
    ("topic", "needle"),
    [
        ("", "blank"),
        ("   ", "blank"),
        (None, "blank"),
        ("x" * 128, "128 characters long, over the limit 127"),
        ("a b", "contains characters other than"),
        ("a.b", "contains characters other than"),
        ("tópico", "contains characters other than"),
        ("a\n", "contains characters other than"),
        ("TBW102", "auto-create key topic"),
    ],
)
def test_illegal_topics(topic: object, needle: str) -> None:
    with _fails(needle) as info:
        check_topic(topic)
    assert info.value.response_code == 13 and info.value.retriable is False


@pytest.mark.parametrize("topic", sorted(NOT_ALLOWED_SEND_TOPIC_SET))
def test_system_topics_are_forbidden(topic: str) -> None:
    with _fails(f"system topic {topic} is forbidden"):
        check_topic(topic)
    assert check_topic(topic, allow_system=True) == topic


def test_forbidden_topic_list_is_complete() -> None:
    assert {
        "SCHEDULE_TOPIC_XXXX",
        "RMQ_SYS_TRANS_HALF_TOPIC",
        "RMQ_SYS_TRANS_OP_HALF_TOPIC",
        "TRANS_CHECK_MAX_TIME_TOPIC",
        "SELF_TEST_TOPIC",
        "OFFSET_MOVED_EVENT",
    } == NOT_ALLOWED_SEND_TOPIC_SET


def test_groups() -> None:
    assert check_group("g" * 255) == "g" * 255
    assert check_group("%|_-aZ9") == "%|_-aZ9"
    with _fails("the group is 256 characters long"):
        check_group("g" * 256)
    with _fails("the group is blank"):
        check_group("")
    with _fails("contains characters"):
        check_group("my group")
    assert check_producer_group("orders") == "orders"
    with _fails("cannot be DEFAULT_PRODUCER"):
        check_producer_group("DEFAULT_PRODUCER")


def test_check_message_accepts_a_good_message() -> None:
    msg = Message("T", b"x")
    assert check_message(msg) is msg
    assert check_message(Message("T", bytearray(b"x"))) is not None
    assert check_message(Message("T", memoryview(b"x"))) is not None


@pytest.mark.parametrize(
    ("message", "needle"),
    [
        ("not a message", "expected a Message"),
        (Message("", b"x"), "topic is blank"),
        (Message("SCHEDULE_TOPIC_XXXX", b"x"), "forbidden"),
        (Message("T", b""), "body is empty"),
        (Message("T", "text"), "must be bytes"),  # type: ignore[arg-type]
        (Message("T", b"x", delay_level=-1), "must not be negative"),
        (Message("T", b"x", properties={"DELAY": "soon"}), "not an integer"),
    ],
)
def test_check_message_rejects(message: object, needle: str) -> None:
    with _fails(needle):
        check_message(message)


def test_body_size_limit_default_4_mib() -> None:
    check_body_size(4 * 1024 * 1024)
    with _fails("4194305 bytes, over the maximum of 4194304"):
        check_body_size(4 * 1024 * 1024 + 1)
    with _fails("over the maximum of 10"):
        check_body_size(11, max_message_size=10)


def test_check_and_encode_properties() -> None:
    assert check_and_encode_properties({"A": "1", "B": ""}) == "A\x011\x02B\x01"
    assert check_and_encode_properties({}) == ""


@pytest.mark.parametrize(
    ("props", "needle"),
    [
        ({"A\x01": "1"}, "must not contain"),
        ({"A": "1\x02B"}, "must not contain"),
        ({"A": "x\x01", "B": "y\x02"}, "must not contain"),
        ({"A": 1}, "str name and value"),
        ({"A": "é" * 20000}, "exceed 32767 bytes"),
    ],
)
def test_check_and_encode_properties_rejects(props: dict[str, str], needle: str) -> None:
    with _fails(needle):
        check_and_encode_properties(props)
