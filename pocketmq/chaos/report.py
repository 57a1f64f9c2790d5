"""A run's output: the verdict, a human table, and an SVG timeline drawn by hand (no plotting library).

The timeline has one point per second: acknowledged sends (SEND_OK), stored-but-not-OK answers and failed
sends, with every injected fault as a shaded interval labelled with its kind and target (one lane per
fault, so overlapping faults stay readable), like Jepsen's plots.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from xml.sax.saxutils import escape

from pocketmq.chaos.events import FaultEvent, SendEvent

__all__ = ["render_svg", "render_table", "verdict"]

WIDTH, PLOT_HEIGHT, LANE = 1000, 260, 14
LEFT, TOP = 60, 20
COLORS = {"kill": "#d62728", "stop": "#9467bd", "partition": "#1f77b4", "netem": "#17becf", "powerloss": "#8c564b"}


def verdict(results: dict[str, Any], *, no_loss_promised: bool) -> list[str]:
    """Why the run fails ([] when it passes): lost SEND_OKs where the preset promises none, inconsistency."""
    problems = []
    lost = results["loss"]["lost"]
    if lost and no_loss_promised:
        problems.append(f"{lost} acknowledged messages lost although the preset promises none")
    inconsistent = results["consistency"]["inconsistent"]
    if inconsistent:
        problems.append(f"{inconsistent} inconsistent offsets")
    pop, timers = results.get("pop", {}), results.get("timers", {})
    if pop.get("lost") and no_loss_promised:
        problems.append(f"{pop['lost']} acknowledged messages never received by the POP consumer group")
    if timers.get("lost") and no_loss_promised:
        problems.append(f"{timers['lost']} acknowledged timer messages never delivered")
    if timers.get("early"):
        problems.append(f"{timers['early']} timer messages delivered before their time")
    return problems


def _rocketmq5_rows(r: dict[str, Any]) -> list[tuple[str, str]]:
    """The POP group's and the timer workload's lines (none when they did not run)."""
    rows = []
    pop, timers = r.get("pop", {}), r.get("timers", {})
    if pop.get("enabled"):
        rows += [("POP: received / lost", f"{pop['delivered']} / {pop['lost']}"),
                 ("POP: repeat deliveries", f"{pop['extra_deliveries']} ({pop['redelivered']} revived)")]
    if timers.get("sent"):
        rows += [("timers: acknowledged / delivered", f"{timers['acknowledged']} / {timers['delivered']}"),
                 ("timers: lost / early", f"{timers['lost']} / {timers['early']}"),
                 ("timers: late p50 / p99 / max", f"{timers['late_p50_ms']:.0f} / {timers['late_p99_ms']:.0f} / "
                                                   f"{timers['late_max_ms']:.0f} ms")]
    return rows


def render_table(summary: dict[str, Any]) -> str:
    r = summary["results"]
    loss, dup, dlv, cons, order = r["loss"], r["duplicates"], r["delivery"], r["consistency"], r["order"]
    avail, lat = r["availability"], r["latency"]
    rows = [
        ("preset", f"{summary['preset']} ({summary['flush']}), promise: {summary['promise']}"),
        ("duration / seed", f"{summary['duration']:.0f} s, seed {summary['seed']}, overlap {summary['overlap']}"),
        ("faults injected", ", ".join(f"{k} {v['injected']}" for k, v in sorted(r["faults"].items())) or "none"),
        ("faults skipped", "; ".join(r["skipped_faults"]) or "none"),
        ("attempted / acknowledged", f"{loss['attempted']} / {loss['acknowledged']} "
                                     f"(stored-not-OK {loss['stored_not_ok']}, failed {loss['failed']})"),
        ("lost (SEND_OK)", str(loss["lost"])),
        ("lost (stored-not-OK)", str(loss["lost_stored_not_ok"])),
        ("SEND_OK only on a diverged slave", str(loss["acked_only_on_diverged_slave"])),
        ("stored although failed", str(loss["stored_although_failed"])),
        ("duplicates in log", f"{dup['log_duplicate_ids']} ids"),
        ("duplicate deliveries", f"{dup['delivery_extra']} extra ({dup['redelivered_positions']} same position)"),
        ("  after fault", ", ".join(f"{k}: {v}" for k, v in sorted(dup["extra_deliveries_after"].items())) or "-"),
        ("readable never delivered", str(dlv["readable_never_delivered"])),
        ("delivered not readable", str(dlv["delivered_not_readable"])),
        ("inconsistent offsets", str(cons["inconsistent"])),
        ("delivered, then dropped by a power loss", str(cons.get("delivered_then_dropped", 0))),
        ("reordered (log / delivery)", f"{order['log_reordered_queues']} / {order['delivery_backwards']}"),
        ("longest gap without SEND_OK", f"{avail['longest_gap_s']:.1f} s"),
        ("e2e latency p50 / p99 / max", f"{lat['p50_ms']:.0f} / {lat['p99_ms']:.0f} / {lat['max_ms']:.0f} ms"),
        *_rocketmq5_rows(r),
    ]
    for key, text in (("drained", "consumers did not catch up within --drain"),
                      ("consumers_stopped", "consumer shutdown hung (abandoned)")):
        if summary.get(key) is False:
            rows.append(("note", text))
    if summary.get("unsettled_after_heal"):
        rows.append(("note", f"not settled after healing: {summary['unsettled_after_heal']}"))
    width = max(len(k) for k, _ in rows)
    lines = [f"{k:<{width}}  {v}" for k, v in rows]
    lines.append("")
    lines.append(f"{'fault':<10} {'target':<12} {'start':>7} {'end':>7} {'gap':>6} {'recover':>8}")
    for f in avail["per_fault"]:
        recover = "-" if f["first_ok_after_heal_s"] is None else f"{f['first_ok_after_heal_s']:.2f}"
        lines.append(f"{f['kind']:<10} {f['target']:<12} {f['start']:>7.1f} {f['end']:>7.1f} "
                     f"{f['longest_gap_s']:>6.2f} {recover:>8}")
    lines.append("")
    lines.append("VERDICT: " + ("PASS" if not summary["problems"] else "FAIL: " + "; ".join(summary["problems"])))
    return "\n".join(lines)


def per_second(sends: Sequence[SendEvent], seconds: int) -> tuple[list[int], list[int], list[int]]:
    ok, not_ok, failed = [0] * seconds, [0] * seconds, [0] * seconds
    for s in sends:
        i = min(seconds - 1, max(0, int(s.end)))
        if s.ok:
            ok[i] += 1
        elif s.failed:
            failed[i] += 1
        else:
            not_ok[i] += 1
    return ok, not_ok, failed


def render_svg(sends: Sequence[SendEvent], faults: Sequence[FaultEvent], duration: float, title: str) -> str:
    seconds = max(1, int(duration) + 1)
    ok, not_ok, failed = per_second(sends, seconds)
    top = max([1, *ok, *not_ok, *failed])
    injected = [f for f in faults if f.injected]
    height = TOP + PLOT_HEIGHT + 40 + LANE * len(injected) + 30
    plot_w = WIDTH - LEFT - 20

    def x(t: float) -> float:
        return LEFT + plot_w * t / seconds

    def y(v: float) -> float:
        return TOP + PLOT_HEIGHT - PLOT_HEIGHT * v / top

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" font-family="sans-serif" '
           f'font-size="11"><rect width="100%" height="100%" fill="white"/>',
           f'<text x="{LEFT}" y="13" font-size="13">{escape(title)}</text>']
    for f in injected:
        end = f.end if f.end >= 0 else duration
        color = COLORS.get(f.kind, "#7f7f7f")
        out.append(f'<rect x="{x(f.start):.1f}" y="{TOP}" width="{max(1.0, x(end) - x(f.start)):.1f}" '
                   f'height="{PLOT_HEIGHT}" fill="{color}" fill-opacity="0.12"/>')
    out.append(f'<line x1="{LEFT}" y1="{TOP + PLOT_HEIGHT}" x2="{LEFT + plot_w}" y2="{TOP + PLOT_HEIGHT}" '
               f'stroke="black"/><line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{TOP + PLOT_HEIGHT}" stroke="black"/>')
    for i in range(5):
        v = top * i / 4
        out.append(f'<text x="{LEFT - 5}" y="{y(v) + 4:.1f}" text-anchor="end">{v:.0f}</text>')
    step = max(1, seconds // 10)
    for t in range(0, seconds, step):
        out.append(f'<text x="{x(t):.1f}" y="{TOP + PLOT_HEIGHT + 14}" text-anchor="middle">{t}s</text>')
    for series, color in ((ok, "#2ca02c"), (not_ok, "#ff7f0e"), (failed, "#d62728")):
        points = " ".join(f"{x(i + 0.5):.1f},{y(v):.1f}" for i, v in enumerate(series))
        out.append(f'<polyline fill="none" stroke="{color}" stroke-width="1.2" points="{points}"/>')
    legend_y = TOP + PLOT_HEIGHT + 30
    for i, (color, name) in enumerate((("#2ca02c", "SEND_OK/s"), ("#ff7f0e", "stored-not-OK/s"),
                                       ("#d62728", "failed/s"))):
        out.append(f'<rect x="{LEFT + i * 130}" y="{legend_y - 9}" width="10" height="10" fill="{color}"/>'
                   f'<text x="{LEFT + i * 130 + 14}" y="{legend_y}">{name}</text>')
    for lane, f in enumerate(injected):
        end = f.end if f.end >= 0 else duration
        ly = legend_y + 10 + lane * LANE
        color = COLORS.get(f.kind, "#7f7f7f")
        out.append(f'<rect x="{x(f.start):.1f}" y="{ly}" width="{max(1.0, x(end) - x(f.start)):.1f}" '
                   f'height="{LANE - 3}" fill="{color}" fill-opacity="0.6"/>'
                   f'<text x="{x(end) + 4:.1f}" y="{ly + 9}">{escape(f.kind)} {escape(f.target)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"
