"""The commit-log record codec (reference §4.1, §4.5): byte-exact fixtures built field by field, round
trips, damaged records rejected with the decoder's fixed reasons, and the pull-response mode (v2 magic,
no blank or zeros end)."""

from __future__ import annotations

import ipaddress
import struct
import zlib
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pocketmq.common.errors import RecordFormatError
from pocketmq.common.message import encode_properties, java_string_hash
from pocketmq.common.record import (
    BLANK_MAGIC_CODE,
    MESSAGE_MAGIC_CODE,
    Blank,
    DispatchRequest,
    MessageRecord,
    RecordParts,
    _explain,
    check_record,
    decode_host,
    decode_message_id,
    decode_record,
    decode_records,
    encode_host,
    format_host,
    locate_record,
    message_id,
    parse_host_port,
    record_size,
    store_timestamp_offset,
)
from pocketmq.common.record_encoder import encode_blank_into, encode_record
from pocketmq.common.sysflag import MessageSysFlag

BODY = b"Hello RocketMQ"
TOPIC = b"TopicTest"
PROPS = b"TAGS\x01TagA\x02KEYS\x01order-1"


def i32(v: int) -> bytes:
    return struct.pack(">i", v)


def i64(v: int) -> bytes:
    return struct.pack(">q", v)


def build_record(born_ip: bytes, store_ip: bytes, sys_flag: int, body: bytes = BODY,
                 phys: int = 1000) -> bytes:
    """A record written out field by field in the order of the §4.1 table."""
    fields = [
        b"",                                            # 1 TOTALSIZE, filled in below
        struct.pack(">I", 0xDAA320A7),                  # 2 MAGICCODE
        i32(zlib.crc32(body) & 0x7FFFFFFF),             # 3 BODYCRC
        i32(3),                                         # 4 QUEUEID
        i32(7),                                         # 5 FLAG
        i64(42),                                        # 6 QUEUEOFFSET
        i64(phys),                                      # 7 PHYSICALOFFSET
        i32(sys_flag),                                  # 8 SYSFLAG
        i64(1_700_000_000_123),                         # 9 BORNTIMESTAMP
        born_ip + i32(54321),                           # 10 BORNHOST (port as int32)
        i64(1_700_000_000_456),                         # 11 STORETIMESTAMP
        store_ip + i32(10911),                          # 12 STOREHOSTADDRESS
        i32(2),                                         # 13 RECONSUMETIMES
        i64(0),                                         # 14 PREPARED TRANSACTION OFFSET
        i32(len(body)) + body,                          # 15 BODY
        bytes([len(TOPIC)]) + TOPIC,                    # 16 TOPIC (length byte)
        struct.pack(">h", len(PROPS)) + PROPS,          # 17 PROPERTIES (length short)
    ]
    rest = b"".join(fields[1:])
    return i32(4 + len(rest)) + rest


V4_BORN = bytes([192, 168, 0, 10])
V4_STORE = bytes([10, 0, 0, 1])
V6_BORN = ipaddress.IPv6Address("2001:db8::10").packed
V6_STORE = ipaddress.IPv6Address("fe80::1").packed


def encode_like(born: bytes, store: bytes, sys_flag: int) -> bytes:
    return encode_record(
        topic=TOPIC.decode(), body=BODY, properties=PROPS.decode(), queue_id=3, flag=7, queue_offset=42,
        physical_offset=1000, sys_flag=sys_flag, born_timestamp=1_700_000_000_123, born_host=born + i32(54321),
        store_timestamp=1_700_000_000_456, store_host=store + i32(10911), reconsume_times=2,
    )


