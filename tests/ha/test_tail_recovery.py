"""A master that lost its unflushed commit-log tail (power loss with ASYNC_FLUSH) takes it back from its slave
before it takes any write (:mod:`pocketmq.broker.tail_recovery`): with SYNC_MASTER nothing acknowledged is lost. Without
a slave it starts at once; with a slave that does not answer it starts after ``haTailRecoveryTimeoutMs`` and the
slave is cut back to it as before (:mod:`pocketmq.ha.client`). GET_COMMIT_LOG_TAIL answers clear errors.

Real brokers and a name server in the test's loop, on 127.0.0.1 port 0, real files; the power loss is the one
of ``tests/ha/test_diverged_slave.py`` (the checkpoint says what was flushed, ``chaos.control.drop_unflushed``
cuts the rest)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from pocketmq.broker.config import BrokerRole
from pocketmq.broker.controller import BrokerController
from pocketmq.broker.tail_recovery import (
    CommitLogTailRequestHeader,
    SlaveRefused,
    TailRecovery,
    TailResult,
    complete_records,
)
from pocketmq.common.record import decode_records
from pocketmq.namesrv.controller import NamesrvController
from pocketmq.remoting.client import RemotingClient
from pocketmq.remoting.codes import RequestCode, ResponseCode
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.connection import Connection
from pocketmq.remoting.headers import SendMessageResponseHeader
from pocketmq.store.message_store import MessageStore
from tests.broker.test_consume import pull_request, send
from tests.broker.test_rewind_guard import _power_loss
from tests.cluster import start_broker
from tests.ha.support import (
    Cluster,
    append_messages,
    assert_commit_logs_identical,
    assert_queues_serve_the_same,
    queue_messages,
)
from tests.helpers import eventually
from tests.store.support import msg

TOPIC = "Tail"
NAME = "broker-t"
QUEUES = 4
BODY = 30_000  # 50 lost messages span more than a 1 MiB commit-log file: a blank end-of-file record is taken back


@pytest.fixture
async def client() -> AsyncIterator[RemotingClient]:
    c = RemotingClient()
    yield c
    await c.close()


class Brokers:
    """The brokers a test started, stopped at the end whatever happened."""

    def __init__(self, tmp: Path, namesrv: str) -> None:
        self.tmp, self.namesrv = tmp, namesrv
        self.running: list[BrokerController] = []

    async def master(self, **kw: Any) -> BrokerController:
        kw.setdefault("broker_role", BrokerRole.SYNC_MASTER)
        return await self._start(**kw)

    async def slave(self) -> BrokerController:
        return await self._start(broker_role=BrokerRole.SLAVE, broker_id=1)

    async def _start(self, **kw: Any) -> BrokerController:
        broker = await start_broker(self.tmp, NAME, self.namesrv, **kw)
        self.running.append(broker)
        return broker

    async def power_loss(self, broker: BrokerController, keep: int) -> None:
        """The master dies and its disk keeps only the commit log before ``keep`` (see the module docstring)."""
        await broker.stop()
        self.running.remove(broker)
        await asyncio.to_thread(_power_loss, Path(broker.config.store.store_path_root_dir), keep)

    async def close(self) -> None:
        for broker in reversed(self.running):
            await broker.stop()


@pytest.fixture
async def brokers(tmp_path: Path, namesrv: NamesrvController) -> AsyncIterator[Brokers]:
    b = Brokers(tmp_path, namesrv.addr)
    yield b
    await b.close()


def store_of(broker: BrokerController) -> MessageStore:
    assert broker.store is not None
    return broker.store


async def attached(master: BrokerController, slave: BrokerController) -> None:
    """The slave learns the (restarted) master's HA address from the name server and connects."""
    await slave.register_all()
    await eventually(lambda: master.ha_service is not None and len(master.ha_service.attached_slaves) == 1,
                     message="slave attached")


async def send_many(client: RemotingClient, addr: str, first: int, count: int) -> list[tuple[int, int]]:
    """SEND_OK ``count`` messages ``m<first>``... round robin over the queues; (queue, queue offset) of each."""
    placed = []
    for i in range(first, first + count):
        body = f"m{i}:".encode() + bytes([i % 251]) * BODY
        resp = await send(client, addr, TOPIC, body, queue_id=i % QUEUES)
        header = SendMessageResponseHeader.from_command(resp)
        placed.append((header.queue_id, header.queue_offset))
    return placed


async def pull_all(client: RemotingClient, addr: str, queue_id: int, offset: int = 0,
                   group: str = "CG") -> list[bytes]:
    out: list[bytes] = []
    while True:
        resp = await client.invoke(addr, pull_request(TOPIC, offset, queue_id=queue_id, group=group))
        if resp.code != ResponseCode.SUCCESS:
            return out
        records = list(decode_records(bytes(resp.body or b"")))
        out += [bytes(r.body) for r in records]
        offset = records[-1].queue_offset + 1


