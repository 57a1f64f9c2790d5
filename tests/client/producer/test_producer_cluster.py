"""The producer against a real in-process cluster: two name servers, two ASYNC_MASTER brokers (2m-noslave).

What the client promises end to end: sends spread over every writable queue of both brokers and are stored
as sent (body, tags, keys, UNIQ_KEY, flag, compression bit); topics are auto-created through TBW102; batch
and ordered sends; validation errors (the client's and the broker's) reach the caller and store nothing;
the producer keeps working with one of its two name servers down and with one broker stopped.
"""

from __future__ import annotations

import asyncio
import os
import zlib
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from pocketmq.broker.config import load_broker_config
from pocketmq.broker.controller import BrokerController
from pocketmq.client import (
    InvalidMessageError,
    Message,
    MessageQueue,
    Producer,
    SendFailedError,
    SendResult,
    SendStatus,
)
from pocketmq.client.blocking import Producer as BlockingProducer
from pocketmq.common.message import parse_properties
from pocketmq.common.record import MessageRecord, decode_record, message_id
from pocketmq.namesrv.controller import NamesrvController
from pocketmq.remoting.client import RemotingClient
from pocketmq.remoting.codes import RequestCode, ResponseCode, SerializeType
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.errors import MessageIllegalError
from tests.client.producer.producer_support import start_namesrv
from tests.helpers import eventually

GROUP = "ClusterPG"


def broker_config(name: str, namesrvs: str, root: Path, **overrides: object) -> object:
    return load_broker_config(
        {}, broker_name=name, namesrv_addr=namesrvs, listen_port=0, listen_host="127.0.0.1",
        store_path_root_dir=str(root), mapped_file_size_commit_log=4 * 1024 * 1024, warm_mapped_file=False,
        **overrides,
    )


@dataclass
class Cluster:
    namesrvs: list[NamesrvController]
    brokers: dict[str, BrokerController]

    @property
    def namesrv_addr(self) -> str:
        return ";".join(ns.addr for ns in self.namesrvs)


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    namesrvs = [await start_namesrv(tmp_path / f"ns{i}") for i in range(2)]
    addr = ";".join(ns.addr for ns in namesrvs)
    brokers: dict[str, BrokerController] = {}
    for name in ("broker-a", "broker-b"):
        controller = BrokerController(broker_config(name, addr, tmp_path / name))  # type: ignore[arg-type]
        await controller.start()
        brokers[name] = controller
    yield Cluster(namesrvs, brokers)
    for controller in brokers.values():
        await controller.stop()
    for ns in namesrvs:
        await ns.stop()


async def admin(addr: str, code: int, fields: dict[str, str]) -> RemotingCommand:
    client = RemotingClient()
    try:
        return await client.invoke(addr, RemotingCommand.request(code, fields), timeout=5.0)
    finally:
        await client.close()


async def create_topic(cluster: Cluster, topic: str, queues: int = 4) -> None:
    fields = {"topic": topic, "defaultTopic": "TBW102", "readQueueNums": str(queues), "writeQueueNums": str(queues),
              "perm": "6", "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false"}
    for controller in cluster.brokers.values():
        response = await admin(controller.addr, RequestCode.UPDATE_AND_CREATE_TOPIC, fields)
        assert response.code == ResponseCode.SUCCESS, response


def stored(controller: BrokerController, topic: str, queue_id: int) -> list[MessageRecord]:
    """Every record of one queue, read straight from the broker's store."""
    store = controller.store
    assert store is not None
    records: list[MessageRecord] = []
    offset = 0
    while offset < store.get_max_offset_in_queue(topic, queue_id):
        result = store.get_messages("test", topic, queue_id, offset, 32)
        assert result.message_buffers, result.status
        for buf in result.message_buffers:
            record = decode_record(buf)
            assert isinstance(record, MessageRecord)
            records.append(record)
        offset = result.next_begin_offset
    return records


def stored_count(cluster: Cluster, topic: str, queues: int = 8) -> int:
    total = 0
    for controller in cluster.brokers.values():
        assert controller.store is not None
        total += sum(controller.store.get_max_offset_in_queue(topic, q) for q in range(queues))
    return total


