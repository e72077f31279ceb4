from __future__ import annotations

import math
import threading
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from recommender.core import config
from recommender.core.catalog import Catalog
from recommender.core.domain import Execution, Node, Outcome, Request, Strategy, ThroughputRow
from recommender.core.placement import GpuState
from recommender.core.policy import recommend
from recommender.core.throughput import Population, ThroughputSample, fit_curve, measured_levels
from recommender.core.throughput_population import PopulationCache, build, memory_slices_by_size
from recommender.core.usecases import UseCases
from recommender.store import SqlStore
from tests.builders import est, mk

PARVA = ("1g.10gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb")
A100 = "A100-80GB"
MEM = {A100: {1: 1, 2: 2, 3: 4, 4: 4, 7: 8}}
"""Memory slices of the A100-80GB's base profiles by compute slices (3g and 4g share 4)."""


def power(a: float, b: float, sizes: tuple[int, ...] = (1, 7), model: str = A100,
          count: int = 1) -> list[ThroughputSample]:
    return [ThroughputSample(model, c, a * c ** b, count) for c in sizes]


def table(values: dict[int, float], model: str = A100) -> list[ThroughputSample]:
    return [ThroughputSample(model, c, t) for c, t in values.items()]


def low_step(ratios: list[float]) -> float:
    """The population's step as a ratio: the low quantile of the log ratios it is read at."""
    return math.exp(float(np.quantile([math.log(r) for r in ratios],
                                      config.THROUGHPUT_POPULATION_QUANTILE)))


# --- measured sizes and interpolation -----------------------------------------------------

def test_measured_sizes_are_exact_and_one_slow_run_does_not_move_them() -> None:
    samples = [*power(100, 0.5, (1, 1, 1, 4, 4, 4)), ThroughputSample(A100, 1, 5.0)]
    curve = fit_curve(samples)
    assert curve is not None
    assert curve.predict(A100, 1) == pytest.approx(100)
    assert curve.predict(A100, 4) == pytest.approx(200)
    assert curve.source(A100, 4) == "measured"


def test_interpolation_is_piecewise_in_log_slices() -> None:
    """Between two measured sizes, a power law through the neighbours: not one law for all."""
    curve = fit_curve(table({1: 100, 2: 190, 7: 200}))
    assert curve is not None
    # 1 -> 2 nearly linear, 2 -> 7 flat: 3 and 4 sit on the flat piece, not on a fitted law.
    assert curve.predict(A100, 3) == pytest.approx(190 * (200 / 190) ** (math.log(1.5)
                                                                       / math.log(3.5)))
    assert curve.source(A100, 3) == "interpolated"


BOUND = "interpolated as serial, compute and bandwidth time"


def test_interpolation_bounds_serial_compute_and_bandwidth_time() -> None:
    """Measured on 2g and 7g. An item's time is a serial part plus a compute part (over the
    compute slices) plus a bandwidth part (over the memory slices); which split an action has,
    two sizes that grow compute and memory alike cannot tell, so 3g.40gb (3/7 of the compute,
    half the bandwidth) is read at the most cautious split, half a measurement's noise low.
    Compute-bound truth: that is the truth itself. Bandwidth-bound truth (3g as fast as 4g):
    below it, yet above the lower of the two log readings."""
    def bound(time: dict[int, float]) -> tuple[float, float]:
        own = {c: 1000 / t for c, t in time.items()}
        curve = fit_curve(table({2: own[2], 7: own[7]}), memory_slices=MEM)
        assert curve is not None and curve.source(A100, 3) == BOUND
        return curve.predict(A100, 3) or 0.0, own[3]

    margin = math.exp(-config.THROUGHPUT_NOISE / 2)
    m = MEM[A100]
    predicted, truth = bound({c: 0.2 + 1 / c for c in (2, 3, 7)})
    assert predicted == pytest.approx(truth * margin)
    predicted, truth = bound({c: 0.2 + 1 / m[c] for c in (2, 3, 7)})
    # The lower of the compute and the compute-and-memory log readings, used before.
    t2, t7 = 1000 / (0.2 + 1 / 2), 1000 / (0.2 + 1 / 8)
    old = min(t2 * (t7 / t2) ** w for w in (math.log(3 / 2) / math.log(7 / 2),
                                             math.log(12 / 4) / math.log(56 / 4)))
    assert old < predicted < truth


