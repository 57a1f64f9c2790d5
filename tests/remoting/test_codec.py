"""Frame and header codecs: byte literals both ways, chunking, and malformed input."""

from __future__ import annotations

import contextlib
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pocketmq.remoting.codes import LanguageCode, SerializeType
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.errors import ProtocolError
from pocketmq.remoting.frame import FrameDecoder, encode_frame

JAVA_HEADER = (
    b'{"code":105,"extFields":{"topic":"T"},"flag":0,"language":"JAVA","opaque":7,'
    b'"serializeTypeCurrentRPC":"JSON","version":401}'
)


def frame(header: bytes, body: bytes = b"", serialize_type: int = 0) -> bytes:
    return struct.pack(">II", 4 + len(header) + len(body), (serialize_type << 24) | len(header)) + header + body


def decode_all(data: bytes) -> list[RemotingCommand]:
    return FrameDecoder().feed(data)


def test_decodes_java_json_request() -> None:
    [cmd] = decode_all(frame(JAVA_HEADER, b"body"))
    assert cmd.code == 105
    assert cmd.opaque == 7
    assert cmd.language == LanguageCode.JAVA
    assert cmd.version == 401
    assert cmd.ext_fields == {"topic": "T"}
    assert cmd.remark is None
    assert cmd.body == b"body"
    assert not cmd.is_response and not cmd.is_oneway


def test_encodes_json_exactly_as_java_does() -> None:
    cmd = RemotingCommand(
        105, opaque=7, ext_fields={"topic": "T"}, language=LanguageCode.JAVA, version=401
    )
    assert encode_frame(cmd) == frame(JAVA_HEADER)


def test_json_response_carries_remark_and_flag() -> None:
    request = RemotingCommand(105, opaque=9, ext_fields={"topic": "X"})
    response = request.response(17, "No topic route info in name server for the topic: X")
    data = encode_frame(response)
    header = (
        b'{"code":17,"flag":1,"language":"JAVA","opaque":9,'
        b'"remark":"No topic route info in name server for the topic: X",'
        b'"serializeTypeCurrentRPC":"JSON","version":401}'
    )
    assert data == frame(header)


def test_json_quirks_of_third_party_clients() -> None:
    header = b'{"opaque":0,"code":34,"language":"CPP","version":63,"flag":0,"remark":"",' \
             b'"extFields":{"queueId":0,"k":false,"commitOffset":-1,"topic":"T"}}\n'
    [cmd] = decode_all(frame(header))
    assert cmd.opaque == 0
    assert cmd.language == LanguageCode.CPP
    assert cmd.ext_fields == {"queueId": "0", "k": "false", "commitOffset": "-1", "topic": "T"}
    [cmd] = decode_all(frame(b'{"code":34,"extFields":null,"language":3,"opaque":1,"flag":2}'))
    assert cmd.ext_fields is None and cmd.is_oneway and cmd.language == LanguageCode.PYTHON


def test_rocketmq_binary_header_both_ways() -> None:
    ext = b"\x00\x05topic\x00\x00\x00\x01T"
    header = (
        struct.pack(">hBhii", 105, 0, 401, 7, 1)
        + struct.pack(">i", 2) + b"ok"
        + struct.pack(">i", len(ext)) + ext
    )
    [cmd] = decode_all(frame(header, b"xy", serialize_type=1))
    assert (cmd.code, cmd.opaque, cmd.flag, cmd.remark, cmd.version) == (105, 7, 1, "ok", 401)
    assert cmd.ext_fields == {"topic": "T"}
    assert cmd.serialize_type == SerializeType.ROCKETMQ
    assert encode_frame(cmd) == frame(header, b"xy", serialize_type=1)


def test_rocketmq_binary_header_without_remark_and_fields() -> None:
    header = struct.pack(">hBhiiii", 34, 3, 401, 1, 0, 0, 0)
    [cmd] = decode_all(frame(header, serialize_type=1))
    assert cmd.remark is None and cmd.ext_fields is None and cmd.body is None
    assert encode_frame(cmd) == frame(header, serialize_type=1)


def test_msgpack_header_both_ways() -> None:
    cmd = RemotingCommand(310, opaque=3, ext_fields={"b": "T", "e": "1"}, body=b"m",
                          serialize_type=SerializeType.MSGPACK)
    data = encode_frame(cmd)
    header = b"\x97\xcd\x016\x03\xcd\x01\x91\x03\x00\xc0\x82\xa1b\xa1T\xa1e\xa11"
    assert data == frame(header, b"m", serialize_type=SerializeType.MSGPACK)
    [back] = decode_all(data)
    assert back == cmd


