"""`recommender history`: the recommendation history in the terminal, as JSON or CSV."""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from recommender.cli.options import open_existing

if TYPE_CHECKING:
    from recommender.core.domain import HistoryEntry


HISTORY_FIELDS = ["created_at", "action_id", "execution_id", "recommendation_id",
                  "parent_recommendation_id", "attempt", "pool_id", "gpu_model", "profile",
                  "count", "slice_mib", "predicted_peak_mib", "source", "model_version",
                  "outcome", "peak_mib", "relative_slack", "oom_chance", "model_oom_chance"]
OUTCOME_WORDS = {"SUCCEEDED": "fitted", "OOM": "OOM", "FAILED": "failed",
                 "CANCELLED": "cancelled"}


def _history_rows(entries: Sequence[HistoryEntry]) -> list[dict[str, Any]]:
    rows = []
    for e in entries:
        rec = e.recommendation
        d = rec.decision
        mem = d.rung.profile.memory_mib
        slack = e.relative_slack
        rows.append({
            "created_at": rec.created_at.isoformat(timespec="seconds"),
            "action_id": rec.action_id,
            "execution_id": rec.execution_id,
            "recommendation_id": rec.id,
            "parent_recommendation_id": rec.parent_id or "",
            "attempt": d.attempt,
            "pool_id": d.rung.pool_id,
            "gpu_model": d.rung.gpu_model,
            "profile": d.rung.profile.name,
            "count": d.rung.count,
            "slice_mib": mem,
            "predicted_peak_mib": round(d.predicted_peak_mib),
            "source": d.source,
            "model_version": d.model_version,
            "outcome": e.outcome.value if e.outcome else None,
            "peak_mib": round(e.peak_memory_mib) if e.peak_memory_mib is not None else None,
            "relative_slack": round(slack, 4) if slack is not None else None,
            "oom_chance": round(d.oom_chance, 6),
            # A young action's first attempt: its model's chance before the population's
            # record at that slice size moved it (None where the record does not apply).
            "model_oom_chance": (None if d.model_oom_chance is None
                                 else round(d.model_oom_chance, 6)),
        })
    return rows


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "~"


def _history_table(rows: Sequence[dict[str, Any]], colour: bool) -> str:
    """Aligned columns: text left, numbers right; slack as a percent, OOM marked."""
    cols: list[tuple[str, str]] = [  # (header, "<" left or ">" right)
        ("TIME (UTC)", "<"), ("ACTION_ID", "<"), ("TRY", ">"), ("POOL", "<"),
        ("GPU MODEL", "<"), ("SLICE", "<"), ("SLICE MiB", ">"), ("PEAK MiB", ">"),
        ("SLACK", ">"), ("OOM RISK", ">"), ("OUTCOME", "<"), ("SOURCE", "<"),
    ]
    table = []
    for r in rows:
        outcome = OUTCOME_WORDS.get(r["outcome"] or "", "-")
        table.append([
            r["created_at"][:16].replace("T", " "),
            _clip(r["action_id"], 32),
            str(r["attempt"]),
            _clip(r["pool_id"], 20),
            r["gpu_model"],
            f"{r['profile']} x{r['count']}",
            f"{r['slice_mib']:,}",
            f"{r['peak_mib']:,}" if r["peak_mib"] is not None else "-",
            f"{r['relative_slack'] * 100:.0f}%" if r["relative_slack"] is not None else "-",
            f"{r['oom_chance']:.1%}" if r["oom_chance"] else "-",
            "OOM !" if outcome == "OOM" else outcome,
            r["source"],
        ])
    widths = [max([len(h), *(len(t[k]) for t in table)]) for k, (h, _) in enumerate(cols)]
    outcome_at = [h for h, _ in cols].index("OUTCOME")

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.ljust(w) if a == "<" else c.rjust(w)
                         for c, w, (_, a) in zip(cells, widths, cols, strict=True)).rstrip()

    out = [line([h for h, _ in cols])]
    for t in table:
        text = line(t)
        if colour and t[outcome_at].startswith("OOM"):
            text = f"\033[31m{text}\033[0m"
        out.append(text)
    return "\n".join(out)


def cmd_history(args: argparse.Namespace) -> int:
    from recommender.core.catalog import load_catalog
    from recommender.core.domain import HistoryFilter
    from recommender.store import SqlStore

    gpu_model = args.gpu_model or ""
    if gpu_model:  # an NVML name or a short one, as ListRecommendations resolves them
        model = load_catalog(os.environ.get("RECOMMENDER_CATALOG_OVERRIDE")).resolve(gpu_model)
        gpu_model = model.id if model else gpu_model
    store = SqlStore(open_existing(args))
    f = HistoryFilter(action_id=args.action or "", pool_id=args.pool or "", gpu_model=gpu_model,
                      source=args.source or "", outcome=args.outcome or "",
                      created_after=args.since, created_before=args.until)
    try:
        entries, token = store.list_history(f, args.limit, args.page_token or "")
    except ValueError as e:
        print(f"recommender history: {e}", file=sys.stderr)
        return 2
    rows = _history_rows(entries)
    if args.json:
        print(json.dumps(rows, indent=1))
    elif args.csv:
        writer = csv.DictWriter(sys.stdout, fieldnames=HISTORY_FIELDS, lineterminator="\n")
        writer.writeheader()
        writer.writerows({k: "" if v is None else v for k, v in r.items()} for r in rows)
    elif not rows:
        print("no recommendations match" + (" on this page" if args.page_token else ""))
    else:
        colour = sys.stdout.isatty() and not os.environ.get("NO_COLOR")
        print(_history_table(rows, colour))
        outcomes = Counter(OUTCOME_WORDS.get(r["outcome"] or "", "no outcome yet")
                           for r in rows)
        print(f"\n{len(rows)} recommendation{'s' if len(rows) != 1 else ''}, newest first: "
              + ", ".join(f"{n} {k}" for k, n in outcomes.most_common())
              + ". SLACK = (slice - peak) / slice, on fitted executions.")
    if token:
        print(f"more: add --page-token {token}", file=sys.stderr)
    return 0
