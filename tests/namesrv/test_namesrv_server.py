"""Name servers in the test's event loop on port 0, driven by fake brokers over the real protocol."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import msgpack
import pytest

from pocketmq.common.topic_config import DataVersion, TopicConfig
from pocketmq.namesrv.config import NamesrvConfig
from pocketmq.namesrv.controller import NamesrvController
from pocketmq.remoting import route as rd
from pocketmq.remoting.client import RemotingClient
from pocketmq.remoting.codes import RequestCode, ResponseCode, SerializeType
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.headers import (
    GetRouteInfoRequestHeader,
    RegisterBrokerRequestHeader,
    RegisterBrokerResponseHeader,
    UnregisterBrokerRequestHeader,
)
from tests.helpers import eventually

CLUSTER = "DefaultCluster"


def ns_config(tmp_path: Path, **kw: object) -> NamesrvConfig:
    return NamesrvConfig(listen_host="127.0.0.1", listen_port=0,
                         kv_config_path=str(tmp_path / "kv" / "kvConfig.json"), **kw)  # type: ignore[arg-type]


@pytest.fixture
async def namesrv(tmp_path: Path) -> AsyncIterator[NamesrvController]:
    ns = NamesrvController(ns_config(tmp_path, scan_not_active_broker_interval=50,
                                     broker_channel_expired_time=30_000))
    await ns.start()
    yield ns
    await ns.stop()


def topic_wrapper(*topics: str, counter: int = 1) -> rd.TopicConfigSerializeWrapper:
    return rd.TopicConfigSerializeWrapper(
        {t: TopicConfig(t, read_queue_nums=4, write_queue_nums=4, perm=6) for t in topics},
        DataVersion(counter, 1690000000000),
    )


class FakeBroker:
    """A broker's registration traffic, over its own connection (so it can be dropped alone)."""

    def __init__(self, name: str, broker_id: int, port: int, topics: tuple[str, ...] = ()) -> None:
        self.name = name
        self.broker_id = broker_id
        self.addr = f"127.0.0.1:{port}"
        self.ha_addr = f"127.0.0.1:{port + 1}"
        self.topics = topics
        self.client = RemotingClient()

    async def register(self, ns: str, *, counter: int = 1, compressed: bool = False,
                       serialize_type: int = SerializeType.JSON, crc: int | None = None) -> RemotingCommand:
        body = rd.encode_register_body(rd.RegisterBrokerBody(topic_wrapper(*self.topics, counter=counter), []),
                                       compressed=compressed)
        header = RegisterBrokerRequestHeader(self.name, self.addr, CLUSTER, self.ha_addr, self.broker_id,
                                             compressed=compressed,
                                             body_crc32=rd.body_crc32(body) if crc is None else crc)
        req = RemotingCommand.request(RequestCode.REGISTER_BROKER, header.to_fields(), body,
                                      serialize_type=serialize_type)
        return await self.client.invoke(ns, req)

    async def unregister(self, ns: str) -> RemotingCommand:
        header = UnregisterBrokerRequestHeader(self.name, self.addr, CLUSTER, self.broker_id)
        return await self.client.invoke(ns, RemotingCommand.request(RequestCode.UNREGISTER_BROKER, header.to_fields()))

    async def close(self) -> None:
        await self.client.close()


async def get_route(ns: str, topic: str, *, version: int = 401, standard: bool | None = None,
                    serialize_type: int = SerializeType.JSON) -> RemotingCommand:
    client = RemotingClient()
    try:
        req = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC,
                                      GetRouteInfoRequestHeader(topic, standard).to_fields(),
                                      serialize_type=serialize_type)
        req.version = version
        return await client.invoke(ns, req)
    finally:
        await client.close()


async def route_of(ns: str, topic: str) -> rd.TopicRouteData | None:
    resp = await get_route(ns, topic)
    if resp.code == ResponseCode.TOPIC_NOT_EXIST:
        return None
    assert resp.code == 0, resp
    return rd.decode_route(bytes(resp.body or b""))


@pytest.fixture
async def two_groups(namesrv: NamesrvController) -> AsyncIterator[list[FakeBroker]]:
    brokers = [
        FakeBroker("broker-a", 0, 10911, ("T", "OnlyA")),
        FakeBroker("broker-a", 1, 10921, ("T", "OnlyA")),
        FakeBroker("broker-b", 0, 11911, ("T",)),
        FakeBroker("broker-b", 1, 11921, ("T",)),
    ]
    for b in brokers:
        resp = await b.register(namesrv.addr)
        assert resp.code == 0
    yield brokers
    for b in brokers:
        await b.close()


