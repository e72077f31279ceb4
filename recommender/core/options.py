"""What a pool can hand out: its profiles, the pod resources that name them, and whether
`count` of one fit on one of its nodes (an `Option`), memoised per request."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from recommender.core import config
from recommender.core.catalog import MigProfile
from recommender.core.domain import Node, Pool, Request, Rung, Strategy
from recommender.core.placement import PlacementError, place, place_whole_gpus


class NoFit(Exception):
    """No offered pool can ever fit the request (FAILED_PRECONDITION); reasons per pool."""

    def __init__(self, reasons: dict[str, str]) -> None:
        self.reasons = reasons
        super().__init__("; ".join(f"{k}: {v}" for k, v in reasons.items()))


@dataclass(frozen=True)
class Option:
    index: int
    pool: Pool
    profile: MigProfile
    node_id: str
    node_gpus: int = 0


def candidate_profiles(pool: Pool, *, more_compute_first: bool = False) -> list[MigProfile]:
    """Profiles this pool can hand out, smallest memory first.

    At equal memory, fewer compute slices first (unless the action is SM-hungry): 1g.10gb
    serves a memory-bound worker as well as 2g.10gb and leaves compute to others.
    """
    if pool.strategy is Strategy.NONE:
        return [pool.gpu_model.whole]
    profiles = list(pool.profiles) or [p for p in pool.gpu_model.profiles if p.is_base]
    if pool.strategy is Strategy.DYNAMIC:
        # HAMi maps a request to GPU_INSTANCE_PROFILE_<N>_SLICE; it cannot select these.
        profiles = [p for p in profiles if not p.double_memory_1g]
    sign = -1 if more_compute_first else 1
    return sorted(profiles, key=lambda p: (p.memory_mib, sign * p.compute_slices, p.name))


def pod_resources(pool: Pool, profile: MigProfile, count: int) -> dict[str, str]:
    """The limits the runner emits, as each device plugin names them (DESIGN.md section 2)."""
    n = str(count)
    match pool.strategy:
        case Strategy.MIXED:
            return {f"nvidia.com/mig-{pool.spelling(profile)}": n}
        case Strategy.DYNAMIC:
            return {"nvidia.com/gpu": n, "nvidia.com/gpumem": str(profile.memory_mib)}
        case Strategy.SINGLE | Strategy.NONE:
            return {"nvidia.com/gpu": n}


def find_node(pool: Pool, profile: MigProfile, count: int
              ) -> tuple[str | None, int, str]:
    """The node to hold all `count` instances, as (node_id, its GPU count, ""), or
    (None, 0, why not). Without nodes the capacity is unknown and assumed to fit: node_id "".

    Among nodes that fit, the one that breaks into fewest idle GPUs and leaves the fewest free
    units on the GPUs it uses: fragments get filled and whole cards stay whole for big requests.
    """
    if not pool.nodes:
        return "", 0, ""
    if not profile.whole_gpu and not pool.gpu_model.placements_known:
        return None, 0, f"{pool.gpu_model.id} has no known placement table: cannot place MIG slices"
    units = pool.gpu_model.placement_units or 0
    best: tuple[tuple[int, int], Node] | None = None
    scored = 0
    key = (pool.gpu_model.id, units, profile, count)
    for node in pool.nodes_by_busy:
        # A node's answer depends only on the node, the model and the request: kept on the
        # node, it serves the fit, the fallback and the ladder, and, when the runner lists
        # the same node again (`rpc.convert` hands out the same Node for the same bytes),
        # the next calls too.
        score_or_none = node.placements.get(key, _UNSCORED)
        if score_or_none is _UNSCORED:
            try:
                score_or_none = _score(pool, node, profile, count, units)
            except PlacementError as e:
                return None, 0, str(e)
            node.placements[key] = score_or_none
        if score_or_none is None:
            continue
        score = score_or_none
        if best is None or score < best[0]:
            best = (score, node)
        scored += 1
        if scored >= config.MAX_NODES_SCORED or score == (0, 0):
            break
    if best is None:
        return None, 0, f"no node has room for {count} x {profile.name}"
    return best[1].node_id, len(best[1].gpus), ""


_UNSCORED: Any = object()


def _score(pool: Pool, node: Node, profile: MigProfile, count: int, units: int
           ) -> tuple[int, int] | None:
    """(idle GPUs broken, free units left on the GPUs used) of placing `count` x `profile`
    on the node, or None when they do not fit. Raises PlacementError."""
    rule = profile.placement
    if rule is not None and not profile.whole_gpu:
        free = node.placements.get(("free units", units))
        if free is None:
            free = node.placements[("free units", units)] = sum(
                units - g.used_mask.bit_count() for g in node.gpus)
        if free // rule.size < count:
            return None  # not enough free units at all: the cheapest bound, once per node
    if _room_at_most(node, profile, units) < count:
        return None  # cannot fit even ignoring overlaps between the new instances
    if profile.whole_gpu:
        found = place_whole_gpus(count, node.gpus)
    else:
        found = place(pool.gpu_model, [profile] * count, node.gpus)
    if found is None:
        return None
    broken = sum(1 for g in found.gpus_used if node.gpus[g].idle)
    left = 0
    if not profile.whole_gpu:
        used_units = {g: sum(a.size for a in found.assignments if a.gpu_index == g)
                      for g in found.gpus_used}
        left = sum(
            units - sum(sz for _, sz in node.gpus[g].occupied) - used_units[g]
            for g in found.gpus_used
        )
    return broken, left


def _room_at_most(node: Node, profile: MigProfile, units: int) -> int:
    """An upper bound on how many `profile` instances the node can take: free legal starts
    (capped by the profile's count per GPU and by the free units), summed over its GPUs."""
    if profile.whole_gpu:
        return sum(1 for g in node.gpus if g.idle)
    rule = profile.placement
    if rule is None:
        return 0
    room = 0
    # Everything the bound depends on, as one string: its hash is computed once, not per GPU.
    key = f"room {profile.name} {units} {rule.size} {profile.max_count} {rule.starts}"
    for gpu in node.gpus:
        here = gpu.answers.get(key)
        if here is None:
            used = gpu.used_mask
            free_units = units - used.bit_count()
            starts = sum(1 for st in rule.starts if not used & (((1 << rule.size) - 1) << st))
            here = gpu.answers[key] = min(starts, profile.max_count, free_units // rule.size)
        room += here
    return room


def eligible_pools(request: Request) -> list[tuple[int, Pool]]:
    if not request.needs_peer_to_peer:
        return list(enumerate(request.pools))
    pools = [(i, p) for i, p in enumerate(request.pools) if p.strategy is Strategy.NONE]
    if not pools:
        raise NoFit({
            "needs_peer_to_peer": "slices of one card cannot do peer-to-peer (NCCL, model "
            "parallelism); offer a pool with MIG_STRATEGY_NONE (whole cards)"
        })
    return pools


def rung_of(option: Option, count: int) -> Rung:
    return Rung(
        pool_id=option.pool.pool_id,
        gpu_model=option.pool.gpu_model.id,
        profile=option.profile,
        count=count,
        resources=pod_resources(option.pool, option.profile, count),
        node_id=option.node_id,
        card_compute_slices=option.pool.gpu_model.compute_slices,
        node_gpus=option.node_gpus,
    )


Memo = dict[tuple[str, str, int], tuple[str | None, int, str]]


def placeable_option(index: int, pool: Pool, profile: MigProfile, count: int,
                     memo: Memo | None = None) -> tuple[Option | None, str]:
    """A placeable option, or why not. `memo` (one per request) spares repeated searches:
    the fit, the fallback and the ladder ask about the same (pool, profile, count)."""
    key = (pool.pool_id, profile.name, count)
    if memo is not None and key in memo:
        node_id, gpus, why = memo[key]
    else:
        node_id, gpus, why = find_node(pool, profile, count)
        if memo is not None:
            memo[key] = (node_id, gpus, why)
    if node_id is None:
        return None, why
    return Option(index, pool, profile, node_id, gpus), ""
