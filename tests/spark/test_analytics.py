"""Each analysis on small fixed inputs with known answers; the replication check on the live exports of a
real SYNC_MASTER/SLAVE group (they agree), and on a master's and a slave's export made from copies of one
store, one record removed and one altered on purpose (it finds them)."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path
from typing import Any

import pytest

from pocketmq.admin.export import BrokerIdentity, export_commit_log, export_main
from pocketmq.client import Message, Producer
from pocketmq.spark_jobs import analytics
from pocketmq.spark_jobs.analytics import ExportMeta
from pocketmq.spark_jobs.manifest import load_manifest
from pocketmq.spark_jobs.records import spark_ddl
from pocketmq.spark_jobs.source import read_exports
from pocketmq.store.config import BrokerRole
from tests.cluster import start_broker, start_namesrv
from tests.helpers import eventually
from tests.spark.support import blank_out_from, data_files, make_store, patch, records_of

DEFAULTS: dict[str, Any] = {
    "export": "/e/master", "broker": "broker-a", "topic": "T", "queue_id": 0, "queue_offset": 0,
    "physical_offset": 0, "size": 100, "sys_flag": 0, "flag": 0, "born_timestamp": 0, "store_timestamp": 0,
    "born_host": "10.0.0.1:1000", "store_host": "10.0.0.9:10911", "reconsume_times": 0,
    "prepared_transaction_offset": 0, "body_crc": 0, "body_crc_ok": True, "tags": None, "keys": None,
    "uniq_key": None, "properties": {},
}
MINUTE = 60_000
T0 = 1_714_557_600_000  # 2024-05-01T10:00:00Z


def frame(spark: Any, *rows: dict[str, Any]) -> Any:
    columns = list(DEFAULTS)
    data = []
    for i, row in enumerate(rows):
        full = {**DEFAULTS, "physical_offset": i * 100, **row}
        data.append(tuple(full[c] for c in columns))
    return spark.createDataFrame(data, schema=spark_ddl(False))


def collect(df: Any) -> list[dict[str, Any]]:
    return [r.asDict(recursive=True) for r in df.collect()]


def test_by_topic_queue_and_minute(spark: Any) -> None:
    records = frame(
        spark,
        {"topic": "A", "queue_id": 0, "size": 100, "store_timestamp": T0 + 1_000},
        {"topic": "A", "queue_id": 0, "size": 200, "store_timestamp": T0 + 59_999, "body_crc_ok": False},
        {"topic": "A", "queue_id": 1, "size": 300, "store_timestamp": T0 + MINUTE, "queue_offset": 5},
        {"topic": "A", "queue_id": 1, "size": 100, "store_timestamp": T0 + MINUTE + 1, "queue_offset": 6},
        {"topic": "B", "queue_id": 0, "size": 50, "store_timestamp": T0 + 2 * MINUTE},
    )
    assert collect(analytics.by_topic(records)) == [
        {"topic": "A", "messages": 4, "bytes": 700, "first_store_ms": T0 + 1_000, "last_store_ms": T0 + MINUTE + 1,
         "bad_body_crc": 1},
        {"topic": "B", "messages": 1, "bytes": 50, "first_store_ms": T0 + 2 * MINUTE,
         "last_store_ms": T0 + 2 * MINUTE, "bad_body_crc": 0},
    ]
    queues = collect(analytics.by_queue(records))
    assert [(q["topic"], q["queue_id"], q["messages"], q["bytes"], q["share"], q["vs_mean"]) for q in queues] == [
        ("A", 0, 2, 300, 0.5, 1.0), ("A", 1, 2, 400, 0.5, 1.0), ("B", 0, 1, 50, 1.0, 1.0)]
    assert (queues[1]["min_queue_offset"], queues[1]["max_queue_offset"]) == (5, 6)
    minutes = analytics.by_minute(records).selectExpr("topic", "unix_millis(minute) AS minute", "messages", "bytes")
    assert collect(minutes) == [
        {"topic": "A", "minute": T0, "messages": 2, "bytes": 300},
        {"topic": "A", "minute": T0 + MINUTE, "messages": 2, "bytes": 400},
        {"topic": "B", "minute": T0 + 2 * MINUTE, "messages": 1, "bytes": 50},
    ]


def test_store_latency_percentiles_and_histogram(spark: Any) -> None:
    rows = [{"topic": "Fast", "born_timestamp": T0, "store_timestamp": T0 + ms} for ms in range(1, 101)]
    rows += [{"topic": "Skewed", "born_timestamp": T0, "store_timestamp": T0 + ms} for ms in (-3, 0, 3, 70_000)]
    records = frame(spark, *rows)
    latency = collect(analytics.store_latency(records))
    assert latency[0] == {"topic": "Fast", "messages": 100, "min_ms": 1, "mean_ms": 50.5, "p50_ms": 50,
                          "p90_ms": 90, "p99_ms": 99, "p99_9_ms": 100, "max_ms": 100, "negative": 0}
    assert (latency[1]["topic"], latency[1]["min_ms"], latency[1]["max_ms"], latency[1]["negative"]) == (
        "Skewed", -3, 70_000, 1)
    histogram = collect(analytics.latency_histogram(records).where("topic = 'Skewed'"))
    assert [(h["bucket"], h["low_ms"], h["high_ms"], h["messages"]) for h in histogram] == [
        (0, None, 0, 1), (1, 0, 1, 1), (3, 2, 5, 1), (15, 60_000, None, 1)]
    fast = collect(analytics.latency_histogram(records).where("topic = 'Fast'"))
    assert sum(h["messages"] for h in fast) == 100
    assert {h["low_ms"]: h["messages"] for h in fast}[50] == 50  # 50..99 ms


def test_top_tags_keys_and_their_statistics(spark: Any) -> None:
    records = frame(
        spark,
        {"topic": "T", "tags": "a", "keys": ["k1", "k2"]},
        {"topic": "T", "tags": "a", "keys": ["k1"]},
        {"topic": "T", "tags": "a"},
        {"topic": "T", "tags": "c", "keys": ["k3"]},
        {"topic": "T", "tags": "b"},
        {"topic": "T", "tags": "b"},
        {"topic": "T", "tags": "c"},
        {"topic": "U"},
    )
    assert [(r["tag"], r["messages"], r["rank"]) for r in collect(analytics.top_tags(records, 2))] == [
        ("a", 3, 1), ("b", 2, 2)]  # b and c tie at 2: by name
    assert [(r["key"], r["messages"], r["rank"]) for r in collect(analytics.top_keys(records, 5))] == [
        ("k1", 2, 1), ("k2", 1, 2), ("k3", 1, 3)]
    stats = collect(analytics.tag_key_stats(records))
    assert stats == [
        {"topic": "T", "messages": 7, "with_tags": 7, "distinct_tags": 3, "with_keys": 3, "distinct_keys": 3,
         "keys_per_keyed_message": 4 / 3},
        {"topic": "U", "messages": 1, "with_tags": 0, "distinct_tags": 0, "with_keys": 0, "distinct_keys": 0,
         "keys_per_keyed_message": None},
    ]


def test_duplicate_unique_keys_are_retries_not_replicas(spark: Any) -> None:
    records = frame(
        spark,
        {"uniq_key": "U1", "physical_offset": 0, "store_timestamp": T0},
        {"uniq_key": "U1", "physical_offset": 500, "store_timestamp": T0 + 3_000},   # the retry
        {"uniq_key": "U1", "physical_offset": 0, "export": "/e/slave", "store_timestamp": T0},  # a replica
        {"uniq_key": "U1", "broker": "broker-b", "physical_offset": 0, "store_timestamp": T0 + 3_500},
        {"uniq_key": "U2", "physical_offset": 600},
        {"uniq_key": "U2", "physical_offset": 600, "export": "/e/slave"},
        {"uniq_key": "U3", "physical_offset": 700},
        {"uniq_key": "U3", "physical_offset": 800, "topic": "%RETRY%G"},
        {"uniq_key": None, "physical_offset": 900},
        {"uniq_key": None, "physical_offset": 1000},
    )
    assert collect(analytics.duplicate_uniq_keys(records)) == [
        {"uniq_key": "U1", "copies": 3, "topics": ["T"], "brokers": ["broker-a", "broker-b"],
         "first_store_ms": T0, "last_store_ms": T0 + 3_500, "spread_ms": 3_500}]
    with_system = collect(analytics.duplicate_uniq_keys(records, include_system_topics=True))
    assert [(d["uniq_key"], d["copies"], d["topics"]) for d in with_system] == [
        ("U1", 3, ["T"]), ("U3", 2, ["%RETRY%G", "T"])]


def test_producer_rates(spark: Any) -> None:
    rows = [{"born_host": "10.0.0.1:1000", "store_timestamp": T0 + i * 100, "size": 10} for i in range(30)]
    rows += [{"born_host": "10.0.0.1:1001", "store_timestamp": T0 + MINUTE + i, "topic": "U"} for i in range(10)]
    rows += [{"born_host": "[::1]:5", "store_timestamp": T0}]
    rates = collect(analytics.producer_rates(frame(spark, *rows)))
    columns = ("producer_host", "messages", "connections", "topics", "peak_per_minute")
    assert [tuple(r[c] for c in columns) for r in rates] == [("10.0.0.1", 40, 2, 2, 30), ("::1", 1, 1, 1, 1)]
    assert rates[0]["bytes"] == 30 * 10 + 10 * 100
    assert rates[0]["avg_per_s"] == pytest.approx(40 / ((MINUTE + 9) / 1000))
    assert rates[1]["avg_per_s"] == 1.0  # a span under one second counts as one second


def test_primary_exports_and_replica_pairs() -> None:
    metas = [ExportMeta("/m", "C", "a", 0, "SYNC_MASTER", 10), ExportMeta("/s", "C", "a", 1, "SLAVE", 12),
             ExportMeta("/s2", "C", "b", 1, "SLAVE", 5), ExportMeta("/s3", "C", "b", 2, "SLAVE", 7),
             ExportMeta("/raw", "UNKNOWN", "x", -1, "UNKNOWN", -1)]
    assert analytics.primary_exports(metas) == ["/m", "/s3", "/raw"]
    assert [(m.path, s.path) for m, s in analytics.replica_pairs(metas)] == [("/m", "/s")]


# ------------------------------------------------------------------------------------------- replication


@pytest.fixture(scope="module")
def replicas(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Master and slave exports of copies of one store: on the slave the last record of the first file is
    removed (a blank marker in its place) and one record's TAGS value is altered; on the master the last
    record of the second file is removed, so the slave has one record the master lacks."""
    tmp = tmp_path_factory.mktemp("replicas")
    store = make_store(tmp / "store", 500)
    master, slave = tmp / "master-store", tmp / "slave-store"
    shutil.copytree(store, master)
    shutil.copytree(store, slave)
    files = data_files(slave)
    removed_pos, removed = records_of(files[0])[-1]
    blank_out_from(files[0], removed_pos)
    altered_pos, altered = records_of(files[1])[4]
    props_at = altered_pos + altered.total_size - len(altered.properties.encode())
    tag_at = altered.properties.encode().index(b"TAGS\x01") + 5
    patch(files[1], props_at + tag_at, b"X")  # tag0 -> Xag0: same length, the body CRC still holds
    master_files = data_files(master)
    extra_pos, extra = records_of(master_files[1])[-1]
    blank_out_from(master_files[1], extra_pos)
    export_commit_log(master, tmp / "master", identity=BrokerIdentity(broker="broker-a", broker_id=0,
                                                                        role="SYNC_MASTER"))
    export_commit_log(slave, tmp / "slave", identity=BrokerIdentity(broker="broker-a", broker_id=1, role="SLAVE"))
    return {"master": str(tmp / "master"), "slave": str(tmp / "slave"), "removed": removed, "altered": altered,
            "extra": extra}


