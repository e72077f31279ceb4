"""The replay behind `recommender evaluate`: metrics, baselines, and the bar on real traces."""

from __future__ import annotations

import math
import statistics
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from recommender.core.catalog import Catalog
from recommender.core.options import candidate_profiles
from recommender.core.predictive import expected_cost, oom_wait_mib
from recommender.evaluation import replay
from recommender.evaluation.synthetic import (
    MODES_PHASES,
    STEP_PHASES,
    STEP_SETTLED_RUNS,
    Truth,
    generate,
    generate_models,
    generate_modes,
    generate_shapes,
    generate_step,
)
from recommender.evaluation.traces import (
    TraceExecution,
    gentd26_hourly,
    gentd26_windows,
    synthetic,
)
from tests.conftest import SHARED

T0 = datetime(2026, 9, 1, tzinfo=UTC)
GENTD26 = SHARED / "traces" / "alibaba-gentd26"
needs_gentd26 = pytest.mark.skipif(not GENTD26.exists(),
                                   reason=f"GenTD26 trace not found at {GENTD26}")


def trace(peaks: list[float], action: str = "a") -> list[TraceExecution]:
    return [TraceExecution(action, T0 + timedelta(hours=i), p) for i, p in enumerate(peaks)]


def test_metrics_follow_the_definitions() -> None:
    m = replay.Metrics("x")
    m.add([10000.0], 8000, 1.0, True)             # fits: slack 20 %
    m.add([10000.0, 20000.0], 15000, 2.0, True)   # one OOM, one retry, 10 GB x 2 h wasted
    assert m.executions == 2 and m.first_oom == 1 and m.retries == 1
    assert m.wasted_gbh == pytest.approx(10000 / 1024 * 2)
    assert m.reserved_gbh == pytest.approx(10000 / 1024 + 30000 / 1024 * 2)
    assert m.slack == [pytest.approx(0.2)]


def test_the_calibration_table_holds_stated_chances_against_ooms() -> None:
    m = replay.Metrics("x")
    m.executions, m.first_oom = 6, 2
    m.stated = [(0.0005, False), (0.0008, True), (0.02, False), (0.02, False), (0.05, False)]
    rows = {r.split("|")[1].strip(): [c.strip() for c in r.split("|")[2:-1]]
            for r in replay.calibration_table(m).splitlines()[2:]}
    assert rows["0.0% to 0.1%"] == ["2", "0.0", "1"]
    assert rows["1.0% to 3.0%"] == ["2", "0.0", "0"]
    assert rows["3.0% to 10.0%"] == ["1", "0.1", "0"]
    assert "0.1% to 0.3%" not in rows  # no execution stated a chance there
    assert rows["all stated"] == ["5", "0.1", "1"]
    none = next(v for k, v in rows.items() if k.startswith("none stated"))
    assert none == ["1", "", "1"]  # the sixth execution, and the OOM not among the stated
    assert not any(k.startswith("on the largest") for k in rows)  # none was


def test_chances_stated_on_the_largest_slice_are_a_row_of_their_own() -> None:
    """A chance on the largest slice weighed no choice: it must not sway the decisions' rows."""
    m = replay.Metrics("x")
    m.executions, m.first_oom = 4, 0
    m.stated = [(0.02, False), (0.05, False)]
    m.stated_on_largest = [(0.6, False), (0.9, False)]
    rows = {r.split("|")[1].strip(): [c.strip() for c in r.split("|")[2:-1]]
            for r in replay.calibration_table(m).splitlines()[2:]}
    assert "10.0% to 100.0%" not in rows
    assert rows["all stated on a smaller slice than the largest"] == ["2", "0.1", "0"]
    assert rows["on the largest slice offered (no bigger one to choose)"] == ["2", "1.5", "0"]
    assert rows["all stated"] == ["4", "1.6", "0"]
    assert not any(k.startswith("none stated") for k in rows)


def test_the_replay_puts_the_largest_slice_apart(catalog: Catalog) -> None:
    pools = replay.mixed_pools(catalog, ["A100-80GB"])
    small = replay.replay_service("ours", trace([9000.0 + 40 * (i % 7) for i in range(12)]),
                                  pools, catalog)
    # 60-72 GB: every slice but the whole card is too small, so no choice was weighed.
    large = replay.replay_service("ours", trace([60000.0 + 3000 * (i % 5) for i in range(12)]),
                                  pools, catalog)
    assert len(small.stated) >= 9 and not small.stated_on_largest
    assert len(large.stated_on_largest) >= 9 and not large.stated
    assert all(0 < p <= 1 for p, _ in large.stated_on_largest)


def test_the_replay_keeps_each_stated_chance(catalog: Catalog) -> None:
    pools = replay.mixed_pools(catalog, ["A100-80GB"])
    t = trace([9000.0 + 40 * (i % 7) for i in range(30)] + [30000.0])
    m = replay.replay_service("ours", t, pools, catalog)
    assert len(m.stated) >= 25  # every decision from the population or history states one
    assert all(0 < p <= 1 for p, _ in m.stated)
    assert m.stated[-1][1] is True  # the last execution, three times the others, ran out
    assert sum(o for _, o in m.stated) <= m.first_oom


