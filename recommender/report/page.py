"""The page: summary cards, panels, per-action sections, put together from the store."""

from __future__ import annotations

import base64
import hashlib
import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Protocol

from recommender.core.demand import Run
from recommender.core.domain import Execution, ModelVersion, StoredRecommendation
from recommender.report.charts import histogram_svg, sources_svg, timeseries_svg, versions_svg
from recommender.report.items import (
    MAX_POINTS,
    REPORT_LIMIT,
    TOP_ACTIONS,
    Item,
    Stats,
    fmt_gib_h,
    fmt_int,
    item_of,
    pct,
    short,
    stats_of,
)
from recommender.report.layout import layout_section
from recommender.report.style import CSS, SELF_CHECK
from recommender.report.svg import NDASH, TIMES, esc
from recommender.report.tables import pools_table, versions_table


class ReportSource(Protocol):
    """What the report reads (`recommender.store.SqlStore`): bounded, read-only queries."""

    @property
    def dialect(self) -> str:
        """The database's kind, for the page's subtitle ("sqlite", "postgresql")."""
        ...
    def count_recommendations(self, action_id: str = "") -> int: ...
    def recent_with_executions(self, limit: int, action_id: str = ""
                               ) -> Iterable[tuple[StoredRecommendation, Execution | None]]: ...
    def list_model_versions(self, kind: str = "") -> list[ModelVersion]: ...
    def runs_in_window(self, gpu_model: str, since: datetime, until: datetime,
                       pool_id: str = "") -> list[Run]: ...


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


def _poisson_at_least(k: int, mean: float) -> float:
    """P(X >= k) for X ~ Poisson(mean): how surprising k OOMs are where the stated chances add
    up to `mean` (independent first attempts, each rare). Below 1 %, the card turns red: the
    service's tails are lighter than what happens, and its expected cost risks too much."""
    if k <= 0:
        return 1.0
    term = below = math.exp(-mean)
    for i in range(1, k):
        term *= mean / i
        below += term
    return max(1.0 - below, 0.0)


def summary_cards(s: Stats, serving: str) -> str:
    oom = pct(s.oom_rate, 1)
    reserved = (f"{fmt_gib_h(s.reserved)}" if s.durations_known else NDASH)
    reserved_hint = (f"{fmt_gib_h(s.reserved_oom)} GiB·h in OOM attempts; "
                     f"{fmt_int(s.durations_known)} with a duration"
                     if s.durations_known else "no execution reported a duration yet")
    return '<div class="cards">' + "".join([
        _card("Recommendations", fmt_int(s.recommendations),
              f"{fmt_int(s.actions)} action{'s' if s.actions != 1 else ''} · "
              f"{fmt_int(s.rungs)} rung{'s' if s.rungs != 1 else ''} after an OOM"),
        _card("Outcome known", fmt_int(s.known),
              f"{pct(s.known / s.recommendations if s.recommendations else None)} "
              "of recommendations"),
        _card("OOM rate", oom,
              f"{fmt_int(s.first_oom)} of {fmt_int(s.first_known)} first attempts ran out of "
              "memory",
              bad=bool(s.first_oom)),
        _card("Stated OOM risk",
              f"{s.stated_expected:,.1f}" if s.stated_n else NDASH,
              f"OOMs expected from the chances stated on {fmt_int(s.stated_n)} first attempts; "
              f"{fmt_int(s.stated_seen)} seen" if s.stated_n else
              "no first attempt with an outcome stated a chance yet",
              bad=s.stated_n > 0 and _poisson_at_least(s.stated_seen, s.stated_expected) < 0.01),
        _card("Median slack", pct(s.slack_median),
              f"fitted first attempts (n = {fmt_int(s.slack_n)})"),
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
    stats = (f"{fmt_int(s.recommendations)} recommendations · {fmt_int(s.known)} with an outcome · "
             f"OOM rate {pct(s.oom_rate, 1)} ({s.first_oom} of {s.first_known} first attempts)"
             f" · median slack {pct(s.slack_median)} · {_span(s)}")
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


def collect(store: ReportSource, action_id: str = "", limit: int = REPORT_LIMIT
            ) -> tuple[list[Item], int]:
    """The most recent `limit` recommendations as items, and how many are stored in all."""
    total = store.count_recommendations(action_id)
    items = [item_of(rec, ex) for rec, ex in store.recent_with_executions(limit, action_id)]
    return items, total


def render_report(store: ReportSource, *, action_id: str | None = None,
                  now: datetime | None = None, limit: int = REPORT_LIMIT,
                  top_actions: int = TOP_ACTIONS, layout_gpus: int | None = None,
                  layout_current: str = "all-balanced") -> str:
    """One self-contained HTML page: overall, then per action (the `top_actions` busiest)."""
    now = (now or datetime.now(UTC)).astimezone(UTC)
    items, total = collect(store, action_id or "", limit)
    items.sort(key=lambda i: i.at)
    versions = store.list_model_versions()
    serving = ", ".join(v.version for v in versions if v.serving)
    s = stats_of(items)
    backend = store.dialect
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
        parts.append(f'<div class="note">This report covers the {fmt_int(len(items))} most recent '
                     f"recommendations of {fmt_int(total)} stored (the cap is {fmt_int(limit)}); "
                     "older ones are left out.</div>")
    parts.append(summary_cards(s, serving))
    toc = ['<nav class="toc"><a href="#overview">Overview</a><a href="#pools">Pools and GPU '
           'models</a><a href="#versions">Model versions</a>'
           + ("" if action_id else '<a href="#layout">MIG layout</a>')]
    if shown_actions:
        toc.append("<br><span class=muted>Actions:</span> ")
        toc += [f'<a href="#action-{n}">{esc(short(a, 40))} '
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
