from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from recommender.core import config
from recommender.core.domain import Outcome, Sample
from recommender.core.estimation import (
    FALLBACK,
    HISTORY,
    PRIOR,
    DecayedQuantile,
    DeclaredPrior,
    Evidence,
    MaxOfSamples,
    WithMargin,
    WithMinimum,
    WithOomFloor,
    decay_weight,
    default_estimator,
    learned_need,
    mean_sm_utilisation,
    oom_bumped,
    weighted_quantile,
)

NOW = datetime(2026, 11, 1, tzinfo=UTC)


def ok(peak: float, hours_ago: float = 1.0, sm: float = 10.0) -> Sample:
    return Sample(NOW - timedelta(hours=hours_ago), peak, 9856, Outcome.SUCCEEDED, sm)


def oom(slice_mib: float, hours_ago: float = 1.0, peak: float = 0.0) -> Sample:
    return Sample(NOW - timedelta(hours=hours_ago), peak, slice_mib, Outcome.OOM)


def test_weighted_quantile_matches_unweighted_definition() -> None:
    values = [float(v) for v in range(1, 101)]
    assert weighted_quantile(values, [1.0] * 100, 0.95) == 95.0
    assert weighted_quantile(values, [1.0] * 100, 1.0) == 100.0
    # Weight moves the quantile: one heavy value dominates.
    assert weighted_quantile([1.0, 2.0], [1.0, 99.0], 0.5) == 2.0


def test_decay_halves_every_half_life() -> None:
    hl = timedelta(hours=10)
    assert decay_weight(timedelta(0), hl) == 1.0
    assert decay_weight(hl, hl) == pytest.approx(0.5)
    assert decay_weight(3 * hl, hl) == pytest.approx(0.125)


def test_prior_is_the_declared_figure_and_a_hard_floor() -> None:
    e = DeclaredPrior().estimate(Evidence(NOW, declared_mib=7500))
    assert e is not None and e.mib == 7500 and e.source == PRIOR and e.hard_floor_mib == 7500
    assert DeclaredPrior().estimate(Evidence(NOW)) is None


def test_quantile_needs_enough_weight() -> None:
    est = DecayedQuantile(min_weight=5)
    assert est.estimate(Evidence(NOW, [ok(3000, hours_ago=0)] * 4)) is None
    # Weight, not count: five samples a half-life old weigh 2.5.
    assert est.estimate(Evidence(NOW, [ok(3000, hours_ago=72)] * 5)) is None
    e = est.estimate(Evidence(NOW, [ok(3000, hours_ago=0)] * 5))
    assert e is not None and e.mib == 3000 and e.source == HISTORY


def test_old_samples_weigh_less() -> None:
    # 20 recent small peaks and 20 old big ones: the old ones have decayed away.
    samples = [ok(2000, hours_ago=1) for _ in range(20)]
    samples += [ok(9000, hours_ago=24 * 30) for _ in range(20)]
    e = DecayedQuantile().estimate(Evidence(NOW, samples))
    assert e is not None and e.mib == 2000


def test_oom_is_a_censored_sample_above_its_slice() -> None:
    assert oom_bumped(10000) == pytest.approx(12000)
    assert oom_bumped(100) == pytest.approx(200)  # +100 MiB dominates on tiny slices
    assert oom_bumped(10000, peak_mib=15000) == 15000
    samples = [ok(3000, hours_ago=2 + i) for i in range(9)] + [oom(4864, hours_ago=1)]
    e = DecayedQuantile(quantile=0.95).estimate(Evidence(NOW, samples))
    assert e is not None and e.mib > 4864


def test_the_last_executions_weigh_most() -> None:
    """Memory that grew recently wins over a long, older history at the old level."""
    old = [ok(3000, hours_ago=10 + i) for i in range(20)]
    new = [ok(6000, hours_ago=1 + i) for i in range(4)]
    e = DecayedQuantile(quantile=0.8, half_life_executions=4).estimate(Evidence(NOW, old + new))
    assert e is not None and e.mib == 6000
    flat = DecayedQuantile(quantile=0.8, half_life_executions=0).estimate(
        Evidence(NOW, old + new))
    assert flat is not None and flat.mib == 3000


