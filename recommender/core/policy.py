"""From an estimate to a decision: the cheapest (pool, profile, count) that fits, and the ladder.

Knows nothing of gRPC or SQL. The steps are post-processors in the VPA sense: the estimate is
rounded up to a profile the pool exposes, checked against the pool's nodes (all instances of a
pod on one node), and priced by the memory it would waste.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from recommender.core import config
from recommender.core.calibration import EMPTY, Calibrated, SliceCalibration
from recommender.core.catalog import MigProfile
from recommender.core.domain import Decision, Pool, Request, Sample
from recommender.core.estimation import FALLBACK, Estimate, informative
from recommender.core.ladder import build_ladder
from recommender.core.options import (
    Memo,
    NoFit,
    Option,
    candidate_profiles,
    eligible_pools,
    placeable_option,
    rung_of,
)
from recommender.core.population import Population
from recommender.core.predictive import Predictive, Tail, expected_cost, oom_wait_mib
from recommender.core.throughput import ThroughputCurve


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
                option, _ = placeable_option(index, pool, profile, count, memo)
                if option is not None:
                    cost = (profile.compute_slices * count, profile.memory_mib * count, index)
                    meeting.append((cost, _Choice(option, count,
                                                  curve.total(model, slices, count) or 0.0)))
                    continue
            # Best reachable: the most workers that can be placed, up to max_workers.
            for n in range(min(count, high), low - 1, -1):
                option, _ = placeable_option(index, pool, profile, n, memo)
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


class _Remembered:
    """A need whose survival at each size is computed once: the expected cost from each
    starting size climbs the same sizes above it (the same value, fewer t tails)."""

    __slots__ = ("_need", "_seen")

    def __init__(self, need: Predictive) -> None:
        self._need = need
        self._seen: dict[float, float] = {}

    def survival(self, mib: float) -> float:
        found = self._seen.get(mib)
        if found is None:
            found = self._seen[mib] = self._need.survival(mib)
        return found

    def model_survival(self, mib: float) -> float:
        """The model's chance before the action's count (what a young action's record
        corrects): read once per size, by `Calibrated`, which remembers its own."""
        return self._need.model_survival(mib)

    def counted(self, mib: float, chance: float) -> float:
        return self._need.counted(mib, chance)


def _seen_said(predictive: Predictive, mib: float) -> str:
    """What the action's own runs did to the model's chance at the slice
    (predictive.SeenPeaks), else nothing: " (the level and its scatter say 3.0 %; 14 % of its
    runs ... needed more)" where their count raised it, " (the level and its scatter say
    6.2 %; none of its runs needed as much: a new largest is at most 1.0 % likely)" where the
    cap past its largest peak lowered it. A stated chance that is not the level's must say
    where it came from."""
    found = predictive.by_seen(mib)
    if found is None or found[1] == found[0]:
        return ""
    model, stated, seen = found
    said = (f"{seen.share(mib):.0%} of its runs, the newest weighing most, needed more"
            + (", each run near it counted by the share of its scatter past it"
               if seen.width > 0 else "")
            if stated > model else
            f"none of its runs needed as much: a new largest is at most {seen.record:.1%} "
            "likely")
    return f" (the level and its scatter say {model:.1%}; {said})"


def _calibrated(calibration: SliceCalibration | None, model: float | None, stated: float,
                mib: float) -> str:
    """" (its model says 0.8 %; young actions' first attempts on 40,448 MiB ran out 24 times
    where their chances added up to 6.8)" when the population's record moved the chance by
    more than a tenth: a stated chance that is not the model's must say where it came from.
    Not where only the action's own count moved it (`_seen_said` says that)."""
    if (calibration is None or model is None or math.isclose(stated, model, rel_tol=0.1)
            or math.isclose(calibration.factor(mib), 1.0, rel_tol=0.1)):
        return ""
    return f" (its model says {model:.1%}; {calibration.describe(mib)})"


def young_calibration(estimate: Estimate | None, samples: Sequence[Sample],
                      population: Population | None) -> SliceCalibration | None:
    """The population's record of young actions' first attempts, for a young action whose need
    is a distribution (`core.calibration`); None for the rest. One rule for the server and for
    the retraining job's replay of it, so that promotion compares what the server runs."""
    if (estimate is None or estimate.predictive is None
            or len(informative(samples)) >= config.CALIBRATION_YOUNG_RUNS):
        return None
    return population.calibration if population is not None else EMPTY


def by_expected_cost(profiles: Sequence[MigProfile], need: Predictive, floor_mib: float,
                     gpu_memory_mib: float, calibration: SliceCalibration | None = None,
                     oom_wait_gpus: float = config.OOM_WAIT_GPUS
                     ) -> tuple[float | None, dict[int, float]]:
    """The slice memory of least expected cost on this pool, and each size's expected cost.

    Expected cost: the slice's memory, plus, if the need exceeds it (the predictive tail), the
    user's wait for the rerun and the climb through the sizes above (`predictive.expected_cost`,
    `predictive.oom_wait_mib`). Sizes below
    what is known to be needed are never candidates. `gpu_memory_mib`: the pool's whole GPU,
    what the user's wait after an OOM is counted in. `calibration`: a young action's record
    (`young_calibration`), as `recommend` weighs its sizes. `oom_wait_gpus`: that wait, in
    whole GPUs (the server's price of an OOM)."""
    sizes = slice_sizes(profiles)
    return _by_expected_cost(sizes, _tail(need, sizes, calibration), floor_mib, gpu_memory_mib,
                             oom_wait_gpus)


