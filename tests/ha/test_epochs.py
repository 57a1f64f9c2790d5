"""Controller mode's replication: the epoch file, the consistent point, the handshake bytes, and real stores in one
event loop — a diverged replica cut back to the last common epoch boundary, SyncStateSet waits, a step-down."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from pocketmq.ha import HAClient, HAService
from pocketmq.ha.epoch_file import (
    Epoch,
    EpochFileCache,
    EpochFileError,
    find_consistent_point,
    parse_epoch_file,
    render_epoch_file,
)
from pocketmq.ha.slave_epochs import SlaveEpochs
from pocketmq.ha.sync_state import AckPolicy, ControllerReplication
from pocketmq.ha.wire import (
    HandshakeError,
    decode_master_handshake,
    decode_slave_handshake,
    encode_master_handshake,
    encode_slave_handshake,
)
from pocketmq.store import BrokerRole, MessageStore, PutMessageStatus
from tests.ha.support import Cluster, append_messages, assert_commit_logs_identical, ha_config
from tests.helpers import eventually
from tests.store.support import msg

pytestmark = pytest.mark.timeout(120)


# ============================================================================================ pure parts


def test_epoch_file_round_trips_in_rocketmq_format() -> None:
    entries = [Epoch(7, 7000), Epoch(8, 8000)]
    data = render_epoch_file(entries)
    lines = data.decode().splitlines()
    assert lines[0] == "2" and lines[2:] == ["7-7000", "8-8000"]
    assert parse_epoch_file(data) == entries
    damaged = data.replace(b"8-8000", b"8-8001")
    with pytest.raises(EpochFileError):
        parse_epoch_file(damaged)
    with pytest.raises(EpochFileError):
        parse_epoch_file(b"2\n0\n8-1\n7-2\n")  # out of order


def test_epoch_file_cache_appends_truncates_and_falls_back_to_bak(tmp_path: Path) -> None:
    path = str(tmp_path / "epochFileCheckpoint")
    cache = EpochFileCache(path)
    assert cache.load() == []
    assert cache.append(Epoch(1, 0)) and cache.append(Epoch(2, 500)) and cache.append(Epoch(4, 900))
    assert not cache.append(Epoch(3, 1000))  # not newer
    assert cache.append(Epoch(5, 900))  # epoch 4 held no data: replaced
    assert EpochFileCache(path).load() == [Epoch(1, 0), Epoch(2, 500), Epoch(5, 900)]
    cache.truncate_suffix(600)
    assert EpochFileCache(path).load() == [Epoch(1, 0), Epoch(2, 500)]
    Path(path).write_bytes(b"garbage")
    assert EpochFileCache(path).load() == [Epoch(1, 0), Epoch(2, 500), Epoch(5, 900)]  # the .bak
    assert cache.entry_of(499) == Epoch(1, 0) and cache.entry_of(500) == Epoch(2, 500)


@pytest.mark.parametrize(("local", "local_max", "master", "master_max", "point"), [
    ([(1, 0), (2, 100)], 300, [(1, 0), (2, 100)], 250, 250),            # same epochs: the shorter end
    ([(1, 0), (2, 100), (3, 200)], 300, [(1, 0), (2, 100), (4, 150)], 400, 150),  # diverged in epoch 2's tail
    ([(1, 0), (3, 100)], 150, [(1, 0), (2, 100), (4, 120)], 200, 100),  # our epoch 3 never existed there
    ([(2, 50)], 80, [(1, 0), (3, 60)], 90, -1),                         # nothing in common
])
def test_consistent_point(local: list[tuple[int, int]], local_max: int, master: list[tuple[int, int]],
                          master_max: int, point: int) -> None:
    assert find_consistent_point([Epoch(*e) for e in local], local_max, [Epoch(*e) for e in master],
                                 master_max) == point


def test_handshake_bytes() -> None:
    assert decode_slave_handshake(encode_slave_handshake(3)) == 3
    reply = encode_master_handshake(5, 1234, [(1, 0), (5, 1000)])
    assert decode_master_handshake(reply[:-1]) is None
    assert decode_master_handshake(reply + b"tail") == (5, 1234, [(1, 0), (5, 1000)], len(reply))
    with pytest.raises(HandshakeError):
        decode_slave_handshake(b"\x00" * 8 + b"\x00" * 8)  # what a 4.x slave's two reports look like
    with pytest.raises(HandshakeError):
        decode_master_handshake(b"X" * 24)


# ======================================================================================== real stores


def controller(broker_id: int, path: Path, **policy: object) -> ControllerReplication:
    cache = EpochFileCache(str(path / f"epochs-{broker_id}"))
    return ControllerReplication(broker_id, cache, AckPolicy(**policy))  # type: ignore[arg-type]


async def become_master(store: MessageStore, repl: ControllerReplication, epoch: int, members: set[int]) -> None:
    max_offset = await store.cut_partial_tail()
    await asyncio.to_thread(repl.epochs.append, Epoch(epoch, max_offset))
    repl.master_epoch = epoch
    repl.sync_state_set = frozenset(members)
    repl.accepting = True
    store.set_role(BrokerRole.SYNC_MASTER)


async def test_a_diverged_replica_is_cut_to_the_last_common_epoch_boundary(tmp_path: Path) -> None:
    """A is master at epoch 1 and B copies from it; B stops copying, A writes more that only A has; B becomes master
    at epoch 2 and writes; A follows B: its epoch-1 tail is cut at B's epoch-2 start (and the broker told, so that it