async def test_sends_spread_over_every_queue_and_are_stored_as_sent(cluster: Cluster) -> None:
    await create_topic(cluster, "Spread")
    async with Producer(GROUP, namesrv_addr=cluster.namesrv_addr) as p:
        messages = [Message("Spread", f"body-{i}".encode(), tags=f"tag{i % 3}", keys=[f"k{i}", "common"], flag=i)
                    for i in range(40)]
        results = [await p.send(m) for m in messages]
    assert all(r.status is SendStatus.SEND_OK for r in results)
    assert {(r.message_queue.broker_name, r.message_queue.queue_id) for r in results} == {
        (b, q) for b in ("broker-a", "broker-b") for q in range(4)}
    by_uniq = {m.uniq_key: m for m in messages}
    seen = 0
    for name, controller in cluster.brokers.items():
        for queue_id in range(4):
            records = stored(controller, "Spread", queue_id)
            for record in records:
                sent = by_uniq[record.properties_map["UNIQ_KEY"]]
                assert record.body == sent.body and record.flag == sent.flag
                assert record.tags == sent.tags and record.keys == sent.key_list
                result = next(r for r in results if r.msg_id == sent.uniq_key)
                assert result.message_queue == MessageQueue("Spread", name, queue_id)
                assert result.queue_offset == record.queue_offset
                assert result.offset_msg_id == record.msg_id
                seen += 1
    assert seen == 40


async def test_topic_is_auto_created_through_tbw102(cluster: Cluster) -> None:
    async with Producer(GROUP, namesrv_addr=cluster.namesrv_addr, poll_name_server_interval=0.1) as p:
        first = await p.send(Message("AutoCreated", b"first"))
        assert first.status is SendStatus.SEND_OK
        assert p.instance.routes.is_from_default_route("AutoCreated")
        await eventually(lambda: not p.instance.routes.is_from_default_route("AutoCreated"), timeout=10,
                         message="the broker registers the new topic and the producer finds its route")
        results = [await p.send(Message("AutoCreated", f"m{i}".encode())) for i in range(16)]
    assert all(r.status is SendStatus.SEND_OK for r in results)
    assert stored_count(cluster, "AutoCreated") == 17
    assert all(r.message_queue.queue_id < 4 for r in results)  # created with the client's 4 queues


async def test_batch_is_stored_message_by_message(cluster: Cluster) -> None:
    await create_topic(cluster, "Batched")
    messages = [Message("Batched", f"batch-{i}".encode(), keys=f"key-{i}") for i in range(10)]
    async with Producer(GROUP, namesrv_addr=cluster.namesrv_addr) as p:
        result = await p.send_batch(messages)
    assert result.status is SendStatus.SEND_OK
    queue = result.message_queue
    records = stored(cluster.brokers[queue.broker_name], "Batched", queue.queue_id)
    assert [r.body for r in records] == [m.body for m in messages]
    assert [r.properties_map["UNIQ_KEY"] for r in records] == result.msg_id.split(",")
    assert [r.msg_id for r in records] == result.offset_msg_id.split(",")
    assert [r.keys for r in records] == [[f"key-{i}"] for i in range(10)]
    assert result.queue_offset == records[0].queue_offset


def by_order_id(queues: Sequence[MessageQueue], message: Message, arg: object) -> MessageQueue:
    assert isinstance(arg, int)
    return queues[arg % len(queues)]


async def test_ordered_messages_stay_in_one_queue_in_order(cluster: Cluster) -> None:
    await create_topic(cluster, "Ordered")
    async with Producer(GROUP, namesrv_addr=cluster.namesrv_addr) as p:
        for step in range(5):
            for order in range(6):
                await p.send(Message("Ordered", f"order{order}-step{step}".encode()), selector=by_order_id, arg=order)
        queues = await p.fetch_publish_message_queues("Ordered")
    for order in range(6):
        queue = queues[order % len(queues)]
        bodies = [r.body.decode() for r in stored(cluster.brokers[queue.broker_name], "Ordered", queue.queue_id)]
        mine = [b for b in bodies if b.startswith(f"order{order}-")]
        assert mine == [f"order{order}-step{step}" for step in range(5)]


