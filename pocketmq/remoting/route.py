"""Route and registration bodies shared by the name server, the broker and the client; the
topic configs and data versions inside them are the model's (:mod:`pocketmq.common.topic_config`).

Every shape has ``to_json_dict()`` (Java's field names, keys in fastjson's alphabetical order, ``None``
fields left out) and a tolerant ``from_json_dict()`` (old spellings such as ``topicSynFlag``, ``int`` or
``str`` ids in ``brokerAddrs``, enum ordinals or names, missing optional fields; the readers of
:mod:`pocketmq.common.fields`), raising :class:`BodyDecodeError` for a body of the wrong shape. The dicts hold only
``str``/``int``/``bool``/``list``/``dict`` values, so they serialise to JSON with :mod:`pocketmq.remoting.fastjson`
and to msgpack alike (:func:`encode_body` / :func:`decode_body`).

``TopicRouteData`` (response of GET_ROUTEINFO_BY_TOPIC, 105), compact, keys sorted::

    {"brokerDatas":[{"brokerAddrs":{0:"10.0.0.1:10911",1:"10.0.0.2:10911"},"brokerName":"broker-a",
    "cluster":"DefaultCluster"}],"filterServerTable":{},"orderTopicConf":"broker-a:4",
    "queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}]}

``brokerAddrs`` keys are unquoted unless the requester asked for standard JSON (``{"0":...}``).

``RegisterBrokerBody`` (request body of REGISTER_BROKER, 103) is plain JSON for request version >= 37
(:data:`REGISTER_BODY_MIN_VERSION`), a bare ``TopicConfigSerializeWrapper`` below that, or — with the
header's ``compressed=true`` — a zlib stream (big-endian ``i32`` lengths) of::

    len:i32 · DataVersion JSON
    topicCount:i32
    topicCount times: len:i32 · "name read write perm filterType"   (space separated, UTF-8)
    len:i32 · filterServerList JSON

The compressed form carries neither ``topicSysFlag`` nor ``order``; they decode as 0 and ``False``.
"""

from __future__ import annotations

import functools
import random
import struct
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ParamSpec, TypeVar

import msgpack

from pocketmq.common.errors import FieldFormatError
from pocketmq.common.fields import as_dict, as_int, as_list, as_opt_str, as_str, as_str_list, pick
from pocketmq.common.inflate import InflateError, inflate_bounded
from pocketmq.common.topic_config import DataVersion, TopicConfig
from pocketmq.remoting import fastjson
from pocketmq.remoting.codes import ROCKETMQ_VERSION, SerializeType
from pocketmq.remoting.errors import PocketMQError

__all__ = [
    "MASTER_ID",
    "MAX_INFLATED_REGISTER_BODY",
    "REGISTER_BODY_MIN_VERSION",
    "BodyDecodeError",
    "BrokerData",
    "ClusterInfo",
    "KVTable",
    "QueueData",
    "RegisterBrokerBody",
    "TopicConfigSerializeWrapper",
    "TopicList",
    "TopicRouteData",
    "body_crc32",
    "decode_body",
    "decode_cluster_info",
    "decode_data_version",
    "decode_register_body",
    "decode_route",
    "encode_body",
    "encode_cluster_info",
    "encode_register_body",
    "encode_route",
    "peek_compressed_data_version",
]

#: brokerId of a master; slaves have ids >= 1.
MASTER_ID = 0

#: Request version (``MQVersion`` V3_0_11) from which REGISTER_BROKER carries a ``RegisterBrokerBody``.
REGISTER_BODY_MIN_VERSION = 37

#: Largest inflated compressed register body we accept: a frame is at most 16 MiB, but deflate can expand
#: it a thousandfold; a real broker's topic table (~50 bytes per topic) stays far below this.
MAX_INFLATED_REGISTER_BODY = 64 * 1024 * 1024

_INT32 = struct.Struct(">i")
_P = ParamSpec("_P")
_T = TypeVar("_T")


class BodyDecodeError(PocketMQError, ValueError):
    """A request or response body does not have the expected shape."""


def _decoding(fn: Callable[_P, _T]) -> Callable[_P, _T]:
    """Raise the model's :class:`~pocketmq.common.errors.FieldFormatError` (a field of the wrong shape, found by the
    :mod:`pocketmq.common.fields` readers) as this layer's :class:`BodyDecodeError`, which carries a response code."""

    @functools.wraps(fn)
    def decoding(*args: _P.args, **kwargs: _P.kwargs) -> _T:
        try:
            return fn(*args, **kwargs)
        except FieldFormatError as exc:
            raise BodyDecodeError(str(exc)) from None

    return decoding


