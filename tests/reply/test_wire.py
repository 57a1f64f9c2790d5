"""Request-reply on the wire, with frames built by hand as RocketMQ 4.9's Java client sends them (JSON headers,
``extFields`` strings; :mod:`tests.transaction.raw`), independent of PocketMQ's SDK: a request (SEND_MESSAGE_V2
with ``CORRELATION_ID``, ``REPLY_TO_CLIENT``, ``TTL``), its reply with SEND_REPLY_MESSAGE_V2 (325) or
SEND_REPLY_MESSAGE (324), and the PUSH_REPLY_MESSAGE_TO_CLIENT (326) that arrives on the requester's own
connection with every field Java's ``ReplyMessageRequestHeader`` requires. Then the refusals: a requester
that refuses, does not answer or is gone; a reply without ``REPLY_TO_CLIENT`` or ``CORRELATION_ID``; and
``storeReplyMessageEnable``."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator

import pytest

from pocketmq.broker.controller import BrokerController
from pocketmq.common.message import parse_properties
from pocketmq.common.record import MessageRecord, decode_record
from pocketmq.namesrv.controller import NamesrvController
from tests.helpers import eventually
from tests.transaction.raw import Frame, RawClient, properties

REQUESTER = "127.0.0.1@java-requester"
REPLY_TOPIC = "DefaultCluster_REPLY_TOPIC"
TOPIC = "RpcWire"
#: Every field Java's ReplyMessageRequestHeader marks @CFNotNull: a Java requester refuses a 326 without one.
JAVA_REQUIRED = {"producerGroup", "topic", "defaultTopic", "defaultTopicQueueNums", "queueId", "sysFlag",
                 "bornTimestamp", "flag", "bornHost", "storeHost", "storeTimestamp"}


async def java_client(addr: str, client_id: str, producer_group: str) -> RawClient:
    """A connection that announced itself as a Java 4.9 client does (its group and the inner producer)."""
    client = await RawClient.connect(addr)
    heartbeat = {"clientID": client_id, "consumerDataSet": [],
                 "producerDataSet": [{"groupName": producer_group}, {"groupName": "CLIENT_INNER_PRODUCER"}]}
    answer = await client.request(34, {}, json.dumps(heartbeat).encode())
    assert answer.code == 0, answer
    return client


@pytest.fixture
async def requester(broker: BrokerController) -> AsyncIterator[RawClient]:
    client = await java_client(broker.addr, REQUESTER, "RequestPG")
    yield client
    await client.close()


@pytest.fixture
async def replier(broker: BrokerController) -> AsyncIterator[RawClient]:
    client = await java_client(broker.addr, "127.0.0.1@java-replier", "ReplyPG")
    yield client
    await client.close()


def v2_fields(group: str, topic: str, props: str, queue_id: int = 0) -> dict[str, str]:
    return {"a": group, "b": topic, "c": "TBW102", "d": "4", "e": str(queue_id), "f": "0",
            "g": str(int(time.time() * 1000)), "h": "0", "i": props, "j": "0", "k": "false", "m": "false"}


def v1_fields(group: str, topic: str, props: str) -> dict[str, str]:
    return {"producerGroup": group, "topic": topic, "defaultTopic": "TBW102", "defaultTopicQueueNums": "4",
            "queueId": "0", "sysFlag": "0", "bornTimestamp": str(int(time.time() * 1000)), "flag": "0",
            "properties": props, "reconsumeTimes": "0", "unitMode": "false", "batch": "false"}


def reply_props(correlation_id: str, requester: str = REQUESTER, **extra: str) -> str:
    """What MessageUtil.createReplyMessage puts on a reply, plus what the Java producer adds when sending it."""
    return properties(MSG_TYPE="reply", CORRELATION_ID=correlation_id, REPLY_TO_CLIENT=requester, TTL="3000",
                      UNIQ_KEY=f"REPLY-{correlation_id}", WAIT="true", **extra)


def stored(broker: BrokerController, topic: str, queue_id: int = 0) -> list[MessageRecord]:
    assert broker.store is not None
    result = broker.store.get_messages("test", topic, queue_id, 0, 32)
    try:
        return [r for r in (decode_record(b, 0, check_crc=False) for b in result.message_buffers)
                if isinstance(r, MessageRecord)]
    finally:
        result.release()


def reply_topic_is_empty(broker: BrokerController) -> bool:
    assert broker.store is not None
    return broker.store.get_max_offset_in_queue(REPLY_TOPIC, 0) == 0


async def test_request_reply_round_trip_as_the_java_client_sends_it(
        broker: BrokerController, requester: RawClient, replier: RawClient) -> None:
    # The request: an ordinary SEND_MESSAGE_V2 whose properties are what DefaultMQProducer.request adds.
    request_props = properties(CORRELATION_ID="corr-1", REPLY_TO_CLIENT=REQUESTER, TTL="3000",
                               UNIQ_KEY="REQ-UNIQ-1", WAIT="true")
    sent = await requester.request(310, v2_fields("RequestPG", TOPIC, request_props), b"what time is it?")
    assert sent.code == 0, sent
    (record,) = stored(broker, TOPIC)
    props = record.properties_map
    assert (props["CORRELATION_ID"], props["REPLY_TO_CLIENT"], props["TTL"]) == ("corr-1", REQUESTER, "3000")
    assert props["CLUSTER"] == "DefaultCluster"  # what createReplyMessage makes the reply topic from

    # The consumer's reply, SEND_REPLY_MESSAGE_V2 to <cluster>_REPLY_TOPIC.
    answer = await replier_sends(replier, requester, 325,
                                 v2_fields("ReplyPG", f"{props['CLUSTER']}_REPLY_TOPIC", reply_props("corr-1")),
                                 b"noon", broker.addr)
    assert answer.code == 0, answer
    assert (answer.ext["msgId"], answer.ext["queueId"], answer.ext["queueOffset"]) == ("0", "0", "0")
    assert answer.ext["MSG_REGION"] == "DefaultRegion" and answer.ext["TRACE_ON"] == "true"
    assert reply_topic_is_empty(broker)  # pushed, not stored for consumers
    runtime = broker._extra_runtime_info()
    assert runtime["replyPushedCount"] == "1" and runtime["replyFailedCount"] == "0"


async def replier_sends(replier: RawClient, requester: RawClient, code: int, fields: dict[str, str],
                        body: bytes, broker_addr: str) -> Frame:
    """Send a reply; check the push that reaches the requester's connection and answer it SUCCESS."""
    pending = asyncio.ensure_future(replier.request(code, fields, body))
    push = await asyncio.wait_for(requester.server_requests.get(), 5)
    assert push.code == 326 and not push.flag & 3  # a request the requester must answer
    assert set(push.ext) >= JAVA_REQUIRED, set(push.ext)
    assert push.body == body
    assert push.ext["topic"] == REPLY_TOPIC and push.ext["producerGroup"] == "ReplyPG"
    assert push.ext["bornHost"] == replier.local_addr
    assert push.ext["storeHost"] == broker_addr
    assert abs(int(push.ext["storeTimestamp"]) - time.time() * 1000) < 60_000
    sent_props = parse_properties(fields.get("i") or fields["properties"])
    pushed_props = parse_properties(push.ext["properties"])
    assert {k: pushed_props[k] for k in sent_props} == sent_props
    assert int(pushed_props["PUSH_REPLY_TIME"]) > 0
    requester.respond(push, 0)
    return await pending


