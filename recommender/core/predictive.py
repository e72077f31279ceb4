"""A predictive distribution of the next execution's per-worker need, and its tail.

The policy does not ask "what is the P90 plus a margin" but "how likely is each slice to run out
of memory", so it can weigh a slice's memory against the chance of a retry (expected cost). The
distribution is a location-scale Student-t, in MiB or in log MiB:

- Student-t, not normal, because its scale is estimated from few executions: the prediction
  interval of a new observation from n normal ones is t with n - p degrees of freedom, so thin
  history widens the tail by itself, and it narrows as executions accumulate.
- In log MiB for most actions (peaks vary multiplicatively with batch and input sizes, and a
  40 GiB action varies more in MiB than a 4 GiB one), in MiB for a linear model of the inputs.

Its degrees of freedom grow with the executions, so a long history has nearly normal tails,
and real memory has heavier ones. Pooled over GenTD26, the step change (seeds 3, 7, 8, 11),
the generated input-dependent workload and the shapes, the first recommendations that stated
0.3 to 1 % had 28 OOMs where 17.2 were stated; the ones stated 1 to 10 % had 48 where 74.5 were.
Heavier tails were tried on 2026-12-03 (in process, `recommender evaluate --runner in-process`,
the tail the policy weighs given at most D degrees of freedom and its scale times S, with
OOM_WAIT_GPUS W), against this distribution (D unbounded, S 1, W 5): GenTD26 28 OOMs at 1.384x;
the step change's four draws 11/17/9/10 OOMs at 1.286/1.191/1.181/1.194x (VPA 10/14/8/17 at
1.345/1.197/1.194/1.232x); generated seed 7 1.160x; shapes 15 OOMs at 1.345x; GenTD26 in
15-minute windows (`--window-minutes 15`) 145 OOMs at 1.201x, VPA's 135 at 1.283x:
- D 3, S 0.75, W 4.25: GenTD26 28 at 1.372x; step 10/16/7/10 at 1.295/1.207/1.203/1.193x;
  generated 1.186x; shapes 17 at 1.346x; 15-minute windows 109 at 1.220x.
- D 3, S 0.75, W 5: GenTD26 25 at 1.391x; step 9/11/5/10, all fewer than VPA's, but at
  1.223x and 1.220x on seeds 7 and 8, more memory than VPA's; generated 1.202x.
- D 5, S 0.85 (W 5 and 6), D 4, S 0.8, D 4, S 0.71 (the scale of a t with 4 df whose standard
  deviation is the estimated one), D 3, S 0.75, W 3.5: other points of the same trade.
None gave fewer OOMs at no more memory on every workload: each moves memory from GenTD26 and the
finer windows to the generated workloads and the step change's seeds 7 and 8, where VPA reserves
least. Nor did a tail per action: the t (3, 5 or 10 df, else normal, by likelihood with a margin
of 2) that makes the action's own leave-one-out errors most likely, with the body of that t
(scale as the last item): GenTD26 28 OOMs at 1.380x, 15-minute windows 146 at 1.199x, the rest
within 0.3 % of memory and the same OOMs; without the margin, from 8 runs, with 2.5 to 10 df, 29
at 1.375x and 152 at 1.198x. Yet the tails are heavy: over GenTD26's pods, in 15- and 60-minute
windows, a pod's next log peak lands beyond 3.09 times the spread of its weighted history (a
0.1 % tail for a normal) 1.8 to 3.9 % of the time, whether that spread is taken leave-one-out or
one step ahead (half-lives 2 and 6; no population prior; histories of one value left out):
leave-one-out is not what is optimistic. Read per action from its own few dozen runs the shape
is too uncertain to move a decision. So the tails stay those of the count, and the
miscalibration above is left stated (`recommender evaluate` prints it under each replay).

Nor did holding each action to its own record (tried 2026-12-03, in process, a prototype not
kept): its tail multiplied by (1 + O) / (1 + S), S the chances its first recommendations stated
before the factor and O how many of them ran out of memory (the posterior mean of the ratio of
seen to stated, one expected OOM of prior). Against the runs above (reserved GB-h on the step
change, VPA's 15,298/11,286/11,182/14,679):
- the factor kept within [0.25, 10]: GenTD26 29 OOMs at 1.40x; 15-minute windows 130 at 1.22x;
  step 11/14/9/10 at 14,575/11,330/10,994/14,073 (from 14,635/11,229/11,061/14,225); generated
  0.12 % at 1.16x; but shapes 38 OOMs at 1.29x from 15 at 1.35x: the actions that state high
  chances and have not yet run out are the ones a factor below 1 sends down a slice too soon.
- within [1, 10] (only ever more cautious): GenTD26 28 at 1.40x; 15-minute windows 130 at
  1.23x; 2-hour windows 10 at 1.49x (from 11 at 1.48x); step 11/14/9/10 at
  14,696/11,379/11,075/14,242, seed 7 above VPA's memory; shapes 15 at 1.35x.
On the finer windows, where it does most, the global D 3, S 0.75 above did more (109 OOMs at
1.22x) for less memory on GenTD26; on the rest it buys what a larger OOM_WAIT_GPUS buys. An
action's few OOMs say little about its own tail that the count of its runs has not said.

What does move decisions is a tail of another shape than any t: peaks in two modes, a fifth
of an action's runs 1.6 times the rest with nothing in the request to tell which. A t fitted
to such runs puts the heavy mode three or four scales out, at under 1 %, and a slice between
the modes runs out of memory for every heavy run (`recommender evaluate --trace modes`: two
to seven times VPA's OOMs). So above its median the main component's tail is blended with
the one the action's own leave-one-out errors show (`OwnTail`; ONLINE_TAIL_PRIOR and
ONLINE_TAIL_SPAN, with the measurements): its runs say what share lies beyond a slice where
they have shown it, the t where they have not. That is not the per-action t above: it keeps
the body and corrects the tail only where the runs speak.

The t distribution function is the Gaver-Kafadar normal approximation (accurate to about 1e-3
in probability from 2 degrees of freedom on): cheap enough to evaluate for every profile of
every pool on every Recommend, with no SciPy in the core.
"""

