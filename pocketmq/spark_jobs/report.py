"""The job's report: SVG charts and one HTML page, from small results already collected to the driver.

Nothing here touches Spark: :class:`ReportData` holds plain rows (dicts), so the report can be rendered and
tested without a session. The charts (:mod:`pocketmq.spark_jobs.charts`, plain SVG) are inlined in ``report.html``,
so the page is one self-contained file, and also written to ``charts/``:

* ``messages_per_minute.svg`` — messages stored per minute, one line per topic (the busiest six; the rest
  summed as "other topics");
* ``latency.svg`` — the store-latency distribution (share of messages per latency bucket, per topic);
* ``queue_balance_N.svg`` — messages per queue for the busiest topics, the topic's mean queue dashed;
* ``producers.svg`` — messages per producer host.

``report.html`` shows the charts beside tables of the numbers behind them; ``summary.json`` has the headline
figures for machines.
"""

from __future__ import annotations

import datetime as dt
import html
import json
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pocketmq.spark_jobs import charts

Row = Mapping[str, Any]

MAX_LINES = 6
MAX_QUEUE_PANELS = 6
MAX_PRODUCERS = 15
MAX_TABLE_ROWS = 50
HOT_QUEUE = 1.25


@dataclass
class ReportData:
    """Everything the report shows (rows as dicts, as ``Row.asDict()`` gives them)."""

    title: str
    inputs: Sequence[Row]
    by_topic: Sequence[Row]
    by_minute: Sequence[Row]
    latency: Sequence[Row]
    latency_histogram: Sequence[Row]
    by_queue: Sequence[Row]
    top_tags: Sequence[Row]
    top_keys: Sequence[Row]
    tag_key_stats: Sequence[Row]
    duplicates: Sequence[Row]
    duplicate_count: int
    producers: Sequence[Row]
    replication: Sequence[Row] = field(default_factory=list)
    """One summary row per (master, slave) pair, with ``master``/``slave`` paths added."""
    replication_problems: Sequence[Row] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    latency_bounds: Sequence[int] = ()
    """Lower bounds of the histogram's buckets (``analytics.LATENCY_BOUNDS_MS``), to label empty ones."""


def _as_datetime(value: Any) -> dt.datetime:
    if isinstance(value, dt.datetime):
        return value if value.tzinfo else value.replace(tzinfo=dt.UTC)
    return dt.datetime.fromtimestamp(int(value) / 1000, dt.UTC)


def _epoch_ms(value: Any) -> float:
    return _as_datetime(value).timestamp() * 1000


def _clock(ms: float) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%H:%M")


# ------------------------------------------------------------------------------------------- charts


def chart_messages_per_minute(rows: Sequence[Row]) -> str:
    """One line per busy topic (the busiest six, the rest summed): messages per minute of store time."""
    totals: dict[str, int] = defaultdict(int)
    for r in rows:
        totals[r["topic"]] += int(r["messages"])
    busiest = sorted(totals, key=lambda t: (-totals[t], t))[:MAX_LINES]
    series: dict[str, dict[float, int]] = defaultdict(lambda: defaultdict(int))
    for r in rows:
        name = r["topic"] if r["topic"] in busiest else "other topics"
        series[name][_epoch_ms(r["minute"])] += int(r["messages"])
    ordered = {f"{name} ({sum(series[name].values()):,})": sorted(series[name].items())
               for name in [*busiest, "other topics"] if name in series}
    first = min((m for points in series.values() for m in points), default=0.0)
    day = dt.datetime.fromtimestamp(first / 1000, dt.UTC).strftime("%Y-%m-%d")
    last = max((m for points in series.values() for m in points), default=0.0)
    return charts.line_chart(ordered, title="Messages stored per minute (UTC)", x_label=f"store time, {day} (UTC)",
                             y_label="messages / minute", x_format=_clock, x_ticks=charts.time_ticks(first, last))


def _bucket_label(row: Row) -> str:
    low, high = row.get("low_ms"), row.get("high_ms")
    if low is None:
        return f"< {high}"
    if high is None:
        return f">= {low:,}"
    return f"{low:,}-{high:,}"


def _bounds_of(bucket: int, bounds: Sequence[int]) -> Row:
    """Low/high of a bucket no row names, from the histogram's bucket bounds."""
    lows: list[int | None] = [None, *bounds]
    highs: list[int | None] = [bounds[0], *bounds[1:], None]
    return {"low_ms": lows[bucket], "high_ms": highs[bucket]}


