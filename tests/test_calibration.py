"""The population's record of young actions' first attempts, slice size by slice size
(`core.calibration`), and how the policy weighs a young action's chances by it."""

from __future__ import annotations

import math

import numpy as np
import pytest

from recommender.core import config
from recommender.core.calibration import EMPTY, CalibrationSample, SliceCalibration
from recommender.core.catalog import Catalog
from recommender.core.domain import Request
from recommender.core.estimation import HISTORY, Estimate
from recommender.core.policy import recommend
from recommender.core.predictive import Predictive, SeenPeaks
from tests.builders import mk


def record(mib: int, stated_each: float, firsts: int, ran_out: int) -> list[CalibrationSample]:
    return [CalibrationSample(mib, stated_each, k < ran_out) for k in range(firsts)]


def test_the_factor_is_seen_over_stated_shrunk_towards_one() -> None:
    prior = config.CALIBRATION_PRIOR
    cal = SliceCalibration.of(record(40448, 0.01, 700, 24) + record(47488, 0.02, 650, 0))
    assert cal.stated[40448] == pytest.approx(7.0) and cal.seen[40448] == 24
    assert cal.factor(40448) == pytest.approx((24 + prior) / (7 + prior))
    assert cal.factor(47488) == pytest.approx(prior / (13 + prior))
    assert cal.factor(40448) > 2 and cal.factor(47488) < 0.3
    assert cal.factor(9984) == 1.0 and EMPTY.factor(40448) == 1.0
    few = SliceCalibration.of(record(20096, 0.01, 50, 1))  # 1 seen where 0.5 were stated
    assert few.factor(20096) == pytest.approx((1 + prior) / (0.5 + prior))
    assert 1.0 < few.factor(20096) < 1.5  # one OOM moves a size with little record, not doubles it


def test_a_calibrated_tail_is_the_models_times_the_factor_and_never_rises_with_the_size(
) -> None:
    need = Predictive(loc=math.log(36_000), scale=0.08, df=6.0)
    sizes = [20096.0, 40448.0, 47488.0, 81152.0]
    up_then_down = SliceCalibration.of(record(40448, 0.01, 300, 9) + record(47488, 0.1, 50, 0))
    tail = up_then_down.tail(need, sizes)
    assert tail.survival(40448) == pytest.approx(
        min(1.0, need.survival(40448) * up_then_down.factor(40448)))
    assert tail.survival(40448) > need.survival(40448)
    assert tail.survival(47488) < need.survival(47488)
    # A size lowered below the one under it stays there; one raised above it is held down.
    raised_above = SliceCalibration.of(record(81152, 0.0001, 100, 40))
    held = raised_above.tail(need, sizes)
    chances = [held.survival(s) for s in sizes]
    assert chances == sorted(chances, reverse=True)
    assert held.survival(81152) <= held.survival(47488)
    assert held.survival(30000.0) == need.survival(30000.0)  # not one of the sizes: the model's


A100_80 = "A100-80GB"
M40 = 40192
"""3g.40gb on an A100-80GB, in MiB."""


def young(mib: float, scale: float = 0.1) -> Estimate:
    return Estimate(mib=mib, source=HISTORY, quantile=0.95, detail="test",
                    predictive=Predictive(loc=math.log(mib), scale=scale, df=5.0))


def test_a_young_action_takes_the_larger_slice_where_first_attempts_ran_out_more_often(
        catalog: Catalog) -> None:
    """A need of about 30 GB with a 3 % chance past 40 GB stays on 3g.40gb by its model; the
    record of first attempts that ran out there three times as often as stated moves it to the
    card, says why, and keeps the model's own chance beside the stated one."""
    request = Request("act", "", (mk(catalog, model=A100_80),))
    estimate = young(31_000, scale=0.14)
    alone = recommend(request, estimate)
    assert alone.rung.profile.memory_mib == M40 and alone.model_oom_chance is None
    assert 0.01 < alone.oom_chance < 0.08
    quiet = recommend(request, estimate, calibration=EMPTY)
    assert quiet.rung == alone.rung and quiet.oom_chance == pytest.approx(alone.oom_chance)
    assert quiet.model_oom_chance == pytest.approx(alone.oom_chance)
    assert "its model says" not in quiet.reason
    record_ = SliceCalibration.of(record(M40, 0.01, 600, 30))
    moved = recommend(request, estimate, calibration=record_)
    assert moved.rung.profile.memory_mib > M40
    assert moved.model_oom_chance is not None and moved.model_oom_chance < 0.01
    # And the other way: a slice whose first attempts ran out far less often than stated.
    bold = young(36_000, scale=0.08)
    assert recommend(request, bold).rung.profile.memory_mib > M40
    never = SliceCalibration.of(record(M40, 0.05, 400, 0))
    lowered = recommend(request, bold, calibration=never)
    assert lowered.rung.profile.memory_mib == M40
    assert lowered.model_oom_chance is not None and lowered.oom_chance < lowered.model_oom_chance
    assert "its model says" in lowered.reason and "ran out 0 times" in lowered.reason


