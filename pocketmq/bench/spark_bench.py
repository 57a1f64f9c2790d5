"""``rmq-bench spark``: the Spark commit-log reader and the analytics job (a benchmark, never a test).

1. Generate a store of ``--messages`` records (default 1,000,000) written byte for byte in RocketMQ 4.x's
   layout with the model's reference encoder (:func:`common.record_encoder.encode_record`): five topics with uneven
   volume, eight queues each (one hot), twelve producer hosts, an hour of store times, store latencies with
   a long tail and a little clock skew, tags, keys, 0.1 % producer retries (repeated UNIQ_KEY) and 2 %
   zlib-compressed bodies.
2. Export it with :func:`pocketmq.admin.export.export_commit_log` (timed).
3. Scan the export in one plain Python process: :func:`pocketmq.common.record.decode_record` on every record, one
   tuple of the same fields per row (what a script without Spark does) — and, for reference, the reader's
   own Arrow path in one process (:func:`pocketmq.spark_jobs.records.scan_range`, no Spark).
4. The Spark reader (``local[2]`` unless ``--master``): every column of every row through a ``noop`` write,
   ``--repeat`` times, rows/s.
5. The whole job, ``python -m pocketmq.spark_jobs.job``, in a fresh process: end-to-end seconds.

The load average is printed before and after: this machine is shared, figures vary with it.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zlib
from dataclasses import dataclass
from pathlib import Path

from pocketmq.common.message import encode_properties
from pocketmq.common.record import END_FILE_MIN_BLANK_LENGTH, encode_host
from pocketmq.common.record_encoder import encode_blank_into, encode_record
from pocketmq.common.sysflag import MessageSysFlag

ROOT = Path(__file__).resolve().parents[2]
START_MS = 1_714_557_600_000  # 1 May 2024, 10:00 UTC: a fixed start, so every generated store is the same
TOPICS = (("Orders", 0.40, ("created", "paid", "shipped", "cancelled")),
          ("Payments", 0.25, ("authorised", "captured", "refunded")),
          ("Inventory", 0.15, ("reserved", "released")),
          ("Notifications", 0.12, ("email", "sms", "push")),
          ("Audit", 0.08, ("login", "logout", "change")))
QUEUES = 8
PRODUCERS = 12


@dataclass(frozen=True, slots=True)
class Synthetic:
    """What :func:`write_synthetic_store` wrote."""

    messages: int
    retries: int
    compressed: int
    files: int
    bytes: int


def _minute_weights(minutes: int, rnd: random.Random) -> list[float]:
    weights = [1.0 + 0.5 * math.sin(2 * math.pi * m / minutes) + rnd.uniform(-0.1, 0.1) for m in range(minutes)]
    burst = minutes // 3
    for m in range(burst, min(minutes, burst + 3)):
        weights[m] *= 3.0  # a three-minute burst
    return weights


def write_synthetic_store(root: str | Path, *, messages: int, file_size: int = 256 << 20, minutes: int = 60,
                          seed: int = 8) -> Synthetic:
    """Write ``root/commitlog/`` with ``messages`` records (see the module docstring). Deterministic."""
    rnd = random.Random(seed)
    commitlog = Path(root) / "commitlog"
    commitlog.mkdir(parents=True, exist_ok=True)
    store_host = encode_host("10.0.0.10", 10911)
    producers = [[encode_host(f"10.1.0.{p + 1}", 50000 + 2 * p + c) for c in range(2)] for p in range(PRODUCERS)]
    producer_weights = [1.0 / (p + 1) ** 0.7 for p in range(PRODUCERS)]
    topic_names = [t[0] for t in TOPICS]
    topic_weights = [t[1] for t in TOPICS]
    tags_of = {t[0]: t[2] for t in TOPICS}
    queue_weights = [1.6 if q == 3 else 1.0 for q in range(QUEUES)]
    next_queue_offset = {(t, q): 0 for t in topic_names for q in range(QUEUES)}
    minute_weights = _minute_weights(minutes, rnd)
    per_minute = [round(messages * w / sum(minute_weights)) for w in minute_weights]
    per_minute[-1] += messages - sum(per_minute)
    pool = rnd.randbytes(4096)
    big_text = b"".join(f"line {i}: status=ok amount={i * 37 % 1000}\n".encode() for i in range(400))
    retries: list[tuple[int, str, bytes, dict[str, str]]] = []  # (due ms, topic, body, properties)
    file_start, pos = 0, 0
    buf = bytearray(file_size)
    files = written = compressed = retried = count = 0

    def flush_file(final: bool) -> None:
        nonlocal file_start, pos, buf, files
        name = commitlog / f"{file_start:020d}"
        if not final:
            encode_blank_into(buf, pos, file_size - pos)
        name.write_bytes(bytes(buf) if not final else bytes(buf[:pos]) + bytes(file_size - pos))
        files += 1
        file_start += file_size
        pos = 0
        buf = bytearray(file_size)

    def append(topic: str, body: bytes, props: dict[str, str], sys_flag: int, born_host: bytes, stamp: int,
               latency: int) -> None:
        nonlocal pos, written, count
        queue_id = rnd.choices(range(QUEUES), queue_weights)[0]
        key = (topic, queue_id)
        record = encode_record(
            topic=topic, body=body, properties=encode_properties(props), queue_id=queue_id,
            queue_offset=next_queue_offset[key], physical_offset=file_start + pos, sys_flag=sys_flag,
            born_timestamp=stamp - latency, born_host=born_host, store_timestamp=stamp, store_host=store_host)
        if pos + len(record) + END_FILE_MIN_BLANK_LENGTH > file_size:
            flush_file(final=False)
            record = encode_record(
                topic=topic, body=body, properties=encode_properties(props), queue_id=queue_id,
                queue_offset=next_queue_offset[key], physical_offset=file_start, sys_flag=sys_flag,
                born_timestamp=stamp - latency, born_host=born_host, store_timestamp=stamp, store_host=store_host)
        buf[pos:pos + len(record)] = record
        pos += len(record)
        written += len(record)
        next_queue_offset[key] += 1
        count += 1

    def latency_ms() -> int:
        roll = rnd.random()
        if roll < 0.0005:
            return -rnd.randint(1, 5)  # producer clock ahead of the broker's
        if roll < 0.003:
            return rnd.randint(100, 3000)
        return int(rnd.lognormvariate(0.7, 0.9))

    for minute, quota in enumerate(per_minute):
        base = START_MS + minute * 60_000
        for i in range(quota):
            if count >= messages:
                break
            stamp = base + (i * 60_000) // max(1, quota)
            while retries and retries[0][0] <= stamp and count < messages:
                _due, topic, body, props = retries.pop(0)
                append(topic, body, props, 0, rnd.choice(producers[0]), stamp, latency_ms())
                retried += 1
            if count >= messages:
                break
            topic = rnd.choices(topic_names, topic_weights)[0]
            producer = rnd.choices(range(PRODUCERS), producer_weights)[0]
            uniq = f"0A0100{producer:02X}{count:024X}"
            props = {"TAGS": rnd.choice(tags_of[topic]),
                     "KEYS": f"order-{int(rnd.paretovariate(1.2)) % 100_000} user-{rnd.randrange(5000)}",
                     "UNIQ_KEY": uniq, "CLUSTER": "DefaultCluster"}
            sys_flag = 0
            if rnd.random() < 0.02:
                body = zlib.compress(big_text[:rnd.randint(5000, len(big_text))], 5)
                sys_flag |= MessageSysFlag.COMPRESSED
                compressed += 1
            else:
                start = rnd.randrange(2048)
                body = pool[start:start + rnd.randint(60, 400)]
            if rnd.random() < 0.001:  # the send timed out but was stored: the producer sends it again
                retries.append((stamp + 3000, topic, body, props))
            append(topic, body, props, sys_flag, rnd.choice(producers[producer]), stamp, latency_ms())
    flush_file(final=True)
    return Synthetic(messages=count, retries=retried, compressed=compressed, files=files, bytes=written)


# ------------------------------------------------------------------------------------------- measuring


def load_average() -> str:
    """``1 min / 5 min / 15 min`` load average."""
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} / {five:.2f} / {fifteen:.2f}"


def plain_scan(export: str) -> tuple[int, float]:
    """One process, the store's decoder, one tuple per row: (rows, seconds)."""
    import mmap

    from pocketmq.common.message import parse_properties
    from pocketmq.common.record import Blank, decode_record, format_host
    from pocketmq.spark_jobs.manifest import resolve_input

    found = resolve_input(export)
    rows = 0
    started = time.perf_counter()
    for f in found.manifest.files:
        with open(found.file_path(f), "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm, \
                memoryview(mm) as view:
            pos, end = 0, f.data_end
            while pos < end:
                r = decode_record(view, pos, limit=end, check_crc=False, expected_offset=f.start_offset + pos)
                if isinstance(r, Blank):
                    break
                props = parse_properties(r.properties)
                keys = props.get("KEYS")
                _row = (r.topic, r.queue_id, r.queue_offset, r.physical_offset, r.total_size, r.sys_flag, r.flag,
                        r.born_timestamp, r.store_timestamp, format_host(r.born_host), format_host(r.store_host),
                        r.reconsume_times, r.prepared_transaction_offset, r.body_crc,
                        zlib.crc32(r.body) & 0x7FFFFFFF == r.body_crc, props.get("TAGS"),
                        keys.split() if keys else None, props.get("UNIQ_KEY"), props)
                rows += 1
                pos += r.total_size
    return rows, time.perf_counter() - started


def arrow_scan(export: str) -> tuple[int, float]:
    """One process, the Spark reader's own decode-to-Arrow path, no Spark: (rows, seconds)."""
    from pocketmq.spark_jobs.manifest import resolve_input
    from pocketmq.spark_jobs.records import scan_range
    from pocketmq.spark_jobs.source import plan_ranges

    ranges = plan_ranges([resolve_input(export)], 1 << 62)
    started = time.perf_counter()
    rows = sum(batch.num_rows for r in ranges for batch in scan_range(r))
    return rows, time.perf_counter() - started


def spark_scan(export: str, master: str, repeat: int) -> tuple[int, list[float], int]:
    """The data source through a ``noop`` write: (rows, seconds per run, partitions)."""
    from pocketmq.spark_jobs.session import build_session
    from pocketmq.spark_jobs.source import read_exports

    spark = build_session(master, conf={"spark.ui.showConsoleProgress": "false", "spark.driver.memory": "2g"})
    try:
        spark.sparkContext.setLogLevel("ERROR")
        df = read_exports(spark, [export])
        partitions = df.rdd.getNumPartitions()
        df.write.format("noop").mode("overwrite").save()  # warm-up: workers, imports, page cache
        runs = []
        for _ in range(repeat):
            started = time.perf_counter()
            df.write.format("noop").mode("overwrite").save()
            runs.append(time.perf_counter() - started)
        rows = df.count()
    finally:
        spark.stop()
    return rows, runs, partitions


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--messages", type=int, default=1_000_000, help="records to generate (default 1,000,000)")
    parser.add_argument("--file-size-mib", type=int, default=256, help="commit-log file size (default 256 MiB)")
    parser.add_argument("--master", default="local[2]", help="Spark master for the reader and the job")
    parser.add_argument("--repeat", type=int, default=3, help="timed Spark reader runs (default 3)")
    parser.add_argument("--workdir", help="keep the generated store, export and job output here")
    parser.add_argument("--skip-job", action="store_true", help="do not run the end-to-end job")


def run(args: argparse.Namespace) -> int:
    from pocketmq.admin.export import BrokerIdentity, export_commit_log

    work = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="spark-bench-"))
    figures: dict[str, object] = {"load_before": load_average(), "cpus": os.cpu_count()}
    try:
        store, export, out = work / "store", work / "export", work / "job"
        for path in (store, export, out):
            shutil.rmtree(path, ignore_errors=True)
        started = time.perf_counter()
        synthetic = write_synthetic_store(store, messages=args.messages, file_size=args.file_size_mib << 20)
        figures["generate_s"] = round(time.perf_counter() - started, 2)
        figures["synthetic"] = dataclasses.asdict(synthetic)
        started = time.perf_counter()
        manifest = export_commit_log(store, export, identity=BrokerIdentity(broker="bench-a", broker_id=0,
                                                                            role="ASYNC_MASTER"))
        seconds = time.perf_counter() - started
        figures["export"] = {"seconds": round(seconds, 2), "records": manifest.records,
                             "mib_per_s": round(manifest.last_offset / seconds / (1 << 20), 1)}
        rows, seconds = plain_scan(str(export))
        plain_rate = round(rows / seconds)
        figures["plain_python_scan"] = {"rows": rows, "seconds": round(seconds, 2), "rows_per_s": plain_rate}
        rows, seconds = arrow_scan(str(export))
        figures["arrow_scan_one_process"] = {"rows": rows, "seconds": round(seconds, 2),
                                             "rows_per_s": round(rows / seconds)}
        figures["load_before_spark"] = load_average()
        rows, runs, partitions = spark_scan(str(export), args.master, args.repeat)
        spark_rate = round(rows / statistics.median(runs))
        figures["spark_reader"] = {"rows": rows, "partitions": partitions, "runs_s": [round(r, 2) for r in runs],
                                   "rows_per_s_median": spark_rate,
                                   "rows_per_s_best": round(rows / min(runs))}
        if not args.skip_job:
            env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
            started = time.perf_counter()
            done = subprocess.run([sys.executable, "-m", "pocketmq.spark_jobs.job", "--input", str(export),
                                   "--out", str(out),
                                   "--master", args.master], env=env, cwd=ROOT, capture_output=True, text=True,
                                  timeout=1800, check=False)
            figures["job"] = {"seconds": round(time.perf_counter() - started, 1), "exit": done.returncode,
                              "steps": [line for line in done.stderr.splitlines() if line.startswith("rmq-analytics")]}
        figures["load_after"] = load_average()
    finally:
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(figures, indent=2))
    print(f"spark reader {spark_rate:,} rows/s (median of {args.repeat}) vs plain Python scan {plain_rate:,} rows/s "
          f"({spark_rate / plain_rate:.2f}x); load average before/after: {figures['load_before']} -> "
          f"{figures['load_after']}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="rmq-bench spark", description=__doc__.splitlines()[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
