"""Registration at scale (:mod:`pocketmq.broker.registration`): a created topic is registered alone and routable
when the call returns; a name server that missed registrations (restarted, down) gets the full table; a full
registration of many topics goes compressed and a name server that holds its version does not decode it again."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pocketmq.broker.controller import BrokerController
from pocketmq.broker.registration import (
    COMPRESS_MIN_TOPICS,
    BrokerIdentity,
    BrokerOuterAPI,
    CompactLines,
    encode_full_body,
)
from pocketmq.common.topic_config import DataVersion, TopicConfig
from pocketmq.namesrv.config import NamesrvConfig
from pocketmq.namesrv.controller import NamesrvController
from pocketmq.remoting import route as rd
from pocketmq.remoting.client import RemotingClient
from pocketmq.remoting.codes import RequestCode, ResponseCode
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.headers import CreateTopicRequestHeader
from tests.cluster import start_broker, start_namesrv
from tests.helpers import eventually

pytestmark = pytest.mark.timeout(60)


def tap(ns: NamesrvController, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The number of topics each registration ``ns`` takes carries (its routes' register_broker, spied on)."""
    seen: list[int] = []
    original: Callable[..., Any] = ns.routes.register_broker

    def spy(*args: Any) -> Any:
        wrapper = args[5]
        seen.append(-1 if wrapper is None else len(wrapper.topic_config_table))
        return original(*args)

    monkeypatch.setattr(ns.routes, "register_broker", spy)
    return seen


async def create(client: RemotingClient, broker: BrokerController, topic: str) -> None:
    header = CreateTopicRequestHeader(topic, "TBW102", 4, 4, 6, "SINGLE_TAG").to_fields()
    response = await client.invoke(broker.addr, RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, header))
    assert response.code == ResponseCode.SUCCESS, response.remark


async def test_a_created_topic_is_registered_alone_and_routable_when_the_call_returns(
        broker: BrokerController, namesrv: NamesrvController, monkeypatch: pytest.MonkeyPatch) -> None:
    seen = tap(namesrv, monkeypatch)
    client = RemotingClient()
    try:
        for i in range(20):
            await create(client, broker, f"Alone{i}")
            assert namesrv.routes.pickup_topic_route_data(f"Alone{i}") is not None  # at once, no waiting
        body = rd.encode_body({"topicConfigList": [TopicConfig(f"Batch{i}", 2, 2, 6).to_json_dict()
                                                   for i in range(300)]})
        response = await client.invoke(broker.addr, RemotingCommand.request(
            RequestCode.UPDATE_AND_CREATE_TOPIC_LIST, {}, body))
        assert response.code == ResponseCode.SUCCESS, response.remark
        assert all(namesrv.routes.pickup_topic_route_data(f"Batch{i}") is not None for i in range(300))
    finally:
        await client.close()
    assert seen[:20] == [1] * 20  # one increment of one topic per creation, never the whole table
    assert sum(seen[20:]) == 300  # the batch: one increment (or a few, folded), no full table


