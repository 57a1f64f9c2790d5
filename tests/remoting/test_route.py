"""Route and registration bodies: byte-exact against reference §3, both key forms, compressed, msgpack."""

from __future__ import annotations

import contextlib
import json
import struct
import zlib

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pocketmq.common.topic_config import DataVersion, TopicConfig
from pocketmq.remoting import route as rd
from pocketmq.remoting.codes import SerializeType
from pocketmq.remoting.route import (
    BodyDecodeError,
    BrokerData,
    ClusterInfo,
    KVTable,
    QueueData,
    RegisterBrokerBody,
    TopicConfigSerializeWrapper,
    TopicList,
    TopicRouteData,
)

# Reference §3.1, as one line.
ROUTE_UNQUOTED = (
    b'{"brokerDatas":[{"brokerAddrs":{0:"10.0.0.1:10911",1:"10.0.0.2:10911"},"brokerName":"broker-a",'
    b'"cluster":"DefaultCluster"}],"filterServerTable":{},"orderTopicConf":"broker-a:4;broker-b:4",'
    b'"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}]}'
)
ROUTE_QUOTED = ROUTE_UNQUOTED.replace(b"{0:", b'{"0":').replace(b',1:"', b',"1":"')

# Reference §3.2, as one line.
REGISTER_BODY = (
    b'{"filterServerList":[],"topicConfigSerializeWrapper":{"dataVersion":{"counter":12,"timestamp":1690000000000},'
    b'"topicConfigTable":{"T":{"order":false,"perm":6,"readQueueNums":4,"topicFilterType":"SINGLE_TAG",'
    b'"topicName":"T","topicSysFlag":0,"writeQueueNums":4}}}}'
)


def example_route() -> TopicRouteData:
    return TopicRouteData(
        queue_datas=[QueueData("broker-a", 4, 4, 6, 0)],
        broker_datas=[BrokerData("DefaultCluster", "broker-a", {0: "10.0.0.1:10911", 1: "10.0.0.2:10911"})],
        order_topic_conf="broker-a:4;broker-b:4",
    )


def example_register_body() -> RegisterBrokerBody:
    wrapper = TopicConfigSerializeWrapper(
        {"T": TopicConfig("T", read_queue_nums=4, write_queue_nums=4)}, DataVersion(12, 1690000000000)
    )
    return RegisterBrokerBody(wrapper, [])


# -- TopicRouteData --------------------------------------------------------------------------------------


def test_route_encodes_byte_exact_unquoted() -> None:
    assert rd.encode_route(example_route(), standard_json=False) == ROUTE_UNQUOTED


def test_route_encodes_byte_exact_quoted() -> None:
    assert rd.encode_route(example_route(), standard_json=True) == ROUTE_QUOTED
    json.loads(ROUTE_QUOTED)  # valid JSON


@pytest.mark.parametrize("body", [ROUTE_UNQUOTED, ROUTE_QUOTED])
def test_route_decodes_both_key_forms(body: bytes) -> None:
    assert rd.decode_route(body) == example_route()


def test_route_omits_null_order_conf_and_sorts_addrs() -> None:
    route = TopicRouteData([], [BrokerData("C", "b", {2: "h:3", 0: "h:1"})])
    assert rd.encode_route(route, standard_json=False) == (
        b'{"brokerDatas":[{"brokerAddrs":{0:"h:1",2:"h:3"},"brokerName":"b","cluster":"C"}],'
        b'"filterServerTable":{},"queueDatas":[]}'
    )


def go_client_parse_broker_addrs(body: bytes) -> dict[int, str]:
    """rocketmq-client-go's hand parser (reference §3.1): strip braces, split on ',', then the first ':'."""
    text = body.decode()
    start = text.index("{", text.index('"brokerAddrs":')) + 1
    inner = text[start : text.index("}", start)]
    result: dict[int, str] = {}
    for item in inner.split(","):
        key, _, value = item.partition(":")
        try:
            broker_id = int(key)
        except ValueError:
            broker_id = 0  # the Go client ignores the parse error (older versions keep quotes on keys)
        result[broker_id] = value.strip('"')
    return result