from __future__ import annotations

import math
from array import array
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from statistics import NormalDist
from typing import Protocol

import numpy as np
from numpy.typing import NDArray

from recommender.core import config

_NORMAL = NormalDist()
MIN_DF = 2.0
"""The approximation's lower limit; fewer degrees of freedom are treated as 2 (heavy enough)."""
MENTION_CHANGE = 0.05
"""A level change this likely is named in the reason; below it, it hardly moves the answer."""


def _t_to_z(t: float, df: float) -> float:
    df = max(df, MIN_DF)
    z = math.sqrt((df - 2.0 / 3.0 + 0.1 / df) * math.log1p(t * t / df))
    return z if t >= 0 else -z


def _z_to_t(z: float, df: float) -> float:
    df = max(df, MIN_DF)
    t = math.sqrt(df * math.expm1(z * z / (df - 2.0 / 3.0 + 0.1 / df)))
    return t if z >= 0 else -t


def t_survival(t: float, df: float) -> float:
    """P(T > t) for Student's t with `df` degrees of freedom."""
    return 0.5 * math.erfc(_t_to_z(t, df) / math.sqrt(2.0))


def t_quantile(q: float, df: float) -> float:
    return _z_to_t(_NORMAL.inv_cdf(min(max(q, 1e-12), 1 - 1e-12)), df)