async def test_a_sync_master_takes_back_every_acknowledged_message(brokers: Brokers, client: RemotingClient) -> None:
    master = await brokers.master()
    slave = await brokers.slave()
    await attached(master, slave)
    await send_many(client, master.addr, 0, 10)
    keep = store_of(master).max_phy_offset  # the disk holds these ten
    await send_many(client, master.addr, 10, 50)  # SEND_OK: on the slave too, lost by the master
    lost_max = store_of(master).max_phy_offset
    assert lost_max - keep > store_of(master).config.mapped_file_size_commit_log
    before = {q: await pull_all(client, master.addr, q) for q in range(QUEUES)}
    assert sum(map(len, before.values())) == 60
    master.offsets.commit_offset("G", TOPIC, 1, 6)  # a group consumed queue 1 up to offset 6, in the lost range
    await eventually(lambda: store_of(slave).max_phy_offset == lost_max, message="replicated")
    await brokers.power_loss(master, keep)

    master = await brokers.master()
    store = store_of(master)
    assert store.recovery_summary["abnormal"] is True
    result = master.tail_recovery
    assert result is not None and result.outcome == "recovered", result
    assert (result.bytes, result.records, result.slave) == (lost_max - keep, 50, slave.addr)
    assert store.max_phy_offset == store.recovered_max == lost_max
    for q in range(QUEUES):  # every SEND_OK message is back, at its queue offset
        assert await pull_all(client, master.addr, q) == before[q]
    await assert_commit_logs_identical(store, store_of(slave))
    assert await assert_queues_serve_the_same(store, store_of(slave)) == 60
    resp = await client.invoke(master.addr, RemotingCommand.request(
        RequestCode.QUERY_CONSUMER_OFFSET, {"consumerGroup": "G", "topic": TOPIC, "queueId": "1"}))
    assert resp.code == ResponseCode.SUCCESS and (resp.ext_fields or {})["offset"] == "6"
    assert await pull_all(client, master.addr, 1, 6, group="G") == before[1][6:]  # not moved, not skipped

    await attached(master, slave)
    placed = await send_many(client, master.addr, 60, 8)  # new sends land after the recovered tail
    assert placed == [(q, 15) for q in range(QUEUES)] + [(q, 16) for q in range(QUEUES)]
    assert store.max_phy_offset > lost_max
    await eventually(lambda: store_of(slave).max_phy_offset == store.max_phy_offset, message="slave follows")
    await assert_commit_logs_identical(store, store_of(slave))


async def test_no_slave_listed_starts_at_once(brokers: Brokers, client: RemotingClient) -> None:
    master = await brokers.master(broker_role=BrokerRole.ASYNC_MASTER)
    await send_many(client, master.addr, 0, 10)
    keep = store_of(master).max_phy_offset
    await send_many(client, master.addr, 10, 5)
    await brokers.power_loss(master, keep)
    began = time.monotonic()
    master = await brokers.master(broker_role=BrokerRole.ASYNC_MASTER)
    assert time.monotonic() - began < 3.0  # far below the 10 s default budget
    assert master.tail_recovery is not None and master.tail_recovery.outcome == "no_slave"
    assert store_of(master).max_phy_offset == store_of(master).recovered_max == keep


async def test_a_frozen_slave_is_waited_for_until_the_timeout_then_cut_back(brokers: Brokers,
                                                                            client: RemotingClient) -> None:
    master = await brokers.master()
    slave = await brokers.slave()
    await attached(master, slave)
    await send_many(client, master.addr, 0, 10)
    keep = store_of(master).max_phy_offset
    await send_many(client, master.addr, 10, 6)
    await eventually(lambda: store_of(slave).max_phy_offset == store_of(master).max_phy_offset, message="replicated")
    frozen = asyncio.Event()

    async def never(req: RemotingCommand, conn: Connection) -> RemotingCommand:
        await frozen.wait()
        return req.response(ResponseCode.SYSTEM_ERROR, "frozen")

    slave.server.register(RequestCode.GET_COMMIT_LOG_TAIL, never)  # accepts, never answers (as SIGSTOP)
    await brokers.power_loss(master, keep)
    began = time.monotonic()
    try:
        master = await brokers.master(ha_tail_recovery_timeout_ms=1500)
    finally:
        frozen.set()
    assert 1.4 <= time.monotonic() - began < 6.0
    assert master.tail_recovery is not None and master.tail_recovery.outcome == "timeout"
    store = store_of(master)
    assert store.max_phy_offset == store.recovered_max == keep
    await attached(master, slave)  # the slave is cut back to the master's log (the fallback of ha.client)
    await eventually(lambda: store_of(slave).max_phy_offset == keep, message="slave cut back")
    await send_many(client, master.addr, 16, 4)
    await eventually(lambda: store_of(slave).max_phy_offset == store.max_phy_offset, message="slave follows")
    await assert_commit_logs_identical(store, store_of(slave))


async def _tail(client: RemotingClient, addr: str, offset: int, max_bytes: int = 4096) -> RemotingCommand:
    header = CommitLogTailRequestHeader(offset, max_bytes).to_fields()
    return await client.invoke(addr, RemotingCommand.request(RequestCode.GET_COMMIT_LOG_TAIL, header))


