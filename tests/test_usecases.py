"""The use cases against the store port: the same assertions on every implementation.

`any_store` (tests/conftest.py) is `SqlStore` on SQLite, on PostgreSQL, and tests/fakes.py's
`InMemoryStore`. What passes here is what the use cases may rely on of any `Store`; a new
adapter is a new parameter of that fixture. The last test runs one scripted history through
the SQL store and the fake side by side and compares every answer.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from recommender.core import config
from recommender.core.cache import ActionCache
from recommender.core.catalog import Catalog
from recommender.core.domain import (
    Decision,
    HistoryFilter,
    Outcome,
    Sample,
    StoredRecommendation,
    StoreUnavailable,
)
from recommender.core.ladder import LadderExhausted
from recommender.core.population import PopulationSample
from recommender.core.ports import Store
from recommender.core.usecases import UnknownRecommendation, UseCases
from tests.builders import T0, execution, mk, model_version, req
from tests.fakes import InMemoryStore
from tests.harness.stores import sql_store


def at(when: datetime, store: Store, catalog: Catalog) -> UseCases:
    return UseCases(store, catalog=catalog, clock=lambda: when)


def summary(rec: StoredRecommendation) -> tuple[object, ...]:
    """What a recommendation says, without its id."""
    d = rec.decision
    return (rec.created_at, rec.action_id, rec.execution_id, d.rung.pool_id, d.rung.gpu_model,
            d.rung.profile.name, d.rung.profile.memory_mib, d.rung.profile.compute_slices,
            d.rung.count, dict(d.rung.resources), d.predicted_peak_mib, d.source, d.reason,
            d.attempt, [(r.profile.name, r.count) for r in d.ladder], rec.oom_at,
            rec.oom_observed_peak_mib)


# --- recommendations -----------------------------------------------------------------------


def test_a_saved_recommendation_reads_back_as_it_was_given(any_store: Store,
                                                           catalog: Catalog) -> None:
    answer = at(T0, any_store, catalog).recommend(replace(req(catalog), execution_id="x-1"))
    assert answer.stored
    got = any_store.get_recommendation(answer.recommendation.id)
    assert got is not None and got.id == answer.recommendation.id
    assert summary(got) == summary(answer.recommendation)
    assert got.created_at == T0 and got.parent_id is None and got.oom_at is None
    assert any_store.get_recommendation("no-such-id") is None
    assert any_store.child_of(got.id) is None


def test_next_after_oom_gives_one_rung_per_parent(any_store: Store, catalog: Catalog) -> None:
    use_cases = at(T0, any_store, catalog)
    parent = use_cases.recommend(req(catalog)).recommendation
    first = at(T0 + timedelta(minutes=1), any_store, catalog).next_after_oom(parent.id, 9000)
    again = at(T0 + timedelta(minutes=2), any_store, catalog).next_after_oom(parent.id, 12000)
    assert first.stored and again.recommendation.id == first.recommendation.id
    rung = first.recommendation
    assert (rung.parent_id, rung.decision.attempt, rung.decision.source) == (
        parent.id, 2, "ladder")
    assert rung.decision.rung.profile.name == "3g.20gb"
    assert [r.profile.name for r in rung.decision.ladder] == ["7g.40gb"]
    child = any_store.child_of(parent.id)
    assert child is not None and child.id == rung.id
    marked = any_store.get_recommendation(parent.id)
    assert marked is not None  # the first call's OOM, not the retry's
    assert (marked.oom_at, marked.oom_observed_peak_mib) == (T0 + timedelta(minutes=1), 9000)


def test_a_second_rung_for_a_parent_is_not_stored(any_store: Store, catalog: Catalog) -> None:
    """Two callers racing past child_of: the store keeps the first rung and returns it."""
    parent = at(T0, any_store, catalog).recommend(req(catalog)).recommendation
    rung = at(T0, any_store, catalog).next_after_oom(parent.id, 0).recommendation
    late = replace(rung, id="late-rung-0000", created_at=T0 + timedelta(seconds=1))
    got = any_store.save_rung_after_oom(parent.id, 5000, T0 + timedelta(seconds=1), late)
    assert got.id == rung.id
    assert any_store.get_recommendation("late-rung-0000") is None
    listed, _ = any_store.list_history(HistoryFilter(source="ladder"), 10)
    assert [e.recommendation.id for e in listed] == [rung.id]


def test_the_top_of_the_ladder_marks_the_oom_once(any_store: Store, catalog: Catalog) -> None:
    rec = at(T0, any_store, catalog).recommend(req(catalog)).recommendation
    for minute in (1, 2):  # 1g.10gb -> 3g.20gb -> 7g.40gb
        rec = at(T0 + timedelta(minutes=minute), any_store, catalog).next_after_oom(
            rec.id, 0).recommendation
    assert rec.decision.rung.profile.name == "7g.40gb" and not rec.decision.ladder
    for minute, peak in ((3, 41000.0), (4, 45000.0)):
        with pytest.raises(LadderExhausted):
            at(T0 + timedelta(minutes=minute), any_store, catalog).next_after_oom(rec.id, peak)
    top = any_store.get_recommendation(rec.id)
    assert top is not None
    assert (top.oom_at, top.oom_observed_peak_mib) == (T0 + timedelta(minutes=3), 41000)
    samples = any_store.action_samples("act", 10)
    assert [(s.outcome, s.slice_mib) for s in samples] == [
        (Outcome.OOM, 40192), (Outcome.OOM, 19968), (Outcome.OOM, 9856)]


def test_next_after_oom_of_an_unknown_recommendation(any_store: Store,
                                                     catalog: Catalog) -> None:
    with pytest.raises(UnknownRecommendation, match="recommendation_id"):
        at(T0, any_store, catalog).next_after_oom("never-given", 0)
    assert any_store.list_history(HistoryFilter(), 10) == ([], "")


# --- executions ----------------------------------------------------------------------------


def test_record_execution_is_idempotent(any_store: Store, catalog: Catalog) -> None:
    use_cases = at(T0, any_store, catalog)
    assert use_cases.record_execution(execution("e1", peak=3000))
    assert not use_cases.record_execution(execution("e1", peak=1))
    assert not any_store.record_execution(execution("e1", "other", peak=2), T0)
    samples = any_store.action_samples("act", 10)
    assert [(s.peak_mib, s.slice_mib, s.outcome) for s in samples] == [
        (3000, 9856, Outcome.SUCCEEDED)]
    assert any_store.action_samples("other", 10) == []


def test_action_samples_are_the_newest_first_and_bounded(any_store: Store) -> None:
    for i in range(6):
        any_store.record_execution(execution(f"e{i}", peak=1000.0 + i,
                                             at=T0 + timedelta(hours=i)), T0)
    any_store.record_execution(execution("elsewhere", "other"), T0)
    samples = any_store.action_samples("act", 4)
    assert [s.peak_mib for s in samples] == [1005, 1004, 1003, 1002]
    assert [s.at for s in samples] == [T0 + timedelta(hours=h) for h in (5, 4, 3, 2)]
    s = samples[0]
    assert (s.slice_mib, s.sm_utilization, s.gpu_model, s.profile, s.throughput) == (
        9856, 10.0, "A100-40GB", "1g.10gb", 1.0)


def test_recommend_learns_from_the_history_it_stored(any_store: Store,
                                                     catalog: Catalog) -> None:
    for i in range(8):
        any_store.record_execution(execution(f"e{i}", peak=3000.0 + 10 * i,
                                             at=T0 - timedelta(hours=i + 1)), T0)
    d = at(T0, any_store, catalog).recommend(req(catalog)).recommendation.decision
    assert d.source == "history" and 3070 <= d.predicted_peak_mib < 4864
    assert d.rung.profile.name == "1g.5gb"  # below the 7,500 MiB the request declares


def test_runs_in_window_are_the_executions_that_overlap_it(any_store: Store,
                                                           catalog: Catalog) -> None:
    rec = at(T0, any_store, catalog).recommend(req(catalog)).recommendation  # pool "a100"
    hour = timedelta(hours=1)
    for eid, ended, rec_id in (("inside", T0 + 2 * hour, rec.id), ("no-pool", T0 + 2 * hour, ""),
                               ("before", T0, rec.id), ("after", T0 + 9 * hour, rec.id)):
        any_store.record_execution(execution(eid, rec=rec_id, at=ended), T0)
    any_store.record_execution(replace(execution("h100", at=T0 + 2 * hour),
                                       gpu_model="H100-80GB"), T0)
    since, until = T0 + hour, T0 + 3 * hour

    def runs(pool_id: str = "") -> list[tuple[str, int, datetime, datetime]]:
        return sorted((r.profile, r.count, r.start, r.end)
                      for r in any_store.runs_in_window("A100-40GB", since, until, pool_id))

    one = ("1g.10gb", 1, T0 + 2 * hour - timedelta(minutes=1), T0 + 2 * hour)
    assert runs() == [one, one]
    assert runs("a100") == [one]  # an execution without a recommendation has no known pool
    assert runs("elsewhere") == []


def test_an_oom_is_dropped_once_its_retry_is_recorded(any_store: Store,
                                                      catalog: Catalog) -> None:
    """The runner records the execution under its own id, for the rung that fitted: the
    failed attempt's censored sample gives way to the true peak."""
    use_cases = at(T0, any_store, catalog)
    first = use_cases.recommend(replace(req(catalog), execution_id="run-1")).recommendation
    rung = use_cases.next_after_oom(first.id, 9000).recommendation
    assert [(s.outcome, s.execution_id, s.recommendation_id, s.run_id)
            for s in any_store.action_samples("act", 10)] == [(Outcome.OOM, "", first.id, "run-1")]
    use_cases.record_execution(execution("run-1", peak=12000, rec=rung.id))
    samples = any_store.action_samples("act", 10)
    assert [(s.outcome, s.peak_mib, s.execution_id, s.recommendation_id) for s in samples] == [
        (Outcome.SUCCEEDED, 12000, "run-1", rung.id)]
    assert samples[0].features == {"batch": 8.0}