def test_a_borrowed_size_never_reads_below_what_the_action_s_own_sizes_allow() -> None:
    """Measured on 2g and 7g (x3). Two actions of the same 2g -> 7g step ran 3g too, only
    1.2x faster than 2g there: borrowed, 3g would read barely above 2g. But no serial,
    compute and bandwidth split through this action's own 2g and 7g is that slow at 3g, so
    the action's own bound is read instead; a borrowed reading above it stands."""
    low = population(p={2: 100, 3: 120, 7: 300}, q={2: 200, 3: 240, 7: 600})
    curve = fit_curve(table({2: 1000, 7: 3000}), low, "a", MEM)
    alone = fit_curve(table({2: 1000, 7: 3000}), memory_slices=MEM)
    assert curve is not None and alone is not None
    assert curve.source(A100, 3) == alone.source(A100, 3) == BOUND
    assert curve.predict(A100, 3) == pytest.approx(alone.predict(A100, 3) or 0.0)
    assert (curve.predict(A100, 3) or 0.0) > 1200
    high = population(p={2: 100, 3: 160, 7: 300}, q={2: 200, 3: 320, 7: 600})
    borrowed = fit_curve(table({2: 1000, 7: 3000}), high, "a", MEM)
    assert borrowed is not None and borrowed.source(A100, 3) == "2 similar actions"
    assert (borrowed.predict(A100, 3) or 0.0) > (alone.predict(A100, 3) or 0.0)


def test_interpolation_takes_the_lower_of_compute_and_memory_readings() -> None:
    """Slower on 7g than on 3g, which no serial, compute and bandwidth split allows: the
    reading by compute slices and the one by compute and memory slices together (4g.40gb has
    no more memory than 3g.40gb), the lower taken."""
    curve = fit_curve(table({3: 500, 7: 450}), memory_slices=MEM)
    by_compute = 500 * 0.9 ** (math.log(4 / 3) / math.log(7 / 3))
    by_both = 500 * 0.9 ** (math.log(16 / 12) / math.log(56 / 12))
    assert by_compute < by_both
    assert curve is not None and curve.predict(A100, 4) == pytest.approx(by_compute)
    assert curve.source(A100, 4) == "interpolated"
    # Without memory slices known, compute slices alone.
    plain = fit_curve(table({3: 500, 7: 1000}))
    assert plain is not None and plain.predict(A100, 4) == pytest.approx(
        500 * 2 ** (math.log(4 / 3) / math.log(7 / 3)))


def test_one_size_extrapolates_cautiously() -> None:
    curve = fit_curve(power(100, 0.6, (2,)))
    assert curve is not None
    t2 = 100 * 2 ** 0.6
    down, up = config.THROUGHPUT_EXPONENT_DOWN, config.THROUGHPUT_EXPONENT_UP
    assert curve.predict(A100, 1) == pytest.approx(t2 * 0.5 ** down)
    assert curve.predict(A100, 4) == pytest.approx(t2 * 2 ** up)
    assert "default exponent" in curve.describe(A100, 4)


def test_no_measurements_no_curve_and_other_models_are_cautious() -> None:
    assert fit_curve([]) is None
    assert fit_curve([ThroughputSample(A100, 1, 0.0)]) is None
    curve = fit_curve(power(100, 0.5, (1, 4)) + power(300, 0.5, (1, 4), "H100-80GB"))
    assert curve is not None
    assert curve.predict("H100-80GB", 1) == pytest.approx(300)
    assert curve.predict("H200-141GB", 1) == pytest.approx(100)  # the slower one
    assert curve.source("H200-141GB", 1) == "guessed from another GPU model"


# --- the shape learned across actions --------------------------------------------------

def population(**actions: dict[int, float]) -> Population:
    return Population.from_samples((a, s) for a, values in actions.items()
                                   for s in table(values))


def test_a_size_never_run_is_borrowed_from_actions_of_the_same_shape() -> None:
    # Three actions that scale like ours between 1g and 7g (x6.2), measured at 3g too; one
    # flat action (x1.0) that also ran on 3g, much faster there relative to 7g.
    pop = population(
        b={1: 10, 3: 31, 7: 62}, c={1: 20, 3: 60, 7: 124}, d={1: 5, 3: 15.5, 7: 31.5},
        flat={1: 100, 3: 101, 7: 100},
    )
    curve = fit_curve(table({1: 200, 7: 1240}), pop, "a")
    assert curve is not None
    # Interpolating 1 -> 7 would say 200 x 6.2^(log 3 / log 7) = 560. Anchored at 7g, the
    # nearest size both ran, b says 3g gives 1/2 of 7g, c 60/124, d 15.5/31.5, each less its
    # mismatch at 1g but never less than a measurement's noise (3 %, more than d's 1.6 %):
    # the most cautious is c, 1240 x 60/124 = 600, less 3 %.
    noise = math.exp(-config.THROUGHPUT_NOISE)
    assert curve.predict(A100, 3) == pytest.approx(600 * noise)
    assert "3 similar actions" in curve.describe(A100, 3)
    # The flat action never matched: alone it would have predicted 200 * 1.01 at 3g.
    lone = fit_curve(table({1: 200, 7: 1240}), population(flat={1: 100, 3: 101, 7: 100}), "a")
    assert lone is not None and lone.source(A100, 3) == "interpolated"


