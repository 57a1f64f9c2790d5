"""The analyses, as pure functions from DataFrames of records (:mod:`pocketmq.spark_jobs.source`) to DataFrames.

Nothing here reads files, collects to the driver or depends on the session: each function only builds a
plan, so it can be tested on a handful of hand-made rows and run unchanged over a cluster's worth of data.

Times are the records' millisecond fields; minutes are UTC (the job's session time zone). Latency is
``store_timestamp - born_timestamp``: the time from the producer creating the message to the broker storing
it, clock skew between the two hosts included (negative values are counted, not hidden).

Replicas. A master's and a slave's export hold the same records; counting both would count every message
twice. The job therefore analyses traffic on one export per broker group (:func:`primary_exports`) and uses
the others only for :func:`replication_check`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from pocketmq.common.topic import (
    AUTO_CREATE_TOPIC_KEY_TOPIC,
    DLQ_GROUP_TOPIC_PREFIX,
    RETRY_GROUP_TOPIC_PREFIX,
    RMQ_SYS_SCHEDULE_TOPIC,
    RMQ_SYS_TOPIC_PREFIX,
)

DEFAULT_PERCENTILES: tuple[float, ...] = (0.5, 0.9, 0.99, 0.999)
PERCENTILE_ACCURACY = 10_000
"""``percentile_approx``'s accuracy: the relative rank error is 1/10000 (exact for small inputs)."""

LATENCY_BOUNDS_MS: tuple[int, ...] = (0, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10_000, 60_000)
"""Lower bounds of the latency histogram's buckets (the last one is open); below 0 is its own bucket."""

SYSTEM_TOPIC_PREFIXES: tuple[str, ...] = (
    RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX, RMQ_SYS_TOPIC_PREFIX, RMQ_SYS_SCHEDULE_TOPIC,
    AUTO_CREATE_TOPIC_KEY_TOPIC,
)
"""Topics whose messages are copies of others (retries, dead letters, delays) or broker internals."""

MASTER_ROLES = ("SYNC_MASTER", "ASYNC_MASTER")

REPLICA_FIELDS: tuple[str, ...] = (
    "size", "topic", "queue_id", "queue_offset", "sys_flag", "flag", "born_timestamp", "store_timestamp",
    "born_host", "store_host", "reconsume_times", "prepared_transaction_offset", "body_crc", "body_crc_ok",
    "properties",
)
"""Compared by :func:`replication_check`; together they cover every byte of a record (the body through its
stored CRC and whether the body still matches it)."""


def _minute(ms: Column) -> Column:
    return F.date_trunc("minute", F.timestamp_millis(ms))


def _latency(records: DataFrame) -> Column:
    return (records["store_timestamp"] - records["born_timestamp"]).alias("latency_ms")


def is_system_topic(topic: Column) -> Column:
    """True for the topics of :data:`SYSTEM_TOPIC_PREFIXES`."""
    condition = F.lit(False)
    for prefix in SYSTEM_TOPIC_PREFIXES:
        condition = condition | topic.startswith(prefix)
    return condition


# ------------------------------------------------------------------------------------------- volume


def by_topic(records: DataFrame) -> DataFrame:
    """Per topic: messages, bytes (whole records), first and last store time, damaged bodies."""
    return (records.groupBy("topic")
            .agg(F.count(F.lit(1)).alias("messages"), F.sum("size").alias("bytes"),
                 F.min("store_timestamp").alias("first_store_ms"), F.max("store_timestamp").alias("last_store_ms"),
                 F.sum(F.when(~F.col("body_crc_ok"), 1).otherwise(0)).alias("bad_body_crc"))
            .orderBy(F.desc("messages"), "topic"))


def by_queue(records: DataFrame) -> DataFrame:
    """Per broker, topic and queue: messages, bytes, queue offsets seen, and the queue's share of its topic
    (1/queues when perfectly balanced) with its ratio to the topic's mean queue."""
    per_queue = (records.groupBy("broker", "topic", "queue_id")
                 .agg(F.count(F.lit(1)).alias("messages"), F.sum("size").alias("bytes"),
                      F.min("queue_offset").alias("min_queue_offset"), F.max("queue_offset").alias("max_queue_offset")))
    topic = Window.partitionBy("topic")
    return (per_queue
            .withColumn("share", F.col("messages") / F.sum("messages").over(topic))
            .withColumn("vs_mean", F.col("messages") / F.avg("messages").over(topic))
            .orderBy("topic", "broker", "queue_id"))


def by_minute(records: DataFrame) -> DataFrame:
    """Per topic and minute of store time: messages and bytes."""
    return (records.groupBy("topic", _minute(F.col("store_timestamp")).alias("minute"))
            .agg(F.count(F.lit(1)).alias("messages"), F.sum("size").alias("bytes"))
            .orderBy("minute", "topic"))


