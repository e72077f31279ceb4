"""The OOM ladder (DESIGN.md section 2): rungs with strictly more memory per slice and the
same count, and the rung to retry on after an OOM."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from recommender.core import config
from recommender.core.catalog import MigProfile
from recommender.core.domain import Pool, Rung, Strategy
from recommender.core.options import Memo, Option, candidate_profiles, placeable_option, rung_of
from recommender.core.predictive import Predictive, expected_cost, oom_wait_mib

LADDER = "ladder"
"""Source of a recommendation that is a rung taken after an OOM."""


class LadderExhausted(Exception):
    """No rung above the one that ran out of memory (RESOURCE_EXHAUSTED)."""


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
        return placeable_option(index, pool, profile, count, memo)[0]

    for profile in candidate_profiles(start_pool):
        if profile.memory_mib > last and (opt := placeable(start_index, start_pool, profile)):
            rungs.append(rung_of(opt, count))
            last = profile.memory_mib
    for index, pool in enumerate(pools):
        if (
            pool.strategy is Strategy.NONE
            and pool.gpu_model.id == start_pool.gpu_model.id
            and pool.gpu_model.memory_mib > last
            and (opt := placeable(index, pool, pool.gpu_model.whole))
        ):
            rungs.append(rung_of(opt, count))
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
            rungs.append(rung_of(opt, count))
            last = mib
    return tuple(rungs)


def next_rung(ladder: Sequence[Rung], need_mib: float, predictive: Predictive | None = None,
              oom_wait_gpus: float = config.OOM_WAIT_GPUS) -> tuple[Rung, tuple[Rung, ...]]:
    """The rung to retry on, and those above it: the first that clears what the execution is
    known to need or, with the action's predictive need, the one of least expected cost given
    that the need is above `need_mib` (an action whose needs spread far past the slice it died
    in goes straight to a slice that holds them, instead of dying on each rung in between).
    `oom_wait_gpus`: the price of another OOM, as the first attempt was chosen with."""
    above = [i for i, r in enumerate(ladder) if r.profile.memory_mib > need_mib]
    if above and predictive is not None:
        given = predictive.survival(need_mib)
        if given > 1e-6:
            conditional = _Conditional(predictive, given)
            sizes = [float(ladder[i].profile.memory_mib) for i in above]
            # The user's wait in whole GPUs of the model the next rung runs on: the ladder's
            # largest rung of that model (its whole card, where the pool offers one).
            model = ladder[above[0]].gpu_model
            gpu = max(r.profile.memory_mib for r in ladder if r.gpu_model == model)
            costs = [expected_cost(sizes, k, conditional, oom_wait_mib(gpu, oom_wait_gpus))
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


def chance_above(need: Predictive | None, known_mib: float, slice_mib: float) -> float:
    """P(need > slice | need > known): the chance a rung after an OOM states; 0 without the
    action's predictive need, or where the known need is beyond its tail (nothing left to
    condition on)."""
    if need is None:
        return 0.0
    given = need.survival(known_mib)
    return _Conditional(need, given).survival(slice_mib) if given > 0 else 0.0
