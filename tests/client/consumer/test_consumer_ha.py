"""Consumers and master/slave broker groups (reference §5.4): heartbeats reach slaves once a consumer is
registered (producer-only clients heartbeat masters only), and a push consumer keeps consuming from the
slave when the master goes down, committing its offsets there."""

from __future__ import annotations

import asyncio
from pathlib import Path

from pocketmq.client import MessageQueue, Producer
from pocketmq.client.consumer.push import PushConsumer
from pocketmq.client.consumer.types import ConsumeResult
from pocketmq.client.core.message_ext import MessageExt
from pocketmq.store.config import BrokerRole
from tests.client.consumer.consumer_support import FAST, create_topic, instance_name, produce
from tests.client.consumer.consumer_support import Cluster as _Cluster
from tests.cluster import start_broker, start_namesrv
from tests.helpers import eventually


async def test_consumer_keeps_reading_from_the_slave_when_the_master_is_down(tmp_path: Path) -> None:
    ns = await start_namesrv(tmp_path)
    master = await start_broker(tmp_path, "broker-a", ns.addr)
    slave = await start_broker(tmp_path, "broker-a", ns.addr, broker_role=BrokerRole.SLAVE, broker_id=1)
    c = _Cluster(ns, {"broker-a": master})
    try:
        await eventually(lambda: master.ha_service is not None and master.ha_service.connection_count == 1,
                         message="slave attached")
        await create_topic(c, "HaT", 1)
        assert slave.slave_sync is not None
        await slave.slave_sync.sync_all(master.addr)  # the slave serves the topic (its 10 s sync, now)
        await produce(c, "HaT", 20, prefix="before")
        gate = asyncio.Event()
        got: list[str] = []

        async def handler(msg: MessageExt) -> ConsumeResult:
            got.append(msg.body.decode())
            if msg.body.startswith(b"during"):
                await gate.wait()
            return ConsumeResult.SUCCESS

        consumer = PushConsumer("HaG", namesrv_addr=ns.addr, instance_name=instance_name(), pull_batch_size=2,
                                pull_threshold_for_queue=2, consume_thread_max=1, **FAST)
        consumer.subscribe("HaT")
        consumer.register_handler(handler)
        async with consumer:
            await eventually(lambda: len(got) == 20, timeout=15, message="consumed from the master")
            # The slave knows the group: consumer heartbeats go to every member of the broker group.
            await eventually(lambda: "HaG" in slave.clients.consumers and bool(slave.clients.consumers["HaG"].channels),
                             timeout=10, message="slave heard the consumer's heartbeat")
            await produce(c, "HaT", 30, prefix="during")
            await eventually(lambda: len(got) == 21, timeout=10, message="the handler holds the first new one")
            assert slave.store is not None and master.store is not None
            await eventually(lambda: slave.store is not None and master.store is not None
                             and slave.store.max_phy_offset == master.store.max_phy_offset, message="slave caught up")
            await master.stop(grace=0.5)  # the consumer's parked long polls would hold a graceful stop 5 s
            del c.brokers["broker-a"]
            gate.set()
            await eventually(lambda: len(set(got)) == 50, timeout=30, message="the rest consumed from the slave")
            mq = MessageQueue("HaT", "broker-a", 0)
            await eventually(lambda: consumer.committed_offsets().get(mq) == 50, timeout=10, message="offset 50 held")
        # Committed to the slave while the master was down (reference §5.4).
        assert slave.offsets.query_offset("HaG", "HaT", 0) == 50
        assert sorted(got[:20]) == sorted(f"before-{i}" for i in range(20))
        assert {f"during-{i}" for i in range(30)} <= set(got)
    finally:
        await slave.stop()
        for broker in c.brokers.values():
            await broker.stop()
        await ns.stop()


async def test_producer_only_clients_heartbeat_masters_only(tmp_path: Path) -> None:
    ns = await start_namesrv(tmp_path)
    master = await start_broker(tmp_path, "broker-b", ns.addr)
    slave = await start_broker(tmp_path, "broker-b", ns.addr, broker_role=BrokerRole.SLAVE, broker_id=1)
    c = _Cluster(ns, {"broker-b": master})
    try:
        await create_topic(c, "HbT", 1)
        async with Producer("HbPG", namesrv_addr=ns.addr, instance_name=instance_name("p")) as producer:
            await producer.instance.refresher.refresh("HbT", 3.0, publish=True)
            assert producer.instance.routes.broker_addr_table["broker-b"] == {0: master.addr, 1: slave.addr}
            assert await producer.instance.send_heartbeat_to_all() == 1
            assert "HbPG" in master.clients.producers and "HbPG" not in slave.clients.producers
    finally:
        await slave.stop()
        await master.stop()
        await ns.stop()
