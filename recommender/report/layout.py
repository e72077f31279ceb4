"""The report's layout section: the demand over time against what the current and the advised
MIG layouts hold, per GPU model that ran executions in the window.

"Current" is a stock mig-parted layout (all-balanced unless told otherwise: what clusters that
partition statically usually run). The number of GPUs, unless given, is the fewest on which some
layout serves all of the window's demand (`core.layout.fewest_gpus_serving_all`), so the chart
shows what the stock layout misses at the size the demand needs; `recommender layout --gpus N`
answers for any other size.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from recommender.core import config
from recommender.core.catalog import Catalog, load_catalog
from recommender.core.demand import Demand, RunSource, demand_of, over_time
from recommender.core.geometry import Geometry, capacity_of, stock_layouts
from recommender.core.layout import RecordedAdvice, advise, fewest_gpus_serving_all
from recommender.report.svg import (
    NDASH,
    TIMES,
    Frame,
    esc,
    left_margin,
    legend,
    svg,
    x_time_axis,
    y_axis,
)
from recommender.report.ticks import nice_ticks

DEMAND = "#9aa1ad"
ADVISED = "#2563c9"
CURRENT = "#c98a00"


def _grouped(gpus: Sequence[Geometry]) -> str:
    counts: dict[str, int] = {}
    for g in gpus:
        counts[g.label] = counts.get(g.label, 0) + 1
    return "; ".join(f"{n} {TIMES} ({label})" for label, n in counts.items())


def demand_svg(demand: Demand, current: dict[str, int], advised: dict[str, int],
               current_name: str, *, width: int, height: int) -> str:
    """Instances demanded (grey area) and held by the current and advised layouts (lines)."""
    label = "Instances demanded and held by the current and the advised layout, over time"
    starts, asked, held = over_time(demand, [current, advised], config.LAYOUT_REPORT_BUCKETS)
    step = demand.seconds / len(starts) if starts else 1.0
    yt = nice_ticks(0, max(max(asked, default=0.0), 1.0) * 1.1)
    t0, t1 = demand.since, demand.until
    f = Frame(width, height, left=left_margin(yt), x0=t0.timestamp(), x1=t1.timestamp(),
              y0=0, y1=yt[-1])
    body = y_axis(f, yt, "instances at once") + x_time_axis(f, t0, t1, "time (UTC)")

    def steps(values: Sequence[float]) -> list[str]:
        pts = []
        for s, v in zip(starts, values, strict=True):
            x0 = f.x(s.timestamp())
            x1 = f.x(s.timestamp() + step)
            pts += [f"{x0:.1f},{f.y(v):.1f}", f"{x1:.1f},{f.y(v):.1f}"]
        return pts

    area = [f"{f.x(t0.timestamp()):.1f},{f.plot_bottom:.1f}", *steps(asked),
            f"{f.x(t1.timestamp()):.1f},{f.plot_bottom:.1f}"]
    body.append(f'<polygon points="{" ".join(area)}" fill="{DEMAND}" fill-opacity="0.35" '
                f'stroke="{DEMAND}" stroke-width="1"><title>instances demanded (hourly '
                "mean)</title></polygon>")
    for values, colour, name, dash in ((held[0], CURRENT, current_name, ' stroke-dasharray="5 3"'),
                                       (held[1], ADVISED, "advised", "")):
        body.append(f'<polyline points="{" ".join(steps(values))}" fill="none" '
                    f'stroke="{colour}" stroke-width="2"{dash}><title>held by '
                    f"{esc(name)}</title></polyline>")
    body += legend(f.left + 4, 16, [
        (f'<rect x="-5" y="-5" width="10" height="10" fill="{DEMAND}" fill-opacity="0.5"/>',
         "demanded"),
        (f'<line x1="-6" x2="6" y1="0" y2="0" stroke="{CURRENT}" stroke-width="2" '
         f'stroke-dasharray="5 3"/>', f"held by {current_name}"),
        (f'<line x1="-6" x2="6" y1="0" y2="0" stroke="{ADVISED}" stroke-width="2"/>',
         "held by the advised layout"),
    ])
    return svg(f, body, label)


def _profile_table(r: RecordedAdvice, current: dict[str, int], current_name: str) -> str:
    d = r.demand
    advised = capacity_of(r.advice.gpus)
    rows = []
    for p in d.profiles:
        total = d.instance_seconds(p)

        def share(cap: dict[str, int], p: str = p, total: float = total) -> str:
            return f"{d.served({p: cap.get(p, 0)}) / total:.1%}" if total else NDASH

        rows.append(f"<tr><td><code>{esc(p)}</code></td><td class=num>{d.peak(p)}</td>"
                    f"<td class=num>{total / 3600:,.1f}</td>"
                    f"<td class=num>{current.get(p, 0)}</td><td class=num>{share(current)}</td>"
                    f"<td class=num>{advised.get(p, 0)}</td><td class=num>{share(advised)}</td>"
                    "</tr>")
    return ("<table><thead><tr><th>profile</th><th>peak at once</th><th>instance-hours</th>"
            f"<th>in {esc(current_name)}</th><th>served</th><th>advised</th><th>served</th>"
            "</tr></thead><tbody>" + "".join(rows) + "</tbody></table>")


def model_panel(r: RecordedAdvice, current_name: str) -> str:
    a, d = r.advice, r.demand
    stock = dict(stock_layouts(a.model))
    name = current_name if current_name in stock else "all-balanced"
    current = capacity_of([stock[name]] * len(a.gpus))
    now = next((s for s in a.alternatives if s.name == name), None)
    chart = demand_svg(d, current, capacity_of(a.gpus), name, width=1120, height=300)
    served_now = f"{now.served_fraction:.1%}" if now else NDASH
    caption = (f"{len(a.gpus)} {esc(a.model.id)} GPUs, {r.executions} executions. "
               f"Advised: {esc(_grouped(a.gpus))}: serves {a.score.served_fraction:.1%} of "
               f"{d.instance_seconds() / 3600:,.1f} demanded instance-hours; {esc(name)} serves "
               f"{served_now}. Served = the share of instance-hours the layout holds at each "
               "moment (a pod asks for one profile: another profile's slice does not serve it). "
               f"<code>recommender layout --gpu-model {esc(a.model.id)} --gpus "
               f"{len(a.gpus)}</code> writes the mig-parted file.")
    return (f'<div class="panel"><h4>{esc(a.model.id)}: demand against the layouts</h4>{chart}'
            f'<p class="caption">{caption}</p>{_profile_table(r, current, name)}</div>')


def layout_section(store: RunSource, *, now: datetime, catalog: Catalog | None = None,
                   gpus: int | None = None, current: str = "all-balanced") -> list[str]:
    """The section's HTML parts: one panel per GPU model with executions in the last
    `config.LAYOUT_WINDOW`."""
    catalog = catalog or load_catalog()
    since = now - config.LAYOUT_WINDOW
    parts = ['<h2 id="layout">MIG layout against the demand</h2>']
    panels = []
    for model in catalog:
        if not model.placements_known:
            continue
        runs = store.runs_in_window(model.id, since, now)
        demand = demand_of(runs, since, now)
        if demand.empty:
            continue
        n = gpus or fewest_gpus_serving_all(model, demand)
        r = RecordedAdvice(advise(model, demand, n), demand, len(runs))
        panels.append(model_panel(r, current))
    if not panels:
        panels.append(f'<div class="panel"><p class="muted">No executions in the '
                      f"{config.LAYOUT_WINDOW.days} days before {now:%Y-%m-%d %H:%M} UTC on a "
                      "GPU model with a known placement table: no layout to advise.</p></div>")
    return parts + panels