# ------------------------------------------------------------------------------------------- latency


def store_latency(records: DataFrame, percentiles: Sequence[float] = DEFAULT_PERCENTILES) -> DataFrame:
    """Per topic: store latency (ms) min, mean, the given percentiles (``p50_ms``, ``p99_9_ms``...), max, and
    how many records have a store time before their born time (clock skew)."""
    latency = F.col("store_timestamp") - F.col("born_timestamp")
    pcts = F.percentile_approx(latency, list(percentiles), PERCENTILE_ACCURACY)
    out = (records.groupBy("topic")
           .agg(F.count(F.lit(1)).alias("messages"), F.min(latency).alias("min_ms"),
                F.avg(latency).alias("mean_ms"), pcts.alias("_pcts"), F.max(latency).alias("max_ms"),
                F.sum(F.when(latency < 0, 1).otherwise(0)).alias("negative")))
    names = [percentile_column(p) for p in percentiles]
    return (out.select("topic", "messages", "min_ms", "mean_ms",
                       *[F.col("_pcts")[i].alias(name) for i, name in enumerate(names)], "max_ms", "negative")
            .orderBy("topic"))


def percentile_column(p: float) -> str:
    """``0.5`` -> ``p50_ms``, ``0.999`` -> ``p99_9_ms``."""
    text = f"{p * 100:.6g}".replace(".", "_")
    return f"p{text}_ms"


def latency_histogram(records: DataFrame, bounds: Sequence[int] = LATENCY_BOUNDS_MS) -> DataFrame:
    """Per topic and latency bucket: messages. ``bucket`` 0 is "< bounds[0]", bucket i is
    ``[bounds[i-1], bounds[i])`` and the last is ``>= bounds[-1]``; ``low_ms``/``high_ms`` (null = open)."""
    latency = F.col("store_timestamp") - F.col("born_timestamp")
    bucket = F.lit(0)
    for i, low in enumerate(bounds):
        bucket = F.when(latency >= low, i + 1).otherwise(bucket)
    lows = [None, *bounds]
    highs = [bounds[0], *bounds[1:], None]
    low_col = F.element_at(F.array(*[F.lit(v).cast("long") for v in lows]), F.col("bucket") + 1)
    high_col = F.element_at(F.array(*[F.lit(v).cast("long") for v in highs]), F.col("bucket") + 1)
    return (records.groupBy("topic", bucket.alias("bucket")).agg(F.count(F.lit(1)).alias("messages"))
            .select("topic", "bucket", low_col.alias("low_ms"), high_col.alias("high_ms"), "messages")
            .orderBy("topic", "bucket"))


# ------------------------------------------------------------------------------------------- tags, keys


def _top(counts: DataFrame, label: str, n: int) -> DataFrame:
    rank = Window.partitionBy("topic").orderBy(F.desc("messages"), F.col(label))
    return (counts.withColumn("rank", F.row_number().over(rank)).where(F.col("rank") <= n)
            .orderBy("topic", "rank"))


def top_tags(records: DataFrame, n: int = 20) -> DataFrame:
    """Per topic, its ``n`` most frequent tags: topic, tag, messages, rank (ties by tag)."""
    counts = (records.where(F.col("tags").isNotNull())
              .groupBy("topic", F.col("tags").alias("tag")).agg(F.count(F.lit(1)).alias("messages")))
    return _top(counts, "tag", n)


def top_keys(records: DataFrame, n: int = 20) -> DataFrame:
    """Per topic, its ``n`` most frequent keys (each of a message's KEYS counts): topic, key, messages, rank."""
    counts = (records.select("topic", F.explode("keys").alias("key"))
              .groupBy("topic", "key").agg(F.count(F.lit(1)).alias("messages")))
    return _top(counts, "key", n)


def tag_key_stats(records: DataFrame) -> DataFrame:
    """Per topic: messages, how many carry tags / keys, distinct tags and keys, keys per keyed message."""
    exploded = records.select("topic", F.explode_outer("keys").alias("key"))
    keys = (exploded.groupBy("topic")
            .agg(F.count_distinct("key").alias("distinct_keys"), F.count("key").alias("key_occurrences")))
    base = (records.groupBy("topic")
            .agg(F.count(F.lit(1)).alias("messages"),
                 F.count("tags").alias("with_tags"), F.count_distinct("tags").alias("distinct_tags"),
                 F.sum(F.when(F.size("keys") > 0, 1).otherwise(0)).alias("with_keys")))
    return (base.join(keys, "topic", "left")
            .withColumn("keys_per_keyed_message",
                        F.when(F.col("with_keys") > 0, F.col("key_occurrences") / F.col("with_keys")))
            .select("topic", "messages", "with_tags", "distinct_tags", "with_keys", "distinct_keys",
                    "keys_per_keyed_message")
            .orderBy("topic"))


