"""Work made cheaper on the serving path must give the very same values: the online refit for
a new prior scale (`ActionModels` keeps each recently fitted action's designs before the prior
enters, `fits.Core`) against a refit from scratch on random histories, a changed history fitted
again; the expected costs with each tail computed once; the population's times in seconds."""

from __future__ import annotations

import math
import random
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import numpy as np

from recommender.core.catalog import Catalog
from recommender.core.domain import Outcome, Sample
from recommender.core.fits import ActionModel
from recommender.core.online import ActionModels, common_features, fit_action

NOW = datetime(2026, 11, 1, tzinfo=UTC)


def _history(rng: random.Random, n: int, features: bool) -> list[Sample]:
    out = []
    step = rng.randint(0, 5)  # the newest few at a new level: a level change to weigh
    for i in range(n):
        batch = float(2 ** rng.randint(0, 6))
        outcome = Outcome.OOM if rng.random() < 0.1 else (
            Outcome.FAILED if rng.random() < 0.05 else Outcome.SUCCEEDED)
        feats = ({"batch_size": batch, "input_mb": rng.uniform(1, 50)} if features else {})
        if features and rng.random() < 0.05:
            del feats["input_mb"]  # a run that lacked an input
        peak = (2000 + 120 * batch) * math.exp(rng.gauss(0, 0.1)) * (1.6 if i < step else 1)
        out.append(Sample(NOW - timedelta(minutes=rng.uniform(1, 30) * (i + 1)), peak, 19712,
                          outcome, execution_id=f"x{i}", features=feats))
    return out


def _assert_same(a: ActionModel | None, b: ActionModel | None) -> None:
    if a is None or b is None:
        assert a is b
        return
    assert [f.design for f in a.fits] == [f.design for f in b.fits]
    for x, y in zip(a.fits, b.fits, strict=True):
        assert np.array_equal(x.coef, y.coef) and np.array_equal(x.r_inv, y.r_inv)
        assert np.array_equal(x.older_losses, y.older_losses)
        # Exactly equal, not close: the same operations on the same values.
        assert (x.scale, x.df, x.loss, x.samples, x.mean_level_mib, x.changes) == (
            y.scale, y.df, y.loss, y.samples, y.mean_level_mib, y.changes)


def test_refit_for_a_new_prior_scale_equals_a_refit_from_scratch() -> None:
    rng = random.Random(11)
    for _ in range(150):
        samples = _history(rng, rng.randint(1, 520), features=rng.random() < 0.5)
        names = common_features(samples)
        first, second = rng.uniform(0.03, 0.6), rng.uniform(0.03, 0.6)
        models = ActionModels()
        _assert_same(models.get("a", samples, first), fit_action(samples, names, first))
        assert (models.fitted, models.refinished) == (1, 0)
        if round(first, 3) == round(second, 3):
            second += 0.01  # the same to the key's rounding: the model kept is served
        refinished = models.get("a", samples, second)
        assert (models.fitted, models.refinished) == (1, 1)
        _assert_same(refinished, fit_action(samples, names, second))


def test_a_new_history_is_fitted_again_and_the_cores_are_bounded() -> None:
    rng = random.Random(3)
    samples = _history(rng, 40, features=False)
    models = ActionModels(max_cores=2)
    models.get("a", samples, 0.1)
    newer = [Sample(NOW, 9000.0, 19712, Outcome.SUCCEEDED, execution_id="new"), *samples]
    _assert_same(models.get("a", newer, 0.2), fit_action(newer, (), 0.2))
    assert (models.fitted, models.refinished) == (2, 0)
    models.get("b", samples, 0.1)
    models.get("c", samples, 0.1)  # "a" is the oldest of three: its cores go
    _assert_same(models.get("a", newer, 0.3), fit_action(newer, (), 0.3))
    assert (models.fitted, models.refinished) == (5, 0)
    _assert_same(models.get("c", samples, 0.3), fit_action(samples, (), 0.3))
    assert models.refinished == 1
    off = ActionModels(max_cores=0)
    off.get("a", samples, 0.1)
    _assert_same(off.get("a", samples, 0.2), fit_action(samples, (), 0.2))
    assert (off.fitted, off.refinished) == (2, 0)


