"""SQL92 subscriptions on a real broker, over the wire: selection at pull time (tags first), offsets skipped,
the long-poll wake-up, the error codes and remarks (parse failure, heartbeat expression that does not compile,
``enablePropertyFilter=false``), and CHECK_CLIENT_CONFIG."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

import pocketmq.broker.filter as broker_filter
from pocketmq.broker.controller import BrokerController
from pocketmq.common.record import decode_records
from pocketmq.namesrv.controller import NamesrvController
from pocketmq.remoting.client import RemotingClient
from pocketmq.remoting.codes import RequestCode, ResponseCode
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.headers import PullMessageRequestHeader, SendMessageRequestHeaderV2
from tests.cluster import start_broker
from tests.helpers import eventually

SUSPEND, SUBSCRIPTION = 0x2, 0x4
ENABLED = {"enablePropertyFilter": "true"}


@pytest.fixture
def broker_name() -> str:
    return "broker-f"


@pytest.fixture
def broker_props() -> dict[str, str]:
    return ENABLED


async def send(client: RemotingClient, addr: str, topic: str, body: bytes, tags: str | None = None,
               **props: str) -> None:
    items = ([("TAGS", tags)] if tags else []) + list(props.items())
    properties = "\x02".join(f"{k}\x01{v}" for k, v in items)
    header = SendMessageRequestHeaderV2("PG", topic, "TBW102", 4, 0, 0, int(time.time() * 1000), 0, properties)
    resp = await client.invoke(addr, RemotingCommand.request(310, header.to_fields(), body))
    assert resp.code == 0, resp


def sql_pull(topic: str, offset: int, sql: str | None, *, group: str = "CG", flags: int = SUBSCRIPTION,
             suspend_ms: int = 0, max_nums: int = 32, sub_version: int = 0,
             expression_type: str = "SQL92") -> RemotingCommand:
    header = PullMessageRequestHeader(group, topic, 0, offset, max_nums, flags, -1, suspend_ms, sub_version, sql,
                                      expression_type)
    return RemotingCommand.request(RequestCode.PULL_MESSAGE, header.to_fields())


def bodies(resp: RemotingCommand) -> list[bytes]:
    return [bytes(r.body) for r in decode_records(bytes(resp.body or b""))]


async def test_sql92_selects_by_properties_and_tags(broker: BrokerController, client: RemotingClient) -> None:
    await send(client, broker.addr, "F", b"m0", "TagA", a="7", region="eu")
    await send(client, broker.addr, "F", b"m1", "TagA", a="3", region="eu")
    await send(client, broker.addr, "F", b"m2", "TagB", a="9", region="eu")
    await send(client, broker.addr, "F", b"m3", "TagA", a="nine", region="eu")  # type error: no match
    await send(client, broker.addr, "F", b"m4", "TagA", region="eu")  # NULL: no match
    await send(client, broker.addr, "F", b"m5", None, a="8", region="us")
    await send(client, broker.addr, "F", b"m6", None, a="6", region="eu")
    resp = await client.invoke(broker.addr, sql_pull("F", 0, "a > 5 AND region = 'eu'"))
    assert resp.code == ResponseCode.SUCCESS, resp
    assert bodies(resp) == [b"m0", b"m2", b"m6"]
    assert resp.field("nextBeginOffset") == "7"
    mixed = await client.invoke(broker.addr, sql_pull("F", 0, "TAGS = 'TagA' AND (a IS NULL OR a < 5)"))
    assert bodies(mixed) == [b"m1", b"m4"]
    nulls = await client.invoke(broker.addr, sql_pull("F", 0, "TAGS IS NULL"))
    assert bodies(nulls) == [b"m5", b"m6"]


async def test_filtered_out_messages_are_skipped_in_offsets(broker: BrokerController, client: RemotingClient) -> None:
    for i in range(5):
        await send(client, broker.addr, "S", f"m{i}".encode(), "T", n=str(i))
    first = await client.invoke(broker.addr, sql_pull("S", 0, "n >= 3", max_nums=1))
    assert bodies(first) == [b"m3"] and first.field("nextBeginOffset") == "4"
    none = await client.invoke(broker.addr, sql_pull("S", 0, "n > 100"))
    assert none.code == ResponseCode.PULL_RETRY_IMMEDIATELY and none.field("nextBeginOffset") == "5"


async def test_tags_are_checked_before_properties_are_read(broker: BrokerController, client: RemotingClient,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    for i in range(6):
        await send(client, broker.addr, "G", f"m{i}".encode(), "keep" if i % 3 == 0 else "skip", n=str(i))
    reads: list[int] = []
    original = broker_filter.record_properties

    def counting(record: memoryview) -> broker_filter.StoredProperties:
        reads.append(1)
        return original(record)

    monkeypatch.setattr(broker_filter, "record_properties", counting)
    resp = await client.invoke(broker.addr, sql_pull("G", 0, "TAGS = 'keep' AND n > 0"))
    assert bodies(resp) == [b"m3"]
    assert len(reads) == 2  # only the two "keep" messages were read back; the four others never were
    reads.clear()
    await client.invoke(broker.addr, sql_pull("G", 0, "n > 0"))
    assert len(reads) == 6


async def test_long_poll_is_not_woken_by_messages_that_do_not_match(broker: BrokerController,
                                                                    client: RemotingClient) -> None:
    await send(client, broker.addr, "LP", b"old", "T", kind="x")
    waiting = asyncio.ensure_future(client.invoke(
        broker.addr, sql_pull("LP", 1, "kind = 'wanted'", flags=SUBSCRIPTION | SUSPEND, suspend_ms=20_000), 30))
    await eventually(lambda: broker.hold.held == 1, message="pull parked")
    other = RemotingClient()
    try:
        for i in range(3):
            await send(other, broker.addr, "LP", f"noise{i}".encode(), "T", kind="noise")
        # Each arrival was matched against the parked pull before its send was answered: still parked.
        assert not waiting.done() and broker.hold.held == 1
        await send(other, broker.addr, "LP", b"hit", "T", kind="wanted")
        resp = await asyncio.wait_for(waiting, 5)
    finally:
        await other.close()
    assert resp.code == ResponseCode.SUCCESS
    assert bodies(resp) == [b"hit"] and resp.field("nextBeginOffset") == "5"


async def test_bad_expression_in_pull_is_parse_failed(broker: BrokerController, client: RemotingClient) -> None:
    await send(client, broker.addr, "B", b"x", "T")
    for bad in ("a > 'x'", "a !", "", "NOT a > 5"):
        resp = await client.invoke(broker.addr, sql_pull("B", 0, bad))
        assert resp.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED, (bad, resp)
        assert resp.remark == "parse the consumer's subscription failed"
    unknown = await client.invoke(broker.addr, sql_pull("B", 0, "a = 1", expression_type="GROOVY"))
    assert unknown.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED


def heartbeat(group: str, topic: str, expression: str, version: int) -> RemotingCommand:
    sub = {"classFilterMode": False, "topic": topic, "subString": expression, "tagsSet": [], "codeSet": [],
           "subVersion": version, "expressionType": "SQL92"}
    body = {"clientID": "c1", "producerDataSet": [], "consumerDataSet": [
        {"groupName": group, "consumeType": "CONSUME_PASSIVELY", "messageModel": "CLUSTERING",
         "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET", "subscriptionDataSet": [sub], "unitMode": False}]}
    return RemotingCommand.request(RequestCode.HEART_BEAT, None, json.dumps(body).encode())


async def test_heartbeat_subscriptions(broker: BrokerController, client: RemotingClient) -> None:
    await send(client, broker.addr, "H", b"no", "T", a="1")
    await send(client, broker.addr, "H", b"yes", "T", a="2")
    assert (await client.invoke(broker.addr, heartbeat("HG", "H", "a = 2", 100))).code == 0
    assert len(broker.filters) == 1  # compiled when the heartbeat came
    resp = await client.invoke(broker.addr, sql_pull("H", 0, None, group="HG", flags=0, sub_version=100))
    assert bodies(resp) == [b"yes"]
    stale = await client.invoke(broker.addr, sql_pull("H", 0, None, group="HG", flags=0, sub_version=101))
    assert stale.code == ResponseCode.SUBSCRIPTION_NOT_LATEST
    assert (await client.invoke(broker.addr, heartbeat("BadG", "H", "a >", 5))).code == 0
    bad = await client.invoke(broker.addr, sql_pull("H", 0, None, group="BadG", flags=0, sub_version=5))
    assert bad.code == ResponseCode.FILTER_DATA_NOT_EXIST
    assert bad.remark == "The broker's consumer filter data is not exist!Your expression may be wrong!"


def check_client_config(expression: str, expression_type: str = "SQL92") -> RemotingCommand:
    body = {"clientId": "c1", "group": "G", "subscriptionData": {
        "classFilterMode": False, "topic": "T", "subString": expression, "tagsSet": [], "codeSet": [],
        "subVersion": 1, "expressionType": expression_type}}
    return RemotingCommand.request(RequestCode.CHECK_CLIENT_CONFIG, None, json.dumps(body).encode())


async def test_check_client_config(broker: BrokerController, client: RemotingClient) -> None:
    assert (await client.invoke(broker.addr, check_client_config("a > 1"))).code == ResponseCode.SUCCESS
    assert (await client.invoke(broker.addr, check_client_config("TagA", "TAG"))).code == ResponseCode.SUCCESS
    bad = await client.invoke(broker.addr, check_client_config("a > 'x'"))
    assert bad.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED and "cannot be compared" in (bad.remark or "")


async def test_property_filter_disabled(tmp_path: Path, namesrv: NamesrvController, client: RemotingClient) -> None:
    off = await start_broker(tmp_path, "broker-off", namesrv.addr)
    try:
        await send(client, off.addr, "D", b"x", "T", a="1")
        remark = "The broker does not support consumer to filter message by SQL92"
        resp = await client.invoke(off.addr, sql_pull("D", 0, "a = 1"))
        assert (resp.code, resp.remark) == (ResponseCode.SYSTEM_ERROR, remark)
        assert (await client.invoke(off.addr, heartbeat("OG", "D", "a = 1", 7))).code == 0
        resp = await client.invoke(off.addr, sql_pull("D", 0, None, group="OG", flags=0, sub_version=7))
        assert (resp.code, resp.remark) == (ResponseCode.SYSTEM_ERROR, remark)
        checked = await client.invoke(off.addr, check_client_config("a = 1"))
        assert (checked.code, checked.remark) == (ResponseCode.SYSTEM_ERROR, remark)
        tags = await client.invoke(off.addr, sql_pull("D", 0, "T", expression_type="TAG"))
        assert tags.code == ResponseCode.SUCCESS  # TAG subscriptions are untouched
    finally:
        await off.stop()


def test_filter_cache_is_bounded_and_caches_failures() -> None:
    from pocketmq.common.subscription import SubscriptionData

    manager = broker_filter.ConsumerFilterManager(max_entries=3)
    for version in range(5):
        manager.get("G", SubscriptionData("T", "a = 1", sub_version=version, expression_type="SQL92"))
    assert len(manager) == 3
    bad = SubscriptionData("T", "a >", sub_version=1, expression_type="SQL92")
    with pytest.raises(ValueError) as first:
        manager.get("G", bad)
    with pytest.raises(ValueError) as second:
        manager.get("G", bad)
    assert first.value is second.value
