"""SYNC_MASTER waits through HAService.wait_for_replica with real slaves: PUT_OK once acknowledged,
SLAVE_NOT_AVAILABLE with no slave or a slave too far behind, FLUSH_SLAVE_TIMEOUT with a paused slave and
recovery when it resumes, the bound on waiters; and the same waits through the store's one put path
(``MessageStore.put``) with the service injected as its replica waiter, next to a SYNC_FLUSH."""

from __future__ import annotations

import asyncio

from pocketmq.common.batch import BatchEntry, encode_batch_body
from pocketmq.store import FlushDiskType, MessageExtBatch, MessageStore, PutMessageResult, PutMessageStatus
from tests.ha.support import Cluster, append_messages
from tests.helpers import eventually
from tests.store.support import msg


def put(store: MessageStore, size: int = 100) -> int:
    """Append one message; its end offset."""
    result = store.append(msg(body=b"x" * size))
    assert result.append_result is not None
    return result.append_result.end_offset


async def test_no_slave_is_slave_not_available_at_once(cluster: Cluster) -> None:
    master, service = await cluster.start_master()
    future = service.wait_for_replica(put(master))
    assert future.done() and future.result() is PutMessageStatus.SLAVE_NOT_AVAILABLE
    assert not service.is_slave_ok(master.max_phy_offset)


async def test_acknowledged_put_is_put_ok(cluster: Cluster) -> None:
    master, service = await cluster.start_master()
    slave = await cluster.start_slave()
    cluster.start_client(slave, service)
    await eventually(lambda: service.connection_count == 1, message="slave attached")
    ends = [put(master) for _ in range(50)]
    statuses = await asyncio.gather(*(service.wait_for_replica(end) for end in ends))
    assert set(statuses) == {PutMessageStatus.PUT_OK}
    assert slave.max_phy_offset >= ends[-1]
    assert service.pending_waiters == 0
    # already acknowledged: completed at once
    done = service.wait_for_replica(ends[0])
    assert done.done() and done.result() is PutMessageStatus.PUT_OK


async def test_paused_slave_times_out_then_recovers(cluster: Cluster) -> None:
    master, service = await cluster.start_master(ha={"slave_timeout": 0.3})
    slave = await cluster.start_slave()
    client = cluster.start_client(slave, service)
    await eventually(lambda: service.connection_count == 1, message="slave attached")
    client.pause()
    waits = [service.wait_for_replica(put(master)) for _ in range(3)]
    assert not any(w.done() for w in waits)
    assert await asyncio.gather(*waits) == [PutMessageStatus.FLUSH_SLAVE_TIMEOUT] * 3
    assert service.runtime_info()["haReplicaTimeouts"] == "3"
    assert service.connection_count == 1  # the paused slave still reports, so it stays attached

    client.resume()
    assert await service.wait_for_replica(put(master)) is PutMessageStatus.PUT_OK
    await eventually(lambda: slave.max_phy_offset == master.max_phy_offset)


async def test_slave_too_far_behind_is_slave_not_available(cluster: Cluster) -> None:
    master, service = await cluster.start_master(ha={"ha_slave_fallbehind_max": 20_000})
    slave = await cluster.start_slave()
    client = cluster.start_client(slave, service)
    await eventually(lambda: service.connection_count == 1, message="slave attached")
    client.pause()
    append_messages(master, 30)  # ~ 30 KB the slave does not take
    future = service.wait_for_replica(put(master))
    assert future.done() and future.result() is PutMessageStatus.SLAVE_NOT_AVAILABLE
    client.resume()
    await eventually(lambda: service.push_to_slave_max_offset == master.max_phy_offset)
    assert await service.wait_for_replica(put(master)) is PutMessageStatus.PUT_OK


async def test_one_live_slave_is_enough(cluster: Cluster) -> None:
    master, service = await cluster.start_master(ha={"slave_timeout": 5.0})
    fast, slow = await cluster.start_slave("fast"), await cluster.start_slave("slow")
    cluster.start_client(fast, service)
    slow_client = cluster.start_client(slow, service)
    await eventually(lambda: service.connection_count == 2, message="slaves attached")
    slow_client.pause()
    assert await service.wait_for_replica(put(master)) is PutMessageStatus.PUT_OK
    slow_client.resume()


async def test_departed_slave_no_longer_counts(cluster: Cluster) -> None:
    master, service = await cluster.start_master()
    slave = await cluster.start_slave()
    client = cluster.start_client(slave, service)
    await eventually(lambda: service.connection_count == 1, message="slave attached")
    assert await service.wait_for_replica(put(master)) is PutMessageStatus.PUT_OK
    await client.stop()
    await eventually(lambda: service.connection_count == 0, message="slave gone")
    assert service.push_to_slave_max_offset == -1
    assert service.wait_for_replica(put(master)).result() is PutMessageStatus.SLAVE_NOT_AVAILABLE