def test_an_action_never_borrows_from_itself_nor_from_one_neighbour() -> None:
    pop = population(a={1: 200, 3: 900, 7: 1240}, b={1: 10, 3: 31, 7: 62})
    curve = fit_curve(table({1: 200, 7: 1240}), pop, "a")
    assert config.THROUGHPUT_MIN_NEIGHBOURS == 2
    assert curve is not None and curve.source(A100, 3) == "interpolated"


def test_extrapolation_from_one_size_uses_the_population_ratio() -> None:
    """Measured on 3g only: the step up to 7g is a low quantile of what other actions gained
    between 3g and 7g (actions that also ran 1g: none of them is of this one's size class)."""
    ratios = [1.2, 1.5, 1.7, 1.8, 1.9, 2.0]
    pop = population(**{f"o{i}": {1: 40, 3: 100, 7: 100 * r} for i, r in enumerate(ratios)})
    curve = fit_curve(table({3: 1000}), pop, "a")
    assert curve is not None
    q = low_step(ratios)
    assert curve.predict(A100, 7) == pytest.approx(1000 * q)
    assert curve.predict(A100, 7) < 1000 * 1.5  # biased low: missing the target is worse
    assert "as other actions scale" in curve.describe(A100, 7)
    few = fit_curve(table({3: 1000}), population(o={3: 50, 7: 100}), "a")
    assert few is not None and "default exponent" in few.describe(A100, 7)


def test_a_flattering_population_step_down_is_not_taken() -> None:
    """Measured on 7g only, the step down to 3g: the actions that ran both are those earlier
    choices sent to 3g, the flat curves. A low quantile of their step would predict a steep
    curve nearly as fast on 3g as on 7g; the default exponent's loss is taken instead. A step
    no kinder than the default (the population really does lose that much) is used."""
    flat = population(**{f"o{i}": {3: 100 * r, 7: 100} for i, r in
                         enumerate([0.85, 0.9, 0.95, 1.0, 1.0, 1.0])})
    curve = fit_curve(table({7: 1000}), flat, "a", MEM)
    assert curve is not None
    default = 1000 * (3 / 7) ** config.THROUGHPUT_EXPONENT_DOWN  # the compute reading: lower
    assert curve.predict(A100, 3) == pytest.approx(default)
    assert "default exponent" in curve.describe(A100, 3)
    steep = [0.3, 0.35, 0.4, 0.45, 0.5, 0.6]
    lossy = population(**{f"o{i}": {3: 100 * r, 7: 100} for i, r in enumerate(steep)})
    curve = fit_curve(table({7: 1000}), lossy, "a", MEM)
    q = low_step(steep)
    assert curve is not None and curve.predict(A100, 3) == pytest.approx(1000 * q)
    assert q * 1000 < default


def test_a_flattering_population_step_up_is_not_taken() -> None:
    """Measured on 3g only, the step up to 4g: the actions that ran both are those earlier
    choices sent to 4g, the curves that still scale there (4g/3g of 1.17-1.24 for six
    large-batch ones). A curve that stops scaling gains less, and when those actions are of
    another size class (they ran 2g too) nothing says which it is, so the default exponent's
    gain is taken, the lower of the two; a population step below the default (its actions
    gained less) is used."""
    steep = population(**{f"o{i}": {2: 60, 3: 100, 4: 100 * r} for i, r in
                          enumerate([1.17, 1.2, 1.23, 1.23, 1.24, 1.24])})
    curve = fit_curve(table({3: 1000}), steep, "a", MEM)
    assert curve is not None
    # The compute reading (4/3)^0.5 and the compute-and-memory one (16/12)^0.25: the lower.
    default = 1000 * (4 / 3) ** (config.THROUGHPUT_EXPONENT_UP / 2)
    assert curve.predict(A100, 4) == pytest.approx(default)
    assert curve.predict(A100, 4) < 1000 * 1.11  # what the flat-topped action really gains
    assert "default exponent" in curve.describe(A100, 4)
    flat = [1.0, 1.01, 1.02, 1.03, 1.05, 1.1]
    curve = fit_curve(table({3: 1000}),
                      population(**{f"o{i}": {2: 60, 3: 100, 4: 100 * r}
                                    for i, r in enumerate(flat)}),
                      "a", MEM)
    q = low_step(flat)
    assert curve is not None and curve.predict(A100, 4) == pytest.approx(1000 * q)
    assert "as other actions scale" in curve.describe(A100, 4)