async def test_compressed_body_is_stored_with_its_flag(cluster: Cluster) -> None:
    await create_topic(cluster, "Big")
    body = b"compressible " * 1000
    async with Producer(GROUP, namesrv_addr=cluster.namesrv_addr) as p:
        result = await p.send(Message("Big", body))
    (record,) = stored(cluster.brokers[result.message_queue.broker_name], "Big", result.message_queue.queue_id)
    assert record.sys_flag & 0x1 and zlib.decompress(record.body) == body


async def test_validation_errors_store_nothing(cluster: Cluster) -> None:
    await create_topic(cluster, "Strict")
    # The client lets a 5 MiB body through (its limit is raised), the broker's 4 MiB limit does not.
    async with Producer(GROUP, namesrv_addr=cluster.namesrv_addr, max_message_size=8 * 1024 * 1024,
                        compress_over=16 * 1024 * 1024) as p:
        with pytest.raises(InvalidMessageError):
            await p.send(Message("Strict", b""))
        with pytest.raises(InvalidMessageError):
            await p.send(Message("bad/topic", b"x"))
        with pytest.raises(InvalidMessageError):
            await p.send(Message("SCHEDULE_TOPIC_XXXX", b"x"))
        with pytest.raises(MessageIllegalError) as info:
            await p.send(Message("Strict", os.urandom(5 * 1024 * 1024)))
        assert info.value.response_code == ResponseCode.MESSAGE_ILLEGAL
        # The message's fault: no broker is isolated, the next send works.
        assert not len(p.fault_strategy.latency_fault_tolerance)
        assert (await p.send(Message("Strict", b"fine"))).status is SendStatus.SEND_OK
    assert stored_count(cluster, "Strict") == 1


async def test_json_headers_and_send_message_v1(cluster: Cluster) -> None:
    await create_topic(cluster, "Classic")
    async with Producer(GROUP, namesrv_addr=cluster.namesrv_addr, serialize_type=SerializeType.JSON,
                        send_smart_msg=False) as p:
        results = [await p.send(Message("Classic", b"v1", tags="T")) for _ in range(4)]
        batch = await p.send_batch([Message("Classic", b"b1"), Message("Classic", b"b2")])
    assert all(r.status is SendStatus.SEND_OK for r in results) and batch.status is SendStatus.SEND_OK
    assert stored_count(cluster, "Classic") == 6


async def test_async_and_oneway(cluster: Cluster) -> None:
    await create_topic(cluster, "Mixed")
    async with Producer(GROUP, namesrv_addr=cluster.namesrv_addr) as p:
        futures = [p.send_async(Message("Mixed", f"a{i}".encode())) for i in range(50)]
        results = await asyncio.gather(*futures)
        for i in range(20):
            await p.send_oneway(Message("Mixed", f"o{i}".encode()))
    assert all(r.status is SendStatus.SEND_OK for r in results)
    await eventually(lambda: stored_count(cluster, "Mixed") == 70, timeout=10, message="oneway messages stored")


async def test_heartbeat_registers_and_shutdown_unregisters(cluster: Cluster) -> None:
    await create_topic(cluster, "Hb")
    p = Producer(GROUP, namesrv_addr=cluster.namesrv_addr)
    await p.start()
    await p.send(Message("Hb", b"x"))
    client_id = p.instance.client_id

    def registered(name: str) -> bool:
        return client_id in cluster.brokers[name].clients.producers.get(GROUP, {})

    await eventually(lambda: registered("broker-a") and registered("broker-b"), timeout=5,
                     message="both masters know the producer")
    await p.shutdown()
    await eventually(lambda: not registered("broker-a") and not registered("broker-b"), timeout=5,
                     message="UNREGISTER_CLIENT removed it")


