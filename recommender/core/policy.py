"""From an estimate to a decision: the cheapest (pool, profile, count) that fits, and the ladder.

Knows nothing of gRPC or SQL. The steps are post-processors in the VPA sense: the estimate is
rounded up to a profile the pool exposes, checked against the pool's nodes (all instances of a
pod on one node), and priced by the memory it would waste.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from recommender.core import config
from recommender.core.catalog import MigProfile
from recommender.core.domain import Decision, Node, Pool, Request, Rung, Strategy
from recommender.core.estimation import FALLBACK, Estimate
from recommender.core.placement import PlacementError, place, place_whole_gpus
from recommender.core.predictive import Predictive, expected_cost
from recommender.core.throughput import ThroughputCurve

LADDER = "ladder"
"""Source of a recommendation that is a rung taken after an OOM."""


class NoFit(Exception):
    """No offered pool can ever fit the request (FAILED_PRECONDITION); reasons per pool."""

    def __init__(self, reasons: dict[str, str]) -> None:
        self.reasons = reasons
        super().__init__("; ".join(f"{k}: {v}" for k, v in reasons.items()))


class LadderExhausted(Exception):
    """No rung above the one that ran out of memory (RESOURCE_EXHAUSTED)."""


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
    for gpu in node.gpus:
        used = gpu.used_mask
        free_units = units - used.bit_count()
        starts = sum(1 for st in rule.starts if not used & (((1 << rule.size) - 1) << st))
        room += min(starts, profile.max_count, free_units // rule.size)
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


def _rung(option: Option, count: int) -> Rung:
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


def _option(index: int, pool: Pool, profile: MigProfile, count: int, memo: Memo | None = None
            ) -> tuple[Option | None, str]:
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


@dataclass(frozen=True)
class _Choice:
    option: Option
    count: int
    throughput: float = 0.0


def _for_target(request: Request, pools: list[tuple[int, Pool]], need: float | None,
                curve: ThroughputCurve, sm_hungry: bool, memo: Memo,
                pool_needs: dict[str, float] | None = None) -> tuple[_Choice | None, str]:
    """The fitting (pool, profile, count) with fewest GPU slices that meets the target.

    Cost is compute slices x count, then memory x count. When no option meets the target
    within max_workers, the one with the most throughput (then fewest slices).
    """
    low = max(request.workers, 1)
    high = max(request.max_workers, low)
    target = request.target_throughput
    meeting: list[tuple[tuple[int, int, int], _Choice]] = []
    reachable: list[tuple[tuple[float, int, int], _Choice]] = []
    for index, pool in pools:
        pool_need = (pool_needs or {}).get(pool.pool_id, need) if need is not None else None
        for profile in candidate_profiles(pool, more_compute_first=sm_hungry):
            if pool_need is not None and profile.memory_mib < pool_need:
                continue
            model, slices = pool.gpu_model.id, profile.compute_slices
            needed = curve.count_for(model, slices, target)
            if needed is None:
                continue
            count = max(low, needed)
            if count <= high:
                option, _ = _option(index, pool, profile, count, memo)
                if option is not None:
                    cost = (profile.compute_slices * count, profile.memory_mib * count, index)
                    meeting.append((cost, _Choice(option, count,
                                                  curve.total(model, slices, count) or 0.0)))
                    continue
            # Best reachable: the most workers that can be placed, up to max_workers.
            for n in range(min(count, high), low - 1, -1):
                option, _ = _option(index, pool, profile, n, memo)
                if option is not None:
                    total = curve.total(model, slices, n) or 0.0
                    key = (-total, profile.compute_slices * n, index)
                    reachable.append((key, _Choice(option, n, total)))
                    break
    if meeting:
        return min(meeting, key=lambda t: t[0])[1], ""
    if reachable:
        best = min(reachable, key=lambda t: t[0])[1]
        return best, (f"target {target:,.1f} items/s cannot be met within max_workers={high}: "
                      f"best reachable {best.throughput:,.1f} items/s")
    return None, ""


def by_expected_cost(profiles: Sequence[MigProfile], need: Predictive, floor_mib: float
                      ) -> tuple[float | None, dict[int, float]]:
    """The slice memory of least expected cost on this pool, and each size's expected cost.

    Expected cost: the slice's memory, plus, if the need exceeds it (the predictive tail), an
    OOM penalty and the climb through the sizes above (`predictive.expected_cost`). Sizes below
    what is known to be needed are never candidates."""
    sizes = sorted({float(p.memory_mib) for p in profiles})
    costs = {int(s): expected_cost(sizes, i, need, config.OOM_PENALTY)
             for i, s in enumerate(sizes) if s >= floor_mib}
    if not costs:
        return None, {}
    best = min(costs, key=lambda s: (costs[s], s))
    return float(best), costs


def recommend(request: Request, estimate: Estimate | None, *, sm_hungry: bool = False,
              curve: ThroughputCurve | None = None) -> Decision:
    """The option that fits the estimate and wastes least memory; the ladder above it.

    With a throughput target and a learned curve, the count comes from the target: the
    fitting option with the fewest GPU slices whose predicted throughput meets it.
    """
    count = max(request.workers, 1)
    pools = eligible_pools(request)
    memo: Memo = {}
    fitting: list[tuple[float, int, int, Option]] = []
    largest: list[tuple[int, int, Option]] = []
    reasons: dict[str, str] = {}
    need = estimate.mib if estimate else None
    predictive = estimate.predictive if estimate else None
    pool_needs: dict[str, float] = {}
    for index, pool in pools:
        profiles = candidate_profiles(pool, more_compute_first=sm_hungry)
        why = "no profile"
        pool_need = need
        costs: dict[int, float] = {}
        if predictive is not None and estimate is not None:
            pool_need, costs = by_expected_cost(profiles, predictive, estimate.hard_floor_mib)
            if pool_need is not None:
                pool_needs[pool.pool_id] = pool_need
        for profile in profiles if pool_need is not None else []:
            assert pool_need is not None
            if profile.memory_mib < pool_need:
                continue
            option, why = _option(index, pool, profile, count, memo)
            if option is not None:
                waste = (costs[profile.memory_mib] if costs
                         else profile.memory_mib - pool_need) * count
                fitting.append((waste, profile.compute_slices * count, index, option))
                break
        for profile in reversed(profiles):
            option, why = _option(index, pool, profile, count, memo)
            if option is not None:
                largest.append((profile.memory_mib, -index, option))
                break
        else:
            reasons[pool.pool_id] = why
    if not largest:
        raise NoFit(reasons)
    notes: list[str] = []
    throughput = 0.0
    if fitting:
        chosen = min(fitting, key=lambda t: t[:3])[3]
        if predictive is not None:
            notes.append(
                f"the slice of least expected cost (memory plus {config.OOM_PENALTY:g}x the "
                f"slice for an OOM, {predictive.survival(chosen.profile.memory_mib):.1%} "
                "likely)" + ("" if len(pools) == 1 else " among the offered pools"))
        else:
            notes.append("the smallest slice that fits" if len(pools) == 1 else
                         "the fitting slice that wastes least memory among the offered pools")
    else:
        mib, _, chosen = max(largest, key=lambda t: t[:2])
        floor = estimate.hard_floor_mib if estimate else 0.0
        if floor > mib:
            biggest = {o.pool.pool_id: m for m, _, o in largest}
            raise NoFit({
                p.pool_id: f"needs at least {floor:,.0f} MiB per worker; its largest placeable "
                f"slice has {biggest[p.pool_id]:,} MiB" if p.pool_id in biggest
                else reasons.get(p.pool_id, "")
                for _, p in pools
            })
        notes.append("no information: the largest slice, to be safe" if estimate is None else
                     "the estimate exceeds every offered slice: the largest one")
    if request.target_throughput > 0:
        if curve is None:
            notes.append("no throughput measured for this action yet: count = workers")
        else:
            # Slices must still hold the memory: the target search starts from the same need
            # (per pool, the size of least expected cost when the need is a distribution).
            target_need = need if fitting else None
            choice, shortfall = _for_target(request, pools, target_need, curve, sm_hungry,
                                            memo, pool_needs)
            if choice is not None:
                chosen, count, throughput = choice.option, choice.count, choice.throughput
                notes = [] if fitting else notes  # keep "the estimate exceeds every slice"
                notes += [
                    f"fewest GPU slices for {request.target_throughput:,.1f} items/s: "
                    f"{count} x {throughput / count:,.1f} items/s predicted "
                    f"({curve.describe(chosen.pool.gpu_model.id, chosen.profile.compute_slices)})"
                ]
                if shortfall:
                    notes.append(shortfall)
    rung = _rung(chosen, count)
    if sm_hungry and not chosen.profile.whole_gpu:
        notes.append("more compute at equal memory (high SM use)")
    reason = (
        (f"{estimate.source}: {estimate.detail} -> {estimate.mib:,.0f} MiB per worker; "
         if estimate else "fallback: no history and no declared memory; ")
        + f"{chosen.profile.name} ({chosen.profile.memory_mib:,} MiB) x {count} on "
        f"{chosen.pool.pool_id} ({chosen.pool.gpu_model.id}): " + ", ".join(notes)
    )
    return Decision(
        rung=rung,
        predicted_peak_mib=estimate.mib if estimate else float(chosen.profile.memory_mib),
        quantile=estimate.quantile if estimate else 0.0,
        source=estimate.source if estimate else FALLBACK,
        reason=reason,
        ladder=build_ladder([p for _, p in pools], rung, memo),
        predicted_throughput=throughput,
    )


def build_ladder(pools: Sequence[Pool], start: Rung, memo: Memo | None = None
                 ) -> tuple[Rung, ...]:
    """Rungs with strictly more memory per slice and the same count (DESIGN.md section 2).

    A bigger slice on the same pool (skipping profiles that add no memory), then a whole card
    of the same model, then larger GPU models among the offered pools. More slices never give
    one process more addressable memory, so the count never changes.
    """
    count = start.count
    by_id = {p.pool_id: (i, p) for i, p in enumerate(pools)}
    rungs: list[Rung] = []
    last = start.profile.memory_mib
    start_index, start_pool = by_id[start.pool_id]

    def placeable(index: int, pool: Pool, profile: MigProfile) -> Option | None:
        return _option(index, pool, profile, count, memo)[0]

    for profile in candidate_profiles(start_pool):
        if profile.memory_mib > last and (opt := placeable(start_index, start_pool, profile)):
            rungs.append(_rung(opt, count))
            last = profile.memory_mib
    for index, pool in enumerate(pools):
        if (
            pool.strategy is Strategy.NONE
            and pool.gpu_model.id == start_pool.gpu_model.id
            and pool.gpu_model.memory_mib > last
            and (opt := placeable(index, pool, pool.gpu_model.whole))
        ):
            rungs.append(_rung(opt, count))
            last = pool.gpu_model.memory_mib
            break
    bigger: list[tuple[int, int, int, MigProfile, Pool]] = []
    for index, pool in enumerate(pools):
        if pool.gpu_model.memory_mib <= start_pool.gpu_model.memory_mib:
            continue
        for profile in candidate_profiles(pool):
            bigger.append((profile.memory_mib, profile.compute_slices, index, profile, pool))
    for mib, _, index, profile, pool in sorted(bigger, key=lambda t: t[:3]):
        if mib > last and (opt := placeable(index, pool, profile)):
            rungs.append(_rung(opt, count))
            last = mib
    return tuple(rungs)


def next_rung(ladder: Sequence[Rung], need_mib: float, predictive: Predictive | None = None
              ) -> tuple[Rung, tuple[Rung, ...]]:
    """The rung to retry on, and those above it: the first that clears what the execution is
    known to need or, with the action's predictive need, the one of least expected cost given
    that the need is above `need_mib` (an action whose needs spread far past the slice it died
    in goes straight to a slice that holds them, instead of dying on each rung in between)."""
    above = [i for i, r in enumerate(ladder) if r.profile.memory_mib > need_mib]
    if above and predictive is not None:
        given = predictive.survival(need_mib)
        if given > 1e-6:
            conditional = _Conditional(predictive, given)
            sizes = [float(ladder[i].profile.memory_mib) for i in above]
            costs = [expected_cost(sizes, k, conditional, config.OOM_PENALTY)
                     for k in range(len(sizes))]
            k = min(range(len(sizes)), key=lambda j: (costs[j], j))
            return ladder[above[k]], tuple(ladder[above[k] + 1:])
    for i, rung in enumerate(ladder):
        if rung.profile.memory_mib > need_mib:
            return rung, tuple(ladder[i + 1:])
    raise LadderExhausted(
        f"no rung with more than {need_mib:,.0f} MiB per worker among the offered pools"
    )


@dataclass(frozen=True)
class _Conditional:
    """The need's tail given that it exceeds what an OOM showed: P(need > m | need > known)."""

    need: Predictive
    given: float

    def survival(self, mib: float) -> float:
        return min(1.0, self.need.survival(mib) / self.given)