def test_actions_of_the_same_smallest_size_lend_their_step_up() -> None:
    """Measured on 2g only (its smallest), the step up to 4g: the actions whose smallest size
    is 2g too (the memory side sent none of them lower: large batches) scale nearly linearly,
    and their low quantile is taken although it is kinder than the default; the flat curves
    of 1g's class, which ran 2g and 4g as well, do not drag it down. Too few peers: the rule
    for the whole population, as before (its low quantile, no kinder than the default)."""
    steep = [1.8, 1.85, 1.9, 1.9, 1.95]
    flat = [0.95, 1.0, 1.0, 1.05, 1.1]
    members = {f"s{i}": {2: 100, 4: 100 * r} for i, r in enumerate(steep)}
    members |= {f"f{i}": {1: 90, 2: 100, 4: 100 * r} for i, r in enumerate(flat)}
    pop = population(**members)

    big = fit_curve(table({2: 1000}), pop, "a", MEM)
    assert big is not None
    assert big.predict(A100, 4) == pytest.approx(1000 * low_step(steep))
    assert big.predict(A100, 4) > 1000 * 2 ** config.THROUGHPUT_EXPONENT_UP  # the default
    assert "as actions whose smallest measured size is also 2 slices scale" in big.describe(
        A100, 4)
    few = population(**{k: v for k, v in members.items() if k != "s0"})
    alone = fit_curve(table({2: 1000}), few, "a", MEM)
    assert alone is not None and "smallest measured" not in alone.describe(A100, 4)
    assert alone.predict(A100, 4) < 1000 * 1.5


def test_default_extrapolation_counts_memory_slices_too() -> None:
    """From 3g.40gb up to 4g.40gb adds compute but no memory slice: the default exponent is
    applied to the cautious of the two readings (compute slices; compute and memory slices'
    geometric mean), so 4g is not predicted as fast as compute alone would say."""
    curve = fit_curve(table({3: 1000}), memory_slices=MEM)
    up = config.THROUGHPUT_EXPONENT_UP
    by_both = 1000 * (math.sqrt(4 * 4 / (3 * 4))) ** up
    assert by_both < 1000 * (4 / 3) ** up
    assert curve is not None and curve.predict(A100, 4) == pytest.approx(by_both)
    # Up to 7g.80gb memory slices double (8 against 4) where compute grows 7/3: the geometric
    # mean, below 7/3, is again the cautious reading.
    assert curve.predict(A100, 7) == pytest.approx(1000 * math.sqrt(7 * 8 / (3 * 4)) ** up)
    # Without memory slices known, compute slices alone.
    plain = fit_curve(table({3: 1000}))
    assert plain is not None and plain.predict(A100, 4) == pytest.approx(1000 * (4 / 3) ** up)


def test_beyond_the_measured_sizes_one_matching_step_borrows_nothing() -> None:
    """Measured at 1g and 2g, asked for 3g: neighbours that agree on the one step 1g -> 2g
    may bend anywhere after it (one saturates at 2g, another keeps scaling), so they lend no
    shape; neighbours that also agree on a second step do."""
    pop = population(b={1: 100, 2: 190, 3: 280}, c={1: 50, 2: 95, 3: 140},
                     d={1: 80, 2: 152, 3: 224})
    curve = fit_curve(table({1: 1000, 2: 1900}), pop, "a")
    assert curve is not None and "similar actions" not in curve.describe(A100, 3)
    assert "default exponent" in curve.describe(A100, 3)
    pop = population(b={1: 100, 2: 190, 3: 280, 4: 300}, c={1: 50, 2: 95, 3: 140, 4: 150})
    curve = fit_curve(table({1: 1000, 2: 1900, 3: 2800}), pop, "a")
    assert curve is not None and "2 similar actions" in curve.describe(A100, 4)
    assert curve.predict(A100, 4) == pytest.approx(
        2800 * 150 / 140 * math.exp(-config.THROUGHPUT_NOISE))


def shaped(memory_weight: float, sizes: tuple[int, ...], level: float, slope: float = 0.95
           ) -> dict[int, float]:
    """A curve that is a power law in effective resources with the given memory weight."""
    m = MEM[A100]
    return {c: level * math.exp(slope * ((1 - memory_weight) * math.log(c)
                                         + memory_weight * math.log(m[c]))) for c in sizes}


def with_memory(**actions: dict[int, float]) -> Population:
    return Population.from_samples(((a, s) for a, values in actions.items()
                                    for s in table(values)), MEM)


