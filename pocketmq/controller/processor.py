"""``ControllerRequestProcessor``: the controller's request handlers (RocketMQ 5's codes 904 and 1001-1013).

Requests that change the state (register, apply an id, elect, alter a SyncStateSet, clean) are decided by the Raft
leader and answered once their event is applied; requests that read it are answered by the leader while its lease
holds (:meth:`pocketmq.controller.raft.node.RaftNode.can_serve`). Any other controller answers CONTROLLER_NOT_LEADER
(2007) with the leader's address in ``controllerLeaderAddress`` (an extension field; the remark says it too), so the
caller goes there. A heartbeat is recorded by every controller; the leader's answer carries the group's state.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

from pocketmq.common.config import ConfigError, convert_value, format_config, parse_properties
from pocketmq.controller.config import controller_keys
from pocketmq.controller.manager import ControllerManager
from pocketmq.controller.raft import NotLeaderError, ProposalDroppedError
from pocketmq.controller.replicas import BrokerReplicaInfo, check_alter, event
from pocketmq.remoting.codes import RequestCode, ResponseCode
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.connection import Connection, Handler
from pocketmq.remoting.controller_headers import (
    AlterSyncStateSetRequestHeader,
    AlterSyncStateSetResponseHeader,
    ApplyBrokerIdRequestHeader,
    BrokerHeartbeatRequestHeader,
    BrokerHeartbeatResponseHeader,
    CleanControllerBrokerDataRequestHeader,
    ElectMasterRequestHeader,
    ElectMasterResponseHeader,
    GetMetaDataResponseHeader,
    GetNextBrokerIdRequestHeader,
    GetNextBrokerIdResponseHeader,
    GetReplicaInfoRequestHeader,
    GetReplicaInfoResponseHeader,
    RegisterBrokerToControllerRequestHeader,
    RegisterBrokerToControllerResponseHeader,
    SyncStateSet,
)
from pocketmq.remoting.route import BodyDecodeError, decode_body, encode_body

__all__ = ["RUNTIME_KEYS", "ControllerRequestProcessor"]

RUNTIME_KEYS = frozenset({"enableElectUncleanMaster", "notifyBrokerRoleChanged"})
"""What UPDATE_CONTROLLER_CONFIG may change while running."""
MAX_NAMES = 4096
"""Broker names one CONTROLLER_GET_SYNC_STATE_DATA may ask for."""
SERVE_WAIT_STEPS = 50
SERVE_WAIT_STEP_S = 0.02
"""A leader with a decision being applied answers a read after it (at most 50 x 20 ms), not CONTROLLER_NOT_LEADER."""


def _group_body(group: BrokerReplicaInfo) -> bytes:
    return encode_body(SyncStateSet(frozenset(group.sync_state_set), group.sync_state_set_epoch).to_json_dict())


class ControllerRequestProcessor:
    """See the module docstring."""

    def __init__(self, manager: ControllerManager) -> None:
        self.manager = manager
        self.node = manager.node

    def handlers(self) -> dict[int, Handler]:
        return {
            RequestCode.CONTROLLER_RAFT_MESSAGE: self.raft_message,
            RequestCode.BROKER_HEARTBEAT: self.heartbeat,
            RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET: self.alter_sync_state_set,
            RequestCode.CONTROLLER_ELECT_MASTER: self.elect_master,
            RequestCode.CONTROLLER_REGISTER_BROKER: self.register_broker,
            RequestCode.CONTROLLER_GET_REPLICA_INFO: self.get_replica_info,
            RequestCode.CONTROLLER_GET_METADATA_INFO: self.get_metadata,
            RequestCode.CONTROLLER_GET_SYNC_STATE_DATA: self.get_sync_state_data,
            RequestCode.UPDATE_CONTROLLER_CONFIG: self.update_config,
            RequestCode.GET_CONTROLLER_CONFIG: self.get_config,
            RequestCode.CLEAN_BROKER_DATA: self.clean_broker_data,
            RequestCode.CONTROLLER_GET_NEXT_BROKER_ID: self.get_next_broker_id,
            RequestCode.CONTROLLER_APPLY_BROKER_ID: self.apply_broker_id,
        }

    # =============================================================================================== helpers

    async def _servable(self) -> bool:
        """True when this leader may answer from its state: at once, or after what it accepted is applied (a
        decision being committed; bounded); False on a follower."""
        for _attempt in range(SERVE_WAIT_STEPS):
            if self.node.can_serve():
                return True
            if not self.node.is_leader:
                return False
            await asyncio.sleep(SERVE_WAIT_STEP_S)
        return False

    def _not_leader(self, req: RemotingCommand) -> RemotingCommand:
        leader = self.node.leader_address
        fields = {"controllerLeaderAddress": leader} if leader and not self.node.is_leader else {}
        return req.response(ResponseCode.CONTROLLER_NOT_LEADER,
                            f"this controller is not the leader; leader: {leader or 'unknown'}", ext_fields=fields)

    async def _commit(self, req: RemotingCommand, data: bytes) -> dict[str, Any] | RemotingCommand:
        """Propose ``data``: what applying it said, or the answer to give when it was not committed."""
        try:
            return await self.manager.propose(data)
        except (NotLeaderError, ProposalDroppedError):
            return self._not_leader(req)
        except TimeoutError:
            return req.response(ResponseCode.SYSTEM_ERROR, "the change was not committed in time")

    # ================================================================================================ raft

    def raft_message(self, req: RemotingCommand, conn: Connection) -> RemotingCommand | None:
        self.node.receive(req.body or b"")
        return None

    # ========================================================================================== heartbeats

    def heartbeat(self, req: RemotingCommand, conn: Connection) -> RemotingCommand:
        header = BrokerHeartbeatRequestHeader.from_command(req)
        self.manager.heartbeats.on_heartbeat(header, conn, self.manager.now)
        group = self.manager.replicas.groups.get(header.broker_name)
        if group is None or not self.node.can_serve():
            return req.response(ResponseCode.SUCCESS)
        fields = BrokerHeartbeatResponseHeader(group.master_id, group.master_address, group.master_epoch,
                                               group.sync_state_set_epoch, group.master_ha_address).to_fields()
        return req.response(ResponseCode.SUCCESS, ext_fields=fields, body=_group_body(group))

    # ======================================================================================= registration

    async def get_next_broker_id(self, req: RemotingCommand, conn: Connection) -> RemotingCommand:
        header = GetNextBrokerIdRequestHeader.from_command(req)
        if not await self._servable():
            return self._not_leader(req)
        group = self.manager.replicas.groups.get(header.broker_name)
        fields = GetNextBrokerIdResponseHeader(header.cluster_name, header.broker_name,
                                               group.next_broker_id if group else 1).to_fields()
        return req.response(ResponseCode.SUCCESS, ext_fields=fields)

    async def apply_broker_id(self, req: RemotingCommand, conn: Connection) -> RemotingCommand:
        header = ApplyBrokerIdRequestHeader.from_command(req)
        if header.applied_broker_id <= 0:
            return req.response(ResponseCode.CONTROLLER_BROKER_ID_INVALID, "broker ids start at 1")
        address = header.register_check_code.split(";", 1)[0]
        async with self.manager.lock:
            result = await self._commit(req, event("apply_id", cluster=header.cluster_name, name=header.broker_name,
                                                   id=header.applied_broker_id, addr=address,
                                                   code=header.register_check_code))
        if isinstance(result, RemotingCommand):
            return result
        if not result.get("ok"):
            return req.response(ResponseCode.CONTROLLER_BROKER_ID_INVALID, str(result.get("error")))
        return req.response(ResponseCode.SUCCESS, ext_fields={"clusterName": header.cluster_name,
                                                              "brokerName": header.broker_name})

    async def register_broker(self, req: RemotingCommand, conn: Connection) -> RemotingCommand:
        header = RegisterBrokerToControllerRequestHeader.from_command(req)
        if not await self._servable():  # decided from the applied state: only while it is authoritative
            return self._not_leader(req)
        async with self.manager.lock:
            group = self.manager.replicas.groups.get(header.broker_name)
            replica = group.replicas.get(header.broker_id) if group else None
            if group is None or replica is None:
                return req.response(ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED,
                                    f"broker {header.broker_id} of {header.broker_name} has not applied for its id")
            ha = header.ha_server_addr or replica.ha_address
            if (replica.address, replica.ha_address) != (header.broker_address, ha):
                result = await self._commit(req, event("address", name=header.broker_name, id=header.broker_id,
                                                       addr=header.broker_address, ha=ha))
                if isinstance(result, RemotingCommand):
                    return result
        fields = RegisterBrokerToControllerResponseHeader(
            group.cluster, group.broker_name, group.master_id, group.master_address, group.master_epoch,
            group.sync_state_set_epoch, group.master_ha_address).to_fields()
        return req.response(ResponseCode.SUCCESS, ext_fields=fields, body=_group_body(group))

    # ============================================================================================== reads

    async def get_replica_info(self, req: RemotingCommand, conn: Connection) -> RemotingCommand:
        header = GetReplicaInfoRequestHeader.from_command(req)
        if not await self._servable():
            return self._not_leader(req)
        group = self.manager.replicas.groups.get(header.broker_name)
        if group is None:
            return req.response(ResponseCode.CONTROLLER_BROKER_METADATA_NOT_EXIST,
                                f"no broker group {header.broker_name}")
        fields = GetReplicaInfoResponseHeader(group.master_id, group.master_address, group.master_epoch,
                                              group.master_ha_address).to_fields()
        return req.response(ResponseCode.SUCCESS, ext_fields=fields, body=_group_body(group))

    def get_metadata(self, req: RemotingCommand, conn: Connection) -> RemotingCommand:
        config = self.manager.config
        header = GetMetaDataResponseHeader(config.controller_d_leger_group, self.node.leader_id,
                                           self.node.leader_address, self.node.can_serve(),
                                           config.controller_d_leger_peers)
        return req.response(ResponseCode.SUCCESS, ext_fields=header.to_fields())

    async def get_sync_state_data(self, req: RemotingCommand, conn: Connection) -> RemotingCommand:
        if not await self._servable():
            return self._not_leader(req)
        try:
            names = decode_body(req.body or b"[]") if req.body else []
        except BodyDecodeError as exc:
            return req.response(ResponseCode.CONTROLLER_INVALID_REQUEST, str(exc))
        groups = self.manager.replicas.groups
        if not isinstance(names, list) or len(names) > MAX_NAMES or not all(isinstance(n, str) for n in names):
            return req.response(ResponseCode.CONTROLLER_INVALID_REQUEST, "the body must be a JSON list of names")
        now = self.manager.now
        table: dict[str, Any] = {}
        for name in names or sorted(groups):
            group = groups.get(name)
            if group is None:
                continue
            replicas = [{"brokerName": name, "brokerId": i, "brokerAddress": r.address, "haAddress": r.ha_address,
                         "alive": self.manager.heartbeats.is_alive(name, i, now)}
                        for i, r in sorted(group.replicas.items())]
            table[name] = {"masterBrokerId": group.master_id, "masterAddress": group.master_address,
                           "masterEpoch": group.master_epoch, "syncStateSetEpoch": group.sync_state_set_epoch,
                           "inSyncReplicas": [r for r in replicas if r["brokerId"] in group.sync_state_set],
                           "notInSyncReplicas": [r for r in replicas if r["brokerId"] not in group.sync_state_set]}
        return req.response(ResponseCode.SUCCESS, body=encode_body({"replicasInfoTable": table}))

    # ============================================================================================== writes

    async def alter_sync_state_set(self, req: RemotingCommand, conn: Connection) -> RemotingCommand:
        header = AlterSyncStateSetRequestHeader.from_command(req)
        try:
            wanted = SyncStateSet.from_json_dict(decode_body(req.body or b"{}"))
        except BodyDecodeError as exc:
            return req.response(ResponseCode.CONTROLLER_INVALID_REQUEST, str(exc))
        if not await self._servable():  # decided from the applied state: only while it is authoritative
            return self._not_leader(req)
        async with self.manager.lock:
            group = self.manager.replicas.groups.get(header.broker_name)
            if group is None:
                return req.response(ResponseCode.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED, "no such broker group")
            members = set(wanted.members)
            problem = check_alter(group, header.master_broker_id, header.master_epoch, wanted.epoch, members)
            if problem is not None:
                return req.response(ResponseCode[problem[0]], problem[1])
            now = self.manager.now
            dead = [m for m in members - group.sync_state_set
                    if not self.manager.heartbeats.is_alive(header.broker_name, m, now)]
            if dead:
                return req.response(ResponseCode.CONTROLLER_BROKER_NOT_ALIVE, f"replicas {dead} are not alive")
            result = await self._commit(req, event("alter", name=header.broker_name, master=header.master_broker_id,
                                                   epoch=header.master_epoch, ssEpoch=wanted.epoch,
                                                   set=sorted(members)))
        if isinstance(result, RemotingCommand):
            return result
        if not result.get("ok"):
            code = ResponseCode[str(result.get("code", "CONTROLLER_ALTER_SYNC_STATE_SET_FAILED"))]
            return req.response(code, str(result.get("error")))
        fields = AlterSyncStateSetResponseHeader(group.sync_state_set_epoch).to_fields()
        return req.response(ResponseCode.SUCCESS, ext_fields=fields, body=_group_body(group))

    async def elect_master(self, req: RemotingCommand, conn: Connection) -> RemotingCommand:
        header = ElectMasterRequestHeader.from_command(req)
        if not await self._servable():
            return self._not_leader(req)
        prefer = header.broker_id if header.designate_elect and header.broker_id > 0 else None
        broker_id = header.broker_id if header.broker_id > 0 and prefer is None else None
        try:
            outcome = await self.manager.elect(header.broker_name, broker_id=broker_id, prefer=prefer)
        except (NotLeaderError, ProposalDroppedError):
            return self._not_leader(req)
        except TimeoutError:
            return req.response(ResponseCode.SYSTEM_ERROR, "the election was not committed in time")
        group = outcome.group
        if group is None:
            return req.response(outcome.code, outcome.remark)
        fields = ElectMasterResponseHeader(group.master_id, group.master_address, group.master_epoch,
                                           group.sync_state_set_epoch, group.master_ha_address).to_fields()
        body = encode_body({"brokerMemberGroup": {"cluster": group.cluster, "brokerName": group.broker_name,
                                                  "brokerAddrs": {i: r.address for i, r in group.replicas.items()}},
                            "syncStateSet": sorted(group.sync_state_set)})
        return req.response(outcome.code, outcome.remark, ext_fields=fields, body=body)

    async def clean_broker_data(self, req: RemotingCommand, conn: Connection) -> RemotingCommand:
        header = CleanControllerBrokerDataRequestHeader.from_command(req)
        if not await self._servable():
            return self._not_leader(req)
        ids_text = (header.broker_controller_ids_to_clean or "").strip()
        try:
            ids = [int(i) for i in ids_text.split(";") if i.strip()] if ids_text else None
        except ValueError:
            return req.response(ResponseCode.CONTROLLER_INVALID_CLEAN_BROKER_METADATA, f"bad broker ids {ids_text!r}")
        async with self.manager.lock:
            group = self.manager.replicas.groups.get(header.broker_name)
            if group is None:
                return req.response(ResponseCode.CONTROLLER_INVALID_CLEAN_BROKER_METADATA, "no such broker group")
            now = self.manager.now
            targets = ids if ids is not None else list(group.replicas)
            alive = [i for i in targets if self.manager.heartbeats.is_alive(header.broker_name, i, now)]
            if alive and not header.is_clean_living_broker:
                return req.response(ResponseCode.CONTROLLER_INVALID_CLEAN_BROKER_METADATA,
                                    f"brokers {alive} are alive (set isCleanLivingBroker to clean them anyway)")
            result = await self._commit(req, event("clean", name=header.broker_name, ids=ids))
        if isinstance(result, RemotingCommand):
            return result
        self.manager.heartbeats.forget(header.broker_name, ids)
        return req.response(ResponseCode.SUCCESS if result.get("ok") else
                            ResponseCode.CONTROLLER_INVALID_CLEAN_BROKER_METADATA, result.get("error"))

    # ============================================================================================== config

    def get_config(self, req: RemotingCommand, conn: Connection) -> RemotingCommand:
        return req.response(ResponseCode.SUCCESS, body=format_config(self.manager.config).encode())

    def update_config(self, req: RemotingCommand, conn: Connection) -> RemotingCommand:
        props = parse_properties(bytes(req.body or b"").decode("utf-8", "replace"))
        refused = sorted(set(props) - RUNTIME_KEYS)
        if refused:
            known = controller_keys()
            why = "unknown" if set(refused) - known else "not changeable while running"
            return req.response(ResponseCode.SYSTEM_ERROR, f"keys {refused} are {why} (changeable: "
                                f"{', '.join(sorted(RUNTIME_KEYS))})")
        try:
            changes = {("enable_elect_unclean_master" if k == "enableElectUncleanMaster" else
                        "notify_broker_role_changed"): convert_value(k, v, bool) for k, v in props.items()}
        except ConfigError as exc:
            return req.response(ResponseCode.SYSTEM_ERROR, str(exc))
        self.manager.config = dataclasses.replace(self.manager.config, **changes)
        return req.response(ResponseCode.SUCCESS)
