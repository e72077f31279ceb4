"""Per-worker throughput by profile: measured, interpolated, or borrowed from similar actions.

Throughput grows with compute slices, but neither linearly nor as one power law: a small batch is
latency-bound and gains nothing from more slices, a large one scales almost linearly, and in
between the curve bends where the batch stops filling the instance (ParvaGPU's A100 tables show
all three, and a bump at 3g.40gb, which has half the card's memory bandwidth for 3/7 of its
compute). So an action's curve is built from what is known, in this order, per GPU model:

1. **Measured sizes**: the median per-worker throughput of its successful executions at each
   compute-slice size, in log space (one slow run does not move it), normalised to one worker
   by the action's scaling efficiency (below).
2. **Similar actions** (`Population`): for a size it never ran, other actions on the same GPU
   model that ran there and whose curve has the same shape as this one's on the sizes both ran
   (after scaling: the log-ratios between sizes agree within `THROUGHPUT_MATCH_DISTANCE`) each
   predict it; the most cautious of the nearest few is taken, each at least a measurement's
   noise below its reading. This is the shape learned across actions: the population says how
   throughput at 3g relates to 1g and 7g for curves like this. Beyond the sizes the action ran,
   neighbours must agree on two steps: one step does not say where a curve stops scaling.
   Between two sizes it ran, never below the action's own bound (3., `time_bound`).
3. **Interpolation**: between two measured sizes, piecewise linear in (log effective
   resources, log throughput), i.e. a power law through each pair of neighbours. Effective
   resources weigh compute and memory slices as the GPU model's actions showed at that size
   (`learn_coordinate`: any action that ran it between two other sizes teaches it); where too
   few did, the most cautious time per item of serial, compute and bandwidth parts through
   the two (`time_bound`), or, where none fits, the lower of the compute and the
   compute-and-memory readings.
4. **Extrapolation** outside the measured range: upwards, from the largest measured size with a
   low quantile of the ratio seen between the two sizes by the actions whose smallest measured
   size is the action's own (its memory class: large batches scale, small ones saturate); else
   from the nearest measured size with a low quantile of the ratio seen across the GPU model's
   actions between those two sizes, or, when too few ran both, the two steps through a size
   between them added (`Population.chained`), or cautious default exponents (applied to the
   lower of the compute and the compute-and-memory readings). The whole population's step is
   used only when it is no kinder than the default, in either direction: the actions that ran
   both sizes are a biased sample, which the memory class's peers are much less.

**Scaling efficiency**: a runner reports throughput per worker, and `count` workers may deliver
less than `count` times one (a shared input pipeline, a shared parameter server). Executions with
count > 1 at a size also measured with one worker give the action's exponent `delta` in
per-worker(n) = per-worker(1) * n**-delta; the count for a target accounts for it.

Pure: numpy only. A curve is fitted per Recommend from the action's cached samples and the
population (refreshed by the use case every `THROUGHPUT_POPULATION_TTL_S`); both steps cost tens
to hundreds of microseconds (tests/test_throughput.py measures it).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from recommender.core import config


@dataclass(frozen=True)
class ThroughputSample:
    gpu_model: str
    compute_slices: int
    throughput: float
    """Items/s per worker."""
    count: int = 1
    """Workers the execution ran with."""


def _median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


@dataclass(frozen=True)
class Levels:
    """An action's measured log per-worker throughput at one worker, per GPU model and size."""

    by_model: dict[str, dict[int, float]]
    delta: float
    """Scaling exponent: per-worker throughput at n workers is n**-delta times one worker's."""
    delta_executions: int
    """Executions with count > 1 that the exponent was learned from (0: assumed 0)."""
    samples: int


