"""Controller configuration: RocketMQ 5's ``ControllerConfig`` keys where they exist, PocketMQ's for the Raft timing.

``controllerDLegerPeers`` keeps RocketMQ's form, ``n0-127.0.0.1:9878;n1-127.0.0.1:9868;n2-127.0.0.1:9858``, but each
address is the controller's remoting address itself (the name server's port when it is embedded): Raft messages
travel over the same port as the brokers' requests, as a private request code.

Defaults are tuned for failover in seconds, not RocketMQ's (5 s scans): see ``docs/controller.md``.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path

from pocketmq.common.config import config_key

__all__ = ["ControllerConfig", "controller_keys", "parse_peers"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ControllerConfig:
    #: The controllers' Raft group name (a directory under ``controllerStorePath``).
    controller_d_leger_group: str = "group1"
    #: Every controller of the group, this one included: ``id-host:port;...``, each address the controller's
    #: remoting address (the name server's own when it carries the controller).
    controller_d_leger_peers: str = "n0-127.0.0.1:9876"
    #: This controller's id in ``controllerDLegerPeers``.
    controller_d_leger_self_id: str = "n0"
    #: The Raft log, snapshot and vote, fsync'd (never delete it: it is the only copy of the groups' epochs).
    controller_store_path: str = field(default=str(Path.home() / "controller"), metadata={"default": "~/controller"})
    #: Elect a master outside the SyncStateSet when none in it is alive (may lose acknowledged messages).
    enable_elect_unclean_master: bool = False
    #: Tell the brokers of a group at once when its master changes (NOTIFY_BROKER_ROLE_CHANGED).
    notify_broker_role_changed: bool = True
    #: How often the leader looks for groups whose master is no longer alive (ms; also at once when a broker's
    #: connection drops).
    scan_inactive_master_interval: int = field(default=200, metadata={"unit": "ms"})
    #: Raft: a follower that hears no leader for this long (ms, randomized up to twice that) starts an election.
    controller_raft_election_timeout_mills: int = 1000
    #: Raft: the leader's heartbeat interval (ms).
    controller_raft_heartbeat_interval_mills: int = 150
    #: Raft: a snapshot of the state is taken (and the log compacted) every this many applied entries.
    controller_raft_snapshot_every_entries: int = field(default=1000, metadata={"unit": "count"})

    def __post_init__(self) -> None:
        peers = parse_peers(self.controller_d_leger_peers)
        if self.controller_d_leger_self_id not in peers:
            raise ValueError(f"controllerDLegerSelfId {self.controller_d_leger_self_id!r} is not in "
                             f"controllerDLegerPeers ({', '.join(peers)})")
        if self.scan_inactive_master_interval <= 0 or self.controller_raft_snapshot_every_entries <= 0:
            raise ValueError("scanInactiveMasterInterval and controllerRaftSnapshotEveryEntries must be positive")
        if self.controller_raft_election_timeout_mills <= 2 * self.controller_raft_heartbeat_interval_mills or \
                self.controller_raft_heartbeat_interval_mills <= 0:
            raise ValueError("controllerRaftElectionTimeoutMills must exceed twice "
                             "controllerRaftHeartbeatIntervalMills")

    @property
    def peers(self) -> dict[str, str]:
        """Controller id -> remoting address."""
        return parse_peers(self.controller_d_leger_peers)

    @property
    def self_address(self) -> str:
        return self.peers[self.controller_d_leger_self_id]

    @property
    def raft_directory(self) -> str:
        return os.path.join(self.controller_store_path, self.controller_d_leger_group, self.controller_d_leger_self_id)


def parse_peers(text: str) -> dict[str, str]:
    """``n0-host:port;n1-host:port`` -> {"n0": "host:port", ...}; ValueError for anything else."""
    peers: dict[str, str] = {}
    for item in (part.strip() for part in text.split(";")):
        if not item:
            continue
        node, sep, address = item.partition("-")
        host, colon, port = address.rpartition(":")
        if not sep or not node or not colon or not host or not port.isdigit():
            raise ValueError(f"bad controllerDLegerPeers entry {item!r}: expected id-host:port")
        if node in peers:
            raise ValueError(f"controller id {node!r} appears twice in controllerDLegerPeers")
        peers[node] = address
    if not peers:
        raise ValueError("controllerDLegerPeers names no controller")
    return peers


def controller_keys() -> frozenset[str]:
    """The ``.properties`` keys of :class:`ControllerConfig`."""
    return frozenset(config_key(f) for f in dataclasses.fields(ControllerConfig))

