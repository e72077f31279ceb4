"""The operator's report: one self-contained HTML page with inline SVG charts.

Everything is drawn here, in a few small functions: no JavaScript library, no external URL, no
font from the network (a Content-Security-Policy in the page forbids loading anything). The
only script is a few inline lines that mark the page as drawn, for the headless-browser test.

Definitions follow DESIGN.md section 5: the OOM rate counts executions whose first
recommendation was too small; relative slack is (slice memory - peak used) / slice memory on
successful first attempts; reserved GiB·h is slice memory x count x duration.
"""

from __future__ import annotations

import base64
import hashlib
import html
import itertools
import math
import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from recommender.domain import Execution, ModelVersion, Outcome, StoredRecommendation
from recommender.store.repository import SqlStore

REPORT_LIMIT = 50_000
"""At most this many recommendations, the most recent, are read."""
TOP_ACTIONS = 20
MAX_POINTS = 3_000
"""Points drawn in one time series; above it, a deterministic sample (every OOM kept)."""
MAX_VERSIONS = 30

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


@dataclass(frozen=True)
class Item:
    """One recommendation and, once known, how its execution turned out."""

    at: datetime
    action_id: str
    pool_id: str
    gpu_model: str
    profile: str
    count: int
    slice_mib: int
    source: str
    model_version: str
    attempt: int
    outcome: Outcome | None
    peak_mib: float | None
    reserved_gib_h: float | None

    @property
    def slack(self) -> float | None:
        if self.outcome is not Outcome.SUCCEEDED or self.peak_mib is None or not self.slice_mib:
            return None
        return (self.slice_mib - self.peak_mib) / self.slice_mib


def item_of(rec: StoredRecommendation, ex: Execution | None) -> Item:
    d = rec.decision
    outcome: Outcome | None = None
    peak: float | None = None
    reserved: float | None = None
    if ex is not None:
        outcome, peak = ex.outcome, ex.peak_memory_mib
        if ex.duration_s > 0:
            reserved = ex.slice_memory_mib * max(ex.count, 1) * ex.duration_s / 3600 / 1024
    elif rec.oom_at is not None:
        outcome, peak = Outcome.OOM, rec.oom_observed_peak_mib
    if outcome is Outcome.OOM and not peak:
        peak = None  # died before a peak was seen
    return Item(
        at=rec.created_at, action_id=rec.action_id, pool_id=d.rung.pool_id,
        gpu_model=d.rung.gpu_model, profile=d.rung.profile.name, count=d.rung.count,
        slice_mib=d.rung.profile.memory_mib, source=d.source, model_version=d.model_version,
        attempt=d.attempt, outcome=outcome, peak_mib=peak, reserved_gib_h=reserved,
    )


# --- numbers and scales ------------------------------------------------------------------


def _pct(x: float | None, digits: int = 0) -> str:
    return NDASH if x is None else f"{x * 100:.{digits}f}%"


def _int(x: float) -> str:
    return f"{x:,.0f}"


def _gib_h(x: float) -> str:
    return f"{x:,.1f}" if x < 100 else f"{x:,.0f}"


def _median(xs: Sequence[float]) -> float | None:
    return statistics.median(xs) if xs else None


def nice_ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    """Round ticks (1, 2, 5 x 10^k) covering [lo, hi]."""
    if hi <= lo:
        hi = lo + 1
    raw = (hi - lo) / max(n, 1)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    start = math.floor(lo / step) * step
    ticks = []
    t = start
    while t <= hi + step * 1e-9:
        ticks.append(round(t, 10))
        t += step
    if ticks[-1] < hi:
        ticks.append(round(t, 10))
    return ticks


TIME_STEPS = [60, 300, 600, 900, 1800, 3600, 2 * 3600, 3 * 3600, 6 * 3600, 12 * 3600, 86400,
              2 * 86400, 7 * 86400, 14 * 86400]
MONTH_STEPS = [1, 2, 3, 6, 12, 24, 60, 120]


