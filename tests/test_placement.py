"""Exact MIG placement: HAMi's test cases, a brute-force cross-check, and error handling."""

from __future__ import annotations

import dataclasses
import random
from collections import Counter
from collections.abc import Sequence

import pytest

from recommender.core.catalog import Catalog, GpuModel, MigProfile, load_catalog
from recommender.core.placement import (
    GpuState,
    NodePlacement,
    PlacementError,
    place,
    place_whole_gpus,
)

# --- fixtures and helpers -------------------------------------------------------------------


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog()


def _model(catalog: Catalog, model_id: str) -> GpuModel:
    model = catalog.resolve(model_id)
    assert model is not None and model.id == model_id
    return model


@pytest.fixture(scope="module")
def a100(catalog: Catalog) -> GpuModel:
    return _model(catalog, "A100-40GB")


@pytest.fixture(scope="module")
def a30(catalog: Catalog) -> GpuModel:
    return _model(catalog, "A30-24GB")


@pytest.fixture(scope="module")
def rtx6000(catalog: Catalog) -> GpuModel:
    return _model(catalog, "RTX-PRO-6000-96GB")


def profiles(model: GpuModel, *names: str) -> list[MigProfile]:
    """Profiles by name; "3x1g.5gb" stands for three of them."""
    out: list[MigProfile] = []
    for spec in names:
        count, _, name = spec.partition("x") if "x" in spec.split(".")[0] else ("1", "", spec)
        p = model.profile(name)
        assert p is not None, f"{model.id} has no profile {name}"
        out.extend([p] * int(count))
    return out


def gpu(*occupied: tuple[int, int], pinned: Sequence[str] = (), uuid: str = "GPU-a") -> GpuState:
    return GpuState(uuid=uuid, occupied=tuple(occupied), occupied_profiles=tuple(pinned))


def _mask(start: int, size: int) -> int:
    return ((1 << size) - 1) << start


def _fits_pinned(model: GpuModel, pinned: Sequence[MigProfile], used: int) -> bool:
    """Whether the existing unplaced profiles still fit around `used` (plain backtracking)."""
    if not pinned:
        return True
    first, rest = pinned[0], pinned[1:]
    assert first.placement is not None
    for start in first.placement.starts:
        m = _mask(start, first.placement.size)
        if not used & m and _fits_pinned(model, rest, used | m):
            return True
    return False


def assert_legal(
    model: GpuModel, requests: Sequence[MigProfile], gpus: Sequence[GpuState],
    result: NodePlacement,
) -> None:
    """Every requested instance placed once, at a legal start, without overlaps or excess."""
    assert Counter(a.profile for a in result.assignments) == Counter(p.name for p in requests)
    assert result.gpus_used == tuple(sorted({a.gpu_index for a in result.assignments}))
    assert model.placement_units is not None
    for g, state in enumerate(gpus):
        used = 0
        for start, size in state.occupied:
            used |= _mask(start, size)
        counts = Counter(state.occupied_profiles)
        for a in result.assignments:
            if a.gpu_index != g:
                continue
            p = model.profile(a.profile)
            assert p is not None and p.placement is not None
            assert a.start in p.placement.starts, a
            assert a.size == p.placement.size, a
            m = _mask(a.start, a.size)
            assert not used & m, f"{a} overlaps on gpu {g}"
            used |= m
            counts[a.profile] += 1
        assert used < 1 << model.placement_units
        for name, n in counts.items():
            p = model.profile(name)
            assert p is not None and n <= p.max_count, f"gpu {g}: {n} x {name}"
        pinned = [model.profile(n) for n in state.occupied_profiles]
        assert _fits_pinned(model, [p for p in pinned if p is not None], used), (
            f"gpu {g}: existing {state.occupied_profiles} no longer fit"
        )
    assert all(0 <= a.gpu_index < len(gpus) for a in result.assignments)


def fits(model: GpuModel, requests: Sequence[MigProfile], gpus: Sequence[GpuState]) -> bool:
    result = place(model, requests, gpus)
    if result is not None:
        assert_legal(model, requests, gpus, result)
    return result is not None


