"""The Spark data source on exports of a real PocketMQ cluster run, on hand-built RocketMQ files, and on
damaged exports.

The cluster run: a name server and two brokers in one event loop (1 MiB commit-log files, SYNC_FLUSH), a
producer from the SDK sending single messages with tags and keys, batches, and bodies over 4 KiB that the
SDK compresses; the brokers stop cleanly and each store is exported. Every message sent must come back
exactly once, with the fields the send result and the message say.
"""

from __future__ import annotations

import asyncio
import json
import random
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pocketmq.admin.export import BrokerIdentity, export_commit_log
from pocketmq.client import Message, Producer, SendResult
from pocketmq.common.record import decode_message_id
from pocketmq.spark_jobs.manifest import load_manifest
from pocketmq.spark_jobs.source import FORMAT_NAME, read_exports
from tests.cluster import start_broker, start_namesrv
from tests.spark.support import HandRecord, patch, records_of, write_hand_commit_log

WORDS = [b"alpha", b"beta", b"gamma", b"delta", b"order", b"paid", b"shipped", b"x" * 7]


@dataclass
class Sent:
    uniq_key: str
    message: Message
    body: bytes
    broker: str
    queue_id: int
    queue_offset: int
    physical_offset: int
    store_host: str


@dataclass
class ClusterRun:
    exports: list[str]
    sent: dict[str, Sent]


def _sent(messages: list[Message], bodies: list[bytes], result: SendResult) -> list[Sent]:
    uniq = result.msg_id.split(",")
    offsets = result.offset_msg_id.split(",")
    out = []
    for i, (msg, body) in enumerate(zip(messages, bodies, strict=True)):
        ip, port, phys = decode_message_id(offsets[i])
        assert msg.uniq_key == uniq[i]
        out.append(Sent(uniq[i], msg, body, result.message_queue.broker_name, result.message_queue.queue_id,
                        result.queue_offset + i, phys, f"{ip}:{port}"))
    return out


async def _produce(tmp: Path) -> ClusterRun:
    rnd = random.Random(8)
    ns = await start_namesrv(tmp)
    brokers = [await start_broker(tmp, name, ns.addr, {"flushDiskType": "SYNC_FLUSH"})
               for name in ("broker-a", "broker-b")]
    sent: list[Sent] = []
    try:
        async with Producer("AnalyticsPG", namesrv_addr=ns.addr) as producer:
            for i in range(700):  # ~3.5 KB of noise each, under the compression threshold: files roll over
                body = rnd.randbytes(3000 + i % 900)
                msg = Message("Orders", body, tags=f"t{i % 3}", keys=[f"order-{i}", "common"], flag=i % 5)
                sent += _sent([msg], [body], await producer.send(msg))
            for i in range(30):  # over 4 KiB: the SDK compresses these
                body = b" ".join(rnd.choice(WORDS) for _ in range(1500))
                msg = Message("Orders", body, tags="big", keys=f"big-{i}")
                sent += _sent([msg], [body], await producer.send(msg))
            for b in range(15):
                bodies = [f"audit-{b}-{j}".encode() * 3 for j in range(20)]
                batch = [Message("Audit", body, keys=f"a{b}-{j}") for j, body in enumerate(bodies)]
                sent += _sent(batch, bodies, await producer.send_batch(batch))
    finally:
        for broker in brokers:
            await broker.stop()
        await ns.stop()
    exports = []
    for broker in brokers:
        out = tmp / f"export-{broker.config.broker_name}"
        export_commit_log(broker.config.store.store_path_root_dir, out, split_interval=64 * 1024,
                          identity=BrokerIdentity(broker=broker.config.broker_name, broker_id=0, role="SYNC_MASTER"))
        exports.append(str(out))
    return ClusterRun(exports, {s.uniq_key: s for s in sent})


@pytest.fixture(scope="module")
def cluster_run(tmp_path_factory: pytest.TempPathFactory) -> ClusterRun:
    return asyncio.run(_produce(tmp_path_factory.mktemp("cluster")))


def test_every_message_of_a_cluster_run_is_read_once_with_its_fields(spark: Any, cluster_run: ClusterRun) -> None:
    manifests = [load_manifest(e) for e in cluster_run.exports]
    assert max(len(m.files) for m in manifests) >= 2  # at least one broker rolled over to a new file
    for m in manifests:  # every file but the last ends with a blank marker, then padding
        assert all(f.data_end < f.size == f.file_size for f in m.files[:-1])
    df = read_exports(spark, cluster_run.exports, with_body=True, decompress=True)
    rows = [r.asDict() for r in df.where(df.topic.isin("Orders", "Audit")).collect()]
    assert len(rows) == len(cluster_run.sent) == 700 + 30 + 300
    assert {r["uniq_key"] for r in rows} == set(cluster_run.sent)
    for row in rows:
        sent = cluster_run.sent[row["uniq_key"]]
        msg = sent.message
        assert (row["topic"], row["body"], row["flag"]) == (msg.topic, sent.body, msg.flag)
        assert row["tags"] == msg.tags and row["keys"] == msg.key_list
        assert (row["broker"], row["queue_id"], row["queue_offset"]) == (sent.broker, sent.queue_id,
                                                                         sent.queue_offset)
        assert row["physical_offset"] == sent.physical_offset and row["store_host"] == sent.store_host
        assert row["export"].endswith(f"export-{sent.broker}")
        assert row["born_host"].startswith("127.0.0.1:") and row["body_crc_ok"]
        assert row["properties"]["UNIQ_KEY"] == msg.uniq_key
        assert bool(row["sys_flag"] & 0x1) == (len(sent.body) > 4096)
        assert 0 <= row["store_timestamp"] - row["born_timestamp"] < 60_000
    compressed = [r for r in rows if r["sys_flag"] & 0x1]
    assert len(compressed) == 30 and all(r["size"] < 4096 for r in compressed)  # stored compressed


