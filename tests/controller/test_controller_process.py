"""``rmq-controller`` as real processes: three standalone controllers from ``.properties`` files elect a leader, a
broker group registered and elected with one survives the leader's SIGKILL (the state is on the other two), and
the killed controller comes back from its files."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest

from pocketmq.remoting.client import RemotingClient
from pocketmq.remoting.codes import RequestCode, ResponseCode
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.controller_headers import (
    ApplyBrokerIdRequestHeader,
    ElectMasterRequestHeader,
    GetReplicaInfoRequestHeader,
    RegisterBrokerToControllerRequestHeader,
)
from pocketmq.remoting.errors import PocketMQError
from tests.controller.controller_support import free_ports
from tests.procs import Proc

pytestmark = pytest.mark.timeout(120)


def start(tmp_path: Path, node: str, peers: str) -> Proc:
    conf = tmp_path / f"{node}.properties"
    conf.write_text(f"controllerDLegerGroup=g1\ncontrollerDLegerPeers={peers}\ncontrollerDLegerSelfId={node}\n"
                    f"controllerStorePath={tmp_path / 'store'}\n")
    proc = Proc([sys.executable, "-m", "pocketmq.controller.main", "-c", str(conf), "--log-format", "json"],
                "CONTROLLER READY")
    proc.wait_ready()
    return proc


async def ask_any(client: RemotingClient, addrs: list[str], code: int, fields: dict[str, str]) -> RemotingCommand:
    """The leader's answer: ask each controller until one answers other than 'not leader' (bounded)."""
    for _ in range(100):
        for addr in addrs:
            try:
                answer = await client.invoke(addr, RemotingCommand.request(code, fields), 3.0)
            except (PocketMQError, OSError):  # a killed controller: try the next
                continue
            if answer.code != ResponseCode.CONTROLLER_NOT_LEADER:
                return answer
        await asyncio.sleep(0.1)
    raise AssertionError("no controller leader answered")


async def leader_id(client: RemotingClient, addrs: list[str]) -> str:
    """The id of the controller that says it leads (waited for, bounded)."""
    for _ in range(100):
        for addr in addrs:
            try:
                meta = await client.invoke(addr, RemotingCommand.request(RequestCode.CONTROLLER_GET_METADATA_INFO), 3.0)
            except (PocketMQError, OSError):  # a killed controller: try the next
                continue
            fields = meta.ext_fields or {}
            if fields.get("isLeader") == "true":
                return fields["controllerLeaderId"]
        await asyncio.sleep(0.1)
    raise AssertionError("no controller leads")


async def test_three_standalone_controllers_survive_their_leaders_kill(tmp_path: Path) -> None:
    ports = free_ports(3)
    addrs = [f"127.0.0.1:{p}" for p in ports]
    peers = ";".join(f"n{i}-{a}" for i, a in enumerate(addrs))
    procs = {f"n{i}": await asyncio.to_thread(start, tmp_path, f"n{i}", peers) for i in range(3)}
    client = RemotingClient()
    try:
        apply = ApplyBrokerIdRequestHeader("c", "broker-p", 1, "127.0.0.1:1;token").to_fields()
        assert (await ask_any(client, addrs, RequestCode.CONTROLLER_APPLY_BROKER_ID, apply)).code == \
            ResponseCode.SUCCESS
        register = RegisterBrokerToControllerRequestHeader("c", "broker-p", 1, "127.0.0.1:1").to_fields()
        assert (await ask_any(client, addrs, RequestCode.CONTROLLER_REGISTER_BROKER, register)).code == \
            ResponseCode.SUCCESS
        elected = await ask_any(client, addrs, RequestCode.CONTROLLER_ELECT_MASTER,
                                ElectMasterRequestHeader("c", "broker-p", 1).to_fields())
        assert elected.code == ResponseCode.SUCCESS, elected.remark
        leader = await leader_id(client, addrs)
        await asyncio.to_thread(procs[leader].kill)
        info = await ask_any(client, addrs, RequestCode.CONTROLLER_GET_REPLICA_INFO,
                             GetReplicaInfoRequestHeader("broker-p").to_fields())
        assert info.code == ResponseCode.SUCCESS and (info.ext_fields or {})["masterEpoch"] == "1"
        assert await leader_id(client, addrs) != leader
        procs[leader] = await asyncio.to_thread(start, tmp_path, leader, peers)
        again = await client.invoke(addrs[int(leader[1:])], RemotingCommand.request(
            RequestCode.CONTROLLER_GET_METADATA_INFO), 3.0)
        assert again.code == ResponseCode.SUCCESS
    finally:
        await client.close()
        for proc in procs.values():
            await asyncio.to_thread(proc.terminate)


def test_cli_flags_configure_controller_mode(tmp_path: Path) -> None:
    """What a container passes on the command line (docker compose): the name server's controller peers, id and
    store, the broker's controllers; without enableControllerInNamesrv the controller flags are refused."""
    conf = tmp_path / "ns.properties"
    conf.write_text("enableControllerInNamesrv=true\ncontrollerDLegerGroup=g1\n")
    peers = "n0-namesrv-0:9876;n1-namesrv-1:9877;n2-namesrv-2:9878"
    out = subprocess.run([sys.executable, "-m", "pocketmq.namesrv.main", "-c", str(conf), "--controller-peers", peers,
                          "--controller-self-id", "n1", "--controller-store-path", str(tmp_path / "ctl"),
                          "--print-config"], capture_output=True, text=True, timeout=30, check=True)
    assert f"controllerDLegerPeers={peers}" in out.stdout and "controllerDLegerSelfId=n1" in out.stdout
    assert f"controllerStorePath={tmp_path / 'ctl'}" in out.stdout
    conf.write_text("")
    refused = subprocess.run([sys.executable, "-m", "pocketmq.namesrv.main", "-c", str(conf), "--controller-self-id",
                              "n1", "--print-config"], capture_output=True, text=True, timeout=30)
    assert refused.returncode == 2 and "enableControllerInNamesrv=true" in refused.stderr
    conf.write_text("controllerDLegerGrup=g1\n")  # a misspelt controller key: both key sets are listed
    refused = subprocess.run([sys.executable, "-m", "pocketmq.namesrv.main", "-c", str(conf), "--print-config"],
                             capture_output=True, text=True, timeout=30)
    assert refused.returncode == 2 and "controllerDLegerGrup" in refused.stderr, refused.stderr
    assert "listenPort" in refused.stderr and "controllerDLegerGroup" in refused.stderr
    broker = tmp_path / "b.properties"
    broker.write_text("brokerName=broker-a\nbrokerId=1\nenableControllerMode=true\n")
    out = subprocess.run([sys.executable, "-m", "pocketmq.broker.main", "-c", str(broker), "--controller-addr",
                          "127.0.0.1:9876;127.0.0.1:9877", "--store-dir", str(tmp_path / "s"), "--print-config"],
                         capture_output=True, text=True, timeout=30, check=True)
    assert "controllerAddr=127.0.0.1:9876;127.0.0.1:9877" in out.stdout