def test_failed_and_cancelled_runs_say_nothing_about_memory() -> None:
    failed = Sample(NOW, 39000, 40192, Outcome.FAILED)
    e = MaxOfSamples().estimate(Evidence(NOW, [ok(3000), failed]))
    assert e is not None and e.mib == 3000


def test_recent_oom_is_a_hard_floor_even_among_many_successes() -> None:
    samples = [ok(3000, hours_ago=0.5) for _ in range(60)] + [oom(4864, hours_ago=0.9)]
    e = WithOomFloor(DecayedQuantile()).estimate(Evidence(NOW, samples))
    assert e is not None and e.mib > 4864 and e.hard_floor_mib > 4864
    # Outside the window it is just one censored sample among many.
    old = [ok(3000, hours_ago=0.5) for _ in range(60)] + [oom(4864, hours_ago=24 * 30)]
    e = WithOomFloor(DecayedQuantile()).estimate(Evidence(NOW, old))
    assert e is not None and e.mib == 3000


def test_decorators_compose() -> None:
    e = WithMinimum(WithMargin(DeclaredPrior(), 0.5), mib=100).estimate(
        Evidence(NOW, declared_mib=1000))
    assert e is not None and e.mib == 1500
    e = WithMinimum(DeclaredPrior(), mib=config.MIN_ESTIMATE_MIB).estimate(
        Evidence(NOW, declared_mib=10))
    assert e is not None and e.mib == config.MIN_ESTIMATE_MIB


def test_default_chain_prior_then_the_actions_own_model() -> None:
    est = default_estimator()
    assert est.estimate(Evidence(NOW)) is None  # nothing known: the policy falls back
    prior = est.estimate(Evidence(NOW, declared_mib=7500))
    assert prior is not None and prior.source == PRIOR
    assert prior.mib == pytest.approx(7500 * (1 + config.PRIOR_MARGIN))
    # Two samples: the action's own (thin) model, wide: its scale is mostly the population's.
    sparse = est.estimate(Evidence(NOW, [ok(9000), ok(8000)], declared_mib=7500))
    assert sparse is not None and sparse.source == HISTORY and sparse.predictive is not None
    assert sparse.mib > 9000 and sparse.predictive.survival(9000) > 0.05
    # Thirty executions at ~3 GB: the action's own model, even over a larger declaration, and
    # now sure of itself.
    many = [ok(3000 + i, hours_ago=1 + i / 10) for i in range(30)]
    hist = est.estimate(Evidence(NOW, many, declared_mib=7500))
    assert hist is not None and hist.source == HISTORY
    assert hist.quantile == config.ESTIMATE_QUANTILE and hist.predictive is not None
    assert 3000 <= hist.mib <= 3030 * 1.25
    assert hist.predictive.survival(4500) < 0.01 < hist.predictive.survival(3000)
    assert hist.source != FALLBACK


def test_mean_sm_utilisation_ignores_failures() -> None:
    assert mean_sm_utilisation([], NOW) is None
    samples = [ok(1, sm=80), ok(1, sm=60), Sample(NOW, 1, 1, Outcome.FAILED, 5)]
    assert mean_sm_utilisation(samples, NOW) == pytest.approx(70)


def test_a_learned_need_passes_through_its_median_and_its_quantile() -> None:
    """The learned model's two calibrated points draw the need the policy weighs by expected
    cost: half the chance of running out at the median, 1 - q at the quantile, less above."""
    need = learned_need(8000.0, 10000.0, 0.98)
    assert need is not None
    assert need.survival(8000.0) == pytest.approx(0.5, abs=1e-6)
    assert need.survival(10000.0) == pytest.approx(0.02, rel=1e-3)
    assert need.survival(12000.0) < 0.02
    # Without a median below the quantile (a version stored before medians): a quantile alone.
    assert learned_need(0.0, 10000.0, 0.98) is None
    assert learned_need(10000.0, 10000.0, 0.98) is None