# ------------------------------------------------------------------------------------------- duplicates


def duplicate_uniq_keys(records: DataFrame, *, include_system_topics: bool = False) -> DataFrame:
    """Unique keys stored more than once: producer retries (a send that timed out but was stored, then sent
    again — possibly to another broker).

    A record is identified by (broker, physical offset), so a master's and its slave's copy of one record
    are one record, not a duplicate. Retry, DLQ and schedule topics keep the original's UNIQ_KEY by design
    and are left out unless ``include_system_topics``. Columns: uniq_key, copies, topics, brokers,
    first_store_ms, last_store_ms, spread_ms.
    """
    rows = records.where(F.col("uniq_key").isNotNull())
    if not include_system_topics:
        rows = rows.where(~is_system_topic(F.col("topic")))
    copies = rows.select("uniq_key", "topic", "broker", "physical_offset", "store_timestamp").dropDuplicates(
        ["uniq_key", "broker", "physical_offset"])
    return (copies.groupBy("uniq_key")
            .agg(F.count(F.lit(1)).alias("copies"), F.array_sort(F.collect_set("topic")).alias("topics"),
                 F.array_sort(F.collect_set("broker")).alias("brokers"),
                 F.min("store_timestamp").alias("first_store_ms"), F.max("store_timestamp").alias("last_store_ms"))
            .where(F.col("copies") > 1)
            .withColumn("spread_ms", F.col("last_store_ms") - F.col("first_store_ms"))
            .orderBy(F.desc("copies"), "uniq_key"))


# ------------------------------------------------------------------------------------------- producers


def producer_host(born_host: Column) -> Column:
    """The IP of a ``ip:port`` born host (``[v6]:port`` -> ``v6``)."""
    return F.regexp_replace(F.regexp_replace(born_host, r":\d+$", ""), r"^\[(.*)\]$", "$1")


def producer_rates(records: DataFrame) -> DataFrame:
    """Per producer host (born host IP): messages, bytes, connections (ip:port seen), topics, first and
    last store time, average messages per second over that span (at least one second) and the busiest
    minute."""
    rows = records.select(producer_host(F.col("born_host")).alias("producer_host"), "born_host", "topic", "size",
                          "store_timestamp")
    per_minute = (rows.groupBy("producer_host", _minute(F.col("store_timestamp")).alias("minute"))
                  .agg(F.count(F.lit(1)).alias("n"))
                  .groupBy("producer_host").agg(F.max("n").alias("peak_per_minute")))
    totals = (rows.groupBy("producer_host")
              .agg(F.count(F.lit(1)).alias("messages"), F.sum("size").alias("bytes"),
                   F.count_distinct("born_host").alias("connections"), F.count_distinct("topic").alias("topics"),
                   F.min("store_timestamp").alias("first_store_ms"), F.max("store_timestamp").alias("last_store_ms")))
    span_s = F.greatest((F.col("last_store_ms") - F.col("first_store_ms")) / 1000.0, F.lit(1.0))
    return (totals.join(per_minute, "producer_host")
            .withColumn("avg_per_s", F.col("messages") / span_s)
            .orderBy(F.desc("messages"), "producer_host"))


# ------------------------------------------------------------------------------------------- replication


def _comparable(column: str) -> Column:
    if column == "properties":  # maps have no equality in Spark SQL: compare their sorted entries
        return F.array_sort(F.map_entries(F.col(column)))
    return F.col(column)


def _ranges(master: DataFrame, slave: DataFrame) -> DataFrame:
    """One row: the commit-log range both exports cover (``lo``, ``hi``; records wholly inside count)."""
    def extent(df: DataFrame, tag: str) -> DataFrame:
        return df.agg(F.min("physical_offset").alias(f"{tag}_lo"),
                      F.max(F.col("physical_offset") + F.col("size")).alias(f"{tag}_hi"))
    both = extent(master, "m").crossJoin(extent(slave, "s"))
    return both.select(F.greatest("m_lo", "s_lo").alias("lo"), F.least("m_hi", "s_hi").alias("hi"))


def _side(df: DataFrame, tag: str) -> DataFrame:
    return df.select(F.col("physical_offset"),
                     *[_comparable(c).alias(f"{tag}_{c}") for c in REPLICA_FIELDS])


