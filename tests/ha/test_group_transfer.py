"""GroupTransferService alone: release in offset order, deadlines, the bound, cancelled callers, and
memory kept proportional to live waiters. Plus HAConfig parsing and validation."""

from __future__ import annotations

import asyncio

import pytest

from pocketmq.ha import GroupTransferService, HAConfig
from pocketmq.ha.config import parse_address
from pocketmq.store import PutMessageStatus

OK = PutMessageStatus.PUT_OK
TIMEOUT = PutMessageStatus.FLUSH_SLAVE_TIMEOUT


async def test_acknowledgement_releases_waiters_at_or_below_it() -> None:
    service = GroupTransferService(timeout=10, max_waiters=100)
    waits = {end: service.wait_for(end, acked=0) for end in (300, 100, 200, 400)}
    assert service.pending == 4
    assert service.notify_transfer(250) == 2
    await asyncio.sleep(0)
    assert [end for end, w in sorted(waits.items()) if w.done()] == [100, 200]
    assert waits[100].result() is OK
    assert service.notify_transfer(400) == 2
    assert all(w.result() is OK for w in waits.values())
    assert service.pending == 0
    service.release_all()


async def test_already_acknowledged_is_immediate() -> None:
    service = GroupTransferService(timeout=10, max_waiters=1)
    future = service.wait_for(50, acked=50)
    assert future.done() and future.result() is OK and service.pending == 0


async def test_deadline_gives_flush_slave_timeout() -> None:
    service = GroupTransferService(timeout=0.05, max_waiters=10)
    first = service.wait_for(100, acked=0)
    second = service.wait_for(200, acked=0)
    assert await first is TIMEOUT and await second is TIMEOUT
    assert service.timeouts == 2 and service.pending == 0
    assert not service._heap and not service._deadlines
    assert service.notify_transfer(1000) == 0


async def test_bound_on_waiters() -> None:
    service = GroupTransferService(timeout=10, max_waiters=2)
    service.wait_for(1, acked=0)
    service.wait_for(2, acked=0)
    assert not service.has_room()
    refused = service.wait_for(3, acked=0)
    assert refused.result() is TIMEOUT and service.refused == 1
    service.notify_transfer(1)
    assert service.has_room()
    service.release_all()


async def test_cancelled_caller_is_cleaned_up() -> None:
    service = GroupTransferService(timeout=0.05, max_waiters=10)
    future = service.wait_for(100, acked=0)
    future.cancel()
    other = service.wait_for(200, acked=0)
    assert await other is TIMEOUT
    assert service.pending == 0 and service.timeouts == 1


async def test_settled_entries_do_not_accumulate() -> None:
    # Waiters released out of insertion order leave settled entries in the deadline FIFO; they are
    # compacted away so memory follows the live count.
    service = GroupTransferService(timeout=60, max_waiters=100_000)
    keep = service.wait_for(10**9, acked=0)  # the oldest waiter stays, pinning the FIFO head
    for i in range(5000):
        service.wait_for(10 + i, acked=0)
        service.notify_transfer(10 + i)
    assert service.pending == 1
    assert len(service._deadlines) <= 2 * service.pending + 1024 + 1
    assert len(service._heap) <= 2 * service.pending + 1024 + 1
    assert not keep.done()
    service.release_all()
    assert keep.result() is TIMEOUT


async def test_release_all_completes_everything() -> None:
    service = GroupTransferService(timeout=60, max_waiters=10)
    waits = [service.wait_for(end, acked=0) for end in (5, 6)]
    service.release_all()
    assert [w.result() for w in waits] == [TIMEOUT, TIMEOUT]
    assert service.pending == 0


# ---------------------------------------------------------------------------------------- config

def test_config_defaults_follow_rocketmq() -> None:
    config = HAConfig()
    assert config.ha_transfer_batch_size == 32768
    assert config.ha_send_heartbeat_interval == 5.0
    assert config.ha_housekeeping_interval == 20.0
    assert config.ha_slave_fallbehind_max == 256 * 1024 * 1024
    assert config.slave_timeout == 3.0
    assert config.slave_read_buffer_size == 4 * 1024 * 1024


def test_config_from_properties_converts_milliseconds() -> None:
    config = HAConfig.from_properties({
        "haListenPort": "10922", "haSendHeartbeatInterval": "1000", "slaveTimeout": "1500",
        "haMasterAddress": "10.0.0.1:10912", "brokerName": "ignored",
    }, max_waiters=7)
    assert (config.ha_listen_port, config.ha_send_heartbeat_interval, config.slave_timeout) == (10922, 1.0, 1.5)
    assert config.ha_master_address == "10.0.0.1:10912" and config.max_waiters == 7
    with pytest.raises(ValueError, match="haTransferBatchSize"):
        HAConfig.from_properties({"haTransferBatchSize": "lots"})


@pytest.mark.parametrize("changes", [
    {"ha_listen_port": 70000}, {"ha_transfer_batch_size": 0}, {"slave_timeout": 0},
    {"ha_transfer_batch_size": 4 * 1024 * 1024}, {"max_waiters": 0}, {"ha_master_address": "nohost"},
    {"reconnect_backoff_initial": 10.0},
])
def test_config_validation(changes: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        HAConfig(**changes)  # type: ignore[arg-type]


def test_parse_address() -> None:
    assert parse_address("127.0.0.1:10912") == ("127.0.0.1", 10912)
    assert parse_address("[::1]:10912") == ("::1", 10912)
    for bad in ("", "host", "host:", ":10", "host:0", "host:x"):
        with pytest.raises(ValueError):
            parse_address(bad)
