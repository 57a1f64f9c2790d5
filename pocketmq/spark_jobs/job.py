"""``rmq-analytics``: the analytics job over exported commit logs.

::

    rmq-analytics --input EXPORT [--input EXPORT ...] --out DIR [--master URL] [--top N] [--no-verify]
    spark-submit --master spark://HOST:7077 --py-files pocketmq-spark.zip spark_jobs/job.py --input ... --out DIR

Steps: check each export against its manifest (sizes and SHA-256; ``--no-verify`` skips the checksums),
decode every input once into ``DIR/parquet/records`` (the data source, one task per record-aligned file
range; Parquet only), run the analyses of :mod:`spark_jobs.analytics` on that Parquet copy (one export per broker group;
master/slave pairs of the same group go to the replication check), write each result as Parquet
(``DIR/parquet/NAME``) and CSV (``DIR/csv/NAME``), and render ``DIR/report.html`` with its charts.

Decoding once and analysing the Parquet copy matters: Parquet is columnar and compressed, so the ten or so
analyses read only the columns they need instead of decoding the commit log ten times.

Exit status: 0 done, 1 an input is unusable (the message names the file and offset), 2 bad arguments.
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pocketmq.spark_jobs.manifest import ExportError, resolve_input, verify_export

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from pocketmq.spark_jobs import analytics

DEFAULT_MASTER = "local[*]"


@dataclass
class JobResult:
    """What a run produced (paths and headline figures)."""

    out: Path
    report: Path
    records: int
    timings: dict[str, float] = field(default_factory=dict)
    replication: list[dict[str, Any]] = field(default_factory=list)


def describe_inputs(paths: Sequence[str]) -> list[analytics.ExportMeta]:
    """Each input's manifest facts (raw directories get UNKNOWN cluster/role and -1 records)."""
    from pocketmq.spark_jobs import analytics  # pyspark: the spark extra, imported when the job runs

    metas = []
    for path in paths:
        m = resolve_input(path).manifest
        metas.append(analytics.ExportMeta(path=path, cluster=m.cluster, broker=m.broker, broker_id=m.broker_id,
                                          role=m.role, records=m.records))
    return metas


def verify_inputs(metas: Sequence[analytics.ExportMeta], *, checksums: bool) -> None:
    """Every input with a manifest matches it (sizes always; SHA-256 when ``checksums``)."""
    for meta in metas:
        if checksums and resolve_input(meta.path).has_manifest:
            verify_export(meta.path)