def test_the_excess_splits_between_the_first_attempt_and_the_ladder() -> None:
    assert replay.excess_of([20000.0], 10000.0, "history") == [("history", 10000.0)]
    # An OOM: the first attempt's memory was all spent for nothing; the rungs above it are the
    # ladder's, beyond the oracle's slice.
    assert replay.excess_of([10000.0, 20000.0, 40000.0], 20000.0, "population") == [
        ("population", 10000.0), (replay.LADDER, 40000.0)]
    # Out of rungs on the largest slice (the oracle's too): the attempt is its source's.
    assert replay.excess_of([80000.0], 80000.0, "fallback") == [("fallback", 0.0)]


def test_the_excess_table_adds_up_to_the_reserved_memory_above_the_oracle(
        catalog: Catalog) -> None:
    pools = replay.mixed_pools(catalog, ["A100-80GB"])
    slices = replay.Slices.of(pools)
    t = trace([9000.0 + 40 * (i % 7) for i in range(30)] + [30000.0])
    m = replay.replay_service("ours", t, pools, catalog)
    best = replay.oracle(t, slices)
    assert sum(m.excess_gbh.values()) == pytest.approx(m.reserved_gbh - best.reserved_gbh)
    # Its first runs on history are the sparse history's; the last one ran out and climbed.
    sparse = m.first_from.get(replay.SPARSE, 0)
    assert 0 < sparse < replay.SPARSE_RUNS
    assert m.first_from.get("history", 0) >= 30 - replay.SPARSE_RUNS
    assert m.first_from[replay.LADDER] == m.first_oom >= 1
    assert replay.LADDER in replay.excess_table(m, best.reserved_gbh)
    # The first attempts that ran out, by source, are every one that did: the last one's.
    assert sum(m.oom_from.values()) == m.first_oom and m.oom_from.get("history") == 1


def test_the_run_table_places_each_execution_by_its_action_s_runs_before_it(
        catalog: Catalog) -> None:
    assert [replay.run_group(n) for n in (0, 1, 2, 3, 9, 10, 500)] == [
        "its first", "its second", "its third", "its 4th to 10th", "its 4th to 10th",
        "its 11th on", "its 11th on"]
    pools = replay.mixed_pools(catalog, ["A100-80GB"])
    slices = replay.Slices.of(pools)
    # Two actions interleaved: each has its own first, second and third execution; their
    # durations differ (an hour's slice is not a half hour's).
    t = sorted([replace(e, duration_h=0.5 + (i % 3)) for i, e in enumerate(
        trace([9000.0] * 12 + [30000.0], "a") + trace([5000.0] * 3, "b"))],
               key=lambda e: e.at)
    m = replay.replay_service("ours", t, pools, catalog)
    counts = {g: int(v[0]) for g, v in m.by_run.items()}
    assert counts == {"its first": 2, "its second": 2, "its third": 2, "its 4th to 10th": 7,
                      "its 11th on": 3}
    # The groups hold every execution's first slice and the oracle's, and every OOM.
    best = replay.oracle(t, slices)
    assert sum(v[2] for v in m.by_run.values()) == pytest.approx(best.reserved_gbh)
    assert sum(v[3] for v in m.by_run.values()) == m.first_oom == m.by_run["its 11th on"][3] >= 1
    assert sum(v[1] for v in m.by_run.values()) == pytest.approx(
        sum(f.slice_mib / 1024 * f.hours for f in m.firsts))
    # Each group's first slices over the oracle's, in GB-h: the first executions of both
    # actions, their slices and the oracle's, each held for its own duration.
    firsts = [(f, e) for f, e in zip(m.firsts, t, strict=True)
              if e.at == min(x.at for x in t if x.action_id == e.action_id)]
    held = sum(f.slice_mib * e.duration_h for f, e in firsts)
    best_first = sum(slices.fit(e.peak_mib) * e.duration_h for _, e in firsts)
    assert held > best_first  # nothing known yet: the first slices are above the oracle's
    ratio = held / best_first
    # Each group adds up the chances stated on its own first attempts; together, every
    # chance the replay stated.
    stated = {g: v[4] for g, v in m.by_run.items()}
    assert sum(stated.values()) == pytest.approx(sum(f.chance for f in m.firsts))
    first_stated = sum(f.chance for f, _ in firsts)
    assert stated["its first"] == pytest.approx(first_stated)
    assert stated["its 11th on"] > 0  # the runs after a long history state their chances
    table = replay.run_table(m)
    assert table.splitlines()[2] == f"| its first | 2 | {ratio:.2f}x | 0 | {first_stated:.1f} |"
    assert table.splitlines()[-1].endswith(
        f"| {m.first_oom} | {stated['its 11th on']:.1f} |")


def test_slices_ladder() -> None:
    s = replay.Slices((5000, 10000, 20000))
    assert s.fit(7000) == 10000 and s.fit(30000) == 20000
    assert s.attempts(5000, 12000) == ([5000.0, 10000.0, 20000.0], True)
    assert s.attempts(20000, 30000) == ([20000.0], False)


