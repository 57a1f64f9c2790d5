"""Headers and bodies of controller mode (RocketMQ 5's RIP-44): broker <-> controller, controller -> broker, admin.

Field names are RocketMQ 5's (``BrokerHeartbeatRequestHeader``, ``ElectMasterRequestHeader``...). Fields marked
*extension* are PocketMQ's own: optional on the way in (a Java broker or tool that does not send them gets the
RocketMQ behaviour) and ignored by Java on the way out.

Bodies are JSON objects (fastjson-style, as RocketMQ's ``RemotingSerializable``):

* ``SyncStateSet`` — ``{"syncStateSet": [brokerId...], "syncStateSetEpoch": n}``;
* ``ElectMasterResponseBody`` — ``{"brokerMemberGroup": {"cluster", "brokerName", "brokerAddrs": {id: addr}},
  "syncStateSet": [brokerId...]}``;
* ``BrokerReplicasInfo`` — ``{"replicasInfoTable": {brokerName: {"masterBrokerId", "masterAddress", "masterEpoch",
  "syncStateSetEpoch", "inSyncReplicas": [ReplicaIdentity], "notInSyncReplicas": [...]}}}`` with
  ``ReplicaIdentity`` = ``{"brokerName", "brokerId", "brokerAddress", "alive"}`` (and ``haAddress``, an extension);
* ``EpochEntryCache`` — ``{"clusterName", "brokerName", "brokerId", "epochList": [{"epoch", "startOffset",
  "endOffset"}], "maxOffset"}`` (the last entry's ``endOffset`` is Java's ``Long.MAX_VALUE``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

from pocketmq.remoting.errors import InvalidHeaderError
from pocketmq.remoting.headers import CommandHeader

__all__ = [
    "LONG_MAX",
    "AlterSyncStateSetRequestHeader",
    "AlterSyncStateSetResponseHeader",
    "ApplyBrokerIdRequestHeader",
    "BrokerHeartbeatRequestHeader",
    "BrokerHeartbeatResponseHeader",
    "CleanControllerBrokerDataRequestHeader",
    "ElectMasterRequestHeader",
    "ElectMasterResponseHeader",
    "EpochEntry",
    "GetMetaDataResponseHeader",
    "GetNextBrokerIdRequestHeader",
    "GetNextBrokerIdResponseHeader",
    "GetReplicaInfoRequestHeader",
    "GetReplicaInfoResponseHeader",
    "NotifyBrokerRoleChangedRequestHeader",
    "RegisterBrokerToControllerRequestHeader",
    "RegisterBrokerToControllerResponseHeader",
    "SyncStateSet",
    "epoch_cache_from_json",
    "epoch_cache_to_json",
]

LONG_MAX = (1 << 63) - 1
"""Java's ``Long.MAX_VALUE``: the ``endOffset`` of an epoch still open."""


@dataclasses.dataclass(frozen=True, slots=True)
class BrokerHeartbeatRequestHeader(CommandHeader):
    """904, broker -> every controller (and name server) every ``brokerHeartbeatInterval``."""

    cluster_name: str
    broker_addr: str
    broker_name: str
    broker_id: int | None = None
    epoch: int | None = None
    max_offset: int | None = None
    confirm_offset: int | None = None
    heartbeat_timeout_mills: int | None = None
    election_priority: int | None = None
    #: extension: False when the broker may acknowledge a write without every SyncStateSet member; the controller
    #: then waits ``heartbeatTimeoutMills`` before replacing it even when its connection closes (the broker fences
    #: itself within that time when it cannot renew)
    all_ack_in_sync_state_set: bool | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class BrokerHeartbeatResponseHeader(CommandHeader):
    """Extension: the group's state as the controller leader knows it (absent from a follower's answer)."""

    master_broker_id: int | None = None
    master_address: str | None = None
    master_epoch: int | None = None
    sync_state_set_epoch: int | None = None
    master_ha_address: str | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class AlterSyncStateSetRequestHeader(CommandHeader):
    broker_name: str
    master_broker_id: int
    master_epoch: int
    invoke_time: int = 0


@dataclasses.dataclass(frozen=True, slots=True)
class AlterSyncStateSetResponseHeader(CommandHeader):
    new_sync_state_set_epoch: int = 0


@dataclasses.dataclass(frozen=True, slots=True)
class ElectMasterRequestHeader(CommandHeader):
    cluster_name: str = ""
    broker_name: str = ""
    #: -1: the controller chooses; with ``designate_elect`` the broker to make master (a planned switchover)
    broker_id: int = -1
    designate_elect: bool = False
    invoke_time: int = 0


