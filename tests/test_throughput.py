from __future__ import annotations

import math

import pytest

from recommender.core import config
from recommender.core.catalog import Catalog
from recommender.core.domain import Node, Request, Strategy
from recommender.core.placement import GpuState
from recommender.core.policy import recommend
from recommender.core.throughput import ThroughputSample, fit_curve, pooled_exponent
from tests.builders import est, mk

PARVA = ("1g.10gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb")


def power(a: float, b: float, sizes: tuple[int, ...] = (1, 7), model: str = "A100-80GB"
          ) -> list[ThroughputSample]:
    return [ThroughputSample(model, c, a * c ** b) for c in sizes]


def test_fit_recovers_a_power_law() -> None:
    curve = fit_curve(power(100, 0.6, (1, 2, 7)))
    assert curve is not None and curve.fitted_exponent
    assert curve.exponent == pytest.approx(0.6, abs=0.01)
    assert curve.predict("A100-80GB", 3) == pytest.approx(100 * 3 ** 0.6, rel=0.02)


def test_one_size_extrapolates_cautiously_or_uses_the_pooled_exponent() -> None:
    curve = fit_curve(power(100, 0.6, (2,)))
    assert curve is not None and not curve.fitted_exponent
    t2 = 100 * 2 ** 0.6
    assert curve.predict("A100-80GB", 2) == pytest.approx(t2)
    down, up = config.THROUGHPUT_EXPONENT_DOWN, config.THROUGHPUT_EXPONENT_UP
    assert curve.predict("A100-80GB", 1) == pytest.approx(t2 * 0.5**down)
    assert curve.predict("A100-80GB", 4) == pytest.approx(t2 * 2**up)
    assert "measured at 2 slices only" in curve.describe()
    pooled = pooled_exponent([power(10, 0.3, (1, 7)), power(10, 0.5, (1, 3)), power(5, 1, (2,))])
    assert pooled == pytest.approx(0.4, abs=0.01)
    with_pooled = fit_curve(power(100, 0.6, (2,)), pooled)
    assert with_pooled is not None and with_pooled.exponent == pooled
    assert with_pooled.predict("A100-80GB", 4) == pytest.approx(t2 * 2 ** pooled)


def test_no_measurements_no_curve_and_other_models_are_cautious() -> None:
    assert fit_curve([]) is None
    assert fit_curve([ThroughputSample("A100-80GB", 1, 0.0)]) is None
    curve = fit_curve(power(100, 0.5, (1, 4)) + power(300, 0.5, (1, 4), "H100-80GB"))
    assert curve is not None
    assert curve.predict("H100-80GB", 1) == pytest.approx(300, rel=0.01)
    assert curve.predict("H200-141GB", 1) == pytest.approx(100, rel=0.01)  # the slower one


def test_one_slow_run_does_not_move_the_curve() -> None:
    samples = [*power(100, 0.5, (1, 1, 1, 4, 4, 4)), ThroughputSample("A100-80GB", 1, 5.0)]
    curve = fit_curve(samples)
    assert curve is not None and curve.predict("A100-80GB", 1) == pytest.approx(100, rel=0.05)


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
