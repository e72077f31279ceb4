"""Learning: exported estimators, calibration, the retraining job, serving a promoted model."""

from __future__ import annotations

import json
import logging
import math
import random
import re
import threading
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from sklearn.ensemble import HistGradientBoostingRegressor
from sqlalchemy import Engine

from recommender.core import config
from recommender.core.catalog import Catalog, load_catalog
from recommender.core.domain import Execution, ModelVersion, Outcome, Request
from recommender.core.population import build_population
from recommender.core.usecases import UseCases
from recommender.evaluation.synthetic import (
    KIND_LEVELS,
    SyntheticExecution,
    generate,
    generate_one_off,
    generate_shapes,
)
from recommender.learning.evaluate import row_costs, score, server_predictions
from recommender.learning.fit import (
    conformal_offset,
    fit_linear,
    fit_memory_model,
    fit_trees,
    prefix_counts,
)
from recommender.learning.memory_model import KIND, MemoryModel
from recommender.learning.retrain import retrain
from recommender.learning.serving import ModelHolder
from recommender.learning.trees import Linear, Trees, export_hgb
from recommender.store import SqlStore
from tests.builders import mk

T0 = datetime(2026, 10, 1, tzinfo=UTC)


@pytest.fixture(autouse=True)
def quick_fits(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fewer boosting rounds keep these tests fast; the bench runs the real setting."""
    from recommender.core import config

    monkeypatch.setattr(config, "LEARN_TREES", 40)


def test_exported_trees_predict_exactly_like_sklearn() -> None:
    rng = np.random.default_rng(0)
    x = rng.random((3000, 3))
    x[::5, 1] = np.nan
    y = 2 * x[:, 0] + np.nan_to_num(x[:, 1]) + rng.normal(0, 0.1, 3000)
    model = HistGradientBoostingRegressor(loss="quantile", quantile=0.9, max_iter=50).fit(x, y)
    trees = Trees(json.loads(json.dumps(export_hgb(model))))  # through JSON, as stored
    xt = rng.random((500, 3))
    xt[::3, 2] = np.nan
    xt[::4, 0] = np.nan
    assert np.allclose(trees.predict(xt), model.predict(xt))
    assert trees.predict_one(xt[7].tolist()) == pytest.approx(model.predict(xt[7:8])[0])


def test_malformed_parameters_are_refused() -> None:
    good = fit_trees(np.random.default_rng(1).random((300, 2)), np.arange(300.0), 0.5)
    bad = json.loads(json.dumps(good))
    bad["trees"][0]["left"][0] = 10_000
    with pytest.raises(ValueError, match="out of range"):
        Trees(bad)
    with pytest.raises(ValueError):
        Linear({"type": "linear", "coef": [1.0], "intercept": 0.0, "mean": [], "scale": []})
    with pytest.raises(ValueError, match="not a memory model"):
        MemoryModel("v", {"kind": "pickle"})


def test_linear_quantile_and_conformal_coverage() -> None:
    rng = np.random.default_rng(2)
    x = rng.random((4000, 2)) * 10
    y = 3 * x[:, 0] + rng.normal(0, 1.0, 4000)
    params = fit_linear(x[:2000], y[:2000], 0.9)
    lin = Linear(params)
    offset = conformal_offset(y[2000:3000] - lin.predict(x[2000:3000]), 0.9)
    covered = np.mean(y[3000:] <= lin.predict(x[3000:]) + offset)
    assert 0.87 <= covered <= 0.95
    assert conformal_offset(np.array([]), 0.9) == 0.0


def test_calibration_levels_are_what_the_server_knew_before_each_execution() -> None:
    """Never the execution's own peak (that made rare actions look predictable: offsets far
    too small), and the calibration window's earlier executions count."""
    import math

    from recommender.core.dataset import OOM, SUCCEEDED, Dataset
    from recommender.learning.fit import prefix_levels

    def data(actions: list[int], peaks: list[float], outcomes: list[int]) -> Dataset:
        n = len(peaks)
        return Dataset(actions=["a", "b"], features=[], action=np.array(actions, dtype=np.int32),
                       x=np.zeros((n, 0)), peak=np.array(peaks), slice_mib=np.zeros(n),
                       outcome=np.array(outcomes, dtype=np.int8),
                       ended=np.arange(n, dtype=float), gpu_model=np.zeros(n, dtype=np.int16),
                       gpu_models=["A100-80GB"], duration_s=np.ones(n),
                       declared_mib=np.zeros(n))

    history = data([0, 0, 0], [1000.0, 3000.0, 9000.0], [SUCCEEDED, SUCCEEDED, OOM])
    rows = data([0, 1, 1, 0], [5000.0, 700.0, 900.0, 100.0], [SUCCEEDED] * 4)
    got = prefix_levels(history, rows)
    assert got[0] == pytest.approx(math.log(2000.0))  # median of 1000, 3000 (the OOM is no peak)
    assert math.isnan(got[1])  # b: nothing before it
    assert got[2] == pytest.approx(math.log(700.0))  # b: its first execution, not its own
    assert got[3] == pytest.approx(math.log(3000.0))  # a: 1000, 3000 and the earlier 5000


