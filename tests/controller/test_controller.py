"""Three controllers on real ports, brokers played by hand: registration, the first election, SyncStateSet changes
and their fencing, a dead master replaced, the controller leader lost, a majority lost, every controller restarted."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from pocketmq.remoting.client import RemotingClient
from pocketmq.remoting.codes import RequestCode, ResponseCode
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.route import decode_body
from tests.controller.controller_support import ControllerBroker, Controllers
from tests.helpers import eventually

pytestmark = pytest.mark.timeout(120)


async def group_of_two(controllers: Controllers) -> tuple[ControllerBroker, ControllerBroker]:
    a = ControllerBroker(controllers, "broker-a", 1, "127.0.0.1:30911")
    b = ControllerBroker(controllers, "broker-a", 2, "127.0.0.1:30921")
    for broker in (a, b):
        assert (await broker.register()).code == ResponseCode.SUCCESS
        await broker.heartbeat()
    elected = await a.elect()
    assert elected.code == ResponseCode.SUCCESS, elected.remark
    assert elected.ext_fields is not None and elected.ext_fields["masterBrokerId"] == "1"
    again = await b.elect()
    assert again.code == ResponseCode.CONTROLLER_MASTER_STILL_EXIST
    return a, b


async def test_register_elect_alter_and_fail_over(tmp_path: Path) -> None:
    controllers = Controllers(tmp_path)
    await controllers.start_all()
    a = b = None
    try:
        await eventually(lambda: controllers.leader() is not None, timeout=15)
        a, b = await group_of_two(controllers)
        info, sss = await a.replica_info()
        assert (info["masterBrokerId"], info["masterEpoch"], info["masterHaAddress"]) == ("1", "1", a.addr + "-ha")
        assert sss.members == {1} and sss.epoch == 1
        # expand: the master asks, with its epochs; a stale SyncStateSet epoch is fenced
        stale = await a.alter({1, 2}, master_epoch=1, ss_epoch=0)
        assert stale.code == ResponseCode.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH
        not_master = await b.alter({1, 2}, master_epoch=1, ss_epoch=1)
        assert not_master.code == ResponseCode.CONTROLLER_INVALID_MASTER
        grown = await a.alter({1, 2}, master_epoch=1, ss_epoch=1)
        assert grown.code == ResponseCode.SUCCESS, grown.remark
        assert (await a.replica_info())[1].members == {1, 2}
        # the master dies (its connections close): the in-sync slave is elected at once
        await a.close()
        async def b_is_master() -> bool:
            await b.heartbeat()
            return (await b.replica_info())[0].get("masterBrokerId") == "2"
        await eventually(b_is_master, timeout=5)
        info, sss = await b.replica_info()
        assert info["masterEpoch"] == "2" and sss.members == {2} and sss.epoch == 3
        # the old master's requests carry its old epoch: fenced
        a = ControllerBroker(controllers, "broker-a", 1, "127.0.0.1:30911")
        fenced = await a.alter({1, 2}, master_epoch=1, ss_epoch=3)
        assert fenced.code == ResponseCode.CONTROLLER_INVALID_MASTER
    finally:
        for broker in (a, b):
            if broker is not None:
                await broker.close()
        await controllers.stop_all()


async def test_no_master_without_an_in_sync_candidate_until_the_old_one_returns(tmp_path: Path) -> None:
    controllers = Controllers(tmp_path)
    await controllers.start_all()
    a = b = None
    try:
        await eventually(lambda: controllers.leader() is not None, timeout=15)
        a, b = await group_of_two(controllers)  # SyncStateSet {1}: b is not in sync
        await a.close()
        async def no_master() -> bool:
            await b.heartbeat()
            info, _ = await b.replica_info()
            return "masterBrokerId" not in info and info["masterEpoch"] == "2"
        await eventually(no_master, timeout=5)
        assert (await b.elect()).code == ResponseCode.CONTROLLER_ELECT_MASTER_FAILED
        a = ControllerBroker(controllers, "broker-a", 1, "127.0.0.1:30911")
        assert (await a.register()).code == ResponseCode.SUCCESS
        async def a_back() -> bool:
            await a.heartbeat()
            return (await a.replica_info())[0].get("masterBrokerId") == "1"
        await eventually(a_back, timeout=5)
        assert (await a.replica_info())[0]["masterEpoch"] == "3"
    finally:
        for broker in (a, b):
            if broker is not None:
                await broker.close()
        await controllers.stop_all()


async def test_controller_leader_lost_then_majority_lost_then_all_restarted(tmp_path: Path) -> None:
    controllers = Controllers(tmp_path)
    await controllers.start_all()
    a = b = None
    try:
        await eventually(lambda: controllers.leader() is not None, timeout=15)
        a, b = await group_of_two(controllers)
        leader = controllers.leader()
        assert leader is not None
        old = next(n for n, p in controllers.procs.items() if p is leader)
        await controllers.stop(old)
        await eventually(lambda: controllers.leader() is not None, timeout=15)
        assert (await a.replica_info())[0]["masterBrokerId"] == "1"  # the state survived the leader
        assert (await a.alter({1, 2}, master_epoch=1, ss_epoch=1)).code == ResponseCode.SUCCESS
        # a majority lost: nobody may decide, every answer says so
        survivor = next(iter(controllers.procs))
        await controllers.stop(next(n for n in list(controllers.procs) if n != survivor))
        await eventually(lambda: controllers.leader() is None, timeout=10)
        refused = await a.alter({1}, master_epoch=1, ss_epoch=2)
        assert refused.code == ResponseCode.CONTROLLER_NOT_LEADER
        # every controller restarted from its files: the epochs and the SyncStateSet are there
        await controllers.stop_all()
        await controllers.start_all()
        await eventually(lambda: controllers.leader() is not None, timeout=15)
        info, sss = await a.replica_info()
        assert info["masterBrokerId"] == "1" and info["masterEpoch"] == "1" and sss.members == {1, 2}
    finally:
        for broker in (a, b):
            if broker is not None:
                await broker.close()
        await controllers.stop_all()


async def test_followers_point_at_the_leader_and_metadata_names_it(tmp_path: Path) -> None:
    controllers = Controllers(tmp_path)
    await controllers.start_all()
    client = RemotingClient()
    try:
        await eventually(lambda: controllers.leader() is not None, timeout=15)
        leader = controllers.leader()
        assert leader is not None
        answers = []
        for address in controllers.addrs.values():
            response = await client.invoke(address, RemotingCommand.request(RequestCode.CONTROLLER_GET_METADATA_INFO))
            answers.append(response.ext_fields or {})
        assert {a["controllerLeaderAddress"] for a in answers} == {leader.addr}
        assert sum(a["isLeader"] == "true" for a in answers) == 1
        follower = next(p for p in controllers.procs.values() if p is not leader)
        response = await client.invoke(follower.addr, RemotingCommand.request(
            RequestCode.CONTROLLER_GET_REPLICA_INFO, {"brokerName": "x"}))
        assert response.code == ResponseCode.CONTROLLER_NOT_LEADER
        assert (response.ext_fields or {})["controllerLeaderAddress"] == leader.addr
        data = await client.invoke(leader.addr, RemotingCommand.request(
            RequestCode.CONTROLLER_GET_SYNC_STATE_DATA, None, b'["nope"]'))
        assert data.code == ResponseCode.SUCCESS and decode_body(data.body or b"") == {"replicasInfoTable": {}}
        bad = await client.invoke(leader.addr, RemotingCommand.request(
            RequestCode.CONTROLLER_GET_SYNC_STATE_DATA, None, b'{"x":'))
        assert bad.code == ResponseCode.CONTROLLER_INVALID_REQUEST
        config = await client.invoke(leader.addr, RemotingCommand.request(RequestCode.GET_CONTROLLER_CONFIG))
        assert b"enableElectUncleanMaster=false" in (config.body or b"")
        update = await client.invoke(leader.addr, RemotingCommand.request(
            RequestCode.UPDATE_CONTROLLER_CONFIG, None, b"controllerDLegerPeers=x"))
        assert update.code == ResponseCode.SYSTEM_ERROR
    finally:
        await client.close()
        await controllers.stop_all()


async def test_a_single_controller_works_alone(tmp_path: Path) -> None:
    controllers = Controllers(tmp_path, size=1)
    await controllers.start_all()
    a = None
    try:
        await eventually(lambda: controllers.leader() is not None, timeout=10)
        a = ControllerBroker(controllers, "broker-z", 1, "127.0.0.1:40000")
        await a.register()
        await a.heartbeat()
        assert (await a.elect()).code == ResponseCode.SUCCESS
        await asyncio.sleep(0)
        assert (await a.replica_info())[0]["masterEpoch"] == "1"
    finally:
        if a is not None:
            await a.close()
        await controllers.stop_all()
