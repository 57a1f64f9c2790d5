"""Replication between two real stores in one event loop: a master (store + HAService on 127.0.0.1:0)
and slaves (store + HAClient), 64 KiB commit-log files so streams roll over several files."""

from __future__ import annotations

import pytest

from tests.ha.support import (
    CL_FILE,
    Cluster,
    append_messages,
    assert_commit_logs_identical,
    assert_queues_serve_the_same,
)
from tests.helpers import eventually
from tests.store.support import check_consistency


async def test_stream_of_appends_gives_byte_identical_files(cluster: Cluster) -> None:
    master, service = await cluster.start_master()
    slave = await cluster.start_slave()
    cluster.start_client(slave, service)
    await eventually(lambda: service.connection_count == 1, message="slave attached")
    for round_no in range(8):
        append_messages(master, 60, seed=round_no)
        await eventually(lambda: slave.max_phy_offset == master.max_phy_offset, message="slave caught up")
    assert master.max_phy_offset > 5 * CL_FILE
    compared = await assert_commit_logs_identical(master, slave)
    assert len(compared) >= 6 and slave.min_phy_offset == 0
    assert await assert_queues_serve_the_same(master, slave) == 480
    assert check_consistency(slave) == 480


async def test_slave_started_late_catches_up(cluster: Cluster) -> None:
    master, service = await cluster.start_master()
    append_messages(master, 40)  # still in the first file: a new slave starts at 0
    assert master.max_phy_offset < CL_FILE
    slave = await cluster.start_slave()
    cluster.start_client(slave, service)
    await eventually(lambda: slave.max_phy_offset == master.max_phy_offset, message="slave caught up")
    append_messages(master, 300, seed=1)
    await eventually(lambda: slave.max_phy_offset == master.max_phy_offset, message="slave caught up again")
    await assert_commit_logs_identical(master, slave)
    assert await assert_queues_serve_the_same(master, slave) == 340


async def test_disconnected_slave_catches_up_across_files(cluster: Cluster) -> None:
    master, service = await cluster.start_master()
    slave = await cluster.start_slave()
    client = cluster.start_client(slave, service)
    append_messages(master, 30)
    await eventually(lambda: slave.max_phy_offset == master.max_phy_offset)
    await client.stop()
    append_messages(master, 400, seed=2)  # several files while the slave is away
    client2 = cluster.start_client(slave, service)
    await eventually(lambda: slave.max_phy_offset == master.max_phy_offset, message="slave caught up")
    assert client2.connect_count == 1
    assert len(await assert_commit_logs_identical(master, slave)) >= 6
    assert await assert_queues_serve_the_same(master, slave) == 430


async def test_restarted_slave_resumes_from_its_own_max_offset(cluster: Cluster) -> None:
    master, service = await cluster.start_master()
    slave = await cluster.start_slave()
    client = cluster.start_client(slave, service)
    await eventually(lambda: service.connection_count == 1, message="slave attached")
    append_messages(master, 150)
    await eventually(lambda: slave.max_phy_offset == master.max_phy_offset)
    resumed_at = slave.max_phy_offset
    await client.stop()
    await cluster.stop_store(slave)
    append_messages(master, 150, seed=3)

    reopened = await cluster.start_slave()  # same directory
    assert reopened.max_phy_offset == resumed_at
    cluster.start_client(reopened, service)
    await eventually(lambda: reopened.max_phy_offset == master.max_phy_offset, message="slave caught up")
    [connection] = service.attached_slaves
    assert connection.read_service.request_offset == resumed_at
    await assert_commit_logs_identical(master, reopened)
    assert await assert_queues_serve_the_same(master, reopened) == 300
    check_consistency(reopened)


async def test_empty_slave_joins_at_the_masters_last_file(cluster: Cluster) -> None:
    master, service = await cluster.start_master()
    append_messages(master, 300)
    last_file = master.max_phy_offset - master.max_phy_offset % CL_FILE
    assert last_file >= 3 * CL_FILE
    slave = await cluster.start_slave()
    cluster.start_client(slave, service)
    await eventually(lambda: slave.max_phy_offset == master.max_phy_offset, message="slave joined")
    [connection] = service.attached_slaves
    assert connection.read_service.request_offset == 0
    assert slave.min_phy_offset == last_file
    append_messages(master, 100, seed=4)
    await eventually(lambda: slave.max_phy_offset == master.max_phy_offset, message="slave caught up")
    compared = await assert_commit_logs_identical(master, slave)
    assert int(compared[0]) == last_file
    assert await assert_queues_serve_the_same(master, slave) > 100


