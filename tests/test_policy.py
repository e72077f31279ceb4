from __future__ import annotations

import dataclasses

import pytest

from recommender.core.catalog import Catalog
from recommender.core.domain import Node, Request, Strategy
from recommender.core.estimation import FALLBACK, HISTORY, PRIOR
from recommender.core.ladder import LadderExhausted, build_ladder, next_rung
from recommender.core.options import NoFit, candidate_profiles, pod_resources
from recommender.core.placement import GpuState
from recommender.core.policy import recommend
from tests.builders import est, mk


def names(rungs: object) -> list[str]:
    return [r.profile.name for r in rungs]  # type: ignore[attr-defined]


def test_worked_example(catalog: Catalog) -> None:
    """DESIGN.md section 2: 7,500 MiB declared, two workers, A100-40GB mixed."""
    req = Request("act", "e", (mk(catalog),), workers=2, declared_memory_mib=7500)
    d = recommend(req, est(7500 * 1.1))
    assert (d.rung.profile.name, d.rung.count) == ("1g.10gb", 2)
    assert d.rung.resources == {"nvidia.com/mig-1g.10gb": "2"}
    assert names(d.ladder) == ["3g.20gb", "7g.40gb"]
    assert all(r.count == 2 for r in d.ladder)
    assert d.source == PRIOR and "1g.10gb" in d.reason


def test_history_of_small_peaks_gets_the_small_slice(catalog: Catalog) -> None:
    req = Request("act", "e", (mk(catalog),), workers=2)
    d = recommend(req, est(3300, source=HISTORY))
    assert (d.rung.profile.name, d.rung.count) == ("1g.5gb", 2)
    assert names(d.ladder) == ["1g.10gb", "3g.20gb", "7g.40gb"]


def test_equal_memory_prefers_fewer_compute_slices_unless_sm_hungry(catalog: Catalog) -> None:
    req = Request("act", "e", (mk(catalog),))
    assert recommend(req, est(9000)).rung.profile.name == "1g.10gb"
    assert recommend(req, est(9000), sm_hungry=True).rung.profile.name == "2g.10gb"


def test_no_information_is_the_largest_slice_and_says_so(catalog: Catalog) -> None:
    req = Request("act", "e", (mk(catalog), mk(catalog, "h100", "H100-80GB")))
    d = recommend(req, None)
    assert d.source == FALLBACK and d.rung.profile.name == "7g.80gb"
    assert "safe" in d.reason


def test_waste_decides_between_pools(catalog: Catalog) -> None:
    # 15 GiB: A100-40GB must give 3g.20gb (19,968), H100-80GB's 1g.20gb (20,096) wastes more,
    # A30's 2g.12gb is too small, so the A100 wins.
    pools = (mk(catalog, "h100", "H100-80GB"), mk(catalog, "a30", "A30-24GB"), mk(catalog))
    d = recommend(Request("act", "e", pools), est(15000))
    assert (d.rung.pool_id, d.rung.profile.name) == ("a100", "3g.20gb")


def test_estimate_above_every_slice_gives_the_largest_unless_known_needed(
        catalog: Catalog) -> None:
    req = Request("act", "e", (mk(catalog),))
    d = recommend(req, est(42000, source=HISTORY, floor=39000))
    assert d.rung.profile.name == "7g.40gb"
    with pytest.raises(NoFit) as err:
        recommend(req, est(110000, floor=100000))
    assert "a100" in err.value.reasons and "40,192" in err.value.reasons["a100"]


def test_peer_to_peer_gets_whole_cards_only(catalog: Catalog) -> None:
    mig = mk(catalog)
    whole = mk(catalog, "whole", "A100-40GB", Strategy.NONE)
    d = recommend(Request("act", "e", (mig, whole), workers=4, needs_peer_to_peer=True), est(5000))
    assert d.rung.pool_id == "whole" and d.rung.profile.whole_gpu and d.rung.count == 4
    assert d.rung.resources == {"nvidia.com/gpu": "4"}
    with pytest.raises(NoFit, match="peer-to-peer"):
        recommend(Request("act", "e", (mig,), needs_peer_to_peer=True), est(5000))


@pytest.mark.parametrize(("strategy", "expected"), [
    (Strategy.MIXED, {"nvidia.com/mig-2g.10gb": "3"}),
    (Strategy.SINGLE, {"nvidia.com/gpu": "3"}),
    (Strategy.DYNAMIC, {"nvidia.com/gpu": "3", "nvidia.com/gpumem": "9856"}),
])
def test_pod_resources_per_strategy(catalog: Catalog, strategy: Strategy,
                                    expected: dict[str, str]) -> None:
    pool = mk(catalog, strategy=strategy)
    prof = pool.gpu_model.profile("2g.10gb")
    assert prof is not None
    assert pod_resources(pool, prof, 3) == expected
    whole = mk(catalog, strategy=Strategy.NONE)
    assert pod_resources(whole, whole.gpu_model.whole, 2) == {"nvidia.com/gpu": "2"}


