"""The tables: use per pool and GPU model, model versions."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence

from recommender.core.domain import (
    ModelVersion,
)
from recommender.report.items import Item, Stats, fmt_gib_h, fmt_int, pct, stats_of
from recommender.report.svg import NDASH, TIMES, esc


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
        reserved = fmt_gib_h(s.reserved) if s.durations_known else NDASH
        rows.append(
            f'<tr><td>{esc(pool_id)}</td><td class="nowrap">{esc(model)}</td>'
            f'<td class="num"><span class="bar" style="width:calc({share:.0f}% - 16px)"></span>'
            f"<span>{fmt_int(len(g))}</span></td>"
            f'<td class="num">{fmt_int(s.known)}</td>'
            f'<td class="num">{_oom_cell(s)}</td>'
            f'<td class="num">{pct(s.slack_median)}</td>'
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
    return f"<span{cls}>{pct(s.oom_rate, 1)}</span> <span class=muted>({s.first_oom})</span>"


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
