"""Message traces: records written by a traced producer and push consumer, decoded here by a decoder of the
test's own (RocketMQ's field order, written out again), shown by ``rmq-admin queryMsgTraceById``; the
dispatcher's bound; tracing off leaves the producer's methods alone."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from pocketmq.admin import cli
from pocketmq.broker.controller import BrokerController
from pocketmq.client import ConsumeResult, Message, Producer, PushConsumer
from pocketmq.client.core.message_ext import MessageExt
from pocketmq.client.core.query import QueryError
from pocketmq.client.trace import TraceContext, TraceDispatcher, TraceType
from pocketmq.namesrv.controller import NamesrvController
from tests.helpers import eventually

FAR = (1 << 63) - 1
TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"


def independent_decode(body: bytes) -> list[dict[str, Any]]:
    """RocketMQ 4.9's trace text, decoded without pocketmq.client.trace."""
    out: list[dict[str, Any]] = []
    for item in body.decode().split("\x02"):
        if not item:
            continue
        f = item.split("\x01")
        if f[0] == "Pub":
            out.append({"type": "Pub", "timestamp": int(f[1]), "region": f[2], "group": f[3], "topic": f[4],
                        "msgId": f[5], "tags": f[6], "keys": f[7], "storeHost": f[8], "bodyLength": int(f[9]),
                        "cost": int(f[10]), "msgType": int(f[11]), "offsetMsgId": f[12], "success": f[13]})
        elif f[0] == "SubBefore":
            out.append({"type": "SubBefore", "timestamp": int(f[1]), "region": f[2], "group": f[3],
                        "requestId": f[4], "msgId": f[5], "retryTimes": int(f[6]), "keys": f[7]})
        elif f[0] == "SubAfter":
            out.append({"type": "SubAfter", "requestId": f[1], "msgId": f[2], "cost": int(f[3]), "success": f[4],
                        "keys": f[5], "contextCode": int(f[6]), "timestamp": int(f[7])})
        else:
            raise AssertionError(f"unknown trace context {f[0]!r}")
    return out


async def _traces(producer: Producer, msg_id: str) -> list[dict[str, Any]]:
    found = await producer.query_message(TRACE_TOPIC, msg_id, 64, 0, FAR)
    return [c for m in found for c in independent_decode(m.body) if c["msgId"] == msg_id]