@pytest.mark.parametrize(("born", "store", "flags", "size"), [
    (V4_BORN, V4_STORE, 0, 91),
    (V6_BORN, V4_STORE, MessageSysFlag.BORNHOST_V6, 103),
    (V4_BORN, V6_STORE, MessageSysFlag.STOREHOST_V6, 103),
    (V6_BORN, V6_STORE, MessageSysFlag.BORNHOST_V6 | MessageSysFlag.STOREHOST_V6, 115),
])
def test_byte_exact_record_and_decode(born: bytes, store: bytes, flags: int, size: int) -> None:
    fixture = build_record(born, store, flags)
    assert len(fixture) == size + len(BODY) + len(TOPIC) + len(PROPS)
    assert encode_like(born, store, 0) == fixture  # host bits come from the host lengths
    assert record_size(flags, len(BODY), len(TOPIC), len(PROPS)) == len(fixture)
    record = decode_record(fixture, expected_offset=1000)
    assert isinstance(record, MessageRecord)
    assert record.total_size == len(fixture)
    assert record.magic_code == MESSAGE_MAGIC_CODE
    assert record.body_crc == zlib.crc32(BODY) & 0x7FFFFFFF
    assert (record.queue_id, record.flag, record.queue_offset, record.physical_offset) == (3, 7, 42, 1000)
    assert record.sys_flag == flags
    assert (record.born_timestamp, record.store_timestamp) == (1_700_000_000_123, 1_700_000_000_456)
    assert record.born_host == born + i32(54321)
    assert record.store_host == store + i32(10911)
    assert (record.reconsume_times, record.prepared_transaction_offset) == (2, 0)
    assert (record.body, record.topic, record.properties) == (BODY, "TopicTest", PROPS.decode())
    assert record.tags == "TagA"
    assert record.keys == ["order-1"]
    assert record.properties_map == {"TAGS": "TagA", "KEYS": "order-1"}
    stamp_at = store_timestamp_offset(flags)
    assert struct.unpack_from(">q", fixture, stamp_at)[0] == 1_700_000_000_456


def test_host_formatting() -> None:
    record = decode_record(build_record(V6_BORN, V4_STORE, MessageSysFlag.BORNHOST_V6))
    assert isinstance(record, MessageRecord)
    assert record.born_host_address == "[2001:db8::10]:54321"
    assert record.store_host_address == "10.0.0.1:10911"
    assert parse_host_port("[::1]:80") == encode_host("::1", 80)
    assert decode_host(encode_host("1.2.3.4", 5)) == ("1.2.3.4", 5)
    assert format_host(encode_host("1.2.3.4", 5)) == "1.2.3.4:5"
    with pytest.raises(ValueError):
        parse_host_port("nohost")
    with pytest.raises(ValueError):
        encode_host("1.2.3.4", 70000)


def test_blank_marker() -> None:
    buf = bytearray(64)
    encode_blank_into(buf, 16, 48)
    assert bytes(buf[16:24]) == struct.pack(">iI", 48, 0xCBD43194)
    assert struct.unpack_from(">i", buf, 20)[0] == BLANK_MAGIC_CODE
    assert decode_record(buf, 16) == Blank(48)
    with pytest.raises(RecordFormatError, match="truncated"):
        decode_record(buf, 16, limit=40)  # claims more than is left
    encode_blank_into(buf, 16, 4)
    with pytest.raises(RecordFormatError, match="blank"):
        decode_record(buf, 16)


def test_zeros_are_end_of_data() -> None:
    with pytest.raises(RecordFormatError) as info:
        decode_record(bytes(200))
    assert info.value.is_end_of_data
    [record] = decode_records(build_record(V4_BORN, V4_STORE, 0) + bytes(100))
    assert record.topic == "TopicTest"


def corrupt(data: bytes, offset: int, value: bytes) -> bytes:
    return data[:offset] + value + data[offset + len(value):]


def test_bad_magic_rejected() -> None:
    good = build_record(V4_BORN, V4_STORE, 0)
    with pytest.raises(RecordFormatError, match="bad magic code"):
        decode_record(corrupt(good, 4, b"\xda\xa3\x20\xab"))  # the 5.x v2 magic is not ours either


def test_bad_crc_rejected() -> None:
    good = build_record(V4_BORN, V4_STORE, 0)
    body_at = good.index(BODY)
    bad = corrupt(good, body_at, b"J")
    with pytest.raises(RecordFormatError, match="CRC"):
        decode_record(bad)
    assert isinstance(decode_record(bad, check_crc=False), MessageRecord)
    with pytest.raises(RecordFormatError, match="CRC"):
        decode_record(corrupt(good, 8, i32(12345)))


