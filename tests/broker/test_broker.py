"""A broker in the test's event loop with a real name server, driven over the wire."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from pocketmq.broker.controller import BrokerController
from pocketmq.broker.metadata import load_topics
from pocketmq.common import compiled
from pocketmq.common.batch import BatchEntry, encode_batch_body
from pocketmq.common.consumer import ConsumeType, MessageModel
from pocketmq.common.record import decode_message_id
from pocketmq.namesrv.controller import NamesrvController
from pocketmq.remoting import route as rd
from pocketmq.remoting.client import RemotingClient
from pocketmq.remoting.codes import RequestCode, ResponseCode, SerializeType
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.frame import encode_frame
from pocketmq.remoting.headers import (
    CreateTopicRequestHeader,
    SendMessageRequestHeader,
    SendMessageRequestHeaderV2,
)
from pocketmq.store.config import BrokerRole
from pocketmq.store.message import MessageExtBatch, MessageExtBrokerInner
from pocketmq.store.results import PutMessageResult
from tests.cluster import start_broker
from tests.helpers import eventually


@pytest.fixture
async def client() -> AsyncIterator[RemotingClient]:
    c = RemotingClient()
    yield c
    await c.close()


def v2(topic: str, *, queue_id: int = 0, props: str = "TAGS\x01tagA\x02KEYS\x01k1 k2", sys_flag: int = 0,
       default_topic: str = "TBW102") -> dict[str, str]:
    return SendMessageRequestHeaderV2("PG", topic, default_topic, 4, queue_id, sys_flag,
                                      int(time.time() * 1000), 0, props).to_fields()


async def send(client: RemotingClient, addr: str, topic: str, body: bytes = b"hello", code: int = 310,
               **kw: object) -> RemotingCommand:
    return await client.invoke(addr, RemotingCommand.request(code, v2(topic, **kw), body))  # type: ignore[arg-type]


async def test_send_v2_auto_creates_topic_and_registers_route(
    broker: BrokerController, namesrv: NamesrvController, client: RemotingClient
) -> None:
    first = await send(client, broker.addr, "Orders")
    assert first.code == ResponseCode.SUCCESS, first
    fields = first.ext_fields or {}
    assert set(fields) >= {"msgId", "queueId", "queueOffset", "MSG_REGION", "TRACE_ON"}
    assert (fields["queueId"], fields["queueOffset"]) == ("0", "0")
    host, port, phys = decode_message_id(fields["msgId"])
    assert (host, port, phys) == ("127.0.0.1", broker.port, 0)
    second = await send(client, broker.addr, "Orders")
    assert (second.ext_fields or {})["queueOffset"] == "1"
    route = namesrv.routes.pickup_topic_route_data("Orders")
    assert route is not None
    assert [(q.broker_name, q.write_queue_nums, q.perm) for q in route.queue_datas] == [("broker-a", 4, 6)]
    record = broker.store.look_message_by_offset(phys) if broker.store else None
    assert record is not None and bytes(record.body) == b"hello" and record.topic == "Orders"
    assert "CLUSTER\x01DefaultCluster" in record.properties and "WAIT" not in record.properties


async def test_send_message_v1_full_field_names(broker: BrokerController, client: RemotingClient) -> None:
    header = SendMessageRequestHeader("PG", "V1Topic", "TBW102", 4, 1, 0, 1, 7, "TAGS\x01x").to_fields()
    resp = await client.invoke(broker.addr, RemotingCommand.request(RequestCode.SEND_MESSAGE, header, b"v1"))
    assert resp.code == 0 and (resp.ext_fields or {})["queueId"] == "1"


async def test_explicit_topic_creation_then_send(broker: BrokerController, namesrv: NamesrvController,
                                                client: RemotingClient) -> None:
    header = CreateTopicRequestHeader("Made", "TBW102", 2, 2, 6, "SINGLE_TAG").to_fields()
    resp = await client.invoke(broker.addr, RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, header))
    assert resp.code == 0
    route = namesrv.routes.pickup_topic_route_data("Made")
    assert route is not None and route.queue_datas[0].write_queue_nums == 2
    assert (await send(client, broker.addr, "Made", queue_id=1)).code == 0
    bad = await send(client, broker.addr, "Made", queue_id=2)
    assert bad.code == ResponseCode.SYSTEM_ERROR and "queueId[2] is illegal" in (bad.remark or "")
    all_topics = await client.invoke(broker.addr, RemotingCommand.request(RequestCode.GET_ALL_TOPIC_CONFIG))
    wrapper = rd.TopicConfigSerializeWrapper.from_json_dict(json.loads(bytes(all_topics.body or b"")))
    assert wrapper.topic_config_table["Made"].read_queue_nums == 2
    assert "TBW102" in wrapper.topic_config_table


async def test_created_topic_gets_its_consume_queue_files_before_any_message(
        broker: BrokerController, client: RemotingClient) -> None:
    """An administrator's new topic gets every queue's first file (empty, not mapped) without a single send, so
    that the first message of each queue only opens it; auto-created topics still get theirs on first use (a
    topic that never gets a message costs no disk)."""
    header = CreateTopicRequestHeader("Ready", "TBW102", 3, 5, 6, "SINGLE_TAG").to_fields()
    resp = await client.invoke(broker.addr, RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, header))
    assert resp.code == 0
    store = broker.store
    assert store is not None
    root = Path(store.config.consume_queue_dir)
    await eventually(lambda: all((root / "Ready" / str(q) / f"{0:020d}").exists() for q in range(5)),
                     message="queues' files prepared")
    assert not (root / "Ready" / "5").exists() and store.find_consume_queue("Ready", 0) is None  # nothing mapped
    assert (await send(client, broker.addr, "Ready", queue_id=4)).code == 0
    assert store.queue_ready("Ready", 4) and store.get_max_offset_in_queue("Ready", 4) == 1
    assert (await send(client, broker.addr, "AutoMade", queue_id=0)).code == 0
    assert store.queue_ready("AutoMade", 0) and not (root / "AutoMade" / "1").exists()


@pytest.mark.parametrize(
    ("topic", "body", "kw", "code", "remark"),
    [
        ("bad topic!", b"x", {}, ResponseCode.MESSAGE_ILLEGAL, "illegal characters"),
        ("x" * 128, b"x", {}, ResponseCode.MESSAGE_ILLEGAL, "longer than"),
        ("SCHEDULE_TOPIC_XXXX", b"x", {}, ResponseCode.NO_PERMISSION, "forbidden"),
        ("Empty", b"", {}, ResponseCode.MESSAGE_ILLEGAL, "body is empty"),
        ("Big", b"x" * (4 * 1024 * 1024 + 1), {}, ResponseCode.MESSAGE_ILLEGAL, "illegal"),
        ("NoDefault", b"x", {"default_topic": "NOPE"}, ResponseCode.TOPIC_NOT_EXIST, "not exist"),
        ("Prepared", b"x", {"sys_flag": 0x4, "props": "DELAY\x013"}, ResponseCode.MESSAGE_ILLEGAL, "cannot be delayed"),
    ],
)
async def test_bad_sends_get_clear_errors_and_store_nothing(
    broker: BrokerController, client: RemotingClient, topic: str, body: bytes, kw: dict[str, object], code: int,
    remark: str,
) -> None:
    assert broker.store is not None
    before = broker.store.max_phy_offset
    resp = await send(client, broker.addr, topic, body, **kw)  # type: ignore[arg-type]
    assert resp.code == code, resp
    assert remark in (resp.remark or "")
    assert broker.store.max_phy_offset == before


async def test_batch_send(broker: BrokerController, client: RemotingClient) -> None:
    from pocketmq.client.core.message import Message, encode_batch

    body = encode_batch([Message("Batch", f"m{i}".encode(), tags="t") for i in range(5)])
    resp = await send(client, broker.addr, "Batch", body, code=RequestCode.SEND_BATCH_MESSAGE, props="WAIT\x01true")
    assert resp.code == 0, resp
    ids = (resp.ext_fields or {})["msgId"].split(",")
    assert len(ids) == 5
    offsets = [decode_message_id(i)[2] for i in ids]
    assert offsets == sorted(offsets)
    assert broker.store is not None
    bodies = [bytes(broker.store.look_message_by_offset(o).body) for o in offsets]  # type: ignore[union-attr]
    assert bodies == [f"m{i}".encode() for i in range(5)]
    maxo = await client.invoke(broker.addr, RemotingCommand.request(RequestCode.GET_MAX_OFFSET,
                                                                    {"topic": "Batch", "queueId": "0"}))
    assert maxo.field("offset") == "5"


async def test_async_master_puts_are_answered_with_no_task(broker: BrokerController, client: RemotingClient) -> None:
    """ASYNC_FLUSH on an ASYNC_MASTER: once a queue has its consume-queue file, the one put path returns the
    result itself (the send is answered inside the read callback), for single messages and batches."""
    assert (await send(client, broker.addr, "Fast", b"first")).code == 0
    assert broker.store is not None
    single = broker.store.put(MessageExtBrokerInner(topic="Fast", body=b"x", queue_id=0))
    assert isinstance(single, PutMessageResult) and single.is_ok
    entries = [BatchEntry(0, b"b", "")] * 2
    batch = broker.store.put_batch(MessageExtBatch(topic="Fast", body=encode_batch_body(entries), queue_id=0))
    assert isinstance(batch, PutMessageResult) and batch.is_ok
    assert broker.store.get_max_offset_in_queue("Fast", 0) == 4


async def test_offsets_time_search_and_view_by_id(broker: BrokerController, client: RemotingClient) -> None:
    ids = []
    for i in range(3):
        resp = await send(client, broker.addr, "Q", f"b{i}".encode())
        ids.append((resp.ext_fields or {})["msgId"])
    fields = {"topic": "Q", "queueId": "0"}
    assert (await client.invoke(broker.addr, RemotingCommand.request(30, fields))).field("offset") == "3"
    assert (await client.invoke(broker.addr, RemotingCommand.request(31, fields))).field("offset") == "0"
    earliest = await client.invoke(broker.addr, RemotingCommand.request(32, fields))
    stamp = int(earliest.field("timestamp") or 0)
    assert abs(stamp - time.time() * 1000) < 60_000
    search = await client.invoke(broker.addr, RemotingCommand.request(29, {**fields, "timestamp": str(stamp)}))
    assert search.field("offset") == "0"
    _, _, phys = decode_message_id(ids[2])
    view = await client.invoke(broker.addr, RemotingCommand.request(33, {"offset": str(phys)}))
    assert view.code == 0 and b"b2" in bytes(view.body or b"")
    missing = await client.invoke(broker.addr, RemotingCommand.request(33, {"offset": str(10**12)}))
    assert missing.code == ResponseCode.SYSTEM_ERROR


async def test_runtime_info(broker: BrokerController, client: RemotingClient) -> None:
    await send(client, broker.addr, "Stats")
    resp = await client.invoke(broker.addr, RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO))
    table = json.loads(bytes(resp.body or b""))["table"]
    assert table["brokerRole"] == "ASYNC_MASTER"
    assert int(table["msgPutTotalTodayNow"]) == 1
    assert int(table["commitLogMaxOffset"]) > 0
    assert len(table["putTps"].split()) == 3
    assert table["compiledBuild"] == compiled.ACTIVE


@pytest.mark.parametrize("serialize_type", [SerializeType.JSON, SerializeType.MSGPACK])
async def test_heartbeat_dialects_and_unregister(broker: BrokerController, client: RemotingClient,
                                                 serialize_type: int) -> None:
    cpp_style = {"clientID": "10.0.0.1@123", "producerDataSet": [{"groupName": "PG"}],
                 "consumerDataSet": [{"groupName": "CG", "consumeType": 1, "messageModel": 1, "consumeFromWhere": 0,
                                      "subscriptionDataSet": [{"topic": "T", "subString": "a || b",
                                                               "tagsSet": ["a", "b"], "codeSet": [97, 98],
                                                               "subVersion": "123"}]}]}
    body = rd.encode_body(cpp_style, serialize_type)
    resp = await client.invoke(broker.addr, RemotingCommand.request(34, None, body, serialize_type=serialize_type))
    assert resp.code == 0
    group = broker.clients.consumers["CG"]
    assert group.message_model is MessageModel.CLUSTERING and group.consume_type is ConsumeType.CONSUME_PASSIVELY
    assert group.subscriptions["T"].code_set == [97, 98] and group.subscriptions["T"].sub_version == 123
    assert broker.topics.get("%RETRY%CG") is not None
    assert broker.clients.producer_count() == 1
    unreg = await client.invoke(broker.addr, RemotingCommand.request(
        35, {"clientID": "10.0.0.1@123", "producerGroup": "PG", "consumerGroup": "CG"}))
    assert unreg.code == 0
    assert broker.clients.producer_count() == 0 and not broker.clients.consumers["CG"].channels
    bad = await client.invoke(broker.addr, RemotingCommand.request(34, None, b"{not json"))
    assert bad.code == ResponseCode.SYSTEM_ERROR


async def test_slave_refuses_sends(tmp_path: Path, namesrv: NamesrvController, client: RemotingClient) -> None:
    slave = await start_broker(tmp_path, "broker-s", namesrv.addr, broker_role=BrokerRole.SLAVE, broker_id=1)
    try:
        resp = await send(client, slave.addr, "T")
        assert resp.code == ResponseCode.SERVICE_NOT_AVAILABLE and "slave" in (resp.remark or "")
    finally:
        await slave.stop()


async def test_auto_create_disabled(tmp_path: Path, namesrv: NamesrvController, client: RemotingClient) -> None:
    b = await start_broker(tmp_path, "broker-n", namesrv.addr, auto_create_topic_enable=False)
    try:
        resp = await send(client, b.addr, "Fresh")
        assert resp.code == ResponseCode.TOPIC_NOT_EXIST
    finally:
        await b.stop()


async def test_restart_keeps_topics_and_messages(tmp_path: Path, namesrv: NamesrvController,
                                                 client: RemotingClient) -> None:
    b = await start_broker(tmp_path, "broker-r", namesrv.addr)
    for i in range(10):
        assert (await send(client, b.addr, "Durable", f"m{i}".encode())).code == 0
    await b.stop()
    assert namesrv.routes.pickup_topic_route_data("Durable") is None  # unregistered on stop
    b2 = await start_broker(tmp_path, "broker-r", namesrv.addr)
    try:
        assert b2.topics.get("Durable") is not None
        assert namesrv.routes.pickup_topic_route_data("Durable") is not None
        resp = await send(client, b2.addr, "Durable", b"after")
        assert (resp.ext_fields or {})["queueOffset"] == "10"
    finally:
        await b2.stop()


async def test_topic_change_registers_at_once_and_stop_ends_every_task_the_broker_started(
        tmp_path: Path, namesrv: NamesrvController) -> None:
    before = asyncio.all_tasks()
    b = await start_broker(tmp_path, "broker-t", namesrv.addr)  # registers every 30 s
    client = RemotingClient()
    try:
        header = CreateTopicRequestHeader("Fresh", "TBW102", 2, 2, 6, "SINGLE_TAG").to_fields()
        resp = await client.invoke(b.addr, RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, header))
        assert resp.code == ResponseCode.SUCCESS
        await eventually(lambda: namesrv.routes.pickup_topic_route_data("Fresh") is not None, timeout=5,
                         message="re-registered at once on a topic change")
        await eventually(lambda: any(t.topic_name == "Fresh" for t in load_topics(b.topics_path).topics), timeout=5,
                         message="topics persisted (journalled) after the change")
    finally:
        await client.close()
        await b.stop()
    assert asyncio.all_tasks() - before <= {asyncio.current_task()}


async def test_requests_received_before_the_peer_leaves_still_take_effect(broker: BrokerController) -> None:
    """Oneway sends to fresh queues (each needs a consume-queue file made in a thread first), written and the
    socket closed at once: the broker still stores every one, as RocketMQ does; only answers are dropped."""
    assert broker.store is not None
    _reader, writer = await asyncio.open_connection(*broker.server.address)
    for queue_id in range(4):
        for i in range(5):
            request = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, v2("Leaving", queue_id=queue_id),
                                              f"q{queue_id}-{i}".encode())
            request.flag |= 2  # oneway
            writer.write(encode_frame(request))
    await writer.drain()
    writer.close()
    await writer.wait_closed()
    store = broker.store
    await eventually(lambda: sum(store.get_max_offset_in_queue("Leaving", q) for q in range(4)) == 20,
                     message="every message received before the close stored")
