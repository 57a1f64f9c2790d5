"""A producer sends to a restarted master again within seconds, not at its next 30 s route poll.

Found by ``rmq-chaos`` (issue 14, 2m-noslave, seed 1): broker-b's power loss made the producers fetch a route
without it; broker-b was back 8 s later, but the producers held the route without it until their poll, and
when broker-a was frozen next nothing could be sent anywhere for the whole 6.5 s freeze. The producer here
keeps RocketMQ's 30 s poll: only the client instance's route watch (:mod:`pocketmq.client.core.route_watch`) can bring
broker-b back within the test's bound.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Sequence
from pathlib import Path

from pocketmq.client import Message, MessageQueue, Producer
from pocketmq.client.core.errors import MQClientError
from pocketmq.client.core.route_watch import MasterWatch
from pocketmq.remoting.client import RemotingClient
from pocketmq.remoting.codes import RequestCode
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.route import BrokerData, TopicRouteData
from tests.client.consumer.consumer_support import cluster, create_topic, instance_name
from tests.cluster import start_broker
from tests.helpers import eventually

TOPIC = "ProducerRouteWatchT"
#: Far below the 30 s route poll the producer is left with.
BACK_WITHIN = 10.0


def to_b(queues: Sequence[MessageQueue], _msg: Message, _arg: object) -> MessageQueue:
    return next(q for q in queues if q.broker_name == "broker-b")


async def _brokers(producer: Producer) -> set[str]:
    return {q.broker_name for q in await producer.fetch_publish_message_queues(TOPIC)}


async def test_producer_takes_a_restarted_master_back_without_waiting_for_the_route_poll(tmp_path: Path) -> None:
    async with cluster(tmp_path, ("broker-a", "broker-b")) as c:
        await create_topic(c, TOPIC, 2)
        async with Producer("RouteWatchPG", namesrv_addr=c.namesrv_addr, instance_name=instance_name("p"),
                            poll_name_server_interval=30.0, send_msg_timeout=1.0) as producer:
            assert await _brokers(producer) == {"broker-a", "broker-b"}
            await c.brokers["broker-b"].stop(grace=0.5)

            async def b_left() -> bool:  # a failed send makes the producer fetch the route without broker-b
                with contextlib.suppress(MQClientError):
                    await producer.send(Message(TOPIC, b"x"))
                return "broker-b" not in await _brokers(producer)

            await eventually(b_left, timeout=15, interval=0.2, message="broker-b left the producer's route")
            c.brokers["broker-b"] = await start_broker(tmp_path, "broker-b", c.namesrv.addr)
            await create_topic(c, TOPIC, 2, brokers=["broker-b"])
            back_at = time.monotonic()

            async def b_back() -> bool:
                return "broker-b" in await _brokers(producer)

            await eventually(b_back, timeout=BACK_WITHIN, interval=0.1, message="broker-b back in the route")
            took = time.monotonic() - back_at
            result = await producer.send(Message(TOPIC, b"after the restart"), selector=to_b, arg=None)
    assert result.message_queue.broker_name == "broker-b"
    assert took < BACK_WITHIN


def test_a_peer_that_refuses_is_a_suspect_for_a_while_and_noted_once_per_window() -> None:
    client = RemotingClient()
    client.note_refusal("127.0.0.1:1")
    assert "127.0.0.1:1" in client.silent_peers(60.0, lost_within=5.0)
    assert "127.0.0.1:1" not in client.silent_peers(60.0)  # only within the window asked for
    first = client._refusing["127.0.0.1:1"]
    client.note_refusal("127.0.0.1:1")  # a peer that keeps refusing does not renew its window at once
    assert client._refusing["127.0.0.1:1"] == first


async def test_a_send_refused_as_not_serving_makes_the_master_a_suspect(tmp_path: Path) -> None:
    """A deposed or fenced master answers SERVICE_NOT_AVAILABLE at once: the producer's instance names it a suspect,
    so the routes naming it as a master are asked for every quarter second (a chaos run found sends to a group stop
    for 25 s: the one route lookup the refusal caused came before the new master registered, and nothing asked
    again until the 30 s poll)."""
    async with cluster(tmp_path, ("broker-a",)) as c:
        await create_topic(c, TOPIC, 2)
        broker = c.brokers["broker-a"]
        async with Producer("RefusedPG", namesrv_addr=c.namesrv_addr, instance_name=instance_name("p"),
                            poll_name_server_interval=30.0, send_msg_timeout=1.0, retry_times_when_send_failed=0) \
                as producer:
            await producer.send(Message(TOPIC, b"before"))
            assert broker.store is not None
            broker.store.set_fenced("the test fences it")
            try:
                with contextlib.suppress(MQClientError):
                    await producer.send(Message(TOPIC, b"refused"))
                assert broker.addr in producer.instance.remoting.silent_peers(60.0, lost_within=10.0)
            finally:
                broker.store.set_fenced(None)


def _route(*masters: str) -> TopicRouteData:
    return TopicRouteData(queue_datas=[], broker_datas=[
        BrokerData(cluster="c", broker_name=name, broker_addrs={0: f"127.0.0.1:{10911 + i}"})
        for i, name in enumerate(masters)])


def test_master_watch_asks_while_a_group_seen_lately_lacks_its_master() -> None:
    watch = MasterWatch(watch_for=60.0)
    assert list(watch.topics_to_refresh({"T": _route("a", "b")}, 1.0)) == []
    assert list(watch.topics_to_refresh({"T": _route("a")}, 2.0)) == ["T"]        # b's master left
    assert list(watch.topics_to_refresh({"T": _route("a")}, 50.0)) == ["T"]       # still watched
    assert list(watch.topics_to_refresh({"T": _route("a")}, 62.0)) == []          # gone for > watch_for
    assert list(watch.topics_to_refresh({"T": _route("a", "b")}, 63.0)) == []
    assert list(watch.topics_to_refresh({"U": _route("a")}, 64.0)) == []          # T forgotten with its route
    assert list(watch.topics_to_refresh({"T": _route()}, 65.0)) == []             # T is new again: nothing seen


def test_master_watch_asks_while_a_master_leaves_requests_unanswered() -> None:
    """A frozen master is still registered: its silence on a request is what makes the route be asked for again."""
    routes = {"T": _route("a", "b"), "U": _route("a")}
    assert list(MasterWatch.topics_naming(routes, {"127.0.0.1:9"})) == []
    assert list(MasterWatch.topics_naming(routes, {"127.0.0.1:10912"})) == ["T"]
    assert list(MasterWatch.topics_naming(routes, set())) == []


def test_master_watch_asks_often_while_a_master_went_away_lately() -> None:
    watch = MasterWatch(watch_for=60.0)
    assert list(watch.topics_lately_missing({"T": _route("a", "b")}, 1.0, within=5.0)) == []
    assert list(watch.topics_lately_missing({"T": _route("a")}, 2.0, within=5.0)) == ["T"]
    assert list(watch.topics_lately_missing({"T": _route("a")}, 7.0, within=5.0)) == []  # then at the 1 s pace


async def test_a_silent_peer_is_named_once_a_request_waits_longer_than_the_threshold() -> None:
    """A server that reads requests and never answers: its connection shows the wait; when it hangs up, its
    address is named as lost for a while."""
    hang_up = asyncio.Event()

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(1 << 16)
        await hang_up.wait()
        writer.close()

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    address = f"127.0.0.1:{server.sockets[0].getsockname()[1]}"
    client = RemotingClient()
    try:
        assert client.silent_peers(0.1) == set()
        waiting = asyncio.ensure_future(client.invoke(address, RemotingCommand.request(RequestCode.HEART_BEAT), 3.0))
        await eventually(lambda: address in client.silent_peers(0.2), timeout=3)
        waiting.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await waiting
        hang_up.set()
        await eventually(lambda: address in client.silent_peers(60.0, lost_within=5.0), timeout=3)
        assert address not in client.silent_peers(60.0)
    finally:
        await client.close()
        server.close()
        await server.wait_closed()