def test_replication_check_finds_the_removed_altered_and_extra_records(spark: Any,
                                                                       replicas: dict[str, Any]) -> None:
    records = read_exports(spark, [replicas["master"], replicas["slave"]])
    master = records.where(records.export == replicas["master"])
    slave = records.where(records.export == replicas["slave"])
    check = analytics.replication_check(master, slave).cache()
    problems = collect(check)
    removed, altered, extra = replicas["removed"], replicas["altered"], replicas["extra"]
    assert [(p["physical_offset"], p["status"], p["differing_fields"]) for p in problems] == [
        (removed.physical_offset, "missing_on_slave", None),
        (altered.physical_offset, "differs", ["properties"]),
        (extra.physical_offset, "extra_on_slave", None),
    ]
    assert (problems[0]["topic"], problems[0]["queue_id"], problems[0]["queue_offset"], problems[0]["size"]) == (
        removed.topic, removed.queue_id, removed.queue_offset, removed.total_size)
    (summary,) = collect(analytics.replication_summary(master, slave, check))
    check.unpersist()
    assert summary == {
        "master_records": 499, "slave_records": 499, "compared_from": 0,
        "compared_to": summary["compared_to"], "matching": 497, "missing_on_slave": 1, "extra_on_slave": 1,
        "differs": 1, "master_outside_range": 0, "slave_outside_range": 0,
    }


