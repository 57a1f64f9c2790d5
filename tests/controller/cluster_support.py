"""Controller-mode clusters of real processes for tests: three name servers carrying the controllers, group broker-a
of two replicas and broker-b of one (``tests/controller/conf/ctl-2g``), and what the tests ask of them."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time
from collections.abc import AsyncIterator
from pathlib import Path

from pocketmq.admin.api import AdminClient, AdminError
from pocketmq.admin.cluster import Child, LocalCluster
from pocketmq.chaos.reader import read_member
from pocketmq.client import Message, Producer, SendStatus
from pocketmq.client.core.errors import SendFailedError
from pocketmq.common.record import decode_message_id
from pocketmq.remoting.client import RemotingClient
from pocketmq.remoting.codes import RequestCode, ResponseCode
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.errors import PocketMQError
from pocketmq.remoting.headers import SendMessageRequestHeader
from tests.procs import TEST_STORE_PROPERTIES

CONF = Path(__file__).resolve().parent / "conf"


@contextlib.asynccontextmanager
async def controller_cluster(base: Path, preset: str = "ctl-2g") -> AsyncIterator[LocalCluster]:
    await asyncio.to_thread(base.mkdir, parents=True, exist_ok=True)
    echo = await asyncio.to_thread((base / "processes.log").open, "w", encoding="utf-8")  # kept when a test fails
    with echo:
        cluster = LocalCluster(preset, base_dir=base, namesrv_count=3, conf_dir=CONF, ephemeral_ports=True,
                               overrides=dict(TEST_STORE_PROPERTIES), log_format="json", echo=echo)
        await cluster.start(timeout=180)
        try:
            yield cluster
        finally:
            await cluster.stop()


async def master_of(cluster: LocalCluster, group: str, *, not_: str = "", timeout: float = 30.0) -> Child:
    """The running broker of ``group`` that says it is the master (other than ``not_``)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        master = (await cluster.masters()).get(group)
        if master is not None and master.spec.name != not_:
            return master
        await asyncio.sleep(0.1)
    raise AssertionError(f"no master of {group} (other than {not_!r}) within {timeout}s")


async def create_topic(cluster: LocalCluster, topic: str, group: str, queues: int = 4) -> None:
    """On the group's master; its slaves copy it (controller mode's metadata sync)."""
    master = await master_of(cluster, group)
    async with AdminClient(cluster.namesrv_addrs) as admin:
        await admin.update_topic(topic, read_queues=queues, write_queues=queues, broker_addr=master.addr)


async def send_ok(producer: Producer, topic: str, body: str, timeout: float = 30.0) -> str:
    """Send until a SEND_OK (retrying failures); the address of the broker that stored it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            result = await producer.send(Message(topic, body.encode(), keys=body))
        except (SendFailedError, PocketMQError):
            await asyncio.sleep(0.05)
            continue
        if result.status is SendStatus.SEND_OK:
            ip, port, _offset = decode_message_id(result.offset_msg_id.rsplit(",", 1)[-1])
            return f"{ip}:{port}"
        await asyncio.sleep(0.05)
    raise AssertionError(f"no SEND_OK for {body} within {timeout}s")


async def stored_ids(addr: str, group: str, topic: str, queues: int = 4) -> list[tuple[int, int, str]]:
    """(queue, offset, body) of every message of ``topic`` on the broker at ``addr``."""
    records = await read_member((group, addr, True, addr), topic, queues)
    return sorted((r.queue_id, r.queue_offset, r.msg_id) for r in records)


async def raw_send(addr: str, topic: str, body: bytes, *, properties: str = "UNIQ_KEY\x01raw",
                   sys_flag: int = 0) -> RemotingCommand:
    """SEND_MESSAGE straight to one broker (no route, no retry)."""
    client = RemotingClient()
    try:
        header = SendMessageRequestHeader("raw-pg", topic, "TBW102", 4, 0, sys_flag, int(time.time() * 1000), 0,
                                          properties).to_fields()
        return await client.invoke(addr, RemotingCommand.request(RequestCode.SEND_MESSAGE, header, body), 3.0)
    finally:
        await client.close()


async def runtime_info(cluster: LocalCluster, child: Child) -> dict[str, str]:
    async with AdminClient(cluster.namesrv_addrs) as admin:
        return await admin.runtime_info(child.addr)


async def consumer_offsets(cluster: LocalCluster, child: Child) -> bytes:
    """GET_ALL_CONSUMER_OFFSET's body (consumerOffset.json) of one broker."""
    async with AdminClient(cluster.namesrv_addrs) as admin:
        response = await admin.call(child.addr, RequestCode.GET_ALL_CONSUMER_OFFSET)
        return bytes(response.body or b"")


async def topics_of(cluster: LocalCluster, child: Child) -> bytes:
    async with AdminClient(cluster.namesrv_addrs) as admin:
        response = await admin.call(child.addr, RequestCode.GET_ALL_TOPIC_CONFIG)
        return bytes(response.body or b"")


async def groups_of(cluster: LocalCluster, child: Child) -> bytes:
    async with AdminClient(cluster.namesrv_addrs) as admin:
        response = await admin.call(child.addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
        return bytes(response.body or b"")


def freeze(cluster: LocalCluster, name: str) -> None:
    cluster.signal(name, signal.SIGSTOP)


def thaw(cluster: LocalCluster, name: str) -> None:
    cluster.signal(name, signal.SIGCONT)


async def kill(cluster: LocalCluster, name: str) -> None:
    cluster.signal(name, signal.SIGKILL)
    await cluster.wait_exit(name, 10.0)


def is_stored_answer(response: RemotingCommand) -> bool:
    """A send answer that says the message is stored (SEND_OK or a stored-but-not-OK status)."""
    return response.code in (ResponseCode.SUCCESS, ResponseCode.FLUSH_DISK_TIMEOUT, ResponseCode.FLUSH_SLAVE_TIMEOUT,
                             ResponseCode.SLAVE_NOT_AVAILABLE)


__all__ = ["AdminError"]
