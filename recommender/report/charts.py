"""The four charts: peaks against slices over time, the slack histogram, where
recommendations came from, and the model versions' timeline."""

from __future__ import annotations

import itertools
import math
from collections import Counter, defaultdict
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from recommender.core.domain import (
    ModelVersion,
    Outcome,
)
from recommender.report.items import (
    MAX_POINTS,
    MAX_VERSIONS,
    Item,
    fmt_int,
    median_or_none,
    pct,
    short,
)
from recommender.report.svg import (
    FITTED,
    FITTED_LATER,
    GRID,
    MARK_FITTED,
    MARK_OOM,
    MARK_OTHER,
    MARK_SLICE,
    MINUS,
    NDASH,
    OOM,
    OTHER,
    PALETTE,
    SLICE,
    SOURCE_COLOURS,
    TIMES,
    Frame,
    cross,
    empty_svg,
    esc,
    left_margin,
    legend,
    svg,
    x_axis_line,
    x_time_axis,
    y_axis,
)
from recommender.report.ticks import nice_ticks


def sample(items: Sequence[Item], limit: int) -> list[Item]:
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
    peak = f"peak {fmt_int(i.peak_mib)} MiB" if i.peak_mib is not None else "peak unknown"
    return (f"{i.at:%Y-%m-%d %H:%M:%S} UTC · {i.action_id} · attempt {i.attempt} · "
            f"{i.profile} {TIMES} {i.count} ({fmt_int(i.slice_mib)} MiB) on {i.pool_id} · {peak} · "
            f"{what}")


def timeseries_svg(items: Sequence[Item], *, width: int, height: int, step_line: bool,
                   max_points: int = MAX_POINTS) -> str:
    """Peak memory used against the recommended slice memory over time, OOMs marked."""
    label = "Peak memory used against the recommended slice, over time"
    if not items:
        return empty_svg(width, height, label, "No recommendations yet")
    ordered = sorted(items, key=lambda i: i.at)
    shown = sample(ordered, max_points)
    t0, t1 = ordered[0].at, ordered[-1].at
    if (t1 - t0).total_seconds() < 120:
        t0, t1 = t0 - timedelta(minutes=1), t1 + timedelta(minutes=1)
    pad = (t1 - t0) * 0.02
    t0, t1 = t0 - pad, t1 + pad
    top = max(max(i.slice_mib for i in shown),
              max((i.peak_mib or 0.0) for i in shown)) * 1.08
    yt = nice_ticks(0, top)
    f = Frame(width, height, left=left_margin(yt), x0=t0.timestamp(), x1=t1.timestamp(),
              y0=0, y1=yt[-1])
    body = y_axis(f, yt, "MiB per worker") + x_time_axis(f, t0, t1, "time (UTC)")
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
            m.append(cross(x, f.y(i.peak_mib if i.peak_mib is not None else i.slice_mib)))
            rug.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{f.plot_bottom - 7:.1f}" '
                       f'y2="{f.plot_bottom:.1f}" stroke="{OOM}" stroke-width="1.5"/>')
        elif i.peak_mib is not None:
            marker = (f'fill="{FITTED}" fill-opacity="0.85"' if i.outcome is Outcome.SUCCEEDED
                      else f'fill="white" stroke="{OTHER}" stroke-width="1.6"')
            m.append(f'<circle cx="{x:.1f}" cy="{f.y(i.peak_mib):.1f}" r="3.5" {marker}/>')
        marks.append(f"<g><title>{esc(_tip(i))}</title>{''.join(m)}</g>")
    body += rug + marks
    body += legend(f.left + 4, 16, [
        (MARK_SLICE, "recommended slice"), (MARK_FITTED, "peak used, fitted"),
        (MARK_OOM, "OOM (at the peak seen, else at the slice)"),
        (MARK_OTHER, "peak, failed or cancelled"),
    ])
    if len(shown) < len(items):
        body.append(f'<text x="{width - f.right}" y="16" text-anchor="end" class="muted">'
                    f'{fmt_int(len(shown))} of {fmt_int(len(items))} drawn (every OOM kept)</text>')
    return svg(f, body, label)


