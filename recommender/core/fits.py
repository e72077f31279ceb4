"""One design fitted on one action's history: its least squares, leave-one-out errors and loss.

A fit is made in two steps. `fit_core` does the least squares and the closed-form leave-one-out
errors, everything that does not depend on the population's spread; `finish` brings that spread
in as the prior of the fit's scale and scores the bound the policy would have used on the
action's own past runs (its leave-one-out pinball loss, what designs are ranked on). A new
population read moves every action's prior, so `core.online` keeps the cores of the actions
fitted last and redoes only `finish`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

import numpy as np
from numpy.typing import NDArray

from recommender.core import config
from recommender.core.arrays import FloatArray
from recommender.core.designs import Design, best_exponents, held_out_choices, pairwise
from recommender.core.level_change import (
    ChangePosterior,
    Residuals,
    change_lookback,
    change_posterior,
)
from recommender.core.local import LocalErrors
from recommender.core.predictive import OwnTail, Predictive, SeenPeaks, t_quantile
from recommender.core.steps import Step


@dataclass(frozen=True)
class Fit:
    """One design fitted on one action's history."""

    design: Design
    coef: FloatArray
    r_inv: FloatArray
    """Inverse of the weighted design's R factor: the leverage of a new point."""
    scale: float
    df: float
    loss: float
    """Weighted leave-one-out pinball loss (MiB) of the calibrated bound: lower is better."""
    older_losses: FloatArray = field(compare=False, repr=False)
    """older_losses[m - 1]: the same loss over the executions before the newest m, for m up to
    the level-change lookback (what a design is judged on if the level changed m runs ago)."""
    samples: int
    mean_level_mib: float
    residuals: Residuals | None = field(default=None, compare=False, repr=False)
    """What a level change is judged on (`with_changes`); a few numbers, not the history."""
    own: OwnTail | None = field(default=None, compare=False, repr=False)
    """The tail its own errors show (`online._own_tail`); only on a fit that may serve
    (`online._model`)."""
    seen: SeenPeaks | None = field(default=None, compare=False, repr=False)
    """How often its peaks passed each size (`online._seen`); only on a fit that may serve."""
    changes: tuple[tuple[float, float, float], ...] = ()
    """(probability, shift, variance of the shift) in log MiB: the action's level may have moved
    in its last executions by that much (`level_change.change_posterior`)."""
    centre: tuple[float, ...] = ()
    """A design with other actions' slopes: its runs' weighted mean of each input (as the
    design takes it), where its level is fitted and a lent slope's miss is nothing."""
    misfit: tuple[float, ...] = ()
    """The same design: per input, the variance of an action's own slope about the lent one
    (population.Scatter), so a request far from `centre` is as uncertain as a slope that may
    not be the action's makes it."""
    step: Step | None = None
    """A step of the action's level its runs were moved by before it was fitted
    (`core.steps`): why its level and spread are the new level's, said in the reason."""

    local: LocalErrors | None = field(default=None, compare=False, repr=False)
    """Its errors near each input, where its shape misses the action's (`core.local`); only
    on a fit that may serve."""
    span: tuple[tuple[float, float], ...] = field(default=(), compare=False, repr=False)
    """Per input of the design, the least and the largest value its runs had: beyond them
    its shape is a guess (`ActionModel.predict`). Only on a fit that may serve."""

    def beyond(self, features: Mapping[str, float]) -> bool:
        """Whether the request lies beyond the inputs its runs had, in any of its inputs."""
        return any(not lo <= features.get(f, lo) <= hi
                   for f, (lo, hi) in zip(self.design.features, self.span, strict=True))

    def change_posterior(self, prior_log_scale: float) -> ChangePosterior | None:
        """How likely the action's level moved in each of its last few executions, judged on
        this design's errors. None for a design that follows only the last few runs (it has no
        usual level to change from)."""
        if self.design.weight_half_life < config.ONLINE_HALF_LIFE_EXECUTIONS:
            return None
        if self.residuals is None:
            return None
        return change_posterior(self.residuals, prior_log_scale, self.df)

    def selection_loss(self, posterior: ChangePosterior | None) -> float:
        """The loss designs are ranked on. The executions after a change of level are the
        change's to explain, not the design's shape: with the chance p_m that the level moved m
        runs ago, the design is judged with weight p_m on its loss over the runs before those m.
        Else, right after a step, the newest run or two (far above every design's bound, and
        the heaviest by rank) rank the designs by how loose their bounds are, and a design
        blind to the inputs could serve a large request at a fraction of its need."""
        if posterior is None or not posterior.total:
            return self.loss
        m = min(posterior.prob.shape[0], self.older_losses.shape[0])
        prob = posterior.prob[:m]
        return float((1.0 - float(prob.sum())) * self.loss + prob @ self.older_losses[:m])

    def with_changes(self, posterior: ChangePosterior | None) -> Fit:
        """The fit with its level changes weighed. Only for a fit that may serve: each change
        costs a t tail on every Recommend."""
        changes = posterior.components() if posterior is not None else ()
        return replace(self, changes=changes) if changes else self

    def row(self, features: Mapping[str, float]) -> FloatArray | None:
        values = [1.0]
        for f in self.design.features:
            v = features.get(f)
            if v is None or not math.isfinite(v):
                return None
            values.append(math.log1p(max(v, 0.0)) if self.design.log_features else v)
        if self.design.slopes:
            return np.asarray((1.0, float(np.dot(values[1:], self.design.slopes))))
        if self.design.monomial:
            power = math.prod(max(v, 0.0) ** e if e else 1.0
                              for v, e in zip(values[1:], self.design.exponents, strict=True))
            return np.asarray((1.0, power))
        if self.design.products:
            values.extend(pairwise(values[1:]))
        if self.design.trend:
            values.append(1.0)  # the next execution: one step after the newest
        return np.asarray(values)

    def predict(self, features: Mapping[str, float]) -> Predictive | None:
        x = self.row(features)
        if x is None:
            return None
        if self.design.slopes:  # the borrowed slopes' offset, then the action's own level
            x, offset = x[:1], float(x[1])
        else:
            offset = 0.0
        loc = float(x @ self.coef) + offset
        # A relative scale is a fraction of the need; far outside the inputs seen, a location
        # near zero must not make a confident small need (the fit weighs runs the same way).
        size = (max(loc, config.ONLINE_RELATIVE_FLOOR * self.mean_level_mib, 1.0)
                if self.design.relative else 1.0)
        z = self.r_inv.T @ (x / size)
        leverage = float(z @ z)
        shift, ratio = self.near(features)
        loc += shift * self.scale * size
        scale = self.scale * size * math.sqrt(ratio * (1.0 + leverage))
        if self.step is not None:
            # The runs moved by a step carry its error into the level (core.steps): a variance
            # in log MiB, so in MiB a share of the level.
            level = 1.0 if self.design.log_space else max(loc, 1.0)
            scale = math.sqrt(scale * scale + self.step.variance * level * level)
        if self.misfit:
            scale = math.sqrt(scale * scale + self._missed(features))
        return Predictive(loc=loc, scale=scale, df=self.df, log_space=self.design.log_space,
                          changes=self._shifted(loc, scale), own=self.own, seen=self.seen,
                          near=(shift, ratio))

    def near(self, features: Mapping[str, float]) -> tuple[float, float]:
        """The shift of the location (in units of the scale) and the factor on the variance
        that its errors near the request's inputs call for (`local`); none without them."""
        if self.local is None:
            return 0.0, 1.0
        return self.local.at(np.log1p(np.maximum(
            np.fromiter((features[f] for f in self.design.features), np.float64), 0.0)))

    def _missed(self, features: Mapping[str, float]) -> float:
        """How far the lent slopes may miss the action's own between `centre` and the
        request, as a variance in log MiB (`misfit`)."""
        return math.fsum(
            t * (math.log1p(max(features.get(f, 0.0), 0.0)) - c) ** 2
            for f, c, t in zip(self.design.features, self.centre, self.misfit, strict=True))

    def _shifted(self, loc: float, scale: float) -> tuple[tuple[float, float, float], ...]:
        """Each level change as a component in the design's own space: in log MiB the shift
        adds to the location and its uncertainty to the variance; in MiB both scale with it."""
        out = []
        for p, shift, var in self.changes:
            if self.design.log_space:
                out.append((p, loc + shift, math.sqrt(scale * scale + var)))
            else:
                factor = math.exp(shift)
                out.append((p, loc * factor,
                            factor * math.sqrt(scale * scale + loc * loc * var)))
        return tuple(out)


