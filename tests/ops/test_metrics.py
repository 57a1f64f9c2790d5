"""``--metrics-port``: the name server's and the broker's Prometheus endpoints answer with the named metrics."""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from pocketmq.admin import cli
from tests.procs import Proc, start_broker, start_namesrv


def metrics_port(proc: Proc, timeout: float = 10.0) -> int:
    """The port from the process's ``metrics_listening`` JSON log line (it binds port 0)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for line in list(proc.lines):
            if '"metrics_listening"' in line:
                return int(json.loads(line)["port"])
        time.sleep(0.02)
    raise AssertionError("no metrics_listening line:\n" + proc.stderr_text()[-2000:])


def scrape(port: int) -> dict[str, list[tuple[dict[str, str], float]]]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        assert resp.status == 200
        text = resp.read().decode()
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.setdefault(sample.name, []).append((sample.labels, sample.value))
    return out


@pytest.fixture
def procs(tmp_path: Path) -> Iterator[tuple[Proc, Proc]]:
    ns = start_namesrv("--metrics-port", "0", kv_dir=tmp_path)
    try:
        broker = start_broker("--metrics-port", "0", "--role", "SYNC_MASTER", namesrv=ns.addr,
                              store_dir=tmp_path / "store")
        try:
            yield ns, broker
        finally:
            broker.terminate()
    finally:
        ns.terminate()


def test_metrics_endpoints_answer_with_the_named_metrics(procs: tuple[Proc, Proc],
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    ns, broker = procs

    assert cli.main(["sendMessage", "-n", ns.addr, "-t", "MetricsTopic", "-p", "x" * 100, "--count", "3",
                     "--json"]) == 0
    capsys.readouterr()
    b = scrape(metrics_port(broker))
    put = {labels["topic"]: v for labels, v in b["pocketmq_messages_put_total"]}
    assert put.get("MetricsTopic") == 3
    assert {labels["topic"]: v for labels, v in b["pocketmq_bytes_put_total"]}["MetricsTopic"] >= 300
    latency = {labels["code"] for labels, _ in b["pocketmq_request_latency_seconds_count"]}
    assert "310" in latency or "10" in latency  # SEND_MESSAGE_V2 / SEND_MESSAGE
    assert {labels["kind"] for labels, _ in b["pocketmq_store_commitlog_offset"]} == {"min", "max", "flushed"}
    assert b["pocketmq_store_commitlog_bytes"][0][1] > 0
    assert 0 <= b["pocketmq_store_disk_used_ratio"][0][1] <= 1
    assert b["pocketmq_ha_connections"] == [({}, 0.0)]  # a SYNC_MASTER with no slave
    assert b["pocketmq_broker_info"][0][0]["role"] == "SYNC_MASTER"
    n = scrape(metrics_port(ns))
    assert n["pocketmq_namesrv_brokers_registered"] == [({}, 1.0)]
    assert n["pocketmq_namesrv_broker_registered"][0][0]["broker"] == "broker-a"
    assert any(labels["code"] == "103" for labels, _ in n["pocketmq_request_latency_seconds_count"])  # REGISTER