def _root(value: Any, what: str) -> dict[Any, Any]:
    """A decoded body's top level, which must be an object (``null`` is refused too)."""
    if value is None:
        raise BodyDecodeError(f"{what}: expected an object, got null")
    return as_dict(value, what)


# -- shapes ----------------------------------------------------------------------------------------------


@dataclass(slots=True)
class QueueData:
    """One broker group's queues of one topic."""

    broker_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_sys_flag: int = 0

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "brokerName": self.broker_name,
            "perm": self.perm,
            "readQueueNums": self.read_queue_nums,
            "topicSysFlag": self.topic_sys_flag,
            "writeQueueNums": self.write_queue_nums,
        }

    @classmethod
    @_decoding
    def from_json_dict(cls, d: Mapping[str, Any]) -> QueueData:
        d = as_dict(d, "queueData")
        return cls(
            broker_name=as_str(d.get("brokerName"), "queueData.brokerName"),
            read_queue_nums=as_int(d.get("readQueueNums"), "queueData.readQueueNums", 0),
            write_queue_nums=as_int(d.get("writeQueueNums"), "queueData.writeQueueNums", 0),
            perm=as_int(d.get("perm"), "queueData.perm", 0),
            # Spelled topicSynFlag before 4.9.0, and still so in the Go client.
            topic_sys_flag=as_int(pick(d, "topicSysFlag", "topicSynFlag"), "queueData.topicSysFlag", 0),
        )

    def copy(self) -> QueueData:
        return QueueData(
            self.broker_name, self.read_queue_nums, self.write_queue_nums, self.perm, self.topic_sys_flag
        )


@dataclass(slots=True)
class BrokerData:
    """A broker group: its cluster, name and the address of each member (id 0 = master)."""

    cluster: str
    broker_name: str
    broker_addrs: dict[int, str]

    def master_addr(self) -> str | None:
        return self.broker_addrs.get(MASTER_ID)

    def select_broker_addr(self) -> str | None:
        """The master's address, else a random slave's (as Java's ``selectBrokerAddr``); None if empty."""
        master = self.broker_addrs.get(MASTER_ID)
        if master is not None:
            return master
        if not self.broker_addrs:
            return None
        return random.choice(list(self.broker_addrs.values()))

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "brokerAddrs": {
                broker_id: self.broker_addrs[broker_id] for broker_id in sorted(self.broker_addrs)
            },
            "brokerName": self.broker_name,
            "cluster": self.cluster,
        }

    @classmethod
    @_decoding
    def from_json_dict(cls, d: Mapping[str, Any]) -> BrokerData:
        d = as_dict(d, "brokerData")
        addrs = {
            as_int(key, "brokerData.brokerAddrs key"): as_str(addr, "brokerData.brokerAddrs value")
            for key, addr in as_dict(d.get("brokerAddrs"), "brokerData.brokerAddrs").items()
        }
        return cls(
            cluster=as_str(pick(d, "cluster") or "", "brokerData.cluster"),
            broker_name=as_str(d.get("brokerName"), "brokerData.brokerName"),
            broker_addrs=addrs,
        )

    def copy(self) -> BrokerData:
        return BrokerData(self.cluster, self.broker_name, dict(self.broker_addrs))


@dataclass(slots=True)
class TopicRouteData:
    """Where a topic lives: its queues per broker group and the groups' addresses."""

    queue_datas: list[QueueData]
    broker_datas: list[BrokerData]
    order_topic_conf: str | None = None
    filter_server_table: dict[str, list[str]] = field(default_factory=dict)

    def to_json_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "brokerDatas": [b.to_json_dict() for b in self.broker_datas],
            "filterServerTable": {addr: list(servers) for addr, servers in self.filter_server_table.items()},
        }
        if self.order_topic_conf is not None:
            d["orderTopicConf"] = self.order_topic_conf
        d["queueDatas"] = [q.to_json_dict() for q in self.queue_datas]
        return d

    @classmethod
    @_decoding
    def from_json_dict(cls, d: Mapping[str, Any]) -> TopicRouteData:
        d = as_dict(d, "topicRouteData")
        filters = as_dict(d.get("filterServerTable"), "filterServerTable")
        return cls(
            queue_datas=[QueueData.from_json_dict(q) for q in as_list(d.get("queueDatas"), "queueDatas")],
            broker_datas=[
                BrokerData.from_json_dict(b) for b in as_list(d.get("brokerDatas"), "brokerDatas")
            ],
            order_topic_conf=as_opt_str(d.get("orderTopicConf"), "orderTopicConf"),
            filter_server_table={
                as_str(addr, "filterServerTable key"): as_str_list(servers, "filterServerTable value")
                for addr, servers in filters.items()
            },
        )

    def copy(self) -> TopicRouteData:
        """A deep copy: callers may change it without touching the original."""
        return TopicRouteData(
            queue_datas=[q.copy() for q in self.queue_datas],
            broker_datas=[b.copy() for b in self.broker_datas],
            order_topic_conf=self.order_topic_conf,
            filter_server_table={addr: list(servers) for addr, servers in self.filter_server_table.items()},
        )


