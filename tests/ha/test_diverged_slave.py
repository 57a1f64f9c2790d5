"""A master that lost its unflushed commit-log tail (power loss with ASYNC_FLUSH) restarts with a log shorter
than its slave's. It must send from where its recovery ended, and the slave must cut its log and consume
queues back there, rather than keep records the master lost at queue offsets the master has since reused
with other messages (the "inconsistent offsets" the chaos harness found)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from pocketmq.chaos.control import drop_unflushed
from pocketmq.store import MessageStore
from pocketmq.store.checkpoint import StoreCheckpoint
from tests.ha.support import (
    CL_FILE,
    Cluster,
    append_messages,
    assert_commit_logs_identical,
    assert_queues_serve_the_same,
)
from tests.helpers import eventually
from tests.store.support import check_consistency


def _power_loss(root: str, flushed: int) -> dict[str, int]:
    """What a power loss leaves of a store whose disk held only the bytes before ``flushed``: the ``abort``
    file of a broker that did not shut down, and (chaos.control.drop_unflushed, told by the checkpoint) the
    commit log and consume queues cut back to ``flushed``. Blocking."""
    path = str(Path(root) / "checkpoint")
    checkpoint = StoreCheckpoint.load(path)
    checkpoint.physic_offset = checkpoint.logics_offset = flushed
    checkpoint.write(path)
    (Path(root) / "abort").touch()
    return drop_unflushed(root)


def _keys(store: MessageStore, topic: str, keys: list[str]) -> dict[str, list[bytes]]:
    return {key: sorted(store.query_message(topic, key, 64, 0, 2**62).records) for key in keys}


async def test_slave_ahead_of_a_master_that_lost_its_tail_is_cut_back(cluster: Cluster) -> None:
    master, service = await cluster.start_master()
    slave = await cluster.start_slave()
    client = cluster.start_client(slave, service)
    await eventually(lambda: service.connection_count == 1, message="slave attached")
    kept = append_messages(master, 100, seed=1)  # the master's disk will hold these
    append_messages(master, 100, seed=2)  # these the slave gets and the master loses
    await eventually(lambda: slave.max_phy_offset == master.max_phy_offset, message="replicated")
    slave_max = slave.max_phy_offset
    assert slave_max - kept > CL_FILE  # the cut drops whole files too
    await client.stop()
    await service.stop()
    cluster.services.remove(service)
    root = master.config.store_path_root_dir
    await cluster.stop_store(master)
    cut = await asyncio.to_thread(_power_loss, root, kept)
    assert cut["flushed_offset"] == kept and cut["commitlog_bytes_dropped"] > 0

    master, service = await cluster.start_master()
    assert master.recovery_summary["abnormal"] is True
    assert master.recovered_max == master.max_phy_offset == kept
    append_messages(master, 300, seed=3)  # the same queues: the lost queue offsets get other messages
    assert master.max_phy_offset > slave_max
    cluster.start_client(slave, service)
    await eventually(lambda: slave.max_phy_offset == master.max_phy_offset, message="slave caught up")
    [connection] = service.attached_slaves
    assert connection.read_service.request_offset == kept

    await assert_commit_logs_identical(master, slave)
    assert await assert_queues_serve_the_same(master, slave) == 400
    check_consistency(slave)
    keys = [f"k{i}" for i in range(0, 100, 7)]
    for topic in ("TopicA", "TopicB"):
        await eventually(lambda t=topic: _keys(slave, t, keys) == _keys(master, t, keys),  # type: ignore[misc]
                         message="the slave's index finds the master's records only")

    append_messages(master, 20, seed=4)  # replication goes on from there
    await eventually(lambda: slave.max_phy_offset == master.max_phy_offset, message="slave follows")
    await assert_commit_logs_identical(master, slave)


async def test_clean_restart_keeps_rejecting_a_slave_ahead(cluster: Cluster) -> None:
    master, service = await cluster.start_master()
    assert master.recovered_max is None
    slave = await cluster.start_slave()
    client = cluster.start_client(slave, service)
    await eventually(lambda: service.connection_count == 1, message="slave attached")
    append_messages(master, 30)
    await eventually(lambda: slave.max_phy_offset == master.max_phy_offset, message="replicated")
    await client.stop()
    await service.stop()
    cluster.services.remove(service)
    await cluster.stop_store(master)
    master, service = await cluster.start_master()
    assert master.recovered_max is None and master.recovery_summary["abnormal"] is False
    cluster.start_client(slave, service)
    append_messages(master, 30, seed=1)
    await eventually(lambda: slave.max_phy_offset == master.max_phy_offset, message="slave caught up")
    [connection] = service.attached_slaves
    assert connection.read_service.request_offset < master.max_phy_offset
    await assert_commit_logs_identical(master, slave)