def chart_latency(rows: Sequence[Row], latency: Sequence[Row], bounds: Sequence[int] = ()) -> str:
    """Share of each topic's messages per latency bucket (grouped bars, log scale), p50/p99 in the legend."""
    buckets: dict[int, str] = {}
    per_topic: dict[str, dict[int, int]] = defaultdict(dict)
    for r in rows:
        buckets[int(r["bucket"])] = _bucket_label(r)
        per_topic[r["topic"]][int(r["bucket"])] = int(r["messages"])
    topics = sorted(per_topic, key=lambda t: -sum(per_topic[t].values()))[:MAX_LINES]
    order = list(range(min(buckets), max(buckets) + 1)) if buckets and bounds else sorted(buckets)
    for b in order:  # empty buckets between the shortest and longest latency still get their label
        buckets.setdefault(b, _bucket_label(_bounds_of(b, bounds)))
    stats = {r["topic"]: r for r in latency}
    groups: dict[str, list[float]] = {}
    for topic in topics:
        counts = per_topic[topic]
        total = sum(counts.values()) or 1
        s = stats.get(topic, {})
        label = f"{topic} (p50 {_num(s.get('p50_ms'))}, p99 {_num(s.get('p99_ms'))} ms)" if s else topic
        groups[label] = [100.0 * counts.get(b, 0) / total for b in order]
    return charts.bar_chart([buckets[b] for b in order], groups, log=True, x_label="store latency bucket (ms)",
                            title="Store latency (store time - born time), share of each topic's messages",
                            y_label="% of the topic's messages (log)", y_format=lambda v: f"{v:g}%")


def chart_queue_balance(rows: Sequence[Row]) -> list[str]:
    """One small chart per busy topic: messages per queue, the mean queue dashed, hot queues in red."""
    per_topic: dict[str, list[Row]] = defaultdict(list)
    for r in rows:
        per_topic[r["topic"]].append(r)
    topics = sorted(per_topic, key=lambda t: -sum(int(r["messages"]) for r in per_topic[t]))[:MAX_QUEUE_PANELS]
    panels = []
    for topic in topics:
        queues = sorted(per_topic[topic], key=lambda r: (r["broker"], int(r["queue_id"])))
        counts = [float(r["messages"]) for r in queues]
        brokers = {r["broker"] for r in queues}
        labels = [f"{r['broker']}:{r['queue_id']}" if len(brokers) > 1 else str(r["queue_id"]) for r in queues]
        mean = sum(counts) / len(counts)
        spread = max(counts) / min(counts) if min(counts) else float("inf")
        panels.append(charts.bar_chart(
            labels, {"messages": counts}, title=f"{topic} (max/min {spread:.2f})", y_label="messages",
            x_label="queue", reference=(f"mean {mean:,.0f}", mean), highlight_over=HOT_QUEUE * mean,
            frame=charts.Frame(width=440, height=250, left=64, right=80, top=30, bottom=56)))
    return panels


def chart_producers(rows: Sequence[Row]) -> str:
    """Messages per producer host (horizontal bars), average and peak rate in the label."""
    top = sorted(rows, key=lambda r: -int(r["messages"]))[:MAX_PRODUCERS]
    labels = [f"{r['producer_host']}  ({_num(r.get('avg_per_s'))}/s avg, {int(r['peak_per_minute']):,}/min peak)"
              for r in top]
    return charts.hbar_chart(labels, [float(r["messages"]) for r in top], title="Messages per producer host",
                             x_label="messages")


# ------------------------------------------------------------------------------------------- html


def _num(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.3f}" if abs(value) < 10 else f"{value:,.1f}"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, dt.datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S")
    if isinstance(value, list | tuple):
        return ", ".join(str(v) for v in value)
    return str(value)


def _cell(column: str, value: Any) -> str:
    """Store times (``*_store_ms``) as UTC date and time, everything else as a number or text."""
    if column.endswith("store_ms") and isinstance(value, int):
        return _as_datetime(value).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
    return _num(value)


def _table(rows: Sequence[Row], columns: Sequence[str] | None = None, limit: int = MAX_TABLE_ROWS) -> str:
    if not rows:
        return "<p class='none'>none</p>"
    cols = list(columns or rows[0].keys())
    head = "".join(f"<th>{html.escape(c)}</th>" for c in cols)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(_cell(c, r.get(c)))}</td>" for c in cols) + "</tr>" for r in rows[:limit])
    more = f"<p class='more'>{len(rows) - limit:,} more rows in the CSV/Parquet output</p>" if len(rows) > limit else ""
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{more}"


_CSS = """
body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1200px;color:#222;padding:0 1em}
h1{margin-bottom:.2em} h2{margin-top:1.6em;border-bottom:1px solid #ddd;padding-bottom:.2em}
table{border-collapse:collapse;font-size:13px;margin:.5em 0} th,td{border:1px solid #ddd;padding:3px 8px}
th{background:#f3f3f3;text-align:left} td{text-align:right} td:first-child{text-align:left}
figure{margin:.5em 0} svg{max-width:100%;height:auto;border:1px solid #eee}
.panels{display:flex;flex-wrap:wrap;gap:.5em} .none,.more{color:#777;font-size:13px}
.ok{color:#2a7a2a;font-weight:bold} .bad{color:#b00;font-weight:bold} .cards{display:flex;gap:1em;flex-wrap:wrap}
.card{border:1px solid #ddd;border-radius:6px;padding:.6em 1em;min-width:10em} .card b{display:block;font-size:1.4em}
"""