def test_unquoted_form_satisfies_the_go_client_parser() -> None:
    body = rd.encode_route(example_route(), standard_json=False)
    assert b" " not in body
    assert go_client_parse_broker_addrs(body) == {0: "10.0.0.1:10911", 1: "10.0.0.2:10911"}
    # What Python's default separators would do to the Go client: every id collapses to 0.
    spaced = json.dumps({"brokerAddrs": {"0": "10.0.0.1:10911", "1": "10.0.0.2:10911"}}).encode()
    assert list(go_client_parse_broker_addrs(spaced)) == [0]
    # And older Go clients, which keep the quotes on keys, need the unquoted form even when compact.
    quoted = rd.encode_route(example_route(), standard_json=True)
    assert list(go_client_parse_broker_addrs(quoted)) == [0]


def test_route_decode_is_tolerant() -> None:
    body = (
        b'{"brokerDatas":[{"brokerAddrs":{"0":"a:1",1:"b:2"},"brokerName":"bk","cluster":"C",'
        b'"enableActingMaster":false}],"queueDatas":[{"brokerName":"bk","perm":"6","readQueueNums":2,'
        b'"topicSynFlag":3,"writeQueueNums":2}],"orderTopicConf":null}'
    )
    route = rd.decode_route(body)
    assert route == TopicRouteData(
        [QueueData("bk", 2, 2, 6, 3)], [BrokerData("C", "bk", {0: "a:1", 1: "b:2"})], None, {}
    )


@pytest.mark.parametrize(
    "body",
    [
        b"not json",
        b"[]",
        b'{"queueDatas":{}}',
        b'{"queueDatas":[{"perm":6}]}',
        b'{"queueDatas":[{"brokerName":"b","perm":true}]}',
        b'{"brokerDatas":[{"brokerName":"b","brokerAddrs":{"x":"a:1"}}]}',
        b'{"brokerDatas":[{"brokerName":"b","brokerAddrs":{0:7}}]}',
        b'{"filterServerTable":{"a":"b"}}',
        b"",
        b"null",
    ],
)
def test_route_decode_rejects_bad_bodies(body: bytes) -> None:
    with pytest.raises(BodyDecodeError):
        rd.decode_route(body)


def test_route_copy_is_deep() -> None:
    original = example_route()
    original.filter_server_table["x"] = ["f"]
    clone = original.copy()
    clone.broker_datas[0].broker_addrs[0] = "changed"
    clone.queue_datas[0].perm = 2
    clone.filter_server_table["x"].append("g")
    assert original == TopicRouteData(
        example_route().queue_datas, example_route().broker_datas, "broker-a:4;broker-b:4", {"x": ["f"]}
    )


def test_broker_data_address_selection() -> None:
    data = BrokerData("C", "b", {1: "s:1", 0: "m:1"})
    assert data.master_addr() == "m:1"
    assert data.select_broker_addr() == "m:1"
    slaves_only = BrokerData("C", "b", {1: "s:1", 2: "s:2"})
    assert slaves_only.master_addr() is None
    assert slaves_only.select_broker_addr() in {"s:1", "s:2"}
    assert BrokerData("C", "b", {}).select_broker_addr() is None


# -- msgpack ---------------------------------------------------------------------------------------------


def test_route_msgpack_keeps_int_keys() -> None:
    body = rd.encode_route(example_route(), standard_json=False, serialize_type=SerializeType.MSGPACK)
    raw = msgpack.unpackb(body, strict_map_key=False)
    assert raw["brokerDatas"][0]["brokerAddrs"] == {0: "10.0.0.1:10911", 1: "10.0.0.2:10911"}
    assert rd.decode_route(body, SerializeType.MSGPACK) == example_route()


def test_encode_decode_body_pick_codec_by_serialize_type() -> None:
    obj = {"table": {"k": "v"}, "ids": {3: "x"}}
    for serialize_type in (SerializeType.JSON, SerializeType.ROCKETMQ, SerializeType.MSGPACK):
        assert rd.decode_body(rd.encode_body(obj, serialize_type), serialize_type) == obj
    assert rd.encode_body(obj, SerializeType.JSON) == b'{"table":{"k":"v"},"ids":{3:"x"}}'
    assert (
        rd.encode_body(obj, SerializeType.ROCKETMQ, standard_json=True)
        == b'{"table":{"k":"v"},"ids":{"3":"x"}}'
    )
    assert rd.encode_body(obj, SerializeType.MSGPACK) == msgpack.packb(obj)


