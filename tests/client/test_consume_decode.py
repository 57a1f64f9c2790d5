"""The consumer's decoder of pull response bodies (reference §4.1, §4.5) and ``MessageExt``."""

from __future__ import annotations

import contextlib
import struct
import zlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pocketmq.client.core.message import MessageQueue
from pocketmq.client.core.message_ext import (
    MessageDecodeError,
    MessageExt,
    decode_messages,
    restore_retry_topic,
    restore_retry_topics,
)
from pocketmq.common.message import parse_properties
from pocketmq.common.record import message_id, parse_host_port
from tests.client.pull_records import MAGIC_V2, Record, body_of

# -- one record, byte by byte -------------------------------------------------------------------------

#: A complete v1 record written out field by field (reference §4.1), IPv4 hosts, not compressed.
LITERAL_RECORD = bytes.fromhex(
    "00000068"  # 1  TOTALSIZE = 91 + body 4 + topic 1 + properties 8 = 104
    "DAA320A7"  # 2  MAGICCODE
    "00000000"  # 3  BODYCRC (not checked unless asked)
    "00000002"  # 4  QUEUEID 2
    "00000005"  # 5  FLAG 5
    "000000000000000A"  # 6  QUEUEOFFSET 10
    "000000000000BBEA"  # 7  PHYSICALOFFSET 0xBBEA
    "00000000"  # 8  SYSFLAG
    "0000018BCFE56800"  # 9  BORNTIMESTAMP 1700000000000
    "0A000001" "0000D431"  # 10 BORNHOST 10.0.0.1:54321
    "0000018BCFE56801"  # 11 STORETIMESTAMP 1700000000001
    "C0A83A80" "00002A9F"  # 12 STOREHOST 192.168.58.128:10911
    "00000001"  # 13 RECONSUMETIMES 1
    "0000000000000000"  # 14 PREPARED TRANSACTION OFFSET
    "00000004" "626F6479"  # 15 BODY "body"
    "01" "54"  # 16 TOPIC "T"
    "0008" "54414753" "0161" "0262"  # 17 PROPERTIES "TAGS\x01a\x02b" (b has no value: skipped)
)  # fmt: skip


def test_literal_record_decodes_every_field() -> None:
    [msg] = decode_messages(LITERAL_RECORD)
    assert len(LITERAL_RECORD) == 104
    assert msg.topic == "T"
    assert msg.body == b"body"
    assert (msg.queue_id, msg.flag, msg.queue_offset, msg.commit_log_offset) == (2, 5, 10, 0xBBEA)
    assert (msg.sys_flag, msg.reconsume_times, msg.prepared_transaction_offset, msg.body_crc) == (0, 1, 0, 0)
    assert msg.born_timestamp == 1_700_000_000_000
    assert msg.store_timestamp == 1_700_000_000_001
    assert msg.born_host == "10.0.0.1:54321"
    assert msg.store_host == "192.168.58.128:10911"
    assert msg.properties == {"TAGS": "a"}
    assert msg.tags == "a"
    assert msg.store_size == 104
    # reference §4.5's example id, and no UNIQ_KEY: msg_id falls back to it
    assert msg.offset_msg_id == "C0A83A8000002A9F000000000000BBEA"
    assert msg.msg_id == msg.offset_msg_id


def test_record_helper_matches_the_literal_layout() -> None:
    record = Record(
        topic="T", body=b"body", queue_id=2, flag=5, queue_offset=10, physical_offset=0xBBEA,
        born_timestamp=1_700_000_000_000, born_host="10.0.0.1:54321", store_timestamp=1_700_000_000_001,
        store_host="192.168.58.128:10911", reconsume_times=1, properties="TAGS\x01a\x02b", body_crc=0,
    )  # fmt: skip
    assert record.encode() == LITERAL_RECORD


