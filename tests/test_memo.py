"""The use cases' decision memo: a request asked again unchanged, on an unchanged history,
population and model, within the time its decision holds, gets the same decision without
deciding it again; anything that could change the decision makes it decide again, and then it
answers what deciding without the memo answers.

The oracle is `UseCases._decide` on the same state (the memo's only shortcut), and where the
state is the store's, a fresh `UseCases` without a cache."""

from __future__ import annotations

import contextlib
import random
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

import pytest

from recommender.core import config
from recommender.core.cache import ActionCache
from recommender.core.catalog import Catalog
from recommender.core.domain import Decision, Outcome, Request
from recommender.core.ladder import LadderExhausted
from recommender.core.options import NoFit
from recommender.core.ports import LearnedPrediction
from recommender.core.usecases import UseCases, _holds_until
from tests.builders import T0, execution, mk, req
from tests.fakes import InMemoryStore


class Clock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


def served(store: InMemoryStore, catalog: Catalog, clock: Clock, **kw: object) -> UseCases:
    """As the server runs them: a history cache, the default estimator (so the memo is on)."""
    return UseCases(store, catalog=catalog, cache=ActionCache(), clock=clock,
                    **kw)  # type: ignore[arg-type]


def oracle(uc: UseCases, request: Request) -> Decision:
    """What deciding again now, on the same state, answers."""
    return uc._decide(request, uc._samples(request.action_id), uc.clock(), "")[0]


def fresh(store: InMemoryStore, catalog: Catalog, when: datetime, request: Request) -> Decision:
    return UseCases(store, catalog=catalog, clock=lambda: when).recommend(
        request).recommendation.decision


@pytest.fixture
def store() -> InMemoryStore:
    s = InMemoryStore()
    for i in range(6):
        s.record_execution(execution(f"e{i}", peak=3000 + 100 * i,
                                     at=T0 + timedelta(minutes=i)), T0)
    return s


def test_a_request_asked_again_is_decided_once_and_each_answer_stored(
        store: InMemoryStore, catalog: Catalog) -> None:
    clock = Clock(T0 + timedelta(hours=1))
    uc = served(store, catalog, clock)
    request = req(catalog)
    answers = [uc.recommend(request), uc.recommend(replace(request, execution_id="x-2")),
               uc.recommend(request)]
    assert (uc.memo_misses, uc.memo_hits) == (1, 2)
    decisions = [a.recommendation.decision for a in answers]
    assert decisions[0] is decisions[1] is decisions[2]
    assert decisions[0].source == "history"
    ids = [a.recommendation.id for a in answers]
    assert len(set(ids)) == 3
    for a in answers:
        got = store.get_recommendation(a.recommendation.id)
        assert a.stored and got is not None
        assert got.execution_id == a.recommendation.execution_id
    assert answers[1].recommendation.execution_id == "x-2"
    # Without a cache every history is a new read: nothing is remembered.
    uncached = UseCases(store, catalog=catalog, clock=clock)
    uncached.recommend(request)
    uncached.recommend(request)
    assert (uncached.memo_hits, uncached.memo_misses, len(uncached._memo or {})) == (0, 0, 0)
    # Another request of the action (other pools, other declared memory) is its own entry.
    other = replace(request, pools=(mk(catalog, "h100", "H100-80GB"),))
    assert uc.recommend(other).recommendation.decision == fresh(store, catalog, clock.now, other)
    assert uc.memo_misses == 2


def test_a_record_or_an_oom_of_this_replica_decides_again(store: InMemoryStore,
                                                          catalog: Catalog) -> None:
    clock = Clock(T0 + timedelta(hours=1))
    uc = served(store, catalog, clock)
    request = req(catalog)
    first = uc.recommend(request).recommendation
    uc.record_execution(execution("e-big", peak=9000, at=T0 + timedelta(minutes=30)))
    after = uc.recommend(request).recommendation.decision
    assert uc.memo_misses == 2
    assert after == oracle(uc, request) == fresh(store, catalog, clock.now, request)
    assert after.predicted_peak_mib > first.decision.predicted_peak_mib
    uc.next_after_oom(first.id, 9500)
    after_oom = uc.recommend(request).recommendation.decision
    assert uc.memo_misses == 3
    assert after_oom == oracle(uc, request) == fresh(store, catalog, clock.now, request)


