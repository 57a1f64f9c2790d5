"""Messages, properties, queues, send results and the batch body."""

from __future__ import annotations

import dataclasses
import struct

import pytest

from pocketmq.client.core.errors import InvalidMessageError
from pocketmq.client.core.message import (
    Message,
    MessageBatch,
    MessageQueue,
    SendResult,
    SendStatus,
    encode_batch,
    ensure_uniq_key,
    send_result_from_response,
)
from pocketmq.client.core.uniq import UniqIdGenerator
from pocketmq.remoting.errors import InvalidHeaderError, SystemBusyError, TopicNotExistError


def _generator() -> UniqIdGenerator:
    return UniqIdGenerator(ip="10.0.0.1", pid=0x1234, process_int=0xCAFEBABE, clock=lambda: 1_700_000_000_000)


# -- message ------------------------------------------------------------------------------------------


def test_message_puts_tags_keys_delay_wait_in_properties() -> None:
    msg = Message("T", b"x", tags="TagA", keys=["k1", "k2"], delay_level=3, wait_store_msg_ok=False)
    assert msg.properties == {"TAGS": "TagA", "KEYS": "k1 k2", "DELAY": "3", "WAIT": "false"}
    assert (msg.tags, msg.keys, msg.key_list, msg.delay_level) == ("TagA", "k1 k2", ["k1", "k2"], 3)
    assert msg.wait_store_msg_ok is False


def test_message_defaults_and_explicit_arguments_win() -> None:
    msg = Message("T", b"x", properties={"TAGS": "old", "own": "v"}, tags="new", keys="a b")
    assert msg.properties == {"TAGS": "new", "own": "v", "KEYS": "a b", "WAIT": "true"}
    assert msg.wait_store_msg_ok and msg.delay_level == 0 and msg.uniq_key is None
    plain = Message("T", b"x")
    assert plain.properties == {"WAIT": "true"}
    assert plain.tags is None and plain.keys is None and plain.key_list == []


def test_message_does_not_share_callers_properties_dict() -> None:
    given = {"a": "1"}
    msg = Message("T", b"x", properties=given)
    msg.properties["b"] = "2"
    assert given == {"a": "1"}


def test_delay_level_setter() -> None:
    msg = Message("T", b"x")
    msg.delay_level = 2
    assert msg.properties["DELAY"] == "2"
    msg.delay_level = 0
    assert "DELAY" not in msg.properties


def test_ensure_uniq_key_sets_once() -> None:
    msg = Message("T", b"x")
    first = ensure_uniq_key(msg, _generator())
    assert msg.uniq_key == first == msg.properties["UNIQ_KEY"]
    assert ensure_uniq_key(msg, _generator()) == first


def test_message_repr_hides_body() -> None:
    assert "<3 bytes>" in repr(Message("T", b"abc"))


# -- queue --------------------------------------------------------------------------------------------


