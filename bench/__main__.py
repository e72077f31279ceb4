"""`python -m bench [recommend|record|placement|parvagpu|retrain|layout|online|promotion|all]`:
run benchmarks, print plain-text tables. `all` runs the first four; `retrain` (minutes for 1M
rows), `layout` (the layout advice on the Alibaba v2023 trace), `online` and `promotion` (what
the retraining job decides on scratch workloads, about 30 s a seed) run alone."""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from collections.abc import Sequence

import grpc

from bench.common import DEFAULT_PG


def _callers(text: str) -> list[int]:
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"not a list of integers: {text!r}") from e
    if not values or any(v < 1 or v > 64 for v in values):
        raise argparse.ArgumentTypeError("callers must be between 1 and 64")
    return values


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m bench",
        description="Benchmarks of the IntelliScale recommender (plain-text tables).",
    )
    p.add_argument("which", nargs="?", default="all",
                   choices=["recommend", "record", "placement", "parvagpu", "retrain", "layout",
                            "online", "promotion", "all"])
    p.add_argument("--seeds", default="0",
                   help="promotion: seeds of the scratch workloads, comma-separated (default 0)")
    p.add_argument("--retrain-rows", default="100000,1000000",
                   help="retrain: executions to train on, comma-separated "
                   "(default 100000,1000000)")
    p.add_argument("--database-url", default=None,
                   help="recommend: database to benchmark against (default: a SQLite file in a "
                   "temp dir); PostgreSQL URLs get a fresh database per run, dropped after. "
                   "record: PostgreSQL admin URL (default: $RECOMMENDER_TEST_POSTGRES_URL or "
                   f"{DEFAULT_PG})")
    p.add_argument("--callers", type=_callers, default=[1, 16],
                   help="concurrent callers, comma-separated (default 1,16)")
    p.add_argument("--seconds", type=float, default=2.0,
                   help="recommend: seconds per handler per round (default 2)")
    p.add_argument("--rounds", type=int, default=3,
                   help="recommend: rounds, handlers interleaved within each (default 3)")
    p.add_argument("--nodes", type=int, default=4,
                   help="recommend: also time a request listing this many 8-GPU nodes "
                   "(0 = skip; default 4)")
    p.add_argument("--large-nodes", type=int, default=256,
                   help="recommend: also time a request listing this many 8-GPU nodes "
                   "(0 = skip; default 256)")
    p.add_argument("--no-pairs", dest="pairs", action="store_false",
                   help="recommend: skip the runner's pattern (Recommend + RecordExecution "
                   "pairs over many actions)")
    p.add_argument("--grow", type=int, default=50_000,
                   help="recommend: then add this many past recommendations of the action and "
                   "time Recommend again (0 = skip; default 50000)")
    p.add_argument("--executions", type=int, default=5000,
                   help="record: executions per caller setting (default 5000)")
    p.add_argument("--max-seconds", type=float, default=30.0,
                   help="record: stop sending after this long per caller setting (default 30)")
    p.add_argument("--traces-dir", default=os.environ.get("RECOMMENDER_TRACES_DIR",
                                                          "../shared/traces"),
                   help="layout: where the traces are (default ../shared/traces)")
    p.add_argument("--reps", type=int, default=30,
                   help="placement: repetitions per case, at most (default 30)")
    args = p.parse_args(argv)
    if not 0 < args.seconds <= 60 or not 1 <= args.rounds <= 20:
        p.error("--seconds must be in (0, 60] and --rounds in 1..20")
    if not 1 <= args.executions <= 1_000_000 or not 0 < args.max_seconds <= 600:
        p.error("--executions must be in 1..1,000,000 and --max-seconds in (0, 600]")
    if not 0 <= args.large_nodes <= 1024:
        p.error("--large-nodes must be in 0..1024")
    if not 0 <= args.nodes <= 1024 or not 1 <= args.reps <= 10_000:
        p.error("--nodes must be in 0..1024 and --reps in 1..10,000")
    if not 0 <= args.grow <= 1_000_000:
        p.error("--grow must be in 0..1,000,000")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    from bench import (
        layout,
        online,
        placement,
        promotion,
        recommend,
        record,
        retrain,
        throughput_targets,
    )

    which = (["recommend", "record", "placement", "parvagpu"] if args.which == "all"
             else [args.which])
    runners = {"recommend": recommend.run, "record": record.run, "placement": placement.run,
               "parvagpu": lambda a: throughput_targets.main([]), "retrain": retrain.run,
               "layout": layout.run, "online": online.run, "promotion": promotion.run}
    args.record_url = args.database_url or os.environ.get("RECOMMENDER_TEST_POSTGRES_URL",
                                                          DEFAULT_PG)
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "?"
    print(f"{time.strftime('%Y-%m-%d %H:%M')}; {cpus} CPUs; load average {load} (1, 5, 15 min); "
          f"Python {platform.python_version()}; grpcio {grpc.__version__}")
    for i, name in enumerate(which):
        if i:
            print()
        print(f"== {name} " + "=" * (60 - len(name)))
        start = time.perf_counter()
        runners[name](args)
        print(f"({name}: {time.perf_counter() - start:.1f} s)")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
