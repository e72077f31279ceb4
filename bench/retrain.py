"""Retraining time and peak memory for N recorded executions (default 100,000 and 1,000,000).

Executions of the generated workload (recommender/learning/synthetic.py, 500 actions) are bulk
inserted into a fresh database, then `recommender retrain` runs in a child process: its wall
time and peak resident memory (ru_maxrss) are what a CronJob would see.
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta

from sqlalchemy import create_engine, make_url, text

from bench.common import insert_executions
from recommender.evaluation.synthetic import generate
from recommender.store import connect, migrate

ACTIONS = 500


def _fill(url: str, rows: int) -> float:
    engine = connect(url, timeout_s=None)
    migrate(engine)
    start = time.perf_counter()
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    executions = ({
        "execution_id": f"b{i}", "action_id": e.action_id, "recommendation_id": "",
        "gpu_model": "A100-80GB", "profile": "7g.80gb", "slice_memory_mib": 80896,
        "count": 1, "peak_memory_mib": e.peak_mib, "sm_utilization": 20.0,
        "duration_s": 600.0, "throughput": 0.0, "outcome": "SUCCEEDED",
        "started_at": e.at - timedelta(minutes=10), "ended_at": e.at,
        "recorded_at": e.at, "features": e.features,
    } for i, e in enumerate(generate(ACTIONS, rows, start=t0, seed=11,
                                     spacing=timedelta(seconds=20))))
    insert_executions(engine, executions)
    engine.dispose()
    return time.perf_counter() - start


def _retrain(url: str) -> tuple[float, float, str]:
    start = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "recommender", "retrain", "--quiet",
                          "--database-url", url], capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    peak_mib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    if out.returncode != 0:
        raise RuntimeError(out.stderr)
    return wall, peak_mib, out.stdout.strip().splitlines()[0] if out.stdout else ""


def run(args: argparse.Namespace) -> None:
    sizes = [int(x) for x in str(args.retrain_rows).split(",")]
    print(f"{'executions':>10}  {'database':<10}  {'insert s':>8}  {'retrain s':>9}  "
          f"{'peak RSS MiB':>12}  result")
    for rows in sizes:
        if args.database_url and args.database_url.startswith("postgresql"):
            name = f"bench_retrain_{uuid.uuid4().hex[:8]}"
            admin = create_engine(args.database_url, isolation_level="AUTOCOMMIT")
            with admin.connect() as c:
                c.execute(text(f'CREATE DATABASE "{name}"'))
            url = make_url(args.database_url).set(database=name).render_as_string(False)
            try:
                fill = _fill(url, rows)
                wall, peak, result = _retrain(url)
            finally:
                with admin.connect() as c:
                    c.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
                admin.dispose()
            kind = "PostgreSQL"
        else:
            with tempfile.TemporaryDirectory() as tmp:
                url = f"sqlite:///{tmp}/retrain.db"
                fill = _fill(url, rows)
                wall, peak, result = _retrain(url)
            kind = "SQLite"
        print(f"{rows:>10,}  {kind:<10}  {fill:>8.1f}  {wall:>9.1f}  {peak:>12,.0f}  "
              f"{result[:90]}", flush=True)
    print("peak RSS is the largest of the retrain child processes so far (ru_maxrss)")
