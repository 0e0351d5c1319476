"""Small server-side SVG charts for the dashboard: one line per release over time, each point with
its interval as a whisker and a link to the traces behind it.

Why not matplotlib, as the compare report does: measured here, a matplotlib figure of the
dashboard's eight panels takes ~300 ms and ~330 KB of SVG per render, more than the page's whole
latency budget, and its SVG carries inline ``style`` that this UI's Content-Security-Policy
(``style-src 'self'``) refuses. These charts are plain SVG elements with presentation attributes
and CSS classes (colours live in review.css), inline in the page, so a point is an ordinary link
and the page needs no script. Every text and URL is escaped here (`markupsafe.escape`); the result
is `Markup` so the template does not escape it twice.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from markupsafe import Markup, escape

__all__ = ["Line", "Point", "Reference", "chart", "nice_top"]

WIDTH, HEIGHT = 620, 220
_LEFT, _RIGHT, _TOP, _BOTTOM = 46, 12, 10, 28
# tops whose quarters are round numbers (0.5%, 1%, 2.5%, 5%, 10%, 25%)
_NICE = (0.02, 0.04, 0.1, 0.2, 0.4, 1.0)


@dataclass(frozen=True)
class Point:
    x: datetime
    y: float
    low: float | None
    high: float | None
    href: str
    title: str


@dataclass(frozen=True)
class Line:
    name: str
    #: CSS class of the line's colour (``series-0`` ...)
    css: str
    points: tuple[Point, ...]


@dataclass(frozen=True)
class Reference:
    """A horizontal reference line (a drift anchor's rate) with what it is, shown on hover."""

    y: float
    title: str


def nice_top(values: Sequence[float | None]) -> float:
    """The smallest of 2%, 4%, 10%, 20%, 40%, 100% at or above every value (a rare mode's rate
    stays readable instead of hugging the axis)."""
    top = max((v for v in values if v is not None), default=0.0)
    return next((t for t in _NICE if top <= t), 1.0)


def _fmt(v: float) -> str:
    return f"{v:.1f}"


def chart(lines: Sequence[Line], *, starts: Sequence[datetime], step: timedelta, label: str,
          y_top: float = 1.0, percent: bool = True, hourly: bool = False,
          references: Sequence[Reference] = ()) -> Markup:
    """An SVG line chart of ``lines`` over the bucket ``starts`` (sorted), y from 0 to ``y_top``, with
    ``references`` drawn as dashed horizontal lines across it."""
    w, h = WIDTH - _LEFT - _RIGHT, HEIGHT - _TOP - _BOTTOM
    n = max(len(starts), 1)
    slot = w / n
    index = {s: i for i, s in enumerate(starts)}
    # several releases in one bucket are drawn side by side (a canary and its baseline share days)
    dodge = min(8.0, slot / (len(lines) + 1)) if len(lines) > 1 else 0.0

    def x_of(t: datetime, line: int) -> float:
        return _LEFT + slot * (index.get(t, 0) + 0.5) + dodge * (line - (len(lines) - 1) / 2)

    def y_of(v: float) -> float:
        return _TOP + h * (1 - min(max(v / y_top, 0.0), 1.0))

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" '
           f'width="{WIDTH}" height="{HEIGHT}" role="img" aria-label="{escape(label)}">']
    for i in range(5):  # horizontal grid and y labels
        v = y_top * i / 4
        y = _fmt(y_of(v))
        text = f"{v * 100:.1f}".removesuffix(".0") + "%" if percent else f"{v:.2f}"
        out.append(f'<line class="grid" x1="{_LEFT}" x2="{WIDTH - _RIGHT}" y1="{y}" y2="{y}"/>'
                   f'<text class="tick" x="{_LEFT - 4}" y="{y}" text-anchor="end" dominant-baseline="middle">'
                   f"{text}</text>")
    every = max(1, -(-n // 6))  # at most ~6 time labels
    for i, s in enumerate(starts):
        if i % every:
            continue
        text = s.strftime("%m-%d %H:00" if hourly else "%Y-%m-%d")
        out.append(f'<text class="tick" x="{_fmt(_LEFT + slot * (i + 0.5))}" y="{HEIGHT - 8}" '
                   f'text-anchor="middle">{escape(text)}</text>')
    out.append(f'<line class="axis" x1="{_LEFT}" x2="{WIDTH - _RIGHT}" y1="{_fmt(y_of(0))}" y2="{_fmt(y_of(0))}"/>')
    for ref in references:
        y = _fmt(y_of(ref.y))
        out.append(f'<g class="reference"><title>{escape(ref.title)}</title>'
                   f'<line x1="{_LEFT}" x2="{WIDTH - _RIGHT}" y1="{y}" y2="{y}"/></g>')
    for li, line in enumerate(lines):
        pts = sorted(line.points, key=lambda p: p.x)
        # consecutive buckets are joined; a gap (a bucket without labels) breaks the line
        run: list[str] = []
        prev: int | None = None
        for p in pts:
            at = index.get(p.x, 0)
            if prev is not None and at != prev + 1:
                if len(run) > 1:
                    out.append(f'<polyline class="line {line.css}" points="{" ".join(run)}"/>')
                run = []
            run.append(f"{_fmt(x_of(p.x, li))},{_fmt(y_of(p.y))}")
            prev = at
        if len(run) > 1:
            out.append(f'<polyline class="line {line.css}" points="{" ".join(run)}"/>')
        for p in pts:
            x = _fmt(x_of(p.x, li))
            out.append(f'<a class="point" href="{escape(p.href)}"><title>{escape(p.title)}</title>')
            if p.low is not None and p.high is not None:
                out.append(f'<line class="whisker {line.css}" x1="{x}" x2="{x}" y1="{_fmt(y_of(p.low))}" '
                           f'y2="{_fmt(y_of(p.high))}"/>')
            out.append(f'<circle class="dot {line.css}" cx="{x}" cy="{_fmt(y_of(p.y))}" r="4"/></a>')
    out.append("</svg>")
    return Markup("".join(out))
