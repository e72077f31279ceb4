"""What a design's errors were near the request's inputs: a misfit of its shape, local to them.

Why: a design is one formula across every input it has seen. Where an action's memory has a
shape none of the designs is (attention: a base, batch x sequence and batch x sequence^2 at once,
which no single power is), the best of them misses in one direction at middling inputs and in
the other at the largest. Its leave-one-out errors there are not scatter but the shape's bias,
and one scale for every input states too small a chance of an OOM where the fit runs short and
too large where it has room (shapes seed 5, attention-0001: 0.36 % stated against 3.2 % true at
a sequence of 1,024; 21 % against 1.5 % at 4,096). The runs whose inputs were near the
request's show that bias: their errors' mean, shrunk towards none by ONLINE_LOCAL_PRIOR runs,
moves the location, and their spread about it the scale.

Only where it would have predicted the action's own runs better (`local_errors`): where the
design's shape is the action's, the errors near any input are scatter, and a local mean of
scatter would move each request by noise. The same errors also show a scatter that grows with an
input (padding to the longest item of a larger batch): of mean zero near every input, wider at
one end, where the local spread scores the runs better than the design's one scale.

A kernel sees such a scatter only where runs came near the request in every input at once: with
a second, continuous input (a sequence length beside the batch) few do, and the spread near each
request is read from a handful of runs. A scale that grows with an input whatever the others
are is one slope per input: the log of the errors' variance, linear in the log inputs
(`_variance_slopes`), fitted over every run. Kept where it scores the runs better than one
scale does, by as much as the kernel must, less the slopes it spent; the kernel then reads
the errors in units of it."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from recommender.core import config
from recommender.core.arrays import FloatArray

_NONE_NEAR = 1e-9
"""Kernel weights summing to less are no run near: a run's own weight taken from the sums
leaves a rounding error, not a run."""


_HALVINGS = 30
"""A scoring step halved this often (to a billionth) and still no better: the fit is there."""


@dataclass(frozen=True, eq=False)
class LocalErrors:
    """A design's leave-one-out errors in units of its scale, gathered by the inputs they were
    made at (log1p, a column per input of the design): per distinct row of inputs, the sums of
    the runs' weights, weighted errors, weighted squared errors and squared weights. Inputs
    mostly repeat (batch sizes, sequence lengths), so a Recommend weighs a few dozen rows, not
    every run: the same sums as run by run, in another order."""

    inputs: FloatArray
    sums: FloatArray
    """Rows as `inputs`; columns: sum w, sum w e, sum w e^2, sum w^2."""
    own: tuple[FloatArray, FloatArray] = (np.zeros(0), np.zeros(0))
    """The newest runs' errors as the runs near each (but itself) would have moved and scaled
    them, and their weights: the tail the design's errors show once the misfit is taken out
    (`online._own_tail`), which the errors as they were would fatten by the misfit."""
    variance: VarianceSlopes | None = None
    """A variance that grows with the inputs, in whose units `sums` holds the errors."""

    @classmethod
    def alone(cls, variance: VarianceSlopes, columns: int,
              own: tuple[FloatArray, FloatArray]) -> LocalErrors:
        """The variance's slopes alone: no run is weighed near each input."""
        return cls(np.zeros((0, columns)), np.zeros((0, 4)), own, variance)

    @property
    def variance_alone(self) -> bool:
        """No run near each input kept, only the variance's slopes (`alone`)."""
        return not self.inputs.shape[0]

    def at(self, x: FloatArray) -> tuple[float, float]:
        """At log1p inputs `x`: the shift of the location in units of the scale, and the
        factor on the variance (the local mean square about the shift; 1 where no run was
        near, which is the design's own, or the variance the inputs call for)."""
        if self.variance_alone:  # no run to weigh: what the kernel gives with none
            shift, ratio = 0.0, 1.0
        else:
            d = (self.inputs - x) / config.ONLINE_LOCAL_BANDWIDTH
            k = np.exp(-0.5 * np.einsum("ij,ij->i", d, d))
            total, first, second, _ = k @ self.sums
            moved = _moved(np.asarray(total), np.asarray(first), np.asarray(second),
                           np.asarray((k * k) @ self.sums[:, 3]))
            shift, ratio = float(moved[0]), float(moved[1])
        if self.variance is None:
            return shift, ratio
        v = float(self.variance.of(x))
        return shift * math.sqrt(v), ratio * v


@dataclass(frozen=True)
class VarianceSlopes:
    """The log of a design's error variance (in units of its scale), linear in the log1p
    inputs: `coef` is (intercept, a slope per input). Held within the range its runs had
    (beyond the inputs seen, a slope read from them is a guess) and ONLINE_LOCAL_SLOPE_RANGE
    times the one variance either way (errors of a peak that repeats to the MiB at some
    inputs are no reason to state it certain there)."""

    coef: FloatArray
    low: float
    high: float
    lent: bool = False
    """Other actions' slopes (`lent_variance`), not the action's own."""

    def of(self, inputs: FloatArray) -> FloatArray:
        """The variance at each row of `inputs` (at one row: a 0-d array)."""
        return np.asarray(np.exp(np.clip(self.coef[0] + inputs @ self.coef[1:],
                                         self.low, self.high)))


