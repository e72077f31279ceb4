"""Exact search for legal, non-overlapping MIG placements on one GPU and across a node's GPUs.

A profile instance occupies `size` consecutive units starting at one of its legal starts; two
instances conflict when their unit ranges overlap. Greedy placement (HAMi's production path)
can miss a solution that exists, for instance when a small slice takes the only start a larger
one could use, so this is a depth-first search over instances with memoised dead ends. It is
exact: it answers "no" only when no assignment exists. Among solutions it prefers, at each step,
the placement that destroys the fewest free placements of larger profiles (so the big slices
stay available) and then HAMi's own start order, so answers look familiar to operators.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from recommender.core.catalog import GpuModel, MigProfile


@dataclass(frozen=True)
class GpuState:
    """One GPU as the runner describes it."""

    uuid: str
    occupied: tuple[tuple[int, int], ...] = ()
    """(start, size) placements in use."""
    occupied_profiles: tuple[str, ...] = ()
    """Profiles in use whose placements are unknown: they are placed by the search too."""

    @property
    def idle(self) -> bool:
        return not self.occupied and not self.occupied_profiles

    @cached_property
    def used_mask(self) -> int:
        """Bit i set when placement unit i is in use by a known placement (not checked against
        the model's units: `_occupied_mask` does that where it matters)."""
        mask = 0
        for start, size in self.occupied:
            mask |= ((1 << size) - 1) << start
        return mask

    @cached_property
    def extent(self) -> int:
        """One past the last unit a known placement uses; -1 when one is malformed (a
        negative start or a size below 1). `place` checks it against the model's units."""
        if any(start < 0 or size <= 0 for start, size in self.occupied):
            return -1
        return max((start + size for start, size in self.occupied), default=0)

    @cached_property
    def answers(self) -> dict[Any, Any]:
        """Bounds worked out for this GPU, by what was asked (`options._room_at_most`): a GPU
        state is immutable, and `rpc.convert` hands out the same one for the same message, so
        a GPU seen before is not worked out again whichever node lists it."""
        return {}


@dataclass(frozen=True)
class Assignment:
    gpu_index: int
    profile: str
    start: int
    size: int


@dataclass(frozen=True)
class NodePlacement:
    """Where each requested instance goes (existing unplaced profiles are not listed)."""

    assignments: tuple[Assignment, ...]
    gpus_used: tuple[int, ...] = field(default=())


class PlacementError(ValueError):
    """The request cannot be interpreted on this GPU model (not "it does not fit")."""


def _mask(start: int, size: int) -> int:
    return ((1 << size) - 1) << start


def _occupied_mask(gpu: GpuState, units: int) -> int:
    mask = 0
    for start, size in gpu.occupied:
        if start < 0 or size <= 0 or start + size > units:
            raise PlacementError(
                f"gpu {gpu.uuid}: occupied placement {start}:{size} is outside 0..{units}"
            )
        mask |= _mask(start, size)
    return mask


def _place_on_gpu(
    items: Sequence[MigProfile], mask: int, larger: dict[str, list[int]]
) -> list[tuple[MigProfile, int]] | None:
    """Exact depth-first search on one GPU (at most 12 units, so it is small)."""
    order = sorted(items, key=lambda p: (
        -(p.placement.size if p.placement else 0),
        len(p.placement.starts) if p.placement else 0,
        p.name,
    ))
    failed: set[tuple[int, int]] = set()
    out: list[tuple[MigProfile, int]] = []

    def run(i: int, used: int) -> bool:
        if i == len(order):
            return True
        if (i, used) in failed:
            return False
        profile = order[i]
        assert profile.placement is not None
        size = profile.placement.size
        high_first = profile.compute_slices in (1, 3)  # HAMi's start order, as a tie-break
        options = []
        for start in profile.placement.starts:
            m = _mask(start, size)
            if m & used:
                continue
            destroyed = sum(1 for q in larger[profile.name] if q & used == 0 and q & m)
            options.append((destroyed, -start if high_first else start, start, m))
        for _, _, start, m in sorted(options):
            out.append((profile, start))
            if run(i + 1, used | m):
                return True
            out.pop()
        failed.add((i, used))
        return False

    return list(out) if run(0, mask) else None


SINGLE_KIND_SHORTCUT = True
"""`_place_one_kind` for requests of one profile (off only in the test that compares it with
the general search)."""


def place(model: GpuModel, requests: Sequence[MigProfile], gpus: Sequence[GpuState]
          ) -> NodePlacement | None:
    """Places every requested MIG instance on the given GPUs of one node, or returns None.

    Exact in two levels: for each GPU, which count vectors of the requested profiles fit
    (depth-first search over placements, with its unplaced existing profiles included), then a
    memoised search over GPUs that splits the requested counts among them. Fuller GPUs are
    tried first and each GPU takes as much as it can, so instances pack onto few cards.

    Raises PlacementError when the model's placement table is unknown or an occupied entry is
    not a placement of this model: the caller must not pretend such a request fits.
    """
    if not model.placements_known or model.placement_units is None:
        raise PlacementError(f"{model.id}: placement table unknown; cannot place MIG instances")
    units = model.placement_units
    # Checked and computed once per GPU state, however many searches ask about it.
    masks = [g.used_mask if 0 <= g.extent <= units else _occupied_mask(g, units) for g in gpus]
    pinned: list[list[MigProfile]] = []
    for gpu in gpus:
        mine = []
        for name in gpu.occupied_profiles:
            prof = model.profile(name)
            if prof is None or prof.whole_gpu or prof.placement is None:
                raise PlacementError(f"gpu {gpu.uuid}: unknown occupied profile {name!r}")
            mine.append(prof)
        pinned.append(mine)
    for prof in {id(p): p for p in requests}.values():  # each distinct profile once
        if prof.whole_gpu or prof.placement is None or model.profile(prof.name) != prof:
            raise PlacementError(f"{prof.name}: not a placeable MIG profile of {model.id}")
    kinds = sorted({p.name: p for p in requests}.values(), key=lambda p: p.name)
    larger = _larger(model)
    if len(kinds) == 1 and SINGLE_KIND_SHORTCUT:
        return _place_one_kind(model, kinds[0], len(requests), masks, pinned, larger)
    demand = tuple(sum(1 for r in requests if r.name == k.name) for k in kinds)

    def fits(g: int, vector: tuple[int, ...]) -> list[tuple[MigProfile, int]] | None:
        for k, n in zip(kinds, vector, strict=True):
            if n + sum(1 for p in pinned[g] if p.name == k.name) > k.max_count:
                return None
        items = [*pinned[g]] + [k for k, n in zip(kinds, vector, strict=True) for _ in range(n)]
        return _place_on_gpu(items, masks[g], larger)

    order = sorted(range(len(gpus)), key=lambda g: (-masks[g].bit_count(), g))
    per_gpu: dict[tuple[object, ...], list[tuple[MigProfile, int]] | None] = {}
    failed: set[tuple[int, tuple[int, ...]]] = set()
    chosen: dict[int, tuple[int, ...]] = {}

    def signature(g: int) -> tuple[int, tuple[str, ...]]:
        return masks[g], tuple(sorted(p.name for p in pinned[g]))

    def layout(g: int, vector: tuple[int, ...]) -> list[tuple[MigProfile, int]] | None:
        key = (signature(g), vector)
        if key not in per_gpu:
            per_gpu[key] = fits(g, vector)
        return per_gpu[key]

    units_of = [k.placement.size if k.placement else 0 for k in kinds]
    pinned_units = [sum(p.placement.size if p.placement else 0 for p in pinned[g])
                    for g in range(len(gpus))]
    free_after = [0] * (len(order) + 1)
    for pos in range(len(order) - 1, -1, -1):
        g = order[pos]
        free_after[pos] = free_after[pos + 1] + max(
            0, units - masks[g].bit_count() - pinned_units[g])
    feasible: dict[tuple[object, ...], list[tuple[int, ...]]] = {}

    def vectors_for(g: int) -> list[tuple[int, ...]]:
        """Count vectors (up to the demand) that fit on GPU g, most instances first.

        Fitting is monotone (fewer instances of a fitting vector fit too), so an
        infeasible vector is never extended.
        """
        sig = signature(g)
        if sig not in feasible:
            found: list[tuple[int, ...]] = []

            def grow(prefix: tuple[int, ...]) -> None:
                k = len(prefix)
                if k == len(kinds):
                    found.append(prefix)
                    return
                for n in range(demand[k] + 1):
                    vector = (*prefix, n) + (0,) * (len(kinds) - k - 1)
                    if n and layout(g, vector) is None:
                        break
                    grow((*prefix, n))

            grow(())
            found.sort(key=lambda v: -sum(v))
            feasible[sig] = found
        return feasible[sig]

    def split(pos: int, remaining: tuple[int, ...]) -> bool:
        if not any(remaining):
            return True
        if pos == len(order):
            return False
        # Not enough free units left on the remaining GPUs: no need to search.
        if sum(r * u for r, u in zip(remaining, units_of, strict=True)) > free_after[pos]:
            return False
        g = order[pos]
        key = (pos, remaining)
        if key in failed:
            return False
        for vector in vectors_for(g):
            if any(v > r for v, r in zip(vector, remaining, strict=True)):
                continue
            chosen[g] = vector
            if split(pos + 1, tuple(r - v for r, v in zip(remaining, vector, strict=True))):
                return True
            del chosen[g]
        failed.add(key)
        return False

    if not split(0, demand):
        return None
    return _node_placement({g: layout(g, v) for g, v in chosen.items() if any(v)}, pinned)


def _node_placement(found: dict[int, list[tuple[MigProfile, int]] | None],
                    pinned: Sequence[Sequence[MigProfile]]) -> NodePlacement:
    """The new instances of each GPU's layout (the GPU's existing ones are in it too, placed
    by the search when only their profile was known: not ours to report)."""
    out: list[Assignment] = []
    for g in sorted(found):
        layout = found[g]
        assert layout is not None
        mine = list(pinned[g])
        for prof, start in layout:
            if prof in mine:
                mine.remove(prof)
                continue
            out.append(Assignment(g, prof.name, start, prof.placement.size if prof.placement
                                  else 0))
    used = tuple(sorted({a.gpu_index for a in out}))
    return NodePlacement(assignments=tuple(out), gpus_used=used)


Layouts = dict[tuple[int, tuple[str, ...], int], list[tuple[MigProfile, int]] | None]
_ONE_KIND: dict[tuple[int, str], tuple[GpuModel, Layouts]] = {}
"""Per (model, profile): the layout of n instances beside a GPU's existing ones, by the GPU's
(occupied mask, unplaced profiles, n). A GPU's state is a few bits, so the same few states
recur on every node and every call: each is searched once per process."""
_ONE_KIND_MAX = 100_000


def _layouts(model: GpuModel, profile: MigProfile) -> Layouts:
    entry = _ONE_KIND.get((id(model), profile.name))
    if entry is None or entry[0] is not model:
        if sum(len(t) for _, t in _ONE_KIND.values()) > _ONE_KIND_MAX:
            _ONE_KIND.clear()
        entry = _ONE_KIND[(id(model), profile.name)] = (model, {})
    return entry[1]


def _place_one_kind(model: GpuModel, profile: MigProfile, count: int, masks: list[int],
                    pinned: list[list[MigProfile]], larger: dict[str, list[int]]
                    ) -> NodePlacement | None:
    """`place` for `count` instances of one profile (what Recommend asks), without the
    search over count vectors: with one kind, a GPU that fits n instances fits fewer, and
    GPUs take instances independently, so the two-level search comes down to this: fuller
    GPUs first, each taking as many as it can. Same answer as the general search (tested)."""
    layouts = _layouts(model, profile)

    def layout(g: int, n: int) -> list[tuple[MigProfile, int]] | None:
        key = (masks[g], tuple(sorted(p.name for p in pinned[g])) if pinned[g] else (), n)
        if key not in layouts:
            same = sum(1 for p in pinned[g] if p.name == profile.name)
            layouts[key] = (None if n + same > profile.max_count else
                            _place_on_gpu([*pinned[g], *([profile] * n)], masks[g], larger))
        return layouts[key]

    remaining = count
    chosen: dict[int, int] = {}
    for g in sorted(range(len(masks)), key=lambda g: (-masks[g].bit_count(), g)):
        n = 0
        while n < remaining and layout(g, n + 1) is not None:
            n += 1
        if n:
            chosen[g] = n
            remaining -= n
            if not remaining:
                break
    if remaining:
        return None
    return _node_placement({g: layout(g, n) for g, n in chosen.items()}, pinned)


_LARGER: dict[int, tuple[GpuModel, dict[str, list[int]]]] = {}


def _larger(model: GpuModel) -> dict[str, list[int]]:
    """Per profile, the placements of larger base profiles (computed once per model)."""
    entry = _LARGER.get(id(model))
    if entry is None or entry[0] is not model:
        if len(_LARGER) > 64:
            _LARGER.clear()
        entry = _LARGER[id(model)] = (model, _larger_of(model))
    return entry[1]


def _larger_of(model: GpuModel) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for p in model.profiles:
        if p.placement is None:
            continue
        out[p.name] = [
            _mask(s, q.placement.size)
            for q in model.profiles
            if q.placement is not None and q.is_base and q.placement.size > p.placement.size
            for s in q.placement.starts
        ]
    return out


def place_whole_gpus(count: int, gpus: Sequence[GpuState]) -> NodePlacement | None:
    """Whole cards need idle GPUs: nothing placed on them, MIG or otherwise."""
    idle = [g for g, gpu in enumerate(gpus) if gpu.idle]
    if len(idle) < count:
        return None
    chosen = idle[:count]
    return NodePlacement(
        assignments=tuple(Assignment(g, "whole", 0, 0) for g in chosen),
        gpus_used=tuple(chosen),
    )