async def test_reply_with_the_v1_header(broker: BrokerController, requester: RawClient, replier: RawClient) -> None:
    answer = await replier_sends(replier, requester, 324, v1_fields("ReplyPG", REPLY_TOPIC, reply_props("corr-v1")),
                                 b"v1 reply", broker.addr)
    assert answer.code == 0 and answer.ext["msgId"] == "0", answer
    assert reply_topic_is_empty(broker)


async def test_a_requester_that_refuses_or_does_not_answer(broker: BrokerController, requester: RawClient,
                                                           replier: RawClient) -> None:
    pending = asyncio.ensure_future(replier.request(325, v2_fields("ReplyPG", REPLY_TOPIC, reply_props("c2")), b"x"))
    push = await asyncio.wait_for(requester.server_requests.get(), 5)
    requester.respond(push, 1, "no request waits for c2")
    refused = await pending
    assert refused.code == 1 and refused.remark is not None
    assert REQUESTER in refused.remark and "no request waits for c2" in refused.remark

    assert broker.replies is not None
    broker.replies.push_timeout = 0.3
    silent = await replier.request(325, v2_fields("ReplyPG", REPLY_TOPIC, reply_props("c3")), b"x")
    assert silent.code == 1 and "fail" in (silent.remark or ""), silent
    assert reply_topic_is_empty(broker)
    assert broker._extra_runtime_info()["replyFailedCount"] == "2"


