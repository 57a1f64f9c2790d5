"""END_TRANSACTION and CHECK_TRANSACTION_STATE on the wire, driven with hand-built frames exactly as RocketMQ's
Java ``TransactionMQProducer`` sends them (JSON headers; SEND_MESSAGE_V2 310 or SEND_MESSAGE 10 with sys flag 4
and ``TRAN_MSG``/``PGROUP``; END_TRANSACTION 37 oneway; a 39 answered with a oneway 37
``fromTransactionCheck=true``), independent of PocketMQ's SDK."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator

import pytest

from pocketmq.broker.controller import BrokerController
from pocketmq.common.record import MessageRecord, decode_record
from pocketmq.common.topic import RMQ_SYS_TRANS_HALF_TOPIC, RMQ_SYS_TRANS_OP_HALF_TOPIC
from tests.helpers import eventually
from tests.transaction.raw import RawClient, decode_message_id, properties

GROUP = "PG_WIRE"
TOPIC = "TxWire"


@pytest.fixture
async def raw(broker: BrokerController) -> AsyncIterator[RawClient]:
    client = await RawClient.connect(broker.addr)
    heartbeat = {"clientID": "127.0.0.1@raw-java", "producerDataSet": [{"groupName": GROUP}],
                 "consumerDataSet": []}
    answer = await client.request(34, {}, json.dumps(heartbeat).encode())
    assert answer.code == 0, answer
    yield client
    await client.close()


def send_fields_v2(uniq: str, *, queue_id: int = 1, group: str = GROUP) -> dict[str, str]:
    props = properties(TRAN_MSG="true", PGROUP=group, UNIQ_KEY=uniq, WAIT="true", TAGS="t")
    return {"a": group, "b": TOPIC, "c": "TBW102", "d": "4", "e": str(queue_id), "f": "4",
            "g": str(int(time.time() * 1000)), "h": "0", "i": props, "j": "0", "k": "false", "m": "false"}


def send_fields_v1(uniq: str) -> dict[str, str]:
    props = properties(TRAN_MSG="true", PGROUP=GROUP, UNIQ_KEY=uniq, WAIT="true")
    return {"producerGroup": GROUP, "topic": TOPIC, "defaultTopic": "TBW102", "defaultTopicQueueNums": "4",
            "queueId": "2", "sysFlag": "4", "bornTimestamp": str(int(time.time() * 1000)), "flag": "0",
            "properties": props, "reconsumeTimes": "0", "unitMode": "false", "batch": "false"}


def end_fields(send_ext: dict[str, str], uniq: str, state: int, *, group: str = GROUP,
               from_check: bool = False) -> dict[str, str]:
    return {"producerGroup": group, "tranStateTableOffset": send_ext["queueOffset"],
            "commitLogOffset": str(decode_message_id(send_ext["msgId"])), "commitOrRollback": str(state),
            "fromTransactionCheck": "true" if from_check else "false", "msgId": uniq, "transactionId": uniq}


def queue_records(broker: BrokerController, topic: str, queue_id: int) -> list[MessageRecord]:
    assert broker.store is not None
    result = broker.store.get_messages("test", topic, queue_id, 0, 32)
    try:
        return [r for r in (decode_record(b, 0, check_crc=False) for b in result.message_buffers)
                if isinstance(r, MessageRecord)]
    finally:
        result.release()


async def test_half_then_commit_writes_the_real_message_once(broker: BrokerController, raw: RawClient) -> None:
    sent = await raw.request(310, send_fields_v2("UNIQ-COMMIT"), b"order-1 paid")
    assert sent.code == 0, sent
    assert sent.ext["queueId"] == "1" and sent.ext["transactionId"] == "UNIQ-COMMIT"
    assert queue_records(broker, TOPIC, 1) == []  # invisible until committed
    half = queue_records(broker, RMQ_SYS_TRANS_HALF_TOPIC, 0)
    assert len(half) == 1 and half[0].sys_flag & 0xC == 0
    assert half[0].properties_map["REAL_TOPIC"] == TOPIC and half[0].properties_map["REAL_QID"] == "1"

    await raw.oneway(37, end_fields(sent.ext, "UNIQ-COMMIT", 8))
    await eventually(lambda: len(queue_records(broker, TOPIC, 1)) == 1, message="the committed message")
    real = queue_records(broker, TOPIC, 1)[0]
    assert real.body == half[0].body and real.sys_flag & 0xC == 8
    assert real.prepared_transaction_offset == half[0].physical_offset
    assert real.properties == half[0].properties  # RocketMQ keeps the half's properties string
    ops = queue_records(broker, RMQ_SYS_TRANS_OP_HALF_TOPIC, 0)
    assert [(op.body, op.properties_map["TAGS"]) for op in ops] == [(sent.ext["queueOffset"].encode(), "d")]

    again = await raw.request(37, end_fields(sent.ext, "UNIQ-COMMIT", 8))
    assert again.code == 1 and "already resolved" in (again.remark or "")
    assert len(queue_records(broker, TOPIC, 1)) == 1


async def test_mismatched_end_transaction_is_refused_and_writes_nothing(broker: BrokerController,
                                                                        raw: RawClient) -> None:
    sent = await raw.request(310, send_fields_v2("UNIQ-BAD"), b"bad")
    assert sent.code == 0, sent
    wrong_group = await raw.request(37, end_fields(sent.ext, "UNIQ-BAD", 8, group="OTHER"))
    assert wrong_group.code == 1 and "producer group wrong" in (wrong_group.remark or "")
    wrong_offset = await raw.request(37, {**end_fields(sent.ext, "UNIQ-BAD", 8), "tranStateTableOffset": "7"})
    assert wrong_offset.code == 1 and "state table offset wrong" in (wrong_offset.remark or "")
    unknown = await raw.request(37, {**end_fields(sent.ext, "UNIQ-BAD", 8), "commitLogOffset": "999999"})
    assert unknown.code == 1 and "Find prepared transaction message failed" in (unknown.remark or "")
    missing = await raw.request(37, {"producerGroup": GROUP})
    assert missing.code == 1 and "tranStateTableOffset" in (missing.remark or "")
    assert queue_records(broker, TOPIC, 1) == []
    assert queue_records(broker, RMQ_SYS_TRANS_OP_HALF_TOPIC, 0) == []
    rolled = await raw.request(37, end_fields(sent.ext, "UNIQ-BAD", 12))
    assert rolled.code == 0, rolled
    assert queue_records(broker, TOPIC, 1) == [] and len(queue_records(broker, RMQ_SYS_TRANS_OP_HALF_TOPIC, 0)) == 1


async def test_send_v1_unknown_then_check_back_answered_with_rollback(broker: BrokerController,
                                                                        raw: RawClient) -> None:
    sent = await raw.request(10, send_fields_v1("UNIQ-CHECK"), b"check me")
    assert sent.code == 0, sent
    await raw.oneway(37, end_fields(sent.ext, "UNIQ-CHECK", 0))  # UNKNOW: the broker will ask
    check = await asyncio.wait_for(raw.server_requests.get(), 10)
    assert check.code == 39 and check.flag & 2  # oneway
    assert check.ext["msgId"] == "UNIQ-CHECK" and check.ext["transactionId"] == "UNIQ-CHECK"
    assert check.ext["topic"] == TOPIC
    assert decode_message_id(check.ext["offsetMsgId"]) == int(check.ext["commitLogOffset"])
    record = decode_record(check.body, 0)
    assert isinstance(record, MessageRecord)
    assert (record.topic, record.queue_id) == (TOPIC, 2)
    assert record.properties_map["PGROUP"] == GROUP and record.properties_map["TRANSACTION_CHECK_TIMES"] == "1"
    assert record.physical_offset == int(check.ext["commitLogOffset"])
    assert record.queue_offset == int(check.ext["tranStateTableOffset"]) > int(sent.ext["queueOffset"])
    await raw.oneway(37, {"producerGroup": GROUP, "tranStateTableOffset": check.ext["tranStateTableOffset"],
                          "commitLogOffset": check.ext["commitLogOffset"], "commitOrRollback": "12",
                          "fromTransactionCheck": "true", "msgId": "UNIQ-CHECK", "transactionId": "UNIQ-CHECK"})
    await eventually(lambda: len(queue_records(broker, RMQ_SYS_TRANS_OP_HALF_TOPIC, 0)) == 1)
    await asyncio.sleep(1.0)  # several check rounds: resolved, so never asked again
    assert raw.server_requests.empty()
    assert queue_records(broker, TOPIC, 2) == []


async def test_prepared_batch_and_delay_are_refused(broker: BrokerController, raw: RawClient) -> None:
    fields = send_fields_v2("UNIQ-DELAY")
    fields["i"] += "\x02DELAY\x013"
    delayed = await raw.request(310, fields, b"later")
    assert delayed.code == 13 and "delayed" in (delayed.remark or "")
    batch = await raw.request(320, {**send_fields_v2("UNIQ-BATCH"), "m": "true"}, b"x")
    assert batch.code == 13, batch
    assert queue_records(broker, RMQ_SYS_TRANS_HALF_TOPIC, 0) == []


async def test_two_transactions_with_one_uniq_key_are_resolved_apart(broker: BrokerController,
                                                                     raw: RawClient) -> None:
    first = await raw.request(310, send_fields_v2("UNIQ-TWICE"), b"first")  # one message object sent twice
    second = await raw.request(310, send_fields_v2("UNIQ-TWICE"), b"second")
    assert first.code == second.code == 0
    committed = await raw.request(37, end_fields(first.ext, "UNIQ-TWICE", 8))
    rolled = await raw.request(37, end_fields(second.ext, "UNIQ-TWICE", 12))
    assert committed.code == rolled.code == 0, (committed, rolled)
    assert [r.body for r in queue_records(broker, TOPIC, 1)] == [b"first"]
    assert len(queue_records(broker, RMQ_SYS_TRANS_OP_HALF_TOPIC, 0)) == 2
