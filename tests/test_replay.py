"""The replay behind `recommender evaluate`: metrics, baselines, and the bar on real traces."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime, timedelta

import pytest

from recommender.core.catalog import Catalog
from recommender.evaluation import replay
from recommender.evaluation.traces import TraceExecution, gentd26_hourly, synthetic
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
def test_evaluate_command_prints_the_table() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "recommender", "evaluate", "--trace", "gentd26",
         "--max-actions", "6", "--traces-dir", str(SHARED / "traces")],
        capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    for row in ("IntelliScale (this service)", "Kubernetes VPA", "Ryax 26.10", "oracle"):
        assert row in out.stdout


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
