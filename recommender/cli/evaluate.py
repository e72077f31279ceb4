"""`recommender evaluate`: replays of traces through the service and the baselines."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from recommender.core import config

if TYPE_CHECKING:
    from collections.abc import Callable

    from recommender.core.catalog import Catalog
    from recommender.evaluation.replay import RunnerFactory
    from recommender.evaluation.traces import TraceExecution


def cmd_evaluate(args: argparse.Namespace) -> int:
    """Replays traces through the service and the baselines; prints DESIGN.md section 5."""

    from recommender.cli.progress import Progress
    from recommender.core.catalog import load_catalog
    from recommender.evaluation import replay
    from recommender.evaluation.traces import (
        gentd26_windows,
        models,
        modes,
        shapes,
        step_change,
        synthetic,
    )

    catalog = load_catalog(args.catalog_override)
    traces_dir = Path(args.traces_dir)
    database_url = database_url_of(args)
    runner = runner_factory(args.runner, catalog, database_url, args.catalog_override,
                            args.oom_wait_gpus)
    retraining = retraining_said(args.retrain_at, args.retrain_every)
    a100_h100 = ("A100-80GB", "H100-80GB")
    generated: list[tuple[str, str, Callable[..., list[TraceExecution]], int, int, bool]] = [
        # key, title, workload, its default actions and executions (--max-actions and
        # --executions change them), replayed without features too
        ("synthetic", "generated workload (memory = base + per-item x batch x sqrt(input), "
         "per action", synthetic, 40, 6000, True),
        ("step", "step change (each action's memory steps up 1.2-2x part-way, a new version "
         "of its code the request does not reveal", step_change, 30, 4000, False),
        ("modes", "two modes (10-40 % of each action's runs need 1.3-1.9x the rest, and the "
         "request does not say which", modes, 30, 4000, False),
        ("shapes", "input-dependent memory of other shapes (image: base + batch x side^2 "
         "beside an idle input; attention: base + batch x seq + batch x seq^2; batch x "
         "sqrt(input) with 12 % noise", shapes, 40, 5000, False),
        ("models", "one model per action (params_b, constant within each: context + 2.3 "
         "bytes a parameter + per-item x batch x sqrt(params_b)", models, 60, 3000, False),
    ]
    if args.seeds is not None:
        return _draws(args, catalog, runner, retraining,
                      [g[:5] for g in generated if args.trace in (g[0], "all")], a100_h100)
    runs: list[tuple[str, list[TraceExecution], tuple[str, ...], bool]] = []
    if args.trace in ("gentd26", "all"):
        if not (traces_dir / "alibaba-gentd26").exists():
            print(f"GenTD26 not found under {traces_dir} (--traces-dir)", file=sys.stderr)
            return 2
        window = ("each hour an execution with that hour's peak" if args.window_minutes == 60
                  else f"each {args.window_minutes} minutes an execution with their peak")
        runs.append((
            f"GenTD26 (each pod an action, {window}; "
            "H100-80GB, H100-94GB and H200 pools, mixed strategy)",
            gentd26_windows(traces_dir, max_pods=args.max_actions,
                            window_minutes=args.window_minutes),
            ("H100-80GB", "H100-94GB", "H200-141GB"), False))
    for key, title, workload, actions, executions, without in generated:
        if args.trace not in (key, "all"):
            continue
        runs.append((f"{title}; {' and '.join(a100_h100)} pools)",
                     workload(**sized(args, actions, executions), **seeded(args.seed)),
                     a100_h100, without))
    replays = len(runs) + sum(without for *_, without in runs)
    if database_url and replays > 1:
        print(f"--database-url holds one replay's history, and this run makes {replays} "
              "(--trace all, or synthetic with its replay without features): a later one would "
              "learn from the earlier one's executions. Give --trace gentd26 or step, or leave "
              "--database-url out (a temporary SQLite file per replay)", file=sys.stderr)
        return 2
    with Progress(not args.quiet) as show:
        say = show.note if args.verbose else None
        for title, trace, gpus, without_features in runs:
            pools = replay.mixed_pools(catalog, gpus)
            slices = replay.Slices.of(pools)
            actions = len({e.action_id for e in trace})
            show.clear()
            print(f"\n### {title}\n\n{len(trace):,} executions of {actions} actions; "
                  f"the service {RUNNERS[args.runner]}, {retraining}; an OOM priced at "
                  f"{args.oom_wait_gpus:g} whole GPUs (--oom-wait-gpus, "
                  "RECOMMENDER_OOM_WAIT_GPUS)\n", flush=True)

            def status(name: str) -> Callable[[str], None]:
                return lambda m: show(f"{name}: {m}")

            name = "IntelliScale (this service)"
            results = [replay.replay_service(
                name, trace, pools, catalog, retrain_at=args.retrain_at,
                retrain_every=args.retrain_every, runner=runner, progress=say,
                status=status(name), oom_wait_gpus=args.oom_wait_gpus)]
            if without_features:
                name = "IntelliScale without the request's features"
                results.append(replay.replay_service(
                    name, trace, pools, catalog, retrain_at=args.retrain_at,
                    retrain_every=args.retrain_every, use_features=False, runner=runner,
                    progress=say, status=status(name), oom_wait_gpus=args.oom_wait_gpus))
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
            print("\nThe service's first slices by how many executions of the action came "
                  "before:\n")
            print(replay.run_table(results[0]), flush=True)
            if results[0].against_truth:
                print("\nThe service's first slices against the best ones knowing the "
                      "distribution each peak was drawn from (the generator's), by the same "
                      "expected cost at the same price of an OOM:\n")
                print(replay.truth_table(results[0]), flush=True)
            vpa = next((r for r in results if r.name == replay.VPA), None)
            phases = replay.phase_table([results[0]], [vpa] if vpa else [])
            if phases:
                print("\nThe first attempts by where each execution sits in its action's story "
                      "(the generator's), the service's beside VPA's:\n")
                print(phases, flush=True)
            print("\nThe service's stated chance of an OOM on each first recommendation, against "
                  "what happened:\n")
            print(replay.calibration_table(results[0]), flush=True)
            print("\nWhat fewer OOMs would have cost: each first attempt whose stated chance "
                  "passed a bar started one slice up, the ladder as before (a static estimate: "
                  "every decision saw the replay's history):\n")
            print(replay.frontier_table(results[0], slices, vpa), flush=True)
            if results[0].retrains:
                print("\nRetraining (the service's replay):\n")
                print("\n".join(f"- {r}" for r in results[0].retrains), flush=True)
    return 0


def sized(args: argparse.Namespace, actions: int, executions: int) -> dict[str, int]:
    """A generated workload's size: --max-actions and --executions, else its defaults."""
    return {"actions": args.max_actions or actions, "executions": args.executions or executions}