def replication_check(master: DataFrame, slave: DataFrame) -> DataFrame:
    """Records that differ between a master's and a slave's export, matched by physical offset (replication
    copies bytes, so a record lives at the same offset on both).

    Only the range both exports cover is compared (a slave that joined late or lags is not "missing"
    anything outside it; :func:`replication_summary` counts those). Columns: physical_offset, status
    (``missing_on_slave``, ``extra_on_slave``, ``differs``), topic, queue_id, queue_offset, size (the
    master's, else the slave's), differing_fields (for ``differs``).
    """
    joined = (_side(master, "m").join(_side(slave, "s"), "physical_offset", "full_outer")
              .crossJoin(_ranges(master, slave)))
    end = F.coalesce(F.col("m_size"), F.col("s_size")) + F.col("physical_offset")
    inside = (F.col("physical_offset") >= F.col("lo")) & (end <= F.col("hi"))
    diffs = F.filter(F.array(*[F.when(~F.col(f"m_{c}").eqNullSafe(F.col(f"s_{c}")), F.lit(c))
                               for c in REPLICA_FIELDS]), lambda x: x.isNotNull())
    status = (F.when(F.col("s_size").isNull(), "missing_on_slave")
              .when(F.col("m_size").isNull(), "extra_on_slave")
              .when(F.size("differing_fields") > 0, "differs"))
    return (joined.where(inside)
            .withColumn("differing_fields", diffs)
            .withColumn("status", status)
            .where(F.col("status").isNotNull())
            .select("physical_offset", "status",
                    *[F.coalesce(F.col(f"m_{c}"), F.col(f"s_{c}")).alias(c)
                      for c in ("topic", "queue_id", "queue_offset", "size")],
                    F.when(F.col("status") == "differs", F.col("differing_fields")).alias("differing_fields"))
            .orderBy("physical_offset"))


def replication_summary(master: DataFrame, slave: DataFrame, check: DataFrame | None = None) -> DataFrame:
    """One row: records on each side, the compared range, and how many records match, are missing on the
    slave, extra on the slave, differ, or lie outside the compared range on either side.

    ``check`` is :func:`replication_check`'s result for the same pair when the caller already has it (the
    job passes the copy it wrote), so the full outer join is not planned twice."""
    ranges = _ranges(master, slave)

    def counted(df: DataFrame, tag: str) -> DataFrame:
        end = F.col("physical_offset") + F.col("size")
        inside = (F.col("physical_offset") >= F.col("lo")) & (end <= F.col("hi"))
        return (df.select("physical_offset", "size").crossJoin(ranges)
                .agg(F.count(F.lit(1)).alias(f"{tag}_records"),
                     F.sum(F.when(~inside, 1).otherwise(0)).alias(f"{tag}_outside_range")))

    problems = ((replication_check(master, slave) if check is None else check)
                .agg(F.sum(F.when(F.col("status") == "missing_on_slave", 1).otherwise(0)).alias("missing_on_slave"),
                     F.sum(F.when(F.col("status") == "extra_on_slave", 1).otherwise(0)).alias("extra_on_slave"),
                     F.sum(F.when(F.col("status") == "differs", 1).otherwise(0)).alias("differs")))
    summary = counted(master, "master").crossJoin(counted(slave, "slave")).crossJoin(ranges).crossJoin(problems)
    zero = F.lit(0).cast("long")
    inside_master = F.col("master_records") - F.col("master_outside_range")
    return summary.select(
        "master_records", "slave_records", F.col("lo").alias("compared_from"), F.col("hi").alias("compared_to"),
        (inside_master - F.coalesce("missing_on_slave", zero) - F.coalesce("differs", zero)).alias("matching"),
        F.coalesce("missing_on_slave", zero).alias("missing_on_slave"),
        F.coalesce("extra_on_slave", zero).alias("extra_on_slave"),
        F.coalesce("differs", zero).alias("differs"),
        "master_outside_range", "slave_outside_range")


# ------------------------------------------------------------------------------------------- exports


@dataclass(frozen=True, slots=True)
class ExportMeta:
    """What the job knows about one input (from its manifest)."""

    path: str
    cluster: str
    broker: str
    broker_id: int
    role: str
    records: int

    @property
    def is_master(self) -> bool:
        """A master by role, or by id when the role is unknown."""
        return self.role in MASTER_ROLES or (self.role not in ("SLAVE",) and self.broker_id == 0)


def primary_exports(exports: Sequence[ExportMeta]) -> list[str]:
    """One export per broker group (cluster, broker name) for traffic analyses: a master's if there is one,
    else the one with the most records."""
    best: dict[tuple[str, str], ExportMeta] = {}
    for meta in exports:
        key = (meta.cluster, meta.broker)
        current = best.get(key)
        if current is None or (meta.is_master, meta.records) > (current.is_master, current.records):
            best[key] = meta
    return [m.path for m in exports if best[(m.cluster, m.broker)] is m]


def replica_pairs(exports: Sequence[ExportMeta]) -> list[tuple[ExportMeta, ExportMeta]]:
    """(master, slave) pairs of the same broker group, for :func:`replication_check`."""
    pairs = []
    for master in exports:
        if not master.is_master:
            continue
        for other in exports:
            if other is not master and not other.is_master and (other.cluster, other.broker) == (
                    master.cluster, master.broker):
                pairs.append((master, other))
    return pairs
