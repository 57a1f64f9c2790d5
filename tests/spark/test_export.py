"""``rmq-admin export`` and the manifest: what gets copied, where it ends, and how damage is reported.

No Spark here: exports are written from stores built by the real ``MessageStore`` (64 KiB files, so
several), from a live store and from a running broker, then checked and damaged.
"""

from __future__ import annotations

import asyncio
import fcntl
import hashlib
import json
import os
import struct
from pathlib import Path

import pytest

from pocketmq.admin.export import BrokerIdentity, export_commit_log, export_main, verify_main
from pocketmq.client import Message, Producer
from pocketmq.spark_jobs.manifest import ExportError, load_manifest, resolve_input, verify_export
from pocketmq.store import MessageStore
from pocketmq.store.checkpoint import StoreCheckpoint
from tests.cluster import start_broker, start_namesrv
from tests.helpers import eventually
from tests.spark.support import (
    commit_log_files,
    data_files,
    make_store,
    message,
    patch,
    records_of,
    store_config,
)

IDENTITY = BrokerIdentity(cluster="C1", broker="broker-a", broker_id=0, role="ASYNC_MASTER")


@pytest.fixture(scope="module")
def store_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """600 messages over three 64 KiB files, shut down cleanly (shared, never modified)."""
    return make_store(tmp_path_factory.mktemp("export") / "store", 600)


def test_offline_export_copies_each_file_and_lists_it_in_the_manifest(store_dir: Path, tmp_path: Path) -> None:
    manifest = export_commit_log(store_dir, tmp_path / "out", identity=IDENTITY, split_interval=4096)
    sources = data_files(store_dir)
    assert len(sources) >= 3
    assert [f.name for f in manifest.files] == [p.name for p in sources]
    assert (manifest.cluster, manifest.broker, manifest.broker_id, manifest.role) == ("C1", "broker-a", 0,
                                                                                      "ASYNC_MASTER")
    assert manifest.records == 600 and manifest.source["mode"] == "offline"
    last_records = records_of(sources[-1])
    end_pos = last_records[-1][0] + last_records[-1][1].total_size
    assert manifest.first_offset == 0
    assert manifest.last_offset == int(sources[-1].name) + end_pos
    for f, source in zip(manifest.files, sources, strict=True):
        copied = (tmp_path / "out" / "commitlog" / f.name).read_bytes()
        assert f.sha256 == hashlib.sha256(copied).hexdigest() and len(copied) == f.size
        assert copied == source.read_bytes()[:f.size]
        positions = {pos for pos, _ in records_of(source)}
        assert set(f.split_points) <= positions and f.split_points[0] == 0
        assert f.records == len(records_of(source))
    assert manifest.files[-1].size == end_pos < manifest.files[-1].file_size  # the last file is cut
    assert all(f.size == f.file_size for f in manifest.files[:-1])
    assert load_manifest(tmp_path / "out") == manifest
    assert verify_export(tmp_path / "out", decode=True).records == 600


def test_up_to_inside_a_record_cuts_at_the_record_boundary_before_it(store_dir: Path, tmp_path: Path) -> None:
    second_file = commit_log_files(store_dir)[1]
    _pos, record = records_of(second_file)[5]
    cut = record.physical_offset + 10  # inside the sixth record of the second file
    manifest = export_commit_log(store_dir, tmp_path / "out", identity=IDENTITY, up_to=cut)
    assert manifest.last_offset == record.physical_offset
    assert manifest.files[-1].name == second_file.name and manifest.files[-1].records == 5
    assert manifest.source["mode"] == "offline+up-to" and manifest.source["up_to"] == cut
    verify_export(tmp_path / "out", decode=True)