def _draws(args: argparse.Namespace, catalog: Catalog, runner: RunnerFactory, retraining: str,
           workloads: list[tuple[str, str, Callable[..., list[TraceExecution]], int, int]],
           gpus: tuple[str, ...]) -> int:
    """--seeds: each workload replayed once per seed, the service and VPA, a row per draw."""
    from recommender.cli.progress import Progress
    from recommender.evaluation import replay

    if args.seed is not None:
        print("--seed and --seeds: give one (--seeds 7 replays the one draw as a row)",
              file=sys.stderr)
        return 2
    if not workloads:
        print("--seeds draws the generated workloads (synthetic, step, modes, shapes, models "
              "or all); GenTD26 is one trace", file=sys.stderr)
        return 2
    if args.database_url:
        print("--database-url holds one replay's history, and --seeds makes one a draw: leave "
              "it out (a temporary SQLite file per replay)", file=sys.stderr)
        return 2
    pools = replay.mixed_pools(catalog, gpus)
    slices = replay.Slices.of(pools)
    if args.trace == "all":
        print("GenTD26 is one trace, not a draw of a generator: left out with --seeds.")
    with Progress(not args.quiet) as show:
        for key, title, workload, actions, executions in workloads:
            draws = []
            for seed in args.seeds:
                trace = workload(**sized(args, actions, executions), seed=seed)
                name = f"IntelliScale, {key} seed {seed}"

                def status(m: str, name: str = name) -> None:
                    show(f"{name}: {m}")

                service = replay.replay_service(
                    name, trace, pools, catalog, retrain_at=args.retrain_at,
                    retrain_every=args.retrain_every, runner=runner, status=status,
                    oom_wait_gpus=args.oom_wait_gpus)
                show(f"{replay.VPA}, {key} seed {seed}")
                vpa = replay.replay_rule(replay.VPA, replay.BASELINES[replay.VPA], trace, slices)
                draws.append(replay.Draw.of(seed, service, vpa,
                                            replay.oracle(trace, slices).reserved_gbh, slices))
            show.clear()
            print(f"\n### {title}; {' and '.join(gpus)} pools), {len(draws)} draws\n\n"
                  f"Each draw a replay of the workload its seed generates; the service "
                  f"{RUNNERS[args.runner]}, {retraining}; an OOM priced at "
                  f"{args.oom_wait_gpus:g} whole GPUs.\n", flush=True)
            print(replay.draws_table(draws))
            print("\n" + replay.draws_said(draws), flush=True)
            phases = replay.phase_table([d.service for d in draws], [d.vpa for d in draws])
            if phases:
                print(f"\nOver the {len(draws)} draws, the first attempts by where each "
                      "execution sits in its action's story (the generator's):\n")
                print(phases, flush=True)
    return 0


RUNNERS = {
    "grpc": "called over gRPC as a live runner calls it (a real server, executions stamped "
            "on the wall clock when recorded)",
    "in-process": "called in process on trace time (--runner in-process)",
}


def seeded(seed: int | None) -> dict[str, int]:
    """The generator's own default seed unless one is given."""
    return {} if seed is None else {"seed": seed}


def retraining_said(retrain_at: tuple[float, ...], every: int) -> str:
    points = [f"{f:.0%}" for f in retrain_at]
    if every:
        points.append(f"every {every:,} executions")
    return (f"retrained at {', '.join(points)} of the sequence" if points
            else "never retrained")


def database_url_of(args: argparse.Namespace) -> str:
    """--database-url, checked; '' for a temporary SQLite file per replay. Never the
    service's own database (RECOMMENDER_DATABASE_URL or the default): a replay writes
    thousands of made-up executions."""
    from recommender.cli.options import database_url

    if not args.database_url:
        return ""
    return database_url(argparse.Namespace(database_url=args.database_url))


def runner_factory(kind: str, catalog: Catalog, database_url: str,
                   catalog_override: str | None,
                   oom_wait_gpus: float = config.OOM_WAIT_GPUS) -> RunnerFactory:
    """What starts the service for each replay: a server over gRPC or the use cases, pricing
    an OOM at `oom_wait_gpus` (and its retraining job scoring at the same price)."""
    from recommender.evaluation import replay

    if kind == "in-process":
        return lambda: replay.in_process(catalog, database_url, oom_wait_gpus)
    from recommender.rpc.runner import serving

    return lambda: serving(database_url, catalog_override=catalog_override,
                           oom_wait_gpus=oom_wait_gpus)