@dataclasses.dataclass(frozen=True, slots=True)
class ElectMasterResponseHeader(CommandHeader):
    master_broker_id: int | None = None
    master_address: str | None = None
    master_epoch: int | None = None
    sync_state_set_epoch: int | None = None
    #: extension: the master's HA address
    master_ha_address: str | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class RegisterBrokerToControllerRequestHeader(CommandHeader):
    cluster_name: str
    broker_name: str
    broker_id: int
    broker_address: str
    invoke_time: int = 0
    #: extension: the broker's HA address (a slave of this broker connects there)
    ha_server_addr: str | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class RegisterBrokerToControllerResponseHeader(CommandHeader):
    cluster_name: str | None = None
    broker_name: str | None = None
    master_broker_id: int | None = None
    master_address: str | None = None
    master_epoch: int | None = None
    sync_state_set_epoch: int | None = None
    #: extension: the master's HA address
    master_ha_address: str | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class GetReplicaInfoRequestHeader(CommandHeader):
    broker_name: str


@dataclasses.dataclass(frozen=True, slots=True)
class GetReplicaInfoResponseHeader(CommandHeader):
    master_broker_id: int | None = None
    master_address: str | None = None
    master_epoch: int | None = None
    #: extension: the master's HA address
    master_ha_address: str | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class GetMetaDataResponseHeader(CommandHeader):
    group: str | None = None
    controller_leader_id: str | None = None
    controller_leader_address: str | None = None
    is_leader: bool = False
    peers: str | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class NotifyBrokerRoleChangedRequestHeader(CommandHeader):
    """1008, controller -> each broker of a group whose master or SyncStateSet changed; body: ``SyncStateSet``."""

    master_address: str | None = None
    master_epoch: int | None = None
    sync_state_set_epoch: int | None = None
    master_broker_id: int | None = None
    #: extension: the master's HA address
    master_ha_address: str | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class CleanControllerBrokerDataRequestHeader(CommandHeader):
    broker_name: str
    cluster_name: str | None = None
    #: ``;``-separated broker ids; empty: the whole group
    broker_controller_ids_to_clean: str | None = None
    is_clean_living_broker: bool = False
    invoke_time: int = 0


@dataclasses.dataclass(frozen=True, slots=True)
class GetNextBrokerIdRequestHeader(CommandHeader):
    cluster_name: str
    broker_name: str


@dataclasses.dataclass(frozen=True, slots=True)
class GetNextBrokerIdResponseHeader(CommandHeader):
    cluster_name: str | None = None
    broker_name: str | None = None
    next_broker_id: int | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class ApplyBrokerIdRequestHeader(CommandHeader):
    cluster_name: str
    broker_name: str
    applied_broker_id: int
    #: ``brokerAddress;random`` in RocketMQ: who applied for the id (the same code may apply again)
    register_check_code: str


# ================================================================================================ bodies


@dataclasses.dataclass(frozen=True, slots=True)
class SyncStateSet:
    members: frozenset[int]
    epoch: int

    def to_json_dict(self) -> dict[str, Any]:
        return {"syncStateSet": sorted(self.members), "syncStateSetEpoch": self.epoch}

    @classmethod
    def from_json_dict(cls, data: object) -> SyncStateSet:
        if not isinstance(data, dict):
            raise InvalidHeaderError("SyncStateSet body must be a JSON object")
        return cls(frozenset(_ids(data.get("syncStateSet") or [])), _int(data.get("syncStateSetEpoch", 0)))


@dataclasses.dataclass(frozen=True, slots=True)
class EpochEntry:
    """``<epoch, startOffset>`` of the epoch file; ``end_offset`` is where the next epoch starts (LONG_MAX: open)."""

    epoch: int
    start_offset: int
    end_offset: int = LONG_MAX

    def to_json_dict(self) -> dict[str, int]:
        return {"epoch": self.epoch, "startOffset": self.start_offset, "endOffset": self.end_offset}


def epoch_cache_to_json(cluster: str, broker_name: str, broker_id: int, entries: Iterable[EpochEntry],
                        max_offset: int) -> dict[str, Any]:
    return {"clusterName": cluster, "brokerName": broker_name, "brokerId": broker_id,
            "epochList": [e.to_json_dict() for e in entries], "maxOffset": max_offset}


def epoch_cache_from_json(data: object) -> tuple[list[EpochEntry], int]:
    """(entries, maxOffset) of an ``EpochEntryCache`` body."""
    if not isinstance(data, dict):
        raise InvalidHeaderError("EpochEntryCache body must be a JSON object")
    entries = []
    for item in data.get("epochList") or []:
        if not isinstance(item, dict):
            raise InvalidHeaderError("bad epoch entry")
        entries.append(EpochEntry(_int(item.get("epoch")), _int(item.get("startOffset")),
                                  _int(item.get("endOffset", LONG_MAX))))
    return entries, _int(data.get("maxOffset", 0))


def _int(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise InvalidHeaderError(f"expected an integer, got {value!r:.40}")
    try:
        return int(value)
    except ValueError:
        raise InvalidHeaderError(f"expected an integer, got {value!r:.40}") from None


def _ids(values: object) -> list[int]:
    if not isinstance(values, list):
        raise InvalidHeaderError("expected a list of broker ids")
    return [_int(v) for v in values]