async def test_live_store_is_exported_up_to_its_checkpoint(tmp_path: Path) -> None:
    store = MessageStore(store_config(tmp_path / "store"))
    await store.start()
    try:
        for i in range(300):
            store.append(message(i))
        checkpoint_path = tmp_path / "store" / "checkpoint"
        await eventually(lambda: StoreCheckpoint.load(str(checkpoint_path)).physic_offset == store.max_phy_offset,
                         timeout=10, message="the checkpoint records the flushed end")
        flushed = store.max_phy_offset
        for i in range(300, 350):  # written after the checkpoint: not yet known to be on disk
            store.append(message(i))
        manifest = await asyncio.to_thread(export_commit_log, tmp_path / "store", tmp_path / "out",
                                           identity=IDENTITY)
    finally:
        await store.shutdown()
    assert manifest.source["mode"] == "live-checkpoint"
    assert flushed <= manifest.last_offset == manifest.source["checkpoint_physic_offset"] <= store.max_phy_offset
    await asyncio.to_thread(verify_export, tmp_path / "out", decode=True)
    ends = [r.physical_offset + r.total_size for p in commit_log_files(tmp_path / "store") for _, r in records_of(p)]
    assert manifest.last_offset in ends
    assert manifest.records == sum(1 for e in ends if e <= manifest.last_offset)


def test_live_rocketmq_store_is_cut_by_the_checkpoint_timestamp(store_dir: Path, tmp_path: Path) -> None:
    """A RocketMQ checkpoint holds only physicMsgTimestamp: records stored later are left out."""
    import shutil

    root = tmp_path / "store"
    shutil.copytree(store_dir, root)
    records = [r for p in commit_log_files(root) for _, r in records_of(p)]
    stamp = records[len(records) // 2].store_timestamp
    (root / "checkpoint").write_bytes(struct.pack(">qqq", stamp, stamp, 0) + bytes(4096 - 24))
    with open(root / "lock", "r+b") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)  # as a running broker would hold it
        manifest = export_commit_log(root, tmp_path / "out", identity=IDENTITY)
    assert manifest.source["mode"] == "live-checkpoint-timestamp"
    expected = [r for r in records if r.store_timestamp <= stamp]
    assert records[len(expected)].store_timestamp > stamp  # store times never go back in one log
    assert manifest.records == len(expected)
    assert manifest.last_offset == expected[-1].physical_offset + expected[-1].total_size


async def test_export_asks_a_running_broker_for_its_flushed_offset(tmp_path: Path) -> None:
    ns = await start_namesrv(tmp_path)
    broker = await start_broker(tmp_path, "broker-a", ns.addr, {"flushDiskType": "SYNC_FLUSH"})
    try:
        async with Producer("ExportPG", namesrv_addr=ns.addr) as producer:
            for i in range(50):
                await producer.send(Message("Exported", f"m{i}".encode(), tags="t", keys=f"k{i}"))
        store = broker.store
        assert store is not None
        await eventually(lambda: store.flushed_phy_offset == store.max_phy_offset, timeout=10,
                         message="SYNC_FLUSH has flushed every acknowledged message")
        argv = ["--store-dir", store.config.store_path_root_dir, "--out", str(tmp_path / "out"),
                "--broker-addr", broker.addr, "--broker-name", "broker-a", "--cluster", "C1", "--quiet"]
        assert await asyncio.to_thread(export_main, argv) == 0
    finally:
        await broker.stop()
        await ns.stop()
    manifest = load_manifest(tmp_path / "out")
    assert manifest.source["mode"] == "live-broker" and manifest.source["broker_addr"] == broker.addr
    assert manifest.role == "ASYNC_MASTER" and manifest.broker_id == 0
    assert manifest.last_offset == manifest.source["broker_end_offset"]
    topics = [r.topic for f in manifest.files for _, r in records_of(tmp_path / "out" / "commitlog" / f.name)]
    assert topics.count("Exported") == 50


def test_a_torn_tail_ends_an_offline_export(store_dir: Path, tmp_path: Path) -> None:
    import shutil

    root = tmp_path / "store"
    shutil.copytree(store_dir, root)
    last = data_files(root)[-1]
    records = records_of(last)
    pos, record = records[-1]
    patch(last, pos + record.total_size - 3, b"\xff\xff\xff")  # the last record's properties get torn
    manifest = export_commit_log(root, tmp_path / "out", identity=IDENTITY)
    assert manifest.records == 599
    assert manifest.last_offset == record.physical_offset
    assert manifest.source["stopped_at_damage"] == {"file": last.name, "offset": record.physical_offset,
                                                    "reason": "properties is not UTF-8"}