def starts_of(result: NodePlacement | None) -> Counter[tuple[str, int]]:
    assert result is not None
    return Counter((a.profile, a.start) for a in result.assignments)


# --- HAMi pkg/device/nvidia/mig_topology_test.go ---------------------------------------------


@pytest.mark.parametrize(
    ("occupied", "request_", "expected"),
    [
        ((), ("3g.20gb", "2g.10gb", "1g.5gb", "1g.5gb"), True),
        (((4, 4),), ("2g.10gb", "1g.5gb", "1g.5gb"), True),
        (((0, 4), (4, 4)), ("1g.5gb",), False),
        (((0, 2), (2, 2), (4, 2)), ("2g.10gb",), False),
    ],
)
def test_hami_can_place_mig_profiles_a100(
    a100: GpuModel, occupied: tuple[tuple[int, int], ...], request_: tuple[str, ...],
    expected: bool,
) -> None:
    assert fits(a100, profiles(a100, *request_), [gpu(*occupied)]) is expected


def test_hami_balanced_packing(a100: GpuModel) -> None:
    result = place(a100, profiles(a100, "3g.20gb", "2g.10gb", "1g.5gb", "1g.5gb"), [gpu()])
    assert starts_of(result) == Counter(
        {("3g.20gb", 4): 1, ("2g.10gb", 0): 1, ("1g.5gb", 3): 1, ("1g.5gb", 2): 1}
    )


# --- HAMi pkg/scheduler/mig_allocation_test.go and mig_capability_test.go -------------------


def test_hami_multiple_placements_on_single_gpu(a100: GpuModel) -> None:
    result = place(a100, profiles(a100, "2x1g.5gb"), [gpu()])
    assert result is not None
    assert_legal(a100, profiles(a100, "2x1g.5gb"), [gpu()], result)
    assert len({a.start for a in result.assignments}) == 2
    assert {a.gpu_index for a in result.assignments} == {0}


def test_hami_rejects_insufficient_placements_on_single_gpu(a100: GpuModel) -> None:
    only_6 = gpu((0, 4), (4, 2))  # units 6 and 7 free: 1g.5gb can start only at 6
    assert not fits(a100, profiles(a100, "2x1g.5gb"), [only_6])
    assert starts_of(place(a100, profiles(a100, "1g.5gb"), [only_6])) == Counter(
        {("1g.5gb", 6): 1}
    )


def test_hami_three_2g_leave_only_slot_6(a100: GpuModel) -> None:
    full = gpu((0, 2), (2, 2), (4, 2))
    assert not fits(a100, profiles(a100, "2g.10gb"), [full])
    assert starts_of(place(a100, profiles(a100, "1g.5gb"), [full])) == Counter(
        {("1g.5gb", 6): 1}
    )
    assert not fits(a100, profiles(a100, "2x1g.5gb"), [full])


def test_hami_second_gpu_takes_what_the_first_cannot(a100: GpuModel) -> None:
    gpus = [gpu((0, 2), (2, 2), (4, 2)), gpu(uuid="GPU-b")]
    result = place(a100, profiles(a100, "2x1g.5gb"), gpus)
    assert result is not None
    assert_legal(a100, profiles(a100, "2x1g.5gb"), gpus, result)
    assert result.gpus_used == (0, 1)


# --- HAMi hack/hami-mig-e2e.sh capacity cases ------------------------------------------------


@pytest.mark.parametrize(
    "request_",
    [
        ("1g.5gb", "3x2g.10gb"),
        ("3g.20gb", "2g.10gb", "2x1g.5gb"),
        ("7x1g.5gb",),
        ("2x3g.20gb",),
        ("4g.20gb", "3g.20gb"),
        ("7g.40gb",),
        ("4x1g.10gb",),
    ],
)
def test_e2e_capacity_fits_empty_a100(a100: GpuModel, request_: tuple[str, ...]) -> None:
    assert fits(a100, profiles(a100, *request_), [gpu()])