def test_dynamic_mig_cannot_request_the_double_memory_1g(catalog: Catalog) -> None:
    dyn = mk(catalog, strategy=Strategy.DYNAMIC)
    assert "1g.10gb" not in [p.name for p in candidate_profiles(dyn)]
    d = recommend(Request("act", "e", (dyn,), workers=2), est(8000))
    assert d.rung.profile.name == "2g.10gb"  # as HAMi's own example: 2g.10gb x 2
    assert d.rung.resources == {"nvidia.com/gpu": "2", "nvidia.com/gpumem": "9856"}


def test_single_strategy_uses_its_one_profile(catalog: Catalog) -> None:
    single = mk(catalog, strategy=Strategy.SINGLE, profiles=("3g.20gb",))
    d = recommend(Request("act", "e", (single,)), est(1000))
    assert d.rung.profile.name == "3g.20gb" and d.ladder == ()


def test_ladder_whole_card_then_larger_model(catalog: Catalog) -> None:
    pools = (mk(catalog), mk(catalog, "a100-whole", "A100-40GB", Strategy.NONE),
             mk(catalog, "h200", "H200-141GB"))
    d = recommend(Request("act", "e", pools, workers=2), est(8000))
    assert d.rung.profile.name == "1g.10gb"
    assert [(r.pool_id, r.profile.name) for r in d.ladder] == [
        ("a100", "3g.20gb"), ("a100", "7g.40gb"), ("a100-whole", "whole"),
        ("h200", "3g.71gb"), ("h200", "7g.141gb"),
    ]
    mems = [r.profile.memory_mib for r in d.ladder]
    assert mems == sorted(set(mems))  # strictly more memory each step
    assert {r.count for r in d.ladder} == {2}


def test_ladder_skips_profiles_that_add_no_memory(catalog: Catalog) -> None:
    pool = mk(catalog, model="A100-80GB")
    start = recommend(Request("act", "e", (pool,)), est(9000)).rung
    assert start.profile.name == "1g.10gb"
    assert names(build_ladder([pool], start)) == ["1g.20gb", "3g.40gb", "7g.80gb"]


def test_next_rung_clears_the_known_need(catalog: Catalog) -> None:
    d = recommend(Request("act", "e", (mk(catalog),), workers=2), est(8000))
    rung, above = next_rung(d.ladder, 9856)
    assert rung.profile.name == "3g.20gb" and names(above) == ["7g.40gb"]
    rung, above = next_rung(d.ladder, 25000)  # a peak beyond 3g.20gb was seen: skip it
    assert rung.profile.name == "7g.40gb" and above == ()
    with pytest.raises(LadderExhausted):
        next_rung(d.ladder, 40192)


def test_nodes_decide_where_it_fits(catalog: Catalog) -> None:
    full = Node("full", (GpuState("g0", occupied=((0, 4), (4, 4))),))
    roomy = Node("roomy", (GpuState("g1", occupied=((4, 4),)),))
    pool = mk(catalog, nodes=(full, roomy))
    d = recommend(Request("act", "e", (pool,), workers=2), est(8000))
    assert d.rung.node_id == "roomy" and d.rung.profile.name == "1g.10gb"
    # 3g.20gb x 2 fits on no node (roomy has one 3g placement left): not on the ladder.
    assert names(d.ladder) == []
    with pytest.raises(NoFit, match="no node has room"):
        recommend(Request("act", "e", (mk(catalog, nodes=(full,)),)), est(8000))


def test_model_without_placements_is_never_placed(catalog: Catalog) -> None:
    """A model an override adds without a placement table is never placed on nodes."""
    known = catalog.resolve("RTX-PRO-5000-48GB")
    assert known is not None
    unplaced = dataclasses.replace(
        known, id="X-UNPLACED", placement_units=None,
        profiles=tuple(dataclasses.replace(p, placement=None) for p in known.profiles))
    cat = Catalog({**catalog.models, unplaced.id: unplaced})
    pool = mk(cat, "x", "X-UNPLACED", nodes=(Node("n", (GpuState("g"),)),))
    with pytest.raises(NoFit, match="placement table"):
        recommend(Request("act", "e", (pool,)), est(8000))
    # Without nodes nothing is placed, so the pool can be used (capacity assumed).
    free = mk(cat, "x", "X-UNPLACED")
    assert recommend(Request("act", "e", (free,)), est(8000)).rung.profile.name == "1g.24gb"


def test_rtx_pro_5000_places_on_its_derived_table(catalog: Catalog) -> None:
    """It used to be refused; now two 1g.24gb fill one card and a third goes to the next."""
    two = Node("two", (GpuState("g0"), GpuState("g1")))
    pool = mk(catalog, "pro5000", "RTX-PRO-5000-48GB", nodes=(two,))
    d = recommend(Request("act", "e", (pool,), workers=3), est(20000))
    assert (d.rung.profile.name, d.rung.count, d.rung.node_id) == ("1g.24gb", 3, "two")
    busy = Node("busy", (GpuState("g0", occupied=((0, 3),)),))
    with pytest.raises(NoFit, match="no node has room"):
        recommend(Request("act", "e", (mk(catalog, "p", "RTX-PRO-5000-48GB", nodes=(busy,)),),
                          workers=2), est(20000))
