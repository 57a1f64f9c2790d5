"""The election policy (RocketMQ 5's ``DefaultElectPolicy``): who becomes master of a group.

Candidates are the alive members of the SyncStateSet (and, only with ``enableElectUncleanMaster``, when none of them is
alive, every alive replica). The old master stays when it is still a candidate and no one else was asked for. A
designated broker (``electMaster -b``, a planned switchover) is chosen when it is a candidate, else nobody. Otherwise
the best candidate by (highest epoch, highest max offset, lowest ``brokerElectionPriority``, lowest id) as its last
heartbeat reported them.
"""

from __future__ import annotations

from pocketmq.controller.heartbeat import BrokerHeartbeatManager
from pocketmq.controller.replicas import BrokerReplicaInfo

__all__ = ["elect_master"]


def elect_master(group: BrokerReplicaInfo, heartbeats: BrokerHeartbeatManager, now: float, *,
                 prefer: int | None = None, unclean: bool = False) -> int | None:
    """The broker id to make master (possibly the current one), or None when nobody may be."""
    chosen = _pick(group, group.sync_state_set, heartbeats, now, prefer)
    if chosen is None and unclean:
        chosen = _pick(group, set(group.replicas), heartbeats, now, prefer)
    return chosen


def _pick(group: BrokerReplicaInfo, members: set[int], heartbeats: BrokerHeartbeatManager, now: float,
          prefer: int | None) -> int | None:
    alive = sorted(m for m in members if m in group.replicas and heartbeats.is_alive(group.broker_name, m, now))
    if not alive:
        return None
    old = group.master_id
    if old in alive and (prefer is None or prefer == old):
        return old
    if prefer is not None:
        return prefer if prefer in alive else None

    def rank(broker_id: int) -> tuple[int, int, int, int]:
        info = heartbeats.get(group.broker_name, broker_id)
        if info is None:
            return (0, 0, 0, broker_id)
        return (-info.epoch, -info.max_offset, info.election_priority, broker_id)

    return min(alive, key=rank)
