"""A full disk, for real: a broker on a 48 MiB tmpfs the test mounts, filled through sends; a disk above
diskSpaceWarningLevelRatio (set low as a broker property); a slave whose disk fills while it replicates.

Sends are refused with SERVICE_NOT_AVAILABLE (14) and a remark naming the disk, pulls keep working, nothing
acknowledged is lost or torn, GET_BROKER_RUNTIME_INFO says ``diskFull``, and once the test frees space (it
deletes a filler file it placed) the retention tick finds it and sends succeed again. Needs root (mount);
skipped with the reason otherwise. The mount and everything on it go in teardown.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from remoting.client import RemotingClient
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand
from store.retention import disk_state
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