def test_truncated_rejected_at_every_length() -> None:
    good = build_record(V6_BORN, V6_STORE, MessageSysFlag.BORNHOST_V6 | MessageSysFlag.STOREHOST_V6)
    for cut in range(1, len(good)):
        with pytest.raises(RecordFormatError):
            decode_record(good[:cut])


@pytest.mark.parametrize(("offset", "value", "reason"), [
    (0, i32(50), "bad total size"),
    (0, i32(1_000_000), "truncated record"),
    (84, i32(-1), "bad body length"),
    (84, i32(10_000), "bad body length"),
    (88 + len(BODY), b"\xff", "bad topic length"),
    (89 + len(BODY) + len(TOPIC), struct.pack(">h", -2), "size mismatch"),
    (89 + len(BODY) + len(TOPIC), struct.pack(">h", 3), "size mismatch"),
    (28, i64(999), "physical offset mismatch"),
])
def test_inconsistent_sizes_rejected(offset: int, value: bytes, reason: str) -> None:
    bad = corrupt(build_record(V4_BORN, V4_STORE, 0), offset, value)
    with pytest.raises(RecordFormatError) as info:
        decode_record(bad + bytes(16), limit=len(bad), expected_offset=1000)
    assert info.value.reason == reason


def test_check_record_gives_dispatch_request() -> None:
    data = bytes(1000) + build_record(V4_BORN, V4_STORE, 0)
    request = check_record(data, 1000, len(data), base_offset=0)
    assert request == DispatchRequest("TopicTest", 3, 1000, len(data) - 1000, java_string_hash("TagA"),
                                      1_700_000_000_456, 42, 0, 0)
    with pytest.raises(RecordFormatError, match="physical offset"):
        check_record(data, 1000, len(data), base_offset=8)


def test_check_record_schedule_topic_delay_level() -> None:
    raw = encode_record(topic="SCHEDULE_TOPIC_XXXX", body=b"x", properties="DELAY\x013\x02REAL_TOPIC\x01T",
                        queue_id=2)
    request = check_record(raw, 0, len(raw), base_offset=0)
    assert isinstance(request, DispatchRequest)
    assert request.delay_level == 3


def test_check_record_takes_the_last_tags_item() -> None:
    raw = encode_record(topic="T", body=b"x", properties="TAGS\x01first\x02KEYS\x01k\x02TAGS\x01last")
    request = check_record(raw, 0, len(raw), base_offset=0)
    assert isinstance(request, DispatchRequest)
    assert request.tags_code == java_string_hash("last")


def test_check_record_ignores_bad_utf8_in_properties() -> None:
    raw = encode_record(topic="T", body=b"x", properties="K\x01v").replace(b"K\x01v", b"K\x01\xff")
    assert isinstance(check_record(raw, 0, len(raw), base_offset=0), DispatchRequest)
    with pytest.raises(RecordFormatError, match="properties is not UTF-8"):
        decode_record(raw)


def test_bad_utf8_topic_rejected() -> None:
    raw = encode_record(topic="Tx", body=b"x").replace(b"Tx", b"T\xff")
    for decode in (lambda: decode_record(raw), lambda: check_record(raw, 0, len(raw), base_offset=0)):
        with pytest.raises(RecordFormatError, match="topic is not UTF-8"):
            decode()


# -------------------------------------------------------------------------------------- pulled mode


#: A 5.x record (magic v2: TOPICLENGTH is a short) written out field by field.
V2_RECORD = bytes.fromhex(
    "00000061"  # TOTALSIZE = 88 header + body 2 + topic length 2 + topic 1 + properties length 2 + 2 = 97
    "DAA320AB"  # MAGICCODE v2
    "00000000"  # BODYCRC
    "00000001"  # QUEUEID 1
    "00000000"  # FLAG
    "0000000000000005"  # QUEUEOFFSET 5
    "0000000000000064"  # PHYSICALOFFSET 100
    "00000000"  # SYSFLAG
    "0000000000000001"  # BORNTIMESTAMP
    "7F000001" "00000001"  # BORNHOST 127.0.0.1:1
    "0000000000000002"  # STORETIMESTAMP
    "7F000001" "00000002"  # STOREHOST 127.0.0.1:2
    "00000000"  # RECONSUMETIMES
    "0000000000000000"  # PREPARED TRANSACTION OFFSET
    "00000002" "6869"  # BODY "hi"
    "0001" "54"  # TOPIC "T", a 2-byte length
    "0002" "4B01"  # PROPERTIES "K\x01"
)  # fmt: skip