@pytest.mark.parametrize("body", [b"\xc1", b"\x92\x01", b"\x81\xa1a\x01extra"])
def test_bad_msgpack_body_raises_named_error(body: bytes) -> None:
    with pytest.raises(BodyDecodeError):
        rd.decode_route(body, SerializeType.MSGPACK)


# -- ClusterInfo and small shapes ------------------------------------------------------------------------


def example_cluster_info() -> ClusterInfo:
    return ClusterInfo(
        broker_addr_table={
            "broker-a": BrokerData("C", "broker-a", {0: "10.0.0.1:10911", 1: "10.0.0.2:10911"}),
            "broker-b": BrokerData("C", "broker-b", {0: "10.0.0.3:10911"}),
        },
        cluster_addr_table={"C": {"broker-b", "broker-a"}},
    )


def test_cluster_info_encodes_unquoted_by_default() -> None:
    assert rd.encode_cluster_info(example_cluster_info()) == (
        b'{"brokerAddrTable":{"broker-a":{"brokerAddrs":{0:"10.0.0.1:10911",1:"10.0.0.2:10911"},'
        b'"brokerName":"broker-a","cluster":"C"},"broker-b":{"brokerAddrs":{0:"10.0.0.3:10911"},'
        b'"brokerName":"broker-b","cluster":"C"}},"clusterAddrTable":{"C":["broker-a","broker-b"]}}'
    )


@pytest.mark.parametrize("serialize_type", [SerializeType.JSON, SerializeType.MSGPACK])
@pytest.mark.parametrize("standard_json", [False, True])
def test_cluster_info_round_trip(serialize_type: int, standard_json: bool) -> None:
    info = example_cluster_info()
    body = rd.encode_cluster_info(info, standard_json=standard_json, serialize_type=serialize_type)
    assert rd.decode_cluster_info(body, serialize_type) == info


def test_topic_list_and_kv_table_shapes() -> None:
    assert rd.encode_body(TopicList(["A", "B"]).to_json_dict()) == b'{"topicList":["A","B"]}'
    assert TopicList.from_json_dict({"topicList": ["A"], "brokerAddr": "h:1"}) == TopicList(["A"], "h:1")
    table = KVTable({"TopicA": "broker-a:4"})
    assert rd.encode_body(table.to_json_dict()) == b'{"table":{"TopicA":"broker-a:4"}}'
    assert KVTable.from_json_dict(rd.decode_body(b'{"table":{"TopicA":"broker-a:4"}}')) == table


def test_model_shape_errors_become_body_decode_errors() -> None:
    bad_filter = b'{"topicConfigTable":{"T":{"topicName":"T","topicFilterType":"REGEX"}},"dataVersion":{}}'
    with pytest.raises(BodyDecodeError, match="topicFilterType"):
        rd.decode_register_body(bad_filter, compressed=False, version=36)
    with pytest.raises(BodyDecodeError, match=r"topicConfig\.order"):
        TopicConfigSerializeWrapper.from_json_dict({"topicConfigTable": {"T": {"order": 5}}})
    with pytest.raises(BodyDecodeError, match=r"dataVersion\.counter"):
        rd.decode_data_version(b'{"counter":"x"}')
    with pytest.raises(BodyDecodeError, match=r"queueData\.perm"):
        QueueData.from_json_dict({"brokerName": "b", "perm": True})


def test_query_data_version_body() -> None:
    assert rd.decode_data_version(b'{"counter":3,"timestamp":1690000000000}') == DataVersion(3, 1690000000000)
    assert rd.decode_data_version(None) == DataVersion(0, 0)
    assert rd.decode_data_version(b"null") == DataVersion(0, 0)
    body = rd.encode_body(DataVersion(3, 5).to_json_dict(), SerializeType.MSGPACK)
    assert rd.decode_data_version(body, SerializeType.MSGPACK) == DataVersion(3, 5)


# -- RegisterBrokerBody ----------------------------------------------------------------------------------


def test_register_body_encodes_byte_exact() -> None:
    assert rd.encode_register_body(example_register_body()) == REGISTER_BODY


def test_register_body_decodes_reference_example() -> None:
    decoded = rd.decode_register_body(REGISTER_BODY, compressed=False, version=401)
    assert decoded == example_register_body()


