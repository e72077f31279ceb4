"""Has the action's level moved in its last few executions? The posterior a fit's tail weighs.

A new version of an action's code can need more memory from one execution on, and nothing in
the request says so. Each design's newest leave-one-out errors are weighed against its usual
scatter: "the last m moved together by an unknown shift" against "they are the usual scatter",
for each m up to ONLINE_CHANGE_LOOKBACK. A likely change adds a component to the predictive
tail (`fits.Fit.changes`), so the next slice is sized for the new level before a second OOM proves
it; and the design is ranked on the runs before the change (`fits.Fit.selection_loss`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from recommender.core import config
from recommender.core.arrays import FloatArray


def change_lookback(n: int) -> int:
    """How many of n executions (newest first) may be the first of a new level."""
    return max(min(config.ONLINE_CHANGE_LOOKBACK, n - config.ONLINE_CHANGE_MIN_BEFORE), 0)


def _log_t_density(x: FloatArray, scale: float, df: float) -> FloatArray:
    """log of the t density up to the constant shared by every call with the same scale."""
    return np.asarray(-0.5 * (df + 1.0) * np.log1p((x / scale) ** 2 / df))


@dataclass(frozen=True)
class Residuals:
    """A design's leave-one-out errors in log MiB as a level change needs them: the newest few
    (newest first), and the weighted spread and effective count of the ones before them. Kept
    on every memoised fit, so bounded by ONLINE_CHANGE_LOOKBACK, not by the history."""

    recent: FloatArray
    usual_var: float
    usual_n_eff: float

    @classmethod
    def of(cls, log_loo: FloatArray, weights: FloatArray) -> Residuals | None:
        lookback = change_lookback(log_loo.shape[0])
        if lookback < 1:
            return None
        before, w = log_loo[lookback:], weights[lookback:]
        total = max(float(w.sum()), 1e-300)
        return cls(log_loo[:lookback].copy(),
                   float(np.sum(w * before * before)) / total,
                   total * total / max(float(np.sum(w * w)), 1e-300))


_SHIFT_GRID = np.linspace(-4.0, 4.0, 81)
"""Shifts tried, in prior scales: the integral over the unknown shift is a sum on this grid."""
_LOG_PRIOR = -0.5 * _SHIFT_GRID ** 2 - np.log(np.sum(np.exp(-0.5 * _SHIFT_GRID ** 2)))
"""The normal prior of the shift on that grid, normalised."""


@dataclass(frozen=True)
class ChangePosterior:
    """`change_posterior`'s answer: prob[m - 1], the chance that the last m executions are a
    new level (0 in all when no hypothesis reaches ONLINE_CHANGE_MIN_PROBABILITY); and per m
    the mean and second moment of the shift in log MiB."""

    prob: FloatArray
    mean: FloatArray
    second: FloatArray

    @property
    def total(self) -> float:
        return float(self.prob.sum())

    def components(self) -> tuple[tuple[float, float, float], ...]:
        """One component for all the hypotheses (their probability, the mean and spread of
        their shifts): each component costs a t tail on every Recommend, and they mostly agree
        on the shift."""
        total = self.total
        if not total:
            return ()
        each = self.prob / total
        mean = float(self.mean @ each)
        second = float(self.second @ each)
        step = config.ONLINE_CHANGE_SCALE * float(_SHIFT_GRID[1] - _SHIFT_GRID[0])
        return ((total, mean, max(second - mean * mean, step * step)),)


def change_posterior(residuals: Residuals, prior_log_scale: float, df: float) -> ChangePosterior:
    """Has the action's level moved in its last m executions (a new version of its code)?

    `residuals` are the design's leave-one-out errors (the usual spread is the one the design
    itself sees, with its weights). For each m up
    to ONLINE_CHANGE_LOOKBACK, "the last m moved together by an unknown shift (normal, scale
    ONLINE_CHANGE_SCALE)" is weighed against "they are the usual scatter" by their likelihood
    under t errors with the spread of the executions before them (so one outlier among them is
    still scatter: a shift must explain them all), with a prior chance ONLINE_CHANGE_HAZARD of
    a change at each execution. A single execution far off the usual makes a change likely at
    once, so the next slice is sized for the new level before a second OOM proves it; when the
    next executions come back to the old level the hypothesis fades. Without a surprise, every
    hypothesis stays below ONLINE_CHANGE_MIN_PROBABILITY and the prediction is the design's."""
    n_eff, prior_df = residuals.usual_n_eff, config.ONLINE_PRIOR_DF
    scale = math.sqrt((residuals.usual_var * n_eff + prior_log_scale ** 2 * prior_df)
                      / (n_eff + prior_df))
    recent = residuals.recent
    lookback = recent.shape[0]
    tau = config.ONLINE_CHANGE_SCALE
    shifts = _SHIFT_GRID * tau
    # gain[g, m-1]: log likelihood ratio of the newest m under shift g against no shift.
    gain = np.cumsum(_log_t_density(recent[None, :] - shifts[:, None], scale, df)
                     - _log_t_density(recent, scale, df)[None, :], axis=1)
    joint = _LOG_PRIOR[:, None] + np.minimum(gain, 200.0)
    top = joint.max(axis=0)
    like = np.exp(joint - top)
    log_bf = top + np.log(like.sum(axis=0))
    hazard = config.ONLINE_CHANGE_HAZARD
    odds = np.exp(np.log(hazard / max(1.0 - hazard * lookback, 1e-9)) + np.minimum(log_bf, 200.0))
    prob = odds / (1.0 + float(odds.sum()))
    if float(prob.sum()) < config.ONLINE_CHANGE_MIN_PROBABILITY:
        prob = np.zeros_like(prob)
    post = like / like.sum(axis=0)
    return ChangePosterior(prob, shifts @ post, (shifts ** 2) @ post)
