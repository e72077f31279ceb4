"""Recommend over gRPC on loopback, against a trivial echo handler on the same server stack.

Both handlers take the same RecommendRequest, on the same grpc.Server (same thread pool and
options as recommender.rpc.server.start), through the same kind of client. The echo handler costs
what gRPC, protobuf and the harness cost; the ratio of the two is our overhead.
"""

from __future__ import annotations

import argparse
import itertools
import random
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import grpc

from bench.common import (
    TRIVIAL_METHOD,
    LoadResult,
    ServerProcess,
    closed_loop,
    describe_url,
    fresh_database,
    median,
    percentile,
    table,
    verdict,
)
from recommender._proto.intelliscale.recommender.v1 import recommender_pb2 as pb
from recommender._proto.intelliscale.recommender.v1 import recommender_pb2_grpc as pb_grpc
from recommender.core import config
from recommender.store import connect
from recommender.store.models import RecommendationRow

ACTION = "bench-resize-images"
HISTORY = 50
TARGET_P50_RATIO = 2.0


def bench_request(nodes: int = 0, seed: int = 7, uuid_prefix: str = "GPU"
                  ) -> pb.RecommendRequest:
    """An A100-40GB pool in mixed strategy, 2 workers, 7,500 MiB declared (the README example).

    With `nodes`, the pool lists that many 8-GPU nodes, each GPU about half occupied, the GPUs
    named `<uuid_prefix>-<node>-<gpu>`.
    """
    rng = random.Random(seed)
    node_msgs = []
    for n in range(nodes):
        gpus = []
        for g in range(8):
            start = rng.choice((0, 4))  # a 3g.20gb or 4g.20gb in use on one half
            gpus.append(pb.Gpu(uuid=f"{uuid_prefix}-{n}-{g}",
                               occupied=[pb.Placement(start=start, size=4)]))
        node_msgs.append(pb.Node(node_id=f"node-{n}", gpus=gpus))
    return pb.RecommendRequest(
        action_id=ACTION,
        execution_id="",
        workers=2,
        declared_memory_mib=7500,
        pools=[pb.Pool(pool_id="a100", gpu_model="NVIDIA A100-SXM4-40GB",
                       strategy=pb.MIG_STRATEGY_MIXED, nodes=node_msgs)],
    )


def seed_history(address: str, executions: int = HISTORY) -> None:
    """`executions` successful runs of the action over the last two days, through the RPC."""
    rng = random.Random(1)
    now = datetime.now(UTC)
    with grpc.insecure_channel(address) as channel:
        stub = pb_grpc.RecommenderStub(channel)
        for i in range(executions):
            ended = now - timedelta(minutes=rng.uniform(5, 48 * 60))
            m = pb.ExecutionRecord(
                execution_id=f"history-{i}", action_id=ACTION, gpu_model="A100-40GB",
                profile="1g.10gb", count=2, peak_memory_mib=rng.uniform(5000, 7000),
                sm_utilization=rng.uniform(5, 40), duration_s=rng.uniform(60, 600),
                outcome=pb.OUTCOME_SUCCEEDED, features={"input_mb": rng.uniform(10, 500)},
            )
            m.ended_at.FromDatetime(ended)
            stub.RecordExecution(m, timeout=10)


def stored_recommendations(db_url: str) -> int:
    from sqlalchemy import func, select

    engine = connect(db_url)
    try:
        with engine.connect() as conn:
            return int(conn.execute(select(func.count()).select_from(RecommendationRow).where(
                RecommendationRow.action_id == ACTION)).scalar_one())
    finally:
        engine.dispose()


