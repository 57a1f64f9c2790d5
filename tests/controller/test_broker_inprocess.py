"""Controller-mode brokers in the test's event loop, with a name server carrying a single controller: ids assigned
by the controller (brokerId=-1), one master elected, writes acknowledged by the in-sync slave, a topic created on the
master present on the slave when the creation answers, the epoch file served over GET_BROKER_EPOCH_CACHE, the
configuration rules of controller mode, and the rmq-admin controller commands: a planned switchover after which a
delayed message, a timer message and a prepared transaction of the old master are delivered and committed on the new
one; the
controller's and the brokers' metrics (epoch, SyncStateSet size, switchovers) follow it."""

from __future__ import annotations

import asyncio
import json
import re
import time
from pathlib import Path
from typing import Any

import pytest

from pocketmq.admin import cli
from pocketmq.broker.config import load_broker_config
from pocketmq.broker.controller import BrokerController
from pocketmq.common.config import ConfigError
from pocketmq.common.record import decode_message_id
from pocketmq.common.sysflag import MessageSysFlag
from pocketmq.controller.config import ControllerConfig
from pocketmq.namesrv.config import NamesrvConfig
from pocketmq.namesrv.controller import NamesrvController
from pocketmq.remoting.client import RemotingClient
from pocketmq.remoting.codes import RequestCode, ResponseCode
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.headers import CreateTopicRequestHeader, EndTransactionRequestHeader
from pocketmq.remoting.metrics import Metrics
from tests.cluster import broker_config_kwargs
from tests.controller.cluster_support import raw_send, stored_ids
from tests.controller.controller_support import free_ports
from tests.helpers import eventually