def test_oracle_is_the_floor(catalog: Catalog) -> None:
    pools = replay.mixed_pools(catalog, ["A100-40GB"])
    slices = replay.Slices.of(pools)
    t = trace([3000, 9000, 4000, 15000, 3000, 3100, 2900, 3000])
    best = replay.oracle(t, slices)
    assert best.first_oom == 0 and best.reserved_gbh > 0
    for name, rule in replay.BASELINES.items():
        m = replay.replay_rule(name, rule, t, slices)
        assert m.reserved_gbh >= best.reserved_gbh
    ours = replay.replay_service("ours", t, pools, catalog)
    assert ours.executions == len(t) and ours.reserved_gbh >= best.reserved_gbh
    # Cold start: the first execution gets the largest slice, as for every rule.
    assert ours.first_oom <= 2


def test_the_service_learns_features_in_the_replay(catalog: Catalog,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from recommender.core import config

    monkeypatch.setattr(config, "LEARN_TREES", 30)
    t = synthetic(actions=4, executions=900, seed=3)
    pools = replay.mixed_pools(catalog, ["A100-80GB"])
    with_model = replay.replay_service("m", t, pools, catalog, retrain_every=450)
    without = replay.replay_service("h", t, pools, catalog, use_features=False)
    assert with_model.reserved_gbh < without.reserved_gbh


@needs_gentd26
def test_gentd26_loads_hourly_peaks() -> None:
    t = gentd26_hourly(SHARED / "traces", max_pods=3)
    assert len({e.action_id for e in t}) == 3
    assert all(e.peak_mib > 0 and e.duration_h == 1.0 for e in t)
    assert [e.at for e in t] == sorted(e.at for e in t)


@needs_gentd26
def test_gentd26_windows_split_the_same_samples() -> None:
    """A window's peak is the largest of the shorter windows inside it: the same samples,
    regrouped, and each execution lasts its window."""
    hourly = gentd26_hourly(SHARED / "traces", max_pods=3)
    quarters = gentd26_windows(SHARED / "traces", max_pods=3, window_minutes=15)
    assert all(e.duration_h == 0.25 for e in quarters)
    assert len(hourly) < len(quarters) <= 4 * len(hourly)
    for e in hourly:
        inside = [q.peak_mib for q in quarters
                  if q.action_id == e.action_id and e.at - timedelta(hours=1) < q.at <= e.at]
        assert max(inside) == e.peak_mib
    two_hours = gentd26_windows(SHARED / "traces", max_pods=3, window_minutes=120)
    assert {e.action_id for e in two_hours} == {e.action_id for e in hourly}
    assert max(e.peak_mib for e in two_hours) == max(e.peak_mib for e in hourly)
    with pytest.raises(ValueError, match="window_minutes"):
        gentd26_windows(SHARED / "traces", window_minutes=0)


@needs_gentd26
def test_evaluate_command_prints_the_table() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "recommender", "evaluate", "--trace", "gentd26",
         "--max-actions", "6", "--traces-dir", str(SHARED / "traces")],
        capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    for row in ("IntelliScale (this service)", "Kubernetes VPA", "Ryax 26.10", "oracle"):
        assert row in out.stdout
    # By default the service is a real server, retrained at 30/50/70/90 % of the sequence.
    assert "over gRPC" in out.stdout and "retrained at 30%, 50%, 70%, 90%" in out.stdout
    assert out.stdout.count("retrain: ") == 4


@pytest.mark.slow
@needs_gentd26
def test_the_bar_on_gentd26(catalog: Catalog) -> None:
    """Fewer OOMs than VPA at no more reserved memory, same cold start (issue #3)."""
    t = gentd26_hourly(SHARED / "traces")
    pools = replay.mixed_pools(catalog, ["H100-80GB", "H100-94GB", "H200-141GB"])
    slices = replay.Slices.of(pools)
    ours = replay.replay_service("ours", t, pools, catalog)
    vpa = replay.replay_rule("vpa", replay.vpa, t, slices)
    assert ours.oom_rate < vpa.oom_rate
    assert ours.reserved_gbh <= vpa.reserved_gbh


@pytest.mark.slow
def test_the_bar_on_the_generated_workload(catalog: Catalog) -> None:
    t = synthetic()
    pools = replay.mixed_pools(catalog, ["A100-80GB", "H100-80GB"])
    slices = replay.Slices.of(pools)
    ours = replay.replay_service("ours", t, pools, catalog, retrain_every=1000)
    vpa = replay.replay_rule("vpa", replay.vpa, t, slices)
    assert ours.oom_rate < vpa.oom_rate
    assert ours.reserved_gbh <= vpa.reserved_gbh


# --- the runner seam: in process and over gRPC -----------------------------------------------