async def test_keeps_working_with_one_name_server_down(cluster: Cluster) -> None:
    await create_topic(cluster, "NsDown1")
    await create_topic(cluster, "NsDown2")
    async with Producer(GROUP, namesrv_addr=cluster.namesrv_addr, namesrv_timeout=1.0) as p:
        await p.send(Message("NsDown1", b"before"))
        current = p.instance.refresher.current_namesrv
        victim = next(ns for ns in cluster.namesrvs if ns.addr == current)
        await victim.stop()
        cluster.namesrvs.remove(victim)
        results = [await p.send(Message(topic, b"after")) for topic in ("NsDown1", "NsDown2", "AutoNsDown")]
        assert all(r.status is SendStatus.SEND_OK for r in results)
        assert p.instance.refresher.current_namesrv != current
        await p.instance.refresh_all_routes()  # the periodic poll works too


async def test_stopped_broker_is_avoided(cluster: Cluster) -> None:
    await create_topic(cluster, "Failover")
    async with Producer(GROUP, namesrv_addr=cluster.namesrv_addr) as p:
        for i in range(8):
            await p.send(Message("Failover", f"warm{i}".encode()))
        await cluster.brokers["broker-a"].stop()
        results = [await p.send(Message("Failover", f"after{i}".encode())) for i in range(30)]
        item = p.fault_strategy.latency_fault_tolerance.get("broker-a")
    del cluster.brokers["broker-a"]
    assert all(r.status is SendStatus.SEND_OK and r.message_queue.broker_name == "broker-b" for r in results)
    assert item is not None and item.start_timestamp > 0


async def test_blocking_facade_end_to_end(cluster: Cluster) -> None:
    await create_topic(cluster, "Blocking")

    def work() -> list[SendStatus]:
        with BlockingProducer(GROUP, namesrv_addr=cluster.namesrv_addr) as p:
            statuses = [p.send(Message("Blocking", f"s{i}".encode())).status for i in range(5)]
            statuses.append(p.send_batch([Message("Blocking", b"b1"), Message("Blocking", b"b2")]).status)
            statuses.append(p.send_async(Message("Blocking", b"a")).result(5).status)
        return statuses

    statuses = await asyncio.to_thread(work)
    assert statuses == [SendStatus.SEND_OK] * 7
    assert stored_count(cluster, "Blocking") == 8


# -- auto-batching -------------------------------------------------------------------------------------------


