"""What the throughput population costs: the grouped read of the executions table and the build.

`python -m bench.throughput_population [--rows 200000] [--actions 2000]`: fills a fresh SQLite
file and a fresh PostgreSQL database with `rows` successful executions of `actions` actions,
each with a throughput on one of the A100-80GB's five base profiles and one to four workers,
then times SqlStore.throughput_summary (the one query, run once per replica per
THROUGHPUT_POPULATION_TTL_S) and building the Population from its rows, best of three.
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

from bench.common import DEFAULT_PG, fresh_database, insert_executions
from recommender.core.catalog import load_catalog
from recommender.core.throughput_population import build
from recommender.store import SqlStore, connect

PROFILES = {"1g.10gb": 9856, "2g.20gb": 19968, "3g.40gb": 40192, "4g.40gb": 40192,
            "7g.80gb": 80896}


def fill(url: str, rows: int, actions: int) -> None:
    engine = connect(url, timeout_s=None)
    rng = random.Random(7)
    t0 = datetime(2026, 11, 1, tzinfo=UTC)

    def executions() -> Iterator[dict[str, object]]:
        for i in range(rows):
            profile = rng.choice(list(PROFILES))
            at = t0 + timedelta(seconds=i)
            yield {
                "execution_id": f"p{i}", "action_id": f"a{rng.randrange(actions)}",
                "recommendation_id": "", "gpu_model": "A100-80GB", "profile": profile,
                "slice_memory_mib": PROFILES[profile], "count": rng.randint(1, 4),
                "peak_memory_mib": 4000.0, "sm_utilization": 50.0, "duration_s": 60.0,
                "throughput": rng.uniform(50, 500), "outcome": "SUCCEEDED",
                "started_at": at, "ended_at": at, "recorded_at": at, "features": {},
            }

    insert_executions(engine, executions())
    engine.dispose()


def measure(url: str, label: str, rows: int, actions: int) -> None:
    fill(url, rows, actions)
    engine = connect(url, timeout_s=None)
    store = SqlStore(engine)
    catalog = load_catalog()
    since = datetime(2026, 1, 1, tzinfo=UTC)
    read = built = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        summary = store.throughput_summary(since)
        read = min(read, time.perf_counter() - start)
        start = time.perf_counter()
        population = build(catalog, summary)
        built = min(built, time.perf_counter() - start)
    engine.dispose()
    print(f"| {label} | {rows:,} | {population.actions:,} | {len(summary):,} | "
          f"{read * 1e3:,.0f} | {built * 1e3:,.0f} |")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else "")
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--actions", type=int, default=2000)
    parser.add_argument("--postgres-url", default=DEFAULT_PG)
    args = parser.parse_args(argv)
    print("| database | executions | actions | summary rows | read ms | build ms |")
    print("|---|---|---|---|---|---|")
    with fresh_database(None) as url:
        measure(url, "SQLite", args.rows, args.actions)
    with fresh_database(args.postgres_url) as url:
        measure(url, "PostgreSQL", args.rows, args.actions)


if __name__ == "__main__":
    main()