@pytest.mark.parametrize("serialize_type", list(SerializeType))
def test_split_at_every_byte_position(serialize_type: int) -> None:
    cmds = [
        RemotingCommand(i, opaque=i, ext_fields={"k": "v" * i}, body=b"b" * (i * 7),
                        remark="r" if i % 2 else None, serialize_type=serialize_type)
        for i in range(1, 4)
    ]
    stream = b"".join(encode_frame(c) for c in cmds)
    for cut in range(len(stream) + 1):
        decoder = FrameDecoder()
        got = decoder.feed(stream[:cut]) + decoder.feed(stream[cut:])
        assert got == cmds, cut
        assert decoder.buffered == 0


def test_byte_by_byte_feed() -> None:
    cmd = RemotingCommand(11, opaque=5, ext_fields={"topic": "T"}, body=bytes(range(256)))
    decoder = FrameDecoder()
    out: list[RemotingCommand] = []
    for b in encode_frame(cmd):
        out += decoder.feed(bytes([b]))
    assert out == [cmd]


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (struct.pack(">II", 2, 0), "shorter than"),
        (struct.pack(">II", 17 * 1024 * 1024, 0), "exceeds the maximum"),
        (struct.pack(">II", 10, 20) + b"x" * 6, "longer than the frame"),
        (struct.pack(">II", 6, (9 << 24) | 2) + b"{}", "unknown serialize type"),
        (frame(b"{not json"), "undecodable JSON"),
        (frame(b"[1,2]"), "not an object"),
        (frame(b'{"code":"x"}'), "must be an integer"),
        (frame(b'{"code":1,"extFields":[1]}'), "extFields must be an object"),
        (frame(b"\x00\x01", serialize_type=1), "too short"),
        (frame(b"\xc1", serialize_type=SerializeType.MSGPACK), "undecodable msgpack"),
        (frame(b"\x93\x01\x02\x03", serialize_type=SerializeType.MSGPACK), "7-element array"),
    ],
)
def test_malformed_frames_raise_the_protocol_error(data: bytes, reason: str) -> None:
    decoder = FrameDecoder()
    with pytest.raises(ProtocolError, match=reason):
        decoder.feed(data)
    with pytest.raises(ProtocolError):  # poisoned: framing cannot be recovered
        decoder.feed(frame(JAVA_HEADER))


def test_binary_header_with_lengths_past_its_end() -> None:
    header = struct.pack(">hBhiiii", 34, 3, 401, 1, 0, 100, 0)
    with pytest.raises(ProtocolError, match="runs past"):
        decode_all(frame(header, serialize_type=1))


def test_configurable_max_frame() -> None:
    data = encode_frame(RemotingCommand(10, body=b"x" * 2000))
    with pytest.raises(ProtocolError, match="exceeds"):
        FrameDecoder(max_frame_length=1024).feed(data)


def _valid_stream() -> bytes:
    return b"".join(
        encode_frame(RemotingCommand(c, opaque=c, ext_fields={"a": "1"}, body=b"xy", serialize_type=t))
        for c, t in ((10, 0), (11, 1), (12, SerializeType.MSGPACK))
    )


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=300))
def test_random_bytes_only_raise_protocol_error(data: bytes) -> None:
    with contextlib.suppress(ProtocolError):
        FrameDecoder(max_frame_length=4096).feed(data)


@settings(max_examples=400, deadline=None)
@given(st.data())
def test_mutated_frames_only_raise_protocol_error(data: st.DataObject) -> None:
    stream = bytearray(_valid_stream())
    for _ in range(data.draw(st.integers(1, 6))):
        pos = data.draw(st.integers(0, len(stream) - 1))
        stream[pos] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(stream)))
    decoder = FrameDecoder(max_frame_length=4096)
    try:
        decoder.feed(bytes(stream[:cut]))
        decoder.feed(bytes(stream[cut:]))
    except ProtocolError:
        pass


text = st.text(max_size=20)


@settings(max_examples=200, deadline=None)
@given(
    code=st.integers(0, 32767),
    opaque=st.integers(-(2**31), 2**31 - 1),
    flag=st.integers(0, 3),
    remark=st.none() | st.text(min_size=1, max_size=30),
    ext=st.none() | st.dictionaries(st.text(min_size=1, max_size=10), text, max_size=5),
    body=st.binary(max_size=64),
    serialize_type=st.sampled_from(list(SerializeType)),
)
def test_round_trip_every_codec(code: int, opaque: int, flag: int, remark: str | None,
                                ext: dict[str, str] | None, body: bytes, serialize_type: int) -> None:
    cmd = RemotingCommand(code, opaque=opaque, flag=flag, remark=remark, ext_fields=ext, body=body or None,
                          serialize_type=serialize_type)
    [back] = FrameDecoder().feed(encode_frame(cmd))
    if serialize_type == SerializeType.ROCKETMQ and ext == {}:
        ext = None  # the binary form cannot tell an empty map from none
    assert back == RemotingCommand(code, opaque=opaque, flag=flag, remark=remark, ext_fields=ext,
                                   body=body or None, serialize_type=serialize_type)