def test_population_samples_are_the_latest_fits_and_ooms_of_any_action(
        any_store: Store, catalog: Catalog) -> None:
    rec = at(T0, any_store, catalog).recommend(req(catalog, "b")).recommendation  # 7,500 declared
    any_store.record_execution(execution("a1", "a", peak=3000, at=T0 + timedelta(hours=1)), T0)
    any_store.record_execution(execution("b1", "b", peak=9800, outcome=Outcome.OOM, rec=rec.id,
                                         at=T0 + timedelta(hours=2)), T0)
    any_store.record_execution(execution("c1", "c", outcome=Outcome.FAILED,
                                         at=T0 + timedelta(hours=3)), T0)
    got = any_store.population_samples(10)
    assert [(p.action_id, p.at_s, p.declared_mib) for p in got] == [
        ("b", (T0 + timedelta(hours=2)).timestamp(), 7500.0),
        ("a", (T0 + timedelta(hours=1)).timestamp(), 0.0)]
    assert got[1].need_mib == 3000 and got[0].need_mib > 9856  # an OOM: more than its slice
    assert got[1].features == {"batch": 8.0}
    assert [p.action_id for p in any_store.population_samples(1)] == ["b"]
    # As the population stood at a time (the retraining job's replay of the server): the
    # executions ended by then.
    assert [p.action_id for p in any_store.population_samples(
        10, before=T0 + timedelta(hours=1, minutes=30))] == ["a"]