def test_retraining_points_of_a_sequence() -> None:
    assert replay.retrain_points(10, replay.RETRAIN_AT) == {3, 5, 7, 9}
    assert replay.retrain_points(10, (0.5,), retrain_every=4) == {4, 5, 8}
    assert replay.retrain_points(3, (0.01, 0.99)) == set()  # never before the first nor after
    assert replay.retrain_points(10) == set()


def test_retrain_at_option() -> None:
    import argparse

    from recommender.cli.options import percents

    assert percents("90,30,50") == (0.3, 0.5, 0.9)
    assert percents("none") == ()
    for bad in ("0", "100", "x", "30,,50"):
        with pytest.raises(argparse.ArgumentTypeError):
            percents(bad)


def new_actions(actions: int = 120, per: int = 8, seed: int = 5) -> list[TraceExecution]:
    """Actions one after another, each a short run whose peaks grow with its inputs the same
    way: past the middle of the sequence every action is new, so what serves its first
    executions is the learned (pooled) model once a retrain has promoted one. Their footprints
    differ by a few percent only: the pooled model cannot know an offset of each new action,
    and with bases of 2-4 GB its 2 % OOMs on the hold-out, each costing the user's wait, left
    it cheaper on average but not surely (75 % of resamples): not promoted, rightly. 120
    actions: with 100, once a second run was weighed against its first by how far the inputs
    moved (population.Scatter), the server's own rules cost 176.7 GB-h on the hold-out, the
    candidate 171.7, cheaper in 91 % of resamples: not surely better, and not promoted in
    process (over gRPC it was). 40 MiB an item: with 20, once the population's slope bent
    along the batch (population.Bend), the server's own rules sized new actions as well as the
    candidate did (in process 86 % of resamples; over gRPC the rules reserved less); with 40
    the candidate, linear in MiB, is surely cheaper on seeds 5 and 6 (in process, 100 % of
    resamples)."""
    import math
    import random

    rng = random.Random(seed)
    out = []
    for a in range(actions):
        base = rng.uniform(2900, 3100)
        for _ in range(per):
            batch = float(2 ** rng.randint(0, 6))
            size = math.exp(rng.gauss(3.0, 0.8))
            peak = (base + 40.0 * batch * math.sqrt(size)) * math.exp(rng.gauss(0, 0.03))
            out.append(TraceExecution(f"a{a:03d}", T0 + timedelta(minutes=2 * len(out)), peak,
                                      10 / 60, {"batch_size": batch, "input_mb": round(size, 3)}))
    return out


@pytest.fixture(scope="module")
def over_grpc(catalog: Catalog, tmp_path_factory: pytest.TempPathFactory
              ) -> tuple[replay.Metrics, list[object], str]:
    """The trace above replayed over gRPC against a real server, retrained at 50 %."""
    from recommender.rpc.runner import GrpcRunner, serving

    url = f"sqlite:///{tmp_path_factory.mktemp('replay')}/live.db"
    runners: list[GrpcRunner] = []

    @contextmanager
    def start() -> Iterator[GrpcRunner]:
        with serving(url) as runner:
            runners.append(runner)
            yield runner

    pools = replay.mixed_pools(catalog, ["A100-80GB"])
    m = replay.replay_service("live", new_actions(), pools, catalog, retrain_at=(0.5,),
                              runner=start)
    return m, list(runners), url


def test_the_live_replay_prices_an_oom_as_told(catalog: Catalog, tmp_path: Path) -> None:
    """`--oom-wait-gpus` reaches the real server the replay starts: each reason weighed by
    expected cost says what an OOM was counted as. The retraining job it runs is given the
    price too (a child that did not take the option would exit 2 and fail the replay; what
    the job does with it: test_learning)."""
    from sqlalchemy import create_engine, text

    from recommender.rpc.runner import GrpcRunner, serving

    url = f"sqlite:///{tmp_path}/priced.db"
    pools = replay.mixed_pools(catalog, ["A100-80GB"])
    peaks = [9000.0 + 40 * (i % 7) for i in range(24)]

    @contextmanager
    def start() -> Iterator[GrpcRunner]:
        with serving(url, oom_wait_gpus=0.0) as runner:
            yield runner

    m = replay.replay_service("priced", trace(peaks), pools, catalog, retrain_at=(0.5,),
                              runner=start)
    assert len(m.retrains) == 1 and "not enough data" in m.retrains[0], m.retrains
    engine = create_engine(url)
    with engine.connect() as c:
        reasons = [r for (r,) in c.execute(text("select reason from recommendations"))]
    engine.dispose()
    weighed = [r for r in reasons if "expected cost" in r]
    assert weighed and all("counted as 0 whole GPUs" in r for r in weighed), reasons[-1]


def test_a_retrain_over_grpc_promotes_and_the_server_serves_it(
        over_grpc: tuple[replay.Metrics, list[object], str]) -> None:
    m, runners, _ = over_grpc
    assert len(m.retrains) == 1 and "promoted against" in m.retrains[0], m.retrains
    version = m.retrains[0].split("version ")[1].split(":")[0]
    assert f"the server serves {version}" in m.retrains[0]
    # Every action after the retrain is new: the pooled model answers its first executions.
    assert m.first_from.get(f"model ({version})", 0) >= 0.4 * m.executions, m.first_from
    assert runners[0].reload_misses == 0  # type: ignore[attr-defined]


