"""HA faults for real: master and slave brokers as subprocesses, killed or frozen under load."""

from __future__ import annotations

import asyncio
import json
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pocketmq.client.core.message import Message, SendStatus
from pocketmq.client.producer.producer import Producer
from pocketmq.common.record import decode_records
from pocketmq.remoting.client import RemotingClient
from pocketmq.remoting.codes import RequestCode
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.errors import PocketMQError
from pocketmq.store.config import StoreConfig
from pocketmq.store.message_store import MessageStore
from tests.helpers import eventually
from tests.procs import Proc, start_broker, start_namesrv

TOPIC = "HaTopic"


@pytest.fixture
def procs() -> Iterator[list[Proc]]:
    started: list[Proc] = []
    yield started
    for proc in started:
        proc.kill()


def start_group(tmp: Path, procs: list[Proc], role: str, master_props: str = "") -> tuple[Proc, Proc, Proc]:
    ns = start_namesrv(kv_dir=tmp / "ns")
    procs.append(ns)
    conf = tmp / "master.properties"
    conf.write_text("mappedFileSizeCommitLog=1048576\n" + master_props)
    master = start_broker("--role", role, namesrv=ns.addr, store_dir=tmp / "master", config=conf)
    procs.append(master)
    slave = start_broker("--role", "SLAVE", "--broker-id", "1", namesrv=ns.addr, store_dir=tmp / "slave",
                         config=tmp / "master.properties")
    procs.append(slave)
    return ns, master, slave


async def slave_attached(master: str) -> bool:
    client = RemotingClient()
    try:
        resp = await client.invoke(master, RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO), 3)
        return int(json.loads(bytes(resp.body or b""))["table"].get("haConnectionCount", "0")) > 0
    except PocketMQError:
        return False
    finally:
        await client.close()


async def read_bodies(store_dir: Path) -> set[bytes]:
    store = MessageStore(StoreConfig(store_path_root_dir=str(store_dir), mapped_file_size_commit_log=1048576))
    await store.start()
    try:
        bodies: set[bytes] = set()
        for queue_id in range(8):
            offset = store.get_min_offset_in_queue(TOPIC, queue_id)
            while offset < store.get_max_offset_in_queue(TOPIC, queue_id):
                result = store.get_messages("check", TOPIC, queue_id, offset, 32)
                for buffer in result.message_buffers:
                    bodies.update(bytes(r.body) for r in decode_records(buffer))
                offset = result.next_begin_offset
                result.release()
        return bodies
    finally:
        await store.shutdown()


async def stream_then_kill_master(master: Proc, namesrv: str) -> tuple[list[bytes], int]:
    """Eight senders send until a while after the master is SIGKILLed; returns the acknowledged bodies."""
    acked: list[bytes] = []
    failures = 0
    stop_at = [float("inf")]
    async with Producer("HaPG", namesrv_addr=namesrv, send_msg_timeout=2.0, retry_times_when_send_failed=0) as p:
        async def sender(n: int) -> None:
            nonlocal failures
            i = 0
            while time.monotonic() < stop_at[0] and i < 5000:
                body = f"s{n}-{i}".encode()
                i += 1
                try:
                    result = await p.send(Message(TOPIC, body))
                except PocketMQError:
                    failures += 1
                    continue
                if result.status is SendStatus.SEND_OK:
                    acked.append(body)

        tasks = [asyncio.ensure_future(sender(n)) for n in range(8)]
        await eventually(lambda: len(acked) >= 400, timeout=30, message="sends flowing")
        master.kill()  # SIGKILL while the senders are mid-flight
        stop_at[0] = time.monotonic() + 1.0
        await asyncio.wait_for(asyncio.gather(*tasks), 30)
    return acked, failures


@pytest.mark.parametrize("role", ["SYNC_MASTER", "ASYNC_MASTER"])
def test_master_killed_under_load(tmp_path: Path, procs: list[Proc], role: str) -> None:
    ns, master, slave = start_group(tmp_path, procs, role)

    async def scenario() -> tuple[list[bytes], int]:
        await eventually(lambda: slave_attached(master.addr), timeout=20, message="slave attached")
        return await stream_then_kill_master(master, ns.addr)

    acked, failures = asyncio.run(scenario())
    slave.signal(signal.SIGTERM)
    assert slave.popen.wait(20) == 0
    on_slave = asyncio.run(read_bodies(tmp_path / "slave"))
    missing = [b for b in acked if b not in on_slave]
    print(f"{role}: {len(acked)} acknowledged, {failures} failed after the kill, "
          f"{len(missing)} acknowledged but not on the slave")
    assert len(acked) >= 400
    if role == "SYNC_MASTER":
        assert missing == [], f"{len(missing)} acknowledged messages lost"


def test_frozen_slave_gives_flush_slave_timeout_then_recovers(tmp_path: Path, procs: list[Proc]) -> None:
    ns, master, slave = start_group(tmp_path, procs, "SYNC_MASTER", "slaveTimeout=500\n")

    async def scenario() -> None:
        await eventually(lambda: slave_attached(master.addr), timeout=20, message="slave attached")
        async with Producer("HaPG", namesrv_addr=ns.addr, send_msg_timeout=5.0) as p:
            assert (await p.send(Message(TOPIC, b"before"))).status is SendStatus.SEND_OK
            slave.signal(signal.SIGSTOP)
            try:
                frozen = await p.send(Message(TOPIC, b"while frozen"))
                assert frozen.status is SendStatus.FLUSH_SLAVE_TIMEOUT  # stored on the master, said so
            finally:
                slave.signal(signal.SIGCONT)

            async def ok_again() -> bool:
                return (await p.send(Message(TOPIC, b"after"))).status is SendStatus.SEND_OK

            await eventually(ok_again, timeout=20, message="SEND_OK again after SIGCONT")

    asyncio.run(scenario())