def csv_ready(df: DataFrame) -> DataFrame:
    """Arrays joined with ``;``, maps and structs as JSON, timestamps as ISO text: CSV holds flat values."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import ArrayType, MapType, StructType

    cols = []
    for f in df.schema.fields:
        if isinstance(f.dataType, ArrayType):
            cols.append(F.array_join(F.col(f.name).cast("array<string>"), ";").alias(f.name))
        elif isinstance(f.dataType, MapType | StructType):
            cols.append(F.to_json(F.col(f.name)).alias(f.name))
        else:
            cols.append(F.col(f.name))
    return df.select(*cols)


def _write(spark: SparkSession, df: DataFrame, out: Path, name: str, *, csv: bool = True) -> DataFrame:
    """``df`` to ``out/parquet/name`` and (when ``csv``) to one CSV file under ``out/csv/name``; the Parquet
    copy, read back."""
    parquet = str(out / "parquet" / name)
    df.write.mode("overwrite").parquet(parquet)
    written = spark.read.parquet(parquet)
    if csv:
        csv_ready(written).coalesce(1).write.mode("overwrite").option("header", "true").csv(str(out / "csv" / name))
    return written


def _rows(df: DataFrame, limit: int | None = None) -> list[dict[str, Any]]:
    return [r.asDict(recursive=True) for r in (df.limit(limit) if limit else df).collect()]


def run_job(spark: SparkSession, paths: Sequence[str], out_dir: str | Path, *, top: int = 20,
            verify: bool = True, log: Callable[[str], None] = lambda _m: None) -> JobResult:
    """The whole job on an existing session (see the module docstring)."""
    from pyspark.sql import functions as F

    from pocketmq.spark_jobs import analytics
    from pocketmq.spark_jobs.report import ReportData, render
    from pocketmq.spark_jobs.source import read_exports

    out = Path(out_dir)
    timings: dict[str, float] = {}
    clock = time.monotonic()

    def lap(name: str) -> None:
        nonlocal clock
        now = time.monotonic()
        timings[name] = now - clock
        clock = now
        log(f"{name}: {timings[name]:.1f} s")

    metas = describe_inputs(paths)
    if verify:
        verify_inputs(metas, checksums=True)
        lap("verify")
    # every record, as Parquet only: a CSV copy of a whole commit log would be big and slow to no purpose
    records = _write(spark, read_exports(spark, paths), out, "records", csv=False)
    lap("decode")
    primary = records.where(F.col("export").isin(analytics.primary_exports(metas)))
    results = {
        "by_topic": analytics.by_topic(primary),
        "by_queue": analytics.by_queue(primary),
        "by_minute": analytics.by_minute(primary),
        "store_latency": analytics.store_latency(primary),
        "latency_histogram": analytics.latency_histogram(primary),
        "top_tags": analytics.top_tags(primary, top),
        "top_keys": analytics.top_keys(primary, top),
        "tag_key_stats": analytics.tag_key_stats(primary),
        # all inputs: a record and its replica share (broker, physical offset) and count once
        "duplicate_uniq_keys": analytics.duplicate_uniq_keys(records),
        "producer_rates": analytics.producer_rates(primary),
    }
    written = {name: _write(spark, df, out, name) for name, df in results.items()}
    lap("analyses")
    replication: list[dict[str, Any]] = []
    problems: list[dict[str, Any]] = []
    for index, (master, slave) in enumerate(analytics.replica_pairs(metas)):
        m = records.where(F.col("export") == master.path)
        s = records.where(F.col("export") == slave.path)
        check = _write(spark, analytics.replication_check(m, s), out, f"replication_{index}")
        summary = _write(spark, analytics.replication_summary(m, s, check), out, f"replication_{index}_summary")
        for row in _rows(summary):
            replication.append({"master": master.path, "slave": slave.path, **row})
        problems += [{"pair": index, **r} for r in _rows(check, 200)]
    lap("replication")
    data = ReportData(
        title="PocketMQ commit-log analytics",
        inputs=[{"export": m.path, "cluster": m.cluster, "broker": m.broker, "broker_id": m.broker_id,
                 "role": m.role, "records": m.records} for m in metas],
        by_topic=_rows(written["by_topic"]),
        by_minute=_rows(written["by_minute"].withColumn("minute", F.unix_millis("minute"))),
        latency=_rows(written["store_latency"]),
        latency_histogram=_rows(written["latency_histogram"]),
        by_queue=_rows(written["by_queue"]),
        top_tags=_rows(written["top_tags"]),
        top_keys=_rows(written["top_keys"]),
        tag_key_stats=_rows(written["tag_key_stats"]),
        duplicates=_rows(written["duplicate_uniq_keys"].orderBy(F.desc("copies"), "uniq_key"), 50),
        duplicate_count=written["duplicate_uniq_keys"].count(),
        producers=_rows(written["producer_rates"]),
        replication=replication,
        replication_problems=problems,
        timings=timings,
        latency_bounds=analytics.LATENCY_BOUNDS_MS,
    )
    report = render(data, out)
    lap("report")
    data.timings = timings
    render(data, out)  # again, now with the report's own time in the table
    total = sum(int(r["messages"]) for r in data.by_topic)
    return JobResult(out=out, report=report, records=total, timings=timings, replication=replication)


_EXPORT_ERROR = re.compile(r"ExportError: (.+)")


def explain_failure(exc: BaseException) -> str | None:
    """The :class:`ExportError` message inside a Spark task failure, if that is what it was."""
    if isinstance(exc, ExportError):
        return str(exc)
    match = _EXPORT_ERROR.search(str(exc))
    return match.group(1).strip() if match else None


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="rmq-analytics", description="analyse exported PocketMQ/RocketMQ commit logs")
    parser.add_argument("--input", action="append", required=True,
                        help="export directory (repeat for several; a store or commitlog directory also works)")
    parser.add_argument("--out", required=True, help="output directory (Parquet, CSV, report.html)")
    parser.add_argument("--master", help=f"Spark master URL (default {DEFAULT_MASTER}; under spark-submit, its own)")
    parser.add_argument("--top", type=int, default=20, help="top tags/keys per topic (default 20)")
    parser.add_argument("--no-verify", action="store_true", help="skip the SHA-256 check against the manifests")
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="extra Spark setting")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Console entry point of ``rmq-analytics`` (and of ``spark-submit spark_jobs/job.py``)."""
    import os

    args = parse_args(argv)
    conf = {}
    for item in args.conf:
        key, sep, value = item.partition("=")
        if not sep:
            print(f"rmq-analytics: --conf wants KEY=VALUE, got {item!r}", file=sys.stderr)
            return 2
        conf[key] = value
    if importlib.util.find_spec("pyspark") is None:
        print("rmq-analytics: PySpark is not installed: pip install 'pocketmq[spark]'", file=sys.stderr)
        return 2
    master = args.master or (None if "PYSPARK_GATEWAY_PORT" in os.environ else DEFAULT_MASTER)
    started = time.monotonic()
    try:  # fail fast, before the JVM starts
        verify_inputs(describe_inputs(args.input), checksums=not args.no_verify)
    except ExportError as exc:
        print(f"rmq-analytics: {exc}", file=sys.stderr)
        return 1
    print(f"rmq-analytics: verify: {time.monotonic() - started:.1f} s", file=sys.stderr)
    from pocketmq.spark_jobs.session import build_session

    spark = build_session(master, conf={"spark.ui.showConsoleProgress": "false", **conf})
    spark.sparkContext.setLogLevel(os.environ.get("RMQ_ANALYTICS_LOG_LEVEL", "WARN"))
    try:
        result = run_job(spark, args.input, args.out, top=args.top, verify=False,
                         log=lambda m: print(f"rmq-analytics: {m}", file=sys.stderr))
    except Exception as exc:
        reason = explain_failure(exc)
        if reason is None:
            raise
        print(f"rmq-analytics: {reason}", file=sys.stderr)
        return 1
    finally:
        spark.stop()
    print(f"rmq-analytics: {result.records:,} messages analysed in {time.monotonic() - started:.1f} s; "
          f"report: {result.report}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