def test_ranges_inside_files_give_the_same_rows(spark: Any, cluster_run: ClusterRun) -> None:
    whole = read_exports(spark, cluster_run.exports, split_size=1 << 40)
    split = read_exports(spark, cluster_run.exports, split_size=64 * 1024)
    files = sum(len(load_manifest(e).files) for e in cluster_run.exports)
    assert whole.rdd.getNumPartitions() == files
    assert split.rdd.getNumPartitions() > 2 * files
    key = ["export", "physical_offset"]
    assert [tuple(r) for r in split.select(*key, "uniq_key").orderBy(*key).collect()] == [
        tuple(r) for r in whole.select(*key, "uniq_key").orderBy(*key).collect()]


def test_format_name_and_load_paths(spark: Any, cluster_run: ClusterRun) -> None:
    one = spark.read.format(FORMAT_NAME).load(cluster_run.exports[0])
    assert set(one.columns) >= {"topic", "properties", "body_crc_ok"} and "body" not in one.columns
    assert one.count() == load_manifest(cluster_run.exports[0]).records
    both = spark.read.format(FORMAT_NAME).option("paths", json.dumps(cluster_run.exports)).option(
        "withBody", "true").load()
    assert "body" in both.columns
    total = sum(load_manifest(e).records for e in cluster_run.exports)
    assert both.count() == total
    assert spark.read.format(FORMAT_NAME).load(cluster_run.exports).count() == total


def test_hand_built_rocketmq_directory_without_manifest(spark: Any, tmp_path: Path) -> None:
    records = [
        HandRecord("V6", b"one", "TAGS\x01a\x02KEYS\x01k", born_host=("2001:db8::7", 6000), store_host=("::1", 10911),
                   born_timestamp=10, store_timestamp=12),
        HandRecord("V4", b"two", "UNIQ_KEY\x01U2\x02", queue_id=3, queue_offset=41, born_host=("10.9.8.7", 1234),
                   store_host=("10.0.0.1", 10911), born_timestamp=20, store_timestamp=25),
        HandRecord("V4", zlib.compress(b"three" * 100), "", sys_flag=1, born_timestamp=30, store_timestamp=31),
    ]
    write_hand_commit_log(tmp_path / "store" / "commitlog", [records[:2], records[2:]], 1024)
    df = read_exports(spark, [str(tmp_path / "store")], with_body=True, decompress=True)
    rows = [r.asDict() for r in df.orderBy("physical_offset").collect()]
    assert [(r["topic"], r["born_host"], r["store_host"], r["physical_offset"]) for r in rows] == [
        ("V6", "[2001:db8::7]:6000", "[::1]:10911", 0),
        ("V4", "10.9.8.7:1234", "10.0.0.1:10911", records[1].physical_offset),
        ("V4", "127.0.0.1:40000", "127.0.0.1:10911", 1024),
    ]
    assert rows[0]["properties"] == {"TAGS": "a", "KEYS": "k"} and rows[0]["keys"] == ["k"]
    assert (rows[1]["uniq_key"], rows[1]["queue_id"], rows[1]["queue_offset"]) == ("U2", 3, 41)
    assert rows[2]["body"] == b"three" * 100 and rows[2]["broker"] == "store"


def _damaged_copy(source: str, target: Path) -> Path:
    import shutil

    shutil.copytree(source, target)
    return target


def test_a_truncated_export_fails_with_file_and_offset(spark: Any, cluster_run: ClusterRun, tmp_path: Path) -> None:
    export = _damaged_copy(cluster_run.exports[0], tmp_path / "export")
    first = load_manifest(export).files[0]
    victim = export / "commitlog" / first.name
    with open(victim, "r+b") as f:
        f.truncate(5000)
    with pytest.raises(Exception) as caught:
        read_exports(spark, [str(export)]).count()
    text = str(caught.value)
    assert str(victim) in text and f"truncated at commit-log offset {first.start_offset + 5000}" in text


def test_a_corrupted_record_fails_the_task_with_file_and_offset(spark: Any, cluster_run: ClusterRun,
                                                                tmp_path: Path) -> None:
    export = _damaged_copy(cluster_run.exports[0], tmp_path / "export")
    first = load_manifest(export).files[0]
    victim = export / "commitlog" / first.name
    pos, record = records_of(victim)[10]
    patch(victim, pos + 4, b"\x00\x00\x00\x00")  # MAGICCODE
    with pytest.raises(Exception) as caught:
        read_exports(spark, [str(export)]).count()
    text = str(caught.value)
    assert str(victim) in text
    assert f"bad record at commit-log offset {record.physical_offset}" in text and "bad magic code" in text