async def test_waiter_bound(cluster: Cluster) -> None:
    master, service = await cluster.start_master(ha={"max_waiters": 2, "slave_timeout": 5.0})
    slave = await cluster.start_slave()
    client = cluster.start_client(slave, service)
    await eventually(lambda: service.connection_count == 1, message="slave attached")
    client.pause()
    first, second = service.wait_for_replica(put(master)), service.wait_for_replica(put(master))
    assert not service.has_room()
    third = service.wait_for_replica(put(master))
    assert third.done() and third.result() is PutMessageStatus.FLUSH_SLAVE_TIMEOUT
    assert service.runtime_info()["haReplicaWaitsRefused"] == "1"
    client.resume()
    assert list(await asyncio.gather(first, second)) == [PutMessageStatus.PUT_OK] * 2
    assert service.has_room()


async def test_stop_completes_waiters(cluster: Cluster) -> None:
    master, service = await cluster.start_master(ha={"slave_timeout": 30.0})
    slave = await cluster.start_slave()
    client = cluster.start_client(slave, service)
    await eventually(lambda: service.connection_count == 1, message="slave attached")
    client.pause()
    waiter = service.wait_for_replica(put(master))
    await service.stop()
    assert waiter.result() is PutMessageStatus.FLUSH_SLAVE_TIMEOUT
    assert service.wait_for_replica(put(master)).result() is PutMessageStatus.SLAVE_NOT_AVAILABLE


# -- the store's one put path with HAService injected as its replica waiter ------------------------------


async def test_put_waits_for_the_replica_through_the_store(cluster: Cluster) -> None:
    master, service = await cluster.start_master(ha={"slave_timeout": 5.0})
    master.set_replica_waiter(service)
    await master.prepare_queue("T", 0)
    alone = master.put(msg(body=b"no slave"))  # settled at once: answered with no task or future
    assert isinstance(alone, PutMessageResult) and alone.status is PutMessageStatus.SLAVE_NOT_AVAILABLE
    slave = await cluster.start_slave()
    client = cluster.start_client(slave, service)
    await eventually(lambda: service.connection_count == 1, message="slave attached")
    client.pause()
    waiting = asyncio.ensure_future(master.put_message(msg(body=b"replicate me")))
    await eventually(lambda: service.pending_waiters == 1, message="put waits for the slave")
    assert not waiting.done() and master.get_max_offset_in_queue("T", 0) == 2  # stored, not yet answered
    end = master.max_phy_offset
    client.resume()
    result = await waiting
    assert result.status is PutMessageStatus.PUT_OK and result.append_result is not None
    assert result.append_result.end_offset == end and service.push_to_slave_max_offset >= end
    batch = await master.put_messages(MessageExtBatch(topic="B", body=encode_batch_body([BatchEntry(0, b"b", "")] * 3)))
    assert batch.status is PutMessageStatus.PUT_OK and service.push_to_slave_max_offset >= master.max_phy_offset


async def test_put_replica_timeout_bound_and_wait_false(cluster: Cluster) -> None:
    master, service = await cluster.start_master(ha={"slave_timeout": 0.3, "max_waiters": 1})
    master.set_replica_waiter(service)
    slave = await cluster.start_slave()
    client = cluster.start_client(slave, service)
    await eventually(lambda: service.connection_count == 1, message="slave attached")
    client.pause()
    waiting = asyncio.ensure_future(master.put_message(msg()))
    await eventually(lambda: service.pending_waiters == 1, message="put waits for the slave")
    busy = master.put(msg())  # the bound is reached: refused, nothing stored
    assert isinstance(busy, PutMessageResult) and busy.status is PutMessageStatus.OS_PAGECACHE_BUSY
    assert busy.append_result is None and master.get_max_offset_in_queue("T", 0) == 1
    no_wait = master.put(msg(wait_store_msg_ok=False))  # the producer's WAIT=false: no replica wait
    assert isinstance(no_wait, PutMessageResult) and no_wait.status is PutMessageStatus.PUT_OK
    timed_out = await waiting
    assert timed_out.status is PutMessageStatus.FLUSH_SLAVE_TIMEOUT and timed_out.status.is_stored
    client.resume()


async def test_sync_flush_and_replica_are_awaited_together(cluster: Cluster) -> None:
    master, service = await cluster.start_master(ha={"slave_timeout": 0.3}, flush_disk_type=FlushDiskType.SYNC_FLUSH)
    master.set_replica_waiter(service)
    slave = await cluster.start_slave()
    client = cluster.start_client(slave, service)
    await eventually(lambda: service.connection_count == 1, message="slave attached")
    assert (await master.put_message(msg())).status is PutMessageStatus.PUT_OK
    assert master.flushed_phy_offset >= master.max_phy_offset  # on disk as well as on the slave
    client.pause()
    result = await master.put_message(msg())
    assert result.status is PutMessageStatus.FLUSH_SLAVE_TIMEOUT  # flushed, but the replica status wins
    assert master.flushed_phy_offset >= master.max_phy_offset
    client.resume()