class Attempts:
    """An attempt hook that counts requests (one per attempt, a coalesced batch being one)."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, queue: MessageQueue, error: BaseException | None, latency_ms: float) -> None:
        self.count += 1


def record_at(cluster: Cluster, topic: str, result: SendResult) -> MessageRecord:
    queue = result.message_queue
    records = stored(cluster.brokers[queue.broker_name], topic, queue.queue_id)
    return next(r for r in records if r.queue_offset == result.queue_offset)


async def test_concurrent_sends_are_coalesced_and_each_gets_its_own_result(cluster: Cluster) -> None:
    await create_topic(cluster, "Coalesce")
    attempts = Attempts()
    messages = [Message("Coalesce", f"c-{i}".encode(), tags=f"t{i % 3}", keys=f"k{i}") for i in range(300)]
    async with Producer(GROUP, namesrv_addr=cluster.namesrv_addr, attempt_hook=attempts) as p:
        await p.send(Message("Coalesce", b"route"))  # learn the route first
        attempts.count = 0
        results = await asyncio.gather(*(p.send(m) for m in messages))
    assert attempts.count <= len(messages) // 4  # coalesced: far fewer requests than messages
    assert all(r.status is SendStatus.SEND_OK for r in results)
    assert len({(r.message_queue, r.queue_offset) for r in results}) == len(messages)
    assert len({r.msg_id for r in results}) == len(messages)
    for message, result in zip(messages, results, strict=True):
        assert result.msg_id == message.properties["UNIQ_KEY"]
        record = record_at(cluster, "Coalesce", result)
        assert record.body == message.body
        assert parse_properties(record.properties)["TAGS"] == message.properties["TAGS"]
        assert parse_properties(record.properties)["UNIQ_KEY"] == result.msg_id
        assert result.offset_msg_id == message_id(record.store_host, record.physical_offset)
    assert stored_count(cluster, "Coalesce") == len(messages) + 1


async def test_sequential_sends_and_opted_out_producers_send_one_request_each(cluster: Cluster) -> None:
    await create_topic(cluster, "NoCoalesce")
    attempts = Attempts()
    async with Producer(GROUP, namesrv_addr=cluster.namesrv_addr, attempt_hook=attempts) as p:
        for i in range(20):
            await p.send(Message("NoCoalesce", f"s{i}".encode()))
    assert attempts.count == 20
    attempts.count = 0
    async with Producer(GROUP, namesrv_addr=cluster.namesrv_addr, attempt_hook=attempts, auto_batch=False) as p:
        await p.send(Message("NoCoalesce", b"route"))
        results = await asyncio.gather(*(p.send(Message("NoCoalesce", f"c{i}".encode())) for i in range(50)))
    assert attempts.count == 51 and all(r.status is SendStatus.SEND_OK for r in results)


async def test_messages_a_batch_cannot_carry_are_sent_alone(cluster: Cluster) -> None:
    await create_topic(cluster, "Alone")
    attempts = Attempts()
    async with Producer(GROUP, namesrv_addr=cluster.namesrv_addr, attempt_hook=attempts, compress_over=100) as p:
        await p.send(Message("Alone", b"route"))
        attempts.count = 0
        big = [Message("Alone", bytes([65 + i % 26]) * 400) for i in range(30)]  # compressed: never batched
        results = await asyncio.gather(*(p.send(m) for m in big))
    assert attempts.count == 30
    for message, result in zip(big, results, strict=True):
        record = record_at(cluster, "Alone", result)
        assert record.sys_flag & 0x1  # stored compressed, as a message of its own
        assert zlib.decompress(record.body) == message.body


async def test_async_sends_are_coalesced_and_call_back_once_each(cluster: Cluster) -> None:
    await create_topic(cluster, "AsyncCoalesce")
    attempts = Attempts()
    calls: dict[int, list[tuple[SendResult | None, BaseException | None]]] = {}
    async with Producer(GROUP, namesrv_addr=cluster.namesrv_addr, attempt_hook=attempts) as p:
        await p.send(Message("AsyncCoalesce", b"route"))
        attempts.count = 0
        futures = []

        def recorder(i: int) -> Callable[[SendResult | None, BaseException | None], None]:
            calls[i] = []
            return lambda result, error: calls[i].append((result, error))

        for i in range(200):
            futures.append(p.send_async(Message("AsyncCoalesce", f"a{i}".encode()), callback=recorder(i)))
        results = await asyncio.gather(*futures)
        await eventually(lambda: all(calls.values()), message="every callback called")
        assert p.in_flight == 0
    assert attempts.count < 50
    assert all(len(c) == 1 and c[0][1] is None and c[0][0] == results[i] for i, c in calls.items())
    for i, result in enumerate(results):
        assert record_at(cluster, "AsyncCoalesce", result).body == f"a{i}".encode()


async def test_a_failed_batch_fails_each_of_its_sends(cluster: Cluster) -> None:
    await create_topic(cluster, "FailBatch")
    async with Producer(GROUP, namesrv_addr=cluster.namesrv_addr, send_msg_timeout=2.0) as p:
        await p.send(Message("FailBatch", b"route"))
        fields = {"topic": "FailBatch", "defaultTopic": "TBW102", "readQueueNums": "4", "writeQueueNums": "4",
                  "perm": "4", "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false"}
        for controller in cluster.brokers.values():  # read-only now: every send is refused (NO_PERMISSION)
            assert (await admin(controller.addr, RequestCode.UPDATE_AND_CREATE_TOPIC, fields)).code == 0
        outcomes = await asyncio.gather(*(p.send(Message("FailBatch", f"f{i}".encode())) for i in range(40)),
                                        return_exceptions=True)
    assert all(isinstance(o, SendFailedError) and "forbidden" in str(o.__cause__) for o in outcomes), outcomes
    assert stored_count(cluster, "FailBatch") == 1
