"""Pull response → PullResult (reference §2.5, §4.5) and the pull request's sysFlag."""

from __future__ import annotations

import pytest

from pocketmq.client.consumer.pull_result import PullStatus, pull_result_from_response, pull_status_for_code
from pocketmq.client.consumer.subscription import build_subscription
from pocketmq.client.core.message import MessageQueue
from pocketmq.client.core.message_ext import MessageDecodeError
from pocketmq.remoting.codes import ResponseCode
from pocketmq.remoting.errors import InvalidHeaderError, ResponseError, SubscriptionError, SystemError_
from tests.client.pull_records import Record, body_of

MQ = MessageQueue("TopicTest", "broker-a", 3)
FIELDS = {"nextBeginOffset": "45", "minOffset": "0", "maxOffset": "100", "suggestWhichBrokerId": "1"}


@pytest.mark.parametrize(
    ("code", "status"),
    [
        (0, PullStatus.FOUND),
        (19, PullStatus.NO_NEW_MSG),
        (20, PullStatus.NO_MATCHED_MSG),
        (21, PullStatus.OFFSET_ILLEGAL),
    ],
)
def test_status_mapping(code: int, status: PullStatus) -> None:
    assert pull_status_for_code(code) is status


@pytest.mark.parametrize(
    ("code", "error"),
    [
        (ResponseCode.SYSTEM_ERROR, SystemError_),
        (ResponseCode.SUBSCRIPTION_NOT_LATEST, SubscriptionError),
        (ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, ResponseError),
        (ResponseCode.QUERY_NOT_FOUND, ResponseError),
        (999, ResponseError),
    ],
)
def test_other_codes_are_broker_errors(code: int, error: type[ResponseError]) -> None:
    with pytest.raises(error) as info:
        pull_result_from_response(code, FIELDS, None, message_queue=MQ, remark="why", addr="1.2.3.4:10911")
    assert info.value.response_code == code
    assert info.value.remark == "why"
    assert info.value.addr == "1.2.3.4:10911"


def test_found_decodes_filters_and_stamps() -> None:
    body = body_of(
        Record(queue_offset=42, properties="TAGS\x01TagA\x02UNIQ_KEY\x01U42"),
        Record(queue_offset=43, properties="TAGS\x01TagC"),  # same hash bucket on the broker, wrong tag
        Record(queue_offset=44, properties="TAGS\x01TagB\x02MIN_OFFSET\x01old\x02"),  # stale props: replaced
        Record(queue_offset=45, properties=""),  # no tag: only "*" matches
    )
    sub = build_subscription("TopicTest", "TagA || TagB")
    result = pull_result_from_response(0, FIELDS, body, message_queue=MQ, subscription=sub)
    assert result.status is PullStatus.FOUND
    assert (result.next_begin_offset, result.min_offset, result.max_offset) == (45, 0, 100)
    assert result.suggest_which_broker_id == 1
    assert [m.queue_offset for m in result.messages] == [42, 44]
    for message in result.messages:
        assert message.get_property("MIN_OFFSET") == "0"
        assert message.get_property("MAX_OFFSET") == "100"
        assert message.properties["MIN_OFFSET"] == "0"
        assert message.broker_name == "broker-a"
        assert message.message_queue == MQ
    assert result.messages[0].msg_id == "U42"
    assert result.messages[1].properties["TAGS"] == "TagB"


def test_subscribe_all_keeps_every_message() -> None:
    body = body_of(Record(queue_offset=1, properties=""), Record(queue_offset=2))
    for sub in (None, build_subscription("TopicTest", "*")):
        result = pull_result_from_response(0, FIELDS, body, message_queue=MQ, subscription=sub)
        assert [m.queue_offset for m in result.messages] == [1, 2]


def test_found_with_everything_filtered_out() -> None:
    body = body_of(Record(properties="TAGS\x01X"))
    result = pull_result_from_response(
        0, FIELDS, body, message_queue=MQ, subscription=build_subscription("TopicTest", "Y")
    )
    assert result.status is PullStatus.FOUND
    assert result.messages == []


@pytest.mark.parametrize("code", [19, 20, 21])
def test_not_found_statuses_carry_offsets_and_no_messages(code: int) -> None:
    fields = {"nextBeginOffset": 7, "minOffset": 3, "maxOffset": 9, "suggestWhichBrokerId": 0}  # not strings
    result = pull_result_from_response(code, fields, b"", message_queue=MQ)
    assert (result.next_begin_offset, result.min_offset, result.max_offset, result.messages) == (7, 3, 9, [])


@pytest.mark.parametrize("missing", sorted(FIELDS))
def test_missing_offset_fields(missing: str) -> None:
    fields = {k: v for k, v in FIELDS.items() if k != missing}
    with pytest.raises(InvalidHeaderError, match=missing):
        pull_result_from_response(19, fields, None, message_queue=MQ)
    with pytest.raises(InvalidHeaderError):
        pull_result_from_response(19, None, None, message_queue=MQ)


def test_non_integer_offset_field() -> None:
    with pytest.raises(InvalidHeaderError, match="non-integer"):
        pull_result_from_response(19, {**FIELDS, "maxOffset": "x"}, None, message_queue=MQ)


def test_bad_body_is_a_decode_error() -> None:
    with pytest.raises(MessageDecodeError):
        pull_result_from_response(0, FIELDS, b"\x00" * 50, message_queue=MQ)
