"""``ControllerClient``: a broker's calls to the controllers (RocketMQ 5's ``BrokerOuterAPI`` controller methods).

Requests that the leader must answer go to the controller last known to lead; one answering CONTROLLER_NOT_LEADER
names the leader (``controllerLeaderAddress``) and the request goes there, else to the next controller. Heartbeats go
to every controller at once (each keeps its own view of who is alive). Every call has its own timeout; a failure is
an exception for the caller, never a hang.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from pocketmq.remoting.client import RemotingClient
from pocketmq.remoting.codes import RequestCode, ResponseCode
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.controller_headers import (
    AlterSyncStateSetRequestHeader,
    ApplyBrokerIdRequestHeader,
    BrokerHeartbeatRequestHeader,
    ElectMasterRequestHeader,
    GetNextBrokerIdRequestHeader,
    RegisterBrokerToControllerRequestHeader,
    SyncStateSet,
)
from pocketmq.remoting.errors import PocketMQError, RemotingError
from pocketmq.remoting.route import BodyDecodeError, decode_body, encode_body

__all__ = ["ControllerClient", "ControllerError", "GroupState"]

CALL_TIMEOUT = 3.0


class ControllerError(PocketMQError):
    """No controller answered, or the leader refused (``response_code`` is its answer; 0 when nobody answered)."""

    retriable = True

    def __init__(self, message: str, response_code: int = 0) -> None:
        super().__init__(message)
        self.response_code = response_code


@dataclass(frozen=True, slots=True)
class GroupState:
    """A broker group as the controller leader knows it."""

    master_id: int | None
    master_address: str | None
    master_ha_address: str | None
    master_epoch: int
    sync_state_set: frozenset[int]
    sync_state_set_epoch: int
    #: broker id -> (address, HA address) of every replica (empty when the answer did not carry them)
    replicas: dict[int, tuple[str, str]]

    @classmethod
    def from_fields(cls, fields: dict[str, str], body: bytes | bytearray | memoryview | None,
                    **more: Any) -> GroupState:
        sss = SyncStateSet.from_json_dict(decode_body(body or b"{}")) if body else SyncStateSet(frozenset(), 0)
        master = fields.get("masterBrokerId")
        return cls(int(master) if master not in (None, "") else None, fields.get("masterAddress") or None,
                   fields.get("masterHaAddress") or None, int(fields.get("masterEpoch") or 0), sss.members,
                   int(fields.get("syncStateSetEpoch") or sss.epoch), more.get("replicas", {}))


class ControllerClient:
    """See the module docstring."""

    def __init__(self, client: RemotingClient, addresses: list[str], *, cluster: str, broker_name: str) -> None:
        if not addresses:
            raise ValueError("controller mode needs at least one controller address")
        self.client = client
        self.addresses = list(addresses)
        self.cluster = cluster
        self.broker_name = broker_name
        self.leader: str | None = None

    async def _ask(self, code: int, fields: dict[str, str], body: bytes | None = None) -> RemotingCommand:
        """The leader's answer (see the module docstring)."""
        order = ([self.leader] if self.leader else []) + [a for a in self.addresses if a != self.leader]
        tried: set[str] = set()
        problems = []
        while order:
            address = order.pop(0)
            if address in tried:
                continue
            tried.add(address)
            try:
                response = await self.client.invoke(address, RemotingCommand.request(code, dict(fields), body),
                                                    CALL_TIMEOUT)
            except RemotingError as exc:
                problems.append(f"{address}: {exc}")
                continue
            if response.code == ResponseCode.CONTROLLER_NOT_LEADER:
                hint = (response.ext_fields or {}).get("controllerLeaderAddress")
                if hint and hint not in tried:
                    order.insert(0, hint)
                problems.append(f"{address}: not the leader")
                continue
            self.leader = address
            return response
        self.leader = None
        raise ControllerError("no controller leader answered: " + "; ".join(problems))

    @staticmethod
    def _check(response: RemotingCommand, *accept: int) -> RemotingCommand:
        if response.code not in (ResponseCode.SUCCESS, *accept):
            raise ControllerError(response.remark or f"controller answered {response.code}", response.code)
        return response

    async def next_broker_id(self) -> int:
        response = self._check(await self._ask(RequestCode.CONTROLLER_GET_NEXT_BROKER_ID, GetNextBrokerIdRequestHeader(
            self.cluster, self.broker_name).to_fields()))
        return int((response.ext_fields or {}).get("nextBrokerId") or 1)

    async def apply_broker_id(self, broker_id: int, check_code: str) -> None:
        self._check(await self._ask(RequestCode.CONTROLLER_APPLY_BROKER_ID, ApplyBrokerIdRequestHeader(
            self.cluster, self.broker_name, broker_id, check_code).to_fields()))

    async def register(self, broker_id: int, address: str, ha_address: str) -> GroupState:
        response = self._check(await self._ask(RequestCode.CONTROLLER_REGISTER_BROKER,
                                               RegisterBrokerToControllerRequestHeader(
                                                   self.cluster, self.broker_name, broker_id, address,
                                                   ha_server_addr=ha_address).to_fields()))
        return GroupState.from_fields(dict(response.ext_fields or {}), response.body)

    async def elect(self, broker_id: int, *, designate: bool = False) -> tuple[int, GroupState]:
        """(the controller's code, the group after it): SUCCESS, MASTER_STILL_EXIST or ELECT_MASTER_FAILED."""
        response = self._check(await self._ask(RequestCode.CONTROLLER_ELECT_MASTER, ElectMasterRequestHeader(
            self.cluster, self.broker_name, broker_id, designate).to_fields()),
            ResponseCode.CONTROLLER_MASTER_STILL_EXIST, ResponseCode.CONTROLLER_ELECT_MASTER_FAILED)
        fields = dict(response.ext_fields or {})
        try:
            members = frozenset(int(i) for i in decode_body(response.body or b"{}").get("syncStateSet") or [])
        except (BodyDecodeError, AttributeError, TypeError, ValueError):
            members = frozenset()
        body = encode_body(SyncStateSet(members, int(fields.get("syncStateSetEpoch") or 0)).to_json_dict())
        return response.code, GroupState.from_fields(fields, body)

    async def group_state(self) -> GroupState:
        """The group's state with every replica's addresses (CONTROLLER_GET_SYNC_STATE_DATA)."""
        response = self._check(await self._ask(RequestCode.CONTROLLER_GET_SYNC_STATE_DATA, {},
                                               encode_body([self.broker_name])))
        table = (decode_body(response.body or b"{}") or {}).get("replicasInfoTable") or {}
        info = table.get(self.broker_name)
        if not isinstance(info, dict):
            raise ControllerError(f"the controller knows no group {self.broker_name}",
                                  ResponseCode.CONTROLLER_BROKER_METADATA_NOT_EXIST)
        members = info.get("inSyncReplicas") or []
        replicas = {int(r["brokerId"]): (str(r.get("brokerAddress") or ""), str(r.get("haAddress") or ""))
                    for r in members + (info.get("notInSyncReplicas") or [])}
        master = info.get("masterBrokerId")
        master_id = int(master) if master is not None else None
        return GroupState(master_id, info.get("masterAddress") or None,
                          replicas.get(master_id, ("", ""))[1] or None if master_id is not None else None,
                          int(info.get("masterEpoch") or 0), frozenset(int(r["brokerId"]) for r in members),
                          int(info.get("syncStateSetEpoch") or 0), replicas)

    async def alter_sync_state_set(self, master_id: int, master_epoch: int, members: frozenset[int],
                                   sync_state_set_epoch: int) -> SyncStateSet:
        body = encode_body(SyncStateSet(members, sync_state_set_epoch).to_json_dict())
        response = self._check(await self._ask(RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET,
                                               AlterSyncStateSetRequestHeader(self.broker_name, master_id,
                                                                              master_epoch).to_fields(), body))
        return SyncStateSet.from_json_dict(decode_body(response.body or b"{}"))

    async def heartbeat(self, header: BrokerHeartbeatRequestHeader, timeout: float) -> GroupState | None:
        """Send ``header`` to every controller; the leader's view of the group (None when no leader answered)."""
        fields = header.to_fields()

        async def one(address: str) -> RemotingCommand | None:
            try:
                return await self.client.invoke(address, RemotingCommand.request(
                    RequestCode.BROKER_HEARTBEAT, dict(fields)), timeout)
            except RemotingError:
                return None

        answers = await asyncio.gather(*(one(a) for a in self.addresses))
        for address, answer in zip(self.addresses, answers, strict=True):
            if answer is not None and answer.code == ResponseCode.SUCCESS and answer.ext_fields and \
                    "masterEpoch" in answer.ext_fields:
                self.leader = address
                return GroupState.from_fields(dict(answer.ext_fields), answer.body)
        return None