async def test_register_two_groups_and_fetch_routes(namesrv: NamesrvController, two_groups: list[FakeBroker]) -> None:
    route = await route_of(namesrv.addr, "T")
    assert route is not None
    by_name = {b.broker_name: b for b in route.broker_datas}
    assert by_name["broker-a"].broker_addrs == {0: "127.0.0.1:10911", 1: "127.0.0.1:10921"}
    assert by_name["broker-b"].broker_addrs == {0: "127.0.0.1:11911", 1: "127.0.0.1:11921"}
    assert all(b.cluster == CLUSTER for b in route.broker_datas)
    assert sorted((q.broker_name, q.write_queue_nums, q.perm) for q in route.queue_datas) == [
        ("broker-a", 4, 6), ("broker-b", 4, 6)]
    only_a = await route_of(namesrv.addr, "OnlyA")
    assert only_a is not None and [q.broker_name for q in only_a.queue_datas] == ["broker-a"]


async def test_slave_registration_learns_master_and_ha_address(namesrv: NamesrvController,
                                                              two_groups: list[FakeBroker]) -> None:
    slave = two_groups[1]
    resp = await slave.register(namesrv.addr, counter=2)
    header = RegisterBrokerResponseHeader.from_command(resp)
    assert header.master_addr == "127.0.0.1:10911"
    assert header.ha_server_addr == "127.0.0.1:10912"
    master = await two_groups[0].register(namesrv.addr)
    assert RegisterBrokerResponseHeader.from_command(master) == RegisterBrokerResponseHeader(None, None)


async def test_unregister_removes_addresses_then_groups(namesrv: NamesrvController,
                                                       two_groups: list[FakeBroker]) -> None:
    master_a, slave_a = two_groups[0], two_groups[1]
    assert (await master_a.unregister(namesrv.addr)).code == 0
    route = await route_of(namesrv.addr, "T")
    assert route is not None
    a = next(b for b in route.broker_datas if b.broker_name == "broker-a")
    assert a.broker_addrs == {1: "127.0.0.1:10921"}  # consumers can still read from the slave
    assert (await slave_a.unregister(namesrv.addr)).code == 0
    route = await route_of(namesrv.addr, "T")
    assert route is not None
    assert [b.broker_name for b in route.broker_datas] == ["broker-b"]
    assert [q.broker_name for q in route.queue_datas] == ["broker-b"]
    assert await route_of(namesrv.addr, "OnlyA") is None


async def test_silent_broker_expires(tmp_path: Path) -> None:
    before = asyncio.all_tasks()
    ns = NamesrvController(ns_config(tmp_path, scan_not_active_broker_interval=50,
                                     broker_channel_expired_time=300))
    await ns.start()
    broker = FakeBroker("broker-x", 0, 12911, ("X",))
    try:
        assert (await broker.register(ns.addr)).code == 0
        assert await route_of(ns.addr, "X") is not None

        async def gone() -> bool:
            return await route_of(ns.addr, "X") is None

        await eventually(gone, timeout=5, message="expired broker removed from route")
    finally:
        await broker.close()
        await ns.stop()
    assert asyncio.all_tasks() - before <= {asyncio.current_task()}  # the scan and idle-scan services ended


async def test_connection_drop_removes_broker_at_once(namesrv: NamesrvController) -> None:
    broker = FakeBroker("broker-y", 0, 13911, ("Y",))
    assert (await broker.register(namesrv.addr)).code == 0
    assert await route_of(namesrv.addr, "Y") is not None
    await broker.close()

    async def gone() -> bool:
        return await route_of(namesrv.addr, "Y") is None

    await eventually(gone, timeout=2, message="dropped broker removed")


async def test_two_name_servers_are_independent(tmp_path: Path) -> None:
    ns1 = NamesrvController(ns_config(tmp_path / "1"))
    ns2 = NamesrvController(ns_config(tmp_path / "2"))
    await ns1.start()
    await ns2.start()
    broker = FakeBroker("broker-z", 0, 14911, ("Z",))
    try:
        assert (await broker.register(ns1.addr)).code == 0
        assert await route_of(ns1.addr, "Z") is not None
        assert await route_of(ns2.addr, "Z") is None
        assert (await broker.register(ns2.addr)).code == 0
        await ns1.stop()
        assert await route_of(ns2.addr, "Z") is not None
    finally:
        await broker.close()
        await ns2.stop()


async def test_json_key_forms_for_old_and_new_clients(namesrv: NamesrvController,
                                                     two_groups: list[FakeBroker]) -> None:
    go = await get_route(namesrv.addr, "T", version=317)
    body = bytes(go.body or b"")
    assert b'"brokerAddrs":{0:"127.0.0.1:10911",1:"127.0.0.1:10921"}' in body
    assert b" " not in body  # compact: the Go client splits on ',' and ':' by hand
    new = await get_route(namesrv.addr, "T", version=401)
    assert b'"brokerAddrs":{"0":"127.0.0.1:10911","1":"127.0.0.1:10921"}' in bytes(new.body or b"")
    json.loads(bytes(new.body or b""))  # standard JSON
    asked = await get_route(namesrv.addr, "T", version=317, standard=True)
    assert b'{"0":"127.0.0.1:10911"' in bytes(asked.body or b"")
    assert rd.decode_route(body) == rd.decode_route(bytes(new.body or b""))


