"""A full disk, for real: a broker on a 48 MiB tmpfs the test mounts, filled through sends; a disk above
diskSpaceWarningLevelRatio (set low as a broker property); a slave whose disk fills while it replicates.

Sends are refused with SERVICE_NOT_AVAILABLE (14) and a remark naming the disk, pulls keep working, nothing
acknowledged is lost or torn, GET_BROKER_RUNTIME_INFO says ``diskFull``, and once the test frees space (it
deletes a filler file it placed) the retention tick finds it and sends succeed again. Needs root (mount);
skipped with the reason otherwise. The mount and everything on it go in teardown.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pocketmq.broker.config import BrokerRole
from pocketmq.broker.controller import BrokerController
from pocketmq.ha import client as ha_client_module
from pocketmq.remoting.client import RemotingClient
from pocketmq.remoting.codes import RequestCode, ResponseCode
from pocketmq.remoting.command import RemotingCommand
from pocketmq.store import mapped_file as mapped_file_module
from pocketmq.store.retention import disk_state
from tests.broker.test_broker import send
from tests.broker.test_consume import bodies, pull_request
from tests.cluster import start_broker, start_namesrv
from tests.helpers import eventually

DISK = "48m"
FILLER = 20 << 20
BODY = 8000


def run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A size-limited tmpfs mounted under ``tmp_path``, unmounted afterwards."""
    mount_point = tmp_path / "disk"
    mount_point.mkdir()
    try:
        done = run("mount", "-t", "tmpfs", "-o", f"size={DISK}", "tmpfs", str(mount_point))
    except OSError as exc:
        pytest.skip(f"cannot run mount: {exc}")
    if done.returncode != 0:
        pytest.skip(f"mounting a {DISK} tmpfs is not permitted here: {done.stderr.strip()}")
    try:
        yield mount_point
    finally:
        undone = run("umount", str(mount_point))
        assert undone.returncode == 0, undone.stderr
        mount_point.rmdir()


def fill(path: Path, size: int) -> None:
    with open(path, "wb") as f:
        f.write(bytes(size))


async def runtime_info(client: RemotingClient, addr: str) -> dict[str, str]:
    resp = await client.invoke(addr, RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO, {}))
    assert resp.code == ResponseCode.SUCCESS
    table: dict[str, str] = json.loads(bytes(resp.body or b"{}"))["table"]
    return table


