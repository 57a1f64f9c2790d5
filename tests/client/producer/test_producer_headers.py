"""Pure parts of the networked producer: header templates and the fast send-result path."""

from __future__ import annotations

import pytest

from pocketmq.client.core.message import MessageQueue, SendStatus, send_result_from_response
from pocketmq.client.producer.headers import SendHeaderTemplate
from pocketmq.client.producer.send_loop import send_result
from pocketmq.remoting.codes import RequestCode, ResponseCode
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.errors import InvalidHeaderError, ServiceNotAvailableError
from pocketmq.remoting.headers import SendMessageRequestHeader, SendMessageRequestHeaderV2, SendMessageResponseHeader

QUEUE = MessageQueue("T", "broker-a", 3)
MASTERS = {"broker-a": "a"}


def test_v2_template_decodes_as_the_typed_header() -> None:
    template = SendHeaderTemplate("G", "T")
    assert template.code == RequestCode.SEND_MESSAGE_V2
    fields = template.fields(3, 1, 1700000000123, 300, "TAGS\x01a")
    assert all(isinstance(v, str) for v in fields.values())
    header = SendMessageRequestHeaderV2.from_fields(fields)
    assert header == SendMessageRequestHeaderV2("G", "T", "TBW102", 4, 3, 1, 1700000000123, 300, "TAGS\x01a", 0,
                                                False, None, False)
    assert set(fields) == set("abcdefghijkm")


def test_v1_and_batch_templates() -> None:
    v1 = SendHeaderTemplate("G", "T", smart=False, default_topic_queue_nums=8)
    assert v1.code == RequestCode.SEND_MESSAGE
    header = SendMessageRequestHeader.from_fields(v1.fields(0, 0, 1, 0, "p"))
    assert (header.producer_group, header.default_topic_queue_nums, header.batch, header.unit_mode) == (
        "G", 8, False, False)
    batch = SendHeaderTemplate("G", "T", batch=True, smart=False)
    assert batch.code == RequestCode.SEND_BATCH_MESSAGE  # 320 always uses the short names
    assert SendMessageRequestHeaderV2.from_fields(batch.fields(1, 0, 1, 0, "p")).batch is True
    assert SendMessageRequestHeaderV2.from_fields(SendHeaderTemplate("G", "T").fields(1, 0, 1, 0, "p")).to_v1() == \
        SendMessageRequestHeader.from_fields(SendHeaderTemplate("G", "T", smart=False).fields(1, 0, 1, 0, "p"))


def test_template_copies_are_independent() -> None:
    template = SendHeaderTemplate("G", "T")
    first = template.fields(1, 0, 1, 0, "a")
    second = template.fields(2, 0, 1, 0, "b")
    first["b"] = "changed"
    assert second["b"] == "T" and second["e"] == "2" and template.fields(5, 0, 1, 1000, "c")["h"] == "1000"


def test_retry_topic_fields() -> None:
    template = SendHeaderTemplate("G", "%RETRY%G")
    ext = template.fields(0, 0, 1, 0, "p")
    template.set_reconsume(ext, "3", "16")
    header = SendMessageRequestHeaderV2.from_fields(ext)
    assert (header.reconsume_times, header.max_reconsume_times) == (3, 16)


def ok_response(**fields: str) -> RemotingCommand:
    ext = {"msgId": "AB", "queueId": "3", "queueOffset": "42", "MSG_REGION": "R", "TRACE_ON": "false", **fields}
    return RemotingCommand(ResponseCode.SUCCESS, flag=1, ext_fields=ext)


@pytest.mark.parametrize("response", [
    ok_response(),
    ok_response(queueId="5"),
    ok_response(transactionId="tx"),
    RemotingCommand(ResponseCode.FLUSH_DISK_TIMEOUT, flag=1, ext_fields={"msgId": "AB", "queueId": "3",
                                                                        "queueOffset": "1"}),
])
def test_fast_result_matches_the_general_function(response: RemotingCommand) -> None:
    fast = send_result(response, QUEUE, "UNIQ", MASTERS)
    general = send_result_from_response(response.code, response.ext_fields, message_queue=QUEUE, msg_id="UNIQ")
    assert fast == general
    assert SendMessageResponseHeader.from_fields(response.ext_fields).queue_id == fast.message_queue.queue_id


def test_fast_result_reports_errors_like_the_general_function() -> None:
    assert send_result(ok_response(), QUEUE, "U", MASTERS).status is SendStatus.SEND_OK
    with pytest.raises(InvalidHeaderError, match="queueOffset"):
        send_result(ok_response(queueOffset="x"), QUEUE, "U", MASTERS)
    with pytest.raises(ServiceNotAvailableError, match="from a"):
        send_result(RemotingCommand(ResponseCode.SERVICE_NOT_AVAILABLE, flag=1, remark="slave"), QUEUE, "U",
                    MASTERS)