def test_replication_check_ignores_what_a_lagging_slave_has_not_received(spark: Any,
                                                                         replicas: dict[str, Any]) -> None:
    records = read_exports(spark, [replicas["master"]])
    tail = records.orderBy("physical_offset").collect()[-10]["physical_offset"]
    slave = records.where(records.physical_offset < tail)
    assert collect(analytics.replication_check(records, slave)) == []
    (summary,) = collect(analytics.replication_summary(records, slave))
    assert (summary["matching"], summary["master_outside_range"], summary["missing_on_slave"]) == (489, 10, 0)


async def _replicated_group(tmp: Path) -> tuple[str, str]:
    """A SYNC_MASTER and its slave take 350 messages from the SDK (1 MiB files: a roll-over); both are
    exported while running: the master up to what the slave acknowledged, the slave up to its flushed end."""
    ns = await start_namesrv(tmp)
    master = await start_broker(tmp, "broker-r", ns.addr, broker_role=BrokerRole.SYNC_MASTER)
    slave = await start_broker(tmp, "broker-r", ns.addr, broker_role=BrokerRole.SLAVE, broker_id=1)
    try:
        await eventually(lambda: master.ha_service is not None and master.ha_service.connection_count == 1,
                         message="slave attached")
        async with Producer("ReplicaPG", namesrv_addr=ns.addr) as producer:
            for i in range(350):  # 3.5 KB bodies: under the compression threshold
                body = i.to_bytes(2, "big") * 1750
                await producer.send(Message("Replicated", body, tags=f"t{i % 2}", keys=f"r{i}"))
        assert master.store is not None and slave.store is not None
        m, s = master.store, slave.store
        await eventually(lambda: s.flushed_phy_offset == m.max_phy_offset, message="the slave flushed everything")
        ha = master.ha_service
        assert ha is not None
        # The master's export ends at min(its flushed end, the slave's acknowledgement as the master knows it):
        # both reach the end a moment after the slave has flushed (ASYNC_FLUSH, the slave's next report).
        await eventually(lambda: m.flushed_phy_offset == m.max_phy_offset == ha.confirm_offset,
                         message="the master flushed everything and knows the slave has it")
        argv = ["--cluster", "C", "--broker-name", "broker-r", "--quiet"]
        assert await asyncio.to_thread(export_main, [
            *argv, "--store-dir", m.config.store_path_root_dir, "--out", str(tmp / "master"),
            "--broker-addr", master.addr, "--consistency", "replicated"]) == 0
        assert await asyncio.to_thread(export_main, [
            *argv, "--store-dir", s.config.store_path_root_dir, "--out", str(tmp / "slave"),
            "--broker-addr", slave.addr, "--broker-id", "1"]) == 0
    finally:
        await slave.stop()
        await master.stop()
        await ns.stop()
    return str(tmp / "master"), str(tmp / "slave")


def test_replication_check_on_a_real_master_and_slave(spark: Any, tmp_path: Path) -> None:
    master_path, slave_path = asyncio.run(_replicated_group(tmp_path))
    master_manifest, slave_manifest = load_manifest(master_path), load_manifest(slave_path)
    assert (master_manifest.role, slave_manifest.role) == ("SYNC_MASTER", "SLAVE")
    assert master_manifest.source["consistency"] == "replicated" and len(master_manifest.files) >= 2
    assert master_manifest.last_offset == slave_manifest.last_offset
    metas = [ExportMeta(p, m.cluster, m.broker, m.broker_id, m.role, m.records)
             for p, m in ((master_path, master_manifest), (slave_path, slave_manifest))]
    assert [(a.path, b.path) for a, b in analytics.replica_pairs(metas)] == [(master_path, slave_path)]
    records = read_exports(spark, [master_path, slave_path])
    master = records.where(records.export == master_path)
    slave = records.where(records.export == slave_path)
    assert collect(analytics.replication_check(master, slave)) == []
    (summary,) = collect(analytics.replication_summary(master, slave))
    assert summary["matching"] == summary["master_records"] == summary["slave_records"] == master_manifest.records
    assert master.where(master.topic == "Replicated").count() == 350