@dataclass(slots=True)
class TopicConfigSerializeWrapper:
    """A broker's whole topic table with its version."""

    topic_config_table: dict[str, TopicConfig]
    data_version: DataVersion

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "dataVersion": self.data_version.to_json_dict(),
            "topicConfigTable": {name: tc.to_json_dict() for name, tc in self.topic_config_table.items()},
        }

    @classmethod
    @_decoding
    def from_json_dict(cls, d: Mapping[str, Any]) -> TopicConfigSerializeWrapper:
        d = as_dict(d, "topicConfigSerializeWrapper")
        table = as_dict(d.get("topicConfigTable"), "topicConfigTable")
        return cls(
            topic_config_table={
                as_str(name, "topicConfigTable key"): TopicConfig.from_json_dict(tc, name)
                for name, tc in table.items()
            },
            data_version=DataVersion.from_json_dict(as_dict(d.get("dataVersion"), "dataVersion")),
        )


@dataclass(slots=True)
class RegisterBrokerBody:
    """Body of REGISTER_BROKER: the broker's topics and (always empty in practice) filter servers."""

    topic_config_wrapper: TopicConfigSerializeWrapper
    filter_server_list: list[str]

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "filterServerList": list(self.filter_server_list),
            "topicConfigSerializeWrapper": self.topic_config_wrapper.to_json_dict(),
        }

    @classmethod
    @_decoding
    def from_json_dict(cls, d: Mapping[str, Any]) -> RegisterBrokerBody:
        d = as_dict(d, "registerBrokerBody")
        wrapper = as_dict(d.get("topicConfigSerializeWrapper"), "topicConfigSerializeWrapper")
        return cls(
            topic_config_wrapper=TopicConfigSerializeWrapper.from_json_dict(wrapper),
            filter_server_list=as_str_list(d.get("filterServerList"), "filterServerList"),
        )

    @classmethod
    def empty(cls) -> RegisterBrokerBody:
        """What a missing body means: no topics, DataVersion(0, 0)."""
        return cls(TopicConfigSerializeWrapper({}, DataVersion()), [])


@dataclass(slots=True)
class ClusterInfo:
    """Body of GET_BROKER_CLUSTER_INFO (106): every broker group and which cluster holds it."""

    broker_addr_table: dict[str, BrokerData]
    cluster_addr_table: dict[str, set[str]]

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "brokerAddrTable": {name: bd.to_json_dict() for name, bd in self.broker_addr_table.items()},
            "clusterAddrTable": {
                cluster: sorted(names) for cluster, names in self.cluster_addr_table.items()
            },
        }

    @classmethod
    @_decoding
    def from_json_dict(cls, d: Mapping[str, Any]) -> ClusterInfo:
        d = as_dict(d, "clusterInfo")
        brokers = as_dict(d.get("brokerAddrTable"), "brokerAddrTable")
        clusters = as_dict(d.get("clusterAddrTable"), "clusterAddrTable")
        return cls(
            broker_addr_table={
                as_str(name, "brokerAddrTable key"): BrokerData.from_json_dict(bd)
                for name, bd in brokers.items()
            },
            cluster_addr_table={
                as_str(cluster, "clusterAddrTable key"): set(as_str_list(names, "clusterAddrTable value"))
                for cluster, names in clusters.items()
            },
        )


@dataclass(slots=True)
class TopicList:
    """Body of GET_ALL_TOPIC_LIST_FROM_NAMESERVER (206) and GET_TOPICS_BY_CLUSTER (224)."""

    topic_list: list[str]
    broker_addr: str | None = None

    def to_json_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {}
        if self.broker_addr is not None:
            d["brokerAddr"] = self.broker_addr
        d["topicList"] = list(self.topic_list)
        return d

    @classmethod
    @_decoding
    def from_json_dict(cls, d: Mapping[str, Any]) -> TopicList:
        d = as_dict(d, "topicList")
        return cls(
            topic_list=as_str_list(d.get("topicList"), "topicList"),
            broker_addr=as_opt_str(d.get("brokerAddr"), "brokerAddr"),
        )


