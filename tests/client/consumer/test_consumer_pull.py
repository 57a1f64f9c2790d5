"""``PullConsumer`` against real in-process brokers: queues, pull statuses, tag filtering, offsets, offset
queries, long polling (a waiting pull returns as soon as a message arrives, and heartbeats on the same
connection are answered meanwhile), and send-back."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from pocketmq.client import Message, MessageQueue, NoRouteError, Producer
from pocketmq.client.consumer.pull import PullConsumer
from pocketmq.client.consumer.pull_result import PullStatus
from pocketmq.remoting.client import RemotingClient
from pocketmq.remoting.codes import RequestCode
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.headers import PullMessageRequestHeader, SendMessageRequestHeaderV2
from tests.client.consumer.consumer_support import SHORT_DELAY_LEVELS, cluster, create_topic, instance_name, produce
from tests.helpers import eventually


def queue_of(queues: list[MessageQueue], broker: str, queue_id: int) -> MessageQueue:
    return next(q for q in queues if q.broker_name == broker and q.queue_id == queue_id)


async def test_fetch_queues_and_pull_statuses(tmp_path: Path) -> None:
    async with cluster(tmp_path, ("broker-a", "broker-b")) as c:
        await create_topic(c, "PullT", 2)
        await produce(c, "PullT", 40)
        async with PullConsumer("PullG", namesrv_addr=c.namesrv_addr, instance_name=instance_name()) as consumer:
            queues = await consumer.fetch_subscribe_message_queues("PullT")
            assert [(q.broker_name, q.queue_id) for q in queues] == [
                ("broker-a", 0), ("broker-a", 1), ("broker-b", 0), ("broker-b", 1)]
            bodies: list[str] = []
            for mq in queues:
                offset = 0
                while True:
                    result = await consumer.pull(mq, "*", offset, 7)
                    if result.status is PullStatus.NO_NEW_MSG:
                        assert result.next_begin_offset == offset == result.max_offset
                        break
                    assert result.status is PullStatus.FOUND and 0 < len(result.messages) <= 7
                    assert [m.queue_offset for m in result.messages] == list(range(offset, result.next_begin_offset))
                    assert all(m.broker_name == mq.broker_name and m.queue_id == mq.queue_id for m in result.messages)
                    bodies += [m.body.decode() for m in result.messages]
                    offset = result.next_begin_offset
            assert sorted(bodies) == sorted(f"m-{i}" for i in range(40))
            mq = queues[0]
            moved = await consumer.pull(mq, "*", 10_000, 32)
            assert moved.status is PullStatus.OFFSET_ILLEGAL and moved.next_begin_offset == moved.max_offset
            with pytest.raises(NoRouteError):
                await consumer.fetch_subscribe_message_queues("NoSuchTopic")


async def test_pull_filters_by_tag_expression(tmp_path: Path) -> None:
    async with cluster(tmp_path) as c:
        await create_topic(c, "TagT", 1)
        await produce(c, "TagT", 12, tags=lambda i: ("a", "b", "c")[i % 3])
        async with PullConsumer("TagG", namesrv_addr=c.namesrv_addr, instance_name=instance_name()) as consumer:
            [mq] = await consumer.fetch_subscribe_message_queues("TagT")
            both = await consumer.pull(mq, "a || c", 0, 32)
            assert [m.tags for m in both.messages] == ["a", "c"] * 4
            assert both.next_begin_offset == 12
            none = await consumer.pull(mq, "zzz", 0, 32)
            assert none.status is PullStatus.NO_MATCHED_MSG and none.next_begin_offset == 12 and not none.messages


async def test_offsets_commit_and_queries(tmp_path: Path) -> None:
    async with cluster(tmp_path) as c:
        await create_topic(c, "OffT", 1)
        await produce(c, "OffT", 5)
        await asyncio.sleep(0.01)  # store times are in ms: keep the two batches apart
        middle = time.time_ns() // 1_000_000
        await asyncio.sleep(0.01)
        await produce(c, "OffT", 5, prefix="late")
        async with PullConsumer("OffG", namesrv_addr=c.namesrv_addr, instance_name=instance_name()) as consumer:
            [mq] = await consumer.fetch_subscribe_message_queues("OffT")
            assert await consumer.fetch_consume_offset(mq) == 0  # new group, young queue (reference §2.4)
            await consumer.update_consume_offset(mq, 7)
            assert await consumer.fetch_consume_offset(mq) == 7
            assert c.brokers["broker-a"].offsets.query_offset("OffG", "OffT", 0) == 7
            assert await consumer.min_offset(mq) == 0
            assert await consumer.max_offset(mq) == 10
            found = await consumer.search_offset(mq, middle)
            assert found == 5
            with pytest.raises(ValueError):
                await consumer.update_consume_offset(mq, -1)


async def test_long_poll_returns_promptly_on_arrival_and_heartbeats_pass(tmp_path: Path) -> None:
    async with cluster(tmp_path) as c:
        await create_topic(c, "LongT", 1)
        await produce(c, "LongT", 1)
        async with PullConsumer("LongG", namesrv_addr=c.namesrv_addr, instance_name=instance_name()) as consumer:
            [mq] = await consumer.fetch_subscribe_message_queues("LongT")
            begin = time.monotonic()
            waiting = asyncio.ensure_future(consumer.pull(mq, "*", 1, 32, block=True, timeout=30))
            broker = c.brokers["broker-a"]
            await eventually(lambda: broker.hold.held == 1, message="pull parked on the broker")
            # The same client (same connection) is answered meanwhile.
            assert await consumer.instance.send_heartbeat_to_all() == 1
            assert not waiting.done()
            async with Producer("LongPG", namesrv_addr=c.namesrv_addr, instance_name=instance_name("p")) as p:
                sent_at = time.monotonic()
                await p.send(Message("LongT", b"wake up"))
            result = await asyncio.wait_for(waiting, 5)
            arrived = time.monotonic()
            assert result.status is PullStatus.FOUND and [m.body for m in result.messages] == [b"wake up"]
            assert arrived - sent_at < 1.0  # woken by the arrival, not by the 30 s hold
            assert arrived - begin < 10
            # Nothing arrives: the broker answers NO_NEW_MSG when the hold ends.
            hold_start = time.monotonic()
            empty = await consumer.pull(mq, "*", 2, 32, block=True, timeout=0.3)
            assert empty.status is PullStatus.NO_NEW_MSG
            assert time.monotonic() - hold_start >= 0.25


async def test_long_poll_on_a_never_written_queue_is_held(tmp_path: Path) -> None:
    """A queue nobody wrote to yet, pulled at 0, is parked too (RocketMQ parks every PULL_NOT_FOUND): a push
    consumer of a new topic gets its first message at once instead of polling."""
    async with cluster(tmp_path) as c:
        await create_topic(c, "FreshT", 1)
        async with PullConsumer("FreshG", namesrv_addr=c.namesrv_addr, instance_name=instance_name()) as consumer:
            [mq] = await consumer.fetch_subscribe_message_queues("FreshT")
            waiting = asyncio.ensure_future(consumer.pull(mq, "*", 0, 32, block=True, timeout=30))
            try:
                await eventually(lambda: c.brokers["broker-a"].hold.held == 1 or waiting.done(), timeout=5,
                                 message="pull parked or answered")
                assert not waiting.done(), f"answered at once: {waiting.result().status}"
                await produce(c, "FreshT", 1)
                result = await asyncio.wait_for(waiting, 5)
                assert [m.body for m in result.messages] == [b"m-0"]
            finally:
                waiting.cancel()


async def test_send_message_back_reaches_retry_then_dlq(tmp_path: Path) -> None:
    async with cluster(tmp_path, props={"messageDelayLevel": SHORT_DELAY_LEVELS}) as c:
        await create_topic(c, "BackT", 1)
        await produce(c, "BackT", 1)
        async with PullConsumer("BackG", namesrv_addr=c.namesrv_addr, instance_name=instance_name()) as consumer:
            [mq] = await consumer.fetch_subscribe_message_queues("BackT")
            [msg] = (await consumer.pull(mq, "*", 0, 32)).messages
            await consumer.send_message_back(msg, 1, max_reconsume_times=1)
            retry_q = MessageQueue("%RETRY%BackG", "broker-a", 0)

            async def retried() -> bool:
                return (await consumer.pull(retry_q, "*", 0, 32)).status is PullStatus.FOUND

            await eventually(retried, timeout=10, message="message in the retry topic")
            [again] = (await consumer.pull(retry_q, "*", 0, 32)).messages
            assert again.reconsume_times == 1 and again.get_property("RETRY_TOPIC") == "BackT"
            await consumer.send_message_back(again, 0, max_reconsume_times=1)
            dlq = MessageQueue("%DLQ%BackG", "broker-a", 0)

            async def dead() -> bool:
                return (await consumer.pull(dlq, "*", 0, 32)).status is PullStatus.FOUND

            await eventually(dead, timeout=10, message="message in the DLQ")
            [letter] = (await consumer.pull(dlq, "*", 0, 32)).messages
            assert letter.body == b"m-0"


async def test_pull_requires_start_and_valid_arguments(tmp_path: Path) -> None:
    consumer = PullConsumer("StateG", namesrv_addr="127.0.0.1:1")
    mq = MessageQueue("T", "b", 0)
    from pocketmq.client.core.errors import ConsumerStateError

    with pytest.raises(ConsumerStateError):
        await consumer.pull(mq, "*", 0, 1)
    async with consumer:
        with pytest.raises(ValueError):
            await consumer.pull(mq, "*", -1, 1)
        with pytest.raises(ValueError):
            await consumer.pull(mq, "*", 0, 0)
    assert not consumer.running
    with pytest.raises(ConsumerStateError):
        await consumer.start()


async def test_message_arriving_while_a_pull_is_being_parked_wakes_it(tmp_path: Path) -> None:
    async with cluster(tmp_path) as c:
        await create_topic(c, "RaceT", 1)
        addr = c.brokers["broker-a"].addr
        puller, sender = RemotingClient(), RemotingClient()
        try:
            pull_conn = await puller.connection(addr)
            send_conn = await sender.connection(addr)
            slow = []
            for offset in range(1, 4):
                header = PullMessageRequestHeader("RaceG", "RaceT", 0, offset, 32, 0x2 | 0x4, 0, 2000, 0, "*")
                pull = RemotingCommand.request(RequestCode.PULL_MESSAGE, header.to_fields())
                send_header = SendMessageRequestHeaderV2("PG", "RaceT", "TBW102", 4, 0, 0, time.time_ns() // 10**6, 0,
                                                         "")
                send = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, send_header.to_fields(), b"x")
                if offset == 1:
                    await send_conn.request(RemotingCommand.request(RequestCode.SEND_MESSAGE_V2,
                                                                    send_header.to_fields(), b"first"), 5)
                begin = time.monotonic()
                # Both requests leave in the same loop iteration, so the broker reads them in one: the pull finds
                # nothing, then the send appends before the pull's hold is registered.
                waiting = asyncio.ensure_future(pull_conn.request(pull, 10))
                stored = asyncio.ensure_future(send_conn.request(send, 10))
                response = await waiting
                await stored
                if time.monotonic() - begin > 1.0:
                    slow.append((offset, response.code, round(time.monotonic() - begin, 2)))
            assert not slow, f"pulls woken only by their timeout: {slow}"
        finally:
            await puller.close()
            await sender.close()