@dataclass(frozen=True)
class ActionModel:
    """The designs fitted for one action, best first."""

    fits: tuple[Fit, ...]

    def predict(self, features: Mapping[str, float]) -> tuple[Predictive, Fit] | None:
        """The best design whose inputs the request carries; beyond the inputs its runs had,
        with the designs that would need more heard too (`_beyond`)."""
        for fit in self.fits:
            p = fit.predict(features)
            if p is not None:
                if fit.span and fit.beyond(features):
                    p = self._beyond(p, fit, features)
                return p, fit
        return None

    def _beyond(self, p: Predictive, fit: Fit, features: Mapping[str, float]) -> Predictive:
        """Beyond the inputs its runs had, the best design's shape is a guess: designs its
        runs ranked nearly as well fit the same runs, yet part ways there (a power of a half
        against a straight line fitted on batches of 1 to 16, asked for 64). Each that needs
        more is mixed in at its median, with the best design's spread, weighed by how near
        its loss was (ONLINE_BEYOND_*); those that need less are not: an OOM costs a retry,
        and the best design's own spread already widens with the distance. Why: young
        actions asked past their largest input ran out several times as often as their
        stated chance (a scratch generator, additive peaks: 4.5 OOMs expected where 1.4 were
        stated; config)."""
        median = p.median_mib
        if not median > 0:
            return p
        heavier: list[tuple[float, float]] = []
        for other in self.fits[1:1 + config.ONLINE_BEYOND_DESIGNS]:
            if not other.design.features or other is fit:
                continue
            ratio = other.loss / fit.loss if fit.loss > 0 else math.inf
            if not ratio <= config.ONLINE_BEYOND_LOSS_RATIO:
                continue
            q = other.predict(features)
            if q is None:
                continue
            need = q.median_mib
            if need > median:
                heavier.append((math.exp(-(ratio - 1.0) * fit.samples
                                         / config.ONLINE_BEYOND_LOSS_WIDTH), need))
        if not heavier:
            return p
        main = 1.0 - sum(c[0] for c in p.mixed)
        total = 1.0 + sum(w for w, _ in heavier)
        mixed = tuple(
            (main * w / total, math.log(need), p.scale) if p.log_space
            else (main * w / total, need, p.scale * need / median)
            for w, need in heavier)
        return replace(p, beyond=mixed)