def counted_heavy_mode(heavy: int = 3) -> Predictive:
    """A young action whose level says about 1 % past 40 GB and whose own twelve runs passed
    it `heavy` times (a heavier mode): three raise the chance there to about 14 %."""
    peaks = np.array([29_000.0, 42_500.0, 28_800.0, 29_300.0, 29_100.0, 42_700.0, 28_900.0,
                      29_200.0, 29_000.0, 42_300.0, 28_700.0, 29_100.0])  # newest first
    lighter = np.flatnonzero(peaks > 40_000)[heavy:]
    peaks[lighter] = 29_000.0
    seen = SeenPeaks.of(peaks, np.ones_like(peaks), prior=config.ONLINE_SEEN_PRIOR,
                        recent=config.ONLINE_SEEN_RECENT)
    return Predictive(loc=math.log(30_000), scale=0.1, df=6.0, seen=seen)


def test_the_record_corrects_the_model_not_the_actions_own_count() -> None:
    """The record's factor multiplies the model's chance; the action's count of its own runs
    past the size then has its say on that, as it does on the model's. A record that says the
    young actions' t was too timid at 40 GB does not scale down a share the action counted."""
    need = counted_heavy_mode()
    model = need.model_survival(M40)
    assert 0.005 < model < 0.03 and need.survival(M40) > 0.12
    timid = SliceCalibration.of(record(M40, 0.05, 400, 0))
    assert timid.factor(M40) < 0.1
    tail = timid.tail(need, [20096.0, float(M40), 81152.0])
    assert tail.model(M40) == pytest.approx(model)  # what the record is kept from
    assert tail.survival(M40) == pytest.approx(need.counted(M40, model * timid.factor(M40)))
    assert tail.survival(M40) > 0.12 > need.survival(M40) * timid.factor(M40)
    # Without a count, as before: the model's chance times the factor.
    plain = Predictive(loc=math.log(30_000), scale=0.1, df=6.0)
    assert timid.tail(plain, [float(M40)]).survival(M40) == pytest.approx(
        plain.survival(M40) * timid.factor(M40))


def test_a_young_action_whose_runs_passed_a_slice_leaves_it_whatever_the_record_says(
        catalog: Catalog) -> None:
    """Three of twelve runs past 40 GB: 14 % likely there, above the 8.3 % from which the card
    is worth it, and a record of young actions that ran out there far less often than stated
    does not bring it back; the decision keeps the model's own chance as its record's."""
    request = Request("act", "", (mk(catalog, model=A100_80),))
    need = counted_heavy_mode()
    estimate = Estimate(mib=31_000, source=HISTORY, quantile=0.95, detail="test",
                        predictive=need)
    timid = SliceCalibration.of(record(M40, 0.05, 400, 0))
    decided = recommend(request, estimate, calibration=timid)
    assert decided.rung.profile.memory_mib > M40
    assert decided.model_oom_chance is not None
    assert decided.model_oom_chance < 0.001  # the card's, by the model alone


def test_the_reason_names_the_record_only_where_its_factor_moved_the_chance(
        catalog: Catalog) -> None:
    """One run in twelve past 40 GB raises the chance there to about 5 %, below the card's
    8.3 %: the reason says the action's runs did it, and says nothing of a record that has no
    first attempt at that size (its factor 1)."""
    request = Request("act", "", (mk(catalog, model=A100_80),))
    need = counted_heavy_mode(heavy=1)
    estimate = Estimate(mib=31_000, source=HISTORY, quantile=0.95, detail="test",
                        predictive=need)
    decided = recommend(request, estimate, calibration=EMPTY)
    assert decided.rung.profile.memory_mib == M40
    assert decided.oom_chance > 2 * need.model_survival(M40)
    assert "of its runs" in decided.reason and "its model says" not in decided.reason
