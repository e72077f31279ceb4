"""SVG primitives shared by the charts: colours, a plotting frame, axes, legends, marks."""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from recommender.report.ticks import time_ticks

SLICE = "#7b8494"
FITTED = "#2563c9"
FITTED_LATER = "#9bbcf0"
OOM = "#d12a2a"
OTHER = "#c98a00"
GRID = "#e6e8ec"
SOURCE_COLOURS = {
    "prior": "#7c5cc4",
    "history": "#2a9d6e",
    "model": "#2563c9",
    "ladder": "#d12a2a",
    "fallback": "#c98a00",
}
NDASH, TIMES, MINUS = "\u2013", "\u00d7", "\u2212"
PALETTE = ("#2563c9", "#0e8a8a", "#6b4fbb", "#b35c00", "#4d7c0f", "#a21caf", "#475569")


def esc(value: object) -> str:
    return html.escape(str(value), quote=True)


@dataclass
class Frame:
    """A plot area inside an SVG: pixel mapping for x (time or number) and y."""

    width: int
    height: int
    left: int = 64
    right: int = 16
    top: int = 34
    bottom: int = 44
    x0: float = 0.0
    x1: float = 1.0
    y0: float = 0.0
    y1: float = 1.0

    def x(self, v: float) -> float:
        span = (self.x1 - self.x0) or 1.0
        return self.left + (v - self.x0) / span * (self.width - self.left - self.right)

    def y(self, v: float) -> float:
        span = (self.y1 - self.y0) or 1.0
        return self.height - self.bottom - (v - self.y0) / span * (
            self.height - self.top - self.bottom)

    @property
    def plot_bottom(self) -> float:
        return self.height - self.bottom


def svg(f: Frame, body: Iterable[str], label: str) -> str:
    return (f'<svg viewBox="0 0 {f.width} {f.height}" width="{f.width}" height="{f.height}" '
            f'role="img" aria-label="{esc(label)}" class="chart">' + "".join(body) + "</svg>")


def empty_svg(width: int, height: int, label: str, message: str) -> str:
    return (f'<svg viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" '
            f'aria-label="{esc(label)}" class="chart empty"><rect x="0.5" y="0.5" '
            f'width="{width - 1}" height="{height - 1}" rx="6" fill="#fafbfc" stroke="{GRID}"/>'
            f'<text x="{width / 2:.0f}" y="{height / 2:.0f}" text-anchor="middle" '
            f'class="muted">{esc(message)}</text></svg>')


def left_margin(ticks: Sequence[float]) -> int:
    """Room for the widest tick label and the rotated axis title."""
    return 34 + 7 * max(len(f"{t:,.0f}") for t in ticks)


def y_axis(f: Frame, ticks: Sequence[float], label: str, fmt: str = "{:,.0f}") -> list[str]:
    out = []
    for t in ticks:
        y = f.y(t)
        out.append(f'<line x1="{f.left}" x2="{f.width - f.right}" y1="{y:.1f}" y2="{y:.1f}" '
                   f'stroke="{GRID}"/>')
        out.append(f'<text x="{f.left - 6}" y="{y + 4:.1f}" text-anchor="end">'
                   f'{esc(fmt.format(t))}</text>')
    cy = (f.top + f.plot_bottom) / 2
    out.append(f'<text x="14" y="{cy:.0f}" text-anchor="middle" class="axis-label" '
               f'transform="rotate(-90 14 {cy:.0f})">{esc(label)}</text>')
    return out


def x_axis_line(f: Frame) -> str:
    return (f'<line x1="{f.left}" x2="{f.width - f.right}" y1="{f.plot_bottom:.1f}" '
            f'y2="{f.plot_bottom:.1f}" stroke="#9aa1ad"/>')


def x_time_axis(f: Frame, t0: datetime, t1: datetime, label: str) -> list[str]:
    ticks, fmt = time_ticks(t0, t1, n=max(3, (f.width - f.left - f.right) // 120))
    out = [x_axis_line(f)]
    for t in ticks:
        x = f.x(t.timestamp())
        out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{f.plot_bottom:.1f}" '
                   f'y2="{f.plot_bottom + 4:.1f}" stroke="#9aa1ad"/>')
        out.append(f'<text x="{x:.1f}" y="{f.plot_bottom + 17:.1f}" text-anchor="middle">'
                   f'{esc(t.strftime(fmt))}</text>')
    out.append(f'<text x="{(f.left + f.width - f.right) / 2:.0f}" y="{f.height - 6}" '
               f'text-anchor="middle" class="axis-label">{esc(label)}</text>')
    return out


def legend(x: float, y: float, entries: Sequence[tuple[str, str]]) -> list[str]:
    """Entries of (marker svg at 0,0, text); laid out left to right from (x, y)."""
    out = []
    for marker, text in entries:
        out.append(f'<g transform="translate({x:.0f},{y:.0f})">{marker}'
                   f'<text x="10" y="4">{esc(text)}</text></g>')
        x += 24 + 6.2 * len(text)
    return out


def cross(x: float, y: float, r: float = 4.5) -> str:
    return (f'<path d="M{x - r:.1f},{y - r:.1f}L{x + r:.1f},{y + r:.1f}M{x - r:.1f},'
            f'{y + r:.1f}L{x + r:.1f},{y - r:.1f}" stroke="{OOM}" stroke-width="2.2"/>')


MARK_SLICE = f'<line x1="-5" x2="5" y1="0" y2="0" stroke="{SLICE}" stroke-width="2.5"/>'
MARK_FITTED = f'<circle r="3.5" fill="{FITTED}"/>'
MARK_OTHER = f'<circle r="3.5" fill="white" stroke="{OTHER}" stroke-width="1.6"/>'
MARK_OOM = cross(0, 0)