def test_the_model_s_actions_teach_where_a_size_sits_between_two_others() -> None:
    """Five actions ran 2g, 3g and 7g, each scaling as a power law of the geometric mean of
    compute and memory slices (3g.40gb has the bandwidth of 4g): 3g sits above the chord in
    compute slices. An action measured on 2g and 7g only, whose shape matches none of them
    closely enough to borrow, is interpolated where the population puts 3g, not at the
    cautious compute reading."""
    pop = with_memory(**{f"o{i}": shaped(0.5, (2, 3, 7), 100 * (i + 1), 0.5 + 0.1 * i)
                         for i in range(5)})
    assert pop.coordinate(A100, 3) == (0.5,)
    own = {2: 1000.0, 7: 1000.0 * 3.5 ** 0.99}  # steeper than every other action
    curve = fit_curve(table(own), pop, "a", MEM)
    assert curve is not None
    assert curve.source(A100, 3) == "interpolated as the model's actions scale"
    m = MEM[A100]
    w = (math.log(math.sqrt(3 * m[3])) - math.log(2)) / (math.log(math.sqrt(7 * m[7]))
                                                         - math.log(2))
    assert curve.predict(A100, 3) == pytest.approx(
        1000 * (own[7] / 1000) ** w * math.exp(-config.THROUGHPUT_NOISE))
    cautious = fit_curve(table(own), memory_slices=MEM)
    assert cautious is not None and cautious.source(A100, 3) == BOUND
    assert cautious.predict(A100, 3) < curve.predict(A100, 3)


def test_a_learned_weight_is_a_size_s_own_and_needs_enough_actions() -> None:
    """What 2g -> 3g -> 7g teaches about 3g says nothing of 4g (4g.40gb has no more memory
    than 3g.40gb): 4g stays on the cautious reading. 3g's weight holds between any two sizes
    around it. Four actions are too few to teach anything."""
    pop = with_memory(**{f"o{i}": shaped(0.5, (2, 3, 7), 100 * (i + 1)) for i in range(5)})
    curve = fit_curve(table({2: 1000, 7: 3000}), pop, "a", MEM)
    assert curve is not None and curve.source(A100, 4) == BOUND
    other = fit_curve(table({1: 600, 4: 1800}), pop, "a", MEM)
    assert other is not None
    assert other.source(A100, 3) == "interpolated as the model's actions scale"
    assert config.THROUGHPUT_MIN_POPULATION == 5
    few = with_memory(**{f"o{i}": shaped(0.5, (2, 3, 7), 100 * (i + 1)) for i in range(4)})
    assert few.coordinate(A100, 3) == ()


def test_a_weight_that_over_predicts_the_population_is_not_learned() -> None:
    """Ten actions ran 2g, 3g and 7g; each fits the geometric-mean weight closely, but three
    of them are 8 % slower at 3g than it says. A weight that over-predicts more than one
    action in ten by more than a measurement's noise is not kept: only lower ones are, and
    the reading is the most cautious of the weights that remain plausible."""
    actions = {f"o{i}": shaped(0.5, (2, 3, 7), 100 * (i + 1)) for i in range(10)}
    for i in range(3):
        actions[f"o{i}"][3] *= 0.92
    alphas = with_memory(**actions).coordinate(A100, 3)
    assert alphas and max(alphas) < 0.5
    # Without the slow ones 0.5 is the fit, and the only plausible weight.
    clean = {f"o{i}": shaped(0.5, (2, 3, 7), 100 * (i + 1)) for i in range(10)}
    assert with_memory(**clean).coordinate(A100, 3) == (0.5,)


def test_a_step_no_action_ran_is_chained_through_a_size_between() -> None:
    """Six actions ran 2g and 4g, six others 4g and 7g, none 2g and 7g: the step from 2g to
    7g is the sum of the two steps' low quantiles, not the default exponent (which is kinder
    here: a population step kinder than it would not be taken)."""
    up = [1.1, 1.2, 1.3, 1.4, 1.5, 1.6]
    on = [1.05, 1.1, 1.2, 1.3, 1.4, 1.5]
    pop = population(**{f"p{i}": {2: 100, 4: 100 * r} for i, r in enumerate(up)},
                     **{f"q{i}": {4: 100, 7: 100 * r} for i, r in enumerate(on)})
    curve = fit_curve(table({2: 1000}), pop, "a")
    assert curve is not None
    assert curve.predict(A100, 7) == pytest.approx(1000 * low_step(up) * low_step(on))
    assert "step by step" in curve.describe(A100, 7)
    assert low_step(up) * low_step(on) < (7 / 2) ** config.THROUGHPUT_EXPONENT_UP
    assert curve.predict(A100, 4) == pytest.approx(1000 * low_step(up))  # direct
    # A size outside (2, 7) is no bridge: down to 1g and back up mixes two biased samples.
    detour = population(**{f"p{i}": {1: 100, 2: 100 * r} for i, r in enumerate(up)},
                        **{f"q{i}": {1: 100, 7: 100 * r} for i, r in enumerate(on)})
    curve = fit_curve(table({2: 1000}), detour, "a")
    assert curve is not None and "default exponent" in curve.describe(A100, 7)


