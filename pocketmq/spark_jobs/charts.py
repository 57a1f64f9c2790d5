"""Small SVG charts for the job's report: pure functions from numbers to SVG text, no I/O, no dependency.

Why not matplotlib: it is not part of the ``spark`` extra (a ~40 MB dependency tree for four charts), its
import costs seconds, and an SVG inlined in the HTML keeps the report one self-contained file that any
browser shows. The charts need little: axes with round ticks, lines, grouped bars, a legend.

* :func:`line_chart` — one line per series over a numeric x axis (messages per minute);
* :func:`bar_chart` — grouped vertical bars over categories, optionally log-scaled, with an optional
  dashed reference line and per-bar highlight (latency distribution, per-queue balance);
* :func:`hbar_chart` — horizontal bars with long labels (producer hosts).

Every text is XML-escaped; sizes are in CSS pixels.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from html import escape

PALETTE = ("#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3", "#937860", "#DA8BC3", "#8C8C8C")
HIGHLIGHT = "#C44E52"
Formatter = Callable[[float], str]


def plain_number(value: float) -> str:
    """``1,234`` for whole numbers, ``0.5`` otherwise (tick labels)."""
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.3g}"


def time_ticks(low_ms: float, high_ms: float, count: int = 6) -> list[float]:
    """About ``count`` ticks on whole minutes (1, 2, 5, 10, 15, 30 minutes, or whole hours) over a range."""
    minute = 60_000.0
    span = max(high_ms - low_ms, minute)
    steps = [m * minute for m in (1, 2, 5, 10, 15, 30)] + [h * 60 * minute for h in (1, 2, 3, 6, 12, 24)]
    step = next((s for s in steps if span / s <= count), steps[-1])
    first = math.ceil(low_ms / step) * step
    return [first + i * step for i in range(int((high_ms - first) // step) + 1)]


def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """About ``count`` round tick values covering ``[low, high]`` (steps of 1, 2 or 5 times a power of 10)."""
    if high <= low:
        high = low + 1
    raw = (high - low) / max(1, count)
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    first = math.floor(low / step) * step
    ticks = []
    value = first
    while value < high + step * 0.999:
        ticks.append(round(value, 12))
        value += step
    return ticks


@dataclass(frozen=True, slots=True)
class Frame:
    """The plotting area inside an SVG of ``width`` x ``height``."""

    width: int = 900
    height: int = 330
    left: int = 72
    right: int = 200
    top: int = 34
    bottom: int = 64

    @property
    def inner_width(self) -> float:
        return self.width - self.left - self.right

    @property
    def inner_height(self) -> float:
        return self.height - self.top - self.bottom


class _Scale:
    """Data to pixels along one axis, linear or log10."""

    def __init__(self, low: float, high: float, start: float, end: float, log: bool = False) -> None:
        self.log = log
        self.low, self.high = (math.log10(low), math.log10(high)) if log else (low, high)
        if self.high <= self.low:
            self.high = self.low + 1
        self.start, self.end = start, end

    def __call__(self, value: float) -> float:
        v = math.log10(max(value, 10 ** self.low)) if self.log else value
        return self.start + (v - self.low) / (self.high - self.low) * (self.end - self.start)


def _text(x: float, y: float, text: str, *, anchor: str = "middle", size: int = 11, extra: str = "") -> str:
    return (f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}" font-size="{size}" {extra}>'
            f"{escape(text)}</text>")


def _open(frame: Frame, title: str) -> list[str]:
    return [f'<svg xmlns="http://www.w3.org/2000/svg" width="{frame.width}" height="{frame.height}" '
            f'viewBox="0 0 {frame.width} {frame.height}" font-family="sans-serif">',
            f'<rect width="{frame.width}" height="{frame.height}" fill="white"/>',
            _text(frame.width / 2, 20, title, size=14, extra='font-weight="bold"')]


def _y_axis(frame: Frame, scale: _Scale, ticks: Sequence[float], label: str, fmt: Formatter) -> list[str]:
    parts = []
    x0, x1 = frame.left, frame.left + frame.inner_width
    for tick in ticks:
        y = scale(tick)
        parts.append(f'<line x1="{x0}" y1="{y:.1f}" x2="{x1:.1f}" y2="{y:.1f}" stroke="#e3e3e3"/>')
        parts.append(_text(x0 - 6, y + 4, fmt(tick), anchor="end", size=10))
    mid = frame.top + frame.inner_height / 2
    parts.append(_text(16, mid, label, extra=f'transform="rotate(-90 16 {mid:.1f})"'))
    bottom = frame.top + frame.inner_height
    parts.append(f'<line x1="{x0}" y1="{frame.top}" x2="{x0}" y2="{bottom:.1f}" stroke="#555"/>')
    parts.append(f'<line x1="{x0}" y1="{bottom:.1f}" x2="{x1:.1f}" y2="{bottom:.1f}" stroke="#555"/>')
    return parts


def _legend(frame: Frame, names: Sequence[str], colours: Sequence[str]) -> list[str]:
    parts = []
    x = frame.left + frame.inner_width + 14
    for i, (name, colour) in enumerate(zip(names, colours, strict=True)):
        y = frame.top + 6 + 18 * i
        parts.append(f'<rect x="{x}" y="{y}" width="12" height="12" fill="{colour}"/>')
        parts.append(_text(x + 18, y + 10, name, anchor="start", size=10))
    return parts


def line_chart(series: Mapping[str, Sequence[tuple[float, float]]], *, title: str, x_label: str, y_label: str,
               x_format: Formatter = plain_number, y_format: Formatter = plain_number,
               x_ticks: Sequence[float] | None = None, frame: Frame = Frame()) -> str:
    """One polyline (with dots when there are few points) per series; ``series`` maps name -> (x, y).
    ``x_ticks`` replaces the round ticks of the x axis (times want whole minutes, not round milliseconds)."""
    points = [p for values in series.values() for p in values]
    parts = _open(frame, title)
    if not points:
        return "".join([*parts, _text(frame.width / 2, frame.height / 2, "no data"), "</svg>"])
    xs = [p[0] for p in points]
    y_ticks = nice_ticks(0, max(p[1] for p in points))
    x_scale = _Scale(min(xs), max(xs), frame.left + 8, frame.left + frame.inner_width - 8)
    y_scale = _Scale(0, y_ticks[-1], frame.top + frame.inner_height, frame.top)
    parts += _y_axis(frame, y_scale, y_ticks, y_label, y_format)
    bottom = frame.top + frame.inner_height
    for tick in nice_ticks(min(xs), max(xs), 6) if x_ticks is None else x_ticks:
        if min(xs) <= tick <= max(xs):
            x = x_scale(tick)
            parts.append(f'<line x1="{x:.1f}" y1="{bottom:.1f}" x2="{x:.1f}" y2="{bottom + 4:.1f}" stroke="#555"/>')
            parts.append(_text(x, bottom + 17, x_format(tick), size=10))
    parts.append(_text(frame.left + frame.inner_width / 2, frame.height - 12, x_label))
    colours = [PALETTE[i % len(PALETTE)] for i in range(len(series))]
    for (_name, values), colour in zip(series.items(), colours, strict=True):
        ordered = sorted(values)
        path = " ".join(f"{x_scale(x):.1f},{y_scale(y):.1f}" for x, y in ordered)
        parts.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="1.8"/>')
        if len(ordered) <= 40:
            parts += [f'<circle cx="{x_scale(x):.1f}" cy="{y_scale(y):.1f}" r="2.5" fill="{colour}"/>'
                      for x, y in ordered]
    parts += _legend(frame, list(series), colours)
    return "".join([*parts, "</svg>"])


def bar_chart(categories: Sequence[str], groups: Mapping[str, Sequence[float]], *, title: str, y_label: str,
              x_label: str = "", log: bool = False, y_format: Formatter = plain_number,
              reference: tuple[str, float] | None = None, highlight_over: float | None = None,
              frame: Frame = Frame()) -> str:
    """Grouped bars: one group of bars per category, one bar per entry of ``groups`` (name -> values).

    ``log`` uses a log10 y axis (zeros are not drawn), so a tail of a few in ten thousand stays visible.
    ``reference`` draws a dashed horizontal line (label, value); bars above ``highlight_over`` are red.
    """
    values = [v for vs in groups.values() for v in vs]
    parts = _open(frame, title)
    if not categories or not values:
        return "".join([*parts, _text(frame.width / 2, frame.height / 2, "no data"), "</svg>"])
    bottom = frame.top + frame.inner_height
    if log:
        positive = [v for v in values if v > 0] or [1.0]
        low = 10 ** math.floor(math.log10(min(positive)))
        high = 10 ** math.ceil(math.log10(max(positive) * 1.01))
        y_ticks = [10.0 ** e for e in range(round(math.log10(low)), round(math.log10(high)) + 1)]
    else:
        y_ticks = nice_ticks(0, max(max(values), reference[1] if reference else 0))
        low, high = 0.0, y_ticks[-1]
    y_scale = _Scale(low, high, bottom, frame.top, log=log)
    parts += _y_axis(frame, y_scale, y_ticks, y_label, y_format)
    slot = frame.inner_width / len(categories)
    width = slot * 0.8 / max(1, len(groups))
    colours = [PALETTE[i % len(PALETTE)] for i in range(len(groups))]
    for g, (_name, vs) in enumerate(groups.items()):
        for c, value in enumerate(vs):
            if value <= 0 and log:
                continue
            x = frame.left + slot * c + slot * 0.1 + width * g
            y = y_scale(value)
            colour = HIGHLIGHT if highlight_over is not None and value > highlight_over else colours[g]
            parts.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="{max(width - 1, 1):.1f}" '
                         f'height="{max(bottom - y, 0):.1f}" fill="{colour}"><title>{escape(categories[c])}: '
                         f"{escape(y_format(value))}</title></rect>")
    rotate = len(categories) > 10 or max(len(c) for c in categories) * 6 > slot
    for c, name in enumerate(categories):
        x = frame.left + slot * (c + 0.5)
        extra = f'transform="rotate(-35 {x:.1f} {bottom + 14:.1f})"' if rotate else ""
        parts.append(_text(x, bottom + 14, name, anchor="end" if rotate else "middle", size=10, extra=extra))
    if x_label:
        parts.append(_text(frame.left + frame.inner_width / 2, frame.height - 6, x_label))
    if reference is not None:
        y = y_scale(reference[1])
        parts.append(f'<line x1="{frame.left}" y1="{y:.1f}" x2="{frame.left + frame.inner_width:.1f}" y2="{y:.1f}" '
                     f'stroke="{HIGHLIGHT}" stroke-dasharray="6 4" stroke-width="1.4"/>')
        parts.append(_text(frame.left + frame.inner_width + 6, y + 4, reference[0], anchor="start", size=10))
    if len(groups) > 1 or reference is None:
        parts += _legend(frame, list(groups), colours)
    return "".join([*parts, "</svg>"])


def hbar_chart(labels: Sequence[str], values: Sequence[float], *, title: str, x_label: str,
               x_format: Formatter = plain_number, width: int = 900) -> str:
    """Horizontal bars, one per label (long labels on the left)."""
    frame = Frame(width=width, height=70 + 22 * max(1, len(labels)), left=380, right=40, top=34, bottom=36)
    parts = _open(frame, title)
    if not labels:
        return "".join([*parts, _text(frame.width / 2, frame.height / 2, "no data"), "</svg>"])
    ticks = nice_ticks(0, max(values))
    scale = _Scale(0, ticks[-1], frame.left, frame.left + frame.inner_width)
    bottom = frame.top + frame.inner_height
    for tick in ticks:
        x = scale(tick)
        parts.append(f'<line x1="{x:.1f}" y1="{frame.top}" x2="{x:.1f}" y2="{bottom:.1f}" stroke="#e3e3e3"/>')
        parts.append(_text(x, bottom + 14, x_format(tick), size=10))
    row = frame.inner_height / len(labels)
    for i, (label, value) in enumerate(zip(labels, values, strict=True)):
        y = frame.top + row * i + row * 0.15
        parts.append(f'<rect x="{frame.left}" y="{y:.1f}" width="{max(scale(value) - frame.left, 1):.1f}" '
                     f'height="{row * 0.7:.1f}" fill="{PALETTE[2]}"/>')
        parts.append(_text(frame.left - 6, y + row * 0.5, label, anchor="end", size=10))
    parts.append(_text(frame.left + frame.inner_width / 2, frame.height - 6, x_label))
    return "".join([*parts, "</svg>"])