@dataclass(slots=True)
class KVTable:
    """A string map as ``{"table":{...}}`` (GET_KVLIST_BY_NAMESPACE, REGISTER_BROKER's response body)."""

    table: dict[str, str] = field(default_factory=dict)

    def to_json_dict(self) -> dict[str, Any]:
        return {"table": dict(self.table)}

    @classmethod
    @_decoding
    def from_json_dict(cls, d: Mapping[str, Any]) -> KVTable:
        d = as_dict(d, "kvTable")
        table = as_dict(d.get("table"), "table")
        return cls({as_str(k, "table key"): as_str(v, "table value") for k, v in table.items()})


# -- bodies on the wire ----------------------------------------------------------------------------------


def body_crc32(body: bytes | bytearray | memoryview) -> int:
    """The ``bodyCrc32`` of a REGISTER_BROKER request: CRC-32 masked to a positive Java int."""
    return zlib.crc32(body) & 0x7FFFFFFF


def encode_body(obj: Any, serialize_type: int = SerializeType.JSON, *, standard_json: bool = False) -> bytes:
    """A ``to_json_dict()`` result as a body: msgpack for the MSGPACK type, else fastjson-style JSON.

    ``standard_json`` quotes integer keys (and escapes non-ASCII) as fastjson's BrowserCompatible does.
    """
    if serialize_type == SerializeType.MSGPACK:
        return bytes(msgpack.packb(obj, use_bin_type=True))
    return fastjson.dumps(obj, quote_int_keys=standard_json)


def decode_body(body: bytes | bytearray | memoryview, serialize_type: int = SerializeType.JSON) -> Any:
    """Inverse of :func:`encode_body`; raises :class:`BodyDecodeError` for undecodable bytes."""
    if serialize_type == SerializeType.MSGPACK:
        try:
            return msgpack.unpackb(bytes(body), raw=False, strict_map_key=False)
        except (ValueError, TypeError, msgpack.UnpackException) as exc:
            raise BodyDecodeError(f"bad msgpack body: {exc}") from None
    try:
        return fastjson.loads(body)
    except ValueError as exc:
        raise BodyDecodeError(f"bad JSON body: {exc}") from None


def encode_route(
    route: TopicRouteData, *, standard_json: bool, serialize_type: int = SerializeType.JSON
) -> bytes:
    """Body of a GET_ROUTEINFO_BY_TOPIC response; unquoted ``brokerAddrs`` keys unless ``standard_json``."""
    return encode_body(route.to_json_dict(), serialize_type, standard_json=standard_json)


@_decoding
def decode_route(
    body: bytes | bytearray | memoryview, serialize_type: int = SerializeType.JSON
) -> TopicRouteData:
    """Parse a route body in either JSON key form (or msgpack)."""
    return TopicRouteData.from_json_dict(_root(decode_body(body, serialize_type), "topicRouteData"))


def encode_cluster_info(
    info: ClusterInfo, *, standard_json: bool = False, serialize_type: int = SerializeType.JSON
) -> bytes:
    """Body of a GET_BROKER_CLUSTER_INFO response (unquoted keys by default, as 4.9.4 writes it)."""
    return encode_body(info.to_json_dict(), serialize_type, standard_json=standard_json)


@_decoding
def decode_cluster_info(
    body: bytes | bytearray | memoryview, serialize_type: int = SerializeType.JSON
) -> ClusterInfo:
    return ClusterInfo.from_json_dict(_root(decode_body(body, serialize_type), "clusterInfo"))


def encode_register_body(
    body: RegisterBrokerBody,
    *,
    compressed: bool = False,
    version: int = ROCKETMQ_VERSION,
    serialize_type: int = SerializeType.JSON,
) -> bytes:
    """A REGISTER_BROKER request body for a request of ``version`` (see the module docstring)."""
    if version < REGISTER_BODY_MIN_VERSION:
        return encode_body(body.topic_config_wrapper.to_json_dict(), serialize_type)
    if compressed:
        return _encode_compressed(body)
    return encode_body(body.to_json_dict(), serialize_type)


@_decoding
def decode_data_version(
    body: bytes | bytearray | memoryview | None, serialize_type: int = SerializeType.JSON
) -> DataVersion:
    """Body of a QUERY_DATA_VERSION request (a broker's topic-table version); an empty body reads as 0, 0."""
    return DataVersion.from_json_dict(decode_body(body or b"{}", serialize_type))


