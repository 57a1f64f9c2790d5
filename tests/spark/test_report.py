"""The report and its SVG charts on small fixed rows (no Spark): what is drawn, escaped and written."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

from pocketmq.spark_jobs import charts
from pocketmq.spark_jobs.report import ReportData, render

T0 = 1_714_557_600_000  # 2024-05-01T10:00:00Z


def parse(svg: str) -> ET.Element:
    return ET.fromstring(svg)  # well-formed XML, or this raises


def tag_count(svg: str, tag: str) -> int:
    return sum(1 for e in parse(svg).iter() if e.tag.endswith(tag))


def test_nice_ticks_are_round_and_cover_the_range() -> None:
    assert charts.nice_ticks(0, 97) == [0, 20, 40, 60, 80, 100]
    assert charts.nice_ticks(0, 1) == [0, 0.2, 0.4, 0.6, 0.8, 1.0]
    assert charts.nice_ticks(5, 5)[0] <= 5 <= charts.nice_ticks(5, 5)[-1]


def test_charts_draw_one_mark_per_value_and_escape_text() -> None:
    line = charts.line_chart({"a<b": [(0, 1), (1, 3), (2, 2)], "c": [(0, 5)]}, title="t & u", x_label="x",
                             y_label="y")
    assert tag_count(line, "polyline") == 2 and tag_count(line, "circle") == 4
    assert "a&lt;b" in line and "t &amp; u" in line
    bars = charts.bar_chart(["q0", "q1", "q2"], {"messages": [10, 30, 10]}, title="T", y_label="n",
                            reference=("mean 16.7", 50 / 3), highlight_over=1.25 * 50 / 3)
    rects = [e for e in parse(bars).iter() if e.tag.endswith("rect") and e.get("fill") != "white"]
    assert [r.get("fill") for r in rects] == [charts.PALETTE[0], charts.HIGHLIGHT, charts.PALETTE[0]]
    assert tag_count(bars, "line") > 3 and "mean 16.7" in bars
    log = charts.bar_chart(["<0", "0-1"], {"A": [0.0, 100.0], "B": [0.01, 99.99]}, title="T", y_label="%",
                           log=True)
    assert sum(1 for e in parse(log).iter() if e.tag.endswith("rect") and e.find("{*}title") is not None) == 3
    assert "no data" in charts.hbar_chart([], [], title="T", x_label="x")


def test_render_writes_a_self_contained_page_and_summary(tmp_path: Path) -> None:
    data = ReportData(
        title="Test <report>",
        inputs=[{"export": "/e/a", "cluster": "C", "broker": "a", "broker_id": 0, "role": "SYNC_MASTER",
                 "records": 6}],
        by_topic=[{"topic": "A", "messages": 5, "bytes": 500, "first_store_ms": T0, "last_store_ms": T0 + 60_000,
                   "bad_body_crc": 0},
                  {"topic": "B", "messages": 1, "bytes": 50, "first_store_ms": T0, "last_store_ms": T0,
                   "bad_body_crc": 1}],
        by_minute=[{"topic": "A", "minute": T0, "messages": 3}, {"topic": "A", "minute": T0 + 60_000, "messages": 2},
                   {"topic": "B", "minute": T0, "messages": 1}],
        latency=[{"topic": "A", "messages": 5, "p50_ms": 2, "p99_ms": 9}],
        latency_histogram=[{"topic": "A", "bucket": 1, "low_ms": 0, "high_ms": 1, "messages": 1},
                           {"topic": "A", "bucket": 4, "low_ms": 5, "high_ms": 10, "messages": 4}],
        by_queue=[{"broker": "a", "topic": "A", "queue_id": 0, "messages": 4},
                  {"broker": "a", "topic": "A", "queue_id": 1, "messages": 1}],
        top_tags=[], top_keys=[], tag_key_stats=[], duplicates=[], duplicate_count=0,
        producers=[{"producer_host": "10.0.0.1", "messages": 6, "avg_per_s": 0.1, "peak_per_minute": 4}],
        replication=[{"master": "/e/a", "slave": "/e/s", "missing_on_slave": 1, "extra_on_slave": 0,
                      "differs": 0}],
        latency_bounds=(0, 1, 2, 5, 10),
    )
    page = render(data, tmp_path).read_text()
    assert page.count("<svg") == 4 and "Test &lt;report&gt;" in page and "1 records disagree" in page
    assert "2024-05-01 10:00:00" in page  # store times as UTC dates
    latency = (tmp_path / "charts" / "latency.svg").read_text()
    for label in ("0-1", "1-2", "2-5", "5-10"):  # empty buckets in between keep their place
        assert f">{label}<" in latency
    queue = (tmp_path / "charts" / "queue_balance_0.svg").read_text()
    assert charts.HIGHLIGHT in queue and "max/min 4.00" in queue
    assert json.loads((tmp_path / "summary.json").read_text())["messages"] == 6