async def test_a_full_disk_refuses_sends_keeps_pulls_and_loses_nothing(small_disk: Path, tmp_path: Path) -> None:
    filler = small_disk / "filler"
    fill(filler, FILLER)
    ns = await start_namesrv(tmp_path)
    broker = await start_broker(tmp_path, "broker-a", ns.addr, store_path_root_dir=str(small_disk / "store"),
                                mapped_file_size_commit_log=4 << 20, reserve_window_commit_log=1 << 20,
                                reserve_window_consume_queue=16 * 1024, clean_resource_interval_ms=200)
    client = RemotingClient()
    acked: list[tuple[int, bytes]] = []  # (queue offset, body) of every acknowledged send
    try:
        refused = None
        for i in range(10_000):
            body = i.to_bytes(4, "big") * (BODY // 4)
            resp = await send(client, broker.addr, "Full", body)
            if resp.code != ResponseCode.SUCCESS:
                refused = resp
                break
            assert resp.ext_fields is not None
            acked.append((int(resp.ext_fields["queueOffset"]), body))
        assert refused is not None and refused.code == ResponseCode.SERVICE_NOT_AVAILABLE, refused
        assert "disk is full" in (refused.remark or "") and str(small_disk) in (refused.remark or "")
        assert len(acked) > 100
        info = await runtime_info(client, broker.addr)
        assert info["diskFull"] == "true" and info["storeWritable"] == "false"
        assert "disk is full" in info["diskFullReason"]

        async def ratio_seen() -> bool:  # as of the retention tick after the disk filled
            return float((await runtime_info(client, broker.addr))["commitLogDiskRatio"]) > 0.9

        await eventually(ratio_seen, timeout=5, message="commitLogDiskRatio of the full disk")
        again = await send(client, broker.addr, "Full", b"still full?")
        assert again.code == ResponseCode.SERVICE_NOT_AVAILABLE

        await check_all_readable(client, broker.addr, acked)  # pulls keep working on a full disk

        filler.unlink()  # space returns: the retention tick finds it and takes sends again

        async def accepted() -> bool:
            resp = await send(client, broker.addr, "Full", b"after")
            if resp.code == ResponseCode.SUCCESS:
                assert resp.ext_fields is not None
                acked.append((int(resp.ext_fields["queueOffset"]), b"after"))
                return True
            assert resp.code == ResponseCode.SERVICE_NOT_AVAILABLE
            return False

        await eventually(accepted, timeout=10, interval=0.1, message="sends accepted after space returned")
        info = await runtime_info(client, broker.addr)
        assert info["diskFull"] == "false" and info["storeWritable"] == "true"
        await check_all_readable(client, broker.addr, acked)
    finally:
        await client.close()
        await broker.stop()
        await ns.stop()


async def check_all_readable(client: RemotingClient, addr: str, acked: list[tuple[int, bytes]],
                             topic: str = "Full") -> None:
    """Every acknowledged message, pulled over the wire, whole and in its place (each queue in order)."""
    by_queue_offset = dict(acked)
    got: dict[int, bytes] = {}
    offset = 0
    while len(got) < len(by_queue_offset):
        resp = await client.invoke(addr, pull_request(topic, offset, max_nums=32))
        assert resp.code == ResponseCode.SUCCESS, (resp.code, resp.remark, offset)
        batch = bodies(resp)
        assert batch
        for body in batch:
            got[offset] = body
            offset += 1
    assert got == by_queue_offset


async def test_a_disk_above_the_warning_ratio_refuses_sends_until_restarted_with_a_higher_ratio(
        tmp_path: Path) -> None:
    """diskSpaceWarningLevelRatio set (as a broker property) below what the host's disk uses: sends get 14 with
    a remark naming the ratio, pulls work; the ratio is read at start, as RocketMQ's system property is, so the
    broker restarted with the default ratio (90) takes sends again, and nothing acknowledged is lost."""
    ns = await start_namesrv(tmp_path)
    store = str(tmp_path / "ratio-store")
    fast: dict[str, Any] = {"store_path_root_dir": store, "clean_resource_interval_ms": 100}
    broker = await start_broker(tmp_path, "broker-r", ns.addr, disk_space_warning_level_ratio=None, **fast)
    client = RemotingClient()
    try:
        acked = [(int(ok.ext_fields["queueOffset"]), body) for body in (b"one", b"two")
                 if (ok := await send(client, broker.addr, "Ratio", body)).ext_fields is not None]
        assert len(acked) == 2
        await broker.stop()
        used = disk_state(store).ratio * 100
        if used < 2:
            pytest.skip(f"the disk holding {store} is only {used:.1f} % used: no ratio below it to set")
        low = {"diskSpaceWarningLevelRatio": str(max(1, int(used) - 1))}
        broker = await start_broker(tmp_path, "broker-r", ns.addr, low, disk_space_warning_level_ratio=None, **fast)

        async def refused() -> bool:  # from the first retention tick on (the ratio is checked there)
            resp = await send(client, broker.addr, "Ratio", b"before the tick")
            if resp.code == ResponseCode.SUCCESS and resp.ext_fields is not None:
                acked.append((int(resp.ext_fields["queueOffset"]), b"before the tick"))
            return resp.code == ResponseCode.SERVICE_NOT_AVAILABLE

        await eventually(refused, timeout=5, interval=0.05, message="sends refused above the ratio")
        resp = await send(client, broker.addr, "Ratio", b"refused")
        assert resp.code == ResponseCode.SERVICE_NOT_AVAILABLE
        remark = resp.remark or ""
        assert "disk is full" in remark and "diskSpaceWarningLevelRatio" in remark, remark
        info = await runtime_info(client, broker.addr)
        assert info["diskFull"] == "true" and info["storeWritable"] == "false"
        await check_all_readable(client, broker.addr, acked, "Ratio")  # pulls keep working
        await broker.stop()

        broker = await start_broker(tmp_path, "broker-r", ns.addr, disk_space_warning_level_ratio=None, **fast)
        ok = await send(client, broker.addr, "Ratio", b"three")
        assert ok.code == ResponseCode.SUCCESS and ok.ext_fields is not None, (ok.code, ok.remark)
        acked.append((int(ok.ext_fields["queueOffset"]), b"three"))
        await check_all_readable(client, broker.addr, acked, "Ratio")
    finally:
        await client.close()
        await broker.stop()
        await ns.stop()


class _Events:
    """A stand-in for a module's structlog logger that records (level, event) and binds to itself."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []

    def bind(self, **_kw: Any) -> _Events:
        return self

    def _record(self, level: str) -> Callable[..., None]:
        return lambda event, *_a, **_kw: self.seen.append((level, event))

    def __getattr__(self, level: str) -> Callable[..., None]:
        return self._record(level)

    def count(self, event: str) -> int:
        return sum(1 for _level, name in self.seen if name == event)


def _written(broker: BrokerController) -> bytes:
    """The commit log's written bytes, file after file (the slave's start offset is the master's: 0)."""
    assert broker.store is not None
    out = bytearray()
    for mapped in broker.store.commit_log.queue.files:
        out += mapped.view[:mapped.wrote_position]
    return bytes(out)


async def test_a_slave_whose_disk_fills_stops_replicating_cleanly_and_catches_up(
        small_disk: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An ASYNC_MASTER keeps taking sends while its slave's disk (a 48 MiB tmpfs) is full; the slave says so
    once, writes nothing it could not reserve (its bytes stay a prefix of the master's), keeps its connection,
    and once space is freed catches up to a byte-identical commit log."""
    link_log, file_log = _Events(), _Events()
    monkeypatch.setattr(ha_client_module, "log", link_log)
    monkeypatch.setattr(mapped_file_module, "log", file_log)
    filler = small_disk / "filler"
    fill(filler, 40 << 20)  # a few MiB left for the slave
    ns = await start_namesrv(tmp_path)
    sizes: dict[str, Any] = {"mapped_file_size_commit_log": 1 << 20, "reserve_window_commit_log": 256 << 10,
                             "reserve_window_consume_queue": 16 << 10}
    master = await start_broker(tmp_path, "broker-s", ns.addr, broker_role=BrokerRole.ASYNC_MASTER, **sizes)
    slave = await start_broker(tmp_path, "broker-s", ns.addr, broker_role=BrokerRole.SLAVE, broker_id=1,
                               store_path_root_dir=str(small_disk / "slave-store"), **sizes)
    client = RemotingClient()
    acked: list[tuple[int, bytes]] = []
    try:
        assert master.store is not None and slave.store is not None and slave.ha_client is not None
        await eventually(lambda: slave.ha_client is not None and slave.ha_client.connected, timeout=10,
                         message="slave connected")
        for i in range(1600):  # ~12.8 MB: more than the slave's disk has left
            body = i.to_bytes(4, "big") * (BODY // 4)
            resp = await send(client, master.addr, "SlaveFull", body)
            assert resp.code == ResponseCode.SUCCESS, (i, resp.code, resp.remark)  # the master keeps serving
            assert resp.ext_fields is not None
            acked.append((int(resp.ext_fields["queueOffset"]), body))
        slave_store, master_store = slave.store, master.store
        await eventually(lambda: link_log.count("slave_store_cannot_reserve_replication_paused") == 1,
                         timeout=10, message="the slave said its disk is full")
        assert slave_store.max_phy_offset < master_store.max_phy_offset
        stuck_at = slave_store.max_phy_offset
        await asyncio.sleep(2.5)  # two more retries of the slave's wait: still stuck, not said again
        assert slave_store.max_phy_offset == stuck_at and slave.ha_client.connected
        assert link_log.count("slave_store_cannot_reserve_replication_paused") == 1
        # once per allocator that hit the full disk (the commit log's, and the consume queues' when a dispatch
        # reached a new window first), never again while it lasts
        assert 1 <= file_log.count("mapped_file_reservation_failed") <= 2
        assert _written(slave) == _written(master)[:stuck_at]  # nothing torn, nothing past what was reserved
        await check_all_readable(client, master.addr, acked, "SlaveFull")

        filler.unlink()
        await eventually(lambda: slave_store.max_phy_offset == master_store.max_phy_offset, timeout=20,
                         message="slave caught up after space returned")
        assert link_log.count("slave_store_space_back_replication_resumed") == 1
        assert _written(slave) == _written(master)
        await eventually(lambda: slave_store.dispatch_behind_bytes == 0, message="slave dispatched")
        assert slave_store.get_max_offset_in_queue("SlaveFull", 0) == len(acked)
    finally:
        await client.close()
        await slave.stop()
        await master.stop()
        await ns.stop()


async def test_a_sync_master_whose_slave_disk_fills_answers_slave_timeout_then_recovers(
        small_disk: Path, tmp_path: Path) -> None:
    """The same on a SYNC_MASTER: once the slave cannot store, sends are stored on the master but answered
    FLUSH_SLAVE_TIMEOUT (or SLAVE_NOT_AVAILABLE), as RocketMQ answers them; once space is freed the slave
    catches up byte-identical and sends are answered SUCCESS again."""
    filler = small_disk / "filler"
    fill(filler, 40 << 20)
    ns = await start_namesrv(tmp_path)
    sizes: dict[str, Any] = {"mapped_file_size_commit_log": 1 << 20, "reserve_window_commit_log": 256 << 10,
                             "reserve_window_consume_queue": 16 << 10}
    master = await start_broker(tmp_path, "broker-t", ns.addr, {"slaveTimeout": "300"},
                                broker_role=BrokerRole.SYNC_MASTER, **sizes)
    slave = await start_broker(tmp_path, "broker-t", ns.addr, broker_role=BrokerRole.SLAVE, broker_id=1,
                               store_path_root_dir=str(small_disk / "slave-store"), **sizes)
    client = RemotingClient()
    try:
        assert master.store is not None and slave.store is not None
        master_store, slave_store = master.store, slave.store
        await eventually(lambda: slave.ha_client is not None and slave.ha_client.connected, timeout=10,
                         message="slave connected")
        answer = None
        for i in range(1600):
            resp = await send(client, master.addr, "SyncFull", i.to_bytes(4, "big") * (BODY // 4))
            if resp.code != ResponseCode.SUCCESS:
                answer = resp
                break
        assert answer is not None, "the slave's disk never filled"
        assert answer.code in (ResponseCode.FLUSH_SLAVE_TIMEOUT, ResponseCode.SLAVE_NOT_AVAILABLE), answer.code
        assert slave_store.max_phy_offset < master_store.max_phy_offset
        filler.unlink()
        await eventually(lambda: slave_store.max_phy_offset == master_store.max_phy_offset, timeout=20,
                         message="slave caught up after space returned")
        assert _written(slave) == _written(master)
        after = await send(client, master.addr, "SyncFull", b"after")
        assert after.code == ResponseCode.SUCCESS, (after.code, after.remark)
    finally:
        await client.close()
        await slave.stop()
        await master.stop()
        await ns.stop()
