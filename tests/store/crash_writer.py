"""Run by ``test_crash`` as a subprocess: appends with SYNC_FLUSH from several coroutines and prints one
line per acknowledged record until it is killed.

Usage: ``python -m tests.store.crash_writer <store dir> <seed>``. Output lines::

    READY <max physical offset after recovery>
    ACK <topic> <queue id> <queue offset> <physical offset> <size>
"""

from __future__ import annotations

import asyncio
import random
import sys

from pocketmq.common.batch import BatchEntry, encode_batch_body
from pocketmq.common.logs import configure_logging
from pocketmq.store import FlushDiskType, MessageExtBatch, MessageStore
from tests.store.support import msg, small_config

WRITERS = 8

async def main(root: str, seed: int) -> None:
    configure_logging()  # stderr: stdout carries the ACKs
    store = MessageStore(small_config(root, flush_disk_type=FlushDiskType.SYNC_FLUSH))
    await store.start()
    print("READY", store.max_phy_offset, flush=True)
    rng = random.Random(seed)

    async def writer() -> None:
        while True:
            topic, queue_id = f"T{rng.randint(0, 2)}", rng.randint(0, 3)
            if rng.random() < 0.1:
                entries = [BatchEntry(0, rng.randbytes(rng.randint(0, 400)), f"TAGS\x01b{i}")
                           for i in range(rng.randint(1, 8))]
                result = await store.put_messages(MessageExtBatch(topic=topic, body=encode_batch_body(entries),
                                                                  queue_id=queue_id))
            else:
                result = await store.put_message(msg(topic=topic, queue_id=queue_id, tags=f"t{rng.randint(0, 3)}",
                                                     body=rng.randbytes(rng.randint(0, 3000))))
            ar = result.append_result
            if not result.is_ok or ar is None:
                print("NACK", result.status.name, flush=True)
                continue
            ends = [*ar.record_offsets[1:], ar.end_offset]
            lines = [f"ACK {topic} {queue_id} {ar.logics_offset + i} {start} {end - start}"
                     for i, (start, end) in enumerate(zip(ar.record_offsets, ends, strict=True))]
            sys.stdout.write("\n".join(lines) + "\n")
            sys.stdout.flush()

    await asyncio.gather(*(writer() for _ in range(WRITERS)))

if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2])))
