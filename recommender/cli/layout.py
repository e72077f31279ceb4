"""`recommender layout`: which MIG geometry each GPU should have, from the recorded demand.

Reads the executions from the database as `history` and `report` do (no server needed), prints
the advised geometry per GPU, the demand per profile and the stock layouts' scores, and writes
the layout as a mig-parted configuration file.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from recommender.core import config

if TYPE_CHECKING:
    from recommender.core.layout import RecordedAdvice


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Registers `layout` on the `recommender` command's subparsers."""
    from recommender.cli.options import when

    p: argparse.ArgumentParser = subparsers.add_parser(
        "layout", help="advise the MIG geometry of each GPU from the recorded demand",
        description="Which MIG geometry each of N GPUs of a model should have so that the "
        "executions recorded in a window would have found the slices they asked for, against "
        "NVIDIA's stock mig-parted layouts (all-balanced, all-<profile>). Served = the share of "
        "the demanded instance-hours the layout holds at each moment. Times are ISO "
        "(2025-01-31T12:00Z) or a duration ago (24h, 7d).")
    p.add_argument("--database-url", default=None,
                   help="SQLAlchemy URL (env RECOMMENDER_DATABASE_URL; default "
                   f"{config.DEFAULT_DATABASE_URL})")
    p.add_argument("--gpu-model", required=True,
                   help="canonical id (A100-40GB) or the name NVML reports")
    p.add_argument("--gpus", type=int, required=True, help="how many GPUs to lay out")
    p.add_argument("--pool", default="", help="only executions recommended on this pool_id")
    p.add_argument("--since", type=when, default=None, metavar="TIME",
                   help=f"start of the window (default: {config.LAYOUT_WINDOW.days}d before "
                   "--until)")
    p.add_argument("--until", type=when, default=None, metavar="TIME",
                   help="end of the window (default: now)")
    p.add_argument("--out", default="mig-parted.yaml",
                   help="the mig-parted configuration to write (mig-parted.yaml; - prints it)")
    p.add_argument("--catalog-override", default=None,
                   help="JSON file of MiB values, aliases or models measured on your nodes "
                   "(env RECOMMENDER_CATALOG_OVERRIDE)")
    p.set_defaults(fn=run)
    return p


def _fail(message: str) -> int:
    print(f"recommender layout: {message}", file=sys.stderr)
    return 2


def run(args: argparse.Namespace) -> int:
    from recommender.cli.options import open_existing, writable_file
    from recommender.core.catalog import load_catalog
    from recommender.core.layout import advise_recorded
    from recommender.store import SqlStore

    catalog = load_catalog(args.catalog_override or os.environ.get("RECOMMENDER_CATALOG_OVERRIDE"))
    model = catalog.resolve(args.gpu_model)
    if model is None:
        return _fail(f"--gpu-model: unknown GPU model {args.gpu_model!r} (known: "
                     + ", ".join(m.id for m in catalog) + ")")
    if not model.placements_known:
        return _fail(f"--gpu-model: {model.id} has no known placement table; no MIG layout can "
                     "be advised for it")
    if not 1 <= args.gpus <= config.LAYOUT_MAX_GPUS:
        return _fail(f"--gpus: must be between 1 and {config.LAYOUT_MAX_GPUS}, got {args.gpus}")
    until = args.until or datetime.now(UTC)
    since = args.since or until - config.LAYOUT_WINDOW
    if since >= until:
        return _fail("--since: must be before --until")
    out = writable_file(args.out, "--out") if args.out != "-" else None
    store = SqlStore(open_existing(args))  # it only reads: it never creates a database
    try:
        result = advise_recorded(store, model, args.gpus, since, until, args.pool)
    finally:
        store.close()
    print(render(result))
    text = result.mig_parted()
    if args.out == "-":
        print()
        print(text, end="")
        return 0
    assert out is not None
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(out)
    print(f"\nwrote {out}: nvidia-mig-parted apply -f {out} -c {result.config_name}, or label "
          f"the nodes nvidia.com/mig.config={result.config_name} (GPU operator)")
    return 0


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], right: set[int]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h)
              for i, h in enumerate(header)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.rjust(w) if i in right else c.ljust(w)
                         for i, (c, w) in enumerate(zip(cells, widths, strict=True))).rstrip()

    return "\n".join([line(header), *(line(r) for r in rows)])


def render(result: RecordedAdvice) -> str:
    """The advice as plain-text tables: per GPU, per profile, and the alternatives."""
    from recommender.core.geometry import capacity_of

    a, d = result.advice, result.demand
    pool = f" on pool {result.pool_id}" if result.pool_id else ""
    days = d.seconds / 86400
    out = [f"Layout for {len(a.gpus)} {a.model.id}{pool}, learned from {result.executions} "
           f"executions from {d.since:%Y-%m-%d %H:%M} to {d.until:%Y-%m-%d %H:%M} UTC "
           f"({days:,.1f} days): {d.instance_seconds() / 3600:,.1f} instance-hours demanded.",
           ""]
    out.append(_table(["GPU", "GEOMETRY", "PLACEMENTS (start:size)"], [
        [str(i), g.label, " ".join(f"{p}@{s}:{n}" for p, s, n in g.placements) or "-"]
        for i, g in enumerate(a.gpus)], {0}))
    cap = capacity_of(a.gpus)
    if not d.empty:
        out.append("")
        out.append(_table(["PROFILE", "PEAK AT ONCE", "INSTANCE-H", "IN LAYOUT", "SERVED"], [
            [p, str(d.peak(p)), f"{d.instance_seconds(p) / 3600:,.1f}", str(cap.get(p, 0)),
             f"{d.served({p: cap.get(p, 0)}) / d.instance_seconds(p):.1%}"]
            for p in d.profiles], {1, 2, 3, 4}))
    out.append("")
    rows = [["advised" + ("" if a.exact else " (heuristic)"), f"{a.score.served_fraction:.1%}",
             f"{a.score.idle_memory_gib_h:,.0f}"]]
    rows += [[s.name, f"{s.served_fraction:.1%}", f"{s.idle_memory_gib_h:,.0f}"]
             for s in a.alternatives]
    out.append(_table(["LAYOUT", "SERVED", "IDLE GiB-H"], rows, {1, 2}))
    if not a.exact:
        out.append(f"no layout of {len(a.gpus)} {a.model.id} can serve more than {a.bound:.1%}")
    out += ["", f"reason: {a.reason}"]
    return "\n".join(out)
