"""In-process controllers on real loopback ports, and a broker's side of the controller protocol for tests."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path
from typing import Any

from pocketmq.controller.config import ControllerConfig
from pocketmq.controller.main import ControllerProcess, ControllerStartup
from pocketmq.remoting.client import RemotingClient
from pocketmq.remoting.codes import RequestCode, ResponseCode
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.controller_headers import (
    AlterSyncStateSetRequestHeader,
    ApplyBrokerIdRequestHeader,
    BrokerHeartbeatRequestHeader,
    ElectMasterRequestHeader,
    GetReplicaInfoRequestHeader,
    RegisterBrokerToControllerRequestHeader,
    SyncStateSet,
)
from pocketmq.remoting.errors import PocketMQError
from pocketmq.remoting.route import decode_body, encode_body


def free_ports(count: int) -> list[int]:
    """Ports free now on 127.0.0.1 (a controller must know its peers' ports before they start)."""
    socks = [socket.socket() for _ in range(count)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


class Controllers:
    """Three (or ``size``) standalone controllers of one group."""

    def __init__(self, base: Path, size: int = 3, **overrides: Any) -> None:
        ports = free_ports(size)
        self.ids = [f"n{i}" for i in range(size)]
        self.peers = ";".join(f"{i}-127.0.0.1:{p}" for i, p in zip(self.ids, ports, strict=True))
        self.addrs = {i: f"127.0.0.1:{p}" for i, p in zip(self.ids, ports, strict=True)}
        self.base = base
        self.overrides = overrides
        self.procs: dict[str, ControllerProcess] = {}

    def config(self, node: str) -> ControllerConfig:
        # The default Raft timing: the three nodes share the test's event loop, and a shorter election timeout let a
        # busy machine change leaders between two steps of a test that expects one leader throughout.
        return ControllerConfig(controller_d_leger_peers=self.peers, controller_d_leger_self_id=node,
                                controller_store_path=str(self.base / "controller"),
                                controller_raft_election_timeout_mills=1000,
                                controller_raft_heartbeat_interval_mills=150, **self.overrides)

    async def start(self, node: str) -> ControllerProcess:
        proc = ControllerProcess(ControllerStartup(self.config(node)))
        await proc.start()
        self.procs[node] = proc
        return proc

    async def start_all(self) -> None:
        for node in self.ids:
            await self.start(node)

    async def stop(self, node: str) -> None:
        await self.procs.pop(node).stop()

    async def stop_all(self) -> None:
        for node in list(self.procs):
            await self.stop(node)

    def leader(self) -> ControllerProcess | None:
        leaders = [p for p in self.procs.values() if p.manager.node.can_serve()]
        return leaders[0] if len(leaders) == 1 else None

    @property
    def controller_addr(self) -> str:
        return ";".join(self.addrs.values())


class ControllerBroker:
    """What a broker says to the controllers, driven by hand."""

    def __init__(self, controllers: Controllers, name: str, broker_id: int, addr: str) -> None:
        self.controllers = controllers
        self.name = name
        self.broker_id = broker_id
        self.addr = addr
        self.client = RemotingClient(connect_timeout=1.0)

    async def call(self, code: int, fields: dict[str, str], body: bytes | None = None) -> RemotingCommand:
        """Ask every controller until one that is not a follower answers."""
        last: RemotingCommand | None = None
        for address in self.controllers.addrs.values():
            try:
                response = await self.client.invoke(address, RemotingCommand.request(code, fields, body), 5.0)
            except PocketMQError:
                continue
            if response.code != ResponseCode.CONTROLLER_NOT_LEADER:
                return response
            last = response
        assert last is not None, "no controller answered"
        return last

    async def register(self) -> RemotingCommand:
        applied = await self.call(RequestCode.CONTROLLER_APPLY_BROKER_ID, ApplyBrokerIdRequestHeader(
            "c", self.name, self.broker_id, f"{self.addr};code{self.broker_id}").to_fields())
        assert applied.code == ResponseCode.SUCCESS, applied.remark
        return await self.call(RequestCode.CONTROLLER_REGISTER_BROKER, RegisterBrokerToControllerRequestHeader(
            "c", self.name, self.broker_id, self.addr, ha_server_addr=f"{self.addr}-ha").to_fields())

    async def heartbeat(self, *, epoch: int = 0, max_offset: int = 0) -> list[RemotingCommand]:
        header = BrokerHeartbeatRequestHeader("c", self.addr, self.name, self.broker_id, epoch, max_offset,
                                              heartbeat_timeout_mills=1500).to_fields()
        out = []
        for address in self.controllers.addrs.values():
            try:
                out.append(await self.client.invoke(
                    address, RemotingCommand.request(RequestCode.BROKER_HEARTBEAT, dict(header)), 2.0))
            except PocketMQError:
                continue
        return out

    async def elect(self, *, designate: int | None = None) -> RemotingCommand:
        header = ElectMasterRequestHeader("c", self.name, designate if designate else self.broker_id,
                                          designate_elect=designate is not None)
        return await self.call(RequestCode.CONTROLLER_ELECT_MASTER, header.to_fields())

    async def replica_info(self) -> tuple[dict[str, str], SyncStateSet]:
        """The group as the leader has it (retried while a decision is being applied: the leader answers reads
        only when nothing it accepted is still pending)."""
        for _attempt in range(50):
            response = await self.call(RequestCode.CONTROLLER_GET_REPLICA_INFO,
                                       GetReplicaInfoRequestHeader(self.name).to_fields())
            if response.code != ResponseCode.CONTROLLER_NOT_LEADER:
                break
            await asyncio.sleep(0.05)
        assert response.code == ResponseCode.SUCCESS, response.remark
        return dict(response.ext_fields or {}), SyncStateSet.from_json_dict(decode_body(response.body or b"{}"))

    async def alter(self, members: set[int], master_epoch: int, ss_epoch: int) -> RemotingCommand:
        header = AlterSyncStateSetRequestHeader(self.name, self.broker_id, master_epoch)
        body = encode_body(SyncStateSet(frozenset(members), ss_epoch).to_json_dict())
        return await self.call(RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET, header.to_fields(), body)

    async def close(self) -> None:
        await self.client.close()
