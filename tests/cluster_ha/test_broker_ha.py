"""Master/slave broker groups in the test's event loop: replication, SYNC_MASTER statuses (for sends,
send-backs and delayed re-deliveries alike), slave duties."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from pocketmq.broker.controller import BrokerController
from pocketmq.common.record import decode_message_id
from pocketmq.common.topic import RMQ_SYS_SCHEDULE_TOPIC
from pocketmq.namesrv.controller import NamesrvController
from pocketmq.remoting.client import RemotingClient
from pocketmq.remoting.codes import RequestCode, ResponseCode
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.headers import SendMessageRequestHeaderV2
from pocketmq.store.config import BrokerRole
from tests.cluster import start_broker
from tests.helpers import eventually


@pytest.fixture
async def client() -> AsyncIterator[RemotingClient]:
    c = RemotingClient()
    yield c
    await c.close()


async def send(client: RemotingClient, addr: str, topic: str, body: bytes) -> RemotingCommand:
    header = SendMessageRequestHeaderV2("PG", topic, "TBW102", 4, 0, 0, int(time.time() * 1000), 0, "TAGS\x01t")
    return await client.invoke(addr, RemotingCommand.request(310, header.to_fields(), body), 10)


def commit_log_bytes(broker: BrokerController) -> bytes:
    assert broker.store is not None
    directory = Path(broker.store.config.commit_log_dir)
    return b"".join(p.read_bytes() for p in sorted(directory.iterdir()) if p.name.isdigit())


async def test_sync_master_replicates_and_slave_serves(tmp_path: Path, namesrv: NamesrvController,
                                                      client: RemotingClient) -> None:
    master = await start_broker(tmp_path, "broker-a", namesrv.addr, {"slaveTimeout": "2000"},
                                broker_role=BrokerRole.SYNC_MASTER)
    alone = await send(client, master.addr, "HA", b"no slave yet")
    assert alone.code == ResponseCode.SLAVE_NOT_AVAILABLE  # stored on the master only: said so clearly
    assert alone.field("msgId")
    slave = await start_broker(tmp_path, "broker-a", namesrv.addr, broker_role=BrokerRole.SLAVE, broker_id=1)
    try:
        assert slave.master_addr == master.addr and slave.master_ha_addr == f"127.0.0.1:{master.ha_port}"
        await eventually(lambda: master.ha_service is not None and master.ha_service.connection_count == 1,
                         message="slave attached")
        for i in range(300):  # several 1 MiB commit-log files
            resp = await send(client, master.addr, "HA", f"message-{i}".encode() * 100)
            assert resp.code == ResponseCode.SUCCESS, resp
        assert master.store is not None and slave.store is not None
        await eventually(lambda: slave.store is not None and master.store is not None
                         and slave.store.max_phy_offset == master.store.max_phy_offset, message="caught up")
        assert commit_log_bytes(slave) == commit_log_bytes(master)
        assert slave.store.get_max_offset_in_queue("HA", 0) == master.store.get_max_offset_in_queue("HA", 0)
        refused = await send(client, slave.addr, "HA", b"x")
        assert refused.code == ResponseCode.SERVICE_NOT_AVAILABLE
        info = await client.invoke(master.addr, RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO))
        table = json.loads(bytes(info.body or b""))["table"]
        assert table["haConnectionCount"] == "1" and "haSlave0" in table
        slave_info = await client.invoke(slave.addr, RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO))
        assert json.loads(bytes(slave_info.body or b""))["table"]["masterAddr"] == master.addr
    finally:
        await slave.stop()
        await master.stop()


async def test_slave_copies_metadata_and_merges_offsets_by_max(tmp_path: Path, namesrv: NamesrvController,
                                                               client: RemotingClient) -> None:
    master = await start_broker(tmp_path, "broker-b", namesrv.addr)
    slave = await start_broker(tmp_path, "broker-b", namesrv.addr, broker_role=BrokerRole.SLAVE, broker_id=1)
    try:
        assert (await send(client, master.addr, "Meta", b"x")).code == 0
        master.offsets.commit_offset("G", "Meta", 0, 5)
        master.offsets.commit_offset("G", "Meta", 1, 9)
        slave.offsets.commit_offset("G", "Meta", 1, 12)  # a consumer committed here while the master was away
        assert slave.slave_sync is not None
        await slave.slave_sync.sync_all(master.addr)
        assert slave.topics.get("Meta") is not None
        assert slave.offsets.query_offset("G", "Meta", 0) == 5
        assert slave.offsets.query_offset("G", "Meta", 1) == 12  # never moved backwards
    finally:
        await slave.stop()
        await master.stop()


async def send_back(client: RemotingClient, addr: str, offset: int) -> RemotingCommand:
    """CONSUMER_SEND_MSG_BACK of the message at ``offset`` for group RG, delay level 1."""
    fields = {"offset": str(offset), "group": "RG", "delayLevel": "1", "originMsgId": "ORIG",
              "maxReconsumeTimes": "16"}
    return await client.invoke(addr, RemotingCommand.request(RequestCode.CONSUMER_SEND_MSG_BACK, fields), 10)


async def test_send_back_on_a_sync_master_is_answered_once_a_slave_has_it(
        tmp_path: Path, namesrv: NamesrvController, client: RemotingClient) -> None:
    master = await start_broker(tmp_path, "broker-c", namesrv.addr,
                                {"slaveTimeout": "1500", "messageDelayLevel": "1h 2h"},
                                broker_role=BrokerRole.SYNC_MASTER)
    slave: BrokerController | None = None
    store = master.store
    try:
        assert store is not None
        sent = await send(client, master.addr, "SB", b"fail-me")
        phys = decode_message_id((sent.ext_fields or {})["msgId"])[2]
        alone = await send_back(client, master.addr, phys)
        assert alone.code == ResponseCode.SLAVE_NOT_AVAILABLE  # stored on the master only, and said so
        assert store.get_max_offset_in_queue(RMQ_SYS_SCHEDULE_TOPIC, 0) == 1

        slave = await start_broker(tmp_path, "broker-c", namesrv.addr, broker_role=BrokerRole.SLAVE, broker_id=1)
        ha, ha_client = master.ha_service, slave.ha_client
        assert ha is not None and ha_client is not None
        await eventually(lambda: ha.push_to_slave_max_offset == store.max_phy_offset, message="slave caught up")

        ha_client.pause()  # the slave stops taking data: the answer waits, then times out
        loop = asyncio.get_running_loop()
        started = loop.time()
        frozen = await send_back(client, master.addr, phys)
        assert frozen.code == ResponseCode.FLUSH_SLAVE_TIMEOUT and loop.time() - started >= 1.4
        assert store.get_max_offset_in_queue(RMQ_SYS_SCHEDULE_TOPIC, 0) == 2  # stored all the same

        end = store.max_phy_offset
        answer = asyncio.ensure_future(send_back(client, master.addr, phys))
        await eventually(lambda: ha.pending_waiters == 1, message="send-back waits for the slave")
        record = store.look_message_by_offset(end)
        assert record is not None and not answer.done()
        end += record.total_size
        ha_client.resume()
        assert (await answer).code == ResponseCode.SUCCESS
        assert ha.push_to_slave_max_offset >= end  # answered only once the slave acknowledged the record
    finally:
        if slave is not None:
            await slave.stop()
        await master.stop()


async def test_delayed_redelivery_on_a_sync_master_waits_for_the_slave(
        tmp_path: Path, namesrv: NamesrvController, client: RemotingClient) -> None:
    master = await start_broker(tmp_path, "broker-d", namesrv.addr,
                                {"slaveTimeout": "5000", "messageDelayLevel": "1s 2h"},
                                broker_role=BrokerRole.SYNC_MASTER)
    slave = await start_broker(tmp_path, "broker-d", namesrv.addr, broker_role=BrokerRole.SLAVE, broker_id=1)
    try:
        ha, ha_client, store = master.ha_service, slave.ha_client, master.store
        assert ha is not None and ha_client is not None and store is not None
        await eventually(lambda: ha.connection_count == 1, message="slave attached")
        header = SendMessageRequestHeaderV2("PG", "DL", "TBW102", 4, 0, 0, int(time.time() * 1000), 0,
                                            "TAGS\x01t\x02DELAY\x011")
        sent = await client.invoke(master.addr, RemotingCommand.request(310, header.to_fields(), b"later"), 10)
        assert sent.code == ResponseCode.SUCCESS
        ha_client.pause()
        await eventually(lambda: store.get_max_offset_in_queue("DL", 0) == 1, message="re-delivered on the master")
        # The re-delivery is appended but its put waits for the slave: the level's progress has not moved.
        assert ha.pending_waiters == 1 and master.delay_offsets.offset_table.get(1, 0) == 0
        ha_client.resume()
        await eventually(lambda: master.delay_offsets.offset_table.get(1, 0) == 1, message="re-delivery confirmed")
        assert ha.pending_waiters == 0
    finally:
        await slave.stop()
        await master.stop()