def measured_levels(samples: Sequence[ThroughputSample]) -> Levels | None:
    """Median log throughput per (model, size), with one worker's level, or None without data.

    Executions with one worker give a size's level directly. Those with n > 1 at a size that
    also has one-worker executions teach the scaling exponent; those at sizes measured only with
    several workers give the level once divided by the learned efficiency.
    """
    good = [s for s in samples
            if s.throughput > 0 and s.compute_slices > 0 and math.isfinite(s.throughput)]
    if not good:
        return None
    single: dict[tuple[str, int], list[float]] = defaultdict(list)
    multi: dict[tuple[str, int], list[tuple[float, int]]] = defaultdict(list)
    for s in good:
        key = (s.gpu_model, s.compute_slices)
        if s.count <= 1:
            single[key].append(math.log(s.throughput))
        else:
            multi[key].append((math.log(s.throughput), s.count))
    level1 = {k: _median(v) for k, v in single.items()}
    deltas = [(level1[k] - lv) / math.log(n)
              for k, obs in multi.items() if k in level1 for lv, n in obs]
    delta = 0.0
    if deltas:
        # Shrunk towards perfect scaling while there are few: one slow run with 8 workers is
        # not yet a law. Never negative (n workers never beat n times one), never near 1.
        raw = _median(deltas) * len(deltas) / (len(deltas) + config.THROUGHPUT_DELTA_PRIOR)
        delta = min(max(raw, 0.0), config.THROUGHPUT_MAX_DELTA)
    by_model: dict[str, dict[int, float]] = defaultdict(dict)
    for (model, c), v in level1.items():
        by_model[model][c] = v
    for (model, c), obs in multi.items():
        if (model, c) not in level1:
            by_model[model][c] = _median([lv + delta * math.log(n) for lv, n in obs])
    return Levels(dict(by_model), delta, len(deltas), len(good))


def resources(c: int, memory: int, alpha: float) -> float:
    """Log of a profile's effective resources: compute slices and memory slices (which carry
    the memory bandwidth) weighted 1 - alpha and alpha. alpha 0 is a purely compute-bound
    workload, 1 a purely bandwidth-bound one."""
    return (1.0 - alpha) * math.log(c) + alpha * math.log(memory)


def time_bound(level_a: float, level_b: float, a: tuple[int, int], b: tuple[int, int],
               c: tuple[int, int]) -> float | None:
    """The lowest log throughput at size c (compute slices, memory slices) that a time per
    item of serial, compute and bandwidth parts allows through the levels at sizes a and b;
    None when no split of the time reproduces the two levels.

    Why this shape: an item's time is a part no slice shortens (the host, kernel launches,
    latency: s), a part divided among the SMs (k f / compute slices) and a part divided by
    the memory bandwidth, which MIG hands out with the memory slices (k (1 - f) / memory
    slices), all non-negative. Throughput then saturates as slices grow (the serial part is
    Amdahl's floor), and 3g.40gb (3/7 of the compute, half the bandwidth) lands between the
    compute and the bandwidth readings. Two measured sizes fix s and k for each split f, but
    two sizes that grow compute and memory alike (1g, 2g, 7g) cannot tell f, so the most
    cautious f of those that fit (s >= 0, k >= 0) is taken, on a grid of
    THROUGHPUT_COORDINATE_STEPS. Over ParvaGPU's A100 table with 1 to 5 processes per
    instance, every size between every two others it ran: as often more than 3 % above the
    truth as the lower of the two log readings (2.3 % of the points against 2.1 % with one
    process), 1.0 to 1.5 % closer to it on average, most at 3g.40gb (-6.7 % against -8.8 %
    with one process), less cautious at 2g, more at 4g. Read THROUGHPUT_BOUND_MARGIN low, it
    is as cautious on average as the log readings and over-predicts half as often. Slower
    with more resources (k < 0) or faster than any serial part allows (s < 0) fits no split:
    None, and the caller falls back on the log readings."""
    time_a, time_b = math.exp(-level_a), math.exp(-level_b)
    lowest: float | None = None
    for i in range(config.THROUGHPUT_COORDINATE_STEPS + 1):
        f = i / config.THROUGHPUT_COORDINATE_STEPS
        xa, xb, xc = (f / cs + (1.0 - f) / ms for cs, ms in (a, b, c))
        if abs(xa - xb) < 1e-12:
            continue  # a and b have the same resources under this split: no slope
        k = (time_a - time_b) / (xa - xb)
        serial = time_a - k * xa
        if k < 0 or serial < -1e-9 * time_a:
            continue
        level = -math.log(max(serial, 0.0) + k * xc)
        lowest = level if lowest is None else min(lowest, level)
    return lowest