def test_the_pooled_model_gets_an_offset_for_an_action_it_under_predicts() -> None:
    from recommender.core.dataset import SUCCEEDED, Dataset
    from recommender.learning.fit import fit_memory_model

    rng = np.random.default_rng(5)
    n_actions, n = 200, 6000
    action = np.arange(n) % n_actions  # 24 executions each to train on, 6 to calibrate on
    batch = rng.integers(1, 65, n).astype(float)
    base = rng.uniform(2000, 8000, n_actions)
    per_item = np.full(n_actions, 20.0)
    per_item[7] = 400.0  # memory grows with the batch 20x more steeply than the others'
    peak = (base[action] + per_item[action] * batch) * np.exp(rng.normal(0, 0.03, n))
    data = Dataset(
        actions=[f"a{i}" for i in range(n_actions)], action=action.astype(np.int64),
        features=["batch_size"], x=batch[:, None],
        peak=peak, slice_mib=np.zeros(n), outcome=np.full(n, SUCCEEDED, dtype=np.int8),
        gpu_models=["A100-80GB"], gpu_model=np.zeros(n, dtype=np.int64),
        duration_s=np.full(n, 60.0), ended=np.arange(n, dtype=float), declared_mib=np.zeros(n),
    )
    cut = int(n * 0.8)
    train, calib = data.take(np.arange(cut)), data.take(np.arange(cut, n))
    params, _ = fit_memory_model(train, calib, 0.98)
    assert params["actions"] == {}, "too few executions for models of their own"
    offsets = params["pooled"]["action_offsets"]
    assert "a7" in offsets and offsets["a7"] > params["pooled"]["offset"]
    model = MemoryModel("v", params)
    level = float(np.median(peak[:cut][action[:cut] == 7]))
    with_offset = model.predict("a7", {"batch_size": 64.0}, level)
    params["pooled"]["action_offsets"] = {}
    without = MemoryModel("v", params).predict("a7", {"batch_size": 64.0}, level)
    assert with_offset is not None and without is not None
    assert with_offset.mib > without.mib
    # Versions stored before action offsets existed still load.
    del params["pooled"]["action_offsets"]
    assert MemoryModel("v", params).predict("a7", {"batch_size": 64.0}, level) == without


def record_generated(store: SqlStore, executions: Iterable[SyntheticExecution], prefix: str
                     ) -> None:
    for i, e in enumerate(executions):
        store.record_execution(Execution(
            f"{prefix}-{i}", e.action_id, "", "A100-80GB", "7g.80gb", 80896, 1, e.peak_mib,
            20.0, 600.0, 0.0, Outcome.SUCCEEDED, e.at, e.at - timedelta(minutes=10),
            e.features), e.at)