def test_the_live_replay_stamps_executions_when_recorded(
        over_grpc: tuple[replay.Metrics, list[object], str]) -> None:
    from sqlalchemy import create_engine, text

    m, _, url = over_grpc
    engine = create_engine(url)
    with engine.connect() as c:
        n, first, last = c.execute(text(
            "select count(*), min(ended_at), max(ended_at) from executions")).one()
        shortest = c.execute(text("select min(julianday(ended_at) - julianday(started_at)) "
                                  "from executions")).scalar_one()
    engine.dispose()
    assert n == m.executions
    ended = [datetime.fromisoformat(str(t)).replace(tzinfo=UTC) for t in (first, last)]
    now = datetime.now(UTC)
    # Wall-clock stamps: the whole replay took minutes, not the trace's 20 hours.
    assert ended[0] > T0 + timedelta(days=30) and ended[1] - ended[0] < timedelta(minutes=30)
    assert now - ended[1] < timedelta(minutes=30)
    assert shortest * 24 == pytest.approx(10 / 60, rel=1e-3)  # started its duration before


def test_both_runners_give_comparable_metrics(
        catalog: Catalog, over_grpc: tuple[replay.Metrics, list[object], str]) -> None:
    live, _, _ = over_grpc
    pools = replay.mixed_pools(catalog, ["A100-80GB"])
    fast = replay.replay_service("fast", new_actions(), pools, catalog, retrain_at=(0.5,))
    assert "promoted against" in fast.retrains[0]
    assert fast.executions == live.executions
    # The ladder's row counts OOMs, compared below.
    by_model = {k.split(" ")[0]: v for k, v in fast.first_from.items() if k != replay.LADDER}
    live_by_model = {k.split(" ")[0]: v for k, v in live.first_from.items()
                     if k != replay.LADDER}
    assert by_model.keys() == live_by_model.keys()
    # The server reads the population again in a thread of its own while the one before
    # serves (in process it is read inline): a new action or two that arrive in that moment
    # meet the earlier population, or none yet (the fallback).
    assert all(abs(by_model[k] - live_by_model[k]) <= 2 for k in by_model), (
        by_model, live_by_model)
    assert by_model.get("model") == live_by_model.get("model")
    assert abs(fast.first_oom - live.first_oom) <= 3
    assert live.reserved_gbh == pytest.approx(fast.reserved_gbh, rel=0.05)
    # The chance of an OOM each answer stated reaches the replay over gRPC too.
    assert live.stated and abs(len(live.stated) - len(fast.stated)) <= 3


def test_an_oom_over_grpc_climbs_the_ladder(catalog: Catalog) -> None:
    from recommender.rpc.runner import serving

    pools = replay.mixed_pools(catalog, ["A100-80GB"])
    slices = replay.Slices.of(pools)
    t = trace([3000.0] * 6 + [70000.0])
    m = replay.replay_service("live", t, pools, catalog, runner=serving)
    # The last execution starts on a slice for 3 GB, dies, and climbs to 7g.80gb, each rung
    # larger than the last (the first rung after an OOM may skip one by expected cost).
    assert m.first_oom == 1 and m.unserved == 0
    rungs = [s for s in slices.mib if slices.fit(3000 * 1.3) < s <= slices.fit(70000)]
    assert 2 <= m.retries <= len(rungs)
    assert m.wasted_gbh >= m.retries * slices.fit(3000) / 1024  # each failed attempt held one


def _ran(m: replay.Metrics, s: replay.Slices, chance: float, first: float, peak: float) -> None:
    """One execution of an hour into `m`, its attempts climbing from `first` as the ladder does."""
    attempts, served = s.attempts(int(first), peak)
    m.add(attempts, peak, 1.0, served)
    m.firsts.append(replay.FirstAttempt(chance, first, peak, 1.0, sum(attempts) / 1024))


