"""`recommender evaluate`: replays of traces through the service and the baselines."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable


def cmd_evaluate(args: argparse.Namespace) -> int:
    """Replays traces through the service and the baselines; prints DESIGN.md section 5."""

    from recommender.cli.progress import Progress
    from recommender.core.catalog import load_catalog
    from recommender.evaluation import replay
    from recommender.evaluation.traces import (
        TraceExecution,
        gentd26_hourly,
        step_change,
        synthetic,
    )

    catalog = load_catalog(args.catalog_override)
    traces_dir = Path(args.traces_dir)
    runs: list[tuple[str, list[TraceExecution], tuple[str, ...], int]] = []
    if args.trace in ("gentd26", "all"):
        if not (traces_dir / "alibaba-gentd26").exists():
            print(f"GenTD26 not found under {traces_dir} (--traces-dir)", file=sys.stderr)
            return 2
        runs.append((
            "GenTD26 (each pod an action, each hour an execution with that hour's peak; "
            "H100-80GB, H100-94GB and H200 pools, mixed strategy)",
            gentd26_hourly(traces_dir, max_pods=args.max_actions),
            ("H100-80GB", "H100-94GB", "H200-141GB"), 0))
    if args.trace in ("synthetic", "all"):
        runs.append((
            "generated workload (memory = base + per-item x batch x sqrt(input), per action; "
            "A100-80GB and H100-80GB pools; retraining every "
            f"{args.retrain_every:,} executions)",
            synthetic(actions=args.max_actions or 40, executions=args.executions),
            ("A100-80GB", "H100-80GB"), args.retrain_every))
    if args.trace in ("step", "all"):
        runs.append((
            "step change (each action's memory steps up 1.2-2x part-way, a new version of its "
            "code the request does not reveal; A100-80GB and H100-80GB pools)",
            step_change(), ("A100-80GB", "H100-80GB"), 0))
    with Progress(not args.quiet) as show:
        say = show.note if args.verbose else None
        for title, trace, models, retrain_every in runs:
            pools = replay.mixed_pools(catalog, models)
            slices = replay.Slices.of(pools)
            actions = len({e.action_id for e in trace})
            show.clear()
            print(f"\n### {title}\n\n{len(trace):,} executions of {actions} actions\n",
                  flush=True)

            def status(name: str) -> Callable[[str], None]:
                return lambda m: show(f"{name}: {m}")

            name = "IntelliScale (this service)"
            results = [replay.replay_service(
                name, trace, pools, catalog, retrain_every=retrain_every,
                database_url=args.database_url or "", progress=say, status=status(name))]
            if retrain_every:
                name = "IntelliScale without the request's features"
                results.append(replay.replay_service(
                    name, trace, pools, catalog, use_features=False,
                    database_url=args.database_url or "", status=status(name)))
            for name, rule in replay.BASELINES.items():
                if name.startswith("user's") and not any(e.declared_mib for e in trace):
                    continue  # the trace declares nothing
                show(f"{name}: {len(trace):,} executions")
                results.append(replay.replay_rule(name, rule, trace, slices))
            best = replay.oracle(trace, slices)
            results.append(best)
            show.clear()
            print(replay.table(results, best.reserved_gbh))
            print("\nWhere the service's reserved memory above the oracle comes from:\n")
            print(replay.excess_table(results[0], best.reserved_gbh), flush=True)
    return 0
