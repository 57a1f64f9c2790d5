"""``ReplicasInfoManager``: the controller's replicated state (RocketMQ 5's class of the same name), a deterministic
state machine over JSON events. Pure: no I/O, no clock, no liveness (that is each controller's own business,
:mod:`pocketmq.controller.heartbeat`).

Per broker group (``brokerName``)::

    cluster, replicas {brokerId: (address, HA address, register check code)},
    master broker id (None: no master), master epoch, SyncStateSet, SyncStateSet epoch

Events (the log entries; every one is conditional, so applying it is correct whatever was applied before, and the
proposer learns from the result whether it took effect)::

    {"t": "apply_id", "cluster", "name", "id", "addr", "ha", "code"}   a replica takes (or keeps) an id
    {"t": "address", "name", "id", "addr", "ha"}                          a replica's addresses changed
    {"t": "elect", "name", "master": id|null, "epoch": expected}         new master (or none) if the epoch matches
    {"t": "alter", "name", "master", "epoch", "ssEpoch", "set": [ids]}   SyncStateSet change by the master
    {"t": "clean", "name", "ids": [ids]|null}                             forget replicas (null: the whole group)

An election raises the master epoch by one and makes the SyncStateSet the new master alone (its epoch by one too);
an election that finds nobody (``master`` null) still raises the master epoch, so the old master is fenced when it
comes back, and keeps the SyncStateSet, so the old master can be elected again then (with
``enableElectUncleanMaster=false`` nobody outside it may be).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

__all__ = ["BrokerReplicaInfo", "Replica", "ReplicasInfoManager", "event"]


@dataclass(slots=True)
class Replica:
    address: str
    ha_address: str = ""
    register_check_code: str = ""


@dataclass(slots=True)
class BrokerReplicaInfo:
    """One broker group."""

    cluster: str
    broker_name: str
    replicas: dict[int, Replica] = field(default_factory=dict)
    master_id: int | None = None
    master_epoch: int = 0
    sync_state_set: set[int] = field(default_factory=set)
    sync_state_set_epoch: int = 0

    @property
    def master_address(self) -> str | None:
        replica = self.replicas.get(self.master_id) if self.master_id is not None else None
        return replica.address if replica else None

    @property
    def master_ha_address(self) -> str | None:
        replica = self.replicas.get(self.master_id) if self.master_id is not None else None
        return replica.ha_address if replica else None

    @property
    def next_broker_id(self) -> int:
        return max(self.replicas, default=0) + 1

    def to_json(self) -> dict[str, Any]:
        return {"cluster": self.cluster, "name": self.broker_name,
                "replicas": {str(i): [r.address, r.ha_address, r.register_check_code]
                             for i, r in self.replicas.items()},
                "master": self.master_id, "epoch": self.master_epoch, "set": sorted(self.sync_state_set),
                "ssEpoch": self.sync_state_set_epoch}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> BrokerReplicaInfo:
        return cls(data["cluster"], data["name"],
                   {int(i): Replica(*r) for i, r in data["replicas"].items()}, data["master"], data["epoch"],
                   set(data["set"]), data["ssEpoch"])


def event(kind: str, **fields: Any) -> bytes:
    """The log entry of an event."""
    return json.dumps({"t": kind, **fields}, separators=(",", ":"), sort_keys=True).encode()


class ReplicasInfoManager:
    """The state (see the module docstring); ``apply`` is the Raft state machine's."""

    def __init__(self) -> None:
        self.groups: dict[str, BrokerReplicaInfo] = {}

    # ================================================================================= the state machine

    def apply(self, data: bytes) -> dict[str, Any]:
        """Apply one event; the result says whether it took effect (``ok``) and the group's state after it."""
        try:
            message = json.loads(data)
            result: dict[str, Any] = _HANDLERS[message["t"]](self, message)
        except (ValueError, KeyError, TypeError):  # handlers read every field before they change anything
            return {"ok": False, "error": "malformed event"}
        group = self.groups.get(str(message.get("name", "")))
        if group is not None:
            result["group"] = group.to_json()
        return result

    def snapshot(self) -> bytes:
        return json.dumps({"groups": [g.to_json() for g in self.groups.values()]}, separators=(",", ":")).encode()

    def restore(self, data: bytes) -> None:
        loaded = json.loads(data) if data else {"groups": []}
        self.groups = {g["name"]: BrokerReplicaInfo.from_json(g) for g in loaded["groups"]}

    # ======================================================================================== events

    def _apply_id(self, e: dict[str, Any]) -> dict[str, Any]:
        name, broker_id = str(e["name"]), int(e["id"])
        group = self.groups.get(name)
        if group is None:
            group = self.groups[name] = BrokerReplicaInfo(str(e["cluster"]), name)
        replica = group.replicas.get(broker_id)
        code = str(e.get("code", ""))
        # ``address;token``: the token names the replica (its store); the address may change between restarts
        if replica is not None and replica.register_check_code and code and \
                replica.register_check_code.rpartition(";")[2] != code.rpartition(";")[2]:
            return {"ok": False, "error": f"broker id {broker_id} of {name} belongs to another broker"}
        group.replicas[broker_id] = Replica(str(e["addr"]), str(e.get("ha") or (replica.ha_address if replica else "")),
                                            code or (replica.register_check_code if replica else ""))
        return {"ok": True}

    def _address(self, e: dict[str, Any]) -> dict[str, Any]:
        group = self.groups.get(str(e["name"]))
        replica = group.replicas.get(int(e["id"])) if group else None
        if replica is None:
            return {"ok": False, "error": "no such replica"}
        replica.address, replica.ha_address = str(e["addr"]), str(e.get("ha", ""))
        return {"ok": True}

    def _elect(self, e: dict[str, Any]) -> dict[str, Any]:
        group = self.groups.get(str(e["name"]))
        if group is None:
            return {"ok": False, "error": "no such group"}
        if int(e["epoch"]) != group.master_epoch:
            return {"ok": False, "error": f"master epoch is {group.master_epoch}, not {e['epoch']}"}
        master = e.get("master")
        if master is not None and int(master) not in group.replicas:
            return {"ok": False, "error": f"no replica {master}"}
        group.master_epoch += 1
        if master is None:
            group.master_id = None
            return {"ok": True}
        group.master_id = int(master)
        group.sync_state_set = {group.master_id}
        group.sync_state_set_epoch += 1
        return {"ok": True}

    def _alter(self, e: dict[str, Any]) -> dict[str, Any]:
        group = self.groups.get(str(e["name"]))
        if group is None:
            return {"ok": False, "error": "no such group"}
        members = {int(i) for i in e["set"]}
        problem = check_alter(group, int(e["master"]), int(e["epoch"]), int(e["ssEpoch"]), members)
        if problem is not None:
            return {"ok": False, "error": problem[1], "code": problem[0]}
        group.sync_state_set = members
        group.sync_state_set_epoch += 1
        return {"ok": True}

    def _clean(self, e: dict[str, Any]) -> dict[str, Any]:
        name = str(e["name"])
        group = self.groups.get(name)
        if group is None:
            return {"ok": False, "error": "no such group"}
        ids = e.get("ids")
        if ids is None:
            del self.groups[name]
            return {"ok": True}
        for broker_id in map(int, ids):
            group.replicas.pop(broker_id, None)
            group.sync_state_set.discard(broker_id)
            if group.master_id == broker_id:
                group.master_id = None
                group.master_epoch += 1
        if not group.replicas:
            del self.groups[name]
        return {"ok": True}


