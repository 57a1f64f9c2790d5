"""The broker's read side over the wire: pull, long polling, offsets, membership, retry, delays."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from pocketmq.broker.controller import BrokerController
from pocketmq.common.message import parse_properties
from pocketmq.common.record import decode_records
from pocketmq.namesrv.controller import NamesrvController
from pocketmq.remoting import fastjson
from pocketmq.remoting.client import RemotingClient
from pocketmq.remoting.codes import RequestCode, ResponseCode
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.connection import Connection
from pocketmq.remoting.errors import RemotingClosedError
from pocketmq.remoting.headers import PullMessageRequestHeader, SendMessageRequestHeaderV2
from tests.cluster import start_broker
from tests.helpers import eventually

SUSPEND, COMMIT, SUBSCRIPTION = 0x2, 0x1, 0x4


@pytest.fixture
def broker_props() -> dict[str, str]:
    return {"messageDelayLevel": "1s 2s 1m"}


@pytest.fixture
async def client() -> AsyncIterator[RemotingClient]:
    c = RemotingClient()
    yield c
    await c.close()


async def send(client: RemotingClient, addr: str, topic: str, body: bytes, tags: str = "a", queue_id: int = 0,
               extra: str = "") -> RemotingCommand:
    props = f"TAGS\x01{tags}" + (f"\x02{extra}" if extra else "")
    header = SendMessageRequestHeaderV2("PG", topic, "TBW102", 4, queue_id, 0, int(time.time() * 1000), 0, props)
    resp = await client.invoke(addr, RemotingCommand.request(310, header.to_fields(), body))
    assert resp.code == 0, resp
    return resp


def pull_request(topic: str, offset: int, *, group: str = "CG", sub: str | None = "*", flags: int = SUBSCRIPTION,
                 suspend_ms: int = 0, commit: int = -1, queue_id: int = 0, max_nums: int = 32) -> RemotingCommand:
    header = PullMessageRequestHeader(group, topic, queue_id, offset, max_nums, flags, commit, suspend_ms, 0, sub)
    return RemotingCommand.request(RequestCode.PULL_MESSAGE, header.to_fields())


def bodies(resp: RemotingCommand) -> list[bytes]:
    return [bytes(r.body) for r in decode_records(bytes(resp.body or b""))]


async def test_pull_with_tag_filter_and_offsets(broker: BrokerController, client: RemotingClient) -> None:
    for i in range(6):
        await send(client, broker.addr, "P", f"m{i}".encode(), tags="a" if i % 2 == 0 else "b")
    resp = await client.invoke(broker.addr, pull_request("P", 0, sub="a"))
    assert resp.code == ResponseCode.SUCCESS
    assert bodies(resp) == [b"m0", b"m2", b"m4"]
    assert (resp.field("minOffset"), resp.field("maxOffset"), resp.field("nextBeginOffset")) == ("0", "6", "6")
    assert resp.field("suggestWhichBrokerId") == "0"
    both = await client.invoke(broker.addr, pull_request("P", 2, sub="a || b", max_nums=2))
    assert bodies(both) == [b"m2", b"m3"] and both.field("nextBeginOffset") == "4"
    none = await client.invoke(broker.addr, pull_request("P", 0, sub="zzz"))
    assert none.code == ResponseCode.PULL_RETRY_IMMEDIATELY and none.field("nextBeginOffset") == "6"


@pytest.mark.parametrize(
    ("topic", "offset", "kw", "code", "next_offset"),
    [
        ("S", 3, {}, ResponseCode.PULL_NOT_FOUND, "3"),
        ("S", 9, {}, ResponseCode.PULL_OFFSET_MOVED, "3"),
        ("Nope", 0, {}, ResponseCode.TOPIC_NOT_EXIST, None),
        ("S", 0, {"queue_id": 9}, ResponseCode.SYSTEM_ERROR, None),
        ("S", 0, {"flags": 0, "sub": None}, ResponseCode.SUBSCRIPTION_NOT_EXIST, None),
    ],
)
async def test_pull_status_mapping(broker: BrokerController, client: RemotingClient, topic: str, offset: int,
                                   kw: dict[str, object], code: int, next_offset: str | None) -> None:
    for _ in range(3):
        await send(client, broker.addr, "S", b"x")
    resp = await client.invoke(broker.addr, pull_request(topic, offset, **kw))  # type: ignore[arg-type]
    assert resp.code == code, resp
    if next_offset is not None:
        assert resp.field("nextBeginOffset") == next_offset


async def test_empty_queue_at_zero_is_not_found(broker: BrokerController, client: RemotingClient) -> None:
    await send(client, broker.addr, "E", b"x", queue_id=0)
    resp = await client.invoke(broker.addr, pull_request("E", 0, queue_id=1))
    assert resp.code == ResponseCode.PULL_NOT_FOUND


async def test_long_poll_is_woken_by_arrival_and_heartbeats_pass(broker: BrokerController,
                                                                  client: RemotingClient) -> None:
    await send(client, broker.addr, "LP", b"first")
    waiting = asyncio.ensure_future(
        client.invoke(broker.addr, pull_request("LP", 1, flags=SUBSCRIPTION | SUSPEND, suspend_ms=30_000), 40))
    await eventually(lambda: broker.hold.held == 1, message="pull parked")
    heartbeat = json.dumps({"clientID": "c1", "producerDataSet": [{"groupName": "PG"}]}).encode()
    hb = await client.invoke(broker.addr, RemotingCommand.request(RequestCode.HEART_BEAT, None, heartbeat), 3)
    assert hb.code == 0 and not waiting.done()
    other = RemotingClient()
    try:
        await send(other, broker.addr, "LP", b"second")
    finally:
        await other.close()
    # Woken by the arrival, long before the 30 s suspend timeout.
    await eventually(lambda: waiting.done(), timeout=5, message="parked pull answered on arrival")
    resp = await waiting
    assert resp.code == 0 and bodies(resp) == [b"second"]
    assert broker.hold.held == 0


async def test_long_poll_times_out_with_not_found(broker: BrokerController, client: RemotingClient) -> None:
    await send(client, broker.addr, "LT", b"x")
    resp = await client.invoke(broker.addr, pull_request("LT", 1, flags=SUBSCRIPTION | SUSPEND, suspend_ms=200), 5)
    assert resp.code == ResponseCode.PULL_NOT_FOUND


async def test_long_poll_ignores_messages_its_filter_rejects(broker: BrokerController,
                                                             client: RemotingClient) -> None:
    await send(client, broker.addr, "LF", b"x", tags="a")
    waiting = asyncio.ensure_future(client.invoke(
        broker.addr, pull_request("LF", 1, sub="wanted", flags=SUBSCRIPTION | SUSPEND, suspend_ms=30_000), 40))
    await eventually(lambda: broker.hold.held == 1, message="pull parked")
    await send(client, broker.addr, "LF", b"unwanted", tags="other")
    await send(client, broker.addr, "LF", b"yes", tags="wanted")
    resp = await asyncio.wait_for(waiting, 10)
    assert bodies(resp) == [b"yes"]


async def test_consumer_offsets(broker: BrokerController, client: RemotingClient) -> None:
    await send(client, broker.addr, "O", b"x")
    fields = {"consumerGroup": "G1", "topic": "O", "queueId": "0"}
    first = await client.invoke(broker.addr, RemotingCommand.request(RequestCode.QUERY_CONSUMER_OFFSET, fields))
    assert first.code == 0 and first.field("offset") == "0"  # new group, queue starting at 0
    await client.invoke(broker.addr, RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET,
                                                             {**fields, "commitOffset": "1"}))
    await client.invoke(broker.addr, RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET,
                                                             {**fields, "commitOffset": "-1"}))
    assert (await client.invoke(broker.addr, RemotingCommand.request(14, fields))).field("offset") == "1"
    await client.invoke(broker.addr, pull_request("O", 1, group="G1", flags=SUBSCRIPTION | COMMIT, commit=5))
    assert broker.offsets.query_offset("G1", "O", 0) == 5
    stats = await client.invoke(broker.addr, RemotingCommand.request(RequestCode.GET_CONSUME_STATS,
                                                                     {"consumerGroup": "G1", "topic": "O"}))
    table = fastjson.loads(bytes(stats.body or b""))["offsetTable"]  # keyed by MessageQueue objects (fastjson)
    entry = table[fastjson.MQKey("O", broker.config.broker_name, 0)]
    assert entry["brokerOffset"] == 1 and entry["consumerOffset"] == 5


async def test_offsets_persist_across_restart(tmp_path: Path, namesrv: NamesrvController,
                                              client: RemotingClient) -> None:
    b = await start_broker(tmp_path, "broker-p", namesrv.addr)
    b.offsets.commit_offset("G", "T", 1, 42)
    await b.stop()
    text = (tmp_path / "broker-p-0" / "config" / "consumerOffset.json").read_text()
    assert text == '{"offsetTable":{"T@G":{1:42}}}'  # RocketMQ's fastjson form
    b2 = await start_broker(tmp_path, "broker-p", namesrv.addr)
    try:
        assert b2.offsets.query_offset("G", "T", 1) == 42
    finally:
        await b2.stop()


async def test_membership_and_notification(broker: BrokerController) -> None:
    notified: list[str] = []

    def on_notify(req: RemotingCommand, conn: Connection) -> None:
        notified.append(req.field("consumerGroup") or "")

    first, second = RemotingClient(), RemotingClient()
    first.register(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, on_notify)
    try:
        for cid, c in (("c1", first), ("c2", second)):
            hb = {"clientID": cid, "consumerDataSet": [{"groupName": "MG", "consumeType": "CONSUME_PASSIVELY",
                                                         "messageModel": "CLUSTERING",
                                                         "subscriptionDataSet": [{"topic": "T", "subString": "*"}]}]}
            assert (await c.invoke(broker.addr, RemotingCommand.request(34, None, json.dumps(hb).encode()))).code == 0
        await eventually(lambda: "MG" in notified, message="first consumer notified of the second")
        listed = await first.invoke(broker.addr, RemotingCommand.request(38, {"consumerGroup": "MG"}))
        assert json.loads(bytes(listed.body or b"")) == {"consumerIdList": ["c1", "c2"]}
        await second.close()
        await eventually(lambda: broker.clients.consumers["MG"].client_ids() == ["c1"], message="c2 dropped")
        empty = await first.invoke(broker.addr, RemotingCommand.request(38, {"consumerGroup": "none"}))
        assert empty.code == ResponseCode.SYSTEM_ERROR and "no consumer for this group" in (empty.remark or "")
    finally:
        await first.close()
        await second.close()


async def test_lock_batch(broker: BrokerController, client: RemotingClient) -> None:
    mqs = [{"topic": "T", "brokerName": "broker-a", "queueId": i} for i in range(2)]
    body = json.dumps({"consumerGroup": "OG", "clientId": "c1", "mqSet": mqs}).encode()
    got = await client.invoke(broker.addr, RemotingCommand.request(RequestCode.LOCK_BATCH_MQ, None, body))
    assert len(json.loads(bytes(got.body or b""))["lockOKMQSet"]) == 2
    other = json.dumps({"consumerGroup": "OG", "clientId": "c2", "mqSet": mqs}).encode()
    refused = await client.invoke(broker.addr, RemotingCommand.request(RequestCode.LOCK_BATCH_MQ, None, other))
    assert json.loads(bytes(refused.body or b""))["lockOKMQSet"] == []
    await client.invoke(broker.addr, RemotingCommand.request(RequestCode.UNLOCK_BATCH_MQ, None, body))
    again = await client.invoke(broker.addr, RemotingCommand.request(RequestCode.LOCK_BATCH_MQ, None, other))
    assert len(json.loads(bytes(again.body or b""))["lockOKMQSet"]) == 2


async def test_delayed_message_arrives_no_earlier_than_its_level(broker: BrokerController,
                                                                  client: RemotingClient) -> None:
    sent_at = time.time() * 1000
    await send(client, broker.addr, "D", b"later", extra="DELAY\x011")  # level 1 = 1 s here
    assert broker.store is not None and broker.store.get_max_offset_in_queue("D", 0) == 0

    def delivered() -> bool:
        return broker.store is not None and broker.store.get_max_offset_in_queue("D", 0) == 1

    await eventually(delivered, timeout=10, message="delayed message delivered")
    resp = await client.invoke(broker.addr, pull_request("D", 0))
    [record] = list(decode_records(bytes(resp.body or b"")))
    assert record.store_timestamp - sent_at >= 1000 - 50  # store clocks are ms; allow rounding
    props = parse_properties(record.properties)
    assert "DELAY" not in props and "REAL_TOPIC" not in props and props["TAGS"] == "a"


async def test_send_back_goes_to_retry_then_dlq(broker: BrokerController, client: RemotingClient) -> None:
    resp = await send(client, broker.addr, "R", b"fail-me")
    from pocketmq.common.record import decode_message_id

    phys = decode_message_id((resp.ext_fields or {})["msgId"])[2]
    back = {"offset": str(phys), "group": "RG", "delayLevel": "1", "originMsgId": "ORIG", "maxReconsumeTimes": "1"}
    assert (await client.invoke(broker.addr, RemotingCommand.request(36, back))).code == 0
    assert broker.store is not None

    def retried() -> bool:
        return broker.store is not None and broker.store.get_max_offset_in_queue("%RETRY%RG", 0) == 1

    await eventually(retried, timeout=10, message="message in the retry topic")
    retry = await client.invoke(broker.addr, pull_request("%RETRY%RG", 0, group="RG"))
    [record] = list(decode_records(bytes(retry.body or b"")))
    assert record.reconsume_times == 1 and bytes(record.body) == b"fail-me"
    props = parse_properties(record.properties)
    assert props["RETRY_TOPIC"] == "R" and props["ORIGIN_MESSAGE_ID"] == "ORIG"
    again = {**back, "offset": str(record.physical_offset)}
    assert (await client.invoke(broker.addr, RemotingCommand.request(36, again))).code == 0
    assert broker.store.get_max_offset_in_queue("%DLQ%RG", 0) == 1  # reconsumed max times: dead letter


async def test_a_parked_pull_is_released_when_its_consumer_leaves(broker: BrokerController,
                                                                  client: RemotingClient) -> None:
    await send(client, broker.addr, "LL", b"x")
    consumer = RemotingClient()
    waiting = asyncio.ensure_future(
        consumer.invoke(broker.addr, pull_request("LL", 1, flags=SUBSCRIPTION | SUSPEND, suspend_ms=30_000), 40))
    await eventually(lambda: broker.hold.held == 1, message="pull parked")
    await consumer.close()
    # Not held for its 30 s: nobody is left to answer.
    await eventually(lambda: broker.hold.held == 0, timeout=5, message="parked pull released")
    assert waiting.done() and isinstance(waiting.exception(), RemotingClosedError)
    await send(client, broker.addr, "LL", b"y")  # an arrival finds nothing parked, and the broker goes on
    resp = await client.invoke(broker.addr, pull_request("LL", 1))
    assert resp.code == 0 and bodies(resp) == [b"y"]
