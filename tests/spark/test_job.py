"""The whole job on a small generated cluster export (a master and its slave), and its CLI's error path."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from pocketmq.admin.export import BrokerIdentity, export_commit_log
from pocketmq.bench.spark_bench import write_synthetic_store
from pocketmq.spark_jobs.job import explain_failure, main, run_job
from pocketmq.spark_jobs.manifest import ExportError, load_manifest
from tests.spark.support import data_files, patch, records_of

ANALYSES = ("by_topic", "by_queue", "by_minute", "store_latency", "latency_histogram", "top_tags", "top_keys",
            "tag_key_stats", "duplicate_uniq_keys", "producer_rates", "replication_0", "replication_0_summary")


@pytest.fixture(scope="module")
def exports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("job")
    synthetic = write_synthetic_store(tmp / "store", messages=4000, file_size=512 * 1024, minutes=10)
    shutil.copytree(tmp / "store", tmp / "slave-store")
    victim = data_files(tmp / "slave-store")[1]
    pos, record = records_of(victim)[2]
    patch(victim, pos + 56, (record.store_timestamp + 1).to_bytes(8, "big"))  # STORETIMESTAMP differs
    export_commit_log(tmp / "store", tmp / "master", identity=BrokerIdentity(broker="bench-a", broker_id=0,
                                                                            role="SYNC_MASTER"))
    export_commit_log(tmp / "slave-store", tmp / "slave", identity=BrokerIdentity(broker="bench-a", broker_id=1,
                                                                                 role="SLAVE"))
    return {"tmp": tmp, "master": str(tmp / "master"), "slave": str(tmp / "slave"), "synthetic": synthetic,
            "altered": record}


def test_job_writes_parquet_csv_and_a_report(spark: Any, exports: dict[str, Any]) -> None:
    out = exports["tmp"] / "out"
    result = run_job(spark, [exports["master"], exports["slave"]], out, top=5)
    assert result.records == exports["synthetic"].messages == 4000  # the slave's copy is not counted twice
    for name in ANALYSES:
        assert spark.read.parquet(str(out / "parquet" / name)).count() >= 1, name
        (csv,) = list((out / "csv" / name).glob("part-*.csv"))
        assert csv.read_text().splitlines()[0].split(",")[0], name  # a header line
    assert spark.read.parquet(str(out / "parquet" / "records")).count() == 8000  # both exports decoded
    assert not (out / "csv" / "records").exists()  # records: Parquet only
    topics = {r["topic"]: r["messages"] for r in spark.read.parquet(str(out / "parquet" / "by_topic")).collect()}
    assert sum(topics.values()) == 4000 and topics["Orders"] > topics["Audit"]
    duplicates = spark.read.parquet(str(out / "parquet" / "duplicate_uniq_keys")).collect()
    assert len(duplicates) == exports["synthetic"].retries and all(d["copies"] == 2 for d in duplicates)
    (problem,) = spark.read.parquet(str(out / "parquet" / "replication_0")).collect()
    assert (problem["physical_offset"], problem["status"], problem["differing_fields"]) == (
        exports["altered"].physical_offset, "differs", ["store_timestamp"])
    assert result.replication[0]["differs"] == 1 and result.replication[0]["matching"] == 3999
    for chart in ("messages_per_minute", "latency", "queue_balance_0", "producers"):
        svg = (out / "charts" / f"{chart}.svg").read_text()
        assert svg.startswith("<svg") and svg.endswith("</svg>") and ("<polyline" in svg or "<rect x=" in svg), chart
    html = (out / "report.html").read_text()
    assert html.count("<svg") == 3 + min(6, len(topics))  # inlined: per minute, latency, producers, queues
    for text in ("Messages stored per minute", "Store latency", "Per-queue balance", "1 records disagree",
                 "Duplicate unique keys (producer retries)", "Orders"):
        assert text in html, text
    summary = json.loads((out / "summary.json").read_text())
    assert summary["messages"] == 4000 and summary["replication"][0]["differs"] == 1


def test_cli_refuses_a_damaged_export_before_starting_spark(exports: dict[str, Any], tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    damaged = tmp_path / "damaged"
    shutil.copytree(exports["master"], damaged)
    first = load_manifest(damaged).files[0]
    patch(damaged / "commitlog" / first.name, 200, b"\xff")
    assert main(["--input", str(damaged), "--out", str(tmp_path / "out")]) == 1
    error = capsys.readouterr().err
    assert str(damaged / "commitlog" / first.name) in error and "commit-log offset" in error
    assert main(["--input", str(tmp_path / "missing"), "--out", str(tmp_path / "out")]) == 1
    assert "no such directory" in capsys.readouterr().err


def test_spark_task_failures_are_worded_by_the_export_error() -> None:
    text = ("py4j.protocol.Py4JJavaError: ... File \"records.py\", line 9\nspark_jobs.manifest.ExportError: "
            "/x/commitlog/00000000000000000000: bad record at commit-log offset 42 (file position 42): bad magic code\n"
            "\tat org.apache.spark...")
    assert explain_failure(RuntimeError(text)) == ("/x/commitlog/00000000000000000000: bad record at commit-log "
                                                   "offset 42 (file position 42): bad magic code")
    assert explain_failure(ExportError("plain")) == "plain"
    assert explain_failure(RuntimeError("something else")) is None


def test_local_master_helpers_and_data_source_options() -> None:
    from pocketmq.spark_jobs.session import is_local_master, local_cores
    from pocketmq.spark_jobs.source import paths_option, read_options

    assert [local_cores(m) for m in ("local", "local[3]", "local[2,4]")] == [1, 3, 2]
    assert is_local_master(None) and is_local_master("local[*]") and not is_local_master("spark://h:7077")
    assert paths_option({"path": "/a", "PATHS": '["/b", "/a"]'}) == ["/b", "/a"]
    options = read_options({"withBody": "true", "batchRows": "16"})
    assert (options.with_body, options.decompress, options.batch_rows) == (True, False, 16)
    with pytest.raises(ValueError, match="no input"):
        paths_option({})