def check_alter(group: BrokerReplicaInfo, master: int, master_epoch: int, ss_epoch: int,
                members: set[int]) -> tuple[str, str] | None:
    """Why a SyncStateSet change is refused, as (RocketMQ response code name, remark); None when it is valid
    (liveness of the new members is the processor's to check)."""
    if group.master_id is None or group.master_id != master:
        return "CONTROLLER_INVALID_MASTER", f"the master is {group.master_id}, not {master}"
    if master_epoch != group.master_epoch:
        return "CONTROLLER_FENCED_MASTER_EPOCH", f"the master epoch is {group.master_epoch}, not {master_epoch}"
    if ss_epoch != group.sync_state_set_epoch:
        return ("CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH",
                f"the SyncStateSet epoch is {group.sync_state_set_epoch}, not {ss_epoch}")
    unknown = members - set(group.replicas)
    if unknown:
        return "CONTROLLER_INVALID_REPLICAS", f"replicas {sorted(unknown)} do not exist"
    if master not in members:
        return "CONTROLLER_ALTER_SYNC_STATE_SET_FAILED", "the new SyncStateSet must contain the master"
    if members == group.sync_state_set:
        return "CONTROLLER_ALTER_SYNC_STATE_SET_FAILED", "the SyncStateSet is unchanged"
    return None


_HANDLERS = {"apply_id": ReplicasInfoManager._apply_id, "address": ReplicasInfoManager._address,
             "elect": ReplicasInfoManager._elect, "alter": ReplicasInfoManager._alter,
             "clean": ReplicasInfoManager._clean}