def test_young_actions_first_attempts_keep_their_model_chance_and_what_became_of_them(
        any_store: Store, catalog: Catalog) -> None:
    """`calibration_samples`: of the newest first attempts whose decision kept a model chance
    (a young action's, with a predictive need), those whose outcome is known: marked by
    NextAfterOom or recorded as an OOM (ran out), recorded as succeeded (fitted). A rung, an
    attempt still running, and a grown action's attempt are not in it."""
    uc = at(T0, any_store, catalog)
    for a in range(4):  # a population to start new actions from
        for k in range(3):
            uc.record_execution(execution(f"p{a}-{k}", f"peer-{a}", peak=4000.0 + 300 * a + 50 * k,
                                          at=T0 - timedelta(hours=k + 1)))
    grown = [execution(f"g{k}", "grown", peak=3000.0 + k, at=T0 - timedelta(minutes=k + 1))
             for k in range(config.CALIBRATION_YOUNG_RUNS)]
    for e in grown:
        uc.record_execution(e)

    def first(action: str, minutes: int) -> StoredRecommendation:
        undeclared = replace(req(catalog, action), declared_memory_mib=0)
        return at(T0 + timedelta(minutes=minutes), any_store, catalog).recommend(
            undeclared).recommendation

    ran_out, fitted, running, old = (first("new-a", 1), first("new-b", 2), first("new-c", 3),
                                     first("grown", 4))
    for rec in (ran_out, fitted, running):
        assert rec.decision.model_oom_chance is not None, rec.decision.reason
        assert rec.decision.oom_chance > 0 and rec.decision.source == "population"
    assert old.decision.model_oom_chance is None and old.decision.oom_chance > 0
    rung = at(T0 + timedelta(minutes=5), any_store, catalog).next_after_oom(ran_out.id, 0.0)
    uc.record_execution(execution("a-run", "new-a", peak=12000.0, rec=rung.recommendation.id,
                                  at=T0 + timedelta(minutes=6)))
    uc.record_execution(execution("b-run", "new-b", peak=2000.0, rec=fitted.id,
                                  at=T0 + timedelta(minutes=7)))
    uc.record_execution(execution("old-run", "grown", peak=2000.0, rec=old.id,
                                  at=T0 + timedelta(minutes=8)))
    got = any_store.calibration_samples(10)
    slice_of = {r.id: r.decision.rung.profile.memory_mib for r in (ran_out, fitted)}
    assert [(g.slice_mib, g.ran_out) for g in got] == [
        (slice_of[fitted.id], False), (slice_of[ran_out.id], True)]
    assert got[0].model_chance == pytest.approx(fitted.decision.model_oom_chance)
    # The newest `limit` first attempts, less those still running: the newest is running.
    assert any_store.calibration_samples(1) == []
    assert [g.ran_out for g in any_store.calibration_samples(2)] == [False]
    # The record as it stood at a time: first attempts made by then, with outcomes known by
    # then (marked at minute 5, recorded at minute 7).
    assert any_store.calibration_samples(10, before=T0 + timedelta(minutes=4)) == []
    assert [(g.slice_mib, g.ran_out) for g in any_store.calibration_samples(
        10, before=T0 + timedelta(minutes=6))] == [(slice_of[ran_out.id], True)]
    assert len(any_store.calibration_samples(10, before=T0 + timedelta(minutes=8))) == 2
    # The next population read carries the record: a young action's next decision weighs it.
    population = at(T0 + timedelta(minutes=9), any_store, catalog).memory_population()
    assert population is not None
    assert population.calibration.seen.get(slice_of[ran_out.id]) == 1