@pytest.mark.parametrize(
    "request_",
    [
        ("8x1g.5gb",),
        ("4x2g.10gb",),
        ("3x3g.20gb",),
        ("2x4g.20gb",),
        ("7g.40gb", "1g.5gb"),
        ("5x1g.10gb",),
        ("4g.20gb", "3g.20gb", "1g.5gb"),
    ],
)
def test_e2e_capacity_too_much_for_one_a100(a100: GpuModel, request_: tuple[str, ...]) -> None:
    assert not fits(a100, profiles(a100, *request_), [gpu()])


def test_e2e_rtx_pro_6000_four_1g_fit_not_five(rtx6000: GpuModel) -> None:
    result = place(rtx6000, profiles(rtx6000, "4x1g.24gb"), [gpu()])
    assert starts_of(result) == Counter({("1g.24gb", s): 1 for s in (0, 3, 6, 9)})
    assert not fits(rtx6000, profiles(rtx6000, "5x1g.24gb"), [gpu()])


def test_rtx_pro_6000_five_1g_fit_on_two_gpus(rtx6000: GpuModel) -> None:
    gpus = [gpu(uuid="GPU-a"), gpu(uuid="GPU-b")]
    result = place(rtx6000, profiles(rtx6000, "5x1g.24gb"), gpus)
    assert result is not None
    assert_legal(rtx6000, profiles(rtx6000, "5x1g.24gb"), gpus, result)
    assert result.gpus_used == (0, 1)
    assert not fits(rtx6000, profiles(rtx6000, "9x1g.24gb"), gpus)


def test_rtx_pro_6000_mixed(rtx6000: GpuModel) -> None:
    assert fits(rtx6000, profiles(rtx6000, "2g.48gb", "2x1g.24gb"), [gpu()])
    assert not fits(rtx6000, profiles(rtx6000, "2g.48gb", "3x1g.24gb"), [gpu()])
    assert not fits(rtx6000, profiles(rtx6000, "4g.96gb", "1g.24gb"), [gpu()])
    # A 1g.24gb at 3 sits inside the 2g.48gb placement 0..5, so only the one at 6 is left.
    assert not fits(rtx6000, profiles(rtx6000, "2x2g.48gb"), [gpu((3, 3))])


# --- A30 ------------------------------------------------------------------------------------


def test_a30_two_2g_fit_not_three(a30: GpuModel) -> None:
    assert fits(a30, profiles(a30, "2x2g.12gb"), [gpu()])
    assert not fits(a30, profiles(a30, "3x2g.12gb"), [gpu()])


def test_a30_4g_and_1g_do_not_fit(a30: GpuModel) -> None:
    assert not fits(a30, profiles(a30, "4g.24gb", "1g.6gb"), [gpu()])
    assert fits(a30, profiles(a30, "2g.12gb", "2x1g.6gb"), [gpu()])
    assert fits(a30, profiles(a30, "4x1g.6gb"), [gpu()])
    assert not fits(a30, profiles(a30, "5x1g.6gb"), [gpu()])


# --- exactness ------------------------------------------------------------------------------


def hami_greedy(model: GpuModel, requests: Sequence[MigProfile], used: int) -> bool:
    """HAMi's production path: each instance in turn takes its first free start (1g/3g from
    the highest start, the others from the lowest) and is never moved."""
    for p in requests:
        assert p.placement is not None
        starts = sorted(p.placement.starts, reverse=p.compute_slices in (1, 3))
        for start in starts:
            m = _mask(start, p.placement.size)
            if not used & m:
                used |= m
                break
        else:
            return False
    return True


@pytest.mark.parametrize(
    ("occupied", "request_"),
    [
        ((), ("2g.10gb", "4g.20gb")),  # 2g takes 0, the only 4g start
        (((0, 2),), ("1g.5gb", "3g.20gb")),  # 1g takes 6, inside the only free 3g start
        ((), ("1g.5gb", "2g.10gb", "3g.20gb")),
        (((3, 1),), ("1g.10gb", "1g.5gb", "3g.20gb")),
    ],
)
def test_exact_where_greedy_fails(
    a100: GpuModel, occupied: tuple[tuple[int, int], ...], request_: tuple[str, ...]
) -> None:
    requests = profiles(a100, *request_)
    used = 0
    for start, size in occupied:
        used |= _mask(start, size)
    assert not hami_greedy(a100, requests, used)
    assert brute_force_fits(a100, requests, [gpu(*occupied)])
    assert fits(a100, requests, [gpu(*occupied)])


