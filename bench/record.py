"""RecordExecution's sustained rate into a fresh database, and what ends up in the table.

Each execution id is sent once (split over the callers), then the rows are counted and compared
with the ids that were acknowledged; then 10 % of the ids are re-sent as retries, each must
answer duplicate=true, and the row count must not move.
"""

from __future__ import annotations

import argparse
import random
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import grpc
from sqlalchemy import func, make_url, select

from bench.common import (
    ServerProcess,
    describe_url,
    fresh_database,
    table,
    verdict,
)
from recommender._proto.intelliscale.recommender.v1 import recommender_pb2 as pb
from recommender._proto.intelliscale.recommender.v1 import recommender_pb2_grpc as pb_grpc
from recommender.store import connect
from recommender.store.models import ExecutionRow
from tests.postgres import postgres_unreachable

TARGET_RATE = 1000.0
RETRY_FRACTION = 0.10


def execution(execution_id: str, rng: random.Random, now: datetime) -> pb.ExecutionRecord:
    """A finished execution as the runner would report it."""
    duration = rng.uniform(30, 900)
    ended = now - timedelta(seconds=rng.uniform(0, 3600))
    m = pb.ExecutionRecord(
        execution_id=execution_id,
        action_id=f"action-{rng.randrange(50)}",
        gpu_model="NVIDIA A100-SXM4-40GB",
        profile=rng.choice(("1g.5gb", "1g.10gb", "3g.20gb")),
        count=rng.choice((1, 2, 4)),
        peak_memory_mib=rng.uniform(1000, 9000),
        sm_utilization=rng.uniform(0, 100),
        duration_s=duration,
        throughput=rng.uniform(0, 50),
        outcome=pb.OUTCOME_OOM if rng.random() < 0.02 else pb.OUTCOME_SUCCEEDED,
        features={"input_mb": rng.uniform(1, 2000), "batch_size": float(rng.choice((8, 16, 32)))},
    )
    m.ended_at.FromDatetime(ended)
    m.started_at.FromDatetime(ended - timedelta(seconds=duration))
    return m


@dataclass
class Sent:
    acked: list[str] = field(default_factory=list)
    flagged_duplicate: list[str] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)
    unsent: int = 0
    seconds: float = 0.0


def send(address: str, messages: list[pb.ExecutionRecord], callers: int, max_seconds: float
         ) -> Sent:
    """Sends every message once, round-robin over `callers` threads with their own channels."""
    out = Sent()
    lock = threading.Lock()
    deadline = time.monotonic() + max_seconds
    barrier = threading.Barrier(callers + 1, timeout=60)

    def worker(mine: list[pb.ExecutionRecord]) -> None:
        acked: list[str] = []
        dup: list[str] = []
        errors: Counter[str] = Counter()
        unsent = 0
        with grpc.insecure_channel(address) as channel:
            stub = pb_grpc.RecommenderStub(channel)
            grpc.channel_ready_future(channel).result(timeout=10)
            barrier.wait()
            for i, m in enumerate(mine):
                if time.monotonic() > deadline:
                    unsent = len(mine) - i
                    break
                try:
                    answer = stub.RecordExecution(m, timeout=10)
                except grpc.RpcError as e:
                    errors[e.code().name] += 1
                    continue
                (dup if answer.duplicate else acked).append(m.execution_id)
        with lock:
            out.acked += acked
            out.flagged_duplicate += dup
            out.errors += errors
            out.unsent += unsent

    threads = [threading.Thread(target=worker, args=(messages[k::callers],), daemon=True)
               for k in range(callers)]
    for t in threads:
        t.start()
    barrier.wait()
    start = time.perf_counter()
    for t in threads:
        t.join(max_seconds + 60)
    out.seconds = time.perf_counter() - start
    return out


def stored_ids(db_url: str) -> tuple[int, set[str]]:
    engine = connect(db_url)
    try:
        with engine.connect() as conn:
            count = conn.execute(select(func.count()).select_from(ExecutionRow)).scalar_one()
            ids = set(conn.execute(select(ExecutionRow.execution_id)).scalars())
        return int(count), ids
    finally:
        engine.dispose()


def run(args: argparse.Namespace) -> None:
    url: str = args.record_url
    note = ""
    if make_url(url).get_backend_name() == "postgresql":
        why = postgres_unreachable(url)
        if why is not None:
            note = (f"NOTE: PostgreSQL unreachable at {make_url(url).render_as_string()} "
                    f"({why}); fell back to SQLite: these are NOT PostgreSQL numbers.")
            url = ""
    n: int = args.executions
    rows: list[list[object]] = []
    retry_rows: list[list[object]] = []
    db_name = ""
    for callers in args.callers:
        rng = random.Random(callers)
        now = datetime.now(UTC)
        messages = [execution(f"bench-{callers}-{i:07d}", rng, now) for i in range(n)]
        with fresh_database(url or None) as db_url, ServerProcess(db_url) as server:
            db_name = describe_url(db_url).split(" ")[0]
            cpu0 = server.cpu_seconds()
            first = send(server.address, messages, callers, args.max_seconds)
            cpu = (server.cpu_seconds() - cpu0) * 1000 / max(1, len(first.acked))
            count, ids = stored_ids(db_url)
            acked = set(first.acked)
            lost = len(acked - ids)
            unexpected = len(ids - {m.execution_id for m in messages})
            duplicated = (count - len(ids)) + unexpected + len(first.flagged_duplicate)
            rate = len(first.acked) / first.seconds if first.seconds else float("nan")
            errs = ", ".join(f"{k} {v}" for k, v in first.errors.items()) or "0"
            rows.append([callers, n, len(first.acked), errs, first.unsent, first.seconds, rate,
                         cpu, count, f"lost: {lost}, duplicated: {duplicated}",
                         verdict(rate >= TARGET_RATE)])
            sample_ids = sorted(acked)
            retry_ids = set(rng.sample(sample_ids, max(1, int(len(sample_ids) * RETRY_FRACTION)))
                            ) if sample_ids else set()
            retries = [m for m in messages if m.execution_id in retry_ids]
            again = send(server.address, retries, callers, args.max_seconds)
            count_after, ids_after = stored_ids(db_url)
            retry_rows.append([
                callers, len(retries), len(again.flagged_duplicate), len(again.acked),
                ", ".join(f"{k} {v}" for k, v in again.errors.items()) or "0",
                count, count_after, "unchanged" if count_after == count and ids_after == ids
                else "CHANGED",
            ])
    print(f"RecordExecution into a fresh {db_name} database per caller setting, {n:,} distinct "
          f"execution ids each (sent once), callers = threads with their own channels; server "
          f"in a child process.")
    if note:
        print(note)
    print()
    print(table(["callers", "executions", "acked", "errors", "unsent", "seconds", "rate/s",
                 "server CPU ms/call", "rows", "table check", f">= {TARGET_RATE:,.0f}/s"], rows))
    print()
    print(f"Retries: {RETRY_FRACTION:.0%} of the acknowledged ids re-sent; each must answer "
          "duplicate=true and change nothing.")
    print(table(["callers", "retries", "duplicate=true", "duplicate=false", "errors",
                 "rows before", "rows after", "table"], retry_rows))
    print()
    print(f"Target (issue): >= {TARGET_RATE:,.0f} executions/s sustained. rate = acknowledged "
          "first sends / wall seconds; lost = acknowledged but not in the table; duplicated = "
          "extra rows or first sends answered duplicate=true. Server CPU is the recommender "
          "process only (not the database's).")