def _pulled(data: bytes) -> RecordParts:
    return locate_record(data, 0, len(data), False, None, True)


def test_pulled_mode_reads_the_v2_record() -> None:
    fields, body_start, body_end, topic_start, props_start = _pulled(V2_RECORD)
    assert fields[0] == len(V2_RECORD) == 97
    assert (fields[3], fields[5], fields[6]) == (1, 5, 100)
    assert V2_RECORD[body_start:body_end] == b"hi"
    assert V2_RECORD[topic_start:props_start - 2] == b"T"
    assert V2_RECORD[props_start:] == b"K\x01"
    with pytest.raises(RecordFormatError, match="bad magic code"):
        decode_record(V2_RECORD)  # never in a commit-log file of ours
    long_topic = V2_RECORD[:-7] + struct.pack(">h", 300) + b"t" * 300 + V2_RECORD[-4:]
    long_topic = struct.pack(">i", len(long_topic)) + long_topic[4:]
    assert _pulled(long_topic)[0][0] == len(long_topic)


def test_pulled_mode_has_no_blank_or_zeros_end() -> None:
    blank = bytearray(200)
    encode_blank_into(blank, 0, 200)
    assert decode_record(bytes(blank)) == Blank(200)
    with pytest.raises(RecordFormatError, match="bad magic code"):
        _pulled(bytes(blank))
    with pytest.raises(RecordFormatError, match="bad magic code"):
        _pulled(bytes(blank[:8]))
    with pytest.raises(RecordFormatError, match="bad magic code"):
        _pulled(bytes(200))
    with pytest.raises(RecordFormatError, match="truncated record"):
        _pulled(bytes(3))


@pytest.mark.parametrize(("data", "reason"), [
    (b"\x00\x00\x00", RecordFormatError.END_OF_DATA),
    (b"\x00\x00\x01", "truncated record"),
    (struct.pack(">iI", 20, 0xDAA320A7) + bytes(12), "bad total size"),
    (struct.pack(">iI", 95, 0xDAA320A7) + bytes(60), "truncated record"),
    (struct.pack(">iI", 95, 0x12345678) + bytes(60), "bad magic code"),
    (struct.pack(">iI", 4, BLANK_MAGIC_CODE & 0xFFFFFFFF), "bad blank marker size"),
    (struct.pack(">iI", 9, BLANK_MAGIC_CODE & 0xFFFFFFFF), "truncated record"),
])
def test_short_buffers(data: bytes, reason: str) -> None:
    with pytest.raises(RecordFormatError) as info:
        decode_record(data)
    assert info.value.reason == reason


def test_message_id_reference_example() -> None:
    host = encode_host("192.168.58.128", 10911)
    assert message_id(host, 0xBBEA) == "C0A83A8000002A9F000000000000BBEA"
    assert decode_message_id("C0A83A8000002A9F000000000000BBEA") == ("192.168.58.128", 10911, 0xBBEA)
    v6 = message_id(encode_host("::1", 10911), 5)
    assert len(v6) == 56
    assert decode_message_id(v6) == ("::1", 10911, 5)
    with pytest.raises(ValueError):
        decode_message_id("ABC")


hosts = st.one_of(
    st.ip_addresses(v=4).map(lambda a: a.packed), st.ip_addresses(v=6).map(lambda a: a.packed),
).flatmap(lambda ip: st.integers(0, 65535).map(lambda port: ip + struct.pack(">i", port)))
prop_text = st.text(st.characters(codec="utf-8", exclude_characters="\x01\x02"), max_size=20)