def brute_force_fits(
    model: GpuModel, requests: Sequence[MigProfile], gpus: Sequence[GpuState]
) -> bool:
    """Reference: try every (gpu, start) for every instance, existing unplaced ones included.

    Identical requested instances are tried in non-decreasing (gpu, start) order only, which
    drops permutations of one assignment and nothing else.
    """
    used: list[int] = []
    for state in gpus:
        m = 0
        for start, size in state.occupied:
            m |= _mask(start, size)
        used.append(m)
    counts: list[Counter[str]] = [Counter() for _ in gpus]
    items: list[tuple[MigProfile, int | None]] = []
    for g, state in enumerate(gpus):
        for name in state.occupied_profiles:
            p = model.profile(name)
            assert p is not None
            items.append((p, g))
    items.extend((p, None) for p in sorted(requests, key=lambda p: p.name))

    def run(i: int, previous: tuple[int, int]) -> bool:
        if i == len(items):
            return True
        p, fixed = items[i]
        assert p.placement is not None
        same_as_previous = (
            fixed is None and i > 0 and items[i - 1][1] is None and items[i - 1][0] == p
        )
        for g in [fixed] if fixed is not None else range(len(gpus)):
            if counts[g][p.name] >= p.max_count:
                continue
            for start in p.placement.starts:
                if same_as_previous and (g, start) < previous:
                    continue
                m = _mask(start, p.placement.size)
                if used[g] & m:
                    continue
                used[g] |= m
                counts[g][p.name] += 1
                ok = run(i + 1, (g, start))
                used[g] &= ~m
                counts[g][p.name] -= 1
                if ok:
                    return True
        return False

    return run(0, (-1, -1))


def random_gpu(rng: random.Random, model: GpuModel, uuid: str) -> GpuState:
    """A consistent GPU: legal, non-overlapping instances within max_count, some with known
    placements (occupied) and some known only by profile (occupied_profiles)."""
    placeable = [p for p in model.profiles if p.placement is not None]
    occupied: list[tuple[int, int]] = []
    pinned: list[str] = []
    used = 0
    counts: Counter[str] = Counter()
    for _ in range(rng.randint(0, 4)):
        p = rng.choice(placeable)
        assert p.placement is not None
        start = rng.choice(p.placement.starts)
        m = _mask(start, p.placement.size)
        if used & m or counts[p.name] >= p.max_count:
            continue
        used |= m
        counts[p.name] += 1
        if rng.random() < 0.3:
            pinned.append(p.name)
        else:
            occupied.append((start, p.placement.size))
    return GpuState(uuid, tuple(occupied), tuple(pinned))


@pytest.mark.parametrize(
    ("model_id", "seed"),
    [("A100-40GB", 1), ("A100-40GB", 2), ("A30-24GB", 3), ("RTX-PRO-6000-96GB", 4),
     ("H100-94GB", 5)],
)
def test_place_agrees_with_brute_force(catalog: Catalog, model_id: str, seed: int) -> None:
    model = _model(catalog, model_id)
    base = [p for p in model.profiles if p.is_base]
    rng = random.Random(seed)
    outcomes: Counter[bool] = Counter()
    for case in range(120):
        gpus = [random_gpu(rng, model, f"GPU-{g}") for g in range(rng.randint(1, 3))]
        kinds = rng.sample(base, rng.randint(1, min(3, len(base))))
        requests = [rng.choice(kinds) for _ in range(rng.randint(1, 5))]
        expected = brute_force_fits(model, requests, gpus)
        result = place(model, requests, gpus)
        assert (result is not None) == expected, (
            f"case {case}: {[p.name for p in requests]} on {gpus}: "
            f"place={result}, brute force={expected}"
        )
        if result is not None:
            assert_legal(model, requests, gpus, result)
        outcomes[expected] += 1
    assert outcomes[True] > 10 and outcomes[False] > 10, outcomes  # both answers exercised


# --- existing instances with unknown placements ---------------------------------------------