def local_errors(inputs: FloatArray, errors: FloatArray, weights: FloatArray,
                 lent: FloatArray | None = None, kernel: bool = True) -> LocalErrors | None:
    """The errors near each input, where they would have told the design's newest runs
    (ONLINE_LOCAL_CHECKED of them) more than the design alone: the mean square of those runs'
    errors less their shift from the other runs near them, at most ONLINE_LOCAL_GAIN times
    their mean square as they were; or their normal log score at the shift and spread near
    them, -log(ONLINE_LOCAL_GAIN) a run better than at the design's (a scatter that grows with
    an input, whose errors are of mean zero everywhere). None where not.

    `lent`: other actions' slopes of the variance, one per input (`lent_variance`), taken
    where the runs are too few to read the action's own (ONLINE_LOCAL_SCALE_MIN_RUNS).
    Without `kernel`, only those (a design with lent slopes: its few runs are not read near
    each input)."""
    keep = readable(inputs, weights)
    if int(keep.sum()) < 2:
        return None
    inputs, errors, weights = inputs[keep], errors[keep], weights[keep]
    checked = min(errors.shape[0], config.ONLINE_LOCAL_CHECKED)
    variance = _variance_slopes(inputs, errors, weights, checked) if kernel else None
    if variance is None and lent is not None and checked < config.ONLINE_LOCAL_SCALE_MIN_RUNS:
        variance = lent_variance(lent, inputs, weights)
    if variance is not None:  # the kernel reads the errors in the variance's units
        errors = errors / np.sqrt(variance.of(inputs))
    if not kernel:
        return (None if variance is None else
                LocalErrors.alone(variance, inputs.shape[1], (errors[:checked], weights[:checked])))
    rows, cell = np.unique(inputs, axis=0, return_inverse=True)
    cell = cell.reshape(-1)
    sums = np.zeros((rows.shape[0], 4))
    for j, v in enumerate((weights, weights * errors, weights * errors * errors,
                           weights * weights)):
        sums[:, j] = np.bincount(cell, weights=v, minlength=rows.shape[0])
    w, e = weights[:checked], errors[:checked]
    # Each checked run's shift from the others: the sums over every row, less its own run.
    d = (rows[cell[:checked], None, :] - rows[None, :, :]) / config.ONLINE_LOCAL_BANDWIDTH
    k = np.exp(-0.5 * np.einsum("ijk,ijk->ij", d, d))
    near = k @ sums
    shift, ratio = _moved(near[:, 0] - w, near[:, 1] - w * e, near[:, 2] - w * e * e,
                          (k * k) @ sums[:, 3] - w * w)
    moved = e - shift
    square = float(w @ (e * e))
    better_located = float(w @ (moved * moved)) <= config.ONLINE_LOCAL_GAIN * square
    # Or better scaled: the runs' normal log score at their local location and scale against
    # at the design's (-2 log density, constants dropped), at least -log(ONLINE_LOCAL_GAIN) a
    # run better. The location alone misses a scatter that grows with an input (padding to a
    # batch's longest item): errors of mean zero near every input, wide at one end.
    better_scaled = checked >= config.ONLINE_LOCAL_SCALE_MIN_RUNS and (
        float(w @ (np.log(ratio) + moved * moved / ratio))
        <= square + math.log(config.ONLINE_LOCAL_GAIN) * float(w.sum()))
    if better_located or better_scaled:
        return LocalErrors(rows, sums, (moved / np.sqrt(ratio), w), variance)
    if variance is not None:  # the variance's slopes alone: no run is near in the kernel
        return LocalErrors.alone(variance, inputs.shape[1], (e, w))
    return None  # not better, or not a number


def readable(inputs: FloatArray, weights: FloatArray) -> FloatArray:
    """The runs whose errors are read: weighed, with every input of the design (a run that
    lacked an input an idle power left out of the design is near nothing)."""
    return np.asarray((weights > 0) & np.all(np.isfinite(inputs), axis=1))


def lent_variance(slopes: FloatArray, inputs: FloatArray, weights: FloatArray
                  ) -> VarianceSlopes | None:
    """Other actions' slopes of the variance (`online.own_variance`) on a young action's runs:
    its intercept sets their weighted mean variance at the design's one (its scale is what
    those runs showed, and the prior's, an average over the inputs other actions ran with),
    held within ONLINE_LOCAL_SLOPE_RANGE times it either way but not within the runs' range:
    beyond the inputs a young action ran with is where other actions know more than it does.
    None where every slope is nought."""
    if not np.any(slopes):
        return None
    eta = inputs @ slopes
    top = float(eta.max())
    level = top + math.log(float(weights @ np.exp(eta - top)) / float(weights.sum()))
    bound = math.log(config.ONLINE_LOCAL_SLOPE_RANGE)
    return VarianceSlopes(np.concatenate(([-level], slopes)), -bound, bound, lent=True)


