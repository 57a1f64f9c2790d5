"""Queries through a broker: the SDK's query_message / view_message against a real name server and broker
(in the test's loop), QUERY_MESSAGE as a Java client frames it, and a slave answering when its master is gone."""

from __future__ import annotations

import asyncio
import json
import struct
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from pocketmq.broker.controller import BrokerController
from pocketmq.client import Message, Producer
from pocketmq.namesrv.controller import NamesrvController
from pocketmq.store.config import BrokerRole
from tests.cluster import start_broker
from tests.helpers import eventually

FAR = (1 << 63) - 1


@pytest.fixture
async def producer(namesrv: NamesrvController) -> AsyncIterator[Producer]:
    p = Producer("IndexPG", namesrv_addr=namesrv.addr)
    await p.start()
    yield p
    await p.shutdown()


async def _found(producer: Producer, topic: str, key: str, count: int) -> bool:
    return len(await producer.query_message(topic, key, 32, 0, FAR)) == count


async def test_keys_unique_and_offset_ids_found(broker: BrokerController, producer: Producer) -> None:
    sent = [await producer.send(Message("Orders", f"body-{i}".encode(), keys=[f"order-{i}", "shop-7"]))
            for i in range(20)]
    await eventually(lambda: _found(producer, "Orders", "shop-7", 20))
    found = await producer.query_message("Orders", "order-4", 32, 0, FAR)
    assert [m.body for m in found] == [b"body-4"] and found[0].msg_id == sent[4].msg_id
    newest_first = await producer.query_message("Orders", "shop-7", 5, 0, FAR)
    assert [m.body for m in newest_first] == [f"body-{i}".encode() for i in range(19, 14, -1)]
    assert await producer.query_message("Orders", "order-99", 32, 0, FAR) == []
    by_offset = await producer.view_message("Orders", sent[7].offset_msg_id)
    by_unique = await producer.view_message("Orders", sent[7].msg_id)
    assert by_offset.body == by_unique.body == b"body-7"
    assert by_unique.commit_log_offset == by_offset.commit_log_offset


async def test_time_range_through_the_broker(broker: BrokerController, producer: Producer) -> None:
    await producer.send(Message("Timed", b"x", keys="k"))
    await eventually(lambda: _found(producer, "Timed", "k", 1))
    now = int(time.time() * 1000)
    assert await producer.query_message("Timed", "k", 32, now + 60_000, FAR) == []
    assert await producer.query_message("Timed", "k", 32, 0, now - 60_000) == []


def _frame(code: int, opaque: int, ext: dict[str, str]) -> bytes:
    """A request exactly as the Java client writes it: JSON header, serialize type 0 in the top byte."""
    header = json.dumps({"code": code, "language": "JAVA", "version": 395, "opaque": opaque, "flag": 0,
                         "extFields": ext, "serializeTypeCurrentRPC": "JSON"}).encode()
    return struct.pack(">ii", 4 + len(header), len(header)) + header


async def _read_frame(reader: asyncio.StreamReader) -> tuple[dict[str, object], bytes]:
    (length,) = struct.unpack(">i", await reader.readexactly(4))
    data = await reader.readexactly(length)
    (mark,) = struct.unpack_from(">i", data)
    header_len = mark & 0xFFFFFF
    return json.loads(data[4:4 + header_len]), data[4 + header_len:]


async def test_wire_query_message_as_java_sends_it(broker: BrokerController, producer: Producer) -> None:
    sent = await producer.send(Message("Wire", b"wire-body", keys="order-42"))
    await eventually(lambda: _found(producer, "Wire", "order-42", 1))
    reader, writer = await asyncio.open_connection(*broker.server.address)
    try:
        ext = {"topic": "Wire", "key": "order-42", "maxNum": "32", "beginTimestamp": "0",
               "endTimestamp": str(FAR)}
        writer.write(_frame(12, 77, ext))
        header, body = await asyncio.wait_for(_read_frame(reader), 10)
        assert header["code"] == 0 and header["opaque"] == 77
        fields = header["extFields"]
        assert isinstance(fields, dict) and int(fields["indexLastUpdatePhyoffset"]) >= 0
        assert int(fields["indexLastUpdateTimestamp"]) > 0
        size, magic = struct.unpack_from(">ii", body)
        assert size == len(body) and magic == -626843481  # one whole record, RocketMQ's v1 magic
        assert b"wire-body" in body and b"order-42" in body
        writer.write(_frame(12, 78, {**ext, "key": sent.msg_id, "maxNum": "1", "_UNIQUE_KEY_QUERY": "true"}))
        header, body = await asyncio.wait_for(_read_frame(reader), 10)
        assert header["code"] == 0 and b"wire-body" in body
        writer.write(_frame(12, 79, {**ext, "key": "missing"}))
        header, body = await asyncio.wait_for(_read_frame(reader), 10)
        assert header["code"] == 22 and "maybe time range not correct" in str(header.get("remark"))
        writer.write(_frame(12, 80, {"topic": "Wire", "key": "k"}))
        header, _body = await asyncio.wait_for(_read_frame(reader), 10)
        assert header["code"] != 0 and "maxNum" in str(header.get("remark"))
    finally:
        writer.close()
        await writer.wait_closed()


async def test_slave_answers_when_master_is_gone(tmp_path: Path, namesrv: NamesrvController) -> None:
    master = await start_broker(tmp_path, "broker-a", namesrv.addr)
    slave = await start_broker(tmp_path, "broker-a", namesrv.addr, broker_role=BrokerRole.SLAVE, broker_id=1)
    producer = Producer("IndexSlavePG", namesrv_addr=namesrv.addr)
    await producer.start()
    try:
        sent = [await producer.send(Message("Replicated", f"r{i}".encode(), keys="rk")) for i in range(5)]
        assert master.store is not None and slave.store is not None
        await eventually(lambda: slave.store is not None and master.store is not None
                         and slave.store.max_phy_offset == master.store.max_phy_offset)
        await eventually(lambda: slave.store is not None and slave.store.index is not None
                         and slave.store.index.offset == slave.store.max_phy_offset)
        await master.stop()
        found = await producer.query_message("Replicated", "rk", 32, 0, FAR)
        assert sorted(m.body for m in found) == [f"r{i}".encode() for i in range(5)]
        assert all(m.store_host == master.addr for m in found)  # the master's records, served by the slave
        viewed = await producer.view_message("Replicated", sent[2].msg_id)
        assert viewed.body == b"r2"
        by_offset = await producer.view_message("Replicated", sent[3].offset_msg_id)
        assert by_offset.body == b"r3"
    finally:
        await producer.shutdown()
        await slave.stop()
        if master._running:
            await master.stop()


async def test_query_on_a_broker_without_index(tmp_path: Path, namesrv: NamesrvController) -> None:
    plain = await start_broker(tmp_path, "broker-n", namesrv.addr, {"messageIndexEnable": "false"})
    try:
        reader, writer = await asyncio.open_connection(*plain.server.address)
        writer.write(_frame(12, 5, {"topic": "T", "key": "k", "maxNum": "4", "beginTimestamp": "0",
                                    "endTimestamp": str(FAR)}))
        header, _body = await asyncio.wait_for(_read_frame(reader), 10)
        assert header["code"] == 22 and "messageIndexEnable=false" in str(header.get("remark"))
        writer.close()
        await writer.wait_closed()
        assert plain.store is not None and not (Path(plain.store.config.store_path_root_dir) / "index").exists()
    finally:
        await plain.stop()