def _weights(ranks: FloatArray, ages: FloatArray, half_life_executions: float) -> FloatArray:
    """By rank and by age. Age is counted from the newest sample, not from now: every weight
    shares the factor for the newest sample's own age, and the fits only use weights relative
    to each other, so the fit does not change as time passes (no refit when the clock moves)
    and ages of years (executions stamped long ago) do not underflow."""
    return np.asarray(
        0.5 ** (ranks / half_life_executions)
        * 0.5 ** (ages / config.HISTORY_HALF_LIFE.total_seconds()))


@dataclass
class Data:
    """What every design fitted on one history shares, computed once per refit (a refit runs
    at every recorded execution: per-design copies of these were most of its cost)."""

    y_mib: FloatArray
    log_y: FloatArray
    inputs: Mapping[str, FloatArray]
    log_inputs: Mapping[str, FloatArray]
    """The same, log1p: what designs on the log inputs and the errors near them take."""
    ranks: FloatArray
    ages: FloatArray
    step: Step | None = None
    """A step of the action's level the runs were moved by (`core.steps`)."""
    largest_seen: bool = True
    """Its largest value is a peak, not an OOM's bumped lower bound of one."""
    weights: dict[float, _Weighted] = field(default_factory=dict)
    spans: dict[str, tuple[float, float]] = field(default_factory=dict)

    def span(self, feature: str) -> tuple[float, float]:
        """The least and the largest value of an input its runs had (the runs that had it)."""
        found = self.spans.get(feature)
        if found is None:
            v = self.inputs[feature]
            v = v[np.isfinite(v)]
            found = self.spans[feature] = ((float(v.min()), float(v.max())) if v.shape[0]
                                           else (math.inf, -math.inf))
        return found

    def weighted(self, half_life: float) -> _Weighted:
        found = self.weights.get(half_life)
        if found is None:
            found = self.weights[half_life] = _Weighted.of(
                _weights(self.ranks, self.ages, half_life), self.y_mib)
        return found