def _variance_slopes(inputs: FloatArray, errors: FloatArray, weights: FloatArray,
                     checked: int) -> VarianceSlopes | None:
    """The log variance linear in the log inputs, by weighted maximum likelihood over every
    run (the squared errors' gamma regression on a log link, by Fisher scoring: no log of an
    error near zero), held within ONLINE_LOCAL_SLOPE_RANGE times the one variance either way.
    Kept where the newest `checked` runs' normal log score (-2 log density) is at least
    -log(ONLINE_LOCAL_GAIN) a run better than at one variance fitted alike, and by
    ONLINE_LOCAL_SLOPE_COST more for each slope: fitted on those same runs, a slope betters
    their score by about that much even where none is real. Only from
    ONLINE_LOCAL_SCALE_MIN_RUNS checked runs, as the kernel's scale."""
    if checked < config.ONLINE_LOCAL_SCALE_MIN_RUNS:
        return None
    x = np.column_stack((np.ones(errors.shape[0]), inputs))
    y = errors * errors
    total = float(weights.sum())
    if not total > 0 or np.ptp(inputs, axis=0).max(initial=0.0) <= 0:
        return None  # no input moved: a slope is not there to read
    level = math.log(max(float(weights @ y) / total, 1e-12))
    coef = np.zeros(x.shape[1])
    coef[0] = level
    a = x.T @ (x * weights[:, None]) + 1e-9 * np.eye(x.shape[1])
    score = _score(x @ coef, y, weights)
    for _ in range(config.ONLINE_LOCAL_SLOPE_STEPS):
        # Fisher scoring (one weight per run on a log link), each step halved until it
        # betters the score: the squared errors are skewed, and a full step can overshoot.
        eta = x @ coef
        try:
            step = np.linalg.solve(a, x.T @ (weights * (y * _exp(-eta) - 1.0)))
        except np.linalg.LinAlgError:
            return None
        for _ in range(_HALVINGS):
            better = _score(x @ (coef + step), y, weights)
            if better <= score:
                break
            step = step / 2
        else:
            break
        coef, done = coef + step, score - better < 1e-9 * max(abs(score), 1.0)
        score = better
        if done:
            break
    if not np.all(np.isfinite(coef)):
        return None
    eta = x @ coef
    w, c = weights[:checked], slice(0, checked)
    sloped = _score(eta[c], y[c], w)
    flat = _score(np.full(w.shape[0], level), y[c], w)
    gain = -math.log(config.ONLINE_LOCAL_GAIN) * float(w.sum())
    if not sloped <= flat - gain - config.ONLINE_LOCAL_SLOPE_COST * inputs.shape[1]:
        return None  # not better, or not a number
    bound = math.log(config.ONLINE_LOCAL_SLOPE_RANGE)
    return VarianceSlopes(coef, max(float(eta.min()), level - bound),
                          min(float(eta.max()), level + bound))


def _score(eta: FloatArray, y: FloatArray, weights: FloatArray) -> float:
    """The runs' normal log score (-2 log density, constants dropped) at log variances `eta`,
    their squared errors `y`."""
    return float(weights @ (eta + y * _exp(-eta)))


def _exp(x: FloatArray) -> FloatArray:
    """exp, held where a float overflows: a log variance 700 from the errors' is not one any
    step would take."""
    return np.asarray(np.exp(np.clip(x, -700.0, 700.0)))


def _moved(total: FloatArray, first: FloatArray, second: FloatArray, square: FloatArray
           ) -> tuple[FloatArray, FloatArray]:
    """From the kernel's sums of weights, weighted errors, weighted squared errors and squared
    weights: the mean error shrunk by ONLINE_LOCAL_PRIOR runs of none, and the factor on the
    variance (the spread about that mean, shrunk towards the design's 1 alike).

    How many runs the weights are worth: their effective count (total^2 / square) alone would
    not see that every run is far (it is the same for weights all a millionth), and each
    weight is at most about one run's (`online._tail_weights`, with ONLINE_LOCAL_SPAN), so
    their sum counts the runs near; the smaller of the two."""
    near = total > _NONE_NEAR  # else no run near: (0, 1), not a rounding error's mean
    total = np.where(near, total, 1.0)
    n_eff = np.where(near, np.minimum(total, total * total / np.maximum(square, 1e-300)), 0.0)
    mean = np.where(near, first / total, 0.0)
    spread = np.where(near, np.maximum(second / total - mean * mean, 0.0), 0.0)
    prior = config.ONLINE_LOCAL_PRIOR
    return (np.asarray(mean * n_eff / (n_eff + prior)),
            np.asarray((spread * n_eff + prior) / (n_eff + prior)))
