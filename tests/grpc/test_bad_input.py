"""Bad input to the gRPC proxy, sent as raw calls: each gets the gRPC status and ``apache.rocketmq.v2.Code`` a
RocketMQ 5 proxy gives, the proxy keeps serving, and nothing stored is lost. Also the calls not served
(NOT_IMPLEMENTED, never a hang), ``rmq-admin`` seeing proxy clients, and the per-call metrics."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf.duration_pb2 import Duration
from grpc import aio

from pocketmq.admin.api import AdminClient, AdminError
from pocketmq.admin.api_ops import consumer_connection
from pocketmq.common.recall import RecallHandle
from pocketmq.proxy.apis import definition_pb2 as pb
from pocketmq.proxy.apis import service_pb2 as spb
from tests.grpc.support import ProxyCluster, local_proxy_cluster, proxy_cluster
from tests.helpers import eventually
from tests.pop.java_pop import now_ms

pytestmark = pytest.mark.timeout(90)
Code = pb.Code
SERVICE = "/apache.rocketmq.v2.MessagingService/"


@pytest.fixture(params=["rmq-proxy", "local-mode"])
async def pc(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[ProxyCluster]:
    """Every case against ``rmq-proxy`` and against a broker's own endpoint (local mode: the broker's handlers
    called in-process), which must answer alike."""
    start = proxy_cluster if request.param == "rmq-proxy" else local_proxy_cluster
    async with start(tmp_path, max_message_size=1024,
                     grpc_client_consumer_min_long_polling_timeout_millis=500) as running:
        await running.topic("TBad")
        await running.topic("TFifoOnly", "FIFO")
        yield running


@pytest.fixture
async def channel(pc: ProxyCluster) -> AsyncIterator[aio.Channel]:
    async with aio.insecure_channel(pc.endpoints) as ch:
        yield ch


def metadata(client_id: str = "raw-client@1") -> tuple[tuple[str, str], ...]:
    return (("x-mq-client-id", client_id), ("x-mq-language", "PYTHON"), ("x-mq-client-version", "5.1.2"))


async def call(channel: aio.Channel, method: str, request: Any, response: Any, **kw: Any) -> Any:
    stub: Any = channel.unary_unary(SERVICE + method, request_serializer=lambda m: m.SerializeToString(),
                               response_deserializer=response.FromString)
    return await stub(request, metadata=metadata(), timeout=10, **kw)


def message(topic: str = "TBad", body: bytes = b"hello", **system: Any) -> pb.Message:
    props = pb.SystemProperties(message_id=system.pop("message_id", "01AB"), message_type=pb.NORMAL, **system)
    return pb.Message(topic=pb.Resource(name=topic), body=body, system_properties=props)


async def send(channel: aio.Channel, msg: pb.Message) -> Any:
    return await call(channel, "SendMessage", spb.SendMessageRequest(messages=[msg]), spb.SendMessageResponse)


async def test_a_malformed_protobuf_is_a_grpc_error_and_the_proxy_keeps_serving(pc: ProxyCluster,
                                                                                channel: aio.Channel) -> None:
    raw: Any = channel.unary_unary(SERVICE + "SendMessage", request_serializer=lambda b: b,
                              response_deserializer=lambda b: b)
    with pytest.raises(aio.AioRpcError) as caught:
        await raw(b"\x0a\xff\xff\xff\xff\x0f garbage", metadata=metadata(), timeout=10)
    assert caught.value.code() == grpc.StatusCode.INTERNAL  # what gRPC answers a request it cannot parse
    ok = await send(channel, message())
    assert ok.status.code == Code.OK and ok.entries[0].message_id == "01AB"


async def test_unknown_topics_and_illegal_names(pc: ProxyCluster, channel: aio.Channel) -> None:
    route = await call(channel, "QueryRoute", spb.QueryRouteRequest(
        topic=pb.Resource(name="NoSuchTopic"), endpoints=pb.Endpoints(addresses=[pb.Address(host="h", port=1)])),
        spb.QueryRouteResponse)
    assert route.status.code == Code.TOPIC_NOT_FOUND
    sent = await send(channel, message(topic="NoSuchTopic"))
    assert sent.status.code == Code.TOPIC_NOT_FOUND
    bad = await send(channel, message(topic="bad topic!"))
    assert bad.status.code == Code.ILLEGAL_TOPIC
    system = await send(channel, message(topic="RMQ_SYS_TRANS_HALF_TOPIC"))
    assert system.status.code == Code.ILLEGAL_TOPIC and "system topic" in system.status.message
    group = await call(channel, "QueryAssignment", spb.QueryAssignmentRequest(
        topic=pb.Resource(name="TBad"), group=pb.Resource(name="CID_RMQ_SYS_X"),
        endpoints=pb.Endpoints(addresses=[pb.Address(host="h", port=1)])), spb.QueryAssignmentResponse)
    assert group.status.code == Code.ILLEGAL_CONSUMER_GROUP


async def test_message_checks(pc: ProxyCluster, channel: aio.Channel) -> None:
    too_big = await send(channel, message(body=b"x" * 1025))
    assert too_big.status.code == Code.MESSAGE_BODY_TOO_LARGE and "1024" in too_big.status.message
    empty = await send(channel, message(body=b""))
    assert empty.status.code == Code.MESSAGE_BODY_EMPTY
    wrong_type = await send(channel, message(topic="TFifoOnly"))
    assert wrong_type.status.code == Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE
    assert "expected type is FIFO, but actual type is NORMAL" in wrong_type.status.message
    no_id = await send(channel, message(message_id=""))
    assert no_id.status.code == Code.ILLEGAL_MESSAGE_ID
    system_key = pb.Message(topic=pb.Resource(name="TBad"), body=b"x", user_properties={"UNIQ_KEY": "mine"},
                            system_properties=pb.SystemProperties(message_id="01"))
    assert (await send(channel, system_key)).status.code == Code.ILLEGAL_MESSAGE_PROPERTY_KEY
    bad_tag = await send(channel, message(tag="a|b"))
    assert bad_tag.status.code == Code.ILLEGAL_MESSAGE_TAG
    none = await call(channel, "SendMessage", spb.SendMessageRequest(), spb.SendMessageResponse)
    assert none.status.code == Code.MESSAGE_CORRUPTED


async def test_bad_receipt_handles_ack_nothing_and_the_message_stays(pc: ProxyCluster, channel: aio.Channel) -> None:
    sent = await send(channel, message(message_id="KEEP-ME"))
    assert sent.status.code == Code.OK
    group, topic = pb.Resource(name="GBad"), pb.Resource(name="TBad")
    for handle in ("", "garbage", "0 1 2 3 0 broker-a 0 0 0", "1 1 999999999999 1 0 broker-a 0 0 5"):
        ack = await call(channel, "AckMessage", spb.AckMessageRequest(
            group=group, topic=topic, entries=[spb.AckMessageEntry(message_id="KEEP-ME", receipt_handle=handle)]),
            spb.AckMessageResponse)
        assert ack.status.code == Code.INVALID_RECEIPT_HANDLE, (handle, ack.status)
        change = await call(channel, "ChangeInvisibleDuration", spb.ChangeInvisibleDurationRequest(
            group=group, topic=topic, receipt_handle=handle, message_id="KEEP-ME",
            invisible_duration=Duration(seconds=5)), spb.ChangeInvisibleDurationResponse)
        assert change.status.code == Code.INVALID_RECEIPT_HANDLE, (handle, change.status)
    # The message was not acked, hidden or delivered by any of them: a receive gets it.
    received = await receive(channel, group, "TBad")
    assert [m.system_properties.message_id for m in received] == ["KEEP-ME"]


async def receive(channel: aio.Channel, group: pb.Resource, topic: str) -> list[pb.Message]:
    stub: Any = channel.unary_stream(SERVICE + "ReceiveMessage", request_serializer=lambda m: m.SerializeToString(),
                                response_deserializer=spb.ReceiveMessageResponse.FromString)
    request = spb.ReceiveMessageRequest(
        group=group, message_queue=pb.MessageQueue(topic=pb.Resource(name=topic), id=-1),
        filter_expression=pb.FilterExpression(type=pb.TAG, expression="*"), batch_size=16,
        invisible_duration=Duration(seconds=30), long_polling_timeout=Duration(seconds=1))
    found: list[pb.Message] = []

    async def some() -> bool:
        found.extend([r.message async for r in stub(request, metadata=metadata(), timeout=10)
                      if r.HasField("message")])
        return bool(found)

    await eventually(some, timeout=20, interval=0.0, message="a message received")
    return found


async def test_bad_filter_and_invisible_time(pc: ProxyCluster, channel: aio.Channel) -> None:
    stub: Any = channel.unary_stream(SERVICE + "ReceiveMessage", request_serializer=lambda m: m.SerializeToString(),
                                response_deserializer=spb.ReceiveMessageResponse.FromString)
    base: dict[str, Any] = dict(group=pb.Resource(name="GBad"),
                                message_queue=pb.MessageQueue(topic=pb.Resource(name="TBad")),
                                batch_size=1, long_polling_timeout=Duration(seconds=1))
    sql = spb.ReceiveMessageRequest(filter_expression=pb.FilterExpression(type=pb.SQL, expression="a >>> 1"),
                                    invisible_duration=Duration(seconds=30), **base)
    answers = [r async for r in stub(sql, metadata=metadata(), timeout=10)]
    assert answers[0].status.code == Code.ILLEGAL_FILTER_EXPRESSION
    short = spb.ReceiveMessageRequest(invisible_duration=Duration(seconds=1), **base)
    answers = [r async for r in stub(short, metadata=metadata(), timeout=10)]
    assert answers[0].status.code == Code.ILLEGAL_INVISIBLE_TIME


async def test_calls_not_served_answer_not_implemented(pc: ProxyCluster, channel: aio.Channel) -> None:
    for method, request, response in (("UpdateOffset", spb.UpdateOffsetRequest(), spb.UpdateOffsetResponse),
                                      ("GetOffset", spb.GetOffsetRequest(), spb.GetOffsetResponse),
                                      ("QueryOffset", spb.QueryOffsetRequest(), spb.QueryOffsetResponse)):
        answer = await asyncio.wait_for(call(channel, method, request, response), 10)
        assert answer.status.code == Code.NOT_IMPLEMENTED and method in answer.status.message
    stub: Any = channel.unary_stream(SERVICE + "PullMessage", request_serializer=lambda m: m.SerializeToString(),
                                response_deserializer=spb.PullMessageResponse.FromString)
    answers = [r async for r in stub(spb.PullMessageRequest(), metadata=metadata(), timeout=10)]
    assert answers[0].status.code == Code.NOT_IMPLEMENTED
    unknown: Any = channel.unary_unary(SERVICE + "NoSuchCall", request_serializer=lambda b: b,
                                  response_deserializer=lambda b: b)
    with pytest.raises(aio.AioRpcError) as caught:
        await unknown(b"", timeout=10)
    assert caught.value.code() == grpc.StatusCode.UNIMPLEMENTED


async def test_recall_refusals(pc: ProxyCluster, channel: aio.Channel) -> None:
    await pc.topic("TBadRecall", "DELAY")

    async def code(topic: str, handle: str) -> int:
        request = spb.RecallMessageRequest(topic=pb.Resource(name=topic), recall_handle=handle)
        answer = await asyncio.wait_for(call(channel, "RecallMessage", request, spb.RecallMessageResponse), 10)
        return int(answer.status.code)

    assert await code("TBadRecall", "not a handle") == Code.BAD_REQUEST
    assert await code("", "x") == Code.ILLEGAL_TOPIC
    unknown_broker = RecallHandle("TBadRecall", "broker-z", str(now_ms() + 60_000), "u").encode()
    assert await code("TBadRecall", unknown_broker) == Code.BAD_REQUEST  # no master of broker-z is known
    # A well-formed handle: the broker is asked, and refuses while recallMessageEnable is false (its default).
    handle = RecallHandle("TBadRecall", "broker-a", str(now_ms() + 60_000), "u").encode()
    assert await code("TBadRecall", handle) == Code.FORBIDDEN


def settings_command(group: str = "GTele") -> spb.TelemetryCommand:
    sub = pb.Subscription(group=pb.Resource(name=group), subscriptions=[pb.SubscriptionEntry(
        topic=pb.Resource(name="TBad"), expression=pb.FilterExpression(type=pb.TAG, expression="*"))])
    return spb.TelemetryCommand(settings=pb.Settings(client_type=pb.SIMPLE_CONSUMER, subscription=sub))


async def test_telemetry_settings_handshake_and_a_client_dropping_it_midway(pc: ProxyCluster,
                                                                            channel: aio.Channel) -> None:
    stub: Any = channel.stream_stream(SERVICE + "Telemetry", request_serializer=lambda m: m.SerializeToString(),
                                 response_deserializer=spb.TelemetryCommand.FromString)
    stream = stub(metadata=metadata("tele@1"), timeout=30)
    await stream.write(settings_command())
    answer: Any = await stream.read()
    assert answer.status.code == Code.OK
    assert answer.settings.subscription.long_polling_timeout.seconds == 20
    assert answer.settings.backoff_policy.max_attempts == 17
    assert len(answer.settings.backoff_policy.customized_backoff.next) == 18
    # The client shows at the broker as a consumer of its group.
    admin = AdminClient([pc.namesrv_addr])

    async def listed() -> bool:
        with contextlib.suppress(AdminError):
            connection = await consumer_connection(admin, "GTele", await admin.master_addrs())
            return any(c.get("clientId") == "tele@1" and c.get("language") == "PYTHON"
                       for c in connection.get("connectionSet", []))
        return False

    await eventually(listed, timeout=10, message="the gRPC client in consumerConnection")
    # A client that drops the stream before its settings are answered: the proxy answers the next calls.
    dropped = stub(metadata=metadata("tele@2"), timeout=30)
    await dropped.write(settings_command("GTele2"))
    dropped.cancel()
    empty = stub(metadata=metadata("tele@3"), timeout=30)
    await empty.write(spb.TelemetryCommand(settings=pb.Settings(client_type=pb.PRODUCER)))  # no publishing
    with pytest.raises(aio.AioRpcError) as caught:
        await empty.read()
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert (await send(channel, message())).status.code == Code.OK
    stream.cancel()


async def test_every_call_is_counted_by_method_and_code(pc: ProxyCluster, channel: aio.Channel) -> None:
    await send(channel, message())
    await send(channel, message(body=b""))
    text = pc.proxy.metrics.render().decode()
    assert 'pocketmq_proxy_rpc_latency_seconds_count{code="OK",method="SendMessage"} 1.0' in text
    assert 'pocketmq_proxy_rpc_latency_seconds_count{code="MESSAGE_BODY_EMPTY",method="SendMessage"} 1.0' in text