def test_another_replicas_write_decides_again_once_notified(store: InMemoryStore,
                                                            catalog: Catalog) -> None:
    """The listener's NOTIFY calls `cache.invalidate`: the history is read again and the
    decision follows it. Until then the memo answers what the cached history says, as the
    cache alone did."""
    clock = Clock(T0 + timedelta(hours=1))
    cache = ActionCache()
    uc = UseCases(store, catalog=catalog, cache=cache, clock=clock)
    request = req(catalog)
    before = uc.recommend(request).recommendation.decision
    store.record_execution(execution("elsewhere", peak=9500, at=T0 + timedelta(minutes=40)), T0)
    assert uc.recommend(request).recommendation.decision is before  # not yet notified
    cache.invalidate(request.action_id)
    now = uc.recommend(request).recommendation.decision
    assert now != before and now == oracle(uc, request)
    assert any(s.execution_id == "elsewhere" for s in uc._samples(request.action_id))
    assert (uc.memo_hits, uc.memo_misses) == (1, 2)


@dataclass(frozen=True)
class Predictor:
    version: str
    mib: float
    quantile: float = 0.95

    def predict(self, action_id: str, features: Mapping[str, float],
                action_level_mib: float | None) -> LearnedPrediction | None:
        return LearnedPrediction(self.mib, "pooled")


def test_a_promoted_model_decides_again(catalog: Catalog) -> None:
    store = InMemoryStore()
    serving: list[Predictor] = [Predictor("v1", 4000.0)]
    clock = Clock(T0)
    uc = served(store, catalog, clock, learned=lambda: serving[0])
    request = replace(req(catalog, "new-action"), features={"batch": 8.0})
    first = uc.recommend(request).recommendation.decision
    assert uc.recommend(request).recommendation.decision is first
    assert first.source == "model" and first.model_version == "v1"
    serving[0] = Predictor("v2", 12000.0)
    second = uc.recommend(request).recommendation.decision
    assert second.model_version == "v2" and second.predicted_peak_mib > first.predicted_peak_mib
    assert second == oracle(uc, request)
    assert (uc.memo_hits, uc.memo_misses) == (1, 2)


def test_an_oom_leaving_the_floors_window_decides_again(store: InMemoryStore,
                                                        catalog: Catalog) -> None:
    died = T0 + timedelta(minutes=30)
    store.record_execution(execution("oom", peak=9000, outcome=Outcome.OOM, at=died), T0)
    clock = Clock(died + timedelta(minutes=10))
    uc = served(store, catalog, clock)
    request = req(catalog)
    floored = uc.recommend(request).recommendation.decision
    clock.now = died + config.OOM_FLOOR_WINDOW  # still within: the same decision
    assert uc.recommend(request).recommendation.decision is floored
    clock.now = died + config.OOM_FLOOR_WINDOW + timedelta(seconds=1)
    later = uc.recommend(request).recommendation.decision
    assert (uc.memo_hits, uc.memo_misses) == (1, 2)
    assert later == oracle(uc, request) == fresh(store, catalog, clock.now, request)
    samples = uc._samples(request.action_id)
    assert _holds_until(samples, died + timedelta(minutes=10)) == died + config.OOM_FLOOR_WINDOW
    assert _holds_until(samples, clock.now) == datetime.max.replace(tzinfo=UTC)
    clock.now = died  # a clock that went back: decided again, never answered from later
    assert uc.recommend(request).recommendation.decision == oracle(uc, request)
    assert uc.memo_misses == 3