def record_synthetic(store: SqlStore, n: int, actions: int = 6, seed: int = 0) -> None:
    record_generated(store, generate(actions, n, start=T0, seed=seed), f"syn-{seed}")


@pytest.fixture
def trained(store: SqlStore, migrated_engine: Engine, catalog: Catalog) -> str:
    # Compared as the server runs (the population's prior for a new action, expected cost), a
    # learned model beats the server's rules where it knows what they cannot: here a table from
    # an input to a one-off action's memory (`python -m bench promotion` shows where it does
    # not).
    record_generated(store, generate_one_off(1500, start=T0), "once")
    result = retrain(SqlStore(migrated_engine), catalog, now=T0 + timedelta(days=10))
    assert result.version and result.promoted, result.reason
    return result.version


def test_the_job_scores_at_the_price_it_is_given_and_a_server_at_another_says_so(
        store: SqlStore, migrated_engine: Engine, catalog: Catalog,
        caplog: pytest.LogCaptureFixture) -> None:
    """The retraining job's replay of the server chooses each row's slice at the price it was
    given (a wide action's next run: the 10 GB slice at 0, a larger one at 50), stores that
    price with the version and says it; a server that prices an OOM otherwise loads the
    version and warns that the two were set apart."""
    rng = random.Random(3)
    wide = [SyntheticExecution("wide", T0 + timedelta(hours=i),
                               9000 * math.exp(rng.gauss(0, 0.45)), {}, 0.0)
            for i in range(31)]
    record_generated(store, wide, "wide")
    data = store.read_executions()
    n = len(data)
    history, test = data.take(np.arange(n - 1)), data.take(np.arange(n - 1, n))
    cheap = server_predictions(test, history, catalog, oom_wait_gpus=0.0)
    dear = server_predictions(test, history, catalog, oom_wait_gpus=50.0)
    assert cheap[0] < 10240 < dear[0]

    record_generated(store, generate_one_off(1500, start=T0 + timedelta(days=3)), "once")
    result = retrain(SqlStore(migrated_engine), catalog, now=T0 + timedelta(days=10),
                     oom_wait_gpus=12.5)
    assert result.version and result.metrics["oom_wait_gpus"] == 12.5
    assert "an OOM priced at 12.5 whole GPUs" in result.reason
    (stored,) = store.list_model_versions()
    assert stored.metrics["oom_wait_gpus"] == 12.5
    assert result.promoted, result.reason  # the one-off table beats the rules (`trained`)
    with caplog.at_level(logging.WARNING, logger="recommender.learning.serving"):
        assert ModelHolder(store, oom_wait_gpus=12.5).refresh()
        assert not [r for r in caplog.records if "scoring an OOM" in r.getMessage()]
        assert ModelHolder(store, oom_wait_gpus=5.0).refresh()
    (warned,) = [r for r in caplog.records if "scoring an OOM" in r.getMessage()]
    assert "at 12.5 whole GPUs; this server prices one at 5" in warned.getMessage()
    with pytest.raises(ValueError, match="oom_wait_gpus"):
        retrain(SqlStore(migrated_engine), catalog, oom_wait_gpus=math.nan)


def test_retrain_promotes_a_model_that_beats_the_history_rule(
        trained: str, store: SqlStore) -> None:
    versions = store.list_model_versions()
    assert [(v.version, v.serving, v.promoted) for v in versions] == [(trained, True, True)]
    v = versions[0]
    m = v.metrics
    # The history rules size a thin action's execution without its inputs; the model does not.
    assert m["test_cost_gbh"] < m["history_cost_gbh"]
    assert m["test_coverage"] >= 0.9
    assert "history rule" in v.reason and v.training_window_start and v.training_window_end
    serving = store.serving_model_version(KIND)
    assert serving is not None
    json.dumps(serving.params)  # plain parameters: nothing to unpickle


