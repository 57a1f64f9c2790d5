"""Controller mode on the master's side of replication: who must hold a write before it is acknowledged, and the
epochs a slave is told at its handshake.

:class:`ControllerReplication` is given to :class:`pocketmq.ha.service.HAService`; the broker's replicas manager
changes it as the controller decides (role, epoch, SyncStateSet). The rules:

* a slave must open with the epoch handshake (:mod:`pocketmq.ha.wire`); it is refused while this broker is not the
  master (``accepting`` False);
* ``allAckInSyncStateSet=true``: a write is acknowledged once every member of the SyncStateSet other than the master
  holds it (the *required* set; at once when the master is alone in it); otherwise ``inSyncReplicas - 1`` slaves,
  any of them, are enough (``inSyncReplicas`` 1: no wait);
* fewer SyncStateSet members than ``minInSyncReplicas``, or a slave the write must reach not connected, refuses the
  write before it is stored (IN_SYNC_REPLICAS_NOT_ENOUGH, which producers retry on another broker);
* a member the master asks the controller to add counts as required *from the moment it asks*
  (:attr:`ControllerReplication.pending`), a member it asks to remove until the controller agreed: the set the master
  waits for is never smaller than the one the controller may elect from, so a new master always holds every write the
  old one acknowledged.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pocketmq.ha.epoch_file import EpochFileCache

__all__ = ["AckPolicy", "ControllerReplication"]


@dataclass(frozen=True, slots=True)
class AckPolicy:
    """RocketMQ 5's ``allAckInSyncStateSet``, ``inSyncReplicas`` and ``minInSyncReplicas``."""

    all_ack_in_sync_state_set: bool = True
    in_sync_replicas: int = 1
    min_in_sync_replicas: int = 1


@dataclass(slots=True)
class ControllerReplication:
    """The master's controller-mode state (see the module docstring)."""

    broker_id: int
    epochs: EpochFileCache
    policy: AckPolicy = field(default_factory=AckPolicy)
    #: True while this broker is the master of ``master_epoch``
    accepting: bool = False
    master_epoch: int = 0
    #: the SyncStateSet as the controller last confirmed it (this broker included)
    sync_state_set: frozenset[int] = frozenset()
    sync_state_set_epoch: int = 0
    #: members whose addition was asked for and not yet confirmed (already waited for)
    pending: frozenset[int] = frozenset()
    # ``required`` as last computed, and from which sets (it is read on every put)
    _required: frozenset[int] = field(default=frozenset(), repr=False, compare=False)
    _required_from: tuple[frozenset[int], frozenset[int], int] | None = field(default=None, repr=False,
                                                                               compare=False)

    @property
    def required(self) -> frozenset[int]:
        """The slaves every write must reach (allAckInSyncStateSet)."""
        made_from = self._required_from
        if made_from is None or made_from[0] is not self.sync_state_set or made_from[1] is not self.pending or \
                made_from[2] != self.broker_id:
            self._required = (self.sync_state_set | self.pending) - {self.broker_id}
            self._required_from = (self.sync_state_set, self.pending, self.broker_id)
        return self._required

    @property
    def slaves_needed(self) -> int:
        """How many slaves must hold a write without allAckInSyncStateSet."""
        return max(0, self.policy.in_sync_replicas - 1)

    def too_few_in_sync(self) -> bool:
        return len(self.sync_state_set) < self.policy.min_in_sync_replicas

    def handshake_entries(self) -> list[tuple[int, int]]:
        return [(e.epoch, e.start_offset) for e in self.epochs.entries]
