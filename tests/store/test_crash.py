"""Crash recovery for real: a subprocess appends with SYNC_FLUSH and prints every acknowledged record; it
is killed with SIGKILL at random moments, round after round, on the same store. After each restart every
acknowledged record must be readable with a valid CRC, the consume queues must agree with the commit log,
and appending must continue at the right offsets. Some rounds also overwrite and truncate the files past
the last acknowledged record before restarting."""

from __future__ import annotations

import asyncio
import random
import signal
import sys
from dataclasses import dataclass
from pathlib import Path

from pocketmq.store import FlushDiskType, MessageStore
from pocketmq.store.mapped_file import file_name_for
from tests.store.support import CL_FILE, CQ_FILE, check_consistency, msg, record_at, small_config

REPO = Path(__file__).resolve().parents[2]
ROUNDS = 25
READ_TIMEOUT = 30.0


@dataclass(frozen=True)
class Ack:
    topic: str
    queue_id: int
    queue_offset: int
    phys: int
    size: int


async def run_writer_until_killed(root: Path, seed: int, kill_after: int) -> list[Ack]:
    """Start the writer, read ``kill_after`` acknowledgements, SIGKILL it, and return every acknowledgement it
    printed (including those still in the pipe)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tests.store.crash_writer", str(root), str(seed), cwd=REPO,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL)
    assert proc.stdout is not None
    lines: list[str] = []
    try:
        ready = await asyncio.wait_for(proc.stdout.readline(), READ_TIMEOUT)
        assert ready.startswith(b"READY"), ready
        while sum(line.startswith("ACK") for line in lines) < kill_after:
            raw = await asyncio.wait_for(proc.stdout.readline(), READ_TIMEOUT)
            assert raw, "writer exited on its own"
            lines.append(raw.decode())
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGKILL)
        await proc.wait()
    lines += (await proc.stdout.read()).decode().splitlines()
    acks = []
    for line in lines:
        parts = line.split()
        if len(parts) == 6 and parts[0] == "ACK":  # a line cut by the kill is not an acknowledgement
            acks.append(Ack(parts[1], int(parts[2]), int(parts[3]), int(parts[4]), int(parts[5])))
    assert proc.returncode == -signal.SIGKILL
    return acks


def damage_past(root: Path, end: int, rng: random.Random) -> None:
    """Overwrite random bytes and cut files at random places, all past commit-log offset ``end``, and put
    garbage in the unwritten tail of a consume-queue file."""
    commitlog = root / "commitlog"
    for _ in range(rng.randint(1, 3)):
        offset = rng.randint(end, end + CL_FILE)
        path = commitlog / file_name_for(offset - offset % CL_FILE)
        if not path.exists():
            continue
        data = bytearray(path.read_bytes())
        at = offset % CL_FILE
        if rng.random() < 0.4:
            del data[at:]
        else:
            data[at:at + 200] = rng.randbytes(len(data[at:at + 200]))
        path.write_bytes(bytes(data))
    queue_files = sorted((root / "consumequeue").glob("*/*/*"))
    if queue_files:
        path = rng.choice(queue_files)
        data = bytearray(path.read_bytes())
        units = [data[i:i + 20] for i in range(0, CQ_FILE, 20)]
        free = [i for i, unit in enumerate(units) if not any(unit)]
        if free:
            at = rng.choice(free[1:] or free) * 20  # never the slot right after the last unit
            data[at:at + 20] = rng.randbytes(20)
            path.write_bytes(bytes(data))


async def verify(root: Path, acked: list[Ack]) -> None:
    """Restart the store and check everything this test promises."""
    store = MessageStore(small_config(root, flush_disk_type=FlushDiskType.SYNC_FLUSH))
    await store.start()
    try:
        for ack in acked:
            record = record_at(store, ack.phys, ack.size)
            assert (record.topic, record.queue_id, record.queue_offset) == (ack.topic, ack.queue_id,
                                                                           ack.queue_offset)
            cq = store.find_consume_queue(ack.topic, ack.queue_id)
            assert cq is not None and cq.get_unit(ack.queue_offset)[:2] == (ack.phys, ack.size)  # type: ignore[index]
        check_consistency(store)
        max_offset = store.max_phy_offset
        queue_max = store.get_max_offset_in_queue("T1", 1)
        result = await store.put_message(msg(topic="T1", queue_id=1, body=b"after restart"))
        assert result.is_ok and result.append_result is not None
        assert result.append_result.wrote_offset in (max_offset, max_offset - max_offset % CL_FILE + CL_FILE)
        assert result.append_result.queue_offset == queue_max
    finally:
        await store.shutdown()


async def test_sigkill_rounds(tmp_path: Path) -> None:
    root = tmp_path / "store"
    rng = random.Random(20240611)
    acked: list[Ack] = []
    for round_no in range(ROUNDS):
        new = await run_writer_until_killed(root, rng.randrange(1 << 30), rng.randint(1, 120))
        assert new, "no acknowledgement before the kill"
        acked += new
        if round_no % 3 == 2:
            damage_past(root, max(a.phys + a.size for a in acked), rng)
        await verify(root, acked)
    assert len({a.phys for a in acked}) == len(acked)
    assert len(list((root / "commitlog").iterdir())) > 3  # the rounds rolled over several files