_GRID_STEP = 0.25
_GRID = np.arange(41) * _GRID_STEP
"""Where an action's own tail is tabulated, in units of its scale above its median (to 10)."""
_AT = np.concatenate(([0.0], _GRID))
_BIN = 0.1
_BIN_RANGE = 20.0
"""Errors are binned a tenth of a scale wide; beyond 20 scales they count as 20."""
_NORMAL_AT = np.linspace(-40.0, 40.0, 16001)
_NORMAL_TAIL = np.array([0.5 * math.erfc(v / math.sqrt(2.0)) for v in _NORMAL_AT])
"""The normal survival on a fine grid: a kernel's tail by interpolation, with no SciPy."""


@dataclass(frozen=True)
class OwnTail:
    """The upper tail an action's own errors show, blended into the t's.

    The t is a shape assumed; where an action's peaks come in two modes (a heavier input now and
    then that the request does not reveal) or are skewed, the share of its runs beyond the
    t's 3 % point can be two or three times 3 %, run after run, and every slice sized on the t
    is too small as often. So above the median, the chance of exceeding t scales is the
    posterior mean with the t as prior worth `prior` executions beside what the action's own
    errors show (`n`, their effective count): where it has shown a tail the t lacks, the tail
    is corrected; where it has shown nothing, the t speaks.

    The errors are a density estimate (each a normal kernel), so the tail does not stop at the
    largest error seen, and only the errors above the median shape it, as a share of them:
    an action whose memory grows has its oldest errors far below its present level, which
    would otherwise thin the tail above it."""

    table: tuple[float, ...] = field(compare=False, repr=False)
    """The errors' chance of exceeding each point of _GRID, given that they exceed 0."""
    n: float
    prior: float

    def survival(self, t: float, parametric: float) -> float:
        """P(error > t scales), with `parametric` the t's own answer."""
        if t <= 0.0:
            return parametric
        at = t / _GRID_STEP
        i = int(at)
        if i >= len(self.table) - 1:
            own = 0.0
        else:
            frac = at - i
            own = 0.5 * (self.table[i] * (1.0 - frac) + self.table[i + 1] * frac)
        return (self.prior * parametric + self.n * own) / (self.prior + self.n)


def own_tail(z: NDArray[np.float64], w: NDArray[np.float64], prior: float) -> OwnTail | None:
    """The tail of errors `z` (in units of the scale) weighed `w` (summing to their effective
    count): Silverman's bandwidth for a unit spread, the errors shrunk so that the estimate
    keeps their spread instead of adding the kernel's to it. The errors are first gathered in
    bins a tenth of a scale wide (a quarter of the kernel or less), so a long history costs a
    histogram, not a kernel per run."""
    total = float(w.sum())
    if total <= 0.0 or prior <= 0.0:
        return None
    h = 1.06 * max(total, 1.0) ** -0.2
    shrink = 1.0 / math.sqrt(1.0 + h * h)
    idx = np.floor(np.clip(z * shrink, -_BIN_RANGE, _BIN_RANGE) / _BIN).astype(np.int64)
    low = int(idx.min())
    mass = np.bincount(idx - low, weights=w)
    centres = (np.arange(mass.shape[0]) + low + 0.5) * _BIN
    kept = mass > 0
    u = (_AT[:, None] - centres[kept][None, :]) / (h * shrink)
    tails = np.interp(u, _NORMAL_AT, _NORMAL_TAIL) @ mass[kept] / total
    above = float(tails[0])
    if above <= 1e-12:
        return None
    return OwnTail(tuple((tails[1:] / above).tolist()), total * min(2.0 * above, 1.0), prior)


