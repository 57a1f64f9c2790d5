"""The client instance without a broker: broker tables and member lookup, routes derived from TBW102, the
heartbeat body, NOTIFY_CONSUMER_IDS_CHANGED, name-server addresses; and the one route fetcher's single flight
against a scripted name server."""

from __future__ import annotations

import asyncio
import json

import pytest

from pocketmq.client.consumer.subscription import build_subscription, consumer_data_json
from pocketmq.client.consumer.types import ConsumeFromWhere, MessageModel
from pocketmq.client.core.config import ClientConfig, parse_namesrv_addr
from pocketmq.client.core.errors import NoNameServerError
from pocketmq.client.core.instance import MQClientInstance, acquire_instance, heartbeat_body
from pocketmq.client.core.route_table import FindBrokerResult
from pocketmq.remoting.codes import RequestCode
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.headers import UnregisterClientRequestHeader
from tests.client.core.support import instance_with, route
from tests.client.producer.producer_support import ScriptedNamesrv, route_for


def test_find_broker_address_in_subscribe() -> None:
    instance = instance_with(route({0: "m:1", 1: "s1:1", 2: "s2:1"}))
    find = instance.routes.find_broker_address_in_subscribe
    assert find("broker-a", 0) == FindBrokerResult("m:1", 0)
    slave = find("broker-a", 1)
    assert slave == FindBrokerResult("s1:1", 1) and slave.slave
    assert find("broker-a", 0, skip=["m:1"]) == FindBrokerResult("s1:1", 1)  # master unreachable: a slave
    assert find("broker-a", 1, skip=["s1:1"]) == FindBrokerResult("s2:1", 2)  # id + 1
    assert find("broker-a", 0, skip=["m:1", "s1:1", "s2:1"]) == FindBrokerResult("m:1", 0)  # all down: try anyway
    assert find("broker-a", 5, only_this_broker=True) is None
    assert find("nope", 0) is None
    assert instance.routes.find_broker_address_in_admin("broker-a") == FindBrokerResult("m:1", 0)
    # The name server dropped the master (it is down): the group's members are replaced as a whole.
    instance.apply_route("T", route({1: "s1:1"}), from_default=False)
    assert find("broker-a", 0) == FindBrokerResult("s1:1", 1)
    assert instance.routes.find_broker_address_in_admin("broker-a") == FindBrokerResult("s1:1", 1)
    assert instance.routes.all_broker_addrs() == ["s1:1"]


def test_subscribe_route_ignores_routes_derived_from_tbw102() -> None:
    instance = instance_with(route({0: "m:1"}))
    assert instance.routes.subscribe_route("T") is not None
    instance.apply_route("Derived", route({0: "m:1"}), from_default=True)
    assert instance.routes.subscribe_route("Derived") is None
    assert instance.routes.subscribe_route("Unknown") is None


def test_heartbeat_body_carries_consumer_data() -> None:
    sub = build_subscription("T", "a || b", now_ms=lambda: 5)
    data = consumer_data_json("G", [sub], message_model=MessageModel.BROADCASTING,
                              consume_from_where=ConsumeFromWhere.FIRST_OFFSET)
    body = json.loads(heartbeat_body("1.2.3.4@x", ["PG"], [data]))
    assert body["producerDataSet"] == [{"groupName": "PG"}]
    [entry] = body["consumerDataSet"]
    assert entry["groupName"] == "G" and entry["consumeType"] == "CONSUME_PASSIVELY"
    assert entry["messageModel"] == "BROADCASTING" and entry["consumeFromWhere"] == "CONSUME_FROM_FIRST_OFFSET"
    assert entry["subscriptionDataSet"][0]["tagsSet"] == ["a", "b"]
    assert entry["subscriptionDataSet"][0]["subVersion"] == 5


class _FakeConsumer:
    def __init__(self) -> None:
        self.rebalances = 0

    def consumer_data(self) -> dict[str, object]:
        return {"groupName": "G"}

    def subscribed_topics(self) -> list[str]:
        return ["T"]

    def rebalance_soon(self) -> None:
        self.rebalances += 1


class _Conn:
    remote_addr = "broker:1"


