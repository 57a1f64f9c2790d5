"""The Spark data source ``pocketmq-commitlog``: exported commit logs as a DataFrame of records.

::

    spark.dataSource.register(CommitLogDataSource)
    df = spark.read.format("pocketmq-commitlog").load("/exports/broker-a")          # or .load([a, b])
    df = read_exports(spark, ["/exports/broker-a", "/exports/broker-b"], with_body=True)

Why a Python data source returning Arrow batches: it read faster than one Python tuple per row, ``binaryFile``
+ ``mapInArrow`` (with several times the JVM memory) and ``mapInPandas``/UDTF (docs/analytics.md has the
figures). It also lets the planner split files at record boundaries, which
``binaryFile`` (one row per whole file) cannot.

Partitions. Each input is resolved on the driver (:func:`pocketmq.spark_jobs.manifest.resolve_input`: a truncated
export fails here, naming the file and offset). Each file is cut into ranges of about ``splitSize`` bytes at
the record boundaries listed in the manifest (``split_points``), so a task starts exactly on a record and
needs no resynchronisation; a directory without a manifest gives one task per file. A task decodes its range
with :func:`pocketmq.spark_jobs.records.scan_range` and yields Arrow record batches.

Options: ``path``/``paths`` (one path, or several as a JSON list), ``withBody`` (``false``), ``decompress``
(``false``; inflate zlib bodies), ``splitSize`` (bytes, default 64 MiB), ``batchRows`` (8192).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from pocketmq.spark_jobs.manifest import ExportInput, resolve_input
from pocketmq.spark_jobs.records import DEFAULT_BATCH_ROWS, FileRange, ReadOptions, scan_range, spark_ddl

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

FORMAT_NAME = "pocketmq-commitlog"
DEFAULT_SPLIT_SIZE = 64 << 20
MIN_SPLIT_SIZE = 8 << 20
"""Each Spark task has a fixed overhead of tens of milliseconds: keep ranges large."""


def _options(options: Any) -> dict[str, str]:
    """Spark hands options over case-insensitively (lower-cased keys): look them up in lower case."""
    return {str(k).lower(): str(v) for k, v in dict(options).items()}


def _flag(options: dict[str, str], name: str) -> bool:
    return options.get(name.lower(), "false").strip().lower() in ("true", "1", "yes")


def paths_option(options: Any) -> list[str]:
    """The input paths: ``paths`` (a JSON list) and/or ``path``."""
    options = _options(options)
    paths: list[str] = []
    raw = options.get("paths")
    if raw:
        parsed = json.loads(raw)
        paths.extend([parsed] if isinstance(parsed, str) else [str(p) for p in parsed])
    if options.get("path"):
        paths.append(str(options["path"]))
    if not paths:
        raise ValueError(f"{FORMAT_NAME}: no input; use .load(path), .load([paths]) or option('paths', json)")
    return list(dict.fromkeys(paths))


def read_options(options: Any) -> ReadOptions:
    """``withBody``, ``decompress`` and ``batchRows`` from data source options."""
    options = _options(options)
    return ReadOptions(with_body=_flag(options, "withBody"), decompress=_flag(options, "decompress"),
                       batch_rows=int(options.get("batchrows", DEFAULT_BATCH_ROWS)))


class RangePartition(InputPartition):
    """One task: a record-aligned byte range of one file."""

    def __init__(self, rng: FileRange | None) -> None:
        super().__init__(rng)
        self.range = rng


def plan_ranges(inputs: Sequence[ExportInput], split_size: int) -> list[FileRange]:
    """Cut every file into ranges of about ``split_size`` bytes at its split points."""
    ranges: list[FileRange] = []
    for found in inputs:
        broker = found.manifest.broker
        for f in found.manifest.files:
            if f.data_end <= 0:
                continue
            path = found.file_path(f)
            start = 0
            for point in (*f.split_points[1:], f.data_end):
                if point - start >= split_size or point == f.data_end:
                    if point > start:
                        ranges.append(FileRange(found.root, broker, path, f.start_offset, start, point, f.data_end))
                    start = point
    return ranges


class CommitLogReader(DataSourceReader):
    """Plans ranges on the driver and decodes them in the tasks."""

    def __init__(self, options: Any) -> None:
        self.paths = paths_option(options)
        self.options = read_options(options)
        self.split_size = max(4096, int(_options(options).get("splitsize", DEFAULT_SPLIT_SIZE)))

    def partitions(self) -> Sequence[InputPartition]:
        inputs = [resolve_input(p) for p in self.paths]
        ranges = plan_ranges(inputs, self.split_size)
        return [RangePartition(r) for r in ranges] or [RangePartition(None)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, RangePartition)
        if partition.range is not None:
            yield from scan_range(partition.range, self.options)


class CommitLogDataSource(DataSource):
    """``spark.read.format("pocketmq-commitlog")``: see the module docstring."""

    @classmethod
    def name(cls) -> str:
        return FORMAT_NAME

    def schema(self) -> str:
        return spark_ddl(read_options(self.options).with_body)

    def reader(self, schema: Any) -> DataSourceReader:
        return CommitLogReader(self.options)


def register(spark: SparkSession) -> None:
    """Make ``pocketmq-commitlog`` available to ``spark.read.format``."""
    spark.dataSource.register(CommitLogDataSource)


def default_split_size(paths: Sequence[str], parallelism: int) -> int:
    """About three ranges per core over all inputs, never below :data:`MIN_SPLIT_SIZE`."""
    total = sum(f.data_end for p in paths for f in resolve_input(p).manifest.files)
    return max(MIN_SPLIT_SIZE, math.ceil(total / max(1, 3 * parallelism)))


def read_exports(spark: SparkSession, paths: Sequence[str], *, with_body: bool = False, decompress: bool = False,
                 split_size: int | None = None, batch_rows: int = DEFAULT_BATCH_ROWS) -> DataFrame:
    """Several exports (or commit-log directories) as one DataFrame of records."""
    register(spark)
    if split_size is None:
        split_size = default_split_size(paths, spark.sparkContext.defaultParallelism)
    return (spark.read.format(FORMAT_NAME)
            .option("paths", json.dumps(list(paths)))
            .option("withBody", str(with_body).lower())
            .option("decompress", str(decompress).lower())
            .option("splitSize", str(split_size))
            .option("batchRows", str(batch_rows))
            .load())