def test_throughput_summary_averages_the_fits_per_profile_and_count(any_store: Store) -> None:
    for eid, tput, count, outcome, at_ in (
            ("a", 10.0, 1, Outcome.SUCCEEDED, T0), ("b", 20.0, 1, Outcome.SUCCEEDED, T0),
            ("c", 5.0, 2, Outcome.SUCCEEDED, T0), ("d", 99.0, 1, Outcome.OOM, T0),
            ("e", 0.0, 1, Outcome.SUCCEEDED, T0), ("old", 1.0, 1, Outcome.SUCCEEDED,
                                                     T0 - timedelta(days=30))):
        any_store.record_execution(replace(execution(eid, at=at_), throughput=tput,
                                           count=count, outcome=outcome), T0)
    rows = sorted((r.action_id, r.gpu_model, r.profile, r.count, r.throughput, r.executions)
                  for r in any_store.throughput_summary(T0 - timedelta(days=1)))
    assert rows == [("act", "A100-40GB", "1g.10gb", 1, pytest.approx(15.0), 2),
                    ("act", "A100-40GB", "1g.10gb", 2, pytest.approx(5.0), 1)]


class CountingReads:
    """Any store, counting its history reads."""

    def __init__(self, inner: Store) -> None:
        self.inner = inner
        self.reads = 0

    def action_samples(self, action_id: str, limit: int) -> list[Sample]:
        self.reads += 1
        return self.inner.action_samples(action_id, limit)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_the_cache_reads_once_and_answers_as_a_fresh_read(any_store: Store,
                                                          catalog: Catalog) -> None:
    """With an ActionCache, Recommend reads an action's history once; after this replica's
    own writes (an execution, an OOM) it answers what an uncached read would."""
    when = T0 + timedelta(hours=1)
    counting = CountingReads(any_store)
    cached = UseCases(counting, catalog=catalog, cache=ActionCache(),  # type: ignore[arg-type]
                      clock=lambda: when)

    def uncached() -> Decision:
        return at(when, any_store, catalog).recommend(req(catalog)).recommendation.decision

    for i in range(5):
        any_store.record_execution(execution(f"e{i}", at=T0 + timedelta(minutes=i)), T0)
    first = cached.recommend(req(catalog)).recommendation
    cached.recommend(req(catalog))
    assert counting.reads == 1 and first.decision.source == "history"
    cached.record_execution(execution("e-new", peak=9000, at=T0 + timedelta(minutes=10)))
    after_run = cached.recommend(req(catalog)).recommendation.decision
    assert after_run == uncached()
    assert after_run.predicted_peak_mib > first.decision.predicted_peak_mib
    cached.next_after_oom(first.id, 9500)
    assert cached.recommend(req(catalog)).recommendation.decision == uncached()