def _interior(levels: Iterable[Mapping[int, float]], memory: Mapping[int, int]
              ) -> list[tuple[int, int, int, float, float, float]]:
    """(a, c, b, L(a), L(c), L(b)) for each size c an action ran between two neighbours it also
    ran, where the compute and the bandwidth readings of c differ by more than a measurement's
    noise: the points that say something about how the sizes relate."""
    out = []
    for own in levels:
        sizes = sorted(k for k in own if memory.get(k, 0) > 0)
        for a, c, b in zip(sizes, sizes[1:], sizes[2:], strict=False):
            span = own[b] - own[a]
            ends = [_weight(a, c, b, memory, x) for x in (0, 1)]
            if abs((ends[1] - ends[0]) * span) > config.THROUGHPUT_NOISE:
                out.append((a, c, b, own[a], own[c], own[b]))
    return out


def _weight(a: int, c: int, b: int, memory: Mapping[int, int], alpha: float) -> float:
    """Where size c sits between sizes a and b in effective resources (0 at a, 1 at b)."""
    lo, mid, hi = (resources(k, memory[k], alpha) for k in (a, c, b))
    return (mid - lo) / (hi - lo)


def learn_coordinate(levels: Iterable[Mapping[int, float]], memory: Mapping[int, int]
                     ) -> dict[int, tuple[float, ...]]:
    """Per size c, the memory weights alpha (`resources`) that explain how the GPU model's
    actions ran at c between the two sizes they ran around it (the next below, the next
    above, whichever those were): sizes with fewer than THROUGHPUT_MIN_POPULATION such
    actions are left out.

    Why learned: how much a profile's memory slices count next to its compute slices is a
    property of the hardware and of the workloads run on it (3g.40gb has 3/7 of the A100's
    compute but half its bandwidth), shared by the actions on the model, so any action that
    ran a size and two around it teaches it, whichever two.
    Why per size: one weight for the whole model, fitted where actions happened to run (2g
    between 1g and 7g, 4g between 2g and 7g), said nothing true about 3g and missed 60 targets
    in a replay. Per size it is fitted across the pairs around that size the actions ran;
    read for a pair none of them ran it can still be a few percent off (3g between 2g and 4g,
    learned from 3g between 1g or 2g and 7g: 4 % high for one action), which is why the
    reading is taken a measurement's noise low (ThroughputCurve._unmeasured).
    Why a set: the weights kept are those over-predicting at most
    THROUGHPUT_POPULATION_QUANTILE of the points by more than a measurement's noise, whose
    squared error is within a 95 % profile-likelihood interval of the best one
    (THROUGHPUT_COORDINATE_CHI2); the reading is the most cautious of them, so points that
    cannot tell the weights apart leave it cautious. Saturating curves sit above the chord
    whatever the weight, so the calibration is what keeps the weight from chasing them."""
    by_size: dict[int, list[tuple[int, int, int, float, float, float]]] = defaultdict(list)
    for point in _interior(levels, memory):
        by_size[point[1]].append(point)
    grid = [i / config.THROUGHPUT_COORDINATE_STEPS
            for i in range(config.THROUGHPUT_COORDINATE_STEPS + 1)]
    out: dict[int, tuple[float, ...]] = {}
    for c, points in by_size.items():
        if len(points) < config.THROUGHPUT_MIN_POPULATION:
            continue
        pts = np.array([p[3:] for p in points])
        sse: dict[float, float] = {}
        for alpha in grid:
            w = np.array([_weight(a, m, b, memory, alpha) for a, m, b, *_ in points])
            err = pts[:, 0] + w * (pts[:, 2] - pts[:, 0]) - pts[:, 1]
            if np.mean(err > config.THROUGHPUT_NOISE) <= config.THROUGHPUT_POPULATION_QUANTILE:
                sse[alpha] = float(np.sum(err**2))
        if not sse:
            continue
        best = min(sse.values())
        # Residual variance from the best fit (n - 1 degrees of freedom, one parameter).
        bound = best * (1 + config.THROUGHPUT_COORDINATE_CHI2 / (len(points) - 1))
        out[c] = tuple(a for a, e in sse.items() if e <= bound)
    return out