@dataclass(frozen=True, eq=False)
class SeenPeaks:
    """How often the action's own recent peaks went past a size: a floor under the model's
    chance of an OOM there, once it has run enough to count, and past its largest peak a cap.

    Why: a model of the level and its scatter, however its tail is shaped, follows the last
    runs (memory steps and grows), so an action whose runs fall in two modes, the heavier one
    now and then and straddling a slice boundary, is seen as a level that fell after each run
    of light ones: its stated chance at the smaller slice drops to 2-7 % while one run in seven
    needs more (two modes, seed 2: 7 OOMs in 33 runs on that slice for one action). Counting
    the runs that went past the slice, over a long memory, does not forget them. The count is
    blended with the model's chance as a beta posterior (the model worth `prior` runs) and can
    only raise it: after a step up, the runs before it say too little, and the model's level
    change is right. It stops counting a size no run has passed among the newest `recent`: a
    step down is not held at the old level by runs before it. Unless those newest runs sit
    where many older runs in their range sit (`same_runs` of them, medians within `same_t`
    standard errors): then the streak is the commoner mode's, and a heavier mode a tenth of the
    runs misses twenty in a row one time in eight.

    Each run is counted as the share of a normal kernel around its log peak that lies past the
    size (`width` wide, 0: the plain count), not as all or nothing: a heavier mode at 38-42 GB
    has runs at 39.7 and 38.8 GB that say as much about the 40 GB slice as one at 40.3 does,
    and counted all or nothing they said none of its runs passed it where one in nine did (two
    modes, seed 3). The width is Silverman's rule on a robust spread, `smoothing` times 1.4826
    times the median absolute deviation of the log peaks times their effective count to the
    -1/5: the median is the commoner mode's, so the width is that mode's scatter, not the
    distance between the modes. "Passed among the newest" then means came within two widths.

    Above the largest peak the count also caps the chance (`record`): for runs that could come
    in any order, a run needing more than every one of n before it has a chance of at most one
    in n + 1, whatever shape their distribution has (averaged over the histories such runs
    could have, as a conformal bound is). Weighed as the count is, the cap is the looser one
    over the weights' sum plus one. A t fitted to two modes puts the heavier one a few
    scales out and its tail well past it; the runs say no run went there. The cap holds only
    where the runs look exchangeable: a grown action (`grown` runs or more) whose newest
    `recent` peaks did not pass the largest before them by more than `margin` (a step up or a
    growth sets new largest peaks run after run, further and further past the old one, and
    there the model's level change is right; a heavier mode's scatter sets one now and then,
    just past the old one), and only `margin` above the largest peak, where that scatter does
    not reach."""

    logs: array[float] = field(repr=False)
    """The log of the action's peaks (MiB), ascending, in single precision (a peak within
    0.002 MiB in 20 GiB): 4 bytes each, where a list of floats took 32, most of a fitted
    action's memory at 500 runs (ONLINE_MEMO_ACTIONS are kept). In logs, so that the kernel
    of each run near a size (`width`) costs no logarithm on a Recommend."""
    over: array[float] = field(repr=False)
    """over[i]: the weight of the runs from the i-th smallest on; over[n] is 0."""
    total: float
    counted_below: float
    """Sizes at or above it are the model's alone, but for the cap past the largest peak
    (`record`): two widths past the largest of the newest `recent` peaks, or inf where those
    runs sit where the older ones in their range do (`_same_place`)."""
    prior: float
    record_from: float = math.inf
    """The size from which the chance is capped at `record` (inf: not capped)."""
    record: float = 1.0
    """An upper bound on the chance of a run needing more than every one before it."""
    width: float = 0.0
    """The kernel's standard deviation in log MiB (0: each run counted all or nothing)."""

    @classmethod
    def of(cls, peaks_mib: NDArray[np.float64], weights: NDArray[np.float64], prior: float,
           recent: int, grown: int = 0, margin: float = 0.0, smoothing: float = 0.0,
           same_runs: int = 0, same_t: float = 0.0) -> SeenPeaks:
        """From peaks and their weights, newest first; `grown` 0 caps nothing, `smoothing` 0
        counts each run all or nothing, `same_runs` 0 stops counting a size the newest
        `recent` did not come near, whatever the runs before them."""
        order = np.argsort(peaks_mib)
        cumulative = np.cumsum(weights[order][::-1])[::-1]
        over = array("f")
        over.frombytes(np.append(cumulative, 0.0).astype(np.float32).tobytes())
        log_peaks = np.log(peaks_mib)
        logs = array("f")
        logs.frombytes(log_peaks[order].astype(np.float32).tobytes())
        total = float(cumulative[0])
        recent_max = float(peaks_mib[:recent].max())
        largest = float(peaks_mib.max())
        before = peaks_mib[recent:]
        # A new largest among the newest runs is a step's only if it passed the largest
        # before them by more than a heavier mode's scatter: a heavy mode sets new largest
        # peaks now and then, a little past the old one, and without the cap every one of
        # them would put that mode's slice back to the t's tail for `recent` runs.
        exchangeable = before.shape[0] > 0 and recent_max <= float(before.max()) * (1.0 + margin)
        capped = 0 < grown <= peaks_mib.shape[0] and exchangeable
        width = _kernel_width(log_peaks, weights, smoothing) if smoothing > 0 else 0.0
        counted_below = recent_max * math.exp(_REACH * width)
        in_range = log_peaks[recent:][before <= counted_below]
        if same_runs > 0 and _same_place(log_peaks[:recent], in_range, recent, same_runs,
                                         same_t):
            counted_below = math.inf
        return cls(logs, over, total, counted_below, prior,
                   largest * (1.0 + margin) if capped else math.inf, 1.0 / (total + 1.0),
                   width)

    def survival(self, mib: float, model: float) -> float:
        """P(need > mib), `model` being the model's answer."""
        if mib >= self.record_from:
            return min(model, self.record)
        if mib >= self.counted_below:
            return model
        return max(model, (self.prior * model + self._over(mib)) / (self.prior + self.total))

    def share(self, mib: float) -> float:
        """The weighted share of the peaks above `mib` (for the reason)."""
        return self._over(mib) / self.total if self.total > 0 else 0.0

    def _over(self, mib: float) -> float:
        """The weight of the runs past `mib`, each by its kernel's share past it."""
        if mib <= 0:
            return self.total  # every run needed more than nothing
        # Rounded as the logs were, so that a run that needed exactly `mib` is not past it.
        x = _single(math.log(mib))
        if self.width <= 0:
            return self.over[bisect_right(self.logs, x)]
        # Runs further than _KERNEL_REACH widths count fully or not at all; only the few
        # between are weighed by their kernel's share (a logistic with the normal's spread:
        # numpy has no erf, and the two shares differ by at most 2.3 % of a run).
        reach = _KERNEL_REACH * self.width
        lo = bisect_right(self.logs, x - reach)
        hi = bisect_right(self.logs, x + reach)
        past = self.over[hi]
        s = self.width * _LOGISTIC
        if hi - lo > _VECTOR_FROM:
            over = np.frombuffer(self.over, dtype=np.float32, count=hi - lo + 1, offset=4 * lo)
            logs = np.frombuffer(self.logs, dtype=np.float32, count=hi - lo, offset=4 * lo)
            runs = over[:-1] - over[1:]
            return past + float(np.dot(runs, 1.0 / (1.0 + np.exp((x - logs) / s))))
        # A few runs near the size (the usual case): a loop costs less than numpy's calls.
        for i in range(lo, hi):
            past += (self.over[i] - self.over[i + 1]) / (1.0 + math.exp((x - self.logs[i]) / s))
        return past