def test_all_fields_of_an_ipv4_record() -> None:
    record = Record(body=b"x" * 1024, reconsume_times=3, prepared_offset=77, flag=-1, queue_offset=2**40)
    [msg] = decode_messages(record.encode(), check_crc=True)
    assert msg.topic == "TopicTest"
    assert msg.body == b"x" * 1024
    assert msg.queue_id == 3
    assert msg.flag == -1
    assert msg.queue_offset == 2**40
    assert msg.commit_log_offset == 0xBBEA
    assert msg.born_host == "10.0.0.9:53001"
    assert msg.store_host == "192.168.58.128:10911"
    assert msg.reconsume_times == 3
    assert msg.prepared_transaction_offset == 77
    assert msg.body_crc == zlib.crc32(b"x" * 1024) & 0x7FFFFFFF
    assert msg.store_size == 91 + 1024 + len("TopicTest") + len(record.properties)
    assert msg.msg_id == "0A000009AB12"  # UNIQ_KEY wins
    assert msg.offset_msg_id == "C0A83A8000002A9F000000000000BBEA"
    assert msg.keys == "k1 k2"
    assert msg.key_list == ["k1", "k2"]
    assert msg.uniq_key == "0A000009AB12"


@pytest.mark.parametrize(
    ("born", "store", "sys_flag"),
    [
        ("[::1]:53001", "192.168.58.128:10911", 0x10),
        ("10.0.0.9:53001", "[fe80::1:2]:10911", 0x20),
        ("[2001:db8::7]:1", "[fe80::1:2]:10911", 0x30),
    ],
)
def test_ipv6_hosts(born: str, store: str, sys_flag: int) -> None:
    record = Record(born_host=born, store_host=store)
    data = record.encode()
    extra = 12 * bin(sys_flag).count("1")
    assert len(data) == 91 + extra + len(record.body) + len(record.topic) + len(record.properties)
    [msg] = decode_messages(data, check_crc=True)
    assert msg.sys_flag == sys_flag
    assert msg.born_host == born
    assert msg.store_host == store
    assert msg.body == record.body
    assert msg.offset_msg_id == message_id(parse_host_port(store), 0xBBEA)
    assert len(msg.offset_msg_id) == (56 if store.startswith("[") else 32)


def test_compressed_body_is_inflated_and_sys_flag_kept() -> None:
    plain = b"compress me " * 1000
    packed = zlib.compress(plain, 5)
    data = Record(body=packed, sys_flag=0x1).encode()
    [msg] = decode_messages(data, check_crc=True)  # the CRC covers the stored (compressed) bytes
    assert msg.body == plain
    assert msg.sys_flag == 0x1
    [raw] = decode_messages(data, decompress=False)
    assert raw.body == packed


def test_zlib_compression_type_bits_are_accepted() -> None:
    plain = b"z" * 5000
    [msg] = decode_messages(Record(body=zlib.compress(plain), sys_flag=0x1 | (3 << 8)).encode())
    assert msg.body == plain


@pytest.mark.parametrize("kind", [1, 2], ids=["LZ4", "ZSTD"])
def test_unsupported_compression_is_a_decode_error(kind: int) -> None:
    with pytest.raises(MessageDecodeError, match="not supported"):
        decode_messages(Record(body=b"abc", sys_flag=0x1 | (kind << 8)).encode())


def test_corrupt_compressed_body_is_a_decode_error() -> None:
    with pytest.raises(MessageDecodeError, match="corrupt"):
        decode_messages(Record(body=b"not zlib at all", sys_flag=0x1).encode())


@pytest.mark.parametrize(
    "text",
    ["UNIQ_KEY\x01ID1\x02TAGS\x01TagA\x02KEYS\x01a b", "UNIQ_KEY\x01ID1\x02TAGS\x01TagA\x02KEYS\x01a b\x02"],
    ids=["4.9.3+", "trailing-separator"],
)
def test_both_property_forms(text: str) -> None:
    [msg] = decode_messages(Record(properties=text).encode())
    assert msg.tags == "TagA"
    assert msg.keys == "a b"
    assert msg.msg_id == "ID1"
    assert msg.properties == {"UNIQ_KEY": "ID1", "TAGS": "TagA", "KEYS": "a b"}


def test_empty_properties_and_empty_body() -> None:
    [msg] = decode_messages(Record(properties="", body=b"").encode())
    assert msg.properties == {}
    assert msg.tags is None
    assert msg.body == b""
    assert msg.msg_id == msg.offset_msg_id


def test_non_ascii_topic_and_properties() -> None:
    [msg] = decode_messages(Record(topic="主题", properties="TAGS\x01标签\x02键\x01值").encode())
    assert msg.topic == "主题"
    assert msg.tags == "标签"
    assert msg.get_property("键") == "值"