@dataclass(frozen=True)
class _Shapes:
    """One GPU model's population: for each size, the actions that ran it, as a matrix of
    their levels at every size (NaN where they never ran), and where each action sits in it."""

    col: dict[int, int]
    at: dict[int, tuple[np.ndarray, dict[str, int]]]


class Population:
    """Other actions' measured levels on each GPU model: the shapes a curve can borrow.

    Held per GPU model and size as a matrix (the actions that ran that size x all sizes), so a
    prediction is a few vector operations over those actions, not a loop over all of them.
    """

    def __init__(self, levels: Mapping[str, Levels],
                 memory_slices: Mapping[str, Mapping[int, int]] | None = None) -> None:
        per_model: dict[str, dict[str, dict[int, float]]] = defaultdict(dict)
        for action_id, lv in levels.items():
            for model, measured in lv.by_model.items():
                per_model[model][action_id] = measured
        self._models: dict[str, _Shapes] = {}
        for model, actions in per_model.items():
            sizes = sorted({c for v in actions.values() for c in v})
            col = {c: j for j, c in enumerate(sizes)}
            at: dict[int, tuple[np.ndarray, dict[str, int]]] = {}
            for c in sizes:
                ids = sorted(a for a, v in actions.items() if c in v)
                m = np.full((len(ids), len(sizes)), np.nan)
                for i, a in enumerate(ids):
                    for k, v in actions[a].items():
                        m[i, col[k]] = v
                at[c] = (m, {a: i for i, a in enumerate(ids)})
            self._models[model] = _Shapes(col, at)
        self.actions = len(levels)
        self._coordinate = {
            model: learn_coordinate(actions.values(), (memory_slices or {}).get(model, {}))
            for model, actions in per_model.items()}

    def coordinate(self, model: str, c: int) -> tuple[float, ...]:
        """The memory weights that explain where size c sits between its neighbours on this
        model (`learn_coordinate`), or () when too few actions ran it between two others."""
        return self._coordinate.get(model, {}).get(c, ())

    @classmethod
    def from_samples(cls, rows: Iterable[tuple[str, ThroughputSample]],
                     memory_slices: Mapping[str, Mapping[int, int]] | None = None
                     ) -> Population:
        by_action: dict[str, list[ThroughputSample]] = defaultdict(list)
        for action_id, s in rows:
            by_action[action_id].append(s)
        fitted = {a: lv for a, ss in by_action.items() if (lv := measured_levels(ss))}
        return cls(fitted, memory_slices)

    def _ran(self, model: str, c: int, exclude: str) -> tuple[np.ndarray, dict[int, int]] | None:
        """The matrix of the other actions that ran size c, and the column of each size."""
        shapes = self._models.get(model)
        if shapes is None or c not in shapes.at:
            return None
        m, index = shapes.at[c]
        if exclude in index:
            m = np.delete(m, index[exclude], axis=0)
        return (m, shapes.col) if len(m) else None

    def predict(self, model: str, own: Mapping[int, float], c: int, exclude: str
                ) -> tuple[float, str] | None:
        """Log throughput at size c for an action whose measured levels are `own`, from the
        nearest similar actions; or None when too few match."""
        found = self._ran(model, c, exclude)
        if found is None:
            return None
        sub, col = found
        # Anchor each candidate at the shared size nearest to c: the borrowed step is short.
        shared = sorted((k for k in own if k in col), key=lambda k: (abs(math.log(k / c)), k))
        if len(shared) < 2:
            return None  # one size says nothing about shape: see ratio()
        anchor_col = np.full(len(sub), -1)
        anchor_own = np.zeros(len(sub))
        for k in shared:
            take = (anchor_col < 0) & ~np.isnan(sub[:, col[k]])
            anchor_col[take] = col[k]
            anchor_own[take] = own[k]
        anchored = anchor_col >= 0
        sub, anchor_col, anchor_own = sub[anchored], anchor_col[anchored], anchor_own[anchored]
        anchor_val = sub[np.arange(len(sub)), anchor_col]
        sq = np.zeros(len(sub))
        n = np.zeros(len(sub))
        for k in shared:
            v = sub[:, col[k]]
            ok = ~np.isnan(v) & (anchor_col != col[k])
            diff = (own[k] - anchor_own) - (v - anchor_val)
            sq[ok] += diff[ok] ** 2
            n[ok] += 1
        # Matching on no size but the anchor says nothing about shape: never a neighbour.
        dist = np.full(len(sub), np.inf)
        dist[n > 0] = np.sqrt(sq[n > 0] / n[n > 0])
        match = dist <= config.THROUGHPUT_MATCH_DISTANCE
        if not min(own) < c < max(own):
            # Beyond the sizes it ran, one agreeing step does not say where the curve bends.
            match &= n >= 2
        if int(match.sum()) < config.THROUGHPUT_MIN_NEIGHBOURS:
            return None
        # Each neighbour is trusted as far as it matched: one that differed by 5 % on the
        # sizes both ran may differ by as much here.
        # Never less than a measurement's own noise: a neighbour that matched to 0.5 % on two
        # sizes still measured this one in a single run.
        pred = (sub[match, col[c]] - anchor_val[match] + anchor_own[match]
                - np.maximum(dist[match], config.THROUGHPUT_NOISE))
        nearest = np.argsort(dist[match], kind="stable")[: config.THROUGHPUT_NEIGHBOURS]
        # The most cautious of the nearest: over-predicting misses the target, under-predicting
        # costs a worker.
        return float(pred[nearest].min()), f"{len(nearest)} similar actions"

    def ratio(self, model: str, k: int, c: int, exclude: str, smallest: int = 0
              ) -> float | None:
        """A low quantile of log t(c) - log t(k) across the model's actions, or None. With
        `smallest`, across those whose smallest measured size is that one only."""
        found = self._ran(model, c, exclude)
        if found is None or k not in found[1]:
            return None
        sub, col = found
        if smallest:
            if smallest not in col:
                return None
            # Columns ascend by size: each row's first measured column is its smallest size.
            sub = sub[np.argmax(~np.isnan(sub), axis=1) == col[smallest]]
        d = sub[:, col[c]] - sub[:, col[k]]
        d = d[~np.isnan(d)]
        if len(d) < config.THROUGHPUT_MIN_POPULATION:
            return None
        return float(np.quantile(d, config.THROUGHPUT_POPULATION_QUANTILE))

    def chained(self, model: str, k: int, c: int, exclude: str) -> float | None:
        """log t(c) - log t(k) through one size j between them, when too few actions ran k
        and c together but enough ran k and j, and j and c: the sum of the two steps' low
        quantiles, the most cautious over the sizes j that allow it; None when none does.

        Why: which pairs of sizes the population ran together is an accident of earlier
        choices (actions sent to 2g and 4g, others to 4g and 7g), yet the step from 2g to 7g
        is the sum of those two. Two 10th percentiles added are lower than the 10th
        percentile of the sum unless the steps move together, so it errs low (a worker too
        many, not a missed target). Only sizes between k and c: a step down and back up
        mixes the two subpopulations' opposite biases."""
        lo, hi = min(k, c), max(k, c)
        shapes = self._models.get(model)
        if shapes is None:
            return None
        sums = [first + second for j in shapes.col if lo < j < hi
                if (first := self.ratio(model, k, j, exclude)) is not None
                and (second := self.ratio(model, j, c, exclude)) is not None]
        return min(sums) if sums else None


