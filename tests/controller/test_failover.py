"""Controller mode with real processes: a killed master replaced with its metadata and every acknowledged message,
the old master back as a slave cut to the new master's log; a frozen master fenced when it wakes; a planned
switchover without a failed send; the SyncStateSet shrinking and growing; the controllers' minority and majority
lost."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

from pocketmq.admin import api_ops
from pocketmq.admin.api import AdminClient
from pocketmq.admin.commands_controller import elect_master, sync_state_data
from pocketmq.client import Message, Producer, SendStatus
from pocketmq.client.core.errors import SendFailedError
from pocketmq.remoting.codes import RequestCode, ResponseCode
from pocketmq.remoting.headers import UpdateConsumerOffsetRequestHeader
from pocketmq.remoting.route import decode_body
from tests.controller.cluster_support import (
    consumer_offsets,
    controller_cluster,
    create_topic,
    freeze,
    groups_of,
    is_stored_answer,
    kill,
    master_of,
    raw_send,
    runtime_info,
    send_ok,
    stored_ids,
    thaw,
    topics_of,
)
from tests.helpers import eventually

pytestmark = pytest.mark.timeout(420)


async def test_a_killed_master_is_replaced_with_its_data_and_metadata_and_rejoins_cut(tmp_path: Path) -> None:
    async with controller_cluster(tmp_path / "c") as cluster:
        old = await master_of(cluster, "broker-a")
        follower = next(c for c in cluster.brokers() if c.spec.broker_name == "broker-a" and c is not old)
        await create_topic(cluster, "OnlyA", "broker-a")
        async with AdminClient(cluster.namesrv_addrs) as admin:
            await api_ops.update_sub_group(admin, {"groupName": "meta-group", "retryMaxTimes": 3}, [old.addr])
            header = UpdateConsumerOffsetRequestHeader("meta-group", "OnlyA", 0, 5).to_fields()
            await admin.call(old.addr, RequestCode.UPDATE_CONSUMER_OFFSET, header)
        producer = Producer("pg", namesrv_addr=cluster.namesrv_addr, send_msg_timeout=3.0)
        await producer.start()
        try:
            acked = [f"m{i}" for i in range(40)]
            for body in acked:
                assert await send_ok(producer, "OnlyA", body) == old.addr

            async def follower_has_metadata() -> bool:
                return b"OnlyA@meta-group" in await consumer_offsets(cluster, follower) and \
                    b"meta-group" in await groups_of(cluster, follower)
            await eventually(follower_has_metadata, timeout=15, message="metadata copied to the follower")
            killed_at = time.monotonic()
            await kill(cluster, old.spec.name)
            stored_by = await send_ok(producer, "OnlyA", "after-kill")
            failover_s = time.monotonic() - killed_at
            new = await master_of(cluster, "broker-a")
            assert new is follower and stored_by == new.addr, (stored_by, new.addr)
            assert failover_s < 15, failover_s  # loose bound on a loaded machine: speed is `rmq-bench failover`'s
            # everything acknowledged is there, and the metadata moved with the master
            held = {body for _q, _o, body in await stored_ids(new.addr, "broker-a", "OnlyA")}
            assert set(acked) | {"after-kill"} <= held
            assert b"OnlyA" in await topics_of(cluster, new)
            queues = decode_body(await consumer_offsets(cluster, new))["offsetTable"]["OnlyA@meta-group"]
            assert queues.get(0, queues.get("0")) == 5
            async with AdminClient(cluster.namesrv_addrs) as admin:
                route = await admin.topic_route("OnlyA")
            assert route.broker_datas[0].broker_addrs[0] == new.addr
            # the old master comes back: a slave of the new epoch, holding exactly the new master's log
            restarted = await cluster.restart(old.spec.name)
            await cluster.wait_in_sync(60)
            info = await runtime_info(cluster, restarted)
            assert info["controllerRole"] == "SLAVE" and int(info["masterEpoch"]) >= 2
            assert info["brokerRole"] == "SLAVE"  # what clusterList shows: the live role, not the file's
            assert (await runtime_info(cluster, new))["brokerRole"] == "ASYNC_MASTER"
            for body in ("x1", "x2"):
                await send_ok(producer, "OnlyA", body)
            mine = await stored_ids(new.addr, "broker-a", "OnlyA")

            async def same_log() -> bool:
                return await stored_ids(restarted.addr, "broker-a", "OnlyA") == mine
            await eventually(same_log, timeout=20, message="the old master holds the new master's log")
            async with AdminClient(cluster.namesrv_addrs) as admin:
                response = await admin.call(restarted.addr, RequestCode.GET_BROKER_EPOCH_CACHE)
            epochs = json.loads(bytes(response.body or b"{}"))["epochList"]
            assert [e["epoch"] for e in epochs][-1] == int(info["masterEpoch"])
        finally:
            await producer.shutdown()


async def test_a_frozen_master_is_replaced_and_fenced_when_it_wakes(tmp_path: Path) -> None:
    async with controller_cluster(tmp_path / "c") as cluster:
        old = await master_of(cluster, "broker-a")
        await create_topic(cluster, "OnlyA", "broker-a")
        producer = Producer("pg", namesrv_addr=cluster.namesrv_addr, send_msg_timeout=3.0)
        await producer.start()
        try:
            await send_ok(producer, "OnlyA", "before")
            freeze(cluster, old.spec.name)
            frozen_at = time.monotonic()
            stored_by = await send_ok(producer, "OnlyA", "while-frozen")
            new = await master_of(cluster, "broker-a", not_=old.spec.name)
            assert stored_by == new.addr and time.monotonic() - frozen_at < 20
            thaw(cluster, old.spec.name)
            # it may not have heard of the new epoch yet: whatever it answers, nothing is stored as acknowledged
            deadline = time.monotonic() + 2.0
            answers = []
            while time.monotonic() < deadline:
                response = await raw_send(old.addr, "OnlyA", b"to-the-old-master")
                answers.append(response.code)
                assert not is_stored_answer(response), (response.code, response.remark)
            assert ResponseCode.SERVICE_NOT_AVAILABLE in answers or ResponseCode.SYSTEM_ERROR in answers

            async def old_is_slave() -> bool:
                return (await runtime_info(cluster, old)).get("controllerRole") == "SLAVE"
            await eventually(old_is_slave, timeout=15, message="the old master follows")
            held = {b for _q, _o, b in await stored_ids(new.addr, "broker-a", "OnlyA")}
            assert {"before", "while-frozen"} <= held and "to-the-old-master" not in held
        finally:
            await producer.shutdown()


async def test_planned_switchover_fails_no_send_and_the_sync_state_set_shrinks_and_grows(tmp_path: Path) -> None:
    async with controller_cluster(tmp_path / "c") as cluster:
        old = await master_of(cluster, "broker-a")
        follower = next(c for c in cluster.brokers() if c.spec.broker_name == "broker-a" and c is not old)
        for group in ("broker-a", "broker-b"):
            await create_topic(cluster, "Both", group)
        await cluster.wait_in_sync(30)
        producer = Producer("pg", namesrv_addr=cluster.namesrv_addr, send_msg_timeout=5.0)
        await producer.start()
        outcomes: list[tuple[str, str]] = []
        stop = asyncio.Event()

        async def keep_sending(stream: int) -> None:
            seq = 0
            while not stop.is_set():
                body = f"s{stream}-{seq}"
                seq += 1
                try:
                    result = await producer.send(Message("Both", body.encode(), keys=body))
                    outcomes.append((body, result.status.name))
                except SendFailedError as exc:
                    outcomes.append((body, f"FAILED {exc}"))
                await asyncio.sleep(0.01)

        senders = [asyncio.ensure_future(keep_sending(i)) for i in range(3)]
        try:
            await eventually(lambda: len(outcomes) > 30, timeout=30)
            async with AdminClient(cluster.namesrv_addrs) as admin:
                result = await elect_master(admin, cluster.namesrv_addrs, "DefaultCluster", "broker-a",
                                            follower.spec.broker_id)
            assert result["code"] == "SUCCESS" and result["masterAddress"] == follower.addr, result
            seen = len(outcomes)
            await eventually(lambda: len(outcomes) > seen + 30, timeout=30)
        finally:
            stop.set()
            await asyncio.gather(*senders)
            await producer.shutdown()
        failed = [o for o in outcomes if o[1] != SendStatus.SEND_OK.name]
        assert not failed, failed[:5]
        held: set[str] = set()
        for child in cluster.brokers():
            if (await runtime_info(cluster, child)).get("controllerRole") == "MASTER":
                held |= {b for _q, _o, b in await stored_ids(child.addr, child.spec.broker_name, "Both")}
        assert {body for body, _ in outcomes} <= held
        # the SyncStateSet: the old master (now a follower) frozen -> dropped; thawed -> back
        await cluster.wait_in_sync(30)
        freeze(cluster, old.spec.name)
        async with AdminClient(cluster.namesrv_addrs) as admin:
            async def members() -> list[int]:
                data = await sync_state_data(admin, cluster.namesrv_addrs, ["broker-a"])
                return sorted(r["brokerId"] for r in data["broker-a"]["inSyncReplicas"])
            async def shrunk() -> bool:
                return await members() == [follower.spec.broker_id]

            async def grown() -> bool:
                return await members() == [1, 2]
            await eventually(shrunk, timeout=30, message="shrunk")
            thaw(cluster, old.spec.name)
            await eventually(grown, timeout=30, message="grown back")


async def test_controllers_lose_a_minority_then_a_majority(tmp_path: Path) -> None:
    async with controller_cluster(tmp_path / "c") as cluster:
        await create_topic(cluster, "OnlyA", "broker-a")
        producer = Producer("pg", namesrv_addr=cluster.namesrv_addr, send_msg_timeout=3.0)
        await producer.start()
        try:
            async with AdminClient(cluster.namesrv_addrs) as admin:
                meta = await admin.call(cluster.namesrv_addrs[0], RequestCode.CONTROLLER_GET_METADATA_INFO)
            leader_addr = (meta.ext_fields or {})["controllerLeaderAddress"]
            leader = next(c for c in cluster.children.values() if c.addr.endswith(leader_addr.rsplit(":", 1)[1]))
            # the controller leader lost: another leads, and a killed master is still replaced
            await kill(cluster, leader.spec.name)
            first = await master_of(cluster, "broker-a")
            await kill(cluster, first.spec.name)
            second = await master_of(cluster, "broker-a", not_=first.spec.name, timeout=30)
            await send_ok(producer, "OnlyA", "minority-lost")
            await cluster.restart(first.spec.name)
            await cluster.restart(leader.spec.name)
            await cluster.wait_in_sync(60)
            # a majority lost: writes go on (the master's standing needs no controller with allAckInSyncStateSet),
            # but nobody can be elected
            others = [c for c in cluster.children.values() if c.spec.kind == "namesrv"][:2]
            for child in others:
                await kill(cluster, child.spec.name)
            stored = await send_ok(producer, "OnlyA", "majority-lost")
            assert stored == second.addr
            await kill(cluster, second.spec.name)
            with pytest.raises(AssertionError):
                await master_of(cluster, "broker-a", not_=second.spec.name, timeout=6)
            for child in others:
                await cluster.restart(child.spec.name)
            third = await master_of(cluster, "broker-a", not_=second.spec.name, timeout=60)
            assert third.spec.name == first.spec.name
            await send_ok(producer, "OnlyA", "majority-back")
            held = {b for _q, _o, b in await stored_ids(third.addr, "broker-a", "OnlyA")}
            assert {"minority-lost", "majority-lost", "majority-back"} <= held
        finally:
            await producer.shutdown()