def test_the_store_population_knows_the_catalog_s_memory_slices(catalog: Catalog) -> None:
    rows = [ThroughputRow(f"o{i}", A100, name, 1, t, 3)
            for i in range(5)
            for name, t in zip(PARVA, shaped(0.5, (1, 2, 3, 4, 7), 10 * (i + 1)).values(),
                               strict=True)
            if not name.startswith(("1g", "4g"))]
    assert build(catalog, rows).coordinate(A100, 3) == (0.5,)


# --- learning from what each count delivered ---------------------------------------------

def test_scaling_efficiency_is_learned_from_multi_worker_executions() -> None:
    # One worker on 2g: 100/s. Four workers on 2g: 80/s each (n^-0.16), seen 6 times.
    samples = [ThroughputSample(A100, 2, 100.0)] * 3 + [ThroughputSample(A100, 2, 80.0, 4)] * 6
    lv = measured_levels(samples)
    assert lv is not None and lv.delta_executions == 6
    raw = math.log(100 / 80) / math.log(4)
    assert lv.delta == pytest.approx(raw * 6 / (6 + config.THROUGHPUT_DELTA_PRIOR))
    curve = fit_curve(samples)
    assert curve is not None
    assert curve.predict(A100, 2) == pytest.approx(100)  # one worker's level is unchanged
    assert curve.total(A100, 2, 4) == pytest.approx(4 * 100 * 4 ** -lv.delta)
    # 390/s: four perfect workers would do (400), these need five.
    assert curve.count_for(A100, 2, 390) == 5
    perfect = fit_curve(samples[:3])
    assert perfect is not None and perfect.count_for(A100, 2, 390) == 4
    assert "multi-worker executions" in curve.describe()


def test_a_size_seen_only_with_several_workers_is_normalised_to_one() -> None:
    samples = ([ThroughputSample(A100, 1, 100.0)] * 3 + [ThroughputSample(A100, 1, 80.0, 4)] * 6
               + [ThroughputSample(A100, 7, 400.0, 2)])
    lv = measured_levels(samples)
    assert lv is not None
    assert lv.by_model[A100][7] == pytest.approx(math.log(400) + lv.delta * math.log(2))


def test_count_never_exceeds_what_is_needed_and_never_overflows() -> None:
    curve = fit_curve(table({1: 100.0}))
    assert curve is not None
    assert curve.count_for(A100, 1, 300) == 3
    assert curve.count_for(A100, 1, 301) == 4
    assert curve.count_for(A100, 1, 1e300) == config.MAX_WORKERS + 1


# --- the population from the store -------------------------------------------------------

def test_population_cache_refreshes_after_its_ttl_and_survives_an_outage(catalog: Catalog
                                                                        ) -> None:
    now = [datetime(2026, 11, 1, tzinfo=UTC)]
    rows: list[ThroughputRow] | None = [
        ThroughputRow("b", "A100-80GB", "1g.10gb", 1, 10.0, 3),
        ThroughputRow("b", "NVIDIA A100-SXM4-80GB", "7g.80gb", 2, 60.0, 3),  # an alias
        ThroughputRow("b", "A100-80GB", "9g.999gb", 1, 1.0, 1),  # unknown profile: skipped
    ]
    reads: list[datetime] = []

    def read(since: datetime) -> list[ThroughputRow] | None:
        reads.append(since)
        return rows

    cache = PopulationCache(catalog, read, lambda: now[0], ttl_s=60, background=False)
    assert cache.get().actions == 1 and len(reads) == 1
    assert reads[0] == now[0] - timedelta(days=config.THROUGHPUT_POPULATION_DAYS)
    now[0] += timedelta(seconds=59)
    cache.get()
    assert len(reads) == 1  # fresh
    now[0] += timedelta(seconds=2)
    rows = None  # the store is down: the previous population stays
    assert cache.get().actions == 1 and len(reads) == 2
    cache.get()
    assert len(reads) == 2  # and it is not asked again on every call
    assert memory_slices_by_size(catalog)["A100-80GB"] == {1: 1, 2: 2, 3: 4, 4: 4, 7: 8}


def test_population_is_read_in_the_background_by_default(catalog: Catalog) -> None:
    """Recommend never waits for the grouped read: until it completes, no borrowed shapes."""
    gate = threading.Event()

    def read(since: datetime) -> list[ThroughputRow]:
        gate.wait(5)
        return [ThroughputRow("b", "A100-80GB", "1g.10gb", 1, 10.0, 3)]

    cache = PopulationCache(catalog, read, lambda: datetime(2026, 11, 1, tzinfo=UTC))
    assert cache.get().actions == 0  # the read is still running
    assert cache.get().actions == 0  # and only one runs
    gate.set()
    cache.wait()
    assert cache.get().actions == 1