def _figure(svg: str) -> str:
    return f"<figure>{svg}</figure>"


def _cards(data: ReportData) -> str:
    messages = sum(int(r["messages"]) for r in data.by_topic)
    size = sum(int(r["bytes"] or 0) for r in data.by_topic)
    bad = sum(int(r.get("bad_body_crc") or 0) for r in data.by_topic)
    items = [("messages", f"{messages:,}"), ("bytes", f"{size / (1 << 20):,.1f} MiB"),
             ("topics", f"{len(data.by_topic):,}"), ("producer hosts", f"{len(data.producers):,}"),
             ("duplicate unique keys", f"{data.duplicate_count:,}"), ("bad body CRCs", f"{bad:,}")]
    return "<div class='cards'>" + "".join(f"<div class='card'>{html.escape(k)}<b>{html.escape(v)}</b></div>"
                                           for k, v in items) + "</div>"


def _replication_html(data: ReportData) -> str:
    if not data.replication:
        return "<p class='none'>No master/slave pair of the same broker among the inputs.</p>"
    parts = []
    for r in data.replication:
        bad = int(r["missing_on_slave"]) + int(r["extra_on_slave"]) + int(r["differs"])
        verdict = ("<span class='ok'>replicas agree</span>" if bad == 0
                   else f"<span class='bad'>{bad:,} records disagree</span>")
        parts.append(f"<p>{html.escape(str(r['master']))} (master) vs {html.escape(str(r['slave']))} (slave): "
                     f"{verdict}</p>")
    parts.append(_table(data.replication))
    if data.replication_problems:
        parts.append("<h3>Records that disagree</h3>" + _table(data.replication_problems))
    return "".join(parts)


def render(data: ReportData, out_dir: str | Path) -> Path:
    """Write ``charts/*.svg``, ``report.html`` and ``summary.json`` into ``out_dir``; the HTML's path."""
    out = Path(out_dir)
    chart_dir = out / "charts"
    chart_dir.mkdir(parents=True, exist_ok=True)
    per_minute = chart_messages_per_minute(data.by_minute)
    latency = chart_latency(data.latency_histogram, data.latency, data.latency_bounds)
    queues = chart_queue_balance(data.by_queue)
    producers = chart_producers(data.producers)
    named = {"messages_per_minute": per_minute, "latency": latency, "producers": producers,
             **{f"queue_balance_{i}": svg for i, svg in enumerate(queues)}}
    for name, svg in named.items():
        (chart_dir / f"{name}.svg").write_text(svg, encoding="utf-8")
    queue_panels = "<div class='panels'>" + "".join(queues) + "</div>"
    generated = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    sections = [
        f"<h1>{html.escape(data.title)}</h1><p>Generated {generated}. Times are store times in UTC; latency is "
        "store time minus born time (producer clock to broker clock).</p>",
        _cards(data),
        "<h2>Inputs</h2>" + _table(data.inputs),
        "<h2>Messages per minute</h2>" + _figure(per_minute),
        "<h2>Messages and bytes per topic</h2>" + _table(data.by_topic),
        "<h2>Store latency</h2>" + _figure(latency) + _table(data.latency),
        f"<h2>Per-queue balance (red: over {HOT_QUEUE:g}x the topic's mean queue)</h2>" + queue_panels
        + _table(data.by_queue),
        "<h2>Producer hosts</h2>" + _figure(producers) + _table(data.producers),
        "<h2>Tags and keys</h2>" + _table(data.tag_key_stats) + "<h3>Top tags</h3>" + _table(data.top_tags)
        + "<h3>Top keys</h3>" + _table(data.top_keys),
        f"<h2>Duplicate unique keys (producer retries): {data.duplicate_count:,}</h2>" + _table(data.duplicates),
        "<h2>Replication check</h2>" + _replication_html(data),
    ]
    if data.timings:
        sections.append("<h2>Job timings (s)</h2>" + _table([{k: round(v, 2) for k, v in data.timings.items()}]))
    page = (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(data.title)}</title>"
            f"<style>{_CSS}</style></head><body>{''.join(sections)}</body></html>\n")
    report = out / "report.html"
    report.write_text(page, encoding="utf-8")
    summary = {
        "messages": sum(int(r["messages"]) for r in data.by_topic),
        "topics": len(data.by_topic),
        "duplicate_uniq_keys": data.duplicate_count,
        "latency": data.latency,
        "replication": data.replication,
        "timings": data.timings,
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2, default=str) + "\n", encoding="utf-8")
    return report