def test_a_population_read_again_decides_again(store: InMemoryStore, catalog: Catalog,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(config, "POPULATION_REFRESH_S", -1.0)  # read on every request
    uc = served(store, catalog, Clock(T0 + timedelta(hours=1)))
    request = req(catalog)
    for _ in range(3):
        uc.recommend(request)
    assert (uc.memo_hits, uc.memo_misses) == (0, 3)


def test_the_memo_answers_what_deciding_again_answers_along_a_random_history(
        catalog: Catalog) -> None:
    """Records (some OOMs), OOMs through NextAfterOom, other replicas' writes, notifications
    and time passing, on two actions and three requests: each answer is the oracle's."""
    rng = random.Random(14)
    store = InMemoryStore()
    clock = Clock(T0)
    cache = ActionCache()
    uc = UseCases(store, catalog=catalog, cache=cache, clock=clock)
    pools = (mk(catalog),)
    requests = [Request("a", "", pools, declared_memory_mib=7500),
                Request("a", "", pools, workers=2, declared_memory_mib=7500),
                Request("b", "", (mk(catalog, "h100", "H100-80GB"),), declared_memory_mib=20000)]
    last: dict[str, str] = {}
    for step in range(300):
        clock.now += timedelta(minutes=rng.choice((0, 0, 1, 7, 25, 61)))
        action = rng.choice("ab")
        op = rng.random()
        if op < 0.25:
            outcome = Outcome.OOM if rng.random() < 0.2 else Outcome.SUCCEEDED
            uc.record_execution(execution(f"r{step}", action, peak=rng.uniform(2000, 12000),
                                          outcome=outcome, at=clock.now, rec=last.get(action, "")))
        elif op < 0.3 and action in last:
            with contextlib.suppress(LadderExhausted):  # at the top: not what is tested
                uc.next_after_oom(last.pop(action), rng.uniform(0, 12000))
        elif op < 0.35:
            store.record_execution(execution(f"o{step}", action, peak=rng.uniform(2000, 12000),
                                             at=clock.now), clock.now)
            if rng.random() < 0.7:
                cache.invalidate(action)
        request = rng.choice([r for r in requests if r.action_id == action])
        try:
            answer = uc.recommend(request).recommendation
        except NoFit:  # an OOM in the largest slice: no pool fits now, and none would
            with pytest.raises(NoFit):
                oracle(uc, request)
            continue
        last[action] = answer.id
        assert answer.decision == oracle(uc, request), step
    assert uc.memo_hits > 50 and uc.memo_misses > 50


def test_the_message_of_a_decision_seen_before_is_the_one_built_anew(
        store: InMemoryStore, catalog: Catalog) -> None:
    from recommender.rpc.responses import answer_to_pb, recommendation_to_pb

    uc = served(store, catalog, Clock(T0 + timedelta(hours=1)))
    request = req(catalog)
    first, second = (uc.recommend(request).recommendation for _ in range(2))
    assert first.decision is second.decision
    for rec, stored in ((first, True), (second, False), (second, True)):
        assert answer_to_pb(rec, stored=stored) == recommendation_to_pb(rec, stored=stored)
    assert answer_to_pb(second).recommendation_id == second.id != first.id


def test_ids_are_random_version_4_uuids_unique_across_blocks_and_forks() -> None:
    import os
    import uuid

    from recommender.core import ids

    made = [ids.new_id() for _ in range(3 * ids.ID_BLOCK + 5)]
    assert len(set(made)) == len(made)
    for x in made[:: ids.ID_BLOCK // 2]:
        u = uuid.UUID(x)
        assert str(u) == x and u.version == 4 and u.variant == uuid.RFC_4122
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its next id must not be the parent's next one
        os.write(write, ids.new_id().encode())
        os._exit(0)
    os.waitpid(pid, 0)
    assert os.read(read, 64).decode() != ids.new_id()