def test_register_body_before_v3_0_11_is_a_bare_wrapper() -> None:
    body = example_register_body()
    old = rd.encode_register_body(body, version=36)
    assert old == (
        b'{"dataVersion":{"counter":12,"timestamp":1690000000000},"topicConfigTable":{"T":{"order":false,'
        b'"perm":6,"readQueueNums":4,"topicFilterType":"SINGLE_TAG","topicName":"T","topicSysFlag":0,'
        b'"writeQueueNums":4}}}'
    )
    assert rd.decode_register_body(old, compressed=False, version=36) == body


@pytest.mark.parametrize("body", [b"", None])
def test_empty_register_body_means_version_zero(body: bytes | None) -> None:
    decoded = rd.decode_register_body(body, compressed=False, version=401)
    assert decoded == RegisterBrokerBody(TopicConfigSerializeWrapper({}, DataVersion(0, 0)), [])


def test_register_body_msgpack_round_trip() -> None:
    body = example_register_body()
    data = rd.encode_register_body(body, serialize_type=SerializeType.MSGPACK)
    assert (
        rd.decode_register_body(data, compressed=False, version=401, serialize_type=SerializeType.MSGPACK)
        == body
    )


def compressed_stream(version_json: bytes, topics: list[bytes], filters_json: bytes) -> bytes:
    def chunk(data: bytes) -> bytes:
        return struct.pack(">i", len(data)) + data

    return (
        chunk(version_json)
        + struct.pack(">i", len(topics))
        + b"".join(map(chunk, topics))
        + chunk(filters_json)
    )


def test_compressed_register_body_layout() -> None:
    body = RegisterBrokerBody(
        TopicConfigSerializeWrapper(
            {
                "T": TopicConfig("T", 4, 4, 6),
                "TBW102": TopicConfig("TBW102", 8, 8, 7, "MULTI_TAG"),
            },
            DataVersion(12, 1690000000000),
        ),
        ["10.0.0.9:4000"],
    )
    data = rd.encode_register_body(body, compressed=True)
    expected = compressed_stream(
        b'{"counter":12,"timestamp":1690000000000}',
        [b"T 4 4 6 SINGLE_TAG", b"TBW102 8 8 7 MULTI_TAG"],
        b'["10.0.0.9:4000"]',
    )
    assert zlib.decompress(data) == expected
    assert rd.decode_register_body(data, compressed=True, version=401) == body


def test_compressed_form_drops_sys_flag_and_order() -> None:
    wrapper = TopicConfigSerializeWrapper(
        {"O": TopicConfig("O", 2, 2, 6, topic_sys_flag=3, order=True)}, DataVersion()
    )
    data = rd.encode_register_body(RegisterBrokerBody(wrapper, []), compressed=True)
    decoded = rd.decode_register_body(data, compressed=True, version=401)
    assert decoded.topic_config_wrapper.topic_config_table == {"O": TopicConfig("O", 2, 2, 6)}


def test_compressed_decode_accepts_extra_fields_of_newer_brokers() -> None:
    stream = compressed_stream(b'{"counter":1,"timestamp":2}', [b'T 1 1 6 SINGLE_TAG {"k":"v"}'], b"[]")
    decoded = rd.decode_register_body(zlib.compress(stream), compressed=True, version=401)
    assert decoded.topic_config_wrapper.topic_config_table == {"T": TopicConfig("T", 1, 1, 6)}


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"\x00\x00",
        struct.pack(">i", -1),
        struct.pack(">i", 100) + b"{}",
        compressed_stream(b"{}", [b"T 1 1"], b"[]"),
        compressed_stream(b"{}", [b"T 1 x 6 SINGLE_TAG"], b"[]"),
        compressed_stream(b"{}", [b"T 1 1 6 NOPE"], b"[]"),
        compressed_stream(b"{}", [b"\xff 1 1 6 SINGLE_TAG"], b"[]"),
        compressed_stream(b"[]", [], b"[]"),
        compressed_stream(b"{}", [], b"{}"),
        compressed_stream(b"{}", [], b"[1]"),
        compressed_stream(b"{}", [], b"[]")[:-1],
        struct.pack(">i", 2) + b"{}" + struct.pack(">i", 2**31 - 1),
    ],
)
def test_compressed_decode_rejects_corrupt_streams(raw: bytes) -> None:
    with pytest.raises(BodyDecodeError):
        rd.decode_register_body(zlib.compress(raw), compressed=True, version=401)