@dataclass(frozen=True)
class _Weighted:
    """One set of weights over the whole history and its sums (for designs with every row)."""

    w: FloatArray
    sw: FloatArray
    total: float
    n_eff: float
    level: float

    @classmethod
    def of(cls, w: FloatArray, y_mib: FloatArray) -> _Weighted:
        total = float(w.sum())
        return cls(w, np.sqrt(w), total, total * total / float(w @ w),
                   float(w @ y_mib) / total)


def holds_two_runs(power: FloatArray, coef: FloatArray) -> bool:
    """Whether a footprint plus activations fitted through two runs (`power`: the inputs' power
    at each, `coef`: footprint and per-item cost, the cost above zero as at any number of runs)
    is one: a footprint not below zero, and powers ONLINE_BORROW_POWERS_EXACT_RATIO apart
    (closer, the two peaks differ by little more than their noise, and the per-item cost
    through them is that noise, extrapolated)."""
    low, high = float(power.min()), float(power.max())
    return float(coef[0]) >= 0 and high >= config.ONLINE_BORROW_POWERS_EXACT_RATIO * low


@dataclass(frozen=True)
class Core:
    """One design fitted on one history up to where the population's spread enters: what
    `finish` needs to make the Fit for any prior scale. A new population read moves every
    action's prior scale; `online.ActionModels` keeps these for the actions fitted last, so the
    refit that follows redoes only `finish` (the same operations on the same values: the
    same Fit as a refit from scratch)."""

    design: Design
    coef: FloatArray
    r_inv: FloatArray
    y_mib: FloatArray
    level: float
    dof: float
    shown: float
    data_var: float
    """The leave-one-out errors' weighted mean square, times `shown`."""
    fitted: FloatArray
    size: FloatArray
    spread: FloatArray
    """sqrt(1 + leverage): the bound's margin per unit of scale."""
    shrink: FloatArray
    """loo x leverage."""
    judge: FloatArray
    """The weights the loss is judged on (`fit_core`'s judge_half_life)."""
    judged: float
    older_judged: FloatArray
    """The judge's total less its newest m, for m up to the lookback (`Fit.older_losses`)."""
    residuals: Residuals | None
    loo: FloatArray
    """Leave-one-out errors in the design's units (a share of the size for a relative one)."""
    loo_weights: FloatArray
    """Their weights in the fit."""
    centre: tuple[float, ...] = ()
    """A design with lent slopes: the weighted mean of each input column (`Fit.centre`)."""
    step: Step | None = None
    """The step its runs were moved by (`Fit.step`)."""
    largest_seen: bool = True
    """Its largest value is a peak, not an OOM's bumped lower bound of one (`Data`)."""
    log_in: FloatArray | None = None
    """A design on inputs: each run's, log1p (`Fit.local`)."""
    span: tuple[tuple[float, float], ...] = ()
    """Per input of the design, the least and the largest value its runs had (`Fit.span`)."""