async def test_msgpack_requests_get_msgpack_bodies(namesrv: NamesrvController,
                                                   two_groups: list[FakeBroker]) -> None:
    resp = await get_route(namesrv.addr, "T", serialize_type=SerializeType.MSGPACK)
    assert resp.serialize_type == SerializeType.MSGPACK
    route = rd.TopicRouteData.from_json_dict(msgpack.unpackb(resp.body, strict_map_key=False))
    assert {b.broker_name for b in route.broker_datas} == {"broker-a", "broker-b"}


async def test_compressed_registration_and_crc_check(namesrv: NamesrvController) -> None:
    broker = FakeBroker("broker-c", 0, 15911, ("C1", "C2"))
    try:
        assert (await broker.register(namesrv.addr, compressed=True)).code == 0
        route = await route_of(namesrv.addr, "C2")
        assert route is not None and route.queue_datas[0].write_queue_nums == 4
        bad = await broker.register(namesrv.addr, counter=3, crc=12345)
        assert bad.code == ResponseCode.SYSTEM_ERROR and bad.remark == "crc32 not match"
    finally:
        await broker.close()


async def call(ns: str, code: int, fields: dict[str, str] | None = None, body: bytes | None = None) -> RemotingCommand:
    client = RemotingClient()
    try:
        return await client.invoke(ns, RemotingCommand.request(code, fields, body))
    finally:
        await client.close()


async def test_cluster_info_topic_lists_and_delete(namesrv: NamesrvController, two_groups: list[FakeBroker]) -> None:
    info = rd.decode_cluster_info(bytes((await call(namesrv.addr, RequestCode.GET_BROKER_CLUSTER_INFO)).body or b""))
    assert info.cluster_addr_table == {CLUSTER: {"broker-a", "broker-b"}}
    assert info.broker_addr_table["broker-b"].broker_addrs[1] == "127.0.0.1:11921"
    topics = json.loads(bytes((await call(namesrv.addr, RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)).body or b""))
    assert sorted(topics["topicList"]) == ["OnlyA", "T"]
    by_cluster = await call(namesrv.addr, RequestCode.GET_TOPICS_BY_CLUSTER, {"cluster": CLUSTER})
    assert sorted(json.loads(bytes(by_cluster.body or b""))["topicList"]) == ["OnlyA", "T"]
    assert (await call(namesrv.addr, RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": "OnlyA"})).code == 0
    assert await route_of(namesrv.addr, "OnlyA") is None
    missing = await call(namesrv.addr, RequestCode.GET_TOPICS_BY_CLUSTER)
    assert missing.code == ResponseCode.SYSTEM_ERROR and "<cluster> is null" in (missing.remark or "")


async def test_query_data_version(namesrv: NamesrvController, two_groups: list[FakeBroker]) -> None:
    master = two_groups[0]
    fields = {"brokerName": master.name, "brokerAddr": master.addr, "clusterName": CLUSTER, "brokerId": "0"}
    same = await call(namesrv.addr, RequestCode.QUERY_DATA_VERSION, fields,
                      json.dumps({"counter": 1, "timestamp": 1690000000000}).encode())
    assert same.code == 0 and same.field("changed") == "false"
    newer = await call(namesrv.addr, RequestCode.QUERY_DATA_VERSION, fields,
                       json.dumps({"counter": 2, "timestamp": 1690000000001}).encode())
    assert newer.field("changed") == "true"


async def test_kv_config_round_trip_and_persistence(namesrv: NamesrvController, tmp_path: Path) -> None:
    ns = namesrv.addr
    fields = {"namespace": "ORDER_TOPIC_CONFIG", "key": "T", "value": "broker-a:4"}
    put = await call(ns, RequestCode.PUT_KV_CONFIG, fields)
    assert put.code == 0
    got = await call(ns, RequestCode.GET_KV_CONFIG, {"namespace": "ORDER_TOPIC_CONFIG", "key": "T"})
    assert got.field("value") == "broker-a:4"
    listed = await call(ns, RequestCode.GET_KVLIST_BY_NAMESPACE, {"namespace": "ORDER_TOPIC_CONFIG"})
    assert json.loads(bytes(listed.body or b"")) == {"table": {"T": "broker-a:4"}}
    assert "broker-a:4" in (tmp_path / "kv" / "kvConfig.json").read_text()
    assert (await call(ns, RequestCode.DELETE_KV_CONFIG, {"namespace": "ORDER_TOPIC_CONFIG", "key": "T"})).code == 0
    missing = await call(ns, RequestCode.GET_KV_CONFIG, {"namespace": "ORDER_TOPIC_CONFIG", "key": "T"})
    assert missing.code == ResponseCode.QUERY_NOT_FOUND


async def test_unknown_code_is_answered(namesrv: NamesrvController) -> None:
    resp = await call(namesrv.addr, 9999)
    assert resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