async def test_traced_send_and_consume_decoded_and_shown(broker: BrokerController, namesrv: NamesrvController,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    assert broker.topics.get(TRACE_TOPIC) is not None  # traceTopicEnable created it
    producer = Producer("TracedPG", namesrv_addr=namesrv.addr, enable_trace=True)
    consumer = PushConsumer("TracedCG", namesrv_addr=namesrv.addr, enable_trace=True, rebalance_interval=1.0,
                            instance_name="traced-consumer")
    seen: list[MessageExt] = []

    async def handle(msg: MessageExt) -> ConsumeResult:
        seen.append(msg)
        return ConsumeResult.SUCCESS

    consumer.subscribe("Traced", "*")
    consumer.register_handler(handle)
    await producer.start()
    await consumer.start()
    try:
        sent = [await producer.send(Message("Traced", f"t{i}".encode(), tags="TagA", keys=f"order-{i}"))
                for i in range(3)]
        assert "send" in vars(producer)  # tracing wrapped this producer's send

        async def all_traced() -> bool:
            kinds = {c["type"] for c in await _traces(producer, sent[1].msg_id)}
            return len(seen) >= 3 and kinds == {"Pub", "SubBefore", "SubAfter"}

        await eventually(all_traced, timeout=30, message="traces of send and consumption")
        contexts = await _traces(producer, sent[1].msg_id)
        pub = next(c for c in contexts if c["type"] == "Pub")
        assert (pub["group"], pub["topic"], pub["tags"], pub["keys"], pub["success"]) == (
            "TracedPG", "Traced", "TagA", "order-1", "true")
        assert pub["offsetMsgId"] == sent[1].offset_msg_id and pub["storeHost"] == broker.addr
        assert pub["bodyLength"] == 2 and pub["msgType"] == 0 and pub["region"] == "DefaultRegion"
        before = next(c for c in contexts if c["type"] == "SubBefore")
        after = next(c for c in contexts if c["type"] == "SubAfter")
        assert before["group"] == "TracedCG" and before["requestId"] == after["requestId"]
        assert (after["success"], after["contextCode"], before["retryTimes"]) == ("true", 0, 0)
        by_offset = await producer.query_message(TRACE_TOPIC, sent[1].offset_msg_id, 64, 0, FAR)
        assert by_offset  # the Pub record is keyed by the offset id too

        capsys.readouterr()
        code = await asyncio.to_thread(cli.main, ["queryMsgTraceById", "-n", namesrv.addr, "--json",
                                                  "-i", sent[1].msg_id])
        out = capsys.readouterr().out
        assert code == 0, out
        life = json.loads(out)
        assert [s["group"] for s in life["sent"]] == ["TracedPG"] and life["sent"][0]["success"] is True
        assert life["stored"]["queueOffset"] == sent[1].queue_offset
        assert life["stored"]["queueId"] == sent[1].message_queue.queue_id
        assert [(c["group"], c["result"]) for c in life["consumed"]] == [("TracedCG", "SUCCESS")]
        code = await asyncio.to_thread(cli.main, ["queryMsgTraceById", "-n", namesrv.addr,
                                                  "-i", sent[1].offset_msg_id])
        text = capsys.readouterr().out
        assert code == 0 and "sent" in text and "stored" in text and "consumed" in text and "TracedCG" in text
    finally:
        await consumer.shutdown()
        await producer.shutdown()


async def test_admin_queries_by_key_unique_key_and_id(broker: BrokerController, namesrv: NamesrvController,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    producer = Producer("AdminQueryPG", namesrv_addr=namesrv.addr)
    await producer.start()
    try:
        sent = await producer.send(Message("AdminQ", b"admin-body", tags="T", keys="order-42 other"))
        await eventually(lambda: _found(producer, "AdminQ", "order-42"))
    finally:
        await producer.shutdown()

    async def admin(*argv: str) -> Any:
        capsys.readouterr()
        code = await asyncio.to_thread(cli.main, [argv[0], "-n", namesrv.addr, "--json", *argv[1:]])
        out = capsys.readouterr().out
        assert code == 0, out
        return json.loads(out)

    by_key = await admin("queryMsgByKey", "-t", "AdminQ", "-k", "order-42", "--body")
    assert [(m["msgId"], m["body"], m["queueOffset"]) for m in by_key] == [(sent.msg_id, "admin-body",
                                                                          sent.queue_offset)]
    assert "body" not in (await admin("queryMsgByKey", "-t", "AdminQ", "-k", "other"))[0]
    by_unique = await admin("queryMsgByUniqueKey", "-t", "AdminQ", "-i", sent.msg_id)
    assert [m["offsetMsgId"] for m in by_unique] == [sent.offset_msg_id]
    by_offset = await admin("queryMsgById", "-i", sent.offset_msg_id)
    by_id_unique = await admin("queryMsgById", "-i", sent.msg_id, "-t", "AdminQ")
    assert by_offset["body"] == by_id_unique["body"] == "admin-body"
    assert by_offset["brokerName"] == "" or by_offset["brokerName"] == "broker-a"
    assert by_id_unique["brokerName"] == "broker-a" and by_id_unique["properties"]["TAGS"] == "T"
    status = await admin("brokerStatus", "-b", broker.addr)
    assert int(status["indexFiles"]) == 1 and int(status["indexLastUpdatePhyoffset"]) >= 0
    assert int(status["indexOffset"]) > 0
    capsys.readouterr()
    code = await asyncio.to_thread(cli.main, ["queryMsgByKey", "-n", namesrv.addr, "-t", "AdminQ", "-k",
                                              "order-42", "--body"])
    text = capsys.readouterr().out
    assert code == 0 and "admin-body" in text and "storeTime" in text and "queueOffset" in text


async def _found(producer: Producer, topic: str, key: str) -> bool:
    return bool(await producer.query_message(topic, key, 32, 0, FAR))


async def test_dispatcher_drops_trace_data_when_full() -> None:
    release = asyncio.Event()
    sent: list[tuple[str, bytes, str]] = []

    async def send(topic: str, body: bytes, keys: str) -> None:
        await release.wait()
        sent.append((topic, body, keys))

    dispatcher = TraceDispatcher(send, topic="T", capacity=3, batch_size=2, interval=0.01)
    dispatcher.start()
    try:
        contexts = [TraceContext(TraceType.SubAfter, request_id=f"r{i}") for i in range(10)]
        accepted = [dispatcher.append(c) for c in contexts]
        assert accepted.count(False) == dispatcher.dropped and dispatcher.dropped >= 7 - 2
        release.set()
        await eventually(lambda: dispatcher.pending == 0 and dispatcher.sent == accepted.count(True))
    finally:
        await dispatcher.close()


async def test_tracing_off_leaves_the_producer_alone(broker: BrokerController, namesrv: NamesrvController) -> None:
    producer = Producer("PlainPG", namesrv_addr=namesrv.addr)
    await producer.start()
    try:
        assert "send" not in vars(producer) and "send_async" not in vars(producer)
    finally:
        await producer.shutdown()


async def test_custom_trace_topic(broker: BrokerController, namesrv: NamesrvController) -> None:
    producer = Producer("CustomTracePG", namesrv_addr=namesrv.addr, enable_trace=True, trace_topic="MyTraces")
    await producer.start()
    try:
        sent = await producer.send(Message("Custom", b"c", keys="ck"))

        async def traced() -> bool:
            try:
                found = await producer.query_message("MyTraces", sent.msg_id, 8, 0, FAR)
            except QueryError:  # the topic is created by the first trace message
                return False
            return any(c["type"] == "Pub" and c["msgId"] == sent.msg_id
                       for m in found for c in independent_decode(m.body))

        await eventually(traced, timeout=20, message="Pub trace in the custom topic")
        assert await producer.query_message(TRACE_TOPIC, sent.msg_id, 8, 0, FAR) == []
    finally:
        await producer.shutdown()