# --- history ---------------------------------------------------------------------------------


def test_history_joins_the_execution_that_ended_last(any_store: Store,
                                                     catalog: Catalog) -> None:
    rec = at(T0, any_store, catalog).recommend(req(catalog)).recommendation
    any_store.record_execution(execution("a-ends-last", peak=4000, rec=rec.id,
                                         at=T0 + timedelta(hours=2)), T0)
    any_store.record_execution(execution("b-ends-first", peak=9900, outcome=Outcome.OOM,
                                         rec=rec.id, at=T0 + timedelta(hours=1)), T0)
    entries, token = any_store.list_history(HistoryFilter(), 10)
    assert token == ""
    assert [(e.recommendation.id, e.outcome, e.peak_memory_mib) for e in entries] == [
        (rec.id, Outcome.SUCCEEDED, 4000)]
    assert entries[0].relative_slack == pytest.approx((9856 - 4000) / 9856)
    fitted, _ = any_store.list_history(HistoryFilter(outcome="fitted"), 10)
    oom, _ = any_store.list_history(HistoryFilter(outcome="oom"), 10)
    assert len(fitted) == 1 and oom == []


def test_history_filters_by_pool_model_and_time(any_store: Store, catalog: Catalog) -> None:
    h100 = replace(req(catalog, "h"), pools=(mk(catalog, "h100", "H100-80GB"),))
    for i in range(4):
        at(T0 + timedelta(hours=i), any_store, catalog).recommend(req(catalog, "a"))
    at(T0 + timedelta(hours=1), any_store, catalog).recommend(h100)

    def listed(**kw: Any) -> list[tuple[str, datetime]]:
        entries, _ = any_store.list_history(HistoryFilter(**kw), 100)
        return [(e.recommendation.action_id, e.recommendation.created_at) for e in entries]

    assert listed(pool_id="h100") == [("h", T0 + timedelta(hours=1))]
    assert listed(gpu_model="H100-80GB") == listed(pool_id="h100")
    assert listed(gpu_model="A100-40GB", created_after=T0 + timedelta(hours=1),
                  created_before=T0 + timedelta(hours=3)) == [
        ("a", T0 + timedelta(hours=2)), ("a", T0 + timedelta(hours=1))]
    assert listed(action_id="nobody") == []
    assert listed(source="prior", outcome="unknown") == listed()


def test_history_pages_cover_everything_once(any_store: Store, catalog: Catalog) -> None:
    for i in range(3):  # several recommendations in the same instant: the id breaks the tie
        for _ in range(3):
            at(T0 + timedelta(seconds=i), any_store, catalog).recommend(req(catalog))
    seen: list[tuple[datetime, str]] = []
    token, pages = "", 0
    while True:
        page, token = any_store.list_history(HistoryFilter(), 2, token)
        pages += 1
        assert len(page) == 2 or not token
        seen += [(e.recommendation.created_at, e.recommendation.id) for e in page]
        if not token:
            break
    assert pages == 5 and len(seen) == 9
    assert seen == sorted(seen, reverse=True) and len(set(seen)) == 9


@pytest.mark.parametrize("token", ["not-a-token", "e30=", "WyJ4Il0="])
def test_a_page_token_the_store_did_not_issue(any_store: Store, catalog: Catalog,
                                              token: str) -> None:
    with pytest.raises(ValueError, match="page_token"):
        at(T0, any_store, catalog).list_history(HistoryFilter(), 10, token)


# --- model versions --------------------------------------------------------------------------