def test_the_frontier_moves_the_riskier_first_attempts_a_slice_up() -> None:
    s = replay.Slices((10000, 20000, 40000))
    m = replay.Metrics("ours")
    _ran(m, s, 0.05, 10000, 12000)  # ran out, climbed to 20,000
    _ran(m, s, 0.01, 10000, 9000)
    _ran(m, s, 0.20, 40000, 30000)  # the largest: no slice above to move to
    _ran(m, s, 0.03, 10000, 25000)  # one slice up still runs out, and climbs on
    assert m.first_oom == 2
    assert replay.frontier_point(m, s, 0.10) == (0, 2, pytest.approx(m.reserved_gbh))
    moved, ran_out, gbh = replay.frontier_point(m, s, 0.02)
    assert (moved, ran_out) == (2, 1)
    # 10,000 + 20,000 became 20,000; 10,000 + 20,000 + 40,000 became 20,000 + 40,000.
    assert gbh == pytest.approx(m.reserved_gbh - 20000 / 1024)
    moved, ran_out, gbh = replay.frontier_point(m, s, 0.005)
    assert (moved, ran_out) == (3, 1)
    assert gbh == pytest.approx(m.reserved_gbh - 20000 / 1024 + 10000 / 1024)
    vpa = replay.Metrics(replay.VPA)
    vpa.first_oom, vpa.reserved_gbh = 1, 1000.0
    table = replay.frontier_table(m, s, vpa)
    rows = {r.split("|")[1].strip(): [c.strip() for c in r.split("|")[2:-1]]
            for r in table.splitlines()[2:] if r.startswith("|")}
    assert rows["none (as replayed)"][:2] == ["0", "2"]
    assert rows["stated chance above 3.0%"][:2] == ["1", "1"]
    # 2 % and 1 % move the same two: the higher bar is named.
    cheapest = min(gbh for _, _, gbh in (replay.frontier_point(m, s, x)
                                         for x in replay.FRONTIER_CHANCES))
    assert f"with no more: {cheapest:,.0f} GB-h (stated chance above 2.0%); " in table
    finest = replay.frontier_at(m, s, 1)
    assert finest is not None and finest <= cheapest
    assert table.splitlines()[-1].endswith(
        f"one stated chance at a time: {finest:,.0f} GB-h ({finest / 1000 - 1:+.1%} against "
        "its).")


def test_the_frontier_at_a_rule_s_count_is_the_least_memory_of_any_bar_that_reaches_it() -> None:
    """`frontier_at`: the least GB-h of the replay and of every bar on the stated chance
    (ties moved together) at which no more first attempts ran out than asked; None where no
    bar gets there. Moving one that ran out anyway saves the rung it died on."""
    s = replay.Slices((10000, 20000, 40000))
    m = replay.Metrics("ours")
    _ran(m, s, 0.05, 10000, 12000)  # ran out; one slice up it fits
    _ran(m, s, 0.05, 10000, 9000)  # the same chance: moved with it, for nothing
    _ran(m, s, 0.04, 10000, 25000)  # ran out; one slice up it still does
    _ran(m, s, 0.02, 20000, 30000)  # ran out; one slice up it fits
    _ran(m, s, 0.0, 10000, 15000)  # ran out, no chance stated: never moved
    assert m.first_oom == 4
    # The bars: 5 % (10,000 + 20,000 became 20,000, 10,000 became 20,000: as much memory, 3
    # OOMs), 4 % (10,000 + 20,000 + 40,000 became 20,000 + 40,000: 10,000 less, 3 OOMs), 2 %
    # (20,000 + 40,000 became 40,000: 20,000 less, 2 OOMs).
    assert replay.frontier_at(m, s, 9) == pytest.approx(m.reserved_gbh - 30000 / 1024)
    assert replay.frontier_at(m, s, 3) == pytest.approx(m.reserved_gbh - 30000 / 1024)
    assert replay.frontier_at(m, s, 2) == pytest.approx(m.reserved_gbh - 30000 / 1024)
    assert replay.frontier_at(m, s, 1) is None  # the unstated one and the 4 % one stay
    assert replay.frontier_point(m, s, 0.01)[1:] == (2, pytest.approx(
        replay.frontier_at(m, s, 2)))
    other = replay.Metrics("other")
    _ran(other, s, 0.05, 10000, 9000)  # fitted; one slice up costs 10,000
    _ran(other, s, 0.03, 10000, 9500)  # the same
    _ran(other, s, 0.01, 10000, 12000)  # ran out; one slice up saves the 10,000 it died on
    assert replay.frontier_at(other, s, 1) == pytest.approx(other.reserved_gbh)
    assert replay.frontier_at(other, s, 0) == pytest.approx(other.reserved_gbh + 10000 / 1024)


def test_the_frontier_starts_where_the_replay_ran(catalog: Catalog) -> None:
    pools = replay.mixed_pools(catalog, ["A100-80GB"])
    slices = replay.Slices.of(pools)
    t = trace([9000.0 + 40 * (i % 7) for i in range(30)] + [30000.0])
    m = replay.replay_service("ours", t, pools, catalog)
    assert len(m.firsts) == m.executions == len(t)
    assert sum(f.reserved_gbh for f in m.firsts) == pytest.approx(m.reserved_gbh)
    assert replay.frontier_point(m, slices, 1.0) == (0, m.first_oom, pytest.approx(
        m.reserved_gbh))
    # Moving every stated first attempt up never leaves more of them running out.
    moved, ran_out, gbh = replay.frontier_point(m, slices, 0.0)
    assert moved >= 25 and ran_out <= m.first_oom and gbh > m.reserved_gbh