def test_a_second_run_is_compared_with_the_serving_version(
        trained: str, store: SqlStore, migrated_engine: Engine, catalog: Catalog) -> None:
    result = retrain(SqlStore(migrated_engine), catalog, now=T0 + timedelta(days=11))
    assert f"serving version {trained}" in result.reason
    serving = [v for v in store.list_model_versions() if v.serving]
    assert len(serving) == 1
    assert serving[0].version == (result.version if result.promoted else trained)


def test_concurrent_runs_leave_one_serving_version(
        store: SqlStore, migrated_engine: Engine, catalog: Catalog) -> None:
    # A workload where the candidate surely wins (as `trained`): both runs want to promote.
    record_generated(store, generate_one_off(1500, start=T0), "once")
    results = []

    def run(k: int) -> None:
        results.append(retrain(SqlStore(migrated_engine), catalog,
                               now=T0 + timedelta(days=10, seconds=k)))

    threads = [threading.Thread(target=run, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    versions = store.list_model_versions()
    assert len(versions) == 2
    serving = [v.version for v in versions if v.serving]
    assert len(serving) == 1
    # Both may be promoted if one finished before the other began; the last promotion serves.
    assert serving[0] in {r.version for r in results if r.promoted}


def test_trees_fit_an_input_missing_on_every_row() -> None:
    """An action's own model is fitted over every action's features; another action's input is
    missing on all its rows. scikit-learn's binning fails on such a column ("window shape
    cannot be larger than input array shape", which crashed the retraining job on a workload
    whose actions carry different inputs); it is fitted as a constant, and predicts as the
    trees without it do."""
    rng = np.random.default_rng(1)
    x = rng.random((400, 2))
    y = 3 * x[:, 0] + rng.normal(0, 0.1, 400)
    with_empty = np.column_stack([x, np.full(400, np.nan)])
    got = Trees(fit_trees(with_empty, y, 0.9)).predict(with_empty)
    assert np.allclose(got, Trees(fit_trees(x, y, 0.9)).predict(x))


def test_retrain_learns_actions_whose_inputs_differ(
        store: SqlStore, migrated_engine: Engine, catalog: Catalog,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Image, attention and noisy actions, each with its own inputs: the job runs to a version
    with per-action models, on the trees (the family whose fit failed on them)."""
    from recommender.learning import fit

    monkeypatch.setattr(fit, "FAMILIES", {"trees": fit_trees})
    record_generated(store, generate_shapes(12, 1500, start=T0, seed=1), "shape")
    result = retrain(SqlStore(migrated_engine), catalog, now=T0 + timedelta(days=10))
    assert result.version, result.reason
    models = re.search(r"family trees, (\d+) action models", result.reason)
    assert models is not None and int(models.group(1)) > 0, result.reason


def test_the_hold_out_is_the_latest_quarter_up_to_its_cap(monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    from recommender.core import config
    from recommender.core.dataset import SUCCEEDED, Dataset
    from recommender.learning.retrain import split_by_time

    def rows(n: int) -> Dataset:
        return Dataset(actions=["a"], features=[], action=np.zeros(n, dtype=np.int32),
                       x=np.zeros((n, 0)), peak=np.ones(n), slice_mib=np.zeros(n),
                       outcome=np.full(n, SUCCEEDED, dtype=np.int8),
                       ended=np.arange(n, dtype=float), gpu_model=np.zeros(n, dtype=np.int16),
                       gpu_models=["A100-80GB"], duration_s=np.ones(n), declared_mib=np.zeros(n))

    train, calib, test = split_by_time(rows(1000))
    assert (len(train), len(calib), len(test)) == (600, 150, 250)
    monkeypatch.setattr(config, "LEARN_HOLDOUT_MAX_ROWS", 100)
    train, calib, test = split_by_time(rows(1000))
    assert (len(train), len(calib), len(test)) == (750, 150, 100)
    assert test.ended[0] == 900 and calib.ended[0] == 750  # the latest rows test, in order


def test_not_enough_data_makes_no_version(
        store: SqlStore, migrated_engine: Engine, catalog: Catalog) -> None:
    record_synthetic(store, 40)
    result = retrain(SqlStore(migrated_engine), catalog)
    assert not result.version and "not enough data" in result.reason
    assert "334 are needed" in result.reason  # 200 to train on, the oldest 60 %
    assert store.list_model_versions() == []


def test_served_model_is_used_for_requests_with_features(
        trained: str, store: SqlStore, catalog: Catalog) -> None:
    holder = ModelHolder(store, poll_s=0.05)
    assert holder.refresh() and holder.current() is not None
    use_cases = UseCases(store, catalog=catalog, learned=holder.current,
                            clock=lambda: T0 + timedelta(days=6))
    pool = mk(catalog, "a80", "A100-80GB")
    # A new action: the pooled model sizes it by its inputs (its own online model has nothing
    # yet; an action with 10 executions or more is served by its own).
    small = use_cases.recommend(Request("act-new", "", (pool,), features={
        "kind": 0.0})).recommendation.decision
    big = use_cases.recommend(Request("act-new", "", (pool,), features={
        "kind": 3.0})).recommendation.decision
    assert small.source == "model" and small.model_version == trained
    assert small.predicted_peak_mib < big.predicted_peak_mib
    at = T0 + timedelta(days=5)
    record_generated(store, (SyntheticExecution("busy", at + timedelta(minutes=i), 4000.0,
                                                {"kind": 0.0}, 0.0) for i in range(12)), "busy")
    busy = use_cases.recommend(Request("busy", "", (pool,), features={
        "kind": 0.0})).recommendation.decision
    assert busy.source == "history" and busy.model_version == ""
    plain = use_cases.recommend(Request("busy", "", (pool,))).recommendation.decision
    assert plain.source == "history" and plain.model_version == ""


def test_holder_keeps_the_old_model_when_a_new_one_cannot_load(
        trained: str, store: SqlStore) -> None:
    holder = ModelHolder(store)
    holder.refresh()
    store.save_model_version(ModelVersion(
        "broken", datetime.now(UTC), KIND, True, True, {}, "test", None, None,
        {"kind": KIND, "quantile": 0.95, "features": ["x"],
         "pooled": {"estimator": {"type": "trees", "baseline": 0, "trees": [
             {"feature": [0], "threshold": [0], "missing_left": [0], "left": [7],
              "right": [9], "leaf": [0], "value": [0]}]}, "offset": 0}}),
        expected_serving=trained)
    assert not holder.refresh()
    current = holder.current()
    assert current is not None and current.version == trained
    assert not holder.refresh()  # the broken version is not retried every poll


def test_holder_polls_in_the_background(trained: str, store: SqlStore) -> None:
    holder = ModelHolder(store, poll_s=0.05)
    holder.start()
    try:
        current = holder.current()
        assert current is not None and current.version == trained
    finally:
        holder.stop()


def test_load_catalog_is_shared(catalog: Catalog) -> None:
    assert load_catalog().resolve("A100-80GB") is not None


def test_racing_promotions_store_both_and_serve_one(store: SqlStore) -> None:
    """Two runs that both saw no serving version: the index lets one serve."""
    def version(name: str) -> ModelVersion:
        return ModelVersion(name, T0, KIND, True, True, {}, "", None, None, {"kind": KIND})

    assert store.save_model_version(version("a"), expected_serving=None)
    # The second run compared against "no serving version" too: stored, not serving.
    assert not store.save_model_version(version("b"), expected_serving=None)
    by_name = {v.version: v for v in store.list_model_versions()}
    assert by_name["a"].serving and not by_name["b"].serving and not by_name["b"].promoted


def test_a_prediction_that_rounds_up_past_the_peak_does_not_run_out(
        store: SqlStore, catalog: Catalog) -> None:
    """The first attempt holds the slice the prediction rounds up to: 15,000 MiB asked for a
    16,000 MiB peak holds a 20 GB slice, and fits; 9,000 MiB holds a 10 GB one, and runs out."""
    record_generated(store, [SyntheticExecution("a", T0, 16000.0, {}, 0.0)], "round")
    data = store.read_executions()
    _, reserved, too_small = row_costs(data, np.array([15000.0]), catalog)
    assert not too_small[0] and reserved[0] == pytest.approx(19968 / 1024 * 600 / 3600)
    _, _, too_small = row_costs(data, np.array([9000.0]), catalog)
    assert too_small[0]


def test_promotion_scores_an_oom_at_the_servers_price(store: SqlStore, catalog: Catalog
                                                      ) -> None:
    """A first attempt that runs out costs its slice, the rerun and the user's wait at the
    price the server weighs (`recommender retrain --oom-wait-gpus`): the wait is that many
    whole 80 GB cards for the run's 10 minutes; one that fits costs its slice alone."""
    record_generated(store, [SyntheticExecution("a", T0, 16000.0, {}, 0.0)], "price")
    data = store.read_executions()
    hours = 600 / 3600
    for gpus in (0.0, config.OOM_WAIT_GPUS, 20.0):
        cost, reserved, too_small = row_costs(data, np.array([9000.0]), catalog, gpus)
        assert too_small[0]
        wait = gpus * 81920 / 1024 * hours
        assert cost[0] == pytest.approx(reserved[0] + wait + 19968 / 1024 * hours)
        fits, _, _ = row_costs(data, np.array([15000.0]), catalog, gpus)
        assert fits[0] == pytest.approx(19968 / 1024 * hours)
    assert score(data, np.array([9000.0]), catalog, 20.0).cost_gbh > score(
        data, np.array([9000.0]), catalog).cost_gbh


def test_the_hold_out_is_replayed_with_what_the_server_knew_of_other_actions(
        store: SqlStore, catalog: Catalog) -> None:
    """A new action in the hold-out: the server gives it the population's prior (other
    actions' first peaks, 3-5 GB), not the largest slice, and so does the replay that
    promotion compares; without the population it would be charged the whole card, and any
    model would look better than the server's rules."""
    peers = [SyntheticExecution(f"peer-{a}", T0 + timedelta(minutes=10 * (4 * a + k)),
                                3000.0 + 400 * a + 30 * k, {}, 0.0)
             for a in range(6) for k in range(4)]
    late = SyntheticExecution("new", T0 + timedelta(days=1), 4200.0, {}, 0.0)
    record_generated(store, [*peers, late], "pop")
    data = store.read_executions()
    n = len(data)
    history, test = data.take(np.arange(n - 1)), data.take(np.arange(n - 1, n))
    population = build_population(store.population_samples(100, before=T0 + timedelta(hours=5)))
    assert population.actions == 6
    without = server_predictions(test, history, catalog)
    with_population = server_predictions(test, history, catalog, population=population)
    assert math.isinf(without[0])
    assert 4200 <= with_population[0] <= 19968
    assert score(test, with_population, catalog).cost_gbh < score(test, without, catalog).cost_gbh


def test_the_hold_out_replay_starts_a_new_action_from_the_memory_it_declared(
        store: SqlStore, catalog: Catalog) -> None:
    """Users here declare twice what they use. The server starts a new action that declares
    60,000 MiB from that ratio (about 30,000 MiB: 3g.40gb), not from other actions' first
    peaks (about 4,000 MiB: a 10 GB slice that runs out), so the replay that promotion
    compares must read what each execution's request declared."""
    pool = (mk(catalog, model="A100-80GB"),)

    def run(action: str, declared: int, peak: float, when: datetime, eid: str) -> None:
        uc = UseCases(store, catalog=catalog, clock=lambda: when)
        rec = uc.recommend(Request(action, eid, pool, declared_memory_mib=declared)).recommendation
        uc.record_execution(Execution(
            eid, action, rec.id, "A100-80GB", rec.decision.rung.profile.name,
            rec.decision.rung.profile.memory_mib, 1, peak, 20.0, 600.0, 0.0, Outcome.SUCCEEDED,
            when, when - timedelta(minutes=10), {}))

    for a in range(6):
        for k in range(4):
            run(f"peer-{a}", 8000, 3800.0 + 100 * a + 20 * k,
                T0 + timedelta(minutes=10 * (4 * a + k)), f"p{a}-{k}")
    run("new", 60_000, 30_000.0, T0 + timedelta(days=1), "new-0")
    record_generated(store, [SyntheticExecution("undeclared", T0 + timedelta(days=2), 900.0,
                                                {}, 0.0)], "bare")
    data = store.read_executions()
    assert data.declared_mib.tolist() == [8000.0] * 24 + [60_000.0, 0.0]
    n = len(data)
    history, test = data.take(np.arange(n - 2)), data.take(np.arange(n - 2, n - 1))
    population = build_population(store.population_samples(100, before=T0 + timedelta(hours=5)))
    replayed = server_predictions(test, history, catalog, population=population)
    assert replayed[0] >= 30_000, "started from the declared ratio, it fits"
    undeclared = test.take(np.arange(1))
    undeclared.declared_mib = np.zeros(1)
    assert server_predictions(undeclared, history, catalog, population=population)[0] < 30_000


def test_the_hold_out_replay_reads_the_population_again_as_it_goes(
        store: SqlStore, catalog: Catalog) -> None:
    """The server reads the population every minute; a replay of a long hold-out that kept
    the one from its start would start a late new action from actions of days before. Here the
    population changes under the hold-out (new actions now start near 30 GB): the replay
    re-read at that row sizes the late new action from it, and the bounds of the re-reads never
    let a row see an execution that ended after it started."""
    from recommender.learning import retrain as retrain_module

    small = [SyntheticExecution(f"small-{a}", T0 + timedelta(minutes=10 * (4 * a + k)),
                                3000.0 + 400 * a + 30 * k, {}, 0.0)
             for a in range(6) for k in range(4)]
    large = [SyntheticExecution(f"large-{a}", T0 + timedelta(days=1, minutes=10 * (4 * a + k)),
                                30000.0 + 400 * a + 30 * k, {}, 0.0)
             for a in range(6) for k in range(4)]
    late = SyntheticExecution("late", T0 + timedelta(days=2), 31000.0, {}, 0.0)
    record_generated(store, [*small, *large, late], "drift")
    data = store.read_executions()
    n = len(data)
    history, test = data.take(np.arange(24)), data.take(np.arange(24, n))
    first = build_population(store.population_samples(100, before=T0 + timedelta(hours=5)))
    again = build_population(store.population_samples(
        100, before=T0 + timedelta(days=1, hours=5)))
    late_row = n - 25
    stale = server_predictions(test, history, catalog, population=first)
    fresh = server_predictions(test, history, catalog, population=first,
                               reread=[(late_row, again)])
    assert stale[late_row] < 31000 <= fresh[late_row]
    assert np.array_equal(stale[:late_row], fresh[:late_row])

    asked: list[datetime] = []

    class Recording:
        def population_samples(self, limit: int, before: datetime | None = None) -> list[object]:
            assert before is not None
            asked.append(before)
            return store.population_samples(limit, before)

        def calibration_samples(self, limit: int, before: datetime | None = None) -> list[object]:
            return store.calibration_samples(limit, before)

    _, reads = retrain_module._populations(Recording(), test)  # type: ignore[arg-type]
    asked = asked[1:]  # the first read is the hold-out's start
    assert len(reads) == len(asked) >= 5 and asked == sorted(asked)
    starts = test.ended - test.duration_s
    for (row, _), before in zip(reads, asked, strict=True):
        assert before.timestamp() < starts[row:].min()


def test_a_new_action_is_answered_by_an_offset_calibrated_on_new_actions(
        catalog: Catalog, store: SqlStore) -> None:
    """The pooled model knows a new action by its inputs alone: its offset for one is
    calibrated on the first executions of actions, apart from the others'. A version with too
    few of them to calibrate does not answer for a new action (the population's prior does);
    a version stored before the offset existed uses the pooled one, as it did."""
    record_generated(store, generate_one_off(800, start=T0, seed=2), "off")
    data = store.read_executions()
    cut = int(len(data) * 0.8)
    params, _ = fit_memory_model(data.take(np.arange(cut)), data.take(np.arange(cut, len(data))),
                                 0.98)
    new_offset = params["pooled"]["new_offset"]
    assert isinstance(new_offset, float)
    seen = MemoryModel("v", params).predict("once-new", {"kind": 1.0}, None)
    assert seen is not None
    params["pooled"]["new_offset"] = None
    assert MemoryModel("v", params).predict("once-new", {"kind": 1.0}, None) is None
    assert MemoryModel("v", params).predict("once-new", {"kind": 1.0}, 30000.0) is not None
    del params["pooled"]["new_offset"]
    params["pooled"]["offset"] = new_offset + 0.5
    old = MemoryModel("v", params).predict("once-new", {"kind": 1.0}, None)
    assert old is not None and old.mib == pytest.approx(seen.mib * math.exp(0.5))


def test_prefix_counts_say_which_rows_the_learned_model_answers_for(store: SqlStore) -> None:
    """Each calibration row's count of its action's earlier executions, training rows first:
    under ONLINE_MIN_SAMPLES_OVER_LEARNED the learned model answers, and is calibrated there."""
    runs = [SyntheticExecution(a, T0 + timedelta(minutes=i), 1000.0, {}, 0.0)
            for i, a in enumerate(["a", "b", "a", "a", "c", "b"])]
    record_generated(store, runs, "count")
    data = store.read_executions()
    history, rows = data.take(np.arange(3)), data.take(np.arange(3, 6))
    assert prefix_counts(history, rows).tolist() == [2, 0, 1]


def test_a_new_action_is_learnt_at_what_the_server_knows_of_it(store: SqlStore) -> None:
    """Each training row at the level the server knew before it: a one-off action's first run
    has none, so the model learns its need from its inputs (here a table of 8 kinds), not from
    its own peak, which a level including the row would have handed it."""
    record_generated(store, generate_one_off(1000, start=T0, seed=4), "learnt")
    data = store.read_executions()
    cut = int(len(data) * 0.8)
    params, _ = fit_memory_model(data.take(np.arange(cut)), data.take(np.arange(cut, len(data))),
                                 0.98)
    model = MemoryModel("v", params)
    for kind, level in enumerate(KIND_LEVELS):
        found = model.predict("once-new", {"kind": float(kind)}, None)
        assert found is not None
        assert 0.8 * level < found.median_mib < 1.25 * level, (kind, found)
        assert found.mib > found.median_mib, (kind, found)


def test_trees_that_split_off_missing_values_store_as_plain_json() -> None:
    """A split of the present values from the missing ones has an infinite threshold in
    scikit-learn; stored, it is the largest float (PostgreSQL's JSON holds no Infinity), and
    predicts the same."""
    rng = np.random.default_rng(3)
    x = rng.random((400, 2))
    x[rng.random(400) < 0.5, 1] = np.nan
    y = np.where(np.isnan(x[:, 1]), 5.0, 1.0) + x[:, 0]
    params = fit_trees(x, y, 0.5)
    json.dumps(params, allow_nan=False)
    model = HistGradientBoostingRegressor(
        loss="quantile", quantile=0.5, max_iter=40, learning_rate=0.1, max_leaf_nodes=15,
        min_samples_leaf=8, early_stopping=False, random_state=0).fit(x, y)
    assert np.allclose(Trees(export_hgb(model)).predict(x), model.predict(x))