def _ran(eid: str, action: str, profile: str, throughput: float, at: datetime,
         count: int = 1) -> Execution:
    slice_mib = {"1g.10gb": 9856, "3g.40gb": 40192, "7g.80gb": 80896}[profile]
    return Execution(eid, action, "", "A100-80GB", profile, slice_mib, count, 4000.0, 50.0,
                     60.0, throughput, Outcome.SUCCEEDED, at)


def test_engine_borrows_a_size_from_other_actions_in_the_store(store: SqlStore,
                                                               catalog: Catalog) -> None:
    t0 = datetime(2026, 11, 1, tzinfo=UTC)
    clock = [t0]
    use_cases = UseCases(store, clock=lambda: clock[0], catalog=catalog)
    use_cases.throughput_population.background = False
    pool = mk(catalog, "a80", "A100-80GB", profiles=PARVA)
    target = Request("a", "", (pool,), workers=1, max_workers=8, target_throughput=1800)
    serial = 0
    for action, scale in (("a", 200.0), ("b", 10.0), ("c", 20.0)):
        for profile, mult in (("1g.10gb", 1.0), ("7g.80gb", 6.2)):
            serial += 1
            use_cases.record_execution(_ran(f"x{serial}", action, profile, scale * mult, t0))
    first = use_cases.recommend(target).recommendation.decision
    # Nobody ran 3g yet. Interpolated between 1g and 7g: 2g 375/s, 3g 560/s, 4g 702/s; the
    # cheapest that meets 1,800/s is 2g x 5 (10 slices; 3g x 4 and 4g x 3 take 12).
    assert (first.rung.profile.name, first.rung.count) == ("2g.20gb", 5), first.reason
    assert "3 slices" not in first.reason
    for action, scale in (("b", 10.0), ("c", 20.0)):
        serial += 1
        use_cases.record_execution(_ran(f"x{serial}", action, "3g.40gb", scale * 3.1, t0))
    # The population is read again only once its TTL has passed.
    same = use_cases.recommend(target).recommendation.decision
    assert (same.rung.profile.name, same.rung.count) == ("2g.20gb", 5)
    clock[0] += timedelta(seconds=config.THROUGHPUT_POPULATION_TTL_S + 1)
    d = use_cases.recommend(target).recommendation.decision
    # b and c: 3g gives half of 7g, 620/s for ours less a measurement's noise (3 %): 3g x 3
    # (9 slices) still meets 1,800/s.
    assert (d.rung.profile.name, d.rung.count) == ("3g.40gb", 3), d.reason
    assert "3 slices: 2 similar actions" in d.reason
    assert d.predicted_throughput == pytest.approx(3 * 620 * math.exp(-config.THROUGHPUT_NOISE))


# --- the policy with a curve -------------------------------------------------------------

def target(catalog: Catalog, goal: float, max_workers: int, *, workers: int = 1,
           nodes: tuple[Node, ...] = ()) -> Request:
    pool = mk(catalog, "a100", "A100-80GB", profiles=PARVA, nodes=nodes)
    return Request("act", "e", (pool,), workers=workers, max_workers=max_workers,
                   target_throughput=goal)


def test_target_picks_fewest_gpu_slices(catalog: Catalog) -> None:
    curve = fit_curve(power(100, 0.5, (1, 7)))
    d = recommend(target(catalog, 250, 8), est(5000), curve=curve)
    # 1g x 3 (3 slices, 300/s) beats 2g x 2 (4), 3g x 2 (6) and 7g x 1 (7 slices, 265/s).
    assert (d.rung.profile.name, d.rung.count) == ("1g.10gb", 3)
    assert d.predicted_throughput == pytest.approx(300, rel=0.01)
    assert "fewest GPU slices" in d.reason
    assert {r.count for r in d.ladder} == {3}


def test_target_counts_with_the_learned_efficiency(catalog: Catalog) -> None:
    samples = [ThroughputSample(A100, 1, 100.0)] * 3 + [ThroughputSample(A100, 1, 70.0, 4)] * 9
    curve = fit_curve(samples)
    assert curve is not None
    d = recommend(target(catalog, 250, 8), est(5000), curve=curve)
    # Perfect scaling would take 1g x 3; these workers slow each other down: 1g x 4.
    assert (d.rung.profile.name, d.rung.count) == ("1g.10gb", 4)
    assert d.predicted_throughput == pytest.approx(curve.total(A100, 1, 4))