def test_a_generated_peak_s_truth_is_the_distribution_it_was_drawn_from() -> None:
    mix = Truth(((0.7, 10000.0, 0.05), (0.3, 20000.0, 0.05)), 30000.0)
    assert mix.survival(10000.0) == pytest.approx(0.7 * 0.5 + 0.3, abs=1e-4)
    assert mix.survival(15000.0) == pytest.approx(0.3, abs=1e-4)
    assert mix.survival(20000.0 * math.exp(0.05)) == pytest.approx(0.3 * 0.158655, abs=1e-4)
    assert mix.survival(30000.0) == 0.0 and mix.survival(0.0) == 1.0
    exact = Truth(((0.5, 10000.0, 0.0), (0.5, 20000.0, 0.0)))
    assert (exact.survival(9999.0), exact.survival(10000.0), exact.survival(20000.0)) == (
        1.0, 0.5, 0.0)
    # Each generator's truths say how often its peaks pass a size, execution by execution:
    # their mean chance is the share of peaks past it, within the sampling error.
    start = datetime(2026, 1, 1, tzinfo=UTC)
    for generator in (generate, generate_step, generate_modes, generate_shapes,
                      generate_models):
        runs = list(generator(20, 4000, start=start, seed=3))
        assert all(e.truth is not None for e in runs)
        for mib in (8000.0, 20000.0):
            stated = sum(e.truth.survival(mib) for e in runs if e.truth) / len(runs)
            seen = sum(e.peak_mib > mib for e in runs) / len(runs)
            assert abs(stated - seen) < 4 * math.sqrt(max(stated * (1 - stated), 1e-4) / 4000)


def test_the_best_first_slice_is_the_least_expected_cost_over_every_pool(
        catalog: Catalog) -> None:
    pools = replay.mixed_pools(catalog, ["A100-80GB", "H100-80GB"])
    sizes = {p.pool_id: sorted({float(x.memory_mib) for x in candidate_profiles(p)})
             for p in pools}

    def brute(truth: Truth, price: float) -> float:
        return min((expected_cost(sizes[p.pool_id], i, truth, oom_wait_mib(
            p.gpu_model.memory_mib, price)), s) for p in pools
            for i, s in enumerate(sizes[p.pool_id]))[1]

    small = Truth(((1.0, 6000.0, 0.05),))
    assert replay.best_first_slice(replay.ladders_of(pools, 5.0), small) == min(
        min(v) for v in sizes.values())
    # A need with a 5 % chance past 20 GB: worth the 40 GB slice at 5 whole GPUs an OOM, not
    # when an OOM costs only the memory its attempts held.
    tail = Truth(((0.95, 12000.0, 0.03), (0.05, 25000.0, 0.03)))
    for price in (0.0, 5.0):
        assert replay.best_first_slice(replay.ladders_of(pools, price), tail) == brute(tail, price)
    assert replay.best_first_slice(replay.ladders_of(pools, 0.0), tail) < 21000 < (
        replay.best_first_slice(replay.ladders_of(pools, 5.0), tail)) < 41000


def test_the_truth_table_weighs_the_service_s_first_slices_and_the_best_ones(
        catalog: Catalog) -> None:
    pools = replay.mixed_pools(catalog, ["A100-80GB"])
    truth = Truth(((0.8, 9000.0, 0.03), (0.2, 18000.0, 0.1)))
    # The last run passes every slice the service gave before: its first attempt is weighed,
    # not the rung that fitted.
    t = [replace(e, truth=truth) for e in trace([9000.0, 15000.0, 9100.0, 8900.0] * 3
                                                + [9000.0] * 3 + [30000.0])]
    t.append(trace([5000.0], "untold")[0])  # a trace execution without its distribution
    m = replay.replay_service("ours", t, pools, catalog, oom_wait_gpus=5.0)
    assert m.first_oom >= 1
    rows = m.against_truth
    assert sum(v[0] for v in rows.values()) == 16 and rows["its first"][0] == 1
    ours = sum(truth.survival(f.slice_mib) for f in m.firsts[:16])
    best_mib = replay.best_first_slice(replay.ladders_of(pools, 5.0), truth)
    assert sum(v[1] for v in rows.values()) == pytest.approx(ours)
    assert sum(v[2] for v in rows.values()) == pytest.approx(16 * truth.survival(best_mib))
    assert sum(v[3] for v in rows.values()) == pytest.approx(
        sum(f.slice_mib / 1024 * f.hours for f in m.firsts[:16]))
    assert sum(v[4] for v in rows.values()) == pytest.approx(16 * best_mib / 1024)
    lines = replay.truth_table(m).splitlines()
    assert lines[-1] == (f"| all | 16 | {ours:,.1f} | {16 * truth.survival(best_mib):,.1f} | "
                         f"{sum(f.slice_mib / 1024 * f.hours for f in m.firsts[:16]):,.0f} | "
                         f"{16 * best_mib / 1024:,.0f} |")


