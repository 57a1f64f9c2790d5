"""``rmq-bench store``: message-store append throughput and latency, in process, on uvloop.

Workloads (each on a fresh store in a temporary directory, removed afterwards):

* ASYNC_FLUSH, one writer, single appends of 128 B and 1 KiB bodies (``await store.put_message``);
* ASYNC_FLUSH, one writer, batches of 32 (``await store.put_messages``);
* SYNC_FLUSH (group commit) with 1, 16 and 256 concurrent writers;
* the same record bytes copied into an ``mmap`` in a plain loop, the ceiling the store is compared to.

For each: messages/s, MB/s (record bytes), p50/p99/max latency of one call, process CPU time (all threads,
user + system) per message, which does not depend on what else the machine runs, and the slowest call that
rolled over to a new commit-log file (``--file-size``, default 64 MiB, so runs roll several times) with
the number of roll-overs, which shows whether a roll-over costs more than an ordinary append. Every
workload is bounded by ``--messages``/``--sync-messages`` and ``--seconds``; the store lives in a
temporary directory removed afterwards.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import gc
import mmap
import os
import resource
import shutil
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from pocketmq.common.batch import BatchEntry, encode_batch_body
from pocketmq.common.logs import configure_logging
from pocketmq.common.message import encode_properties
from pocketmq.common.record_encoder import encode_record
from pocketmq.store import (
    FlushDiskType,
    MessageExtBatch,
    MessageExtBrokerInner,
    MessageStore,
    PutMessageStatus,
    StoreConfig,
)

_PROPS = encode_properties({"UNIQ_KEY": "7F000001A1B2C3D4E5F60718293A4B5C", "WAIT": "true", "TAGS": "TagA",
                            "KEYS": "order-1"})


@dataclass
class Row:
    """One line of the result table."""

    name: str
    messages: int
    seconds: float
    record_bytes: int
    latencies_ns: list[int]
    roll_latencies_ns: list[int]
    cpu_seconds: float = 0.0

    @property
    def rate(self) -> float:
        return self.messages / self.seconds if self.seconds else 0.0

    def cells(self, raw_rate: float | None) -> list[str]:
        lat = sorted(self.latencies_ns)
        p50 = lat[len(lat) // 2] / 1e3 if lat else 0.0
        p99 = lat[min(len(lat) - 1, int(len(lat) * 0.99))] / 1e3 if lat else 0.0
        worst = lat[-1] / 1e3 if lat else 0.0
        rolls = self.roll_latencies_ns
        roll = f"{max(rolls) / 1e3:,.0f} ({len(rolls)})" if rolls else "-"
        ratio = f"{self.rate / raw_rate:.0%}" if raw_rate else "-"
        cpu = f"{self.cpu_seconds / self.messages * 1e6:.2f}" if self.cpu_seconds else "-"
        return [self.name, f"{self.rate:,.0f}", f"{self.rate * self.record_bytes / 1e6:,.1f}", f"{p50:,.1f}",
                f"{p99:,.1f}", f"{worst:,.0f}", roll, cpu, ratio]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``rmq-bench store``."""
    parser.add_argument("--messages", type=int, default=300_000, help="messages per ASYNC_FLUSH workload")
    parser.add_argument("--sync-messages", type=int, default=150_000, help="messages per SYNC_FLUSH workload")
    parser.add_argument("--seconds", type=float, default=8.0, help="time limit per workload")
    parser.add_argument("--file-size", type=int, default=64 << 20, help="commit-log file size (bytes)")
    parser.add_argument("--sync-body-size", type=int, default=1024, help="body size for SYNC_FLUSH workloads")
    parser.add_argument("--batch", type=int, default=32, help="messages per batch")
    parser.add_argument("--dir", default=None, help="parent of the temporary store directories")


def run(args: argparse.Namespace) -> int:
    """Run every workload and print the table (store logs: warnings only, on stderr)."""
    configure_logging("console", "WARNING")
    try:
        import uvloop
    except ImportError:  # pragma: no cover
        return asyncio.run(_main(args))
    return uvloop.run(_main(args))


async def _main(args: argparse.Namespace) -> int:
    load_before = os.getloadavg()
    rows: list[tuple[Row, float | None]] = []
    raw: dict[int, float] = {}
    for size in (128, 1024):
        row = _raw_mmap(size, args)
        raw[size] = row.rate
        rows.append((row, None))
    for size in (128, 1024):
        row = await _with_store(args, FlushDiskType.ASYNC_FLUSH, functools.partial(_single, size=size, args=args))
        rows.append((row, raw[size]))
    for size in (128, 1024):
        row = await _with_store(args, FlushDiskType.ASYNC_FLUSH, functools.partial(_batch, size=size, args=args))
        rows.append((row, raw[size]))
    size = args.sync_body_size
    for writers in (1, 16, 256):
        workload = functools.partial(_concurrent, size=size, writers=writers, args=args)
        row = await _with_store(args, FlushDiskType.SYNC_FLUSH, workload)
        rows.append((row, raw.get(size)))
    load_after = os.getloadavg()
    _print_table(rows)
    print(f"\ncommit-log file size {args.file_size >> 20} MiB; load average before "
          f"{load_before[0]:.2f}, after {load_after[0]:.2f} ({os.cpu_count()} CPUs)")
    return 0


def _print_table(rows: list[tuple[Row, float | None]]) -> None:
    header = ["workload", "msg/s", "MB/s", "p50 us", "p99 us", "max us", "roll-over max us (n)", "CPU us/msg",
              "vs raw mmap"]
    table = [header] + [row.cells(raw_rate) for row, raw_rate in rows]
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    for i, line in enumerate(table):
        print("  ".join(cell.ljust(w) if j == 0 else cell.rjust(w) for j, (cell, w) in enumerate(zip(line, widths,
                                                                                                     strict=True))))
        if i == 0:
            print("  ".join("-" * w for w in widths))