def test_expected_costs_with_each_tail_computed_once_equal_the_plain_sum() -> None:
    from recommender.core.catalog import load_catalog
    from recommender.core.policy import by_expected_cost
    from recommender.core.predictive import Predictive, expected_cost, oom_wait_mib

    model = load_catalog().resolve("A100-40GB")
    assert model is not None
    profiles = list(model.profiles)
    sizes = sorted({float(p.memory_mib) for p in profiles})
    rng = random.Random(5)
    for _ in range(200):
        need = Predictive(loc=math.log(rng.uniform(2000, 40000)), scale=rng.uniform(0.01, 0.5),
                          df=rng.uniform(2, 30),
                          changes=((0.3, math.log(rng.uniform(2000, 40000)), 0.2),)
                          if rng.random() < 0.3 else ())
        floor = rng.choice([0.0, 9000.0])
        _, costs = by_expected_cost(profiles, need, floor, 40960)
        assert costs == {int(s): expected_cost(sizes, i, need, oom_wait_mib(40960))
                         for i, s in enumerate(sizes) if s >= floor}


def test_population_times_are_the_seconds_of_an_aware_utc_time() -> None:
    from datetime import timezone

    from recommender.store.across import _NAIVE_EPOCH
    from recommender.store.mapping import utc

    rng = random.Random(8)
    for _ in range(20000):
        naive = datetime(1990, 1, 1) + timedelta(microseconds=rng.randrange(10 ** 17))
        assert (naive - _NAIVE_EPOCH).total_seconds() == utc(naive).timestamp()
        zone = timezone(timedelta(hours=rng.randint(-12, 12)))
        aware = naive.replace(tzinfo=UTC).astimezone(zone)
        assert aware.timestamp() == utc(aware).timestamp()


def test_the_first_answer_of_a_decision_is_built_and_kept_unchanged_as_the_next_template(
        catalog: Catalog) -> None:
    from recommender.rpc.responses import answer_to_pb, recommendation_to_pb
    from tests.builders import T0, execution, req
    from tests.fakes import InMemoryStore
    from tests.test_memo import Clock, served

    store = InMemoryStore()
    for i in range(6):
        store.record_execution(execution(f"e{i}", peak=3000 + 100 * i,
                                         at=T0 + timedelta(minutes=i)), T0)
    uc = served(store, catalog, Clock(T0 + timedelta(hours=1)))
    request = req(catalog)  # one object: the memo knows pools by identity
    first, second, third = (uc.recommend(request).recommendation for _ in range(3))
    assert first.decision is second.decision is third.decision
    answered = answer_to_pb(first, stored=False)  # a decision never answered: built
    assert answered == recommendation_to_pb(first, stored=False)
    for rec, stored in ((second, True), (third, False)):
        assert answer_to_pb(rec, stored=stored) == recommendation_to_pb(rec, stored=stored)
    # The message answered first is the template: copied, never changed.
    assert answered == recommendation_to_pb(first, stored=False)
    assert answered.SerializeToString() == recommendation_to_pb(
        first, stored=False).SerializeToString()


def test_the_sm_use_a_decision_weighs_is_the_mean_wherever_the_mean_can_matter() -> None:
    from dataclasses import replace

    from recommender.core import config
    from recommender.core.estimation import mean_sm_utilisation
    from recommender.core.usecases import _sm_weighed

    threshold = config.SM_HUNGRY_UTILISATION
    rng = random.Random(4)
    for _ in range(400):
        top = rng.choice([threshold * 0.5, threshold * (1 - 1e-7), threshold, threshold * 1.5])
        samples = [replace(s, sm_utilization=rng.choice([0.0, rng.uniform(0, top), top]))
                   for s in _history(rng, rng.randint(0, 60), features=False)]
        now = NOW + timedelta(hours=rng.uniform(-1, 48))
        mean, weighed = mean_sm_utilisation(samples, now), _sm_weighed(samples, now)
        if weighed is not None:
            assert weighed == mean
        elif mean is not None:  # what the decision reads of it: below, and not close to it
            assert mean < threshold
            assert not math.isclose(mean, threshold, rel_tol=1e-9)


def test_the_refit_orders_samples_newest_first_keeping_ties_in_their_order() -> None:
    rng = random.Random(9)
    for _ in range(60):
        samples = _history(rng, rng.randint(2, 80), features=rng.random() < 0.5)
        # Many samples of one time, in a shuffled order.
        samples = [replace(s, at=NOW - timedelta(minutes=rng.randint(0, 5))) for s in samples]
        rng.shuffle(samples)
        names = common_features(samples)
        newest_first = sorted(samples, key=lambda s: -s.at_s)  # stable: ties keep their order
        _assert_same(fit_action(samples, names, 0.2), fit_action(newest_first, names, 0.2))
