"""POP on a SYNC_MASTER with a slave: check points, acks and snapshots replicate with the rest of the commit log
(the slave's log is byte-identical), the slave refuses POP itself, and a broker started on a copy of the slave's
store has the same messages in flight: the unacked come back, the acked do not."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest

from pocketmq.broker.controller import BrokerController
from pocketmq.broker.pop.records import pop_state_topic
from pocketmq.common.pop import revive_topic
from pocketmq.remoting.codes import RequestCode, ResponseCode
from pocketmq.store.config import BrokerRole
from tests.cluster import start_broker, start_namesrv
from tests.helpers import eventually
from tests.pop.java_pop import ACK_MESSAGE, ack_fields, create_topic, pop, popped, send
from tests.transaction.raw import RawClient
from tests.transaction.test_ha import commit_log_bytes, queue_ends

pytestmark = pytest.mark.timeout(90)
PROPS = {"reviveInterval": "100", "popStateSnapshotInterval": "200"}
TOPIC, GROUP = "TPopHA", "GPopHA"


async def test_slave_holds_the_pop_state(tmp_path: Path) -> None:
    ns = await start_namesrv(tmp_path)
    master = await start_broker(tmp_path, "broker-a", ns.addr, dict(PROPS), broker_role=BrokerRole.SYNC_MASTER)
    slave = await start_broker(tmp_path, "broker-a", ns.addr, dict(PROPS), broker_role=BrokerRole.SLAVE, broker_id=1)
    copy: BrokerController | None = None
    try:
        await eventually(lambda: master.ha_service is not None and master.ha_service.connection_count == 1,
                         message="slave attached")
        client = await RawClient.connect(master.addr)
        await create_topic(client, TOPIC, 2)
        for i in range(10):
            assert (await send(client, TOPIC, f"m{i}".encode(), queue_id=i % 2)).code == 0
        messages = popped(await pop(client, GROUP, TOPIC, invisible=4000))
        assert len(messages) == 10
        for m in messages[:6]:
            assert (await client.request(ACK_MESSAGE, ack_fields(GROUP, TOPIC, m))).code == 0
        await client.close()
        slave_client = await RawClient.connect(slave.addr)
        refused = await pop(slave_client, GROUP, TOPIC)
        stats = await slave_client.request(RequestCode.GET_POP_INFLIGHT_STATS, {"consumerGroup": GROUP})
        timers = await slave_client.request(RequestCode.GET_TIMER_METRICS, {})
        await slave_client.close()
        assert refused.code == ResponseCode.SERVICE_NOT_AVAILABLE and "slave" in (refused.remark or "")
        # the console shows "n/a" for a slave
        assert stats.code == timers.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
        await eventually(lambda: queue_ends(master, pop_state_topic("DefaultCluster")) != [0],
                         message="a state snapshot on the master")

        assert master.store is not None and slave.store is not None
        await eventually(lambda: slave.store is not None and master.store is not None
                         and slave.store.max_phy_offset == master.store.max_phy_offset, message="caught up")
        assert commit_log_bytes(slave) == commit_log_bytes(master)
        rt, st = revive_topic("DefaultCluster"), pop_state_topic("DefaultCluster")
        await eventually(lambda: slave.store is not None and slave.store.dispatch_behind_bytes == 0
                         and queue_ends(slave, rt, 8) == queue_ends(master, rt, 8)
                         and queue_ends(slave, st) == queue_ends(master, st), message="the slave's queues dispatched")
        assert sum(queue_ends(master, rt, 8)) >= 7 and queue_ends(master, st) != [0]

        slave_dir = Path(slave.store.config.store_path_root_dir)
        await slave.stop()
        await master.stop()
        shutil.copytree(slave_dir, tmp_path / "from-slave", ignore=shutil.ignore_patterns("lock"))
        copy = await start_broker(tmp_path, "broker-b", ns.addr, dict(PROPS),
                                  store_path_root_dir=str(tmp_path / "from-slave"))
        client = await RawClient.connect(copy.addr)
        await create_topic(client, TOPIC, 2)  # topic configs reach a slave every 10 s: maybe not yet
        back = []

        async def revived() -> bool:
            back.extend(popped(await pop(client, GROUP, TOPIC, invisible=60_000, broker="broker-b"),
                               broker="broker-b"))
            return len(back) >= 4

        await eventually(revived, timeout=20, interval=0.1, message="the unacked messages back on the copy")
        assert sorted(m.body for m in back) == sorted(m.body for m in messages[6:])
        await asyncio.sleep(1.0)  # a window for a wrong second revive: nothing else may come back in it
        assert popped(await pop(client, GROUP, TOPIC, broker="broker-b"), broker="broker-b") == []
        await client.close()
    finally:
        for broker in (copy, slave, master):
            if broker is not None:
                await broker.stop()
        await ns.stop()
