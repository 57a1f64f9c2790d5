"""Request-reply through the SDK: ``Producer.request`` answered by a consumer in another process, ordered requests
(a queue selector), the blocking facade; a request nobody answers (timeout), a requester that leaves before the
reply, a reply whose request has timed out or whose TTL has passed, the bounded table of waiting requests, and
message ids and traces as for other sends."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from pocketmq.broker.controller import BrokerController
from pocketmq.client import (
    Message,
    MessageExt,
    MessageQueue,
    Producer,
    ProducerStateError,
    PushConsumer,
    RequestExpiredError,
    RequestTableFullError,
    RequestTimeoutError,
    SendFailedError,
    blocking,
    create_reply_message,
)
from pocketmq.namesrv.controller import NamesrvController
from tests.client.consumer.consumer_support import FAST, Cluster, cluster, create_topic, instance_name
from tests.helpers import eventually
from tests.index.test_traces import _traces
from tests.procs import Proc
from tests.reply.replier import READY

REPLY_TOPIC = "DefaultCluster_REPLY_TOPIC"


@pytest.fixture
async def rpc(tmp_path: Path) -> AsyncIterator[Cluster]:
    async with cluster(tmp_path) as c:
        await create_topic(c, "Rpc", 4)
        yield c


def reply_topic_empty(c: Cluster) -> bool:
    store = c.brokers["broker-a"].store
    assert store is not None
    return store.get_max_offset_in_queue(REPLY_TOPIC, 0) == 0


def requester(c: Cluster, **kw: Any) -> Producer:
    return Producer("RequestPG", namesrv_addr=c.namesrv_addr, instance_name=instance_name("q"), **kw)


async def collecting_consumer(c: Cluster) -> tuple[PushConsumer, asyncio.Queue[MessageExt]]:
    """A started consumer of the requests that keeps them (the test replies, or not)."""
    received: asyncio.Queue[MessageExt] = asyncio.Queue(maxsize=10)

    async def handle(msg: MessageExt) -> None:
        received.put_nowait(msg)

    consumer = PushConsumer("RpcCG", namesrv_addr=c.namesrv_addr, instance_name=instance_name(), **FAST)
    consumer.subscribe("Rpc", "*")
    consumer.register_handler(handle)
    await consumer.start()
    return consumer, received


def pick_queue_two(queues: Sequence[MessageQueue], msg: Message, arg: Any) -> MessageQueue:
    return next(q for q in queues if q.queue_id == arg)


async def test_request_reply_across_two_processes(rpc: Cluster) -> None:
    replier = Proc([sys.executable, "-m", "tests.reply.replier", rpc.namesrv_addr, "Rpc", "RpcCG"], READY)
    try:
        await asyncio.to_thread(replier.wait_ready, 30.0)
        async with requester(rpc) as producer:
            first = await producer.request(Message("Rpc", b"hello"), timeout=20)  # the consumer may still rebalance
            body, _queue, pid = first.body.decode().split("|")
            assert body == "re:hello" and int(pid) != os.getpid() and int(pid) == replier.pid
            assert first.topic == REPLY_TOPIC
            assert first.get_property("REPLY_TO_CLIENT") == producer.instance.client_id
            assert int(first.get_property("ARRIVE_TIME") or 0) >= int(first.get_property("PUSH_REPLY_TIME") or 1)

            replies = await asyncio.gather(*(producer.request(Message("Rpc", b"m%d" % i), timeout=10)
                                             for i in range(20)))
            assert [r.body.decode().split("|")[0] for r in replies] == [f"re:m{i}" for i in range(20)]
            assert len({r.get_property("CORRELATION_ID") for r in replies}) == 20

            ordered = await producer.request(Message("Rpc", b"ordered"), timeout=10, selector=pick_queue_two, arg=2)
            assert ordered.body.decode().split("|")[:2] == ["re:ordered", "q2"]
            assert producer.pending_requests == 0

        def blocking_round_trip() -> bytes:
            with blocking.Producer("BlockingRequestPG", namesrv_addr=rpc.namesrv_addr,
                                   instance_name=instance_name("b")) as sync_producer:
                return sync_producer.request(Message("Rpc", b"from a thread"), timeout=10).body

        assert (await asyncio.to_thread(blocking_round_trip)).startswith(b"re:from a thread|")
        assert reply_topic_empty(rpc)
    finally:  # in a thread: the replier's shutdown talks to the broker on this loop
        assert await asyncio.to_thread(replier.terminate) == 0, replier.stderr_text()[-2000:]


async def test_a_request_nobody_answers_times_out(rpc: Cluster) -> None:
    async with requester(rpc) as producer:
        started = time.monotonic()
        with pytest.raises(RequestTimeoutError) as caught:
            await producer.request(Message("Rpc", b"anyone?"), timeout=0.8)
        assert 0.7 < time.monotonic() - started < 5.0
        error = caught.value
        assert error.topic == "Rpc" and error.response_code == 10006 and "wait reply message timeout" in str(error)
        assert producer.pending_requests == 0


async def test_the_table_of_waiting_requests_is_bounded(rpc: Cluster) -> None:
    async with requester(rpc, max_pending_requests=2) as producer:
        waiting = [asyncio.ensure_future(producer.request(Message("Rpc", b"w%d" % i), timeout=1.5)) for i in range(2)]
        await eventually(lambda: producer.pending_requests == 2, message="two requests waiting")
        with pytest.raises(RequestTableFullError):
            await producer.request(Message("Rpc", b"one too many"), timeout=1.5)
        for result in await asyncio.gather(*waiting, return_exceptions=True):
            assert isinstance(result, RequestTimeoutError)
        assert producer.pending_requests == 0


async def test_a_requester_that_leaves_before_the_reply(rpc: Cluster) -> None:
    consumer, received = await collecting_consumer(rpc)
    leaving = requester(rpc)
    await leaving.start()
    try:
        pending = asyncio.ensure_future(leaving.request(Message("Rpc", b"bye"), timeout=20))
        request = await asyncio.wait_for(received.get(), 20)
        await leaving.shutdown()  # the requester's future fails with the reason
        with pytest.raises(ProducerStateError, match="shutting down"):
            await pending
        client_id = request.get_property("REPLY_TO_CLIENT")
        await eventually(lambda: rpc.brokers["broker-a"].clients.find_channel(client_id or "") is None,
                         message="the requester's connection closed")
        async with Producer("ReplyPG", namesrv_addr=rpc.namesrv_addr, instance_name=instance_name("r")) as replier:
            with pytest.raises(SendFailedError) as caught:
                await replier.send(create_reply_message(request, b"too late"))
        assert f"channel of <{client_id}> not found" in str(caught.value.last_error)
        assert reply_topic_empty(rpc)
    finally:
        await consumer.shutdown()


async def test_a_reply_to_a_request_that_timed_out(rpc: Cluster) -> None:
    consumer, received = await collecting_consumer(rpc)
    try:
        async with requester(rpc) as producer, Producer("ReplyPG", namesrv_addr=rpc.namesrv_addr,
                                                        instance_name=instance_name("r")) as replier:
            with pytest.raises(RequestTimeoutError):
                await producer.request(Message("Rpc", b"slow"), timeout=1.0)
            request = await asyncio.wait_for(received.get(), 20)
            while request.body != b"slow":
                request = await asyncio.wait_for(received.get(), 20)
            assert request.get_property("TTL") == "1000"
            with pytest.raises(RequestExpiredError, match="expired 1 ms ago"):  # its TTL has passed
                create_reply_message(request, b"late", now_ms=request.born_timestamp + 1001)
            # Sent anyway (the replier's clock says otherwise): the requester refuses it, nothing is stored.
            late = create_reply_message(request, b"late", now_ms=request.born_timestamp)
            with pytest.raises(SendFailedError) as caught:
                await replier.send(late)
            assert "no request of client" in str(caught.value.last_error)
            assert str(request.get_property("CORRELATION_ID")) in str(caught.value.last_error)
            assert reply_topic_empty(rpc)
    finally:
        await consumer.shutdown()


class TestIdsAndTraces:
    """A traced requester and replier: the request and the reply each get a ``Pub`` trace under their own message
    id (the reply's offset id is ``0``: it was not stored), as any send does."""

    @pytest.fixture
    def broker_props(self) -> dict[str, str]:
        return {"traceTopicEnable": "true"}

    async def test_request_and_reply_are_traced(self, broker: BrokerController, namesrv: NamesrvController) -> None:
        addr = namesrv.addr
        replier = Producer("TracedReplyPG", namesrv_addr=addr, enable_trace=True, instance_name=instance_name("r"))
        requests: list[MessageExt] = []
        reply_ids: list[str] = []

        async def handle(msg: MessageExt) -> None:
            requests.append(msg)
            result = await replier.send(create_reply_message(msg, b"traced reply"))
            reply_ids.append(result.msg_id)
            assert result.offset_msg_id == "0"

        consumer = PushConsumer("TracedRpcCG", namesrv_addr=addr, instance_name=instance_name(), **FAST)
        consumer.subscribe("TracedRpc", "*")
        consumer.register_handler(handle)
        await replier.start()
        await consumer.start()
        try:
            async with Producer("TracedRequestPG", namesrv_addr=addr, enable_trace=True,
                                instance_name=instance_name("q")) as producer:
                reply = await producer.request(Message("TracedRpc", b"trace me", keys="rpc-1"), timeout=20)
                await eventually(lambda: bool(reply_ids), message="the replier's send answered")  # may come later
                assert reply.msg_id == reply_ids[0]  # the reply's id is the one its sender got
                request_id = requests[0].msg_id

                async def traced(msg_id: str) -> bool:
                    return any(c["type"] == "Pub" for c in await _traces(producer, msg_id))

                await eventually(lambda: traced(request_id), timeout=30, message="the request's trace")
                await eventually(lambda: traced(reply_ids[0]), timeout=30, message="the reply's trace")
                reply_pub = next(c for c in await _traces(producer, reply_ids[0]) if c["type"] == "Pub")
                assert reply_pub["topic"] == REPLY_TOPIC and reply_pub["offsetMsgId"] == "0"
        finally:
            await consumer.shutdown()
            await replier.shutdown()