def test_notify_consumer_ids_changed_rebalances_the_group() -> None:
    instance = MQClientInstance(ClientConfig(namesrv_addrs=("127.0.0.1:1",), client_id="1.2.3.4@x"))
    g, other = _FakeConsumer(), _FakeConsumer()
    instance.register_consumer("G", g)
    instance.register_consumer("Other", other)
    handler = instance.remoting._handlers[RequestCode.NOTIFY_CONSUMER_IDS_CHANGED]
    request = RemotingCommand.request(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, {"consumerGroup": "G"}, oneway=True)
    assert handler(request, _Conn()) is None  # type: ignore[arg-type]
    assert (g.rebalances, other.rebalances) == (1, 0)
    unknown = RemotingCommand.request(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, {}, oneway=True)
    handler(unknown, _Conn())  # type: ignore[arg-type]
    assert (g.rebalances, other.rebalances) == (2, 1)  # no group named: everyone rebalances
    assert instance.subscribed_topics() == {"T"}
    with pytest.raises(Exception, match="already been created"):
        instance.register_consumer("G", _FakeConsumer())


def test_heartbeat_and_unregister() -> None:
    body = heartbeat_body("10.0.0.1@123", ["A", "B"])
    assert json.loads(body) == {"clientID": "10.0.0.1@123", "consumerDataSet": [],
                                "producerDataSet": [{"groupName": "A"}, {"groupName": "B"}]}
    assert b" " not in body
    assert UnregisterClientRequestHeader("c", producer_group="G").to_fields() == {"clientID": "c", "producerGroup": "G"}


def test_namesrv_addresses(monkeypatch: pytest.MonkeyPatch) -> None:
    assert parse_namesrv_addr("a:1; b:2;;") == ("a:1", "b:2")
    assert parse_namesrv_addr(["a:1", " "]) == ("a:1",)
    monkeypatch.setenv("NAMESRV_ADDR", "env:9876")
    assert parse_namesrv_addr(None) == ("env:9876",)
    with pytest.raises(NoNameServerError):
        parse_namesrv_addr(";")
    with pytest.raises(ValueError):
        ClientConfig(("a:1",), "id", poll_name_server_interval=0)


class _RecordingProducer:
    def __init__(self) -> None:
        self.routes: dict[str, object] = {}

    def update_topic_route(self, topic: str, route: object) -> None:
        self.routes[topic] = route


async def test_one_fetch_serves_a_consumer_and_a_publisher_joining_it() -> None:
    """A consumer's fetch of a topic with no route is joined by a publisher: one GET_ROUTEINFO for the topic,
    and the publisher still gets the TBW102 fallback."""
    gate = asyncio.Event()
    ns = await ScriptedNamesrv({"TBW102": route_for(("broker-a", "127.0.0.1:1", 8))}, gate=gate).start()
    instance = acquire_instance(ClientConfig(namesrv_addrs=(ns.addr,), client_id="1.2.3.4@flight"))
    producer = _RecordingProducer()
    instance.register_producer("PG", producer)
    try:
        consumer = asyncio.ensure_future(instance.refresher.refresh("New", 3.0, publish=False))
        publisher = asyncio.ensure_future(instance.refresher.refresh("New", 3.0, publish=True))
        again = asyncio.ensure_future(instance.refresher.refresh("New", 3.0, publish=False))
        await asyncio.sleep(0.05)
        gate.set()
        await asyncio.gather(consumer, publisher, again)
        assert ns.calls == {"New": 1, "TBW102": 1}
        assert instance.routes.is_from_default_route("New")
        assert instance.routes.subscribe_route("New") is None  # consumers ignore derived routes
        assert "New" in producer.routes  # producers were handed the derived route
    finally:
        await instance.shutdown()
        await ns.stop()


async def test_a_consumers_fetch_never_falls_back_to_tbw102() -> None:
    ns = await ScriptedNamesrv({"TBW102": route_for(("broker-a", "127.0.0.1:1", 8))}).start()
    instance = acquire_instance(ClientConfig(namesrv_addrs=(ns.addr,), client_id="1.2.3.4@sub"))
    try:
        await instance.refresher.refresh("Absent", 3.0, publish=False)
        assert ns.calls == {"Absent": 1}
        assert "Absent" not in instance.routes.route_table
    finally:
        await instance.shutdown()
        await ns.stop()