def test_several_records_in_order_from_any_buffer_type() -> None:
    records = [Record(queue_offset=i, physical_offset=1000 + 200 * i, body=bytes([i]) * i) for i in range(5)]
    data = body_of(*records)
    for buffer in (data, bytearray(data), memoryview(data)):
        messages = decode_messages(buffer)
        assert [m.queue_offset for m in messages] == [0, 1, 2, 3, 4]
        assert [m.body for m in messages] == [bytes([i]) * i for i in range(5)]
    assert decode_messages(b"") == []


def test_v2_magic_with_two_byte_topic_length() -> None:
    [msg] = decode_messages(Record(magic=MAGIC_V2, topic="t" * 300).encode())
    assert msg.topic == "t" * 300


def test_crc_is_checked_only_when_asked() -> None:
    data = Record(body_crc=12345).encode()
    assert decode_messages(data)[0].body_crc == 12345
    with pytest.raises(MessageDecodeError, match="CRC"):
        decode_messages(data, check_crc=True)


# -- properties: scanning agrees with parsing ---------------------------------------------------------

_prop_text = st.text(alphabet=st.sampled_from(["A", "B", "T", "\x01", "\x02", "é"]), max_size=30)


@given(text=_prop_text, name=st.sampled_from(["A", "B", "T", "AB", ""]))
def test_single_property_lookup_agrees_with_full_parse(text: str, name: str) -> None:
    msg = MessageExt.of("t", b"")
    msg._properties_text = text
    assert msg.get_property(name) == parse_properties(text).get(name)


def test_properties_can_be_changed_after_parsing() -> None:
    msg = MessageExt.of("t", b"", properties={"TAGS": "a"})
    msg.put_property("TAGS", "b")
    assert msg.tags == "b"
    msg.clear_property("TAGS")
    assert msg.tags is None
    [stamped] = decode_messages(Record(properties="TAGS\x01a\x02").encode(), broker_name="b",
                                properties_suffix="\x02MIN_OFFSET\x013")
    assert (stamped.get_property("MIN_OFFSET"), stamped.tags, stamped.broker_name) == ("3", "a", "b")
    assert stamped.properties == {"TAGS": "a", "MIN_OFFSET": "3"}
    [bare] = decode_messages(Record(properties="").encode(), properties_suffix="\x02MIN_OFFSET\x013")
    assert bare.properties == {"MIN_OFFSET": "3"}


def test_transaction_id_for_committed_transactional_messages() -> None:
    msg = MessageExt.of("t", b"", properties={"TRAN_MSG": "true", "UNIQ_KEY": "U1"})
    assert msg.transaction_id == "U1"
    assert MessageExt.of("t", b"", properties={"UNIQ_KEY": "U1"}).transaction_id is None


def test_of_and_repr_without_body() -> None:
    msg = MessageExt.of(
        "t", b"secret", queue_id=1, queue_offset=9, born_host="1.2.3.4:5", store_host="[::1]:6", broker_name="b"
    )
    assert msg.born_host == "1.2.3.4:5"
    assert msg.store_host == "[::1]:6"
    assert msg.message_queue == MessageQueue("t", "b", 1)
    assert "secret" not in repr(msg)
    assert "6 bytes" in repr(msg)
    assert MessageExt.of("t", b"").born_host == ""


# -- malformed bodies ---------------------------------------------------------------------------------


def _patch(data: bytes, offset: int, fmt: str, value: int) -> bytes:
    buf = bytearray(data)
    struct.pack_into(fmt, buf, offset, value)
    return bytes(buf)


GOOD = Record(body=b"0123456789", topic="Topic", properties="TAGS\x01a").encode()
BODY_LEN_AT = 84  # IPv4: BODYLENGTH sits right before the body
TOPIC_LEN_AT = 88 + 10


