"""Controller-mode brokers in the test's event loop, with a name server carrying a single controller: ids assigned
by the controller (brokerId=-1), one master elected, writes acknowledged by the in-sync slave, a topic created on the
master present on the slave when the creation answers, the epoch file served over GET_BROKER_EPOCH_CACHE, the
configuration rules of controller mode."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pocketmq.broker.config import load_broker_config
from pocketmq.broker.controller import BrokerController
from pocketmq.common.config import ConfigError
from pocketmq.controller.config import ControllerConfig
from pocketmq.namesrv.config import NamesrvConfig
from pocketmq.namesrv.controller import NamesrvController
from pocketmq.remoting.client import RemotingClient
from pocketmq.remoting.codes import RequestCode, ResponseCode
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.headers import CreateTopicRequestHeader
from tests.cluster import broker_config_kwargs
from tests.controller.cluster_support import raw_send
from tests.controller.controller_support import free_ports
from tests.helpers import eventually

pytestmark = pytest.mark.timeout(120)

PROPS = {"enableControllerMode": "true", "brokerId": "-1", "allAckInSyncStateSet": "true",
         "haMaxTimeSlaveNotCatchup": "3000", "haSendHeartbeatInterval": "1000", "brokerHeartbeatInterval": "200",
         "checkSyncStateSetPeriod": "300", "syncBrokerMetadataPeriod": "500", "slaveSynchronizeInterval": "500"}


async def test_controller_mode_brokers_in_one_loop(tmp_path: Path) -> None:
    port = free_ports(1)[0]
    controller = ControllerConfig(controller_d_leger_peers=f"n0-127.0.0.1:{port}", controller_d_leger_self_id="n0",
                                  controller_store_path=str(tmp_path / "ctl"))
    ns = NamesrvController(NamesrvConfig(listen_host="127.0.0.1", kv_config_path=str(tmp_path / "kv.json")),
                           controller=controller)
    await ns.start()
    brokers: list[BrokerController] = []
    client = RemotingClient()
    try:
        for index in range(2):
            kwargs = broker_config_kwargs(tmp_path, "broker-x", ns.addr, broker_id=-1)
            kwargs["store_path_root_dir"] = str(tmp_path / f"x{index}")
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
        epochs = await client.invoke(slave.addr, RemotingCommand.request(RequestCode.GET_BROKER_EPOCH_CACHE), 5.0)
        listed = json.loads(bytes(epochs.body or b"{}"))["epochList"]
        assert [e["epoch"] for e in listed] == [1] and listed[0]["startOffset"] == 0
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