def add_past_recommendations(db_url: str, rows: int) -> None:
    """Bulk-inserts `rows` past recommendations of the action (none with an OOM), spread over
    the last 30 days: what a busy action accumulates."""
    from sqlalchemy import insert

    now = datetime.now(UTC)
    engine = connect(db_url)
    try:
        done = 0
        while done < rows:
            batch = min(5000, rows - done)
            values: list[dict[str, Any]] = [{
                "id": str(uuid.uuid4()),
                "created_at": now - timedelta(seconds=(done + k) * 30 * 86400 / rows),
                "action_id": ACTION, "execution_id": f"past-{done + k}", "parent_id": None,
                "attempt": 1, "pool_id": "a100", "gpu_model": "A100-40GB",
                "profile": "1g.10gb", "profile_memory_mib": 9856, "compute_slices": 1,
                "memory_slices": 2, "whole_gpu": False, "count": 2, "node_id": "",
                "resources": {"nvidia.com/mig-1g.10gb": "2"}, "predicted_peak_mib": 7700.0,
                "quantile": 0.95, "source": "history", "model_version": "",
                "reason": "bench", "ladder": [], "oom_at": None, "oom_observed_peak_mib": None,
            } for k in range(batch)]
            with engine.begin() as conn:
                conn.execute(insert(RecommendationRow), values)
            done += batch
    finally:
        engine.dispose()


RUNNER_ACTIONS = 64
"""Actions the runner's pattern cycles through (each caller starts at its own offset)."""


def runner_request(action: str) -> pb.RecommendRequest:
    request = bench_request()
    request.action_id = action
    return request


def _maker(address: str, target: str, request: pb.RecommendRequest
           ) -> Callable[[], tuple[Callable[[], Any], Callable[[], None]]]:
    """Each caller thread gets its own channel (its own HTTP/2 connection) and callable.

    "pair" is the runner's pattern: Recommend for one of RUNNER_ACTIONS actions, then
    RecordExecution of that execution (linked to the recommendation), the next action next
    time; "trivial pair" is two echo calls, what the stack alone costs for the same two calls.
    """
    counter = itertools.count()

    def make() -> tuple[Callable[[], Any], Callable[[], None]]:
        channel = grpc.insecure_channel(address)
        echo = channel.unary_unary(
            TRIVIAL_METHOD,
            request_serializer=pb.RecommendRequest.SerializeToString,
            response_deserializer=pb.RecommendRequest.FromString,
        )
        stub = pb_grpc.RecommenderStub(channel)
        me = next(counter)
        if target == "trivial":
            def call() -> Any:
                return echo(request, timeout=10)
        elif target == "trivial pair":
            def call() -> Any:
                echo(request, timeout=10)
                return echo(request, timeout=10)
        elif target == "pair":
            requests = [runner_request(f"bench-runner-{k}") for k in range(RUNNER_ACTIONS)]
            rng = random.Random(me)
            turn = itertools.count(me * 7)
            prefix = uuid.uuid4().hex[:8]

            def call() -> Any:
                i = next(turn)
                req = requests[i % RUNNER_ACTIONS]
                answer = stub.Recommend(req, timeout=10)
                record = pb.ExecutionRecord(
                    execution_id=f"run-{prefix}-{i}", action_id=req.action_id,
                    recommendation_id=answer.recommendation_id, gpu_model="A100-40GB",
                    profile=answer.profile.name, count=answer.count,
                    peak_memory_mib=rng.uniform(5000, 7000), sm_utilization=20.0,
                    duration_s=60.0, outcome=pb.OUTCOME_SUCCEEDED)
                record.ended_at.GetCurrentTime()
                stub.RecordExecution(record, timeout=10)
                return answer
        else:
            def call() -> Any:
                return stub.Recommend(request, timeout=10)

        return call, channel.close

    return make


def _check(answer: Any) -> str | None:
    if isinstance(answer, pb.Recommendation):
        if not answer.stored:
            return "stored=false"
        if answer.source == "fallback":
            return "source=fallback"
    return None


TARGET_CPU_RATIO = 2.5
TARGET_CPU_RATIO_NODES = 4.0
TARGET_RATE_RATIO = 0.5
TARGET_HIT_RATIO = 0.9


@dataclass
class Target:
    name: str
    kind: str
    request: pb.RecommendRequest
    base: str = "trivial echo"
    """The trivial row it is compared with."""
    cpu_target: float | None = TARGET_CPU_RATIO
    speed_targets: bool = True
    """Judged on issue 14's p50 and calls/s ratios: Recommend alone is. The runner's pattern is
    judged on its cache hits (its pair holds a durable commit two echoes do not), the large
    pool in process (`python -m bench placement`, at most 3 ms)."""