@pytest.mark.parametrize(
    ("data", "match"),
    [
        (GOOD[:20], "truncated"),
        (_patch(GOOD, 4, ">I", 0xCBD43194), "magic"),
        (_patch(GOOD, 4, ">I", 0x12345678), "magic"),
        (_patch(GOOD, 0, ">i", len(GOOD) + 1), "truncated"),
        (_patch(GOOD, 0, ">i", 50), "total size"),
        (_patch(GOOD, 0, ">i", -5), "total size"),
        (_patch(GOOD, BODY_LEN_AT, ">i", -1), "body length"),
        (_patch(GOOD, BODY_LEN_AT, ">i", 1000), "body length"),
        (_patch(GOOD, TOPIC_LEN_AT, ">B", 200), "topic length"),
        (_patch(GOOD, TOPIC_LEN_AT, ">B", 100), "topic length"),
        (_patch(GOOD, TOPIC_LEN_AT, ">B", 0), "topic length"),
        (_patch(GOOD, TOPIC_LEN_AT + 6, ">h", 3), "size mismatch"),
        (_patch(GOOD, TOPIC_LEN_AT + 6, ">h", -1), "size mismatch"),
    ],
)
def test_malformed_bodies_raise_the_decode_error(data: bytes, match: str) -> None:
    with pytest.raises(MessageDecodeError, match=match) as info:
        decode_messages(data)
    assert info.value.position == 0


def test_trailing_garbage_after_a_good_record() -> None:
    with pytest.raises(MessageDecodeError, match="truncated") as info:
        decode_messages(GOOD + b"\x00" * 3)
    assert info.value.position == len(GOOD)


def test_invalid_utf8_in_topic_or_properties() -> None:
    good = Record(topic="Tx", properties="A\x01b").encode()
    bad_topic = good.replace(b"Tx", b"T\xff")
    bad_props = good.replace(b"A\x01b", b"A\x01\xff")
    for data in (bad_topic, bad_props):
        with pytest.raises(MessageDecodeError, match="UTF-8"):
            decode_messages(data)


def test_error_position_points_at_the_bad_record() -> None:
    first = Record().encode()
    with pytest.raises(MessageDecodeError) as info:
        decode_messages(first + _patch(first, 4, ">I", 0))
    assert info.value.position == len(first)
    assert not info.value.retriable


def test_every_truncation_raises_or_stops_at_a_record_boundary() -> None:
    records = [Record(queue_offset=i, body=b"b" * i) for i in range(3)]
    data = body_of(*records)
    boundaries = {0}
    for record in records:
        boundaries.add(max(boundaries) + len(record.encode()))
    for cut in range(len(data)):
        if cut in boundaries:
            assert len(decode_messages(data[:cut])) == sorted(boundaries).index(cut)
        else:
            with pytest.raises(MessageDecodeError):
                decode_messages(data[:cut])


@settings(suppress_health_check=[HealthCheck.too_slow], max_examples=300)
@given(st.binary(max_size=400))
def test_random_bytes_decode_or_raise_the_named_error(data: bytes) -> None:
    with contextlib.suppress(MessageDecodeError):
        decode_messages(data, check_crc=True)


_VALID = body_of(
    Record(queue_offset=1),
    Record(queue_offset=2, born_host="[::1]:9", body=zlib.compress(b"q" * 300), sys_flag=0x1),
    Record(queue_offset=3, properties="TAGS\x01x\x02"),
)


@settings(max_examples=500)
@given(
    st.lists(st.tuples(st.integers(0, len(_VALID) - 1), st.integers(0, 255)), min_size=1, max_size=6),
    st.integers(0, len(_VALID)),
)
def test_mutated_bodies_decode_or_raise_the_named_error(flips: list[tuple[int, int]], cut: int) -> None:
    buf = bytearray(_VALID)
    for at, value in flips:
        buf[at] = value
    for decompress in (True, False):
        with contextlib.suppress(MessageDecodeError):
            decode_messages(bytes(buf[:cut]) if cut else bytes(buf), decompress=decompress)


# -- retry topics -------------------------------------------------------------------------------------


def test_restore_retry_topic() -> None:
    retried = MessageExt.of("%RETRY%G", b"", properties={"RETRY_TOPIC": "Orders"})
    other_group = MessageExt.of("%RETRY%H", b"", properties={"RETRY_TOPIC": "Orders"})
    plain = MessageExt.of("Orders", b"")
    no_prop = MessageExt.of("%RETRY%G", b"")
    assert restore_retry_topic(retried, "G")
    assert retried.topic == "Orders"
    assert not restore_retry_topic(other_group, "G")
    assert not restore_retry_topic(plain, "G")
    assert not restore_retry_topic(no_prop, "G")
    assert no_prop.topic == "%RETRY%G"
    batch = [MessageExt.of("%RETRY%G", b"", properties={"RETRY_TOPIC": "A"}), MessageExt.of("B", b"")]
    restore_retry_topics(batch, "G")
    assert [m.topic for m in batch] == ["A", "B"]