@_decoding
def decode_register_body(
    body: bytes | bytearray | memoryview | None,
    *,
    compressed: bool,
    version: int,
    serialize_type: int = SerializeType.JSON,
) -> RegisterBrokerBody:
    """Parse a REGISTER_BROKER body; an empty body means no topics and DataVersion(0, 0)."""
    if not body:
        return RegisterBrokerBody.empty()
    if version < REGISTER_BODY_MIN_VERSION:
        wrapper = decode_body(body, serialize_type)
        return RegisterBrokerBody(
            TopicConfigSerializeWrapper.from_json_dict(_root(wrapper, "topicConfigSerializeWrapper")), []
        )
    if compressed:
        return _decode_compressed(bytes(body))
    return RegisterBrokerBody.from_json_dict(_root(decode_body(body, serialize_type), "registerBrokerBody"))


def _encode_compressed(body: RegisterBrokerBody) -> bytes:
    wrapper = body.topic_config_wrapper
    lines = [compact_line(tc) for tc in wrapper.topic_config_table.values()]
    return encode_compressed_register_body(wrapper.data_version, lines, body.filter_server_list)


def compact_line(config: TopicConfig) -> bytes:
    """One topic of a compressed register body, with its length prefix."""
    line = config.encode_compact().encode()
    return _INT32.pack(len(line)) + line


def encode_compressed_register_body(version: DataVersion, lines: list[bytes], filter_servers: list[str]) -> bytes:
    """A compressed REGISTER_BROKER body from its topics' :func:`compact_line`\\ s (a broker may keep them from
    one registration to the next: only changed topics need encoding again)."""
    data_version = fastjson.dumps(version.to_json_dict())
    filters = fastjson.dumps(list(filter_servers))
    head = _INT32.pack(len(data_version)) + data_version + _INT32.pack(len(lines))
    return zlib.compress(b"".join((head, *lines, _INT32.pack(len(filters)), filters)), 9)


def _inflate(data: bytes) -> bytes:
    try:
        return inflate_bounded(data, MAX_INFLATED_REGISTER_BODY)
    except InflateError as exc:
        raise BodyDecodeError(f"compressed register body: {exc}") from None


class _Reader:
    """Reads the length-prefixed fields of an inflated register body, checking every bound."""

    __slots__ = ("data", "pos")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def int32(self) -> int:
        if self.pos + 4 > len(self.data):
            raise BodyDecodeError("compressed register body: truncated length")
        (value,) = _INT32.unpack_from(self.data, self.pos)
        self.pos += 4
        if value < 0:
            raise BodyDecodeError(f"compressed register body: negative length {value}")
        return int(value)

    def chunk(self) -> bytes:
        size = self.int32()
        if self.pos + size > len(self.data):
            raise BodyDecodeError("compressed register body: field runs past the end")
        data = self.data[self.pos : self.pos + size]
        self.pos += size
        return data


#: Longest DataVersion JSON a compressed register body may start with (it is ~40 bytes).
_MAX_PEEKED_VERSION = 4096


@_decoding
def peek_compressed_data_version(body: bytes | bytearray | memoryview) -> DataVersion:
    """The DataVersion at the head of a compressed REGISTER_BROKER body, inflating only that much: a name
    server that already holds this version from the broker need not inflate and parse 10,000 topics again."""
    inflater = zlib.decompressobj()
    try:
        head = inflater.decompress(bytes(body), 4)
        if len(head) < 4:
            raise BodyDecodeError("compressed register body: truncated length")
        (size,) = _INT32.unpack_from(head, 0)
        if not 0 <= size <= _MAX_PEEKED_VERSION:
            raise BodyDecodeError(f"compressed register body: DataVersion of {size} bytes")
        text = inflater.decompress(inflater.unconsumed_tail, size)
    except zlib.error as exc:
        raise BodyDecodeError(f"compressed register body: corrupt: {exc}") from None
    if len(text) < size:
        raise BodyDecodeError("compressed register body: truncated DataVersion")
    return DataVersion.from_json_dict(_root(decode_body(text), "dataVersion"))


def _decode_compressed(data: bytes) -> RegisterBrokerBody:
    reader = _Reader(_inflate(data))
    version = DataVersion.from_json_dict(_root(decode_body(reader.chunk()), "dataVersion"))
    count = reader.int32()
    table: dict[str, TopicConfig] = {}
    for _ in range(count):
        try:
            line = reader.chunk().decode("utf-8")
        except UnicodeDecodeError:
            raise BodyDecodeError("compressed register body: topic line is not UTF-8") from None
        tc = TopicConfig.decode_compact(line)
        table[tc.topic_name] = tc
    filter_servers = as_str_list(decode_body(reader.chunk()), "filterServerList")
    return RegisterBrokerBody(TopicConfigSerializeWrapper(table, version), filter_servers)