def _single(x: float) -> float:
    """x rounded to single precision, as SeenPeaks keeps its logs."""
    return array("f", (x,))[0]


_REACH = 2.0
"""How far past the newest runs' largest peak, in kernel widths, they still count."""
_KERNEL_REACH = 4.0
"""Past this many widths a run's kernel is all but on one side (a logistic: 0.07 % left)."""
_VECTOR_FROM = 48
"""Runs near a size from which numpy weighs them faster than a loop (timeit, 2026-12-06)."""
_LOGISTIC = math.sqrt(3.0) / math.pi
"""The logistic's scale whose standard deviation is 1."""


def _same_place(newest: NDArray[np.float64], older: NDArray[np.float64], recent: int,
                same_runs: int, same_t: float) -> bool:
    """Whether the newest `recent` log peaks sit where at least `same_runs` older ones in their
    range do: their medians within `same_t` standard errors (a median's, 1.2533 times the
    spread over the root of the count, the spread 1.4826 times the median absolute deviation
    of both about their own medians, in log MiB). Then a streak of runs below a size is the
    commoner mode's as before, not a new level, and the runs that passed it still count."""
    if newest.shape[0] < recent or older.shape[0] < same_runs:
        return False
    new_mid, new_off = _about_median(newest)
    old_mid, old_off = _about_median(older)
    mad = float(np.median(np.concatenate((new_off, old_off))))
    error = 1.2533 * 1.4826 * mad * math.sqrt(1.0 / newest.shape[0] + 1.0 / older.shape[0])
    return abs(new_mid - old_mid) <= same_t * error