def test_model_versions_newest_first_without_their_parameters(any_store: Store,
                                                              catalog: Catalog) -> None:
    saver = any_store.save_model_version  # type: ignore[attr-defined]
    assert at(T0, any_store, catalog).list_model_versions() == []
    assert saver(model_version("v1", T0, serving=True, promoted=True))
    assert saver(model_version("v2", T0 + timedelta(days=1)))
    assert saver(model_version("t1", T0 + timedelta(days=2), kind="throughput"))
    versions = at(T0, any_store, catalog).list_model_versions()
    assert [(v.version, v.serving, v.promoted) for v in versions] == [
        ("t1", False, False), ("v2", False, False), ("v1", True, True)]
    assert all(v.params == {} for v in versions)
    assert versions[2].metrics == {"oom_rate": 0.01, "median_slack": 0.21}
    assert versions[2].training_window_start == T0 - timedelta(days=7)
    assert [v.version for v in any_store.list_model_versions("memory")] == ["v2", "v1"]


# --- a store that cannot answer ------------------------------------------------------------


@pytest.fixture(params=["sql", "memory"])
def down_store(request: pytest.FixtureRequest) -> Iterator[Store]:
    """A store whose database is gone: PostgreSQL where nothing listens (port 1), and the
    fake switched off."""
    if request.param == "memory":
        fake = InMemoryStore()
        fake.available = False
        yield fake
        return
    with sql_store("postgresql+psycopg://postgres@127.0.0.1:1/none", migrated=False) as store:
        yield store


def test_without_a_database_recommend_degrades_and_the_rest_refuses(
        down_store: Store, catalog: Catalog) -> None:
    use_cases = at(T0, down_store, catalog)
    answer = use_cases.recommend(req(catalog))
    assert not answer.stored
    d = answer.recommendation.decision
    assert d.source == "fallback" and "database unavailable" in d.reason
    assert d.rung.profile.name == "1g.10gb"  # the declared prior still applies
    for refused in (lambda: use_cases.record_execution(execution("e")),
                    lambda: use_cases.next_after_oom("whatever", 0),
                    lambda: use_cases.list_history(HistoryFilter(), 10),
                    lambda: use_cases.list_model_versions()):
        with pytest.raises(StoreUnavailable):
            refused()


# --- the fake and SQL side by side -----------------------------------------------------------


def test_the_fake_answers_a_scripted_history_as_sql_does(tmp_path: Path,
                                                         catalog: Catalog) -> None:
    """One sequence of calls through the SQLite store and through the fake: every answer the
    same but for the generated ids."""
    def run(store: Store) -> list[object]:
        out: list[object] = []
        ids: dict[str, str] = {}
        for i in range(12):
            when = T0 + timedelta(minutes=i)
            uc = at(when, store, catalog)
            action = f"act-{i % 3}"
            rec = uc.recommend(req(catalog, action)).recommendation
            ids[rec.id] = f"r{i}"
            out.append(summary(rec))
            if i % 4 == 1:
                # Later than its parent: rows of one instant are ordered by their random ids.
                rung = at(when + timedelta(seconds=10), store, catalog).next_after_oom(
                    rec.id, 9000.0 + i).recommendation
                ids[rung.id] = f"r{i}-rung"
                out.append(summary(rung))
            else:
                peak = 3000.0 + 500 * i
                out.append(uc.record_execution(execution(
                    f"e{i}", action, peak=peak, rec=rec.id, at=when + timedelta(seconds=30),
                    outcome=Outcome.OOM if peak > 9856 else Outcome.SUCCEEDED)))
                out.append(uc.record_execution(execution(f"e{i}", action)))  # a retry
        for action in ("act-0", "act-1", "act-2"):
            out.append([(s.at, s.peak_mib, s.slice_mib, s.outcome, s.execution_id)
                        for s in store.action_samples(action, 5)])
        out.append([(p.action_id, p.at_s, p.need_mib, p.declared_mib)
                    for p in store.population_samples(20)])
        for outcome in ("", "fitted", "oom", "unknown"):
            token, pages = "", []
            while True:
                page, token = store.list_history(HistoryFilter(outcome=outcome), 4, token)
                pages.append([(ids[e.recommendation.id], e.outcome, e.peak_memory_mib)
                              for e in page])
                if not token:
                    break
            out.append(pages)
        for rec_id, label in sorted(ids.items(), key=lambda kv: kv[1]):
            stored = store.get_recommendation(rec_id)
            assert stored is not None
            out.append((label, summary(stored)))
        return out

    with sql_store(f"sqlite:///{tmp_path / 'side-by-side.db'}") as sql:
        assert run(InMemoryStore()) == run(sql)