def fit_core(design: Design, data: Data, judge_half_life: float = 0.0) -> Core | None:
    n = data.y_mib.shape[0]
    p = design.parameters
    weighted = data.weighted(design.weight_half_life)
    judge = data.weighted(judge_half_life).w if judge_half_life else weighted.w
    size = np.ones(1)  # what each run's error is a share of (a relative design: its size)
    inputs: FloatArray | None = None  # a design with lent slopes: its input columns
    # An own monomial's powers, chosen on these runs, judged without each (`held_out_choices`)
    held_out: tuple[NDArray[np.bool_], NDArray[np.bool_], FloatArray] | None = None
    fitted_on: NDArray[np.bool_] | None = None  # the runs a design on inputs is fitted on
    log_in: FloatArray | None = None  # a design on inputs: them, log1p
    # Runs beyond its parameters it needs: one, for a leave-one-out error, but other actions'
    # powers fitted exactly through an action's first two runs (ONLINE_BORROW_POWERS_MIN_RUNS;
    # later, a run that lacked an input does not make a fit exact again).
    exact = design.lent_powers and n == config.ONLINE_BORROW_POWERS_MIN_RUNS
    spare = 0 if exact else 1
    if not design.features and not design.trend:
        # One constant column: the least squares is a weighted mean, its leverage w / sum(w),
        # in closed form (what the QR below gives, without a factorisation).
        if n < 2:
            return None
        y_mib, w_ok = data.y_mib, weighted.w
        y = data.log_y if design.log_space else y_mib
        total = weighted.total
        fitted = np.full(n, float(w_ok @ y) / total)
        coef = fitted[:1].copy()
        leverage = np.minimum(w_ok / total, 0.99)
        r_inv = np.array([[1.0 / math.sqrt(total)]])
        n_eff, level = weighted.n_eff, weighted.level
    else:
        cols = [np.ones(n)]
        for f in design.features:
            raw = data.inputs[f]
            cols.append(data.log_inputs[f] if design.log_features else raw)
        if design.monomial:
            raw = np.column_stack(cols[1:])
            ok = np.all(np.isfinite(raw), axis=1)
            if int(ok.sum()) < p + spare:
                return None
            if not design.exponents:
                found = best_exponents(raw[ok], data.y_mib[ok], weighted.w[ok])
                if found is None:
                    return None
                design = replace(design, exponents=found)
                if int(ok.sum()) <= config.ONLINE_MONOMIAL_HELD_OUT_RUNS:
                    held = held_out_choices(raw[ok], data.y_mib[ok], weighted.w[ok], found)
                    held_out = None if held is None else (ok, *held)
            power = np.prod(np.where(np.asarray(design.exponents) != 0.0,
                                     np.maximum(raw, 0.0) ** np.asarray(design.exponents),
                                     1.0), axis=1)
            cols = [cols[0], power]
        offset: FloatArray | None = None
        if design.slopes:  # one column, the given slopes' sum, set aside below
            inputs = np.column_stack(cols[1:])
            cols = [cols[0], inputs @ np.asarray(design.slopes)]
        if design.products:
            cols.extend(pairwise(cols[1:]))
        if design.trend:
            cols.append(-data.ranks)  # newest at 0, older negative
        x = np.column_stack(cols)
        w_ok, y_mib, y, sw = weighted.w, data.y_mib, data.log_y, weighted.sw
        if design.features:  # a run that lacked an input sits out
            log_in = np.column_stack([data.log_inputs[f] for f in design.features])
            ok = fitted_on = np.all(np.isfinite(x), axis=1)
            if int(ok.sum()) < p + spare:
                return None
            if not ok.all():
                x, w_ok, y_mib, y, sw = x[ok], w_ok[ok], y_mib[ok], y[ok], sw[ok]
                judge = judge[ok]
                inputs = inputs[ok] if inputs is not None else None
                log_in = log_in[ok]
        elif n < p + 1:
            return None
        if not design.log_space:
            y = y_mib
        if design.slopes:
            # Only the level is fitted: the slopes are given (their column leaves the design
            # as an offset, and comes back in what it predicts).
            offset = x[:, 1].copy()
            x, y = x[:, :1], y - offset
        q, r = np.linalg.qr(x * sw[:, None])
        diag = np.abs(np.diag(r))
        if diag.min() < 1e-9 * max(1.0, float(diag.max())):
            return None  # a feature that never varies: the constant design says the same
        r_inv = np.linalg.inv(r)
        coef = r_inv @ (q.T @ (y * sw))
        fitted = x @ coef
        if design.relative:
            # Errors in proportion to the need: each run weighed again by the size the first
            # fit gives it, so the big runs' scatter does not set the small runs' margin.
            size = np.maximum(fitted, config.ONLINE_RELATIVE_FLOOR * float(np.median(y_mib)))
            sw = sw / size
            q, r = np.linalg.qr(x * sw[:, None])
            r_inv = np.linalg.inv(r)
            coef = r_inv @ (q.T @ (y * sw))
            fitted = x @ coef
        if design.monomial and not float(coef[1]) > 0:
            # Activations that shrink as the inputs grow are no footprint plus activations:
            # where the larger requests held less, the cost through them is their noise, and
            # past them the need falls below the footprint, even below zero.
            return None
        if exact and not holds_two_runs(x[:, 1], coef):
            return None
        leverage = np.minimum(np.einsum("ij,ij->i", q, q), 0.99)
        if offset is not None:
            y, fitted = y + offset, fitted + offset
        total = float(w_ok.sum())
        if w_ok is weighted.w:
            n_eff, level = weighted.n_eff, weighted.level
        else:
            n_eff = total * total / float(w_ok @ w_ok)
            level = float(w_ok @ y_mib) / total
    residual = (y - fitted) / size
    loo = residual / (1.0 - leverage)
    shrink = loo * leverage  # the fit's prediction less the run's prediction without it
    if held_out is not None:
        # The fit keeps a run that lacks an input its powers leave out (a power of 0); the
        # choice did not see it, and its error stays the fit's.
        chosen_on, beaten, without = held_out
        among = chosen_on if fitted_on is None else chosen_on[fitted_on]
        moved = np.zeros(loo.shape[0], dtype=bool)
        moved[among] = beaten
        predicted = np.zeros(loo.shape[0])
        predicted[among] = without
        loo = np.where(moved, (y_mib - predicted) / size, loo)
        shrink = np.where(moved, loo - residual, shrink)
    dof = max(n_eff - p, 0.0)
    # Against the prior, a design on the inputs counts its executions (ONLINE_PRIOR_DF).
    shown = max(float(y_mib.shape[0]) - p, 0.0) if design.features else dof
    log_loo = loo if design.log_space else (
        np.log(y_mib) - np.log(np.maximum(y_mib - loo * size, 1.0)))
    judged = float(judge.sum())
    lookback = change_lookback(judge.shape[0])
    centre = (() if inputs is None
              else tuple(float(v) for v in (w_ok @ inputs) / float(w_ok.sum())))
    return Core(design, coef, r_inv, y_mib, level, dof, shown,
                 float(w_ok @ (loo * loo)) / total * shown, fitted, size,
                 np.sqrt(1.0 + leverage), shrink, judge, judged,
                 np.maximum(judged - np.cumsum(judge[:lookback]), 1e-300),
                 Residuals.of(log_loo, w_ok), loo, w_ok, centre, data.step,
                 data.largest_seen, log_in, tuple(data.span(f) for f in design.features))


