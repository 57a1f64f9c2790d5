"""``rmq-admin export --store-dir D`` on the store of a running broker (a real ``rmq-broker`` process): the export
holds what the broker acknowledged as flushed (it asks the broker at the address it recorded in ``D``, not the
checkpoint that lags by up to a second); an export of nothing says so and exits 3; a store whose broker cannot
be asked falls back to the checkpoint and says so (pocketmq.admin.export)."""

from __future__ import annotations

import asyncio
import fcntl
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from pocketmq.admin.export import EXIT_NOTHING, export_main
from pocketmq.broker.address_file import ADDRESS_FILE, read_address
from pocketmq.client import Message, Producer, SendStatus
from pocketmq.common.record import decode_records
from pocketmq.spark_jobs.manifest import load_manifest
from pocketmq.store.checkpoint import StoreCheckpoint
from tests.procs import Proc, start_broker, start_namesrv

pytestmark = pytest.mark.timeout(180)

#: SYNC_FLUSH (an acknowledged message is on disk), and a checkpoint rewritten only once a minute: an export
#: that trusted the checkpoint of this live store would hold nothing that was sent during the test.
CONFIG = "flushDiskType=SYNC_FLUSH\nflushIntervalConsumeQueue=60000\n"


@pytest.fixture
def namesrv(tmp_path: Path) -> Iterator[str]:
    ns = start_namesrv(kv_dir=tmp_path)
    try:
        yield ns.addr
    finally:
        ns.terminate(30)


def _broker(namesrv: str, tmp_path: Path, name: str) -> tuple[Proc, Path]:
    config = tmp_path / f"{name}.properties"
    config.write_text(CONFIG)
    store = tmp_path / name
    return start_broker(namesrv=namesrv, store_dir=store, name=name, config=config), store


def _export(store: Path, out: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str]:
    capsys.readouterr()
    code = export_main(["--store-dir", str(store), "--out", str(out), "--quiet", *extra])
    return code, capsys.readouterr().err


def _bodies(out: Path) -> list[bytes]:
    manifest = load_manifest(out)
    return [r.body for f in manifest.files for r in decode_records((out / "commitlog" / f.name).read_bytes())]


async def _send(namesrv: str, count: int) -> None:
    async with Producer("ExportLivePG", namesrv_addr=namesrv) as producer:
        for i in range(count):
            result = await producer.send(Message("ExportLive", f"acked-{i}".encode()))
            assert result.status is SendStatus.SEND_OK


def test_a_live_sync_flush_export_holds_every_acknowledged_message(namesrv: str, tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    broker, store = _broker(namesrv, tmp_path, "broker-live")
    try:
        assert read_address(store) == broker.addr  # recorded once it serves requests
        asyncio.run(_send(namesrv, 3))
        lagging = StoreCheckpoint.load(str(store / "checkpoint")).physic_offset
        code, err = _export(store, tmp_path / "out", capsys)
        assert code == 0, err
        assert _bodies(tmp_path / "out") == [b"acked-0", b"acked-1", b"acked-2"]
        manifest = load_manifest(tmp_path / "out")
        assert manifest.source["mode"] == "live-broker" and manifest.source["asked"] == ADDRESS_FILE
        assert manifest.source["broker_addr"] == broker.addr
        assert lagging < manifest.last_offset  # the checkpoint alone would have left them out
    finally:
        assert broker.terminate(30) == 0
    assert read_address(store) is None  # a clean stop takes the record back


def test_an_export_of_nothing_says_so_and_writes_nothing(namesrv: str, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    broker, store = _broker(namesrv, tmp_path, "broker-empty")
    try:
        code, err = _export(store, tmp_path / "live", capsys)
        assert code == EXIT_NOTHING, err
        assert "nothing to export: the broker has flushed nothing beyond offset 0" in err
        assert not (tmp_path / "live").exists()
    finally:
        assert broker.terminate(30) == 0
    code, err = _export(store, tmp_path / "offline", capsys)
    assert code == EXIT_NOTHING and "nothing to export: the store holds no records" in err, err
    assert not (tmp_path / "offline").exists()
    (tmp_path / "mine").mkdir()  # a directory the user made stays, empty
    code, err = _export(store, tmp_path / "mine", capsys)
    assert code == EXIT_NOTHING and (tmp_path / "mine").is_dir() and not any((tmp_path / "mine").iterdir())


def test_a_broker_that_cannot_be_asked(namesrv: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A locked store without a record (a RocketMQ broker): the checkpoint, said out loud. A record that leads
    to another store's broker, or to nobody: an error, never that broker's offsets."""
    broker, store = _broker(namesrv, tmp_path, "broker-other")
    asyncio.run(_send(namesrv, 2))
    copy = tmp_path / "copy"
    try:
        assert broker.terminate(30) == 0
        shutil.copytree(store, copy)
        with open(copy / "lock", "r+b") as lock:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX)  # as a running broker holds it
            code, err = _export(copy, tmp_path / "by-checkpoint", capsys)
            assert code == 0 and "recorded no address to ask" in err and "checkpoint" in err, err
            assert load_manifest(tmp_path / "by-checkpoint").source["mode"] == "live-checkpoint"
            (copy / ADDRESS_FILE).write_text("127.0.0.1:1\n")
            code, err = _export(copy, tmp_path / "nobody", capsys)
            assert code == 1 and "127.0.0.1:1: cannot ask the broker" in err, err
            broker, store = _broker(namesrv, tmp_path, "broker-other")
            (copy / ADDRESS_FILE).write_text(f"{broker.addr}\n")
            code, err = _export(copy, tmp_path / "elsewhere", capsys)
            assert code == 1 and f"runs on the store {store}, not on {copy}" in err, err
    finally:
        broker.terminate(30)