def _month_ticks(t0: datetime, t1: datetime, n: int) -> tuple[list[datetime], str]:
    """First days of months (or of years), calendar-aligned."""
    months = (t1.year - t0.year) * 12 + t1.month - t0.month + 1
    step = next((m for m in MONTH_STEPS if months / m <= n), MONTH_STEPS[-1])
    index = t0.year * 12 + t0.month - 1
    index += -index % step
    ticks = []
    while True:
        t = datetime(index // 12, index % 12 + 1, 1, tzinfo=UTC)
        if t > t1:
            break
        if t >= t0:
            ticks.append(t)
        index += step
    return ticks, "%Y" if step >= 12 else "%b %Y"


def time_ticks(t0: datetime, t1: datetime, n: int = 7) -> tuple[list[datetime], str]:
    """Round UTC times in [t0, t1] and the strftime format that reads best at that step."""
    span = (t1 - t0).total_seconds()
    step = next((s for s in TIME_STEPS if span / s <= n), 0)
    if not step:
        return _month_ticks(t0, t1, n)
    first = math.ceil(t0.timestamp() / step) * step
    ticks = []
    t = first
    while t <= t1.timestamp():
        ticks.append(datetime.fromtimestamp(t, UTC))
        t += step
    if step >= 86400:
        fmt = "%b %d" if t1.year == t0.year else "%Y-%m-%d"
    elif t0.date() == t1.date():
        fmt = "%H:%M"
    else:
        fmt = "%b %d %H:%M"
    return ticks, fmt


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


def _svg(f: Frame, body: Iterable[str], label: str) -> str:
    return (f'<svg viewBox="0 0 {f.width} {f.height}" width="{f.width}" height="{f.height}" '
            f'role="img" aria-label="{esc(label)}" class="chart">' + "".join(body) + "</svg>")


def _empty_svg(width: int, height: int, label: str, message: str) -> str:
    return (f'<svg viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" '
            f'aria-label="{esc(label)}" class="chart empty"><rect x="0.5" y="0.5" '
            f'width="{width - 1}" height="{height - 1}" rx="6" fill="#fafbfc" stroke="{GRID}"/>'
            f'<text x="{width / 2:.0f}" y="{height / 2:.0f}" text-anchor="middle" '
            f'class="muted">{esc(message)}</text></svg>')


def _left_margin(ticks: Sequence[float]) -> int:
    """Room for the widest tick label and the rotated axis title."""
    return 34 + 7 * max(len(f"{t:,.0f}") for t in ticks)


def _y_axis(f: Frame, ticks: Sequence[float], label: str, fmt: str = "{:,.0f}") -> list[str]:
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


def _x_axis_line(f: Frame) -> str:
    return (f'<line x1="{f.left}" x2="{f.width - f.right}" y1="{f.plot_bottom:.1f}" '
            f'y2="{f.plot_bottom:.1f}" stroke="#9aa1ad"/>')


def _x_time_axis(f: Frame, t0: datetime, t1: datetime, label: str) -> list[str]:
    ticks, fmt = time_ticks(t0, t1, n=max(3, (f.width - f.left - f.right) // 120))
    out = [_x_axis_line(f)]
    for t in ticks:
        x = f.x(t.timestamp())
        out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{f.plot_bottom:.1f}" '
                   f'y2="{f.plot_bottom + 4:.1f}" stroke="#9aa1ad"/>')
        out.append(f'<text x="{x:.1f}" y="{f.plot_bottom + 17:.1f}" text-anchor="middle">'
                   f'{esc(t.strftime(fmt))}</text>')
    out.append(f'<text x="{(f.left + f.width - f.right) / 2:.0f}" y="{f.height - 6}" '
               f'text-anchor="middle" class="axis-label">{esc(label)}</text>')
    return out


def _legend(x: float, y: float, entries: Sequence[tuple[str, str]]) -> list[str]:
    """Entries of (marker svg at 0,0, text); laid out left to right from (x, y)."""
    out = []
    for marker, text in entries:
        out.append(f'<g transform="translate({x:.0f},{y:.0f})">{marker}'
                   f'<text x="10" y="4">{esc(text)}</text></g>')
        x += 24 + 6.2 * len(text)
    return out


def _cross(x: float, y: float, r: float = 4.5) -> str:
    return (f'<path d="M{x - r:.1f},{y - r:.1f}L{x + r:.1f},{y + r:.1f}M{x - r:.1f},'
            f'{y + r:.1f}L{x + r:.1f},{y - r:.1f}" stroke="{OOM}" stroke-width="2.2"/>')


MARK_SLICE = f'<line x1="-5" x2="5" y1="0" y2="0" stroke="{SLICE}" stroke-width="2.5"/>'
MARK_FITTED = f'<circle r="3.5" fill="{FITTED}"/>'
MARK_OTHER = f'<circle r="3.5" fill="white" stroke="{OTHER}" stroke-width="1.6"/>'
MARK_OOM = _cross(0, 0)


def _sample(items: Sequence[Item], limit: int) -> list[Item]:
    """All OOMs (up to half the budget) and an even stride through the rest, in time order."""
    if len(items) <= limit:
        return list(items)
    ooms = [i for i in items if i.outcome is Outcome.OOM]
    ooms = ooms[:: math.ceil(len(ooms) / (limit // 2))] if len(ooms) > limit // 2 else ooms
    rest = [i for i in items if i.outcome is not Outcome.OOM]
    budget = limit - len(ooms)
    rest = rest[:: math.ceil(len(rest) / budget)] if rest and budget > 0 else []
    return sorted(ooms + rest, key=lambda i: i.at)


def _tip(i: Item) -> str:
    what = ("no outcome yet" if i.outcome is None
            else "fitted" if i.outcome is Outcome.SUCCEEDED
            else "OOM" if i.outcome is Outcome.OOM else i.outcome.value.lower())
    peak = f"peak {_int(i.peak_mib)} MiB" if i.peak_mib is not None else "peak unknown"
    return (f"{i.at:%Y-%m-%d %H:%M:%S} UTC · {i.action_id} · attempt {i.attempt} · "
            f"{i.profile} {TIMES} {i.count} ({_int(i.slice_mib)} MiB) on {i.pool_id} · {peak} · "
            f"{what}")


def timeseries_svg(items: Sequence[Item], *, width: int, height: int, step_line: bool,
                   max_points: int = MAX_POINTS) -> str:
    """Peak memory used against the recommended slice memory over time, OOMs marked."""
    label = "Peak memory used against the recommended slice, over time"
    if not items:
        return _empty_svg(width, height, label, "No recommendations yet")
    ordered = sorted(items, key=lambda i: i.at)
    shown = _sample(ordered, max_points)
    t0, t1 = ordered[0].at, ordered[-1].at
    if (t1 - t0).total_seconds() < 120:
        t0, t1 = t0 - timedelta(minutes=1), t1 + timedelta(minutes=1)
    pad = (t1 - t0) * 0.02
    t0, t1 = t0 - pad, t1 + pad
    top = max(max(i.slice_mib for i in shown),
              max((i.peak_mib or 0.0) for i in shown)) * 1.08
    yt = nice_ticks(0, top)
    f = Frame(width, height, left=_left_margin(yt), x0=t0.timestamp(), x1=t1.timestamp(),
              y0=0, y1=yt[-1])
    body = _y_axis(f, yt, "MiB per worker") + _x_time_axis(f, t0, t1, "time (UTC)")
    if step_line:  # one step line per pool: the first attempts' slice as it changed
        by_pool: dict[str, list[Item]] = defaultdict(list)
        for i in shown:
            if i.attempt == 1:
                by_pool[i.pool_id].append(i)
        for firsts in by_pool.values():
            if len(firsts) < 2:
                continue
            pts = []
            for a, b in itertools.pairwise(firsts):
                pts.append(f"{f.x(a.at.timestamp()):.1f},{f.y(a.slice_mib):.1f}")
                pts.append(f"{f.x(b.at.timestamp()):.1f},{f.y(a.slice_mib):.1f}")
            last = firsts[-1]
            pts.append(f"{f.x(last.at.timestamp()):.1f},{f.y(last.slice_mib):.1f}")
            body.append(f'<polyline points="{" ".join(pts)}" fill="none" stroke="{SLICE}" '
                        f'stroke-opacity="0.45" stroke-width="1.2"/>')
    marks: list[str] = []
    rug: list[str] = []
    for i in shown:
        x = f.x(i.at.timestamp())
        ys = f.y(i.slice_mib)
        m = [f'<line x1="{x - 4:.1f}" x2="{x + 4:.1f}" y1="{ys:.1f}" y2="{ys:.1f}" '
             f'stroke="{SLICE}" stroke-width="2.5"/>']
        if i.outcome is Outcome.OOM:
            m.append(_cross(x, f.y(i.peak_mib if i.peak_mib is not None else i.slice_mib)))
            rug.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{f.plot_bottom - 7:.1f}" '
                       f'y2="{f.plot_bottom:.1f}" stroke="{OOM}" stroke-width="1.5"/>')
        elif i.peak_mib is not None:
            marker = (f'fill="{FITTED}" fill-opacity="0.85"' if i.outcome is Outcome.SUCCEEDED
                      else f'fill="white" stroke="{OTHER}" stroke-width="1.6"')
            m.append(f'<circle cx="{x:.1f}" cy="{f.y(i.peak_mib):.1f}" r="3.5" {marker}/>')
        marks.append(f"<g><title>{esc(_tip(i))}</title>{''.join(m)}</g>")
    body += rug + marks
    body += _legend(f.left + 4, 16, [
        (MARK_SLICE, "recommended slice"), (MARK_FITTED, "peak used, fitted"),
        (MARK_OOM, "OOM (at the peak seen, else at the slice)"),
        (MARK_OTHER, "peak, failed or cancelled"),
    ])
    if len(shown) < len(items):
        body.append(f'<text x="{width - f.right}" y="16" text-anchor="end" class="muted">'
                    f'{_int(len(shown))} of {_int(len(items))} drawn (every OOM kept)</text>')
    return _svg(f, body, label)


def histogram_svg(items: Sequence[Item], *, width: int, height: int) -> str:
    """Relative slack of fitted executions: first attempts, and rungs after an OOM stacked."""
    label = "Relative slack of fitted executions"
    first = [s for i in items if i.attempt == 1 and (s := i.slack) is not None]
    later = [s for i in items if i.attempt > 1 and (s := i.slack) is not None]
    if not first and not later:
        return _empty_svg(width, height, label, "No fitted executions yet")
    bins = 20
    counts_first, counts_later = [0] * bins, [0] * bins
    for values, counts in ((first, counts_first), (later, counts_later)):
        for s in values:
            counts[min(bins - 1, max(0, int(s * bins)))] += 1
    yt = nice_ticks(0, max(a + b for a, b in zip(counts_first, counts_later, strict=True)), 4)
    yt = sorted({int(t) for t in yt if float(t).is_integer()} | {0})
    if len(yt) < 2:
        yt = [0, 1]
    f = Frame(width, height, left=_left_margin(yt), x0=0, x1=1, y0=0, y1=yt[-1])
    body = _y_axis(f, yt, "executions")
    body.append(_x_axis_line(f))
    bw = f.x(1 / bins) - f.x(0)
    for k in range(bins):
        x = f.x(k / bins)
        base = f.plot_bottom
        for n, colour, what in ((counts_first[k], FITTED, "first attempts"),
                                (counts_later[k], FITTED_LATER, "after an OOM")):
            if not n:
                continue
            h = f.plot_bottom - f.y(n)
            body.append(f'<rect x="{x + 0.5:.1f}" y="{base - h:.1f}" width="{bw - 1:.1f}" '
                        f'height="{h:.1f}" fill="{colour}"><title>{k * 5}{NDASH}{k * 5 + 5}% '
                        f'slack: {n} {what}</title></rect>')
            base -= h
    for t in (0, 0.25, 0.5, 0.75, 1.0):
        x = f.x(t)
        body.append(f'<text x="{x:.1f}" y="{f.plot_bottom + 16:.1f}" text-anchor="middle">'
                    f'{t * 100:.0f}%</text>')
    body.append(f'<text x="{(f.left + width - f.right) / 2:.0f}" y="{height - 6}" '
                f'text-anchor="middle" class="axis-label">relative slack = (slice {MINUS} peak)'
                f' / slice</text>')
    med = _median(first)
    if med is not None:
        x = f.x(min(max(med, 0.0), 1.0))
        body.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{f.top - 4}" y2="{f.plot_bottom:.1f}" '
                    f'stroke="#111827" stroke-dasharray="4 3"/>')
        anchor = "start" if med < 0.6 else "end"
        dx = 4 if anchor == "start" else -4
        body.append(f'<text x="{x + dx:.1f}" y="{f.top + 6}" text-anchor="{anchor}" '
                    f'class="strong">median {_pct(med)}</text>')
    body += _legend(f.left, 16, [
        (f'<rect x="-5" y="-5" width="10" height="10" fill="{FITTED}"/>',
         f"first attempts ({len(first)})"),
        (f'<rect x="-5" y="-5" width="10" height="10" fill="{FITTED_LATER}"/>',
         f"after an OOM ({len(later)})"),
    ])
    return _svg(f, body, label)


def _bucket_seconds(span: float, max_buckets: int) -> int:
    for s in (60, 300, 900, 3600, 6 * 3600, 86400, 7 * 86400, 30 * 86400, 91 * 86400):
        if span / s <= max_buckets:
            return s
    return 365 * 86400


def _bucket_name(seconds: int) -> str:
    return {60: "minute", 300: "5 minutes", 900: "15 minutes", 3600: "hour",
            6 * 3600: "6 hours", 86400: "day", 7 * 86400: "week",
            30 * 86400: "30 days", 91 * 86400: "quarter"}.get(seconds, "year")


def _source_key(i: Item) -> str:
    if i.source == "model" and i.model_version:
        return f"model {i.model_version}"
    return i.source or "unknown"


def sources_svg(items: Sequence[Item], *, width: int, height: int, max_buckets: int = 36) -> str:
    """Recommendations per time bucket, stacked by source (model versions apart)."""
    label = "Recommendations over time by source and model version"
    if not items:
        return _empty_svg(width, height, label, "No recommendations yet")
    t0 = min(i.at for i in items).timestamp()
    t1 = max(i.at for i in items).timestamp()
    size = _bucket_seconds(t1 - t0, max_buckets)
    b0 = math.floor(t0 / size) * size
    nb = int((t1 - b0) // size) + 1
    keys = [k for k, _ in Counter(_source_key(i) for i in items).most_common()]
    colours: dict[str, str] = {}
    spare = iter(PALETTE * 10)
    for k in keys:
        colours[k] = SOURCE_COLOURS.get(k) or next(spare)
    grid: list[Counter[str]] = [Counter() for _ in range(nb)]
    for i in items:
        grid[int((i.at.timestamp() - b0) // size)][_source_key(i)] += 1
    yt = nice_ticks(0, max(sum(c.values()) for c in grid), 4)
    yt = sorted({int(t) for t in yt if float(t).is_integer()} | {0})
    if len(yt) < 2:
        yt = [0, 1]
    f = Frame(width, height, left=_left_margin(yt), top=34 + 16 * ((len(keys) - 1) // 3),
              x0=b0, x1=b0 + nb * size, y0=0, y1=yt[-1])
    body = _y_axis(f, yt, f"recommendations per {_bucket_name(size)}")
    body += _x_time_axis(f, datetime.fromtimestamp(b0, UTC),
                         datetime.fromtimestamp(b0 + nb * size, UTC), "time (UTC)")
    bw = max(1.0, f.x(b0 + size) - f.x(b0) - 1.5)
    for n, c in enumerate(grid):
        base = f.plot_bottom
        x = f.x(b0 + n * size) + 0.75
        start = datetime.fromtimestamp(b0 + n * size, UTC)
        for k in keys:
            if not c[k]:
                continue
            h = f.plot_bottom - f.y(c[k])
            body.append(f'<rect x="{x:.1f}" y="{base - h:.1f}" width="{bw:.1f}" height="{h:.1f}" '
                        f'fill="{colours[k]}"><title>{esc(f"{start:%Y-%m-%d %H:%M} UTC: ")}'
                        f'{c[k]} {esc(k)}</title></rect>')
            base -= h
    for row in range(0, len(keys), 3):
        body += _legend(f.left, 16 + 16 * (row // 3), [
            (f'<rect x="-5" y="-5" width="10" height="10" fill="{colours[k]}"/>', _short(k, 22))
            for k in keys[row:row + 3]
        ])
    return _svg(f, body, label)


def versions_svg(versions: Sequence[ModelVersion], *, width: int) -> str:
    """Each model version: its training window, when it was made, and which one serves."""
    label = "Model versions over time"
    shown = sorted(versions, key=lambda v: v.created_at)[-MAX_VERSIONS:]
    height = 100 + 24 * len(shown)
    times = [v.created_at for v in shown]
    times += [t for v in shown for t in (v.training_window_start, v.training_window_end) if t]
    t0, t1 = min(times), max(times)
    pad = max((t1 - t0) * 0.03, timedelta(minutes=5))
    t0, t1 = t0 - pad, t1 + pad
    f = Frame(width, height, left=170, top=34, x0=t0.timestamp(), x1=t1.timestamp(),
              y0=0, y1=max(len(shown), 1))
    body = _x_time_axis(f, t0, t1, "time (UTC)")
    for n, v in enumerate(shown):
        y = f.top + 12 + 24 * n
        body.append(f'<line x1="{f.left}" x2="{width - f.right}" y1="{y}" y2="{y}" '
                    f'stroke="{GRID}"/>')
        body.append(f'<text x="{f.left - 8}" y="{y + 4}" text-anchor="end">'
                    f'{esc(_short(v.version, 24))}</text>')
        if v.training_window_start and v.training_window_end:
            xa = f.x(v.training_window_start.timestamp())
            xb = f.x(v.training_window_end.timestamp())
            body.append(f'<rect x="{xa:.1f}" y="{y - 5}" width="{max(xb - xa, 2):.1f}" '
                        f'height="10" rx="3" fill="#cbd5e1"><title>{esc(v.version)} trained on '
                        f'{v.training_window_start:%Y-%m-%d %H:%M} {NDASH} '
                        f'{v.training_window_end:%Y-%m-%d %H:%M} UTC</title></rect>')
        colour = "#15803d" if v.serving else FITTED if v.promoted else SLICE
        x = f.x(v.created_at.timestamp())
        state = "serving" if v.serving else "promoted" if v.promoted else "not promoted"
        body.append(f'<path d="M{x:.1f},{y - 7}L{x + 7:.1f},{y}L{x:.1f},{y + 7}L{x - 7:.1f},{y}Z" '
                    f'fill="{colour}"><title>{esc(v.version)}: created '
                    f'{v.created_at:%Y-%m-%d %H:%M} UTC, {state}</title></path>')
        if v.serving:
            right = x < width - f.right - 70
            body.append(f'<text x="{x + 11 if right else x - 11:.1f}" y="{y + 4}" '
                        f'text-anchor="{"start" if right else "end"}" class="strong" '
                        f'style="fill:#15803d">serving</text>')
    body += _legend(f.left, 16, [
        ('<rect x="-6" y="-5" width="12" height="10" rx="3" fill="#cbd5e1"/>', "training window"),
        ('<path d="M0,-6L6,0L0,6L-6,0Z" fill="#15803d"/>', "serving"),
        (f'<path d="M0,-6L6,0L0,6L-6,0Z" fill="{FITTED}"/>', "promoted"),
        (f'<path d="M0,-6L6,0L0,6L-6,0Z" fill="{SLICE}"/>', "not promoted"),
    ])
    return _svg(f, body, label)


def _short(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


# --- tables ------------------------------------------------------------------------------


@dataclass
class Stats:
    recommendations: int
    actions: int
    first_known: int
    first_oom: int
    known: int
    rungs: int
    slack_median: float | None
    slack_n: int
    reserved: float
    reserved_oom: float
    durations_known: int
    start: datetime | None
    end: datetime | None

    @property
    def oom_rate(self) -> float | None:
        return self.first_oom / self.first_known if self.first_known else None


def stats_of(items: Sequence[Item]) -> Stats:
    firsts = [i for i in items if i.attempt == 1 and i.outcome is not None]
    slack = [s for i in items if i.attempt == 1 and (s := i.slack) is not None]
    timed = [i for i in items if i.reserved_gib_h is not None]
    return Stats(
        recommendations=len(items),
        actions=len({i.action_id for i in items}),
        first_known=len(firsts),
        first_oom=sum(1 for i in firsts if i.outcome is Outcome.OOM),
        known=sum(1 for i in items if i.outcome is not None),
        rungs=sum(1 for i in items if i.attempt > 1),
        slack_median=_median(slack),
        slack_n=len(slack),
        reserved=sum(i.reserved_gib_h or 0.0 for i in timed),
        reserved_oom=sum(i.reserved_gib_h or 0.0 for i in timed if i.outcome is Outcome.OOM),
        durations_known=len(timed),
        start=min((i.at for i in items), default=None),
        end=max((i.at for i in items), default=None),
    )


def pools_table(items: Sequence[Item]) -> str:
    """Use per pool and GPU model: counts, outcomes, slack, reserved GiB·h, common slices."""
    if not items:
        return '<p class="muted">No recommendations yet.</p>'
    groups: dict[tuple[str, str], list[Item]] = defaultdict(list)
    for i in items:
        groups[(i.pool_id, i.gpu_model)].append(i)
    top = max(len(g) for g in groups.values())
    rows = []
    for (pool_id, model), g in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        s = stats_of(g)
        profiles = Counter(f"{i.profile} {TIMES} {i.count}" for i in g).most_common(3)
        share = 100 * len(g) / top
        reserved = _gib_h(s.reserved) if s.durations_known else NDASH
        rows.append(
            f'<tr><td>{esc(pool_id)}</td><td class="nowrap">{esc(model)}</td>'
            f'<td class="num"><span class="bar" style="width:calc({share:.0f}% - 16px)"></span>'
            f"<span>{_int(len(g))}</span></td>"
            f'<td class="num">{_int(s.known)}</td>'
            f'<td class="num">{_oom_cell(s)}</td>'
            f'<td class="num">{_pct(s.slack_median)}</td>'
            f'<td class="num">{reserved}</td>'
            f"<td>{', '.join(f'{esc(p)} <span class=muted>({n})</span>' for p, n in profiles)}"
            f"</td></tr>")
    return ('<table class="data"><thead><tr><th>Pool</th><th>GPU model</th>'
            '<th class="num bar-col">Recommendations</th><th class="num">Outcome known</th>'
            '<th class="num">OOM rate (first attempts)</th><th class="num">Median slack</th>'
            '<th class="num">Reserved GiB·h</th><th>Most used slices</th></tr></thead><tbody>'
            + "".join(rows) + "</tbody></table>")


def _oom_cell(s: Stats) -> str:
    if not s.first_known:
        return NDASH
    cls = ' class="bad"' if s.first_oom else ""
    return f"<span{cls}>{_pct(s.oom_rate, 1)}</span> <span class=muted>({s.first_oom})</span>"


def versions_table(versions: Sequence[ModelVersion]) -> str:
    rows = []
    for v in versions:
        window = (f"{v.training_window_start:%Y-%m-%d %H:%M} {NDASH} "
                  f"{v.training_window_end:%Y-%m-%d %H:%M}"
                  if v.training_window_start and v.training_window_end else NDASH)
        metrics = ", ".join(
            f"{esc(k)} = {m:.4g}" for k, m in sorted(v.metrics.items())) or NDASH
        state = ('<span class="badge serving">serving</span>' if v.serving
                 else '<span class="badge">promoted</span>' if v.promoted else "")
        rows.append(f"<tr><td><code>{esc(v.version)}</code> {state}</td><td>{esc(v.kind)}</td>"
                    f"<td>{v.created_at:%Y-%m-%d %H:%M}</td><td>{window}</td>"
                    f"<td>{metrics}</td><td>{esc(v.reason)}</td></tr>")
    return ('<table class="data"><thead><tr><th>Version</th><th>Kind</th><th>Created (UTC)</th>'
            "<th>Training window (UTC)</th><th>Metrics</th><th>Reason</th></tr></thead><tbody>"
            + "".join(rows) + "</tbody></table>")


# --- the page ----------------------------------------------------------------------------


CSS = """
:root { color-scheme: light; }
* { box-sizing: border-box; }
body { margin: 0; background: #f4f5f7; color: #1f2937;
  font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "Liberation Sans", Arial,
  sans-serif; }
main { max-width: 1180px; margin: 0 auto; padding: 24px 20px 48px; }
h1 { font-size: 24px; margin: 0 0 4px; }
h2 { font-size: 19px; margin: 34px 0 10px; padding-top: 6px; border-top: 1px solid #d9dde3; }
h3 { font-size: 16px; margin: 0 0 4px; word-break: break-all; }
.sub, .muted { color: #6b7280; }
svg text.muted { fill: #6b7280; }
.note { background: #fff7e6; border: 1px solid #f3d38b; border-radius: 6px; padding: 8px 12px;
  margin: 12px 0; }
.cards { display: grid; grid-template-columns: repeat(auto-fit, minmax(170px, 1fr));
  gap: 12px; margin: 18px 0 8px; }
.card { background: white; border: 1px solid #e3e6ea; border-radius: 8px; padding: 12px 14px; }
.card .label { font-size: 12px; text-transform: uppercase; letter-spacing: .04em;
  color: #6b7280; }
.card .value { font-size: 26px; font-weight: 650; margin: 2px 0; }
.card .value.bad { color: #b91c1c; }
.card .value.text { font-size: 15px; padding: 8px 0 5px; overflow-wrap: anywhere; }
.card .hint { font-size: 12px; color: #6b7280; }
.panel { background: white; border: 1px solid #e3e6ea; border-radius: 8px; padding: 14px;
  margin: 12px 0; overflow-x: auto; }
.panel h4 { margin: 0 0 6px; font-size: 14px; }
.panel p.caption { margin: 6px 0 0; font-size: 12px; color: #6b7280; }
.row { display: grid; grid-template-columns: 1fr 1fr; gap: 12px; }
.row > .panel { margin: 0; }
svg.chart { display: block; max-width: 100%; height: auto; font-size: 11px; }
svg.chart text { fill: #374151; }
svg.chart text.axis-label { fill: #4b5563; font-size: 12px; }
svg.chart text.strong { font-weight: 600; fill: #111827; paint-order: stroke;
  stroke: white; stroke-width: 3px; stroke-linejoin: round; }
table.data { border-collapse: collapse; width: 100%; font-size: 13px; }
table.data th, table.data td { padding: 6px 8px; border-bottom: 1px solid #eceef1;
  text-align: left; vertical-align: top; }
table.data th { font-weight: 600; color: #4b5563; background: #f8f9fb; }
table.data .num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.num { position: relative; }
.bar { position: absolute; left: 8px; top: 5px; bottom: 5px; background: #dbe7fb;
  border-radius: 3px; z-index: 0; }
td.num > span:not(.bar) { position: relative; z-index: 1; }
th.bar-col { min-width: 150px; }
.bad { color: #b91c1c; font-weight: 600; }
.nowrap { white-space: nowrap; }
.badge { display: inline-block; font-size: 11px; padding: 1px 6px; border-radius: 9px;
  background: #e0e7ff; color: #3730a3; }
.badge.serving { background: #dcfce7; color: #166534; }
nav.toc { font-size: 13px; }
nav.toc a { color: #1d4ed8; text-decoration: none; margin-right: 10px; white-space: nowrap; }
.action { background: white; border: 1px solid #e3e6ea; border-radius: 8px; padding: 14px;
  margin: 16px 0; }
.action .stats { color: #4b5563; font-size: 13px; margin-bottom: 8px; }
.action .row { grid-template-columns: 1fr 1fr; }
.action .row > div { min-width: 0; }
code { font-size: 12px; background: #f1f3f5; padding: 1px 4px; border-radius: 4px; }
footer { margin-top: 40px; font-size: 12px; color: #6b7280; }
"""

SELF_CHECK = (
    "window.onerror=function(m){document.documentElement.setAttribute('data-js-error',"
    "String(m));};(function(){var s=document.querySelectorAll('svg.chart'),d=0;"
    "for(var i=0;i<s.length;i++){var b=s[i].getBoundingClientRect();"
    "if(b.width>0&&b.height>0&&s[i].childElementCount>0)d++;}"
    "var h=document.documentElement;h.setAttribute('data-svg-count',s.length);"
    "h.setAttribute('data-svg-drawn',d);h.setAttribute('data-rendered','ok');})();"
)


def _csp() -> str:
    digest = base64.b64encode(hashlib.sha256(SELF_CHECK.encode()).digest()).decode()
    return (f"default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
            f"script-src 'sha256-{digest}'; base-uri 'none'; form-action 'none'")


def _card(label: str, value: str, hint: str, *, bad: bool = False, text: bool = False) -> str:
    cls = "value bad" if bad else "value text" if text else "value"
    return (f'<div class="card"><div class="label">{esc(label)}</div>'
            f'<div class="{cls}">{value}</div><div class="hint">{hint}</div></div>')


def _span(s: Stats) -> str:
    if s.start is None or s.end is None:
        return "no recommendations yet"
    return f"{s.start:%Y-%m-%d %H:%M} {NDASH} {s.end:%Y-%m-%d %H:%M} UTC"


def summary_cards(s: Stats, serving: str) -> str:
    oom = _pct(s.oom_rate, 1)
    reserved = (f"{_gib_h(s.reserved)}" if s.durations_known else NDASH)
    reserved_hint = (f"{_gib_h(s.reserved_oom)} GiB·h in OOM attempts; "
                     f"{_int(s.durations_known)} with a duration"
                     if s.durations_known else "no execution reported a duration yet")
    return '<div class="cards">' + "".join([
        _card("Recommendations", _int(s.recommendations),
              f"{_int(s.actions)} action{'s' if s.actions != 1 else ''} · "
              f"{_int(s.rungs)} rung{'s' if s.rungs != 1 else ''} after an OOM"),
        _card("Outcome known", _int(s.known),
              f"{_pct(s.known / s.recommendations if s.recommendations else None)} "
              "of recommendations"),
        _card("OOM rate", oom,
              f"{_int(s.first_oom)} of {_int(s.first_known)} first attempts ran out of memory",
              bad=bool(s.first_oom)),
        _card("Median slack", _pct(s.slack_median),
              f"fitted first attempts (n = {_int(s.slack_n)})"),
        _card("Reserved GiB·h", reserved, reserved_hint),
        _card("Serving model", esc(serving or "none"),
              "learned model in use" if serving else "recommendations come from priors and "
              "history", text=True),
    ]) + "</div>"


def _panel(title: str, svg: str, caption: str = "") -> str:
    cap = f'<p class="caption">{caption}</p>' if caption else ""
    return f'<div class="panel"><h4>{esc(title)}</h4>{svg}{cap}</div>'


def action_section(n: int, action_id: str, items: Sequence[Item]) -> str:
    s = stats_of(items)
    stats = (f"{_int(s.recommendations)} recommendations · {_int(s.known)} with an outcome · "
             f"OOM rate {_pct(s.oom_rate, 1)} ({s.first_oom} of {s.first_known} first attempts)"
             f" · median slack {_pct(s.slack_median)} · {_span(s)}")
    return (
        f'<section class="action" id="action-{n}"><h3>{esc(action_id)}</h3>'
        f'<div class="stats">{stats}</div>'
        + timeseries_svg(items, width=1120, height=260, step_line=True,
                         max_points=MAX_POINTS // 2)
        + '<div class="row"><div>'
        + histogram_svg(items, width=550, height=210)
        + "</div><div>"
        + sources_svg(items, width=550, height=210, max_buckets=24)
        + "</div></div>"
        + pools_table(items)
        + "</section>"
    )


def collect(store: SqlStore, action_id: str = "", limit: int = REPORT_LIMIT
            ) -> tuple[list[Item], int]:
    """The most recent `limit` recommendations as items, and how many are stored in all."""
    total = store.count_recommendations(action_id)
    items = [item_of(rec, ex) for rec, ex in store.recent_with_executions(limit, action_id)]
    return items, total


def render_report(store: SqlStore, *, action_id: str | None = None, now: datetime | None = None,
                  limit: int = REPORT_LIMIT, top_actions: int = TOP_ACTIONS,
                  layout_gpus: int | None = None, layout_current: str = "all-balanced") -> str:
    """One self-contained HTML page: overall, then per action (the `top_actions` busiest)."""
    now = (now or datetime.now(UTC)).astimezone(UTC)
    items, total = collect(store, action_id or "", limit)
    items.sort(key=lambda i: i.at)
    versions = store.list_model_versions()
    serving = ", ".join(v.version for v in versions if v.serving)
    s = stats_of(items)
    backend = store.engine.dialect.name
    scope = f"action <code>{esc(action_id)}</code>" if action_id else "all actions"

    by_action: dict[str, list[Item]] = defaultdict(list)
    for i in items:
        by_action[i.action_id].append(i)
    ranked = sorted(by_action.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    shown_actions = ranked[:top_actions] if not action_id else []

    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{_csp()}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>IntelliScale recommender report · {esc(action_id or 'all actions')}</title>",
        f"<style>{CSS}</style></head><body><main>",
        "<h1>IntelliScale recommender report</h1>",
        f'<div class="sub">{scope} · {_span(s)} · generated {now:%Y-%m-%d %H:%M} UTC from the '
        f"{esc(backend)} database</div>",
    ]
    if total > len(items):
        parts.append(f'<div class="note">This report covers the {_int(len(items))} most recent '
                     f"recommendations of {_int(total)} stored (the cap is {_int(limit)}); "
                     "older ones are left out.</div>")
    parts.append(summary_cards(s, serving))
    toc = ['<nav class="toc"><a href="#overview">Overview</a><a href="#pools">Pools and GPU '
           'models</a><a href="#versions">Model versions</a>'
           + ("" if action_id else '<a href="#layout">MIG layout</a>')]
    if shown_actions:
        toc.append("<br><span class=muted>Actions:</span> ")
        toc += [f'<a href="#action-{n}">{esc(_short(a, 40))} '
                f"<span class=muted>({len(g)})</span></a>"
                for n, (a, g) in enumerate(shown_actions, 1)]
    toc.append("</nav>")
    parts += toc

    oom_note = ("A red cross is an OOM: the execution needed more than its slice; the next rung "
                "of the ladder follows it. Hover a mark for its details.")
    parts += [
        '<h2 id="overview">Overview</h2>',
        _panel("Peak memory used against the recommended slice (per worker)",
               timeseries_svg(items, width=1120, height=340, step_line=bool(action_id)),
               oom_note),
        '<div class="row">',
        _panel("Relative slack of fitted executions", histogram_svg(items, width=540, height=240),
               "How much of each slice went unused. The dashed line is the median over first "
               "attempts; lower is tighter, 0% means the peak filled the slice."),
        _panel("Where recommendations came from", sources_svg(items, width=540, height=240),
               "prior: the user's declared memory; history: the action's past peaks; model: a "
               "learned model version; ladder: a bigger slice after an OOM; fallback: no "
               "information or no database."),
        "</div>",
        '<h2 id="pools">Use per pool and GPU model</h2>',
        '<div class="panel">', pools_table(items),
        f'<p class="caption">Reserved GiB·h = slice memory {TIMES} count {TIMES} duration, '
        "for executions "
        "that reported their duration. OOM rate over first attempts with a known outcome."
        "</p></div>",
        '<h2 id="versions">Model versions</h2>',
    ]
    if versions:
        parts += ['<div class="panel">', versions_svg(versions, width=1120),
                  versions_table(versions), "</div>"]
    else:
        parts.append('<div class="panel"><p class="muted">No learned model versions yet: '
                     "recommendations come from declared memory and each action's history."
                     "</p></div>")
    if not action_id:  # the layout is the cluster's, not an action's
        from recommender.report_layout import layout_section

        parts += layout_section(store, now=now, gpus=layout_gpus, current=layout_current)
    if shown_actions:
        more = len(ranked) - len(shown_actions)
        parts.append(f'<h2 id="actions">Per action: the {len(shown_actions)} with the most '
                     "recommendations"
                     + (f" <span class=muted>({more} more not shown)</span>" if more else "")
                     + "</h2>")
        parts += [action_section(n, a, g) for n, (a, g) in enumerate(shown_actions, 1)]
    parts += [
        "<footer>Drawn by <code>recommender report</code>. Times are UTC. Slack and OOM rate "
        "follow DESIGN.md section 5. This page loads nothing from the network.</footer>",
        f"</main><script>{SELF_CHECK}</script></body></html>",
    ]
    return "\n".join(parts)