def _message(size: int) -> MessageExtBrokerInner:
    return MessageExtBrokerInner(topic="BenchTopic", body=os.urandom(size), queue_id=0, properties=_PROPS,
                                 born_timestamp=int(time.time() * 1000))


def _record_size(size: int) -> int:
    return len(encode_record(topic="BenchTopic", body=bytes(size), properties=_PROPS))


async def _with_store(args: argparse.Namespace, flush: FlushDiskType,
                      workload: Callable[[MessageStore], Awaitable[Row]]) -> Row:
    root = tempfile.mkdtemp(prefix="rmq-bench-store-", dir=args.dir)
    try:
        store = MessageStore(StoreConfig(store_path_root_dir=root, mapped_file_size_commit_log=args.file_size,
                                         flush_disk_type=flush))
        await store.start()
        # As a server does after start-up: move what exists to the permanent generation, so the cyclic
        # collector's full passes stay short (otherwise they show up as 10-30 ms latency spikes).
        gc.collect()
        gc.freeze()
        try:
            before = resource.getrusage(resource.RUSAGE_SELF)
            row = await workload(store)
            after = resource.getrusage(resource.RUSAGE_SELF)
            row.cpu_seconds = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
            return row
        finally:
            await store.shutdown()
    finally:
        shutil.rmtree(root, ignore_errors=True)


async def _single(store: MessageStore, size: int, args: argparse.Namespace) -> Row:
    msg = _message(size)
    lat: list[int] = []
    rolls: list[int] = []
    clock = time.perf_counter_ns
    put = store.put_message
    file_size = args.file_size
    deadline = time.perf_counter() + args.seconds
    start = time.perf_counter()
    done = 0
    while done < args.messages:
        t0 = clock()
        result = await put(msg)
        took = clock() - t0
        lat.append(took)
        appended = result.append_result
        if result.status is not PutMessageStatus.PUT_OK or appended is None:
            raise RuntimeError(f"put failed: {result}")
        if appended.wrote_offset % file_size == 0 and appended.wrote_offset:
            rolls.append(took)
        done += 1
        if done % 1000 == 0 and time.perf_counter() > deadline:
            break
    elapsed = time.perf_counter() - start
    return Row(f"async single {size} B", done, elapsed, _record_size(size), lat, rolls)


async def _batch(store: MessageStore, size: int, args: argparse.Namespace) -> Row:
    body = encode_batch_body([BatchEntry(0, os.urandom(size), _PROPS)] * args.batch)
    batch = MessageExtBatch(topic="BenchTopic", body=body, queue_id=0, born_timestamp=int(time.time() * 1000))
    lat: list[int] = []
    rolls: list[int] = []
    clock = time.perf_counter_ns
    file_size = args.file_size
    deadline = time.perf_counter() + args.seconds
    start = time.perf_counter()
    done = 0
    while done < args.messages:
        t0 = clock()
        result = await store.put_messages(batch)
        took = clock() - t0
        lat.append(took)
        appended = result.append_result
        if result.status is not PutMessageStatus.PUT_OK or appended is None:
            raise RuntimeError(f"batch put failed: {result}")
        if appended.wrote_offset % file_size == 0 and appended.wrote_offset:
            rolls.append(took)
        done += args.batch
        if time.perf_counter() > deadline:
            break
    elapsed = time.perf_counter() - start
    return Row(f"async batch{args.batch} {size} B", done, elapsed, _record_size(size), lat, rolls)


async def _concurrent(store: MessageStore, size: int, writers: int, args: argparse.Namespace) -> Row:
    msg = _message(size)
    lat: list[int] = []
    rolls: list[int] = []
    clock = time.perf_counter_ns
    file_size = args.file_size
    deadline = time.perf_counter() + args.seconds
    done = 0
    failures: list[str] = []

    async def writer() -> None:
        nonlocal done
        while done < args.sync_messages and time.perf_counter() < deadline:
            t0 = clock()
            result = await store.put_message(msg)
            took = clock() - t0
            lat.append(took)
            appended = result.append_result
            if result.status is not PutMessageStatus.PUT_OK or appended is None:
                failures.append(result.status.name)
                return
            if appended.wrote_offset % file_size == 0 and appended.wrote_offset:
                rolls.append(took)
            done += 1

    start = time.perf_counter()
    await asyncio.gather(*(writer() for _ in range(writers)))
    elapsed = time.perf_counter() - start
    if failures:
        raise RuntimeError(f"sync puts failed: {failures[:3]}")
    return Row(f"sync x{writers} {size} B", done, elapsed, _record_size(size), lat, rolls)


def _raw_mmap(size: int, args: argparse.Namespace) -> Row:
    """The same record bytes copied into a pre-touched mmap in a plain loop."""
    record = encode_record(topic="BenchTopic", body=os.urandom(size), properties=_PROPS)
    length = len(record)
    root = tempfile.mkdtemp(prefix="rmq-bench-raw-", dir=args.dir)
    try:
        path = os.path.join(root, "raw")
        file_size = args.file_size
        with open(path, "wb") as f:
            f.truncate(file_size)
        with open(path, "r+b") as f:
            mm = mmap.mmap(f.fileno(), file_size)
            for pos in range(0, file_size, mmap.PAGESIZE):
                mm[pos] = 0
            limit = file_size - length
            pos = 0
            done = 0
            start = time.perf_counter()
            while done < args.messages:
                if pos > limit:
                    pos = 0
                mm[pos:pos + length] = record
                pos += length
                done += 1
            elapsed = time.perf_counter() - start
            mm.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return Row(f"raw mmap copy {size} B", done, elapsed, length, [], [])