may serve reads again), then it copies B."""
    cluster = Cluster(tmp_path)
    try:
        a = await cluster.start_store("a", broker_role=BrokerRole.SLAVE)
        b = await cluster.start_store("b", broker_role=BrokerRole.SLAVE)
        repl_a, repl_b = controller(1, tmp_path), controller(2, tmp_path)
        service_a = HAService(a, ha_config(), controller=repl_a)
        service_b = HAService(b, ha_config(), controller=repl_b)
        for service in (service_a, service_b):
            await service.start()
            cluster.services.append(service)
        await become_master(a, repl_a, 1, {1, 2})
        b_follows_a = HAClient(b, ha_config(), master_address=f"127.0.0.1:{service_a.port}",
                               epochs=SlaveEpochs(2, repl_b.epochs))
        b_follows_a.start()
        shared = append_messages(a, 40, seed=1)
        await eventually(lambda: b.max_phy_offset == shared, message="b copied a")
        await eventually(lambda: repl_b.epochs.entries == [Epoch(1, 0)], message="b recorded epoch 1")
        await b_follows_a.stop()
        append_messages(a, 25, seed=2)  # a's tail nobody else has
        lost_tail = a.max_phy_offset - shared
        assert lost_tail > 0
        service_a.step_down()
        a.set_role(BrokerRole.SLAVE)
        await become_master(b, repl_b, 2, {2})
        assert repl_b.epochs.entries == [Epoch(1, 0), Epoch(2, shared)]
        append_messages(b, 10, seed=3)
        a_epochs = SlaveEpochs(1, repl_a.epochs)
        adopted: list[tuple[int, int]] = []  # (master epoch, a's log end) when a's log first agrees with b's
        a_epochs.on_adopted = lambda epoch: adopted.append((epoch, a.max_phy_offset))
        a_follows_b = HAClient(a, ha_config(), master_address=f"127.0.0.1:{service_b.port}", epochs=a_epochs)
        a_follows_b.start()
        cluster.clients.append(a_follows_b)
        await eventually(lambda: a.max_phy_offset == b.max_phy_offset, message="a follows b")
        assert adopted[0] == (2, shared)  # told after the cut, before anything of b's was copied
        await assert_commit_logs_identical(b, a)
        await eventually(lambda: repl_a.epochs.entries == [Epoch(1, 0), Epoch(2, shared)], message="a's epochs")
    finally:
        await cluster.close()


async def test_a_4x_slave_is_refused_by_a_controller_mode_master(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path)
    try:
        master = await cluster.start_store("m")
        repl = controller(1, tmp_path)
        service = HAService(master, ha_config(), controller=repl)
        await service.start()
        cluster.services.append(service)
        await become_master(master, repl, 1, {1})
        append_messages(master, 5)
        slave = await cluster.start_slave()
        old = cluster.start_client(slave, service, ha_send_heartbeat_interval=0.05)
        await eventually(lambda: old.connect_count >= 2, message="the 4.x slave keeps being closed")
        assert slave.max_phy_offset == 0
    finally:
        await cluster.close()


async def test_all_ack_waits_for_every_member_and_step_down_answers_the_waiters(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path)
    try:
        master = await cluster.start_store("m", broker_role=BrokerRole.SLAVE)
        repl = controller(1, tmp_path, min_in_sync_replicas=2)
        service = HAService(master, ha_config(slave_timeout=5.0), controller=repl)
        await service.start()
        cluster.services.append(service)
        master.set_replica_waiter(service)
        await become_master(master, repl, 1, {1})
        # alone in the SyncStateSet with minInSyncReplicas=2: refused before anything is stored
        before = master.max_phy_offset
        refused = await master.put_message(msg(body=b"x"))
        assert refused.status is PutMessageStatus.IN_SYNC_REPLICAS_NOT_ENOUGH and master.max_phy_offset == before
        repl.sync_state_set = frozenset({1, 2})
        service.sync_state_changed()
        # member 2 not connected: refused before anything is stored (retried elsewhere)
        before = master.max_phy_offset
        not_there = await master.put_message(msg(body=b"y"))
        assert not_there.status is PutMessageStatus.IN_SYNC_REPLICAS_NOT_ENOUGH and master.max_phy_offset == before
        slave = await cluster.start_slave()
        client = HAClient(slave, ha_config(), master_address=f"127.0.0.1:{service.port}",
                          epochs=SlaveEpochs(2, EpochFileCache(None)))
        client.start()
        cluster.clients.append(client)
        await eventually(lambda: service.connection_count == 1, message="slave 2 attached")
        ok = await master.put_message(msg(body=b"z"))
        assert ok.status is PutMessageStatus.PUT_OK and slave.max_phy_offset >= master.max_phy_offset
        # a pending addition (3) is waited for at once; step-down answers the waiting put
        repl.pending = frozenset({3})
        service.sync_state_changed()
        waiting = asyncio.ensure_future(master.put_message(msg(body=b"w")))
        assert (await waiting).status is PutMessageStatus.IN_SYNC_REPLICAS_NOT_ENOUGH
        repl.pending = frozenset()
        client.pause()
        service.sync_state_changed()
        blocked = asyncio.ensure_future(master.put_message(msg(body=b"v")))
        await asyncio.sleep(0.2)
        assert not blocked.done()
        service.step_down()
        assert (await blocked).status is PutMessageStatus.SERVICE_NOT_AVAILABLE
    finally:
        await cluster.close()
