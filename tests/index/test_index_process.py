"""A broker process killed with SIGKILL and restarted: every key and unique key is still found, across index
files that rolled over (a small maxIndexNum), from the rebuilt index."""

from __future__ import annotations

import asyncio
from pathlib import Path

from pocketmq.client import Message, Producer
from tests.helpers import eventually
from tests.procs import start_broker, start_namesrv

FAR = (1 << 63) - 1
COUNT = 300


async def _send_all(namesrv: str) -> list[tuple[str, str]]:
    producer = Producer("IndexProcPG", namesrv_addr=namesrv)
    await producer.start()
    try:
        ids = []
        for i in range(COUNT):
            result = await producer.send(Message("ProcIndexed", f"p{i}".encode(), keys=f"pk-{i}"))
            ids.append((result.msg_id, result.offset_msg_id))
        await eventually(lambda: _all_found(producer, ids), timeout=30, message="indexed before the kill")
        return ids
    finally:
        await producer.shutdown()


async def _all_found(producer: Producer, ids: list[tuple[str, str]]) -> bool:
    for i in (0, COUNT // 2, COUNT - 1):
        found = await producer.query_message("ProcIndexed", f"pk-{i}", 32, 0, FAR)
        if [m.body for m in found] != [f"p{i}".encode()]:
            return False
    return True


async def _check_after_restart(namesrv: str, ids: list[tuple[str, str]]) -> None:
    producer = Producer("IndexProcPG2", namesrv_addr=namesrv)
    await producer.start()
    try:
        await eventually(lambda: _all_found(producer, ids), timeout=30, message="index rebuilt")
        for i in range(0, COUNT, 7):
            found = await producer.query_message("ProcIndexed", f"pk-{i}", 32, 0, FAR)
            assert [m.body for m in found] == [f"p{i}".encode()]
            viewed = await producer.view_message("ProcIndexed", ids[i][0])  # by client unique id
            assert viewed.body == f"p{i}".encode() and viewed.offset_msg_id == ids[i][1]
    finally:
        await producer.shutdown()


def test_keys_found_after_sigkill_and_restart(tmp_path: Path) -> None:
    conf = tmp_path / "broker.properties"
    conf.write_text("maxHashSlotNum=64\nmaxIndexNum=200\nflushIntervalCommitLog=200\n")
    store = tmp_path / "store"
    ns = start_namesrv(kv_dir=tmp_path)
    broker = start_broker(namesrv=ns.addr, store_dir=store, config=conf)
    try:
        ids = asyncio.run(_send_all(ns.addr))
        files_before = sorted(p.name for p in (store / "index").iterdir())
        assert len(files_before) >= 3  # 2 keys a message, 199 a file: rolled over
        broker.kill()
        broker = start_broker(namesrv=ns.addr, store_dir=store, config=conf)
        asyncio.run(_check_after_restart(ns.addr, ids))
        loaded = [line for line in broker.stderr_text().splitlines() if "index_loaded" in line]
        assert loaded and '"abnormal": true' in loaded[0]  # the crash path: the abort file was left
    finally:
        broker.kill()
        ns.kill()