def finish(core: Core, prior_log_scale: float) -> Fit:
    design, y_mib, size = core.design, core.y_mib, core.size
    prior_scale = (prior_log_scale if design.log_space or design.relative
                   else prior_log_scale * core.level)
    prior_df = config.ONLINE_PRIOR_DF
    var = (core.data_var + prior_scale ** 2 * prior_df) / (core.shown + prior_df)
    scale = math.sqrt(max(var, 1e-12))
    df = core.dof + prior_df
    # Leave-one-out pinball loss of the bound the policy would have used, in MiB.
    q_sel = config.ONLINE_SELECTION_QUANTILE
    bound = (core.fitted + size * (scale * t_quantile(q_sel, df) * core.spread - core.shrink))
    bound_mib = np.exp(np.minimum(bound, 50.0)) if design.log_space else bound
    diff = y_mib - bound_mib
    judge, judged = core.judge, core.judged
    weighed = judge * np.maximum(q_sel * diff, (q_sel - 1.0) * diff)
    loss = float(weighed.sum()) / judged
    lookback = core.older_judged.shape[0]
    older = (loss * judged - np.cumsum(weighed[:lookback])) / core.older_judged
    return Fit(design, core.coef, core.r_inv, scale, df, loss, older, int(y_mib.shape[0]),
               core.level, core.residuals, centre=core.centre, step=core.step)