def test_compressed_decode_rejects_bad_zlib_and_truncation() -> None:
    good = rd.encode_register_body(example_register_body(), compressed=True)
    for bad in (b"garbage", good[:-3], good[:5]):
        with pytest.raises(BodyDecodeError):
            rd.decode_register_body(bad, compressed=True, version=401)


def test_compressed_decode_bounds_inflated_size(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rd, "MAX_INFLATED_REGISTER_BODY", 1024)
    bomb = zlib.compress(compressed_stream(b"{}", [b"T 1 1 6 SINGLE_TAG"] * 100, b"[]"))
    with pytest.raises(BodyDecodeError, match="inflates beyond"):
        rd.decode_register_body(bomb, compressed=True, version=401)


def test_compressed_encode_refuses_names_with_spaces() -> None:
    wrapper = TopicConfigSerializeWrapper({"a b": TopicConfig("a b")}, DataVersion())
    with pytest.raises(ValueError):
        rd.encode_register_body(RegisterBrokerBody(wrapper, []), compressed=True)


def test_body_crc32_is_masked_to_a_positive_java_int() -> None:
    assert zlib.crc32(b"123456789") == 0xCBF43926
    assert rd.body_crc32(b"123456789") == 0x4BF43926
    assert rd.body_crc32(REGISTER_BODY) == zlib.crc32(REGISTER_BODY) & 0x7FFFFFFF
    assert rd.body_crc32(b"") == 0


# -- properties ------------------------------------------------------------------------------------------

_names = st.text(alphabet=st.sampled_from(list('abcXYZ019_-%|:{},"é')), min_size=1, max_size=12)
_addrs = st.builds(lambda h, p: f"{h}:{p}", _names, st.integers(1, 65535))
_ints = st.integers(0, 2**31 - 1)

_queue_data = st.builds(QueueData, _names, _ints, _ints, st.integers(0, 15), _ints)
_broker_data = st.builds(BrokerData, _names, _names, st.dictionaries(st.integers(0, 64), _addrs, max_size=4))
_routes = st.builds(
    TopicRouteData,
    st.lists(_queue_data, max_size=4),
    st.lists(_broker_data, max_size=4),
    st.none() | _names,
    st.dictionaries(_addrs, st.lists(_addrs, max_size=3), max_size=3),
)


_CODECS = [(SerializeType.JSON, False), (SerializeType.JSON, True), (SerializeType.MSGPACK, False)]


@settings(max_examples=200)
@given(_routes, st.sampled_from(_CODECS))
def test_route_round_trip(route: TopicRouteData, codec: tuple[int, bool]) -> None:
    serialize_type, standard_json = codec
    body = rd.encode_route(route, standard_json=standard_json, serialize_type=serialize_type)
    assert rd.decode_route(body, serialize_type) == route


_topic_names = st.text(alphabet=st.sampled_from(list("abcXYZ019_-%|")), min_size=1, max_size=20)
_topic_configs = st.builds(
    TopicConfig, _topic_names, _ints, _ints, st.integers(0, 15), st.sampled_from(["SINGLE_TAG", "MULTI_TAG"])
)
_register_bodies = st.builds(
    lambda configs, counter, ts, filters: RegisterBrokerBody(
        TopicConfigSerializeWrapper({c.topic_name: c for c in configs}, DataVersion(counter, ts)), filters
    ),
    st.lists(_topic_configs, max_size=10),
    _ints,
    st.integers(0, 2**62),
    st.lists(_addrs, max_size=3),
)


@settings(max_examples=150)
@given(_register_bodies, st.booleans())
def test_register_body_round_trip(body: RegisterBrokerBody, compressed: bool) -> None:
    data = rd.encode_register_body(body, compressed=compressed)
    decoded = rd.decode_register_body(data, compressed=compressed, version=401)
    assert decoded == body


@settings(max_examples=200)
@given(st.binary(max_size=200))
def test_random_compressed_bodies_only_raise_the_named_error(data: bytes) -> None:
    for body in (data, zlib.compress(data)):
        with contextlib.suppress(BodyDecodeError):
            rd.decode_register_body(body, compressed=True, version=401)