async def test_the_request_answers_clear_errors(brokers: Brokers, client: RemotingClient) -> None:
    master = await brokers.master(broker_role=BrokerRole.ASYNC_MASTER)
    slave = await brokers.slave()
    await attached(master, slave)
    await send_many(client, master.addr, 0, 3)
    slave_store = store_of(slave)
    end = store_of(master).max_phy_offset
    await eventually(lambda: slave_store.max_phy_offset == end, message="replicated")

    on_master = await _tail(client, master.addr, 0)
    assert on_master.code == ResponseCode.SYSTEM_ERROR and "slave only" in (on_master.remark or "")
    for offset, words in ((-1, "must be >= 0"), (1, "not the start of a record")):
        bad = await _tail(client, slave.addr, offset)
        assert bad.code == ResponseCode.SYSTEM_ERROR and words in (bad.remark or ""), bad
        assert (bad.ext_fields or {})["maxOffset"] == str(end)
    missing = await client.invoke(slave.addr, RemotingCommand.request(RequestCode.GET_COMMIT_LOG_TAIL, {"offset": "0"}))
    assert missing.code != ResponseCode.SUCCESS and "maxBytes" in (missing.remark or "")
    behind = await _tail(client, slave.addr, end + 100)
    assert behind.code == ResponseCode.SUCCESS and not behind.body
    assert (behind.ext_fields or {})["maxOffset"] == str(end)
    good = await _tail(client, slave.addr, 0, 1 << 20)
    assert good.code == ResponseCode.SUCCESS and len(good.body or b"") == end
    size, body = slave_store.config.mapped_file_size_commit_log, bytes(good.body or b"")
    assert complete_records(body, 0, size) == (end, 3)
    assert complete_records(body[:-1], 0, size) == (end - _record_sizes(body)[-1], 2)  # an incomplete last one
    assert complete_records(body[1:], 1, size) is None


def _record_sizes(data: bytes) -> list[int]:
    sizes, pos = [], 0
    while pos + 4 <= len(data):
        size = int.from_bytes(data[pos:pos + 4], "big")
        sizes.append(size)
        pos += size
    return sizes


async def _copy_from(source: MessageStore, target: MessageStore, monkeypatch: pytest.MonkeyPatch) -> TailResult:
    """Run the copy of :class:`TailRecovery` into ``target`` with ``source`` standing in for the slave."""
    recovery = TailRecovery(target, RemotingClient(), [], broker_name=NAME, timeout_ms=5000)
    end = source.max_phy_offset

    async def ask(slave: str, offset: int, max_bytes: int) -> tuple[int, bytes]:
        return end, bytes(source.get_commit_log_data(offset, max_bytes) or b"")

    monkeypatch.setattr(recovery, "_ask", ask)
    monkeypatch.setattr(recovery, "_deadline", time.monotonic() + 5)
    return await recovery._copy("source", end)


async def test_a_store_failure_keeps_only_the_indexed_records(cluster: Cluster,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    source = await cluster.start_store("source")
    target = await cluster.start_store("target")
    keep = append_messages(source, 10, seed=1)
    assert append_messages(target, 10, seed=1) == keep  # the same records' frames: target is source's prefix
    for i in range(3):  # a queue the target has no consume-queue file for: its dispatch must make one
        assert source.append(msg(topic="TopicC", body=b"c%d" % i)).status.name == "PUT_OK"

    async def disk_full() -> None:
        raise OSError(28, "No space left on device")

    with monkeypatch.context() as patched:
        patched.setattr(target, "prepare_dispatch", disk_full)
        failed = await _copy_from(source, target, patched)
    assert failed.outcome == "store_error" and target.max_phy_offset == keep and target.dispatch_behind_bytes == 0
    done = await _copy_from(source, target, monkeypatch)
    assert (done.outcome, done.records, done.bytes) == ("recovered", 3, source.max_phy_offset - keep)
    assert queue_messages(target, "TopicC", 0) == queue_messages(source, "TopicC", 0)
    assert target.max_phy_offset == source.max_phy_offset


async def test_slaves_that_all_refuse_end_the_step_at_once(cluster: Cluster, monkeypatch: pytest.MonkeyPatch) -> None:
    store = await cluster.start_store("master")
    append_messages(store, 3)
    store.recovered_max = store.max_phy_offset  # as after an abnormal start
    recovery = TailRecovery(store, RemotingClient(), ["127.0.0.1:1"], broker_name=NAME, timeout_ms=10_000)
    asked: list[str] = []

    async def slaves() -> list[str]:
        return ["s1", "s2"]

    async def refuse(slave: str, offset: int, max_bytes: int) -> tuple[int, bytes]:
        asked.append(slave)
        raise SlaveRefused(f"offset {offset} is not the start of a record")

    monkeypatch.setattr(recovery, "_find_slaves", slaves)
    monkeypatch.setattr(recovery, "_ask", refuse)
    began = time.monotonic()
    result = await recovery.run()
    assert result.outcome == "refused" and sorted(asked) == ["s1", "s2"] and time.monotonic() - began < 1
    assert store.recovered_max == store.max_phy_offset
