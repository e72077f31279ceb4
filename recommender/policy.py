"""From an estimate to a decision: the cheapest (pool, profile, count) that fits, and the ladder.

Knows nothing of gRPC or SQL. The steps are post-processors in the VPA sense: the estimate is
rounded up to a profile the pool exposes, checked against the pool's nodes (all instances of a
pod on one node), and priced by the memory it would waste.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from recommender.catalog import MigProfile
from recommender.domain import Decision, Pool, Request, Rung, Strategy
from recommender.estimation import FALLBACK, Estimate
from recommender.placement import PlacementError, place, place_whole_gpus

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


def candidate_profiles(pool: Pool, *, more_compute_first: bool = False) -> list[MigProfile]:
    """Profiles this pool can hand out, smallest memory first.

    At equal memory, fewer compute slices first (unless the action is SM-hungry): 1g.10gb
    serves a memory-bound worker as well as 2g.10gb and leaves compute to others.
    """
    if pool.strategy is Strategy.NONE:
        return [pool.model.whole]
    profiles = list(pool.profiles) or [p for p in pool.model.profiles if p.is_base]
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
            return {f"nvidia.com/mig-{profile.name}": n}
        case Strategy.DYNAMIC:
            return {"nvidia.com/gpu": n, "nvidia.com/gpumem": str(profile.memory_mib)}
        case Strategy.SINGLE | Strategy.NONE:
            return {"nvidia.com/gpu": n}


def find_node(pool: Pool, profile: MigProfile, count: int) -> tuple[str | None, str]:
    """A node that can hold all `count` instances, as (node_id, ""), or (None, why not).

    Without nodes the capacity is unknown and assumed to fit: node_id is "".
    """
    if not pool.nodes:
        return "", ""
    if not profile.whole_gpu and not pool.model.placements_known:
        return None, f"{pool.model.id} has no known placement table: cannot place MIG slices"
    # Fuller nodes first: pack, and leave empty nodes whole for the big requests.
    nodes = sorted(pool.nodes, key=lambda n: -sum(not g.idle for g in n.gpus))
    for node in nodes:
        try:
            if profile.whole_gpu:
                found = place_whole_gpus(count, node.gpus)
            else:
                found = place(pool.model, [profile] * count, node.gpus)
        except PlacementError as e:
            return None, str(e)
        if found is not None:
            return node.node_id, ""
    return None, f"no node has room for {count} x {profile.name}"


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
        gpu_model=option.pool.model.id,
        profile=option.profile,
        count=count,
        resources=pod_resources(option.pool, option.profile, count),
        node_id=option.node_id,
    )


def recommend(request: Request, estimate: Estimate | None, *, sm_hungry: bool = False
              ) -> Decision:
    """The option that fits the estimate and wastes least memory; the ladder above it."""
    count = max(request.workers, 1)
    pools = eligible_pools(request)
    fitting: list[tuple[float, int, int, Option]] = []
    largest: list[tuple[int, int, Option]] = []
    reasons: dict[str, str] = {}
    need = estimate.mib if estimate else None
    for index, pool in pools:
        profiles = candidate_profiles(pool, more_compute_first=sm_hungry)
        why = "no profile"
        for profile in profiles if need is not None else []:
            assert need is not None
            if profile.memory_mib < need:
                continue
            node_id, why = find_node(pool, profile, count)
            if node_id is not None:
                option = Option(index, pool, profile, node_id)
                waste = (profile.memory_mib - need) * count
                fitting.append((waste, profile.compute_slices * count, index, option))
                break
        for profile in reversed(profiles):
            node_id, why = find_node(pool, profile, count)
            if node_id is not None:
                largest.append((profile.memory_mib, -index, Option(index, pool, profile,
                                                                      node_id)))
                break
        else:
            reasons[pool.pool_id] = why
    if not largest:
        raise NoFit(reasons)
    notes: list[str] = []
    if fitting:
        chosen = min(fitting, key=lambda t: t[:3])[3]
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
    rung = _rung(chosen, count)
    if sm_hungry and not chosen.profile.whole_gpu:
        notes.append("more compute at equal memory (high SM use)")
    reason = (
        (f"{estimate.source}: {estimate.detail} -> {estimate.mib:,.0f} MiB per worker; "
         if estimate else "fallback: no history and no declared memory; ")
        + f"{chosen.profile.name} ({chosen.profile.memory_mib:,} MiB) x {count} on "
        f"{chosen.pool.pool_id} ({chosen.pool.model.id}): " + ", ".join(notes)
    )
    return Decision(
        rung=rung,
        predicted_peak_mib=estimate.mib if estimate else float(chosen.profile.memory_mib),
        quantile=estimate.quantile if estimate else 0.0,
        source=estimate.source if estimate else FALLBACK,
        reason=reason,
        ladder=build_ladder([p for _, p in pools], rung),
    )


def build_ladder(pools: Sequence[Pool], start: Rung) -> tuple[Rung, ...]:
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
        node_id, _ = find_node(pool, profile, count)
        return None if node_id is None else Option(index, pool, profile, node_id)

    for profile in candidate_profiles(start_pool):
        if profile.memory_mib > last and (opt := placeable(start_index, start_pool, profile)):
            rungs.append(_rung(opt, count))
            last = profile.memory_mib
    for index, pool in enumerate(pools):
        if (
            pool.strategy is Strategy.NONE
            and pool.model.id == start_pool.model.id
            and pool.model.memory_mib > last
            and (opt := placeable(index, pool, pool.model.whole))
        ):
            rungs.append(_rung(opt, count))
            last = pool.model.memory_mib
            break
    bigger: list[tuple[int, int, int, MigProfile, Pool]] = []
    for index, pool in enumerate(pools):
        if pool.model.memory_mib <= start_pool.model.memory_mib:
            continue
        for profile in candidate_profiles(pool):
            bigger.append((profile.memory_mib, profile.compute_slices, index, profile, pool))
    for mib, _, index, profile, pool in sorted(bigger, key=lambda t: t[:3]):
        if mib > last and (opt := placeable(index, pool, profile)):
            rungs.append(_rung(opt, count))
            last = mib
    return tuple(rungs)


def next_rung(ladder: Sequence[Rung], need_mib: float) -> tuple[Rung, tuple[Rung, ...]]:
    """The first rung that clears what the execution is known to need, and those above it."""
    for i, rung in enumerate(ladder):
        if rung.profile.memory_mib > need_mib:
            return rung, tuple(ladder[i + 1:])
    raise LadderExhausted(
        f"no rung with more than {need_mib:,.0f} MiB per worker among the offered pools"
    )