EMPTY = Population({})


@dataclass(frozen=True)
class ThroughputCurve:
    """An action's per-worker throughput by (GPU model, compute slices) and its scaling."""

    levels: Levels
    population: Population = EMPTY
    action_id: str = ""
    memory_slices: Mapping[str, Mapping[int, int]] = field(default_factory=dict)
    """Per GPU model, memory slices of the profile with each number of compute slices."""
    _memo: dict[tuple[str, int], tuple[float, str]] = field(
        default_factory=dict, compare=False, repr=False)

    def _log_level(self, model: str, c: int) -> tuple[float, str]:
        key = (model, c)
        if key not in self._memo:
            self._memo[key] = self._estimate(model, c)
        return self._memo[key]

    def _estimate(self, model: str, c: int) -> tuple[float, str]:
        own = self.levels.by_model[model]
        if c in own:
            return own[c], "measured"
        return self._unmeasured(model, own, c)

    def _unmeasured(self, model: str, own: Mapping[int, float], c: int) -> tuple[float, str]:
        borrowed = self.population.predict(model, own, c, self.action_id)
        below = [k for k in own if k < c]
        above = [k for k in own if k > c]
        floor = self._own_bound(model, own, c) if below and above else None
        if borrowed is not None:
            # Between two of its own sizes, a neighbour's reading below what any serial +
            # compute + bandwidth split through those two allows says the neighbours differ
            # here (each is taken up to 10 % low for how far it matched), not that this action
            # is slower than its own measurements permit: its own bound stands. On ParvaGPU,
            # 3g read by two neighbours 15 % below the truth where the bound was 11 % below.
            if floor is not None and floor > borrowed[0]:
                return floor, "interpolated as serial, compute and bandwidth time"
            return borrowed
        if below and above:
            a, b = max(below), min(above)
            # No other action shows how the curve bends here. With the catalog's memory
            # slices: the most cautious serial + compute + bandwidth time through the two
            # (time_bound). Else, or where no such split fits, piecewise linear in log slices,
            # read two ways and the lower taken: by compute slices, and by compute and memory
            # slices together (their geometric mean), since MIG hands out memory bandwidth with
            # the memory slices: 3g.40gb has half the card's, 4g.40gb no more than 3g.40gb.
            weights = [math.log(c / a) / math.log(b / a)]
            mem = self.memory_slices.get(model, {})
            alphas = self.population.coordinate(model, c)
            if alphas and all(mem.get(k, 0) > 0 for k in (a, b, c)):
                # The population showed how compute and memory slices weigh at this size.
                # Borrowed, so like a neighbour's reading it is taken a measurement's noise
                # low: the weight is a summary of other actions, and of other pairs of sizes.
                w = min(_weight(a, c, b, mem, x) for x in alphas)
                return (own[a] + w * (own[b] - own[a]) - config.THROUGHPUT_NOISE,
                        "interpolated as the model's actions scale")
            if floor is not None:
                return floor, "interpolated as serial, compute and bandwidth time"
            if all(mem.get(k, 0) > 0 for k in (a, b, c)):
                lo, mid, hi = (math.log(k * mem[k]) for k in (a, c, b))
                if lo < mid < hi:  # a catalog where it is not so has no such reading
                    weights.append((mid - lo) / (hi - lo))
            return min(own[a] + w * (own[b] - own[a]) for w in weights), "interpolated"
        k = min(above) if above else max(below)
        level, how = self._extrapolate(model, own, k, c)
        floor_far = self._concave_floor(model, own, k, c)
        if floor_far is not None and floor_far[0] > level:
            return floor_far
        return level, how

    def _concave_floor(self, model: str, own: Mapping[int, float], k: int, c: int
                       ) -> tuple[float, str] | None:
        """The lowest level at c, above the largest measured size k, that the readings at
        larger sizes allow on a concave curve, THROUGHPUT_CONCAVE_MARGIN low; None below k,
        when no larger size is read, or without the catalog's memory slices.

        Why: a serial + compute + bandwidth time per item (time_bound) makes log throughput
        concave in log resources, so a size between k and a larger one sits at or above the
        chord through the two, read where the chord is lowest (by compute or by memory
        slices). Extrapolated one size at a time, a near size can be read from a population
        step (the actions earlier choices sent to both sizes, often flat curves) while a
        farther one is read from the default exponent: the curve then gains more between
        the two than from k to the near one, a shape no such time allows, and the near size,
        often the cheap one, loses to the far one. Over ParvaGPU's A100 table with 1 to 5
        processes per instance, 98 % of (size, size between, size) triples sit above that
        chord or within 3 % under it, 99 % within 6 %. The farther reading is the one the
        service would act on anyway, so the floor is no kinder than the decision it keeps
        consistent. Only upwards: below the smallest measured size the far reading is the
        default's near-linear loss, and a chord through that guess would overrule a
        population that lost more (tests/test_throughput.py has such a case); in the
        replays it changed no choice."""
        mem = self.memory_slices.get(model, {})
        if c < k or mem.get(k, 0) <= 0 or mem.get(c, 0) <= 0:
            return None
        best: tuple[float, str] | None = None
        for b in sorted(mem):
            if b <= c or mem[b] <= 0:
                continue
            weights = [_weight(k, c, b, mem, x) for x in (0.0, 1.0)]
            if not all(0.0 < w < 1.0 for w in weights):
                continue  # c is not between the two in both readings (4g over 3g's memory)
            span = self._log_level(model, b)[0] - own[k]
            chord = min(own[k] + w * span for w in weights) - config.THROUGHPUT_CONCAVE_MARGIN
            if best is None or chord > best[0]:
                best = chord, f"from {k} slices, concave up to the reading at {b} slices"
        return best

    def _extrapolate(self, model: str, own: Mapping[int, float], k: int, c: int
                     ) -> tuple[float, str]:
        """Level at c from the nearest measured size k, outside the measured range."""
        if c > k:  # no action ran below its own smallest size: peers only ever lend upwards
            least = min(own)
            peers = self.population.ratio(model, k, c, self.action_id, smallest=least)
            if peers is not None:
                # Actions whose smallest measured size is this one's: its memory class (the
                # memory side sends each action to the smallest slice that holds it), and a
                # batch large enough to need more memory fills SMs a small one leaves idle.
                # Within a class the selection that makes the whole population's kinder step
                # flattery matters much less (THROUGHPUT_MIN_POPULATION): taken either way.
                return (own[k] + peers, f"from {k} slices, as actions whose smallest measured "
                        f"size is also {least} slices scale")
        exponent = config.THROUGHPUT_EXPONENT_DOWN if c < k else config.THROUGHPUT_EXPONENT_UP
        # The same two readings as interpolation, the cautious one taken: 4g.40gb over 3g.40gb
        # adds compute but no memory slice, so not the bandwidth a compute-bound batch needs.
        steps = [math.log(c / k)]
        mem = self.memory_slices.get(model, {})
        if mem.get(k, 0) > 0 and mem.get(c, 0) > 0:
            steps.append(math.log(c * mem[c] / (k * mem[k])) / 2)
        default = min(exponent * x for x in steps)
        step = self.population.ratio(model, k, c, self.action_id)
        how = "as other actions scale"
        if step is None:
            step = self.population.chained(model, k, c, self.action_id)
            how = "as other actions scale, step by step"
        # The population's step is trusted only when it is no kinder than the default: the
        # actions that ran both sizes are those earlier choices sent there, not a draw of
        # curves like this one (which has no shape to match them on beyond this size). Down
        # to a smaller size they are the flat curves, whose step flatters a steep one; up to
        # a larger one the steep curves, the ones predicted to gain from it, whose step
        # flatters a curve that stops scaling. On held-out DNNs of ParvaGPU's table, six
        # large-batch actions' 4g.40gb / 3g.40gb of 1.17-1.24 read an action whose own is
        # 1.11 and missed three targets. On the whole table (2026-12-02), trusting a kinder
        # step upwards changes no choice of round 1 and misses three targets in round 2.
        if step is not None and step <= default:
            return own[k] + step, f"from {k} slices, {how}"
        return own[k] + default, f"from {k} slices, default exponent"

    def _own_bound(self, model: str, own: Mapping[int, float], c: int) -> float | None:
        """time_bound through the nearest measured sizes around c, THROUGHPUT_BOUND_MARGIN
        low, or None without the memory slices or a split that fits."""
        a, b = max(k for k in own if k < c), min(k for k in own if k > c)
        mem = self.memory_slices.get(model, {})
        if not all(mem.get(k, 0) > 0 for k in (a, b, c)):
            return None
        bound = time_bound(own[a], own[b], (a, mem[a]), (b, mem[b]), (c, mem[c]))
        return None if bound is None else bound - config.THROUGHPUT_BOUND_MARGIN

    def predict(self, gpu_model: str, compute_slices: int) -> float | None:
        """Items/s of one worker, or None when nothing is known about this GPU model."""
        if gpu_model in self.levels.by_model:
            return float(math.exp(self._log_level(gpu_model, compute_slices)[0]))
        # Another model's curve is a guess across hardware: use the most cautious one.
        guesses = [math.exp(self._log_level(m, compute_slices)[0]) for m in self.levels.by_model]
        return min(guesses) if guesses else None

    def total(self, gpu_model: str, compute_slices: int, count: int) -> float | None:
        """Items/s of `count` workers, with the action's scaling efficiency."""
        one = self.predict(gpu_model, compute_slices)
        if one is None:
            return None
        return float(one * count ** (1.0 - self.levels.delta))

    def count_for(self, gpu_model: str, compute_slices: int, target: float) -> int | None:
        """Fewest workers predicted to deliver `target` items/s, or None when unknown."""
        one = self.predict(gpu_model, compute_slices)
        if one is None or one <= 0:
            return None
        need = float(max(target / one, 1.0) ** (1.0 / (1.0 - self.levels.delta)))
        if need > config.MAX_WORKERS:
            return config.MAX_WORKERS + 1  # out of reach whatever max_workers says
        n = max(1, math.ceil(need - 1e-9))
        while n > 1 and (self.total(gpu_model, compute_slices, n - 1) or 0.0) >= target:
            n -= 1  # float rounding in the power: never one worker too many
        return n

    def source(self, gpu_model: str, compute_slices: int) -> str:
        if gpu_model not in self.levels.by_model:
            return "guessed from another GPU model"
        return self._log_level(gpu_model, compute_slices)[1]

    def describe(self, gpu_model: str = "", compute_slices: int = 0) -> str:
        sizes = ", ".join(f"{m} {'/'.join(str(c) for c in sorted(v))}"
                          for m, v in sorted(self.levels.by_model.items()))
        text = f"measured at {sizes} slices ({self.levels.samples} executions)"
        if gpu_model and compute_slices:
            text += f"; {compute_slices} slices: {self.source(gpu_model, compute_slices)}"
        if self.levels.delta_executions:
            text += (f"; scaling n^{1 - self.levels.delta:.2f} from "
                     f"{self.levels.delta_executions} multi-worker executions")
        return text


def fit_curve(samples: Sequence[ThroughputSample], population: Population = EMPTY,
              action_id: str = "", memory_slices: Mapping[str, Mapping[int, int]] | None = None
              ) -> ThroughputCurve | None:
    """The action's curve, or None without any throughput measurement. `action_id` keeps the
    action's own rows out of the population it borrows from."""
    levels = measured_levels(samples)
    if levels is None:
        return None
    return ThroughputCurve(levels, population, action_id, memory_slices or {})