def test_pinned_7g_leaves_nothing(a100: GpuModel) -> None:
    full = gpu(pinned=("7g.40gb",))
    for name in ("1g.5gb", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"):
        assert not fits(a100, profiles(a100, name), [full]), name


def test_pinned_two_3g_leave_no_1g(a100: GpuModel) -> None:
    state = gpu(pinned=("3g.20gb", "3g.20gb"))
    assert not fits(a100, profiles(a100, "1g.5gb"), [state])
    assert not fits(a100, profiles(a100, "3g.20gb"), [state])


def test_pinned_instances_are_moved_around_by_the_search(a100: GpuModel) -> None:
    # 3g.20gb could sit at 0 or 4; a new 4g.20gb needs 0, so the 3g is assumed at 4.
    state = gpu(pinned=("3g.20gb",))
    result = place(a100, profiles(a100, "4g.20gb"), [state])
    assert starts_of(result) == Counter({("4g.20gb", 0): 1})
    assert not fits(a100, profiles(a100, "4g.20gb", "1g.5gb"), [state])
    assert fits(a100, profiles(a100, "2g.10gb", "2x1g.5gb"), [state])


def test_pinned_count_against_max_count(a100: GpuModel) -> None:
    state = gpu(pinned=("1g.5gb+me",))
    assert not fits(a100, profiles(a100, "1g.5gb+me"), [state])
    assert fits(a100, profiles(a100, "1g.5gb+me"), [state, gpu(uuid="GPU-b")])
    assert fits(a100, profiles(a100, "6x1g.5gb"), [gpu(pinned=("1g.5gb",))])
    assert not fits(a100, profiles(a100, "7x1g.5gb"), [gpu(pinned=("1g.5gb",))])


def test_pinned_with_same_profile_reports_only_new_instances(a100: GpuModel) -> None:
    state = gpu(pinned=("2g.10gb", "2g.10gb"))
    result = place(a100, profiles(a100, "2g.10gb"), [state])
    assert result is not None and len(result.assignments) == 1
    assert_legal(a100, profiles(a100, "2g.10gb"), [state], result)
    assert not fits(a100, profiles(a100, "2x2g.10gb"), [state])


def test_pinned_and_occupied_together(a100: GpuModel) -> None:
    # Units 0..3 are taken, so the existing 2g.10gb can only be at 4: unit 6 is all that's left.
    state = gpu((0, 4), pinned=("2g.10gb",))
    assert starts_of(place(a100, profiles(a100, "1g.5gb"), [state])) == Counter(
        {("1g.5gb", 6): 1}
    )
    assert not fits(a100, profiles(a100, "2g.10gb"), [state])
    assert not fits(a100, profiles(a100, "2x1g.5gb"), [state])


def test_variant_max_count(a100: GpuModel) -> None:
    assert not fits(a100, profiles(a100, "2x1g.5gb+me"), [gpu()])
    result = place(a100, profiles(a100, "2x1g.5gb+me"), [gpu(), gpu(uuid="GPU-b")])
    assert result is not None and result.gpus_used == (0, 1)


# --- node-level behaviour -------------------------------------------------------------------


def test_empty_request_fits_without_gpus(a100: GpuModel) -> None:
    result = place(a100, [], [gpu()])
    assert result is not None and result.assignments == () and result.gpus_used == ()


def test_no_gpus_fits_nothing(a100: GpuModel) -> None:
    assert place(a100, profiles(a100, "1g.5gb"), []) is None


def test_fuller_gpu_is_preferred(a100: GpuModel) -> None:
    gpus = [gpu(uuid="GPU-a"), gpu((0, 4), uuid="GPU-b")]
    result = place(a100, profiles(a100, "1g.5gb"), gpus)
    assert result is not None and result.gpus_used == (1,)


def test_request_spread_over_many_gpus(a100: GpuModel) -> None:
    gpus = [gpu((0, 4), (4, 2), uuid=f"GPU-{g}") for g in range(4)]  # one 1g slot each
    result = place(a100, profiles(a100, "4x1g.5gb"), gpus)
    assert result is not None
    assert_legal(a100, profiles(a100, "4x1g.5gb"), gpus, result)
    assert result.gpus_used == (0, 1, 2, 3)
    assert not fits(a100, profiles(a100, "5x1g.5gb"), gpus)


def test_fifty_six_1g_fit_an_8_gpu_node_fifty_seven_do_not(a100: GpuModel) -> None:
    gpus = [gpu(uuid=f"GPU-{g}") for g in range(8)]
    result = place(a100, profiles(a100, "56x1g.5gb"), gpus)
    assert result is not None
    assert_legal(a100, profiles(a100, "56x1g.5gb"), gpus, result)
    assert place(a100, profiles(a100, "57x1g.5gb"), gpus) is None


def test_mixed_request_on_a_4_gpu_node(a100: GpuModel) -> None:
    gpus = [gpu(uuid=f"GPU-{g}") for g in range(4)]
    requests = profiles(a100, "4x3g.20gb", "4x2g.10gb", "8x1g.5gb")
    assert fits(a100, requests, gpus)
    assert not fits(a100, [*requests, *profiles(a100, "1g.5gb")], gpus)


# --- whole GPUs -----------------------------------------------------------------------------


def test_place_whole_gpus_needs_idle_gpus() -> None:
    gpus = [gpu((6, 1), uuid="GPU-a"), gpu(pinned=("1g.5gb",), uuid="GPU-b"),
            gpu(uuid="GPU-c"), gpu(uuid="GPU-d")]
    result = place_whole_gpus(2, gpus)
    assert result is not None
    assert result.gpus_used == (2, 3)
    assert {(a.gpu_index, a.profile) for a in result.assignments} == {(2, "whole"), (3, "whole")}
    assert place_whole_gpus(3, gpus) is None
    assert place_whole_gpus(1, gpus[:2]) is None


def test_place_whole_gpus_zero() -> None:
    result = place_whole_gpus(0, [])
    assert result is not None and result.assignments == ()


def test_idle() -> None:
    assert gpu().idle
    assert not gpu((0, 1)).idle
    assert not gpu(pinned=("1g.5gb",)).idle


# --- errors ---------------------------------------------------------------------------------


def without_placements(model: GpuModel) -> GpuModel:
    """The model as an override may add it: profiles known, placement table not."""
    return dataclasses.replace(
        model, id=f"{model.id}-UNPLACED", placement_units=None,
        profiles=tuple(dataclasses.replace(p, placement=None) for p in model.profiles))


@pytest.mark.parametrize("model_id", ["RTX-PRO-5000-48GB", "A100-40GB"])
def test_unknown_placement_table_raises(catalog: Catalog, model_id: str) -> None:
    model = without_placements(_model(catalog, model_id))
    base = next(p for p in model.profiles if p.is_base)
    with pytest.raises(PlacementError, match=f"{model_id}-UNPLACED"):
        place(model, [base], [gpu()])


@pytest.mark.parametrize("occupied", [(7, 2), (8, 1), (-1, 1), (0, 0), (0, 9)])
def test_occupied_outside_the_grid_raises(a100: GpuModel, occupied: tuple[int, int]) -> None:
    with pytest.raises(PlacementError, match="GPU-bad"):
        place(a100, profiles(a100, "1g.5gb"), [gpu(), gpu(occupied, uuid="GPU-bad")])


def test_occupied_outside_the_rtx_grid_raises(rtx6000: GpuModel) -> None:
    assert fits(rtx6000, profiles(rtx6000, "1g.24gb"), [gpu((9, 3))])
    with pytest.raises(PlacementError):
        place(rtx6000, profiles(rtx6000, "1g.24gb"), [gpu((10, 3))])


@pytest.mark.parametrize("name", ["9g.99gb", "whole", "1g.24gb"])
def test_unknown_occupied_profile_raises(a100: GpuModel, name: str) -> None:
    with pytest.raises(PlacementError, match="GPU-a"):
        place(a100, profiles(a100, "1g.5gb"), [gpu(pinned=(name,))])


def test_whole_card_is_not_a_mig_request(a100: GpuModel) -> None:
    with pytest.raises(PlacementError):
        place(a100, [a100.whole], [gpu()])


def test_profile_of_another_model_raises(catalog: Catalog, a100: GpuModel) -> None:
    # "1g.10gb" is 2 units on A100-40GB but 1 unit on A100-80GB: names alone do not identify.
    other = _model(catalog, "A100-80GB").profile("1g.10gb")
    assert other is not None
    with pytest.raises(PlacementError):
        place(a100, [other], [gpu()])


@pytest.mark.parametrize("model_id", ["A100-40GB", "A30-24GB", "H100-94GB"])
def test_single_profile_shortcut_gives_the_general_searchs_answer(
        catalog: Catalog, model_id: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Recommend only ever places n instances of one profile; `place` answers that without
    the search over count vectors. The answer must be the general search's, placement for
    placement (the policy scores nodes by it)."""
    from recommender.core import placement

    model = _model(catalog, model_id)
    base = [p for p in model.profiles if p.is_base]
    rng = random.Random(11)
    compared = 0
    for _ in range(150):
        gpus = [random_gpu(rng, model, f"GPU-{g}") for g in range(rng.randint(1, 8))]
        requests = [rng.choice(base)] * rng.randint(1, 12)
        fast = place(model, requests, gpus)
        monkeypatch.setattr(placement, "SINGLE_KIND_SHORTCUT", False)
        general = place(model, requests, gpus)
        monkeypatch.setattr(placement, "SINGLE_KIND_SHORTCUT", True)
        assert fast == general, (requests[0].name, len(requests), gpus)
        compared += fast is not None
    assert compared > 20  # enough of them fit to compare placements, not just "no"


def test_gpu_states_are_interned_by_what_they_hold_and_nodes_by_their_shape() -> None:
    """rpc/convert.py reads a GPU message's bytes without its uuid: GPUs that hold the same
    share one state (uuid or not, long uuids and long messages too), and nodes whose GPUs are
    in the same states in the same order share their GPUs and the policy's answers; another
    order is another shape."""
    from recommender._proto.intelliscale.recommender.v1 import recommender_pb2 as pb
    from recommender.core.catalog import load_catalog
    from recommender.rpc.convert import request_from_pb

    catalog = load_catalog()
    low = [pb.Placement(start=0, size=4)]
    high = [pb.Placement(start=4, size=4)]
    many = [pb.Placement(start=k, size=1) for k in range(7)]  # > 127 bytes with the uuid
    gpus = [pb.Gpu(uuid="GPU-a", occupied=low), pb.Gpu(occupied=high),
            pb.Gpu(uuid="G" * 300, occupied=low), pb.Gpu(uuid="GPU-b", occupied=high),
            pb.Gpu(uuid="x" * 200, occupied=many, occupied_profiles=["1g.5gb"] * 30),
            pb.Gpu(uuid="y", occupied=many, occupied_profiles=["1g.5gb"] * 30)]
    m = pb.RecommendRequest(action_id="a", pools=[pb.Pool(
        pool_id="p", gpu_model="A100-40GB", strategy=pb.MIG_STRATEGY_MIXED, nodes=[
            pb.Node(node_id="n1", gpus=gpus[0:2]), pb.Node(node_id="n2", gpus=gpus[2:4]),
            pb.Node(node_id="n3", gpus=[gpus[1], gpus[0]]),
            pb.Node(node_id="n4", gpus=gpus[4:5]), pb.Node(node_id="n5", gpus=gpus[5:6])])])
    n1, n2, n3, n4, n5 = request_from_pb(catalog, m).pools[0].nodes
    assert [n.node_id for n in (n1, n2, n3, n4, n5)] == ["n1", "n2", "n3", "n4", "n5"]
    assert n1.gpus is n2.gpus and n1.placements is n2.placements
    assert [g.occupied for g in n1.gpus] == [((0, 4),), ((4, 4),)]
    assert n3.gpus == (n1.gpus[1], n1.gpus[0]) and n3.placements is not n1.placements
    assert n4.gpus is n5.gpus and len(n4.gpus[0].occupied_profiles) == 30
    assert n4.gpus[0].occupied == tuple((k, 1) for k in range(7))


def test_a_bad_gpu_among_alike_nodes_is_named_by_its_path() -> None:
    """Nodes and GPUs are read from the pool's bytes (rpc/convert.py), but a field that is
    wrong is still named by its path, whichever node and GPU it is, and a node_id is checked
    as every id is."""
    from recommender._proto.intelliscale.recommender.v1 import recommender_pb2 as pb
    from recommender.core.catalog import load_catalog
    from recommender.rpc.convert import InvalidArgument, request_from_pb

    catalog = load_catalog()
    good = pb.Gpu(uuid="g", occupied=[pb.Placement(start=0, size=4)])

    def request(*nodes: pb.Node) -> pb.RecommendRequest:
        return pb.RecommendRequest(action_id="a", pools=[pb.Pool(
            pool_id="p", gpu_model="A100-40GB", strategy=pb.MIG_STRATEGY_MIXED,
            profiles=["1g.5gb"], nodes=list(nodes))])

    bad = pb.Gpu(uuid="b", occupied=[pb.Placement(start=6, size=4)])
    with pytest.raises(InvalidArgument, match=r"^pools\[0\]\.nodes\[2\]\.gpus\[1\]\.occupied\[0\]"):
        request_from_pb(catalog, request(*(pb.Node(node_id=f"n{k}", gpus=[good, good])
                                           for k in range(2)),
                                         pb.Node(node_id="n2", gpus=[good, bad])))
    with pytest.raises(InvalidArgument, match=r"^pools\[0\]\.nodes\[1\]\.node_id: required"):
        request_from_pb(catalog, request(pb.Node(node_id="n0", gpus=[good]),
                                         pb.Node(node_id="  ", gpus=[good])))
    ids = [n.node_id for n in request_from_pb(catalog, request(
        pb.Node(node_id=" né-0 ", gpus=[good]), pb.Node(node_id="n" * 200, gpus=[good]))
    ).pools[0].nodes]
    assert ids == ["né-0", "n" * 200]


def test_the_byte_reader_of_nodes_agrees_with_protobuf_on_random_messages() -> None:
    """rpc/convert.py reads nodes and GPUs from a pool's bytes by hand (field numbers and wire
    types of proto/): on random pools (empty and 127/128/300-byte ids, GPUs with and without
    uuids, nodes without GPUs, unicode), what it reads is what protobuf parses, and bytes it
    does not expect (an unknown field) make it give way to protobuf instead of guessing."""
    import random

    from recommender._proto.intelliscale.recommender.v1 import recommender_pb2 as pb
    from recommender.rpc.convert import _node_bytes, _occupancies

    rng = random.Random(5)

    def text() -> str:
        return rng.choice(["", "a", "né-ü", "x" * 126, "y" * 127, "z" * 128, "w" * 300])

    for _ in range(300):
        pool = pb.Pool(pool_id=text(), gpu_model=rng.choice(["", "A100-40GB"]),
                       strategy=rng.choice([0, 1, 2, 3]),
                       profiles=[text() for _ in range(rng.randint(0, 2))])
        for _ in range(rng.randint(0, 4)):
            node = pool.nodes.add(node_id=text())
            for _ in range(rng.randint(0, 3)):
                node.gpus.add(uuid=text(), occupied_profiles=[text()] * rng.randint(0, 2),
                              occupied=[pb.Placement(start=rng.randint(0, 7),
                                                     size=rng.randint(0, 300))
                                        for _ in range(rng.randint(0, 20))])
        raw = pool.SerializeToString()
        listed = _node_bytes(raw)
        assert listed == [n.SerializeToString() for n in pool.nodes]
        for node_raw, node in zip(listed, pool.nodes, strict=True):
            read = _occupancies(node_raw)
            assert read is not None
            assert read[0] == node.node_id
            expected = []
            for g in node.gpus:
                anonymous = pb.Gpu()
                anonymous.CopyFrom(g)
                anonymous.uuid = ""
                expected.append(anonymous.SerializeToString())
            assert read[1] == expected
    unknown = pb.Node(node_id="n").SerializeToString() + b"\x18\x01"  # field 3, a varint
    assert _occupancies(unknown) is None
    assert _node_bytes(pb.Pool(pool_id="p").SerializeToString() + b"\x30\x01") is None
