"""After a power loss cut a master's queues back, a consumer group whose offset lies beyond the recovered end is
moved back to it on its first pull, so the messages later stored at the reused offsets are not skipped
(:mod:`pocketmq.broker.rewind_guard`; found by the chaos harness: 128 and 272 such messages in two runs)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from pocketmq.broker.rewind_guard import RewindGuard
from pocketmq.chaos.control import drop_unflushed
from pocketmq.namesrv.controller import NamesrvController
from pocketmq.remoting.client import RemotingClient
from pocketmq.remoting.codes import ResponseCode
from pocketmq.store.checkpoint import StoreCheckpoint
from tests.broker.test_consume import bodies, client, pull_request, send
from tests.cluster import start_broker

TOPIC = "Rewound"
__all__ = ["client"]  # the remoting-client fixture of the read-side tests


def test_only_a_groups_first_pull_from_beyond_the_end_moves() -> None:
    guard = RewindGuard({(TOPIC, 0): 6})
    assert guard.moved_to("G", TOPIC, 0, 10) == 6
    assert guard.moved_to("G", TOPIC, 0, 10) is None  # its later pulls are its own
    assert guard.moved_to("H", TOPIC, 0, 6) is None  # at the end: nothing to move
    assert guard.moved_to("H", TOPIC, 0, 10) is None
    assert guard.moved_to("G", TOPIC, 1, 99) is None  # a queue recovery did not know


def _power_loss(root: Path, keep: int) -> None:
    """What a power loss leaves when the disk held only the bytes before ``keep``: the ``abort`` file of a broker
    that did not shut down, and the commit log and consume queues cut back there (chaos.control). Blocking."""
    path = str(root / "checkpoint")
    checkpoint = StoreCheckpoint.load(path)
    checkpoint.physic_offset = checkpoint.logics_offset = keep
    checkpoint.write(path)
    (root / "abort").touch()
    drop_unflushed(str(root))


async def test_a_stale_offset_is_moved_back_and_nothing_new_is_skipped(tmp_path: Path, namesrv: NamesrvController,
                                                                       client: RemotingClient) -> None:
    broker = await start_broker(tmp_path, "broker-r", namesrv.addr)
    try:
        for i in range(10):
            await send(client, broker.addr, TOPIC, f"old-{i}".encode())
        assert broker.store is not None
        cq = broker.store.find_consume_queue(TOPIC, 0)
        assert cq is not None and cq.max_offset == 10
        unit = cq.get_unit(6)
        assert unit is not None
        keep = unit[0]  # the disk kept messages 0..5
        consumed = await client.invoke(broker.addr, pull_request(TOPIC, 0, group="G"))
        assert len(bodies(consumed)) == 10  # group G read all ten before the power loss
    finally:
        await broker.stop()
    await asyncio.to_thread(_power_loss, Path(broker.config.store.store_path_root_dir), keep)

    broker = await start_broker(tmp_path, "broker-r", namesrv.addr)
    try:
        assert broker.store is not None
        assert broker.store.recovery_summary["abnormal"] is True
        assert broker.store.get_max_offset_in_queue(TOPIC, 0) == 6
        for i in range(6):  # new messages take offsets 6..11, past G's offset 10
            await send(client, broker.addr, TOPIC, f"new-{i}".encode())
        moved = await client.invoke(broker.addr, pull_request(TOPIC, 10, group="G"))
        assert moved.code == ResponseCode.PULL_OFFSET_MOVED
        assert int((moved.ext_fields or {})["nextBeginOffset"]) == 6
        resumed = await client.invoke(broker.addr, pull_request(TOPIC, 6, group="G"))
        assert bodies(resumed) == [f"new-{i}".encode() for i in range(6)]  # none skipped
        other = await client.invoke(broker.addr, pull_request(TOPIC, 3, group="H"))
        assert bodies(other)[:3] == [b"old-3", b"old-4", b"old-5"]  # a group within the end reads as asked
    finally:
        await broker.stop()