def test_target_respects_memory(catalog: Catalog) -> None:
    curve = fit_curve(power(100, 0.5, (1, 7)))
    d = recommend(target(catalog, 250, 8), est(15000), curve=curve)
    # 1g.10gb is too small: the cheapest fitting option is 2g.20gb x 2 (4 slices).
    assert (d.rung.profile.name, d.rung.count) == ("2g.20gb", 2)


def test_unreachable_target_gives_best_reachable_and_says_so(catalog: Catalog) -> None:
    curve = fit_curve(power(100, 1.0, (1, 7)))
    d = recommend(target(catalog, 5000, 3), est(5000), curve=curve)
    assert (d.rung.profile.name, d.rung.count) == ("7g.80gb", 3)
    assert "cannot be met within max_workers=3" in d.reason


def test_target_without_a_curve_keeps_workers(catalog: Catalog) -> None:
    d = recommend(target(catalog, 250, 8, workers=2), est(5000), curve=None)
    assert d.rung.count == 2 and "no throughput measured" in d.reason


def test_target_count_must_fit_on_one_node(catalog: Catalog) -> None:
    curve = fit_curve(power(100, 1.0, (1, 7)))
    node = Node("n", (GpuState("g0", occupied=((0, 4),)),))  # 3 free 1g placements left
    d = recommend(target(catalog, 500, 8, nodes=(node,)), est(5000), curve=curve)
    # Units 4..7 are free: at most 3 x 1g, 1 x 2g or 1 x 3g fit, so 500/s is out of reach
    # on this node; the best reachable is 300/s with 3 compute slices.
    assert d.rung.node_id == "n" and "cannot be met" in d.reason
    assert d.predicted_throughput == pytest.approx(300)
    assert d.rung.profile.compute_slices * d.rung.count == 3


def test_accounting_share(catalog: Catalog) -> None:
    nodes = (Node("n", (GpuState("g0"), GpuState("g1"))),)
    pool = mk(catalog, "a100", "A100-40GB", nodes=nodes)
    d = recommend(Request("act", "e", (pool,), workers=2), est(8000))
    assert d.rung.gpu_equivalents == pytest.approx(2 / 7)
    assert d.rung.node_share == pytest.approx(1 / 7)
    whole = mk(catalog, "w", "A100-40GB", Strategy.NONE, nodes=(
        Node("m", tuple(GpuState(f"g{i}") for i in range(4))),))
    d = recommend(Request("act", "e", (whole,), workers=2, needs_peer_to_peer=True), est(8000))
    assert d.rung.gpu_equivalents == 2 and d.rung.node_share == 0.5
    free = mk(catalog)
    d = recommend(Request("act", "e", (free,), workers=3), est(8000))
    assert d.rung.node_share == 0 and math.isclose(d.rung.gpu_equivalents, 3 / 7)


def test_a_near_size_is_read_no_lower_than_the_chord_to_a_farther_one() -> None:
    """Measured on 1g only; the actions that ran 1g and 2g are flat curves (their 10th
    percentile step is taken, below the default exponent), none ran 4g (the default exponent's
    gain is taken there). Read one size at a time, 2g would gain less over 1g than 4g over 2g,
    a shape no serial + compute + bandwidth time allows, and the cheap 2g would lose to 4g: it
    is read at the chord from 1g to the 4g reading instead, a margin low."""
    flat = population(**{f"o{i}": {1: 100, 2: 100 * r} for i, r in
                         enumerate([1.0, 1.0, 1.02, 1.05, 1.1, 1.2])})
    curve = fit_curve(table({1: 100}), flat, "a", MEM)
    assert curve is not None
    four = 100 * 4 ** config.THROUGHPUT_EXPONENT_UP  # both readings of 4g agree: 4 and 4
    assert curve.predict(A100, 4) == pytest.approx(four)
    chord = math.exp(0.5 * math.log(four / 100) - config.THROUGHPUT_CONCAVE_MARGIN) * 100
    assert curve.predict(A100, 2) == pytest.approx(chord)
    assert "concave up to the reading at 4 slices" in curve.describe(A100, 2)
    # Without the catalog's memory slices there is no chord to read: the population's step.
    bare = fit_curve(table({1: 100}), flat)
    assert bare is not None and bare.predict(A100, 2) < chord * 0.95
    # A population step above the chord is not lowered by it.
    steep = population(**{f"o{i}": {1: 100, 2: 100 * r} for i, r in
                          enumerate([1.5, 1.55, 1.6, 1.6, 1.65, 1.7])})
    fast = fit_curve(table({1: 100}), steep, "a", MEM)
    assert fast is not None and fast.predict(A100, 2) > chord
    assert "concave" not in fast.describe(A100, 2)