def run(args: argparse.Namespace) -> None:
    callers_list: list[int] = args.callers
    seconds: float = args.seconds
    rounds: int = args.rounds
    with fresh_database(args.database_url) as db_url, ServerProcess(db_url) as server:
        seed_history(server.address)
        plain = bench_request()
        with_nodes = bench_request(nodes=args.nodes)
        large = bench_request(nodes=args.large_nodes)
        with grpc.insecure_channel(server.address) as channel:
            first = pb_grpc.RecommenderStub(channel).Recommend(plain, timeout=10)
            sized = pb_grpc.RecommenderStub(channel).Recommend(with_nodes, timeout=10)
        print(f"Recommend: database {describe_url(db_url)}, {HISTORY} executions of the action "
              f"recorded first; server in a child process, {config.RPC_THREADS} RPC threads; "
              f"client threads each with their own channel; {rounds} rounds x {seconds:g} s "
              "per cell, handlers interleaved within a round.")
        print(f"  request: A100-40GB pool (mixed), 2 workers, declared 7,500 MiB "
              f"({plain.ByteSize()} bytes) -> {first.profile.name} x {first.count}, "
              f"source {first.source}")
        print(f"  with nodes: same pool listing {args.nodes} 8-GPU nodes, half occupied "
              f"({with_nodes.ByteSize()} bytes) -> {sized.profile.name} x {sized.count} on "
              f"{sized.node_id}")
        print(f"  runner's pattern: Recommend then RecordExecution of it, over "
              f"{RUNNER_ACTIONS} actions in turn (one row = one pair; compared with two echo "
              "calls)")
        if args.large_nodes:
            print(f"  large pool: {args.large_nodes} 8-GPU nodes, half occupied "
                  f"({large.ByteSize():,} bytes)")
        if args.pairs:  # every action of the pattern has been asked for once
            warm, close = _maker(server.address, "pair", plain)()
            for _ in range(RUNNER_ACTIONS):
                warm()
            close()
        targets = [Target("trivial echo", "trivial", plain),
                   Target("Recommend", "recommend", plain)]
        if args.nodes:
            targets.append(Target(f"Recommend, {args.nodes} nodes", "recommend", with_nodes,
                                  cpu_target=TARGET_CPU_RATIO_NODES))
        if args.pairs:
            targets += [Target("trivial echo x2", "trivial pair", plain),
                        Target("Recommend + RecordExecution", "pair", plain,
                               base="trivial echo x2", cpu_target=None,
                               speed_targets=False)]
        if args.large_nodes:
            targets.append(Target(f"Recommend, {args.large_nodes} nodes", "recommend", large,
                                  cpu_target=None, speed_targets=False))
        rows: list[list[object]] = []
        ratio_rows: list[list[object]] = []
        for callers in callers_list:
            results: dict[str, list[LoadResult]] = {t.name: [] for t in targets}
            cpu: dict[str, list[float]] = {t.name: [] for t in targets}
            hits: dict[str, list[tuple[int, int]]] = {t.name: [] for t in targets}
            for _ in range(rounds):
                for t in targets:
                    before, cache0 = server.cpu_seconds(), server.cache_counts()
                    r = closed_loop(_maker(server.address, t.kind, t.request), callers, seconds,
                                    check=_check)
                    used = server.cpu_seconds() - before
                    cache1 = server.cache_counts()
                    results[t.name].append(r)
                    cpu[t.name].append(used * 1000 / r.calls if r.calls else float("nan"))
                    hits[t.name].append((cache1[0] - cache0[0], cache1[1] - cache0[1]))
            for t in targets:
                rs = results[t.name]
                lat = [x for r in rs for x in r.latencies_ms]
                codes: Counter[str] = sum((r.codes for r in rs), Counter())
                notes: Counter[str] = sum((r.notes for r in rs), Counter())
                bad = {k: v for k, v in codes.items() if k != "OK"}
                remarks = ", ".join(f"{k} {v}" for k, v in (bad | dict(notes)).items()) or "-"
                rows.append([callers, t.name, len(lat), percentile(lat, 50), percentile(lat, 99),
                             median([r.rate for r in rs]), median(cpu[t.name]), remarks])
            for t in targets:
                if t.kind.startswith("trivial"):
                    continue
                mine, base = results[t.name], results[t.base]
                p50_ratio = median([percentile(r.latencies_ms, 50) / percentile(b.latencies_ms, 50)
                                    for r, b in zip(mine, base, strict=True)])
                rate_ratio = median([r.rate / b.rate for r, b in zip(mine, base, strict=True)])
                cpu_ratio = median([c / b for c, b in zip(cpu[t.name], cpu[t.base],
                                                          strict=True)])
                h = sum(x for x, _ in hits[t.name])
                m = sum(y for _, y in hits[t.name])
                hit_ratio = h / (h + m) if h + m else float("nan")
                checks = []
                if t.cpu_target is not None:
                    checks.append(f"CPU <= {t.cpu_target:g}x: {verdict(cpu_ratio <= t.cpu_target)}")
                if callers == 1 and t.speed_targets:
                    checks.append(f"p50 <= {TARGET_P50_RATIO:g}x: "
                                  f"{verdict(p50_ratio <= TARGET_P50_RATIO)}")
                if callers >= 16 and t.speed_targets:
                    checks.append(f"calls/s >= {TARGET_RATE_RATIO:g}x: "
                                  f"{verdict(rate_ratio >= TARGET_RATE_RATIO)}")
                if t.kind == "pair":
                    checks.append(f"hits >= {TARGET_HIT_RATIO:.0%}: "
                                  f"{verdict(hit_ratio >= TARGET_HIT_RATIO)}")
                ratio_rows.append([callers, t.name, t.base, p50_ratio, rate_ratio, cpu_ratio,
                                   f"{hit_ratio:.1%}" if hit_ratio == hit_ratio else "-",
                                   "; ".join(checks) or "-"])
        print()
        print(table(["callers", "handler", "calls", "p50 ms", "p99 ms", "calls/s",
                     "server CPU ms/call", "errors / notes"], rows))
        print()
        print("Ratios to the trivial handler on the same server (medians of per-round ratios; "
              "cache hits over all rounds):")
        print(table(["callers", "handler", "against", "p50 ratio", "calls/s ratio",
                     "server CPU ratio", "cache hits", "targets (issue 14)"], ratio_rows))
        print()
        if args.grow:
            print()
            print(growth(server, db_url, plain, args.grow, seconds))
        print()
        print(f"Targets (issue 14), as ratios to the trivial handler in this run: server CPU per "
              f"call <= {TARGET_CPU_RATIO:g}x (<= {TARGET_CPU_RATIO_NODES:g}x with "
              f"{args.nodes} listed nodes); with 16 callers >= {TARGET_RATE_RATIO:g}x its "
              f"calls/s; p50 with one caller <= {TARGET_P50_RATIO:g}x; history cache hits >= "
              f"{TARGET_HIT_RATIO:.0%} in the runner's pattern (its pair is judged on that "
              "alone: it holds a durable commit two echoes do not); the large pool's target is "
              "in process (`python -m bench placement`, at most 3 ms). Client and server share "
              "the machine's CPUs.")