def test_damage_before_the_last_file_is_an_error_naming_file_and_offset(store_dir: Path, tmp_path: Path) -> None:
    import shutil

    root = tmp_path / "store"
    shutil.copytree(store_dir, root)
    first = commit_log_files(root)[0]
    pos, record = records_of(first)[7]
    patch(first, pos + 100, b"\x00\x01")  # inside the body: the CRC no longer matches
    with pytest.raises(ExportError) as caught:
        export_commit_log(root, tmp_path / "out", identity=IDENTITY)
    assert caught.value.path == str(first) and caught.value.offset == record.physical_offset
    assert f"offset {record.physical_offset}" in str(caught.value) and "body CRC mismatch" in str(caught.value)


def test_a_hole_in_the_log_is_an_error(store_dir: Path, tmp_path: Path) -> None:
    import shutil

    root = tmp_path / "store"
    shutil.copytree(store_dir, root)
    first = commit_log_files(root)[0]
    pos, record = records_of(first)[-1]
    patch(first, pos, bytes(first.stat().st_size - pos))  # zeros where the last record and blank were
    with pytest.raises(ExportError, match="the log has a hole") as caught:
        export_commit_log(root, tmp_path / "out", identity=IDENTITY)
    assert caught.value.offset == record.physical_offset


@pytest.fixture
def export_dir(store_dir: Path, tmp_path: Path) -> Path:
    export_commit_log(store_dir, tmp_path / "export", identity=IDENTITY)
    return tmp_path / "export"


def test_a_truncated_export_is_reported_with_file_and_offset(export_dir: Path) -> None:
    manifest = load_manifest(export_dir)
    victim = export_dir / "commitlog" / manifest.files[1].name
    with open(victim, "r+b") as f:
        f.truncate(1000)
    expected = manifest.files[1].start_offset + 1000
    for check in (lambda: verify_export(export_dir), lambda: resolve_input(export_dir)):
        with pytest.raises(ExportError) as caught:
            check()
        assert caught.value.path == str(victim) and caught.value.offset == expected
        assert f"truncated at commit-log offset {expected}" in str(caught.value)


def test_a_corrupted_record_is_reported_with_file_and_offset(export_dir: Path) -> None:
    manifest = load_manifest(export_dir)
    victim = export_dir / "commitlog" / manifest.files[1].name
    pos, record = records_of(victim)[3]
    patch(victim, pos + 8, b"\x7f")  # BODYCRC
    with pytest.raises(ExportError) as caught:
        verify_export(export_dir)
    assert caught.value.path == str(victim) and caught.value.offset == record.physical_offset
    assert "body CRC mismatch" in str(caught.value)


def test_damage_outside_the_records_fails_the_checksum(export_dir: Path) -> None:
    manifest = load_manifest(export_dir)
    victim = export_dir / "commitlog" / manifest.files[0].name
    patch(victim, manifest.files[0].file_size - 1, b"\x01")  # in the padding after the blank marker
    with pytest.raises(ExportError, match="SHA-256 does not match") as caught:
        verify_export(export_dir)
    assert caught.value.path == str(victim)


def test_missing_manifest_or_file(export_dir: Path) -> None:
    manifest = load_manifest(export_dir)
    (export_dir / "commitlog" / manifest.files[0].name).unlink()
    with pytest.raises(ExportError, match="missing") as caught:
        verify_export(export_dir)
    assert caught.value.offset == 0
    (export_dir / "manifest.json").unlink()
    with pytest.raises(ExportError, match="no manifest"):
        verify_export(export_dir)


def test_cli(store_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    assert export_main(["--store-dir", str(store_dir), "--out", str(out), "--role", "slave", "--broker-id", "1",
                        "--broker-name", "broker-a", "--verify"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["records"] == 600
    assert "export: done" in captured.err  # progress lines
    manifest = load_manifest(out)
    assert (manifest.role, manifest.broker_id) == ("SLAVE", 1)
    assert export_main(["--store-dir", str(store_dir), "--out", str(out), "--quiet"]) == 1
    assert "not empty" in capsys.readouterr().err
    assert verify_main([str(out)]) == 0
    os.truncate(out / "commitlog" / manifest.files[-1].name, 10)
    assert verify_main([str(out)]) == 1
    assert "truncated at commit-log offset" in capsys.readouterr().err