pytestmark = pytest.mark.timeout(120)
LOG_LINE = re.compile(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d")

PROPS = {"enableControllerMode": "true", "brokerId": "-1", "allAckInSyncStateSet": "true",
         "haMaxTimeSlaveNotCatchup": "3000", "haSendHeartbeatInterval": "1000", "brokerHeartbeatInterval": "200",
         "checkSyncStateSetPeriod": "300", "syncBrokerMetadataPeriod": "500", "slaveSynchronizeInterval": "500"}


def metric(metrics: Metrics | None, name: str, labels: str = "") -> float:
    """One sample of a process's Prometheus text, ``name{labels}``; KeyError when it has none."""
    assert metrics is not None
    wanted = f"{name}{{{labels}}}" if labels else name
    for line in metrics.render().decode().splitlines():
        key, _, value = line.rpartition(" ")
        if key == wanted:
            return float(value)
    raise KeyError(wanted)


def rmq(capsys: pytest.CaptureFixture[str], namesrv: str, *argv: str) -> Any:
    """``rmq-admin <argv> --json`` (its own event loop, so in a thread); the parsed output."""
    capsys.readouterr()
    code = cli.main([*argv, "-n", namesrv, "--json"])
    out, err = capsys.readouterr()
    assert code == 0, (argv, err)
    return json.loads("\n".join(line for line in out.splitlines() if not LOG_LINE.match(line)))


async def test_controller_mode_brokers_in_one_loop(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    port = free_ports(1)[0]
    controller = ControllerConfig(controller_d_leger_peers=f"n0-127.0.0.1:{port}", controller_d_leger_self_id="n0",
                                  controller_store_path=str(tmp_path / "ctl"))
    ns = NamesrvController(NamesrvConfig(listen_host="127.0.0.1", kv_config_path=str(tmp_path / "kv.json"),
                                         metrics_port=0), controller=controller)
    await ns.start()
    brokers: list[BrokerController] = []
    client = RemotingClient()
    try:
        for index in range(2):
            kwargs = broker_config_kwargs(tmp_path, "broker-x", ns.addr, broker_id=-1)
            kwargs["store_path_root_dir"] = str(tmp_path / f"x{index}")
            kwargs["metrics_port"] = 0
            config = load_broker_config({**PROPS, "controllerAddr": ns.addr}, **kwargs)
            broker = BrokerController(config)
            await broker.start()
            brokers.append(broker)

        def in_sync() -> bool:
            masters = [b for b in brokers if b.replicas is not None and b.replicas.role == "MASTER"]
            return len(masters) == 1 and len(masters[0].replicas.replication.sync_state_set) == 2  # type: ignore
        await eventually(in_sync, timeout=30, message="one master with both replicas in sync")
        assert sorted(b.replicas.broker_id for b in brokers if b.replicas) == [1, 2]
        identity = json.loads((tmp_path / "x0" / "config" / "controllerIdentity.json").read_text())
        assert identity["brokerId"] in (1, 2) and identity["token"]
        master = next(b for b in brokers if b.is_controller_master)
        slave = next(b for b in brokers if b is not master)
        header = CreateTopicRequestHeader("CtlTopic", "TBW102", 2, 2, 6, "SINGLE_TAG", 0, False).to_fields()
        created = await client.invoke(master.addr, RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC,
                                                                           header), 10.0)
        assert created.code == ResponseCode.SUCCESS
        assert "CtlTopic" in slave.topics.table  # copied before the creation was answered
        sent = await raw_send(master.addr, "CtlTopic", b"hello")
        assert sent.code == ResponseCode.SUCCESS, sent.remark
        assert slave.store is not None and master.store is not None
        assert slave.store.max_phy_offset >= master.store.max_phy_offset  # acknowledged by the in-sync slave
        refused = await raw_send(slave.addr, "CtlTopic", b"to the slave")
        assert refused.code == ResponseCode.SERVICE_NOT_AVAILABLE

        async def slave_epochs() -> list[dict[str, int]]:
            answer = await client.invoke(slave.addr, RemotingCommand.request(RequestCode.GET_BROKER_EPOCH_CACHE), 5.0)
            return list(json.loads(bytes(answer.body or b"{}"))["epochList"])

        async def slave_recorded_epoch() -> bool:  # written (in a thread) once the copied data reaches it
            return bool(await slave_epochs())
        await eventually(slave_recorded_epoch, timeout=5, message="the slave's epoch file has the master's epoch")
        listed = await slave_epochs()
        assert [e["epoch"] for e in listed] == [1] and listed[0]["startOffset"] == 0

        # the operations commands
        meta = await asyncio.to_thread(rmq, capsys, ns.addr, "getControllerMetaData")
        assert meta["controllerLeaderAddress"] == ns.addr and meta["isLeader"] == "true"
        sss = (await asyncio.to_thread(rmq, capsys, ns.addr, "getSyncStateSet", "-b", "broker-x"))["broker-x"]
        assert sss["masterBrokerId"] == master.replicas.broker_id and sss["masterEpoch"] == 1  # type: ignore
        assert sorted(r["brokerId"] for r in sss["inSyncReplicas"]) == [1, 2]
        epoch_files = await asyncio.to_thread(rmq, capsys, ns.addr, "getBrokerEpoch", "-b", "broker-x")
        assert sorted(e["brokerAddr"] for e in epoch_files) == sorted(b.addr for b in brokers)
        assert all([x["epoch"] for x in e["epochs"]] == [1] for e in epoch_files)
        # a delayed message (due after the switchover) and a prepared transaction, both on the old master
        delayed = await raw_send(master.addr, "CtlTopic", b"delayed", properties="DELAY\x013\x02UNIQ_KEY\x01d1")
        assert delayed.code == ResponseCode.SUCCESS, delayed.remark
        half = await raw_send(master.addr, "CtlTopic", b"txn", sys_flag=MessageSysFlag.TRANSACTION_PREPARED_TYPE,
                              properties="TRAN_MSG\x01true\x02PGROUP\x01raw-pg\x02UNIQ_KEY\x01t1")
        assert half.code == ResponseCode.SUCCESS, half.remark
        half_fields = half.ext_fields or {}
        due_ms = int(time.time() * 1000) + 5000  # due after the switchover below
        timer = await raw_send(master.addr, "CtlTopic", b"timer", properties=f"TIMER_DELIVER_MS\x01{due_ms}\x02"
                               "UNIQ_KEY\x01tm1")
        assert timer.code == ResponseCode.SUCCESS, timer.remark

        assert slave.replicas is not None
        elected = await asyncio.to_thread(rmq, capsys, ns.addr, "electMaster", "-bn", "broker-x",
                                          "-b", str(slave.replicas.broker_id))
        assert elected["code"] == "SUCCESS" and int(elected["masterEpoch"]) == 2
        refused = await raw_send(master.addr, "CtlTopic", b"to the old master")  # fenced before the answer
        assert refused.code == ResponseCode.SERVICE_NOT_AVAILABLE

        async def new_master_takes_writes() -> bool:
            return (await raw_send(slave.addr, "CtlTopic", b"after the switchover")).code == ResponseCode.SUCCESS
        await eventually(new_master_takes_writes, timeout=20, interval=0.2, message="the designated replica took over")
        await eventually(lambda: not master.is_controller_master, timeout=10, message="the old master follows")
        # the former master reads nothing past its confirm offset until the handshake with the new master is done
        await eventually(lambda: master.store is not None and master.store.read_fence is None, timeout=10,
                         message="the former master's reads unfenced after its epoch handshake")
        assert metric(ns.metrics, "pocketmq_controller_is_leader") == 1
        assert metric(ns.metrics, "pocketmq_controller_master_epoch", 'group="broker-x"') == 2
        assert metric(ns.metrics, "pocketmq_controller_elections", 'kind="planned"') == 1
        assert metric(ns.metrics, "pocketmq_controller_elections", 'kind="any"') == 2
        assert metric(master.metrics, "pocketmq_broker_master_epoch") == 2
        assert metric(master.metrics, "pocketmq_broker_role_changes") == 2  # became master, stepped down
        assert metric(slave.metrics, "pocketmq_broker_role_changes") == 1
        with pytest.raises(KeyError):  # a slave has no SyncStateSet of its own
            metric(master.metrics, "pocketmq_broker_sync_state_set_size")

        def set_size(expected: int) -> bool:
            return metric(ns.metrics, "pocketmq_controller_sync_state_set_size", 'group="broker-x"') == expected and \
                metric(slave.metrics, "pocketmq_broker_sync_state_set_size") == expected
        await eventually(lambda: set_size(2), timeout=20, message="the old master back in the SyncStateSet")

        # the transaction and the delayed message moved with the master: committed there, delivered there
        end = EndTransactionRequestHeader("raw-pg", int(half_fields["queueOffset"]),
                                          decode_message_id(half_fields["msgId"])[2],
                                          MessageSysFlag.TRANSACTION_COMMIT_TYPE, half_fields["msgId"],
                                          transaction_id="t1")
        committed = await client.invoke(slave.addr, RemotingCommand.request(RequestCode.END_TRANSACTION,
                                                                            end.to_fields()), 5.0)
        assert committed.code == ResponseCode.SUCCESS, committed.remark

        async def on_new_master() -> set[str]:
            return {body for _q, _o, body in await stored_ids(slave.addr, "broker-x", "CtlTopic", queues=2)}

        async def moved() -> bool:
            return {"txn", "delayed", "timer"} <= await on_new_master()
        await eventually(moved, timeout=30, interval=0.5, message="the commit, the delayed and the timer message on "
                         "the new master")
    finally:
        await client.close()
        for broker in brokers:
            await broker.stop()
        await ns.stop()


def test_controller_mode_configuration_rules() -> None:
    base = {"enableControllerMode": "true", "brokerName": "b"}
    with pytest.raises(ConfigError):
        load_broker_config(base)  # no controllerAddr
    with pytest.raises(ConfigError):
        load_broker_config({**base, "controllerAddr": "127.0.0.1:1", "brokerId": "0"})
    with pytest.raises(ConfigError):
        load_broker_config({**base, "controllerAddr": "127.0.0.1:1", "brokerHeartbeatInterval": "2000"})
    config = load_broker_config({**base, "controllerAddr": "127.0.0.1:1", "brokerId": "3", "brokerRole": "SLAVE",
                                 "minInSyncReplicas": "2", "allAckInSyncStateSet": "true"})
    assert config.broker_id == 3 and config.ha.min_in_sync_replicas == 2 and config.ha.all_ack_in_sync_state_set