def growth(server: ServerProcess, db_url: str, request: pb.RecommendRequest, rows: int,
           seconds: float) -> str:
    """Recommend (1 caller) before and after the action accumulates `rows` more
    recommendations: the history read should not depend on how many were given."""
    out: list[list[object]] = []
    for step in (0, rows):
        if step:
            t0 = time.perf_counter()
            add_past_recommendations(db_url, step)
            inserted_s = time.perf_counter() - t0
        stored = stored_recommendations(db_url)
        before = server.cpu_seconds()
        r = closed_loop(_maker(server.address, "recommend", request), 1, seconds, check=_check)
        cpu = (server.cpu_seconds() - before) * 1000 / r.calls if r.calls else float("nan")
        out.append([stored, percentile(r.latencies_ms, 50), percentile(r.latencies_ms, 99),
                    r.rate, cpu])
    ratio = out[1][1] / out[0][1]  # type: ignore[operator]
    return (f"Recommend as the action's stored recommendations grow (1 caller, {seconds:g} s "
            f"each; {rows:,} rows bulk-inserted in {inserted_s:.1f} s):\n"
            + table(["stored recs of the action", "p50 ms", "p99 ms", "calls/s",
                     "server CPU ms/call"], out)
            + f"\np50 ratio after/before: {ratio:.2f} (should stay near 1)")
