"""A small Raft (Ongaro's thesis ch. 3, with pre-vote, check-quorum and a leader lease) for the controller's state.

* :mod:`pocketmq.controller.raft.messages` — the messages and their msgpack wire form;
* :mod:`pocketmq.controller.raft.core` — one node as a pure state machine (:class:`RaftCore`), no I/O, no clock;
* :mod:`pocketmq.controller.raft.storage` — the durable term, vote, log and snapshot (blocking, fsync'd);
* :mod:`pocketmq.controller.raft.node` — the asyncio driver (:class:`RaftNode`): persistence in its own thread,
  one sender per peer, the state machine applied in log order.

Why our own rather than a library: ``docs/design/controller.md``.
"""

from pocketmq.controller.raft.core import NotLeaderError, RaftCore, Role, Snapshot
from pocketmq.controller.raft.node import ProposalDroppedError, RaftConfig, RaftNode, StateMachine

__all__ = ["NotLeaderError", "ProposalDroppedError", "RaftConfig", "RaftCore", "RaftNode", "Role", "Snapshot",
           "StateMachine"]