async def test_a_name_server_that_missed_registrations_gets_the_full_table(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two name servers: the first stays up and only ever gets increments; the second is stopped, topics are
    created meanwhile, and a new one on its port gets the whole table (with the topics it missed) on its own,
    then increments again."""
    stays = await start_namesrv(tmp_path, "ns1")
    restarts = await start_namesrv(tmp_path, "ns2")
    port = restarts.server.address[1]
    broker = await start_broker(tmp_path, "broker-r", f"{stays.addr};{restarts.addr}")
    seen = tap(stays, monkeypatch)
    client = RemotingClient()
    try:
        await create(client, broker, "BeforeStop")
        await restarts.stop()
        for i in range(5):
            await create(client, broker, f"WhileDown{i}")  # answered: one name server is enough
        assert stays.routes.pickup_topic_route_data("WhileDown4") is not None
        again = NamesrvController(NamesrvConfig(listen_host="127.0.0.1", listen_port=port,
                                                kv_config_path=str(tmp_path / "ns2b" / "kvConfig.json")))
        await again.start()
        try:
            again_seen = tap(again, monkeypatch)
            expected = set(broker.topics.table)
            await eventually(lambda: expected <= set(again.routes.get_all_topic_list()), timeout=15,
                             message="the restarted name server has the full table")
            assert max(again_seen) >= len(expected)
            await create(client, broker, "AfterRestart")
            assert again.routes.pickup_topic_route_data("AfterRestart") is not None
            assert again_seen[-1] == 1  # increments again, now that it holds everything
        finally:
            await again.stop()
    finally:
        await client.close()
        await broker.stop()
        await stays.stop()
    assert seen and all(n == 1 for n in seen[:6])  # the name server that stayed: increments only


def test_a_full_body_is_compressed_from_many_topics_and_only_without_topic_sys_flags() -> None:
    def wrapper(count: int, sys_flag: int = 0) -> rd.TopicConfigSerializeWrapper:
        table = {f"T{i}": TopicConfig(f"T{i}", 4, 4, 6, topic_sys_flag=sys_flag if i == 0 else 0)
                 for i in range(count)}
        return rd.TopicConfigSerializeWrapper(table, DataVersion(3, 4))

    body, compressed = encode_full_body(wrapper(COMPRESS_MIN_TOPICS), compress=True)
    assert compressed and len(body) < len(encode_full_body(wrapper(COMPRESS_MIN_TOPICS), compress=False)[0]) / 5
    decoded = rd.decode_register_body(body, compressed=True, version=401)
    assert len(decoded.topic_config_wrapper.topic_config_table) == COMPRESS_MIN_TOPICS
    assert rd.peek_compressed_data_version(body) == DataVersion(3, 4)
    assert not encode_full_body(wrapper(COMPRESS_MIN_TOPICS - 1), compress=True)[1]
    assert not encode_full_body(wrapper(COMPRESS_MIN_TOPICS, sys_flag=2), compress=True)[1]
    plain, compressed = encode_full_body(wrapper(10), compress=False)
    assert not compressed and "topicConfigSerializeWrapper" in json.loads(plain)


@pytest.mark.parametrize("body", [b"", b"\x78\x9c", b"not zlib at all", b"\x78\x9c\x03\x00\x00\x00\x00\x01"])
def test_peeking_at_a_bad_compressed_body_is_a_clear_error(body: bytes) -> None:
    with pytest.raises(rd.BodyDecodeError):
        rd.peek_compressed_data_version(body)


async def test_an_unchanged_compressed_registration_is_not_decoded_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ns = await start_namesrv(tmp_path)
    client = RemotingClient()
    api = BrokerOuterAPI(client, [ns.addr])
    me = BrokerIdentity("C", "b", 0, "127.0.0.1:1", "127.0.0.1:2")
    table = {f"T{i}": TopicConfig(f"T{i}", 4, 4, 6) for i in range(200)}
    try:
        assert all(r.ok for r in await api.register_broker_all(me, rd.TopicConfigSerializeWrapper(
            dict(table), DataVersion(1, 1))))
        assert len(ns.routes.get_all_topic_list()) == 200

        def refuse(*_args: object, **_kw: object) -> object:
            raise AssertionError("an unchanged registration was decoded")

        monkeypatch.setattr(rd, "decode_register_body", refuse)
        for _ in range(3):  # the same version again: the name server peeks at it and records the sign of life
            assert all(r.ok for r in await api.register_broker_all(me, rd.TopicConfigSerializeWrapper(
                dict(table), DataVersion(1, 1))))
        monkeypatch.undo()
        table["New"] = TopicConfig("New", 1, 1, 6)
        assert all(r.ok for r in await api.register_broker_all(me, rd.TopicConfigSerializeWrapper(
            dict(table), DataVersion(2, 2))))
        assert ns.routes.pickup_topic_route_data("New") is not None
    finally:
        await client.close()
        await ns.stop()


def test_the_compressed_body_keeps_each_topics_line_until_the_topic_changes() -> None:
    table = {f"T{i}": TopicConfig(f"T{i}", 4, 4, 6) for i in range(300)}
    kept = CompactLines()
    first = kept.lines(table)
    table["T7"] = TopicConfig("T7", 8, 8, 6)
    del table["T9"]
    second = kept.lines(table)
    assert second[0] is first[0] and second[7] is not first[7] and len(second) == 299
    version = DataVersion(5, 6)
    body = rd.encode_compressed_register_body(version, second, [])
    assert body == encode_full_body(rd.TopicConfigSerializeWrapper(table, version), compress=True)[0]
    assert rd.decode_register_body(body, compressed=True, version=401).topic_config_wrapper.topic_config_table == {
        name: TopicConfig(name, c.read_queue_nums, c.write_queue_nums, c.perm) for name, c in table.items()}