def slice_sizes(profiles: Sequence[MigProfile]) -> list[float]:
    """A pool's distinct slice sizes, smallest first: what the expected cost climbs."""
    return sorted({float(p.memory_mib) for p in profiles})


def _tail(need: Predictive, sizes: Sequence[float], calibration: SliceCalibration | None
          ) -> _Remembered | Calibrated:
    """The need's tail, each size's chance computed once, moved by `calibration` if given."""
    remembered = _Remembered(need)
    return remembered if calibration is None else calibration.tail(remembered, sizes)


def _by_expected_cost(sizes: list[float], tail: Tail, floor_mib: float, gpu_memory_mib: float,
                      oom_wait_gpus: float) -> tuple[float | None, dict[int, float]]:
    wait = oom_wait_mib(gpu_memory_mib, oom_wait_gpus)
    costs = {int(s): expected_cost(sizes, i, tail, wait)
             for i, s in enumerate(sizes) if s >= floor_mib}
    if not costs:
        return None, {}
    best = min(costs, key=lambda s: (costs[s], s))
    return float(best), costs


def recommend(request: Request, estimate: Estimate | None, *, sm_hungry: bool = False,
              curve: ThroughputCurve | None = None,
              calibration: SliceCalibration | None = None,
              oom_wait_gpus: float = config.OOM_WAIT_GPUS) -> Decision:
    """The option that fits the estimate and wastes least memory; the ladder above it.

    With a throughput target and a learned curve, the count comes from the target: the
    fitting option with the fewest GPU slices whose predicted throughput meets it.
    `calibration`, for a young action's first attempt: its chances at each slice size are
    moved by how other young actions' first attempts there turned out, and the decision keeps
    the model's own chance beside the stated one (`Decision.model_oom_chance`).
    `oom_wait_gpus`: what an OOM costs beyond the memory its attempts held, in whole GPUs of
    the pool's model (the server's price; OOM_WAIT_GPUS by default).
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
    tails: dict[str, _Remembered | Calibrated] = {}
    """Per pool, the need's tail its sizes were weighed by: the stated chance is read from it."""
    for index, pool in pools:
        profiles = candidate_profiles(pool, more_compute_first=sm_hungry)
        why = "no profile"
        pool_need = need
        costs: dict[int, float] = {}
        if predictive is not None and estimate is not None:
            sizes = slice_sizes(profiles)
            tails[pool.pool_id] = tail = _tail(predictive, sizes, calibration)
            pool_need, costs = _by_expected_cost(sizes, tail, estimate.hard_floor_mib,
                                                 pool.gpu_model.memory_mib, oom_wait_gpus)
            if pool_need is not None:
                pool_needs[pool.pool_id] = pool_need
        for profile in profiles if pool_need is not None else []:
            assert pool_need is not None
            if profile.memory_mib < pool_need:
                continue
            option, why = placeable_option(index, pool, profile, count, memo)
            if option is not None:
                waste = (costs[profile.memory_mib] if costs
                         else profile.memory_mib - pool_need) * count
                fitting.append((waste, profile.compute_slices * count, index, option))
                break
        for profile in reversed(profiles):
            option, why = placeable_option(index, pool, profile, count, memo)
            if option is not None:
                largest.append((profile.memory_mib, -index, option))
                break
        else:
            reasons[pool.pool_id] = why
    if not largest:
        raise NoFit(reasons)
    notes: list[str] = []
    throughput = 0.0
    chance = 0.0
    model_chance: float | None = None

    def chance_at(option: Option) -> float:
        """The stated chance of running out of the option's slice (the model's beside it,
        when a calibration moved it)."""
        nonlocal model_chance
        assert predictive is not None
        mib = float(option.profile.memory_mib)
        tail = tails[option.pool.pool_id]  # every pool's, when there is a predictive
        if isinstance(tail, Calibrated):
            model_chance = tail.model(mib)
        return tail.survival(mib)

    if fitting:
        chosen = min(fitting, key=lambda t: t[:3])[3]
        if predictive is not None:
            chance = chance_at(chosen)
            notes.append(
                f"the slice of least expected cost (memory, plus the wait for a rerun after an "
                f"OOM, {chance:.1%} likely{_seen_said(predictive, chosen.profile.memory_mib)}"
                f"{_calibrated(calibration, model_chance, chance, chosen.profile.memory_mib)}, "
                f"counted as {oom_wait_gpus:g} whole GPUs)"
                + ("" if len(pools) == 1 else " among the offered pools"))
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
                if fitting and predictive is not None and choice.option is not chosen:
                    chance = chance_at(choice.option)
                chosen, count, throughput = choice.option, choice.count, choice.throughput
                # Keep "the estimate exceeds every slice", and the memory side's expected cost:
                # the count is the target's, the slice memory still the need's.
                notes = [n for n in notes if "expected cost" in n] if fitting else notes
                notes += [
                    f"fewest GPU slices for {request.target_throughput:,.1f} items/s: "
                    f"{count} x {throughput / count:,.1f} items/s predicted "
                    f"({curve.describe(chosen.pool.gpu_model.id, chosen.profile.compute_slices)})"
                ]
                if shortfall:
                    notes.append(shortfall)
    rung = rung_of(chosen, count)
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
        oom_chance=chance,
        model_oom_chance=model_chance,
    )