def _about_median(x: NDArray[np.float64]) -> tuple[float, NDArray[np.float64]]:
    """The median of `x` and each value's absolute deviation from it."""
    mid = float(np.median(x))
    return mid, np.abs(x - mid)


def _kernel_width(log_peaks: NDArray[np.float64], weights: NDArray[np.float64],
                  smoothing: float) -> float:
    """Silverman's rule on a robust spread of the log peaks (SeenPeaks)."""
    mad = float(np.median(_about_median(log_peaks)[1]))
    effective = float(weights.sum()) ** 2 / float((weights * weights).sum())
    return smoothing * 1.4826 * mad / math.pow(effective, 0.2)


@dataclass(frozen=True)
class Predictive:
    """need = transform(loc + scale * T_df); transform is exp in log space, identity in MiB.

    `changes` are other hypotheses mixed in: (probability, loc, scale) of the same t in the
    same space, each a level the action may have moved to in its last executions (a new
    version of its code; `core.online`). Their probabilities sum below 1; the rest is the
    main one's."""

    loc: float
    scale: float
    df: float
    log_space: bool = True
    floor_mib: float = 0.0
    """Known for certain (a recent OOM, a declared figure): no need below it."""
    changes: tuple[tuple[float, float, float], ...] = ()
    own: OwnTail | None = None
    """The action's own errors' tail, blended into the main component's above its median."""
    near: tuple[float, float] = field(default=(0.0, 1.0), compare=False)
    """What the design's errors near the request's inputs did to it (`core.local`): the shift
    of its location in units of its scale, and the factor on its variance. Already in loc and
    scale; kept for the reason."""
    seen: SeenPeaks | None = field(default=None, compare=False)
    """How often the action's own peaks passed each size: a floor under the chance of an OOM,
    and past the largest a cap on it."""
    beyond: tuple[tuple[float, float, float], ...] = ()
    """Beyond the inputs the design's runs had, designs ranked nearly as well that need more
    (`fits.ActionModel.predict`): (probability, loc, scale) mixed in as `changes` are."""

    @property
    def mixed(self) -> tuple[tuple[float, float, float], ...]:
        """Every hypothesis mixed in beside the main one: level changes, other designs."""
        return self.changes + self.beyond if self.beyond else self.changes

    @property
    def median_mib(self) -> float:
        """The main component's median need (MiB)."""
        return self._mib(self.loc)

    def _x(self, mib: float) -> float | None:
        if self.log_space:
            return math.log(mib) if mib > 0 else None
        return mib

    def _tail(self, x: float) -> float:
        return self._counted(self._mib(x), self._model_tail(x))

    def _model_tail(self, x: float) -> float:
        """The tail before the action's own count (`seen`) has its say."""
        main = 1.0 - sum(p for p, _, _ in self.mixed)
        alone = _survival(x, self.loc, self.scale, self.df)
        if self.own is not None and self.scale > 0:
            alone = self.own.survival((x - self.loc) / self.scale, alone)
        total = main * alone
        for p, loc, scale in self.mixed:
            total += p * _survival(x, loc, scale, self.df)
        return total

    def survival(self, mib: float) -> float:
        """P(need > mib): the chance that a slice of `mib` runs out of memory."""
        return self._read(mib, self._tail)

    def model_survival(self, mib: float) -> float:
        """P(need > mib) before the action's own count of runs past `mib` has its say: what
        a young action's record (`core.calibration`) corrects, as it learned from it."""
        return self._read(mib, self._model_tail)

    def _read(self, mib: float, tail: Callable[[float], float]) -> float:
        """`tail` at `mib`: certain below the floor, and for a size of nothing in log space."""
        if mib < self.floor_mib:
            return 1.0
        x = self._x(mib)
        return 1.0 if x is None else tail(x)

    def counted(self, mib: float, chance: float) -> float:
        """`chance`, a model's chance at `mib` (this one's, or this one's corrected by the
        young actions' record), once the action's own count of runs past `mib` has had its
        say, as `survival` lets it have its say on the model's own."""
        if mib < self.floor_mib:
            return 1.0
        return self._counted(mib, chance)

    def _counted(self, mib: float, chance: float) -> float:
        """The one place the action's count of its runs past `mib` has its say on a chance."""
        return chance if self.seen is None else self.seen.survival(mib, chance)

    def raised_by_seen(self, mib: float) -> tuple[float, float] | None:
        """(the model's own chance, the share of the action's runs past `mib`) when that
        share raised the chance of an OOM at `mib`; None when it did not. The reason says so:
        an operator reading 9 % where the level says 3 % should see where 9 % came from."""
        found = self.by_seen(mib)
        if found is None or found[1] <= found[0]:
            return None
        return found[0], found[2].share(mib)

    def capped_by_seen(self, mib: float) -> tuple[float, float] | None:
        """(the model's own chance, the cap) when the cap past the action's largest peak
        lowered the chance of an OOM at `mib` (SeenPeaks.record); None when it did not."""
        found = self.by_seen(mib)
        if found is None or found[1] >= found[0]:
            return None
        return found[0], found[2].record

    def by_seen(self, mib: float) -> tuple[float, float, SeenPeaks] | None:
        """(the model's chance at `mib`, the chance once the action's runs have had their say,
        those runs), or None where the runs have no say (none counted, or below the floor)."""
        if self.seen is None or mib < self.floor_mib:
            return None
        x = self._x(mib)
        if x is None:
            return None
        model = self._model_tail(x)
        return model, self.seen.survival(mib, model), self.seen

    def quantile(self, q: float) -> float:
        """The need at coverage `q` (MiB)."""
        x = self.loc + self.scale * t_quantile(q, self.df)
        if self.mixed or (q > 0.5 and (self.own is not None or self.seen is not None)):
            x = self._mixture_quantile(q, x)
        mib = math.exp(min(x, 50.0)) if self.log_space else x
        return max(mib, self.floor_mib)

    def _mixture_quantile(self, q: float, main: float) -> float:
        """Bisection between the components' own quantiles, which bracket the mixture's."""
        ends = [main] + [loc + scale * t_quantile(q, self.df) for _, loc, scale in self.mixed]
        lo, hi = min(ends), max(ends)
        target = 1.0 - q
        # An own tail may reach past the t's quantile, or fall short of it.
        step = max(self.scale, 1e-9)
        while self._tail(hi) > target and step < 1e6:
            hi += step
            step *= 2.0
        step = max(self.scale, 1e-9)
        while self._tail(lo) <= target and step < 1e6:
            lo -= step
            step *= 2.0
        for _ in range(40):
            mid = 0.5 * (lo + hi)
            if self._tail(mid) > target:
                lo = mid
            else:
                hi = mid
            if hi - lo <= 2e-4 * max(1.0, abs(mid)):
                break
        return hi

    def with_floor(self, floor_mib: float) -> Predictive:
        if floor_mib <= self.floor_mib:
            return self
        return replace(self, floor_mib=floor_mib)

    def describe(self) -> str:
        space = "log MiB" if self.log_space else "MiB"
        spread = (f"x{math.exp(self.scale):.2f}" if self.log_space
                  else f"+-{self.scale:,.0f} MiB")
        text = f"median {self.median_mib:,.0f} MiB, scale {spread} ({space}, {self.df:.0f} df)"
        chance = sum(c[0] for c in self.changes)
        if chance >= MENTION_CHANGE:
            _, loc, _ = max(self.changes, key=lambda c: c[0])
            text += (f"; {chance:.0%} chance its level changed in the last executions "
                     f"(most likely to a median of {self._mib(loc):,.0f} MiB)")
        if self.beyond:
            chance = sum(c[0] for c in self.beyond)
            top = max(self._mib(loc) for _, loc, _ in self.beyond)
            text += (f"; beyond the inputs its runs had, {chance:.0%} on designs nearly as good "
                     f"that need more (up to a median of {top:,.0f} MiB)")
        return text

    def _mib(self, x: float) -> float:
        return math.exp(min(x, 50.0)) if self.log_space else x


