"""Has an action's memory stepped to a new level, and how many executions ago?

A new version of an action's code can need more (or less) memory from one execution on, and
nothing in the request says so. The online designs (`core.online`) follow such a step by
weighing recent runs more, and their change posterior (`level_change.change_posterior`) sizes the
first runs after it. But both judge a design's leave-one-out errors, and those fade as the
design's weights move to the new level, while the runs on both sides of the step stay in the
design's spread for dozens of runs: a half-life of 6 to 12 executions still gives the old level
a tenth of the weight 20 to 40 runs later, and a 1.75x step in that tenth is a spread three
times the runs' own scatter. A trend design meanwhile takes the step for growth. On the
step-change workload (seed 7) the second to twentieth runs after a step cost 2.3 times what
VPA's P90 x 1.15 spent there (582 against 251 GB-h above the oracle).

Here the newest m executions are compared with those before them, each side with its own
mean: a two-sample t on log peaks, less what a log-linear fit on the request's inputs explains
(a request that moved to larger batches is not a step). Unlike the design's errors, it grows
with m. Where it passes STEP_T, `online._cores` moves the runs before the step by it, so every
design sees one level, its spread the runs' own scatter. Pure numpy: cumulative sums, tens of
microseconds per refit.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from recommender.core import config
from recommender.core.arrays import FloatArray


@dataclass(frozen=True)
class Step:
    """The newest `runs` executions sit `shift` (log MiB) above those before them."""

    runs: int
    shift: float
    t: float
    variance: float
    """Of the shift (log MiB squared): the runs moved by it carry its error into every
    design's level, which their own scatter does not show (`fits.Fit.predict` adds it)."""

    def said(self) -> str:
        """For the reason: what was seen and what was done with it."""
        return (f"its level stepped x{math.exp(self.shift):.2f} {self.runs} executions ago "
                f"(t {self.t:.1f}), the runs before counted at the new level")


def find_step(log_y: FloatArray, inputs: Sequence[FloatArray] = ()) -> Step | None:
    """The most likely step among the newest STEP_MAX_AFTER executions (newest first), or None
    when no split passes STEP_T. `inputs`: the request's input columns (NaN where a run lacked
    one); those complete over the window are regressed out first, on log1p."""
    window = min(log_y.shape[0], config.STEP_MAX_AFTER + config.STEP_MAX_BEFORE)
    last = min(config.STEP_MAX_AFTER, window - config.STEP_MIN_BEFORE)
    if last < config.STEP_MIN_AFTER:
        return None
    r = log_y[:window]
    m = np.arange(config.STEP_MIN_AFTER, last + 1)
    cols = [np.log1p(np.maximum(c[:window], 0.0)) for c in inputs
            if bool(np.all(np.isfinite(c[:window])))]
    inside = np.ones(m.shape[0], dtype=bool)
    if cols:
        x = np.column_stack([np.ones(window), *cols])
        if window > x.shape[1] + 2:
            try:  # the normal equations: a few columns, a tenth of lstsq's cost
                coef = np.linalg.solve(x.T @ x, x.T @ r)
            except np.linalg.LinAlgError:  # an input that never varied
                coef = np.full(x.shape[1], np.nan)
            if not bool(np.all(np.isfinite(coef))):
                coef = np.linalg.lstsq(x, r, rcond=None)[0]
            r = r - x @ coef
    c1 = np.concatenate(([0.0], np.cumsum(r)))
    c2 = np.concatenate(([0.0], np.cumsum(r * r)))
    nb = np.minimum(config.STEP_MAX_BEFORE, window - m)
    for c in cols:
        # Only where the requests were alike on both sides: a log-linear fit misses a
        # footprint plus activations away from the inputs' mean, so a move to larger
        # batches would show as a step. A two-sample t on each input, as on the peaks.
        sd = float(c.std())
        if sd <= 1e-9 * (1.0 + abs(float(c.mean()))):
            continue  # an input that never varied: every split is alike
        after, before = _sides(np.concatenate(([0.0], np.cumsum(c))), m, nb)
        moved = np.abs(after / m - before / nb) / (sd * np.sqrt(1.0 / m + 1.0 / nb))
        inside &= moved <= config.STEP_INPUT_T
    (sum_a, sum_b), (sq_a, sq_b) = _sides(c1, m, nb), _sides(c2, m, nb)
    mean_a, mean_b = sum_a / m, sum_b / nb
    ss = (sq_a - sum_a * mean_a) + (sq_b - sum_b * mean_b)
    var = np.maximum(ss / (m + nb - 2), config.STEP_MIN_LOG_SCALE ** 2)
    t = np.where(inside, np.abs(mean_a - mean_b) / np.sqrt(var * (1.0 / m + 1.0 / nb)), 0.0)
    best = int(np.argmax(t))
    if float(t[best]) <= config.STEP_T:
        return None
    return Step(int(m[best]), float(mean_a[best] - mean_b[best]), float(t[best]),
                float(var[best] * (1.0 / m[best] + 1.0 / nb[best])))


def _sides(cumulative: FloatArray, m: NDArray[np.int_], nb: NDArray[np.int_]
           ) -> tuple[FloatArray, FloatArray]:
    """Sums over the newest m and the nb before them, for every split at once, from a
    cumulative sum that starts at 0."""
    return cumulative[m], cumulative[m + nb] - cumulative[m]