async def test_slave_behind_the_masters_oldest_file_is_resynced(cluster: Cluster) -> None:
    master, service = await cluster.start_master(file_reserved_time_hours=1e-9)
    slave = await cluster.start_slave()
    client = cluster.start_client(slave, service)
    append_messages(master, 30)
    await eventually(lambda: slave.max_phy_offset == master.max_phy_offset)
    behind = slave.max_phy_offset
    await client.stop()
    append_messages(master, 400, seed=5)
    await eventually(lambda: master.flushed_phy_offset == master.max_phy_offset, message="master flushed")
    assert master.retention is not None
    master.request_delete_expired_files()
    await master.retention.run_once()
    assert master.min_phy_offset > behind, "old files were not deleted"

    cluster.start_client(slave, service)
    await eventually(lambda: slave.max_phy_offset == master.max_phy_offset, message="slave resynced")
    [connection] = service.attached_slaves
    assert connection.read_service.request_offset == behind
    assert slave.min_phy_offset == master.min_phy_offset
    await assert_commit_logs_identical(master, slave)
    assert await assert_queues_serve_the_same(master, slave) > 0


async def test_update_master_address_connects_and_disconnects(cluster: Cluster) -> None:
    master, service = await cluster.start_master()
    slave = await cluster.start_slave()
    client = cluster.start_client(slave, None)
    assert client.master_address is None and not client.connected
    append_messages(master, 20)
    client.update_master_address(f"127.0.0.1:{service.port}")
    await eventually(lambda: slave.max_phy_offset == master.max_phy_offset, message="slave synced")
    assert client.connected
    client.update_master_address(None)
    await eventually(lambda: not client.connected and service.connection_count == 0, message="disconnected")
    with pytest.raises(ValueError):
        client.update_master_address("no-port")


async def test_address_provider_is_asked_before_connecting(cluster: Cluster) -> None:
    master, service = await cluster.start_master()
    slave = await cluster.start_slave()
    append_messages(master, 20)
    asked: list[int] = []

    def provider() -> str:
        asked.append(1)
        return f"127.0.0.1:{service.port}"

    from pocketmq.ha import HAClient
    from tests.ha.support import ha_config

    client = HAClient(slave, ha_config(), master_address=provider)
    client.start()
    cluster.clients.append(client)
    await eventually(lambda: slave.max_phy_offset == master.max_phy_offset, message="slave synced")
    assert asked and client.master_address == f"127.0.0.1:{service.port}"


async def test_runtime_info_reports_slaves_and_lag(cluster: Cluster) -> None:
    master, service = await cluster.start_master()
    slave = await cluster.start_slave()
    client = cluster.start_client(slave, service)
    append_messages(master, 50)
    await eventually(lambda: service.push_to_slave_max_offset == master.max_phy_offset, message="acked")
    info = service.runtime_info()
    assert info["haConnectionCount"] == "1"
    assert info["haMasterMaxOffset"] == str(master.max_phy_offset)
    assert info["slaveFallBehindMuch"] == "0"
    assert f"ackOffset={master.max_phy_offset}" in info["haSlave0"]
    assert "lagBytes=0," in info["haSlave0"] and "lagMs=0," in info["haSlave0"]
    assert info["haSlave0"].startswith("addr=127.0.0.1:")
    slave_info = client.runtime_info()
    assert slave_info["haMasterConnected"] == "true"
    assert slave_info["haSlaveMaxOffset"] == str(master.max_phy_offset)

    client.pause()
    append_messages(master, 5, seed=6)
    info = service.runtime_info()
    assert int(info["slaveFallBehindMuch"]) > 0
    assert "lagBytes=0," not in info["haSlave0"]
    client.resume()
    await eventually(lambda: slave.max_phy_offset == master.max_phy_offset)


async def test_idle_slave_keeps_reporting_and_stays_attached(cluster: Cluster) -> None:
    _master, service = await cluster.start_master(ha={"ha_housekeeping_interval": 0.5,
                                                      "ha_send_heartbeat_interval": 0.1})
    slave = await cluster.start_slave()
    client = cluster.start_client(slave, service, ha_housekeeping_interval=0.5, ha_send_heartbeat_interval=0.1)
    await eventually(lambda: service.connection_count == 1, message="slave attached")
    [connection] = service.attached_slaves
    first_read = connection.read_service.last_read_time
    await eventually(lambda: connection.read_service.last_read_time > first_read + 1.0,
                     message="heartbeat reports over a second of idleness")
    assert service.attached_slaves == [connection] and client.connect_count == 1


async def test_slave_that_joined_late_restarts_at_its_own_offset(cluster: Cluster) -> None:
    master, service = await cluster.start_master()
    append_messages(master, 300)
    slave = await cluster.start_slave()
    client = cluster.start_client(slave, service)
    await eventually(lambda: slave.max_phy_offset == master.max_phy_offset, message="slave joined")
    joined_at, resumed_at = slave.min_phy_offset, slave.max_phy_offset
    await client.stop()
    await cluster.stop_store(slave)
    append_messages(master, 100, seed=7)
    reopened = await cluster.start_slave()
    assert (reopened.min_phy_offset, reopened.max_phy_offset) == (joined_at, resumed_at)
    cluster.start_client(reopened, service)
    await eventually(lambda: reopened.max_phy_offset == master.max_phy_offset, message="slave caught up")
    await assert_commit_logs_identical(master, reopened)
    assert await assert_queues_serve_the_same(master, reopened) > 100