def histogram_svg(items: Sequence[Item], *, width: int, height: int) -> str:
    """Relative slack of fitted executions: first attempts, and rungs after an OOM stacked."""
    label = "Relative slack of fitted executions"
    first = [s for i in items if i.attempt == 1 and (s := i.slack) is not None]
    later = [s for i in items if i.attempt > 1 and (s := i.slack) is not None]
    if not first and not later:
        return empty_svg(width, height, label, "No fitted executions yet")
    bins = 20
    counts_first, counts_later = [0] * bins, [0] * bins
    for values, counts in ((first, counts_first), (later, counts_later)):
        for s in values:
            counts[min(bins - 1, max(0, int(s * bins)))] += 1
    yt = nice_ticks(0, max(a + b for a, b in zip(counts_first, counts_later, strict=True)), 4)
    yt = sorted({int(t) for t in yt if float(t).is_integer()} | {0})
    if len(yt) < 2:
        yt = [0, 1]
    f = Frame(width, height, left=left_margin(yt), x0=0, x1=1, y0=0, y1=yt[-1])
    body = y_axis(f, yt, "executions")
    body.append(x_axis_line(f))
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
    med = median_or_none(first)
    if med is not None:
        x = f.x(min(max(med, 0.0), 1.0))
        body.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{f.top - 4}" y2="{f.plot_bottom:.1f}" '
                    f'stroke="#111827" stroke-dasharray="4 3"/>')
        anchor = "start" if med < 0.6 else "end"
        dx = 4 if anchor == "start" else -4
        body.append(f'<text x="{x + dx:.1f}" y="{f.top + 6}" text-anchor="{anchor}" '
                    f'class="strong">median {pct(med)}</text>')
    body += legend(f.left, 16, [
        (f'<rect x="-5" y="-5" width="10" height="10" fill="{FITTED}"/>',
         f"first attempts ({len(first)})"),
        (f'<rect x="-5" y="-5" width="10" height="10" fill="{FITTED_LATER}"/>',
         f"after an OOM ({len(later)})"),
    ])
    return svg(f, body, label)


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
        return empty_svg(width, height, label, "No recommendations yet")
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
    f = Frame(width, height, left=left_margin(yt), top=34 + 16 * ((len(keys) - 1) // 3),
              x0=b0, x1=b0 + nb * size, y0=0, y1=yt[-1])
    body = y_axis(f, yt, f"recommendations per {_bucket_name(size)}")
    body += x_time_axis(f, datetime.fromtimestamp(b0, UTC),
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
        body += legend(f.left, 16 + 16 * (row // 3), [
            (f'<rect x="-5" y="-5" width="10" height="10" fill="{colours[k]}"/>', short(k, 22))
            for k in keys[row:row + 3]
        ])
    return svg(f, body, label)


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
    body = x_time_axis(f, t0, t1, "time (UTC)")
    for n, v in enumerate(shown):
        y = f.top + 12 + 24 * n
        body.append(f'<line x1="{f.left}" x2="{width - f.right}" y1="{y}" y2="{y}" '
                    f'stroke="{GRID}"/>')
        body.append(f'<text x="{f.left - 8}" y="{y + 4}" text-anchor="end">'
                    f'{esc(short(v.version, 24))}</text>')
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
    body += legend(f.left, 16, [
        ('<rect x="-6" y="-5" width="12" height="10" rx="3" fill="#cbd5e1"/>', "training window"),
        ('<path d="M0,-6L6,0L0,6L-6,0Z" fill="#15803d"/>', "serving"),
        (f'<path d="M0,-6L6,0L0,6L-6,0Z" fill="{FITTED}"/>', "promoted"),
        (f'<path d="M0,-6L6,0L0,6L-6,0Z" fill="{SLICE}"/>', "not promoted"),
    ])
    return svg(f, body, label)
