"""The producer's requests byte for byte: the frames of single sends and of coalesced batches, for fixed
inputs (``UNIQ_KEY`` generator, clock and opaque pinned), against digests recorded before the hot path was
reworked, and against the typed header and the model's own encoders (which do not share its fast paths)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator

import pytest

from pocketmq.client.core.message import Message, MessageQueue
from pocketmq.client.core.uniq import UniqIdGenerator
from pocketmq.client.producer import outgoing
from pocketmq.client.producer.config import ProducerConfig
from pocketmq.client.producer.outgoing import MessagePreparer
from pocketmq.common.batch import BatchEntry, encode_batch_body
from pocketmq.common.message import encode_properties
from pocketmq.remoting.codes import SerializeType
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.frame import encode_frame
from pocketmq.remoting.headers import SendMessageRequestHeader, SendMessageRequestHeaderV2

BORN_MS = 1_764_000_000_123
QUEUE = MessageQueue("T", "broker-a", 5)


def _messages() -> list[Message]:
    """One of each shape the producer treats differently."""
    return [
        Message("T", b"plain"),
        Message("T", b"x" * 1024, tags="TagA"),
        Message("T", b"k", tags="TagA", keys=["order-1", "order-2"], flag=7),
        Message("T", b"p", properties={"custom": "v\u00e9", "a": "b"}, keys="k1"),
        Message("T", b"d", delay_level=3),
        Message("T", b"w", wait_store_msg_ok=False),
        Message("T", b"u", properties={"UNIQ_KEY": "C0A80001AAAA"}),
        Message("T", bytes(range(256)) * 40),  # compressed (over compress_over)
        Message("%RETRY%G", b"r", properties={"RECONSUME_TIME": "2", "MAX_RECONSUME_TIMES": "16"}),
    ]


def _preparer(serialize_type: int, smart: bool = True) -> MessagePreparer:
    config = ProducerConfig(group="G", namesrv_addr="127.0.0.1:1", serialize_type=serialize_type,
                            send_smart_msg=smart, compress_over=4096)
    generator = UniqIdGenerator(ip="10.1.2.3", pid=4242, process_int=0x1234ABCD, clock=lambda: BORN_MS,
                                counter_start=65530)
    return MessagePreparer(config, generator)


@pytest.fixture(autouse=True)
def _fixed_clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(outgoing, "_time_ns", lambda: BORN_MS * 1_000_000 + 456)
    yield


def _frame(cmd: RemotingCommand) -> bytes:
    cmd.opaque = 77
    return encode_frame(cmd)


def _frames(serialize_type: int, smart: bool = True) -> list[bytes]:
    preparer = _preparer(serialize_type, smart)
    outs = [preparer.prepare(msg) for msg in _messages()]
    frames = [_frame(preparer.request(out, MessageQueue(out.topic, "broker-a", 5))) for out in outs]
    batchable = [out for out in outs if out.batchable]
    frames.append(_frame(preparer.request(preparer.coalesce(batchable), QUEUE)))
    return frames


# sha256 of each frame above (the last: the coalesced batch), recorded from the code before the rework.
GOLDEN: dict[tuple[int, bool], str] = {
    (SerializeType.MSGPACK, True): "cfd2d1fc359cc54ed197dc9dcd44ed0214d425e85693dac6e74e6ad484a957d4",
    (SerializeType.JSON, True): "088c0e3af94e37dbdc0947edfc03c657c061da71662c1ae8b2f0553c64a550e0",
    (SerializeType.ROCKETMQ, True): "2ae3c9107364f1affaefe86673251d6ece7fe1b667b919af0dd2763e2113ad83",
    (SerializeType.JSON, False): "93036c25064d6a50c9be398c5b81d9e996cdc9e8364456961382bf93453c6d9a",
}


@pytest.mark.parametrize(("serialize_type", "smart"), [(SerializeType.MSGPACK, True), (SerializeType.JSON, True),
                                                       (SerializeType.ROCKETMQ, True), (SerializeType.JSON, False)])
def test_frames_are_byte_identical_to_before(serialize_type: int, smart: bool) -> None:
    digest = hashlib.sha256(b"".join(_frames(serialize_type, smart))).hexdigest()
    assert digest == GOLDEN[(serialize_type, smart)]


def test_single_requests_match_the_typed_header_and_the_model_encoding() -> None:
    preparer = _preparer(SerializeType.JSON)
    for msg in _messages():
        out = preparer.prepare(msg)
        assert out.properties == encode_properties(msg.properties)
        assert msg.properties["UNIQ_KEY"] == out.msg_id
        cmd = preparer.request(out, QUEUE)
        assert cmd.ext_fields is not None
        header = SendMessageRequestHeaderV2.from_fields(cmd.ext_fields)
        assert (header.producer_group, header.topic, header.queue_id, header.born_timestamp, header.flag,
                header.properties, header.batch) == ("G", msg.topic, 5, BORN_MS, msg.flag, out.properties, False)
        assert cmd.body == out.body


def test_v1_requests_match_the_typed_header() -> None:
    preparer = _preparer(SerializeType.JSON, smart=False)
    out = preparer.prepare(Message("T", b"v1", tags="A"))
    cmd = preparer.request(out, QUEUE)
    assert cmd.ext_fields is not None
    header = SendMessageRequestHeader.from_fields(cmd.ext_fields)
    assert (header.queue_id, header.properties, header.born_timestamp) == (5, out.properties, BORN_MS)


def test_coalesced_body_matches_the_model_encoder() -> None:
    preparer = _preparer(SerializeType.JSON)
    messages = [Message("T", b"a" * n, tags="t", flag=n) for n in (1, 100, 1000)]
    outs = [preparer.prepare(msg) for msg in messages]
    batch = preparer.coalesce(outs)
    assert bytes(batch.body) == encode_batch_body(
        [BatchEntry(msg.flag, bytes(msg.body), encode_properties(msg.properties)) for msg in messages])
    assert batch.msg_id == ",".join(out.msg_id for out in outs)
    assert batch.properties == "WAIT\x01true"



def test_which_messages_may_be_coalesced() -> None:
    preparer = _preparer(SerializeType.MSGPACK)
    assert [preparer.prepare(msg).batchable for msg in _messages()] == [True, True, True, True, False, False, True,
                                                                       False, False]
    big = preparer.prepare(Message("T", b"x" * (preparer.auto_batch_max_bytes + 1)))  # WAIT only, too big
    assert not big.batchable and big.properties == f"WAIT\x01true\x02UNIQ_KEY\x01{big.msg_id}"
