"""The geometries one card can take: every maximal legal set of MIG instances (the placement
search decides), NVIDIA's stock mig-parted configurations, and a layout's capacity."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

from recommender.core.catalog import WHOLE_GPU, GpuModel, MigProfile
from recommender.core.placement import GpuState, PlacementError, place

MIB_PER_GIB = 1024.0


class LayoutError(ValueError):
    """The request cannot be laid out on this model (unknown placements, no GPUs)."""


@dataclass(frozen=True)
class Geometry:
    """One card's partition: instances per profile and where each one starts."""

    counts: tuple[tuple[str, int], ...]
    """(profile, count), sorted by profile name; ((whole, 1),) for a card with MIG off."""
    placements: tuple[tuple[str, int, int], ...]
    """(profile, start, size) of every instance, by start."""
    mig_enabled: bool = True

    @property
    def profiles(self) -> dict[str, int]:
        return dict(self.counts)

    @property
    def label(self) -> str:
        if not self.mig_enabled:
            return "MIG off (whole card)"
        order = sorted(self.counts, key=lambda pc: (compute_of(pc[0]), pc[0]))
        return " + ".join(f"{n} x {p}" for p, n in order)


def compute_of(name: str) -> int:
    head = name.split("g.", 1)[0]
    return int(head) if head.isdigit() else 99


def _whole_geometry() -> Geometry:
    return Geometry(counts=((WHOLE_GPU, 1),), placements=(), mig_enabled=False)


def check_placeable(model: GpuModel) -> None:
    if not model.placements_known or model.placement_units is None:
        raise LayoutError(f"{model.id}: placement table unknown; cannot lay out MIG instances")


def geometry_of(model: GpuModel, counts: Mapping[str, int]) -> Geometry | None:
    """The geometry with these counts, placed on one idle card; None when it does not fit."""
    check_placeable(model)
    if set(counts) == {WHOLE_GPU}:
        return _whole_geometry() if counts[WHOLE_GPU] == 1 else None
    requests: list[MigProfile] = []
    for name, n in sorted(counts.items()):
        prof = model.profile(name)
        if prof is None or prof.whole_gpu or n < 0:
            return None
        requests += [prof] * n
    try:
        found = place(model, requests, [GpuState("layout")])
    except PlacementError:
        return None
    if found is None:
        return None
    kept = tuple(sorted((p, n) for p, n in counts.items() if n > 0))
    placements = tuple(sorted(((a.profile, a.start, a.size) for a in found.assignments),
                              key=lambda x: (x[1], x[0])))
    return Geometry(counts=kept, placements=placements)


@lru_cache(maxsize=64)
def card_geometries(model: GpuModel, extra: tuple[str, ...] = ()) -> tuple[Geometry, ...]:
    """Every maximal geometry of one card over the base profiles (and the `extra` variants,
    such as 1g.5gb+me, when the demand asked for them), and the card with MIG off."""
    check_placeable(model)
    names = {p.name for p in model.profiles if p.is_base and p.placement is not None}
    names |= {e for e in extra if (q := model.profile(e)) is not None and q.placement is not None}
    profiles = sorted((p for p in model.profiles if p.name in names),
                      key=lambda p: (-(p.placement.size if p.placement else 0), p.name))
    fits: dict[tuple[int, ...], Geometry | None] = {}

    def fit(vector: tuple[int, ...]) -> Geometry | None:
        if vector not in fits:
            fits[vector] = geometry_of(
                model, {p.name: n for p, n in zip(profiles, vector, strict=True) if n})
        return fits[vector]

    feasible: list[tuple[int, ...]] = []

    def grow(prefix: tuple[int, ...]) -> None:
        k = len(prefix)
        if k == len(profiles):
            if any(prefix):
                feasible.append(prefix)
            return
        for n in range(profiles[k].max_count + 1):
            vector = (*prefix, n) + (0,) * (len(profiles) - k - 1)
            if n and fit(vector) is None:
                break  # monotone: more of this profile cannot fit either
            grow((*prefix, n))

    grow(())
    out: list[Geometry] = []
    for v in feasible:
        bigger = (tuple(n + (i == j) for j, n in enumerate(v)) for i in range(len(profiles)))
        if any(fit(b) is not None for b in bigger):
            continue
        g = fit(v)
        assert g is not None
        out.append(g)
    out.sort(key=lambda g: g.label)
    return (*out, _whole_geometry())


def stock_layouts(model: GpuModel) -> list[tuple[str, Geometry]]:
    """NVIDIA mig-parted's stock configurations for this model: all-balanced, all-<profile>
    (base profiles, each at the most instances that place on one card) and all-disabled."""
    check_placeable(model)
    base = [p for p in model.profiles if p.is_base and p.placement is not None]
    out: list[tuple[str, Geometry]] = []
    pattern = {7: {1: 2, 2: 1, 3: 1}, 4: {1: 2, 2: 1}}.get(model.compute_slices)
    if pattern:
        counts: dict[str, int] = {}
        for compute, n in pattern.items():
            options = [p for p in base if p.compute_slices == compute]
            if options:
                counts[min(options, key=lambda p: (p.memory_mib, p.name)).name] = n
        balanced = geometry_of(model, counts) if len(counts) == len(pattern) else None
        if balanced is not None:
            out.append(("all-balanced", balanced))
    for p in sorted(base, key=lambda p: (p.compute_slices, p.memory_mib, p.name)):
        for n in range(p.max_count, 0, -1):
            g = geometry_of(model, {p.name: n})
            if g is not None:
                out.append((f"all-{p.name}", g))
                break
    out.append(("all-disabled", _whole_geometry()))
    return out


def capacity_of(gpus: Sequence[Geometry]) -> dict[str, int]:
    """Instances per profile across the cards."""
    total: dict[str, int] = {}
    for g in gpus:
        for p, n in g.counts:
            total[p] = total.get(p, 0) + n
    return total