@settings(max_examples=200, deadline=None)
@given(
    body=st.binary(max_size=3000),
    topic=st.text(st.characters(codec="utf-8"), min_size=1, max_size=40).filter(
        lambda t: len(t.encode()) <= 127),
    props=st.dictionaries(prop_text.filter(bool), prop_text, max_size=5),
    queue_id=st.integers(0, 2**31 - 1),
    flag=st.integers(-(2**31), 2**31 - 1),
    queue_offset=st.integers(0, 2**62),
    physical_offset=st.integers(0, 2**62),
    sys_flag=st.integers(0, 0xFF),
    stamps=st.tuples(st.integers(0, 2**50), st.integers(0, 2**50)),
    born_host=hosts,
    store_host=hosts,
    reconsume=st.integers(0, 1000),
)
def test_round_trip(body: bytes, topic: str, props: dict[str, str], queue_id: int, flag: int, queue_offset: int,
                    physical_offset: int, sys_flag: int, stamps: tuple[int, int], born_host: bytes,
                    store_host: bytes, reconsume: int) -> None:
    properties = encode_properties(props)
    raw = encode_record(topic=topic, body=body, properties=properties, queue_id=queue_id, flag=flag,
                        queue_offset=queue_offset, physical_offset=physical_offset, sys_flag=sys_flag,
                        born_timestamp=stamps[0], born_host=born_host, store_timestamp=stamps[1],
                        store_host=store_host, reconsume_times=reconsume)
    record = decode_record(raw + b"\x00" * 7, limit=len(raw))
    assert isinstance(record, MessageRecord)
    assert (record.topic, record.body, record.properties) == (topic, body, properties)
    assert (record.queue_id, record.flag, record.queue_offset, record.physical_offset) == (
        queue_id, flag, queue_offset, physical_offset)
    assert (record.born_host, record.store_host) == (born_host, store_host)
    assert record.sys_flag & ~0x30 == sys_flag & ~0x30
    assert (record.born_timestamp, record.store_timestamp, record.reconsume_times) == (*stamps, reconsume)
    assert record.properties_map == props


# ---------------------------------------------------------------------------- good path and explanation

_FIRST = encode_record(topic="T", body=b"abc", properties="TAGS\x01a", physical_offset=0)
_SECOND = encode_record(topic="Topic2", body=b"", physical_offset=len(_FIRST), born_host=encode_host("::1", 1))
_SAMPLES = _FIRST + _SECOND + V2_RECORD + struct.pack(">iI", 40, BLANK_MAGIC_CODE & 0xFFFFFFFF) + bytes(32)
_STARTS = [0, len(_FIRST), len(_FIRST) + len(_SECOND), len(_FIRST) + len(_SECOND) + len(V2_RECORD), 5]


def _outcome(call: Callable[[], object]) -> object:
    try:
        return call()
    except RecordFormatError as exc:
        return exc.reason


@settings(max_examples=600, deadline=None)
@given(
    flips=st.lists(st.tuples(st.integers(0, len(_SAMPLES) - 1), st.integers(0, 255)), max_size=4),
    pos=st.sampled_from(_STARTS),
    cut=st.integers(0, len(_SAMPLES)),
    pulled=st.booleans(),
    check_crc=st.booleans(),
    expect=st.booleans(),
)
def test_the_good_path_and_the_explanation_agree(flips: list[tuple[int, int]], pos: int, cut: int, pulled: bool,
                                                  check_crc: bool, expect: bool) -> None:
    """locate_record's good path accepts exactly what the rule-by-rule explanation accepts, with the same
    result, and everything else gets the explanation's reason."""
    buf = bytearray(_SAMPLES)
    for at, value in flips:
        buf[at] = value
    limit = max(pos, min(cut, len(buf))) if cut else len(buf)
    expected = pos if expect else None
    fast = _outcome(lambda: locate_record(bytes(buf), pos, limit, check_crc, expected, pulled))
    slow = _outcome(lambda: _explain(bytes(buf), pos, limit, check_crc, expected, pulled))
    assert fast == slow
