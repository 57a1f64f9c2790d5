"""Three asyncio Raft nodes with real files and an in-process transport: election, proposals answered with the state
machine's result, a leader stopped and a new one elected, a restarted node catching up (by snapshot too)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from pocketmq.controller.raft import NotLeaderError, ProposalDroppedError, RaftConfig, RaftNode
from tests.helpers import eventually

pytestmark = pytest.mark.timeout(60)


class Counter:
    """A state machine: the list of applied values; ``apply`` answers with its length."""

    def __init__(self) -> None:
        self.values: list[str] = []

    def apply(self, data: bytes) -> int:
        self.values.append(data.decode())
        return len(self.values)

    def snapshot(self) -> bytes:
        return json.dumps(self.values).encode()

    def restore(self, data: bytes) -> None:
        self.values = json.loads(data)


class Cluster:
    def __init__(self, base: Path, *, snapshot_every: int = 1000, election_timeout: float = 0.3) -> None:
        self.base = base
        self.election_timeout = election_timeout
        self.ids = ["a", "b", "c"]
        self.nodes: dict[str, RaftNode] = {}
        self.down: set[str] = set()
        self.snapshot_every = snapshot_every

    async def send(self, address: str, body: bytes) -> None:
        node = self.nodes.get(address)
        if node is None or address in self.down:
            raise ConnectionError(f"{address} is down")
        node.receive(body)

    async def start(self, node_id: str) -> RaftNode:
        config = RaftConfig(node_id, {i: i for i in self.ids}, str(self.base / node_id),
                            election_timeout=self.election_timeout,
                            heartbeat_interval=0.05, tick_interval=0.02, snapshot_every=self.snapshot_every)
        node = RaftNode(config, Counter(), self.send)
        await node.open()
        node.start()
        self.nodes[node_id] = node
        return node

    async def stop(self, node_id: str) -> None:
        node = self.nodes.pop(node_id)
        await node.stop()

    async def start_all(self) -> RaftNode:
        """Every node started; the leader they elect."""
        for node_id in self.ids:
            await self.start(node_id)
        await eventually(lambda: self.leader() is not None, timeout=10)
        leader = self.leader()
        assert leader is not None
        return leader

    def leader(self) -> RaftNode | None:
        leaders = [n for n in self.nodes.values() if n.is_leader and n.can_serve()]
        return leaders[0] if len(leaders) == 1 else None

    async def close(self) -> None:
        for node_id in list(self.nodes):
            await self.stop(node_id)


async def test_elect_propose_fail_over_and_catch_up(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, snapshot_every=8)
    try:
        leader = await cluster.start_all()
        results = [await leader.propose(f"v{i}".encode(), timeout=5) for i in range(12)]
        assert results == list(range(1, 13))
        follower = next(n for n in cluster.nodes.values() if n is not leader)
        with pytest.raises(NotLeaderError):
            await follower.propose(b"nope", timeout=5)
        old = leader.config.node_id
        await cluster.stop(old)
        await eventually(lambda: cluster.leader() is not None, timeout=10)
        new = cluster.leader()
        assert new is not None and new.config.node_id != old
        assert await new.propose(b"after", timeout=5) == 13
        for i in range(10):
            await new.propose(f"w{i}".encode(), timeout=5)
        restarted = await cluster.start(old)
        expected = [f"v{i}" for i in range(12)] + ["after"] + [f"w{i}" for i in range(10)]
        await eventually(lambda: restarted.state_machine.values == expected, timeout=10)  # type: ignore[attr-defined]
        assert restarted.core is not None and restarted.core.snapshot.index > 0
    finally:
        await cluster.close()


async def test_a_minority_cannot_commit(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path)
    try:
        leader = await cluster.start_all()
        others = [i for i in cluster.ids if i != leader.config.node_id]
        cluster.down.update(others)
        with pytest.raises((TimeoutError, ProposalDroppedError, NotLeaderError)):
            await leader.propose(b"alone", timeout=1.0)
        await eventually(lambda: not leader.can_serve(), timeout=5)
        cluster.down.clear()
        await eventually(lambda: cluster.leader() is not None, timeout=10)
        final = cluster.leader()
        assert final is not None
        await final.propose(b"together", timeout=5)
        for node in cluster.nodes.values():
            await eventually(lambda node=node: "together" in node.state_machine.values,  # type: ignore[misc]
                             timeout=10)
    finally:
        await cluster.close()


async def test_a_deposed_leader_answers_its_pending_proposals_at_once(tmp_path: Path) -> None:
    """A leader cut off from the others cannot commit; when a new leader's term reaches it, what it had pending is
    answered as dropped there and then, not left to the caller's (long) timeout."""
    cluster = Cluster(tmp_path)
    try:
        leader = await cluster.start_all()
        cluster.down.update(i for i in cluster.ids if i != leader.config.node_id)  # it hears them, they do not hear it
        with pytest.raises(ProposalDroppedError, match="leadership was lost"):
            await leader.propose(b"stranded", timeout=45)
        assert not leader.is_leader
    finally:
        await cluster.close()


async def test_proposals_keep_their_order_under_concurrency(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, election_timeout=2.0)  # one leader throughout, even on a loaded machine
    try:
        leader = await cluster.start_all()
        answers = await asyncio.gather(*(leader.propose(f"c{i}".encode(), timeout=10) for i in range(50)))
        assert sorted(answers) == list(range(1, 51))
    finally:
        await cluster.close()
