"""The runner's pattern in process: Recommend, then RecordExecution of it, over 64 actions.

`python -m bench.pairs [--warm 1500] [--pairs 1000] [--population-rows 0] [--background]`:
through `rpc.convert` and `UseCases` (no gRPC) on a SQLite file with the history cache, as the
server runs them. Prints the CPU per pair (`time.process_time`, so a background thread counts)
and the slowest pairs. `--population-rows` first bulk-inserts that many executions of 500 other
actions (what the population prior re-reads every 200 records); `--background` reads it in its
own thread, as `recommender serve` does.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bench.common import insert_executions
from bench.recommend import RUNNER_ACTIONS, runner_request
from recommender._proto.intelliscale.recommender.v1 import recommender_pb2 as pb
from recommender.core.cache import ActionCache
from recommender.core.catalog import load_catalog
from recommender.core.usecases import UseCases
from recommender.rpc import convert
from recommender.store import SqlStore, connect, migrate


def _others(rows: int) -> Iterator[dict[str, object]]:
    rng = random.Random(2)
    # Each action's model size, the same in all its runs: the population fits a slope on it
    # across actions (population._slopes_across), as it would.
    sizes = [round(random.Random(a).uniform(0.5, 2.0), 2) for a in range(500)]
    start = datetime.now(UTC) - timedelta(days=3)
    for i in range(rows):
        at = start + timedelta(seconds=i)
        batch = float(2 ** rng.randint(0, 3))
        action = rng.randrange(500)
        # Peaks that grow with the batch: the population pools a slope on it, as it would.
        yield {"execution_id": f"p{i}", "action_id": f"other-{action}",
               "recommendation_id": "", "gpu_model": "A100-40GB", "profile": "1g.10gb",
               "slice_memory_mib": 9856, "count": 1,
               "peak_memory_mib": rng.uniform(1500, 4500) * batch ** 0.5 * sizes[action],
               "sm_utilization": 50.0, "duration_s": 60.0, "throughput": 0.0,
               "outcome": "SUCCEEDED", "started_at": at, "ended_at": at, "recorded_at": at,
               "features": {"batch_size": batch, "input_mb": round(rng.uniform(1, 100), 1),
                            "params_b": sizes[action]}}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else "")
    p.add_argument("--warm", type=int, default=1500, help="pairs before timing (default 1500)")
    p.add_argument("--pairs", type=int, default=1000, help="pairs timed (default 1000)")
    p.add_argument("--population-rows", type=int, default=0,
                   help="executions of other actions inserted first (default 0)")
    p.add_argument("--background", action="store_true",
                   help="read the population in its own thread, as the server does")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        engine = connect(f"sqlite:///{Path(tmp) / 'pairs.db'}")
        migrate(engine)
        if args.population_rows:
            insert_executions(engine, _others(args.population_rows))
        catalog = load_catalog()
        kwargs = {"population_in_background": True} if args.background else {}
        uc = UseCases(SqlStore(engine), catalog=catalog, cache=ActionCache(), **kwargs)
        requests = [runner_request(f"bench-runner-{k}") for k in range(RUNNER_ACTIONS)]
        rng = random.Random(1)

        def pair(i: int) -> None:
            m = requests[i % RUNNER_ACTIONS]
            rec = uc.recommend(convert.request_from_pb(catalog, m)).recommendation
            record = pb.ExecutionRecord(
                execution_id=f"run-{i}", action_id=m.action_id, recommendation_id=rec.id,
                gpu_model="A100-40GB", profile=rec.decision.rung.profile.name,
                count=rec.decision.rung.count, peak_memory_mib=rng.uniform(5000, 7000),
                sm_utilization=20.0, duration_s=60.0, outcome=pb.OUTCOME_SUCCEEDED)
            record.ended_at.GetCurrentTime()
            uc.record_execution(convert.execution_from_pb(catalog, record, datetime.now(UTC)))

        for i in range(args.warm):
            pair(i)
        waits = []
        cpu = time.process_time()
        for i in range(args.warm, args.warm + args.pairs):
            t0 = time.perf_counter()
            pair(i)
            waits.append(time.perf_counter() - t0)
        cpu = time.process_time() - cpu
        waits.sort()
        print(f"{args.pairs} pairs after {args.warm}: {cpu / args.pairs * 1e6:,.0f} us CPU a "
              f"pair; slowest {waits[-1] * 1e3:.1f} ms, 99.5th percentile "
              f"{waits[int(len(waits) * 0.995) - 1] * 1e3:.1f} ms; refits "
              f"{uc.action_models.fitted}, for a new prior scale only "
              f"{uc.action_models.refinished}")
        engine.dispose()


if __name__ == "__main__":
    main()
