"""POP, ACK, BATCH_ACK, CHANGE_MESSAGE_INVISIBLETIME, NOTIFICATION and POLLING_INFO driven with raw frames as
RocketMQ 5's Java remoting client sends them (``tests.pop.java_pop``), against an in-process broker."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest

from pocketmq.broker.controller import BrokerController
from pocketmq.common.record import decode_records
from pocketmq.remoting.codes import ResponseCode
from tests.helpers import eventually
from tests.pop.java_pop import (
    ACK_MESSAGE,
    BATCH_ACK_MESSAGE,
    CHANGE_INVISIBLE,
    NOTIFICATION,
    POLLING_INFO,
    Popped,
    ack_fields,
    batch_ack_body,
    change_fields,
    changed_handle,
    create_topic,
    now_ms,
    pop,
    popped,
    send,
)
from tests.transaction.raw import RawClient

pytestmark = pytest.mark.timeout(60)

GROUP = "GPop"


@pytest.fixture
def broker_props() -> dict[str, str]:
    return {"reviveInterval": "100", "enablePropertyFilter": "true", "popStateSnapshotInterval": "200"}


@pytest.fixture
async def client(broker: BrokerController) -> AsyncIterator[RawClient]:
    c = await RawClient.connect(broker.addr)
    yield c
    await c.close()


async def fill(client: RawClient, topic: str, n: int, queues: int = 2, **props: str) -> None:
    await create_topic(client, topic, queues)
    for i in range(n):
        frame = await send(client, topic, f"m{i}".encode(), queue_id=i % queues,
                           properties={"UNIQ_KEY": f"k{i}", **props})
        assert frame.code == 0, frame.remark


async def committed(client: RawClient, group: str, topic: str, queue_id: int) -> int:
    frame = await client.request(14, {"consumerGroup": group, "topic": topic, "queueId": str(queue_id)})
    return int(frame.ext["offset"]) if frame.code == 0 else -1


async def test_pop_filters_by_tag_and_sql92(client: RawClient) -> None:
    await create_topic(client, "TFilter", 2)
    for i in range(8):
        frame = await send(client, "TFilter", f"m{i}".encode(), queue_id=i % 2, TAGS="A" if i % 2 else "B",
                           color="red" if i < 4 else "blue")
        assert frame.code == 0
    tagged = popped(await pop(client, "GTag", "TFilter", exp="A"))
    assert sorted(m.body for m in tagged) == [b"m1", b"m3", b"m5", b"m7"]
    sql = popped(await pop(client, "GSql", "TFilter", exp_type="SQL92", exp="color = 'red' AND TAGS = 'B'"))
    assert sorted(m.body for m in sql) == [b"m0", b"m2"]
    bad = await pop(client, "GSql2", "TFilter", exp_type="SQL92", exp="color = ")
    assert bad.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED


async def test_pop_response_headers_and_the_records(client: RawClient) -> None:
    await fill(client, "THead", 5)
    frame = await pop(client, GROUP, "THead", max_nums=3, invisible=30_000)
    assert frame.code == 0 and frame.remark == "FOUND"
    assert {"popTime", "invisibleTime", "reviveQid", "restNum", "startOffsetInfo", "msgOffsetInfo"} <= set(frame.ext)
    assert frame.ext["invisibleTime"] == "30000" and int(frame.ext["restNum"]) == 2
    messages = popped(frame)
    assert len(messages) == 3 and all(m.stored_topic == "THead" for m in messages)
    pop_time = int(frame.ext["popTime"])
    assert abs(pop_time - now_ms()) < 5000
    empty = await pop(client, "GOther", "TMissing")
    assert empty.code == ResponseCode.TOPIC_NOT_EXIST


async def test_acked_messages_never_return_and_unacked_ones_are_revived(client: RawClient) -> None:
    await fill(client, "TRevive", 4)
    messages = popped(await pop(client, GROUP, "TRevive", invisible=1000))
    assert len(messages) == 4
    for m in messages[:2]:
        frame = await client.request(ACK_MESSAGE, ack_fields(GROUP, "TRevive", m))
        assert frame.code == 0, frame.remark
    deadline = int(messages[0].ext["popTime"]) + 1000
    back: list[tuple[Popped, int]] = []

    async def revived() -> bool:
        frame = await pop(client, GROUP, "TRevive", invisible=60_000)
        back.extend((m, now_ms()) for m in popped(frame))
        return len(back) >= 2

    await eventually(revived, timeout=10, interval=0.05, message="the unacked messages come back")
    assert sorted(m.body for m, _t in back) == sorted(m.body for m in messages[2:])
    for m, seen in back:
        assert m.stored_topic == "%RETRY%GPop_TRevive" and m.reconsume_times == 1
        assert seen - deadline < 1500  # revived within a second of the deadline (plus the polling step)
        assert m.pop_ck.split(" ")[4] == "1"
        assert (await client.request(ACK_MESSAGE, ack_fields(GROUP, "TRevive", m))).code == 0
    await asyncio.sleep(1.3)
    assert popped(await pop(client, GROUP, "TRevive")) == []


async def test_batch_ack_as_the_java_client_encodes_it(client: RawClient) -> None:
    await fill(client, "TBatch", 6, queues=2)
    messages = popped(await pop(client, GROUP, "TBatch", invisible=1000))
    body = batch_ack_body(GROUP, "TBatch", [m.pop_ck for m in messages[:5]])
    frame = await client.request(BATCH_ACK_MESSAGE, {}, body)
    assert frame.code == 0, frame.remark
    again = await client.request(BATCH_ACK_MESSAGE, {}, body)
    assert again.code == ResponseCode.NO_MESSAGE and (again.remark or "").startswith("acked 0 of 5; 5 refused")
    await asyncio.sleep(1.5)
    back = popped(await pop(client, GROUP, "TBatch", poll=3000))
    assert [m.body for m in back] == [messages[5].body]
    empty = await client.request(BATCH_ACK_MESSAGE, {}, b'{"acks":[],"brokerName":"broker-a"}')
    assert empty.code == ResponseCode.NO_MESSAGE
    garbage = await client.request(BATCH_ACK_MESSAGE, {}, b"{not json")
    assert garbage.code == ResponseCode.INVALID_PARAMETER


async def test_change_invisible_time_extends_and_hands_out_a_new_handle(client: RawClient) -> None:
    await fill(client, "TChange", 2, queues=1)
    first, second = popped(await pop(client, GROUP, "TChange", invisible=1000))
    fields = change_fields(GROUP, "TChange", first, 4000)
    frame = await client.request(CHANGE_INVISIBLE, fields)
    assert frame.code == 0, frame.remark
    assert set(frame.ext) >= {"popTime", "invisibleTime", "reviveQid"} and frame.ext["invisibleTime"] == "4000"
    new_handle = changed_handle(frame, fields)
    old = await client.request(ACK_MESSAGE, ack_fields(GROUP, "TChange", first))
    assert old.code == ResponseCode.NO_MESSAGE and "stale" in (old.remark or "")
    # Nack with 0: visible at once, revived on the next tick.
    nack = await client.request(CHANGE_INVISIBLE, change_fields(GROUP, "TChange", second, 0))
    assert nack.code == 0
    back = popped(await pop(client, GROUP, "TChange", poll=3000))
    assert [m.body for m in back] == [second.body] and back[0].reconsume_times == 1
    await asyncio.sleep(1.5)  # the first message's original deadline has passed: it stays invisible
    assert popped(await pop(client, GROUP, "TChange")) == []
    assert (await client.request(ACK_MESSAGE, ack_fields(GROUP, "TChange", first, new_handle))).code == 0


async def test_bad_receipt_handles_change_nothing(client: RawClient) -> None:
    await fill(client, "TBad", 2, queues=1)
    first, second = popped(await pop(client, GROUP, "TBad", invisible=2000))
    malformed = ack_fields(GROUP, "TBad", first)
    malformed["extraInfo"] = "not a handle"
    frame = await client.request(ACK_MESSAGE, malformed)
    assert frame.code == ResponseCode.INVALID_PARAMETER and "malformed" in (frame.remark or "")
    other_group = await client.request(ACK_MESSAGE, ack_fields("GOther", "TBad", first))
    assert other_group.code == ResponseCode.NO_MESSAGE and "another group" in (other_group.remark or "")
    wrong_offset = ack_fields(GROUP, "TBad", first)
    wrong_offset["offset"] = str(second.queue_offset)
    assert (await client.request(ACK_MESSAGE, wrong_offset)).code == ResponseCode.NO_MESSAGE
    unknown = ack_fields(GROUP, "TBad", first, first.pop_ck.replace(first.pop_ck.split(" ")[1], "1234", 1))
    assert (await client.request(ACK_MESSAGE, unknown)).code == ResponseCode.NO_MESSAGE
    out_of_range = await client.request(CHANGE_INVISIBLE, change_fields(GROUP, "TBad", first, 10**12))
    assert out_of_range.code == ResponseCode.INVALID_PARAMETER
    # Nothing above acked or hid anything: both come back after their invisible time.
    await asyncio.sleep(2.1)
    back = []

    async def both() -> bool:
        back.extend(popped(await pop(client, GROUP, "TBad", invisible=60_000)))
        return len(back) >= 2

    await eventually(both, timeout=10, message="both messages revived")
    expired = await client.request(ACK_MESSAGE, ack_fields(GROUP, "TBad", first))
    assert expired.code == ResponseCode.NO_MESSAGE and "expired" in (expired.remark or "")


async def test_the_proxys_nine_field_handle_is_accepted(client: RawClient) -> None:
    await fill(client, "TProxy", 1, queues=1)
    (message,) = popped(await pop(client, GROUP, "TProxy", invisible=1000))
    handle = message.receipt_handle()
    assert len(handle.split(" ")) == 9
    assert (await client.request(ACK_MESSAGE, ack_fields(GROUP, "TProxy", message, handle))).code == 0


async def test_bad_pop_requests(client: RawClient) -> None:
    await fill(client, "TBadPop", 1, queues=1)
    too_many = await pop(client, GROUP, "TBadPop", max_nums=33)
    assert too_many.code == ResponseCode.INVALID_PARAMETER and "32" in (too_many.remark or "")
    short = await pop(client, GROUP, "TBadPop", invisible=10)
    assert short.code == ResponseCode.INVALID_PARAMETER and "invisibleTime" in (short.remark or "")
    queue = await pop(client, GROUP, "TBadPop", queue_id=5)
    assert queue.code == ResponseCode.INVALID_PARAMETER
    late = await client.request(200050, {"consumerGroup": GROUP, "topic": "TBadPop", "queueId": "-1",
                                         "maxMsgNums": "1", "invisibleTime": "5000", "pollTime": "1000",
                                         "bornTime": str(now_ms() - 60_000), "initMode": "0"})
    assert late.code == ResponseCode.POLLING_TIMEOUT and "timeout too much" in (late.remark or "")
    missing = await client.request(200050, {"consumerGroup": GROUP, "topic": "TBadPop"})
    assert missing.code != 0 and "queueId" in (missing.remark or "")


async def test_committed_offset_never_passes_the_oldest_unacked(client: RawClient) -> None:
    await fill(client, "TProgress", 5, queues=1)
    messages = popped(await pop(client, GROUP, "TProgress", invisible=30_000))
    assert await committed(client, GROUP, "TProgress", 0) == 0
    for m in messages[1:]:
        assert (await client.request(ACK_MESSAGE, ack_fields(GROUP, "TProgress", m))).code == 0
    assert await committed(client, GROUP, "TProgress", 0) == 0
    assert (await client.request(ACK_MESSAGE, ack_fields(GROUP, "TProgress", messages[0]))).code == 0
    assert await committed(client, GROUP, "TProgress", 0) == 5


async def test_long_polling_pop_beside_a_pull_consumer(client: RawClient, broker: BrokerController) -> None:
    await create_topic(client, "TPoll", 1)
    other = await RawClient.connect(broker.addr)
    try:
        started = time.monotonic()
        parked = asyncio.ensure_future(pop(client, GROUP, "TPoll", poll=8000, exp="A"))
        pull = asyncio.ensure_future(other.request(11, {
            "consumerGroup": "GPull", "topic": "TPoll", "queueId": "0", "queueOffset": "0", "maxMsgNums": "32",
            "sysFlag": "6", "commitOffset": "0", "suspendTimeoutMillis": "8000", "subVersion": "0",
            "subscription": "*", "expressionType": "TAG"}, timeout=15))

        async def parked_pop() -> bool:
            frame = await other.request(POLLING_INFO, {"consumerGroup": GROUP, "topic": "TPoll", "queueId": "-1"})
            return frame.code == 0 and frame.ext["pollingNum"] == "1"

        await eventually(parked_pop, timeout=5, message="the pop is parked")
        assert (await send(other, "TPoll", b"skip", TAGS="B")).code == 0  # not the pop's tag: it stays parked
        await asyncio.sleep(0.3)
        assert not parked.done()
        assert (await send(other, "TPoll", b"wanted", TAGS="A")).code == 0
        frame = await asyncio.wait_for(parked, 5)
        assert [m.body for m in popped(frame)] == [b"wanted"] and time.monotonic() - started < 7
        pulled = await asyncio.wait_for(pull, 5)
        assert pulled.code == 0 and next(r.body for r in decode_records(pulled.body)) == b"skip"
    finally:
        await other.close()
    empty = await pop(client, GROUP, "TPoll", poll=300, exp="Z")
    assert empty.code == ResponseCode.POLLING_TIMEOUT and empty.remark == "NO_MESSAGE_IN_QUEUE"
    assert {"popTime", "invisibleTime", "reviveQid", "restNum"} <= set(empty.ext)


async def test_notification(client: RawClient) -> None:
    await create_topic(client, "TNotify", 2)
    fields = {"consumerGroup": GROUP, "topic": "TNotify", "queueId": "-1", "pollTime": "0",
              "bornTime": str(now_ms()), "order": "false"}
    frame = await client.request(NOTIFICATION, fields)
    assert frame.code == 0 and frame.ext["hasMsg"] == "false"
    waiting = asyncio.ensure_future(client.request(NOTIFICATION, {**fields, "pollTime": "5000",
                                                                  "bornTime": str(now_ms())}))
    await asyncio.sleep(0.2)
    assert not waiting.done()
    assert (await send(client, "TNotify", b"x", queue_id=1)).code == 0
    frame = await asyncio.wait_for(waiting, 5)
    assert frame.code == 0 and frame.ext["hasMsg"] == "true"


async def test_dead_letter_after_max_attempts(client: RawClient) -> None:
    frame = await client.request(200, {}, b'{"groupName":"GDlq","retryMaxTimes":1,"consumeEnable":true}')
    assert frame.code == 0, frame.remark
    await fill(client, "TDlq", 1, queues=1)
    attempts = []

    async def popped_again() -> bool:
        attempts.extend(popped(await pop(client, "GDlq", "TDlq", invisible=1000)))
        return len(attempts) >= 2

    await eventually(popped_again, timeout=10, interval=0.05, message="two deliveries")
    assert [m.reconsume_times for m in attempts] == [0, 1]

    async def in_dlq() -> bool:
        pulled = await client.request(11, {
            "consumerGroup": "GReadDlq", "topic": "%DLQ%GDlq", "queueId": "0", "queueOffset": "0", "maxMsgNums": "1",
            "sysFlag": "4", "commitOffset": "0", "suspendTimeoutMillis": "0", "subVersion": "0", "subscription": "*",
            "expressionType": "TAG"})
        return pulled.code == 0 and next(iter(decode_records(pulled.body))).body == b"m0"

    await eventually(in_dlq, timeout=10, message="the message in %DLQ%GDlq")
    await asyncio.sleep(1.2)
    assert popped(await pop(client, "GDlq", "TDlq")) == []