def test_message_queue_is_frozen_hashable_and_ordered() -> None:
    a = MessageQueue("T", "broker-a", 1)
    assert a == MessageQueue("T", "broker-a", 1)
    assert len({a, MessageQueue("T", "broker-a", 1), MessageQueue("T", "broker-b", 1)}) == 2
    assert sorted([MessageQueue("T", "b", 0), MessageQueue("T", "a", 1), MessageQueue("T", "a", 0)])[0] == (
        MessageQueue("T", "a", 0)
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.broker_name = "broker-b"  # type: ignore[misc]


# -- send result --------------------------------------------------------------------------------------


MQ = MessageQueue("T", "broker-a", 2)


@pytest.mark.parametrize(
    ("code", "status"),
    [
        (0, SendStatus.SEND_OK),
        (10, SendStatus.FLUSH_DISK_TIMEOUT),
        (12, SendStatus.FLUSH_SLAVE_TIMEOUT),
        (11, SendStatus.SLAVE_NOT_AVAILABLE),
    ],
)
def test_send_result_for_each_stored_status(code: int, status: SendStatus) -> None:
    fields = {"msgId": "OID", "queueId": "2", "queueOffset": "41", "MSG_REGION": "R1", "TRACE_ON": "false"}
    result = send_result_from_response(code, fields, message_queue=MQ, msg_id="UNIQ")
    assert result == SendResult(status, "UNIQ", "OID", MQ, 41, region_id="R1", trace_on=False)
    assert result.message_queue is MQ
    assert SendStatus.from_response_code(code) is status


def test_send_result_defaults_and_queue_id_from_broker() -> None:
    fields = {"msgId": "OID", "queueId": "3", "queueOffset": "0"}
    result = send_result_from_response(0, fields, message_queue=MQ, msg_id="U")
    assert (result.region_id, result.trace_on, result.transaction_id) == ("DefaultRegion", True, None)
    assert result.message_queue == MessageQueue("T", "broker-a", 3)
    assert MQ.queue_id == 2  # the request's queue is untouched


def test_send_result_raises_broker_error_for_other_codes() -> None:
    with pytest.raises(TopicNotExistError) as info:
        send_result_from_response(
            17, {}, message_queue=MQ, msg_id="U", remark="no topic", addr="1.2.3.4:10911"
        )
    assert info.value.response_code == 17 and info.value.addr == "1.2.3.4:10911"
    with pytest.raises(SystemBusyError):
        send_result_from_response(2, None, message_queue=MQ, msg_id="U")
    assert SendStatus.from_response_code(1) is None


@pytest.mark.parametrize(
    "fields",
    [
        {"queueId": "1", "queueOffset": "1"},
        {"msgId": "X", "queueOffset": "1"},
        {"msgId": "X", "queueId": "a", "queueOffset": "1"},
    ],
)
def test_send_result_rejects_incomplete_headers(fields: dict[str, str]) -> None:
    with pytest.raises(InvalidHeaderError):
        send_result_from_response(0, fields, message_queue=MQ, msg_id="U")


# -- batch --------------------------------------------------------------------------------------------


def _entry(flag: int, body: bytes, props: str) -> bytes:
    """One batch entry built field by field, as reference §4.6 lists them."""
    raw_props = props.encode()
    total = 4 + 4 + 4 + 4 + 4 + len(body) + 2 + len(raw_props)
    return (
        struct.pack(">i", total)  # TOTALSIZE
        + struct.pack(">i", 0)  # MAGICCODE
        + struct.pack(">i", 0)  # BODYCRC
        + struct.pack(">i", flag)  # FLAG
        + struct.pack(">i", len(body))
        + body
        + struct.pack(">h", len(raw_props))
        + raw_props
    )


def test_encode_batch_is_byte_exact() -> None:
    generator = UniqIdGenerator(ip="10.0.0.1", pid=1, process_int=2, clock=lambda: 1_700_000_000_000)
    messages = [Message("T", b"hello", tags="A", flag=7), Message("T", "héllo".encode(), keys="k")]
    body = encode_batch(messages, generator=generator)
    ids = [m.uniq_key for m in messages]
    assert all(ids) and ids[0] != ids[1]
    expected = _entry(7, b"hello", f"TAGS\x01A\x02WAIT\x01true\x02UNIQ_KEY\x01{ids[0]}") + _entry(
        0, "héllo".encode(), f"KEYS\x01k\x02WAIT\x01true\x02UNIQ_KEY\x01{ids[1]}"
    )
    assert body == expected


def test_message_batch_fields() -> None:
    messages = [Message("T", b"a", wait_store_msg_ok=False), Message("T", b"b", wait_store_msg_ok=False)]
    batch = MessageBatch.of(messages, generator=_generator())
    assert batch.topic == "T"
    assert batch.properties == {"WAIT": "false"} and batch.wait_store_msg_ok is False
    assert batch.msg_id == f"{messages[0].uniq_key},{messages[1].uniq_key}"
    assert batch.messages == tuple(messages)


def test_batch_keeps_existing_uniq_keys() -> None:
    msg = Message("T", b"a", properties={"UNIQ_KEY": "MINE"})
    assert MessageBatch.of([msg], generator=_generator()).msg_id == "MINE"


@pytest.mark.parametrize(
    ("messages", "needle"),
    [
        ([], "at least one"),
        ([Message("T", b"a", delay_level=1)], "delay level"),
        ([Message("%RETRY%G", b"a")], "retry topics"),
        ([Message("T", b"a"), Message("U", b"b")], "one topic"),
        ([Message("T", b"a"), Message("T", b"b", wait_store_msg_ok=False)], "wait_store_msg_ok"),
        ([Message("T", b"")], "empty"),
        ([Message("T", b"a", properties={"big": "x" * 40000})], "properties"),
    ],
)
def test_batch_rules(messages: list[Message], needle: str) -> None:
    with pytest.raises(InvalidMessageError, match=needle) as info:
        encode_batch(messages, generator=_generator())
    assert info.value.response_code == 13


def test_batch_size_limit() -> None:
    messages = [Message("T", b"x" * 100) for _ in range(3)]
    with pytest.raises(InvalidMessageError, match="maximum message size"):
        encode_batch(messages, generator=_generator(), max_size=250)