async def test_a_requester_that_is_gone(broker: BrokerController, replier: RawClient) -> None:
    gone = await java_client(broker.addr, "127.0.0.1@gone", "GonePG")
    await gone.close()
    await eventually(lambda: broker.clients.find_channel("127.0.0.1@gone") is None, message="connection closed")
    answer = await replier.request(325, v2_fields("ReplyPG", REPLY_TOPIC, reply_props("c4", "127.0.0.1@gone")),
                                   b"too late")
    assert answer.code == 1, answer
    assert answer.remark == "push reply message fail, channel of <127.0.0.1@gone> not found."
    never = await replier.request(325, v2_fields("ReplyPG", REPLY_TOPIC, reply_props("c5", "127.0.0.1@never")),
                                  b"nobody")
    assert never.code == 1 and "<127.0.0.1@never> not found" in (never.remark or "")
    assert reply_topic_is_empty(broker)


async def test_a_reply_that_cannot_be_matched_is_refused(broker: BrokerController, requester: RawClient,
                                                         replier: RawClient) -> None:
    no_client = properties(MSG_TYPE="reply", CORRELATION_ID="c6", TTL="3000", WAIT="true")
    answer = await replier.request(325, v2_fields("ReplyPG", REPLY_TOPIC, no_client), b"x")
    assert answer.code == 13 and answer.remark == "reply message properties[REPLY_TO_CLIENT] is null", answer
    no_correlation = properties(MSG_TYPE="reply", REPLY_TO_CLIENT=REQUESTER, TTL="3000", WAIT="true")
    answer = await replier.request(324, v1_fields("ReplyPG", REPLY_TOPIC, no_correlation), b"x")
    assert answer.code == 13 and answer.remark == "reply message properties[CORRELATION_ID] is null", answer
    empty = await replier.request(325, v2_fields("ReplyPG", REPLY_TOPIC, reply_props("c7")), b"")
    assert empty.code == 13, empty
    bad_queue = await replier.request(325, v2_fields("ReplyPG", REPLY_TOPIC, reply_props("c8"), queue_id=5), b"x")
    assert bad_queue.code == 1 and "queueId[5] is illegal" in (bad_queue.remark or ""), bad_queue
    missing_header = await replier.request(325, {"a": "ReplyPG"}, b"x")
    assert missing_header.code != 0, missing_header
    assert requester.server_requests.empty()  # nothing was pushed
    assert reply_topic_is_empty(broker)


async def test_the_reply_topic_is_routable(broker: BrokerController, namesrv: NamesrvController) -> None:
    config = broker.topics.get(REPLY_TOPIC)
    assert config is not None and (config.read_queue_nums, config.write_queue_nums, config.perm) == (1, 1, 6)
    client = await RawClient.connect(namesrv.addr)
    try:
        async def routed() -> bool:
            route = await client.request(105, {"topic": REPLY_TOPIC})  # GET_ROUTEINFO_BY_TOPIC
            return route.code == 0 and b'"brokerName":"broker-a"' in route.body

        await eventually(routed, message="the reply topic's route")
    finally:
        await client.close()


class TestStoredReplies:
    """storeReplyMessageEnable=true: a delivered reply is stored too, in the reply topic; a refused one is not."""

    @pytest.fixture
    def broker_props(self) -> dict[str, str]:
        return {"storeReplyMessageEnable": "true"}

    async def test_delivered_replies_are_stored(self, broker: BrokerController, requester: RawClient,
                                                replier: RawClient) -> None:
        answer = await replier_sends(replier, requester, 325,
                                     v2_fields("ReplyPG", REPLY_TOPIC, reply_props("s1")), b"kept", broker.addr)
        assert answer.code == 0 and answer.ext["msgId"] != "0" and answer.ext["queueOffset"] == "0", answer
        (record,) = stored(broker, REPLY_TOPIC)
        assert record.body == b"kept" and record.properties_map["CORRELATION_ID"] == "s1"
        assert "WAIT" not in record.properties_map

        refused = await replier.request(325, v2_fields("ReplyPG", REPLY_TOPIC,
                                                       reply_props("s2", "127.0.0.1@nobody")), b"dropped")
        assert refused.code == 1
        assert len(stored(broker, REPLY_TOPIC)) == 1


async def test_store_reply_message_enable_changes_at_run_time(broker: BrokerController, requester: RawClient,
                                                              replier: RawClient) -> None:
    changed = await replier.request(25, {}, b"storeReplyMessageEnable=true\n")  # UPDATE_BROKER_CONFIG
    assert changed.code == 0, changed
    assert broker.config.store_reply_message_enable
    answer = await replier_sends(replier, requester, 325, v2_fields("ReplyPG", REPLY_TOPIC, reply_props("rt")),
                                 b"now stored", broker.addr)
    assert answer.code == 0 and answer.ext["msgId"] != "0"
    assert [r.body for r in stored(broker, REPLY_TOPIC)] == [b"now stored"]