class _SlowPopulation(InMemoryStore):
    """A store whose population read waits until the test lets it go."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()
        self.reads = 0

    def population_samples(self, limit: int, before: datetime | None = None
                           ) -> list[PopulationSample]:
        self.reads += 1
        if self.reads > 1:
            assert self.release.wait(10)
        return super().population_samples(limit, before)


def test_the_population_is_read_again_off_the_request_path(catalog: Catalog) -> None:
    """The server's use cases read a stale population in a thread of their own: the caller
    that found it stale is answered at once from the population read before, and the next
    calls use the new one once it is in."""
    store = _SlowPopulation()
    uc = UseCases(store, catalog=catalog, clock=lambda: T0, population_in_background=True)
    for a in range(3):
        for k in range(3):
            uc.record_execution(execution(f"e{a}-{k}", f"act-{a}", peak=3000.0 + 100 * a,
                                          at=T0 - timedelta(hours=k)))
    first = uc.memory_population()  # the first read is inline: nothing to serve meanwhile
    assert first is not None and first.actions == 3 and store.reads == 1
    for k in range(3):
        uc.record_execution(execution(f"new-{k}", "act-3", peak=9000.0,
                                      at=T0 - timedelta(hours=k)))
    started = time.monotonic()
    during = uc.recommend(req(catalog, "act-4"))  # finds it stale: the read waits in a thread
    assert time.monotonic() - started < 5 and store.reads == 2
    assert during.stored and uc.memory_population() is first
    store.release.set()
    uc.wait_for_population()
    now = uc.memory_population()
    assert now is not first and now is not None and now.actions == 4


class _CountedReads(InMemoryStore):
    """Counts the population reads."""

    def __init__(self) -> None:
        super().__init__()
        self.reads = 0

    def population_samples(self, limit: int, before: datetime | None = None
                           ) -> list[PopulationSample]:
        self.reads += 1
        return super().population_samples(limit, before)


def test_the_population_is_read_again_after_a_tenth_of_its_rows(catalog: Catalog) -> None:
    """A read that returned 3,000 rows is made again after 300 more records, not fewer: its
    cost (which grows with its rows) is spread over as many records whatever its size; one of
    30 rows after 3."""
    store = _CountedReads()
    uc = UseCases(store, catalog=catalog, clock=lambda: T0)
    for k in range(30):
        uc.record_execution(execution(f"y{k}", f"young-{k % 6}", at=T0 - timedelta(minutes=k)))
    uc.memory_population()
    assert store.reads == 1
    for k in range(2):
        uc.record_execution(execution(f"z{k}", "young-0", at=T0))
        uc.memory_population()
    assert store.reads == 1
    uc.record_execution(execution("z2", "young-0", at=T0))
    uc.memory_population()
    assert store.reads == 2  # 30 rows read: again after 3 records
    for k in range(3000):
        uc.record_execution(execution(f"b{k}", f"busy-{k % 50}", at=T0 - timedelta(seconds=k)))
    uc.memory_population()
    read = store.reads
    rows = uc._population_rows
    assert rows >= 3000
    for k in range(rows // 10 - 1):
        uc.record_execution(execution(f"c{k}", "busy-0", at=T0))
        uc.memory_population()
    assert store.reads == read  # not every 200 records
    uc.record_execution(execution("c-last", "busy-0", at=T0))
    uc.memory_population()
    assert store.reads == read + 1


def test_a_failed_background_population_read_keeps_the_one_before(catalog: Catalog) -> None:
    store = InMemoryStore()
    uc = UseCases(store, catalog=catalog, clock=lambda: T0, population_in_background=True)
    for k in range(3):
        uc.record_execution(execution(f"e{k}", "act", at=T0 - timedelta(hours=k)))
    first = uc.memory_population()
    assert first is not None
    store.available = False
    uc._records_since_population = 10**9
    assert uc.memory_population() is first
    uc.wait_for_population()
    assert uc.memory_population() is first
