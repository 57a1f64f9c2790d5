"""The producer's rules against scripted brokers registered with a real name server.

Retry, budget, isolation, header and routing rules need a broker that fails on command; end-to-end
behaviour against the real broker is in ``test_producer_cluster.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import os
import socket
import time
import zlib
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import pytest

import pocketmq.client.core.route_table as route_table_module
import pocketmq.client.producer.send_loop as send_loop_module
from pocketmq.client import (
    InvalidMessageError,
    Message,
    MessageQueue,
    MQClientError,
    NoNameServerError,
    NoRouteError,
    Producer,
    ProducerStateError,
    SendFailedError,
    SendResult,
    SendStatus,
)
from pocketmq.client.producer.topic_publish import TopicPublishInfo
from pocketmq.namesrv.controller import NamesrvController
from pocketmq.remoting.codes import FLAG_ONEWAY, RequestCode, ResponseCode, SerializeType
from pocketmq.remoting.errors import (
    BufferFullError,
    MessageIllegalError,
    RemotingClosedError,
    ServiceNotAvailableError,
    SystemBusyError,
)
from tests.client.producer.producer_support import (
    CLOSE,
    HANG,
    ScriptedBroker,
    ScriptedNamesrv,
    route_for,
    start_namesrv,
)
from tests.helpers import eventually

GROUP = "PG"


@pytest.fixture
async def ns(tmp_path: Path) -> AsyncIterator[NamesrvController]:
    namesrv = await start_namesrv(tmp_path / "ns")
    yield namesrv
    await namesrv.stop()


@pytest.fixture
async def brokers(ns: NamesrvController) -> AsyncIterator[tuple[ScriptedBroker, ScriptedBroker]]:
    a = await ScriptedBroker("broker-a", {"T": 4, "OnlyA": 2, "TBW102": 8}).start()
    b = await ScriptedBroker("broker-b", {"T": 4}).start()
    await a.register(ns.addr)
    await b.register(ns.addr)
    yield a, b
    await a.stop()
    await b.stop()


def make(ns: NamesrvController | str, **kw: object) -> Producer:
    addr = ns if isinstance(ns, str) else ns.addr
    return Producer(GROUP, namesrv_addr=addr, **kw)  # type: ignore[arg-type]


def publish_info(p: Producer, topic: str) -> TopicPublishInfo:
    info = p.publish_info(topic)
    assert info is not None, f"no publish info of {topic}"
    return info


def msg(topic: str = "T", body: bytes = b"hello", **kw: object) -> Message:
    return Message(topic, body, **kw)  # type: ignore[arg-type]


def dead_addr() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


# -- happy path, headers --------------------------------------------------------------------------------


async def test_sends_spread_over_every_queue_of_both_brokers(ns: NamesrvController, brokers) -> None:
    a, b = brokers
    async with make(ns) as p:
        results = [await p.send(msg(body=f"m{i}".encode())) for i in range(16)]
    seen = {(r.message_queue.broker_name, r.message_queue.queue_id) for r in results}
    assert seen == {(n, q) for n in ("broker-a", "broker-b") for q in range(4)}
    assert all(r.status is SendStatus.SEND_OK for r in results)
    assert len(a.sends) == len(b.sends) == 8
    assert len({r.msg_id for r in results}) == 16


async def test_v2_header_fields_and_result(ns: NamesrvController, brokers) -> None:
    a, _b = brokers
    before = int(time.time() * 1000)
    async with make(ns) as p:
        m = msg("OnlyA", tags="TagA", keys=["k1", "k2"], flag=7)
        result = await p.send(m)
    rec = a.sends[0]
    assert rec.code == RequestCode.SEND_MESSAGE_V2
    assert rec.serialize_type == SerializeType.MSGPACK
    f = rec.fields
    assert (f["a"], f["b"], f["c"], f["d"], f["f"], f["h"], f["j"], f["k"], f["m"]) == (
        GROUP, "OnlyA", "TBW102", "4", "0", "7", "0", "false", "false")
    assert f["e"] == str(result.message_queue.queue_id)
    assert before <= int(f["g"]) <= int(time.time() * 1000)
    props = dict(item.split("\x01") for item in f["i"].split("\x02"))
    assert props["TAGS"] == "TagA" and props["KEYS"] == "k1 k2" and props["UNIQ_KEY"] == result.msg_id == m.uniq_key
    assert rec.body == b"hello"
    assert result.offset_msg_id.startswith("BROKER-A")
    assert result.region_id == "DefaultRegion" and result.trace_on


async def test_json_headers_and_send_message_v1(ns: NamesrvController, brokers) -> None:
    a, _ = brokers
    async with make(ns, serialize_type=SerializeType.JSON, send_smart_msg=False) as p:
        await p.send(msg("OnlyA"))
    rec = a.sends[0]
    assert rec.serialize_type == SerializeType.JSON
    assert rec.code == RequestCode.SEND_MESSAGE
    assert rec.fields["producerGroup"] == GROUP and rec.fields["topic"] == "OnlyA"
    assert rec.fields["defaultTopic"] == "TBW102" and rec.fields["defaultTopicQueueNums"] == "4"
    assert "UNIQ_KEY\x01" in rec.fields["properties"]


async def test_large_bodies_are_compressed(ns: NamesrvController, brokers) -> None:
    a, _ = brokers
    body = b"abcdefgh" * 2048
    async with make(ns) as p:
        await p.send(msg("OnlyA", body=body))
        await p.send(msg("OnlyA", body=b"x" * 100))
    big, small = a.sends
    assert big.fields["f"] == "1" and zlib.decompress(big.body) == body
    assert small.fields["f"] == "0" and small.body == b"x" * 100


async def test_validation_errors_reach_the_caller_and_nothing_is_sent(ns: NamesrvController, brokers) -> None:
    a, b = brokers
    async with make(ns, max_message_size=1000) as p:
        with pytest.raises(InvalidMessageError, match="empty"):
            await p.send(msg(body=b""))
        with pytest.raises(InvalidMessageError, match="characters"):
            await p.send(msg("bad topic!"))
        with pytest.raises(InvalidMessageError, match="auto-create"):
            await p.send(msg("TBW102"))
        with pytest.raises(InvalidMessageError, match="over the maximum"):
            await p.send(msg(body=os.urandom(5000)))
        with pytest.raises(InvalidMessageError, match="must be bytes"):
            await p.send(Message("T", "text"))  # type: ignore[arg-type]
        with pytest.raises(InvalidMessageError, match=r"\\x01"):
            await p.send(msg(properties={"a\x01": "b"}))
        with pytest.raises(InvalidMessageError):
            p.send_async(msg(body=b""))
        with pytest.raises(InvalidMessageError):
            await p.send_batch([])
        assert exc_code(InvalidMessageError("x")) == ResponseCode.MESSAGE_ILLEGAL
    assert a.sends == [] and b.sends == []


def exc_code(exc: InvalidMessageError) -> int:
    return exc.response_code


async def test_oneway(ns: NamesrvController, brokers) -> None:
    a, _ = brokers
    async with make(ns) as p:
        for _ in range(3):
            await p.send_oneway(msg("OnlyA"))
        await eventually(lambda: len(a.sends) == 3, timeout=5, message="oneway sends arrive")
    assert all(r.oneway and r.code == RequestCode.SEND_MESSAGE_V2 for r in a.sends)
    assert FLAG_ONEWAY == 2


async def test_batch(ns: NamesrvController, brokers) -> None:
    a, _ = brokers
    messages = [msg("OnlyA", body=f"b{i}".encode(), keys=f"k{i}") for i in range(3)]
    async with make(ns) as p:
        result = await p.send_batch(messages)
    rec = a.sends[0]
    assert rec.code == RequestCode.SEND_BATCH_MESSAGE and rec.fields["m"] == "true"
    assert rec.fields["i"] == "WAIT\x01true"
    assert result.msg_id.split(",") == [m.uniq_key for m in messages]
    assert len(result.offset_msg_id.split(",")) == 3
    assert b"b1" in rec.body and b"KEYS\x01k2" in rec.body


async def test_batch_mixing_topics_is_refused(ns: NamesrvController, brokers) -> None:
    async with make(ns) as p:
        with pytest.raises(InvalidMessageError, match="one topic"):
            await p.send_batch([msg("T"), msg("OnlyA")])


# -- ordered messages ---------------------------------------------------------------------------------------


def by_arg(queues: Sequence[MessageQueue], message: Message, arg: object) -> MessageQueue:
    assert isinstance(arg, int)
    return queues[arg % len(queues)]


async def test_selector_picks_the_queue(ns: NamesrvController, brokers) -> None:
    async with make(ns) as p:
        queues = await p.fetch_publish_message_queues("T")
        for order_id in (0, 5, 5, 13):
            result = await p.send(msg(), selector=by_arg, arg=order_id)
            assert result.message_queue == queues[order_id % len(queues)]


async def test_selector_send_is_not_moved_to_another_queue(ns: NamesrvController, brokers) -> None:
    a, b = brokers
    a.default_code = ResponseCode.SERVICE_NOT_AVAILABLE
    async with make(ns) as p:
        queues = await p.fetch_publish_message_queues("T")
        index = next(i for i, q in enumerate(queues) if q.broker_name == "broker-a")
        with pytest.raises(SendFailedError) as info:
            await p.send(msg(), selector=by_arg, arg=index)
    assert info.value.brokers_tried == ("broker-a",)
    assert isinstance(info.value.__cause__, ServiceNotAvailableError)
    assert len(a.sends) == 1 and b.sends == []


async def test_selector_must_return_a_queue_of_the_topic(ns: NamesrvController, brokers) -> None:
    async with make(ns) as p:
        with pytest.raises(MQClientError, match="topic"):
            await p.send(msg(), selector=lambda qs, m, a: MessageQueue("Other", "broker-a", 0))


# -- retries ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("fault", [True, False])
async def test_retriable_code_retries_on_the_other_broker(ns: NamesrvController, brokers, fault: bool) -> None:
    a, _b = brokers
    a.default_code = ResponseCode.SERVICE_NOT_AVAILABLE
    async with make(ns, send_latency_fault_enable=fault) as p:
        results = [await p.send(msg()) for _ in range(8)]
        isolated = p.fault_strategy.latency_fault_tolerance.get("broker-a")
    assert {r.message_queue.broker_name for r in results} == {"broker-b"}
    if fault:
        assert len(a.sends) <= 1  # isolated after its first failure
        assert a.sends == [] or (isolated is not None and not isolated.is_available(isolated.start_timestamp - 1))
    else:
        assert len(a.sends) >= 1


@pytest.mark.parametrize("code", [ResponseCode.TOPIC_NOT_EXIST, ResponseCode.SERVICE_NOT_AVAILABLE,
                                  ResponseCode.SYSTEM_ERROR, ResponseCode.NO_PERMISSION,
                                  ResponseCode.NO_BUYER_ID, ResponseCode.NOT_IN_CURRENT_UNIT])
async def test_every_retriable_code_is_retried(ns: NamesrvController, brokers, code: int) -> None:
    a, b = brokers
    a.default_code = b.default_code = code
    async with make(ns, send_latency_fault_enable=False) as p:
        with pytest.raises(SendFailedError) as info:
            await p.send(msg())
    err = info.value
    assert len(err.errors) == 3 and len(err.brokers_tried) == 3
    assert err.response_code == code and not err.timed_out
    first, second, third = err.brokers_tried
    assert first != second and second != third  # each retry avoids the broker that just failed
    assert err.__cause__ is err.errors[-1]
    assert len(a.sends) + len(b.sends) == 3


async def test_system_busy_and_illegal_message_are_not_retried(ns: NamesrvController, brokers) -> None:
    a, b = brokers
    a.default_code = b.default_code = ResponseCode.SYSTEM_BUSY
    async with make(ns) as p:
        with pytest.raises(SystemBusyError):
            await p.send(msg())
        assert len(a.sends) + len(b.sends) == 1
        a.default_code = b.default_code = ResponseCode.MESSAGE_ILLEGAL
        with pytest.raises(MessageIllegalError):
            await p.send(msg())
        assert len(a.sends) + len(b.sends) == 2
        # The message was at fault, not the broker: only SYSTEM_BUSY isolated one.
        items = p.fault_strategy.latency_fault_tolerance
        assert len(items) == 1


async def test_not_ok_status_is_returned_as_is(ns: NamesrvController, brokers) -> None:
    a, b = brokers
    a.default_code = b.default_code = ResponseCode.FLUSH_DISK_TIMEOUT
    async with make(ns) as p:
        result = await p.send(msg())
    assert result.status is SendStatus.FLUSH_DISK_TIMEOUT
    assert len(a.sends) + len(b.sends) == 1


async def test_retry_another_broker_when_not_store_ok(ns: NamesrvController, brokers) -> None:
    a, b = brokers
    a.default_code = ResponseCode.SLAVE_NOT_AVAILABLE
    async with make(ns, retry_another_broker_when_not_store_ok=True, send_latency_fault_enable=False) as p:
        results = [await p.send(msg()) for _ in range(6)]
        assert all(r.status is SendStatus.SEND_OK and r.message_queue.broker_name == "broker-b" for r in results)
        b.default_code = ResponseCode.FLUSH_SLAVE_TIMEOUT
        last = await p.send(msg())
    assert last.status in (SendStatus.SLAVE_NOT_AVAILABLE, SendStatus.FLUSH_SLAVE_TIMEOUT)


async def test_earlier_stored_result_wins_over_a_later_error(ns: NamesrvController, brokers) -> None:
    a, b = brokers
    a.default_code = b.default_code = ResponseCode.SYSTEM_BUSY
    a.script = [ResponseCode.FLUSH_DISK_TIMEOUT]
    b.script = [ResponseCode.FLUSH_DISK_TIMEOUT]

    def first_one_stores(rec: object) -> None:  # whichever broker is tried first stores; the next is busy
        a.on_send = b.on_send = None
        (b if a.sends else a).script = []

    a.on_send = b.on_send = first_one_stores
    async with make(ns, retry_another_broker_when_not_store_ok=True) as p:
        result = await p.send(msg())
    assert result.status is SendStatus.FLUSH_DISK_TIMEOUT
    assert len(a.sends) + len(b.sends) == 2


async def test_closed_connection_is_retried_and_isolates(ns: NamesrvController, brokers) -> None:
    a, _b = brokers
    a.script = [CLOSE] * 10
    async with make(ns) as p:
        results = [await p.send(msg()) for _ in range(10)]
    assert all(r.message_queue.broker_name == "broker-b" or r.status is SendStatus.SEND_OK for r in results)
    assert len(a.sends) <= 1


async def test_unreachable_broker_is_isolated_and_avoided(ns: NamesrvController, brokers) -> None:
    _, _b = brokers
    ghost = ScriptedBroker("broker-c", {"T": 4})
    await ghost.register(ns.addr, addr=dead_addr())  # registered, but nothing listens there
    async with make(ns) as p:
        results = [await p.send(msg()) for _ in range(20)]
        item = p.fault_strategy.latency_fault_tolerance.get("broker-c")
    assert all(r.status is SendStatus.SEND_OK for r in results)
    assert "broker-c" not in {r.message_queue.broker_name for r in results}
    assert item is not None and item.current_latency < 3000  # connect refused fast, isolated anyway
    await ghost.stop()


async def test_one_budget_for_all_attempts(ns: NamesrvController, brokers) -> None:
    a, b = brokers
    a.default_code = b.default_code = HANG
    async with make(ns) as p:
        begin = time.monotonic()
        with pytest.raises(SendFailedError) as info:
            await p.send(msg(), timeout=0.3)
        elapsed = time.monotonic() - begin
    assert 0.28 <= elapsed < 1.5
    err = info.value
    assert err.timed_out and len(err.brokers_tried) == 1
    assert "send timeout" in str(err) and err.response_code == 10002  # ACCESS_BROKER_TIMEOUT


async def test_no_attempt_starts_without_budget(ns: NamesrvController, brokers, monkeypatch) -> None:
    a, b = brokers
    a.default_code = b.default_code = ResponseCode.SYSTEM_ERROR
    monkeypatch.setattr(send_loop_module, "MIN_ATTEMPT_BUDGET", 60.0)
    async with make(ns) as p:
        with pytest.raises(SendFailedError) as info:
            await p.send(msg())
    assert info.value.timed_out and len(info.value.brokers_tried) == 1
    assert len(a.sends) + len(b.sends) == 1


async def test_route_objects_are_never_modified(ns: NamesrvController, brokers) -> None:
    a, _ = brokers
    a.default_code = ResponseCode.SERVICE_NOT_AVAILABLE
    async with make(ns) as p:
        await p.send(msg())
        route = p.instance.routes.route_table["T"]
        snapshot = copy.deepcopy(route)
        queues = publish_info(p, "T").message_queues
        before = list(queues)
        for _ in range(20):
            await p.send(msg())
        assert p.instance.routes.route_table["T"] == snapshot
        assert list(publish_info(p, "T").message_queues) == before


# -- async ----------------------------------------------------------------------------------------------------


async def test_send_async_future_and_callback(ns: NamesrvController, brokers) -> None:
    calls: list[tuple[SendResult | None, BaseException | None]] = []
    async with make(ns) as p:
        futures = [p.send_async(msg(), callback=lambda r, e: calls.append((r, e))) for _ in range(20)]
        results = await asyncio.gather(*futures)
    assert all(r.status is SendStatus.SEND_OK for r in results)
    assert len(calls) == 20 and all(r is not None and e is None for r, e in calls)


async def test_send_async_retries_network_failures_only(ns: NamesrvController, brokers) -> None:
    a, _ = brokers
    async with make(ns) as p:
        a.script = [CLOSE]
        ok = await p.send_async(msg("OnlyA"))
        assert ok.status is SendStatus.SEND_OK and len(a.sends) == 2
        a.script = [ResponseCode.SERVICE_NOT_AVAILABLE]
        errors: list[BaseException | None] = []
        fut = p.send_async(msg("OnlyA"), callback=lambda r, e: errors.append(e))
        with pytest.raises(ServiceNotAvailableError):
            await fut
        assert len(a.sends) == 3
        await eventually(lambda: len(errors) == 1, timeout=2, message="callback")
        assert isinstance(errors[0], ServiceNotAvailableError)
        a.default_code = CLOSE
        with pytest.raises(SendFailedError) as info:
            await p.send_async(msg("OnlyA"))
        assert len(info.value.errors) == 3 and isinstance(info.value.errors[0], RemotingClosedError)


async def test_in_flight_bound(ns: NamesrvController, brokers) -> None:
    a, b = brokers
    a.default_code = b.default_code = HANG
    async with make(ns, max_in_flight=2, send_msg_timeout=0.5) as p:
        f1 = p.send_async(msg())
        f2 = p.send_async(msg())
        assert p.in_flight == 2
        with pytest.raises(BufferFullError):
            p.send_async(msg())
        begin = time.monotonic()
        with pytest.raises(BufferFullError, match="no send slot"):
            await p.send(msg(), timeout=0.1)
        assert time.monotonic() - begin < 0.4
        results = await asyncio.gather(f1, f2, return_exceptions=True)
        assert all(isinstance(r, SendFailedError) for r in results)
        assert p.in_flight == 0
        a.default_code = b.default_code = ResponseCode.SUCCESS
        assert (await p.send(msg())).status is SendStatus.SEND_OK


async def test_waiting_sender_gets_the_freed_slot(ns: NamesrvController, brokers) -> None:
    a, b = brokers
    a.default_code = b.default_code = HANG
    async with make(ns, max_in_flight=1, send_msg_timeout=0.3) as p:
        first = p.send_async(msg())
        await eventually(lambda: len(a.sends) + len(b.sends) == 1, timeout=5, message="first send hangs")
        a.default_code = b.default_code = ResponseCode.SUCCESS
        result = await p.send(msg(), timeout=2.0)  # waits until the first one times out
        assert result.status is SendStatus.SEND_OK
        with pytest.raises(SendFailedError):
            await first


# -- lifecycle -------------------------------------------------------------------------------------------------


async def test_state_errors(ns: NamesrvController, brokers) -> None:
    p = make(ns)
    with pytest.raises(ProducerStateError):
        await p.send(msg())
    await p.start()
    twin = make(ns)
    with pytest.raises(MQClientError, match="already been created"):
        await twin.start()
    assert (await p.send(msg())).status is SendStatus.SEND_OK
    await p.shutdown()
    with pytest.raises(ProducerStateError):
        await p.send(msg())
    with pytest.raises(ProducerStateError):
        p.send_async(msg())
    with pytest.raises(ProducerStateError):
        await p.start()
    await p.shutdown()  # idempotent
    with pytest.raises(InvalidMessageError):
        Producer("bad group!")
    with pytest.raises(InvalidMessageError):
        Producer("DEFAULT_PRODUCER")


async def test_two_producers_share_one_instance(ns: NamesrvController, brokers) -> None:
    a, _ = brokers
    async with make(ns) as p1, Producer("PG2", namesrv_addr=ns.addr) as p2:
        assert p1.instance is p2.instance
        await p1.send(msg("OnlyA"))
        await p2.send(msg("OnlyA"))
        await p1.instance.send_heartbeat_to_all()
        groups = {g["groupName"] for g in a.heartbeats[-1]["producerDataSet"]}
        assert groups == {GROUP, "PG2"}
        instance = p1.instance
    assert instance.closed


async def test_shutdown_waits_for_in_flight_sends(ns: NamesrvController, brokers) -> None:
    a, b = brokers
    a.default_code = b.default_code = HANG
    p = make(ns, send_msg_timeout=5.0)
    await p.start()
    pending = asyncio.ensure_future(p.send(msg()))
    await eventually(lambda: len(a.sends) + len(b.sends) == 1, timeout=5, message="send reached a broker")
    begin = time.monotonic()
    await p.shutdown(grace=0.2)
    assert time.monotonic() - begin < 2.0
    with pytest.raises(SendFailedError):
        await pending


# -- heartbeats --------------------------------------------------------------------------------------------------


async def test_heartbeat_after_first_route_and_unregister_at_shutdown(ns: NamesrvController, brokers) -> None:
    a, b = brokers
    async with make(ns) as p:
        client_id = p.instance.client_id
        await p.send(msg())
        await eventually(lambda: bool(a.heartbeats and b.heartbeats), timeout=5, message="heartbeats to both masters")
    for broker in (a, b):
        hb = broker.heartbeats[0]
        assert hb == {"clientID": client_id, "consumerDataSet": [], "producerDataSet": [{"groupName": GROUP}]}
        assert broker.unregisters == [{"clientID": client_id, "producerGroup": GROUP}]
    beat = next(r for r in a.received if r.code == RequestCode.HEART_BEAT)
    assert beat.serialize_type == SerializeType.JSON and json.loads(beat.body)["clientID"] == client_id


async def test_periodic_heartbeats(ns: NamesrvController, brokers) -> None:
    a, _ = brokers
    async with make(ns, heartbeat_broker_interval=0.05) as p:
        await p.send(msg("OnlyA"))
        await eventually(lambda: len(a.heartbeats) >= 3, timeout=5, message="periodic heartbeats")


# -- routes ------------------------------------------------------------------------------------------------------


async def test_new_topic_uses_tbw102_then_its_own_route(ns: NamesrvController, brokers) -> None:
    a, _b = brokers
    async with make(ns, poll_name_server_interval=0.05) as p:
        results = [await p.send(msg("Fresh")) for _ in range(8)]
        assert {r.message_queue.broker_name for r in results} == {"broker-a"}  # only broker-a has TBW102
        assert {r.message_queue.queue_id for r in results} == {0, 1, 2, 3}  # min(4, 8) queues
        assert all(s.fields["c"] == "TBW102" and s.fields["d"] == "4" for s in a.sends)
        assert p.instance.routes.is_from_default_route("Fresh")
        a.topics["Fresh"] = 2  # the broker created it and registers it
        await a.register(ns.addr, counter=2)
        await eventually(lambda: not p.instance.routes.is_from_default_route("Fresh"), timeout=5,
                         message="own route replaces the default one")
        assert len(publish_info(p, "Fresh").message_queues) == 2


async def test_no_route_anywhere(ns: NamesrvController) -> None:
    b = await ScriptedBroker("broker-b", {"T": 4}).start()
    await b.register(ns.addr)
    try:
        async with make(ns) as p:
            with pytest.raises(NoRouteError, match="Missing"):
                await p.send(msg("Missing"))
            with pytest.raises(NoRouteError):
                await p.send_async(msg("Missing"))
    finally:
        await b.stop()


async def test_concurrent_senders_share_one_route_lookup(tmp_path: Path) -> None:
    broker = await ScriptedBroker("broker-x").start()
    gate = asyncio.Event()
    fake_ns = await ScriptedNamesrv({"X": route_for(("broker-x", broker.addr, 4))}, gate=gate).start()
    try:
        async with make(fake_ns.addr) as p:
            sends = [asyncio.ensure_future(p.send(msg("X"))) for _ in range(50)]
            await eventually(lambda: fake_ns.calls.get("X") == 1, timeout=5, message="lookup started")
            gate.set()
            results = await asyncio.gather(*sends)
        assert all(r.status is SendStatus.SEND_OK for r in results)
        assert fake_ns.calls == {"X": 1}
    finally:
        await fake_ns.stop()
        await broker.stop()


async def test_failed_send_refreshes_the_route(tmp_path: Path) -> None:
    broker = await ScriptedBroker("broker-x").start()
    fake_ns = await ScriptedNamesrv({"X": route_for(("broker-x", broker.addr, 4))}).start()
    try:
        async with make(fake_ns.addr) as p:
            await p.send(msg("X"))
            assert fake_ns.calls == {"X": 1}
            broker.script = [CLOSE]
            await p.send(msg("X"))
            await eventually(lambda: fake_ns.calls["X"] == 2, timeout=5, message="on-demand refresh")
    finally:
        await fake_ns.stop()
        await broker.stop()


async def test_route_poll_picks_up_a_new_broker(ns: NamesrvController) -> None:
    a = await ScriptedBroker("broker-a", {"Grow": 2}).start()
    b = await ScriptedBroker("broker-b", {"Grow": 2}).start()
    await a.register(ns.addr)
    try:
        async with make(ns, poll_name_server_interval=0.05) as p:
            await p.send(msg("Grow"))
            assert publish_info(p, "Grow").broker_names == {"broker-a"}
            await b.register(ns.addr)
            await eventually(lambda: publish_info(p, "Grow").broker_names == {"broker-a", "broker-b"},
                             timeout=5, message="route poll")
            results = [await p.send(msg("Grow")) for _ in range(8)]
            assert {r.message_queue.broker_name for r in results} == {"broker-a", "broker-b"}
    finally:
        await a.stop()
        await b.stop()


async def test_name_server_failover(tmp_path: Path) -> None:
    ns1 = await start_namesrv(tmp_path / "1")
    ns2 = await start_namesrv(tmp_path / "2")
    a = await ScriptedBroker("broker-a", {"T": 4, "U": 4}).start()
    await a.register(ns1.addr, ns2.addr)
    stopped = []
    try:
        async with make(f"{ns1.addr};{ns2.addr}") as p:
            await p.send(msg("T"))
            first = p.instance.refresher.current_namesrv
            victim = ns1 if first == ns1.addr else ns2
            await victim.stop()
            stopped.append(victim)
            assert (await p.send(msg("U"))).status is SendStatus.SEND_OK  # needs a lookup: goes to the other
            assert p.instance.refresher.current_namesrv != first
    finally:
        for ns in (ns1, ns2):
            if ns not in stopped:
                await ns.stop()
        await a.stop()


async def test_silent_name_server_gets_only_its_share_of_the_budget(tmp_path: Path) -> None:
    broker = await ScriptedBroker("broker-x").start()
    silent = await ScriptedNamesrv(hang=True).start()
    good = await ScriptedNamesrv({"X": route_for(("broker-x", broker.addr, 4))}).start()
    try:
        async with make(f"{silent.addr};{good.addr}", namesrv_timeout=0.4) as p:
            begin = time.monotonic()
            result = await p.send(msg("X"))
            assert time.monotonic() - begin < 1.0
            assert result.status is SendStatus.SEND_OK
            assert p.instance.refresher.current_namesrv == good.addr
    finally:
        await silent.stop()
        await good.stop()
        await broker.stop()


async def test_no_name_server_answers(tmp_path: Path) -> None:
    async with make(f"{dead_addr()};{dead_addr()}", namesrv_timeout=0.5) as p:
        begin = time.monotonic()
        with pytest.raises(NoNameServerError, match="no name server answered"):
            await p.send(msg())
        assert time.monotonic() - begin < 1.5


async def test_topic_table_is_bounded(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(route_table_module, "MAX_TOPICS", 2)
    broker = await ScriptedBroker("broker-x").start()
    routes = {t: route_for(("broker-x", broker.addr, 2)) for t in ("X1", "X2", "X3")}
    fake_ns = await ScriptedNamesrv(routes).start()
    try:
        async with make(fake_ns.addr) as p:
            for topic in ("X1", "X2", "X3"):
                await p.send(msg(topic))
            assert list(p.instance.routes.route_table) == ["X2", "X3"]
            assert [t for t in ("X1", "X2", "X3") if p.publish_info(t) is not None] == ["X2", "X3"]
            assert (await p.send(msg("X1"))).status is SendStatus.SEND_OK  # looked up again
            assert fake_ns.calls["X1"] == 2 and len(p.instance.routes.route_table) == 2
    finally:
        await fake_ns.stop()
        await broker.stop()


async def test_attempt_hook_sees_every_attempt(ns: NamesrvController, brokers) -> None:
    a, b = brokers
    a.default_code = ResponseCode.SERVICE_NOT_AVAILABLE
    seen: list[tuple[str, str | None]] = []

    def hook(queue: MessageQueue, error: BaseException | None, latency_ms: float) -> None:
        assert latency_ms >= 0
        seen.append((queue.broker_name, None if error is None else type(error).__name__))
        raise RuntimeError("a broken hook must not break sends")

    async with make(ns, attempt_hook=hook, send_latency_fault_enable=False) as p:
        for _ in range(6):
            assert (await p.send(msg())).message_queue.broker_name == "broker-b"
        # Async sends do not retry broker error codes (RocketMQ's rule): whichever broker round-robin picks,
        # the hook sees the attempt.
        with contextlib.suppress(ServiceNotAvailableError):
            await p.send_async(msg())
        await p.send(msg(), selector=lambda qs, m, arg: next(q for q in qs if q.broker_name == "broker-b"))
    assert len(seen) == len(a.sends) + len(b.sends)
    assert {s for s in seen if s[0] == "broker-a"} <= {("broker-a", "ServiceNotAvailableError")}
    assert all(err is None for name, err in seen if name == "broker-b")