def test_the_step_generator_tells_each_execution_s_place_around_its_action_s_step() -> None:
    """Each action's runs go before its step, then exactly one first run after it (the first
    whose median is the stepped one), STEP_SETTLED_RUNS - 1 more, then the rest; the other
    generators tell no phase."""
    start = datetime(2026, 1, 1, tzinfo=UTC)
    runs = list(generate_step(6, 1500, start=start, seed=4))
    for action in {e.action_id for e in runs}:
        own = [e for e in runs if e.action_id == action]
        phases = [STEP_PHASES.index(e.phase) for e in own]
        assert phases == sorted(phases)  # never back before a step
        after = [e for e in own if e.phase != STEP_PHASES[0]]
        if not after:
            continue
        assert after[0].phase == STEP_PHASES[1]
        assert [e.phase for e in after[1:STEP_SETTLED_RUNS]] == (
            [STEP_PHASES[2]] * min(STEP_SETTLED_RUNS - 1, len(after) - 1))
        assert all(e.phase == STEP_PHASES[3] for e in after[STEP_SETTLED_RUNS:])
        # The step is in the truth: the first run after it is drawn about a higher median.
        before = [e.truth.components[0][1] / float(e.features["input_mb"] / 100) ** 0.1
                  for e in own if e.phase == STEP_PHASES[0] and e.truth]
        stepped = after[0].truth.components[0][1] / (after[0].features["input_mb"] / 100) ** 0.1
        if before:  # the level times the step's factor, 1.2 to 2 (the input rounded)
            assert 1.2 - 1e-3 < stepped / before[-1] < 2.0 + 1e-3
    assert {e.phase for e in runs} == set(STEP_PHASES)
    for generator in (generate, generate_shapes, generate_models):
        assert {e.phase for e in generator(4, 200, start=start, seed=4)} == {""}


def test_the_modes_generator_tells_each_execution_s_place_around_its_first_heavy_run() -> None:
    """Light runs until the action's first heavy one, that run, then its heavy and light runs
    apart: the heavy ones stand the heavy mode's factor above the light ones."""
    start = datetime(2026, 1, 1, tzinfo=UTC)
    runs = list(generate_modes(5, 1500, start=start, seed=4))
    assert {e.phase for e in runs} == set(MODES_PHASES)
    weighed = 0
    for action in {e.action_id for e in runs}:
        own = [e for e in runs if e.action_id == action]
        phases = [MODES_PHASES.index(e.phase) for e in own]
        assert phases.count(1) <= 1
        end = phases.index(1) if 1 in phases else len(own)
        assert set(phases[:end]) <= {0} and set(phases[end + 1:]) <= {2, 3}
        assert own[0].truth is not None
        (_, light, _), (_, heavy, _) = own[0].truth.components
        by = {k: statistics.median(e.peak_mib for e, q in zip(own, phases, strict=True)
                                   if q in k) for k in ((0, 3), (1, 2)) if set(k) & set(phases)}
        if len(by) == 2 and min(phases.count(2), phases.count(3)) >= 10:
            assert by[(1, 2)] / by[(0, 3)] == pytest.approx(heavy / light, rel=0.1)
            weighed += 1
    assert weighed >= 3  # most actions run both modes often enough to weigh them


def test_the_phase_table_sets_the_service_s_first_attempts_beside_a_rule_s(
        catalog: Catalog) -> None:
    """Each replay counts its first attempts by the trace's phases: executions, OOMs, the
    service's stated chances and its first slices' GB-h; the table adds up the replays given
    (draws) and ends with their total; no phase, no table."""
    pools = replay.mixed_pools(catalog, ["A100-80GB"])
    slices = replay.Slices.of(pools)
    phases = [STEP_PHASES[0]] * 12 + [STEP_PHASES[1]] + [STEP_PHASES[2]] * 3
    t = [replace(e, phase=p) for e, p in zip(trace([9000.0] * 12 + [30000.0] + [30500.0] * 3),
                                                 phases, strict=True)]
    ours = replay.replay_service("ours", t, pools, catalog)
    vpa = replay.replay_rule(replay.VPA, replay.BASELINES[replay.VPA], t, slices)
    for m in (ours, vpa):
        assert sum(v[0] for v in m.by_phase.values()) == 16
        assert sum(v[1] for v in m.by_phase.values()) == m.first_oom
        assert m.by_phase[STEP_PHASES[1]][:2] == [1, 1]  # the step: nothing announced it
    assert sum(v[2] for v in ours.by_phase.values()) == pytest.approx(
        sum(f.chance for f in ours.firsts))
    assert sum(v[3] for v in ours.by_phase.values()) == pytest.approx(
        sum(f.slice_mib / 1024 * f.hours for f in ours.firsts))
    assert vpa.by_phase[STEP_PHASES[0]][2] == 0.0  # a rule states no chance
    lines = replay.phase_table([ours, ours], [vpa, vpa]).splitlines()
    assert [line.split("|")[1].strip() for line in lines[2:]] == [*STEP_PHASES[:3], "all"]
    first = lines[3].split("|")
    assert [c.strip() for c in first[2:4]] == ["2", "2"]  # two draws, each one OOM
    assert first[6].strip() == f"{2 * vpa.by_phase[STEP_PHASES[1]][1]:,.0f}"
    assert lines[-1].split("|")[2:4] == [" 32 ", f" {2 * ours.first_oom} "]
    assert lines[0].count(replay.VPA) == 1
    assert replay.phase_table([replay.replay_rule(replay.VPA, replay.BASELINES[replay.VPA],
                                                  trace([9000.0] * 3), slices)], []) == ""