def _survival(x: float, loc: float, scale: float, df: float) -> float:
    if scale <= 0:
        return 0.0 if x >= loc else 1.0
    return t_survival((x - loc) / scale, df)


class Tail(Protocol):
    def survival(self, mib: float) -> float:
        """P(need > mib)."""
        ...


class CountedTail(Tail, Protocol):
    """A need whose chance at a size is a model's, then the action's own count of runs past
    it (`Predictive.seen`): a correction of the model's tail (`core.calibration`) goes
    between the two, not on top of the count."""

    def model_survival(self, mib: float) -> float:
        """P(need > mib) as the model says, before the count."""
        ...

    def counted(self, mib: float, chance: float) -> float:
        """`chance`, a model's chance at `mib`, once the count has had its say."""
        ...


def checked_oom_wait_gpus(value: float) -> float:
    """The price of an OOM an operator set, or ValueError naming what is wrong with it: a
    number from 0 (an OOM costs only the memory its attempts held) to OOM_WAIT_GPUS_MAX."""
    if not math.isfinite(value) or not 0.0 <= value <= config.OOM_WAIT_GPUS_MAX:
        raise ValueError(f"oom_wait_gpus: {value!r} is not a number of whole GPUs from 0 to "
                         f"{config.OOM_WAIT_GPUS_MAX:g}")
    return float(value) + 0.0  # -0.0 is 0: no reason should say "counted as -0 whole GPUs"


def oom_wait_mib(gpu_memory_mib: float, wait_gpus: float = config.OOM_WAIT_GPUS) -> float:
    """The part of an OOM's cost that does not shrink with the slice, in MiB x the run's
    duration: `wait_gpus` whole GPUs of the model it ran on (OOM_WAIT_GPUS unless the
    operator priced an OOM otherwise: `recommender serve --oom-wait-gpus`)."""
    return wait_gpus * gpu_memory_mib


def expected_cost(sizes_mib: list[float], start: int, need: Tail, wait_mib: float) -> float:
    """Expected memory reserved (in slice-MiB x the execution's duration) when the execution
    starts on `sizes_mib[start]` and climbs the sizes above it after each OOM.

    Each attempt holds its slice (a failed one for as long as it ran: the whole execution, at
    worst), so the run an OOM loses is counted by the slice it held; the OOM also costs
    `wait_mib` whatever the slice (the user's wait for the rerun, `oom_wait_mib`). Attempt j is
    reached when the need exceeds the slice before it."""
    cost = 0.0
    reach = 1.0
    for size in sizes_mib[start:]:
        fail = need.survival(size)
        cost += reach * size + fail * wait_mib
        reach = fail
        if reach <= 1e-9:
            break
    return cost
