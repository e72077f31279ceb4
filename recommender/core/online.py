"""Per-action models of the next execution's need, learned online from the action's own history.

No retraining job is needed: whenever an action's history changes, a few small weighted least
squares fits (numpy, a few hundred microseconds for 500 executions) are made once and kept until
the next change; a Recommend then costs a dot product and a t tail (microseconds).

Each fit is a *design*: log peak on a constant (the decayed history), on a trend in the action's
execution order (memory that grows within a pod's life), on the log of the request's features
(memory that scales with batch and input sizes), the peak in MiB linear on the raw features
(the robust choice where data is thin and growth is additive), or linear on them and their
pairwise products with errors in proportion to the need (a fixed footprint plus activations
of batch x input size, the shape of most models' memory, which neither of the two before is),
or a fixed footprint plus one power of the inputs whose exponents are chosen from a few (batch
x sqrt(size), batch x sequence^2: first powers are not every model's shape). A young action also
has a power law in its inputs with other actions' slopes (`ActionModels` keeps them), only its
level its own: it has too few runs for slopes of its own; and, from its second run, a fixed
footprint plus the power of the inputs most grown actions with the same inputs chose, its
footprint and per-item cost its own.
The design whose calibrated bound would have been best on the action's own past executions
wins, judged by leave-one-out pinball loss: every design is scored on executions it was not
fitted on, so a richer design wins only when it really predicts better (the closed-form
leave-one-out residuals of least squares make this cheap). Beside designs on the inputs,
every design is judged on their weights (one that follows the last few runs would otherwise be
judged on those few alone), and the runs after a likely change of level are left to the change
(`Fit.selection_loss`): a step is the action's, not a design's shape.

The predictive distribution (`Predictive`) is a Student-t around the fit, its scale the
leave-one-out residuals' (so each action is calibrated on its own errors, not one offset shared
by unlike actions), shrunk towards the population's typical spread with a few pseudo-degrees of
freedom (so two executions do not make a confident action). Where a design's shape is not the
action's, its errors near the request's inputs move its location and scale there
(`core.local`). Recent executions weigh more, by
rank and by age, so a step change in the action's code is followed within a few runs; once the
newest runs stand apart from those before them by more than their scatter (`core.steps`), the
runs before are moved by the step before any design is fitted, so the designs' spread is the new
level's own and not the two levels' distance.

An OOM is a censored observation: it enters at the bumped value (more than the slice it died in)
until the runner records how the execution ended; then its true peak replaces it (the store
drops the OOM sample).
"""

from __future__ import annotations

import math
import operator
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TypeVar

import numpy as np

from recommender.core import config
from recommender.core.arrays import FloatArray
from recommender.core.domain import Outcome, Sample
from recommender.core.local import LocalErrors, local_errors
from recommender.core.population import on_grid
from recommender.core.predictive import OwnTail, Predictive, SeenPeaks, own_tail, t_quantile
from recommender.core.steps import Step, find_step

T = TypeVar("T", float, FloatArray)
Lent = tuple[float | None, ...]
"""Other actions' slope per input name of an action, None where none is lent (`_slopes_for`)."""


@dataclass(frozen=True)
class Design:
    name: str
    log_space: bool
    features: tuple[str, ...] = ()
    log_features: bool = False
    trend: bool = False
    products: bool = False
    """With the pairwise products of its (raw) inputs as columns too: activations take batch x
    input size x a per-element cost, on top of a fixed footprint (weights, CUDA context)."""
    relative: bool = False
    """A design in MiB whose errors are in proportion to the need (its scale a fraction of
    the prediction): run-to-run scatter is a share of what a run holds, so one scale in MiB
    would be the big runs' and oversize the small ones."""
    half_life: float = 0.0
    """Rank half-life of its weights (executions); 0: ONLINE_HALF_LIFE_EXECUTIONS, or
    ONLINE_HALF_LIFE_WITH_INPUTS for a design on the inputs."""
    monomial: bool = False
    """A fixed footprint plus one power of the inputs, c0 + c1 x1^e1 x2^e2 ..., the exponents
    those of ONLINE_MONOMIAL_EXPONENTS that fit the action best (`exponents`, chosen when it
    is fitted): activations as batch x sequence^2 (attention), batch x side^2 (images) or
    batch x sqrt(size), which neither the products (first powers) nor the power law (no
    footprint) is."""
    exponents: tuple[float, ...] = ()
    lent_powers: bool = False
    """A monomial whose `exponents` are other actions' (`ActionModels`: the powers most of the
    grown actions with these inputs chose), only its footprint and per-item cost the action's
    own: two parameters, so from two runs on (fitted exactly until a third run gives it a
    leave-one-out error), where its own monomial waits for six (with two inputs). A young
    action's power law with borrowed slopes has the right level but not the shape: a
    footprint plus activations bends, and a slope that is right for one action's inputs is
    wrong for another's (ONLINE_BORROW_POWERS_MIN_RUNS says what that cost)."""
    slopes: tuple[float, ...] = ()
    """A power law in the inputs whose slopes are other actions' (`ActionModels`), only its
    level the action's own: one parameter, so from two runs on. A young action has too few
    runs for slopes of its own, and without them its third run, with a batch four times its
    first two, is sized as they were (the generated input-dependent workload's OOMs were all
    in runs 3 to 9)."""

    @property
    def weight_half_life(self) -> float:
        if self.half_life:
            return self.half_life
        return (config.ONLINE_HALF_LIFE_WITH_INPUTS if self.features
                else config.ONLINE_HALF_LIFE_EXECUTIONS)

    @property
    def said(self) -> str:
        """The name, with the powers chosen where there are some (for the reason)."""
        if not self.exponents:
            return self.name
        terms = " x ".join(f"{f}^{e:g}" for f, e in zip(self.features, self.exponents,
                                                         strict=True) if e)
        return f"{self.name}, {terms}"

    @property
    def parameters(self) -> int:
        k = len(self.features)
        if self.slopes:
            return 1
        if self.monomial:
            return 2
        return 1 + k + int(self.trend) + (k * (k - 1) // 2 if self.products else 0)


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
    """The tail its own errors show (`_own_tail`); only on a fit that may serve (`_model`)."""
    seen: SeenPeaks | None = field(default=None, compare=False, repr=False)
    """How often its peaks passed each size (`_seen`); only on a fit that may serve."""
    changes: tuple[tuple[float, float, float], ...] = ()
    """(probability, shift, variance of the shift) in log MiB: the action's level may have moved
    in its last executions by that much (`_level_changes`)."""
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

    def change_posterior(self, prior_log_scale: float) -> _Posterior | None:
        """How likely the action's level moved in each of its last few executions, judged on
        this design's errors. None for a design that follows only the last few runs (it has no
        usual level to change from)."""
        if self.design.weight_half_life < config.ONLINE_HALF_LIFE_EXECUTIONS:
            return None
        if self.residuals is None:
            return None
        return _change_posterior(self.residuals, prior_log_scale, self.df)

    def selection_loss(self, posterior: _Posterior | None) -> float:
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

    def with_changes(self, posterior: _Posterior | None) -> Fit:
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
            values.extend(_pairwise(values[1:]))
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
        """The best design whose inputs the request carries."""
        for fit in self.fits:
            p = fit.predict(features)
            if p is not None:
                return p, fit
        return None


def _weights(ranks: FloatArray, ages: FloatArray, half_life_executions: float) -> FloatArray:
    """By rank and by age. Age is counted from the newest sample, not from now: every weight
    shares the factor for the newest sample's own age, and the fits only use weights relative
    to each other, so the fit does not change as time passes (no refit when the clock moves)
    and ages of years (executions stamped long ago) do not underflow."""
    return np.asarray(
        0.5 ** (ranks / half_life_executions)
        * 0.5 ** (ages / config.HISTORY_HALF_LIFE.total_seconds()))


def _value(s: Sample) -> float:
    if s.outcome is Outcome.OOM:
        bumped = max(s.slice_mib * (1 + config.OOM_BUMP_FRACTION),
                     s.slice_mib + config.OOM_BUMP_MIN_MIB)
        return max(bumped, s.peak_mib)
    return s.peak_mib


def _designs(feature_names: Sequence[str], n: int, slopes: Lent = (),
             powers: tuple[float, ...] = ()) -> list[Design]:
    designs = [Design("decayed history", log_space=True)]
    lent = [(f, b) for f, b in zip(feature_names, slopes, strict=False) if b is not None]
    if lent:
        designs.append(Design("a power law in the inputs with other actions' slopes",
                              log_space=True, features=tuple(f for f, _ in lent),
                              log_features=True, slopes=tuple(b for _, b in lent)))
    if powers and len(powers) == len(feature_names) and (
            n >= config.ONLINE_BORROW_POWERS_MIN_RUNS):
        designs.append(Design("a fixed footprint plus other actions' power of the inputs (MiB)",
                              log_space=False, features=tuple(feature_names), relative=True,
                              monomial=True, exponents=powers, lent_powers=True))
    if n >= config.ONLINE_MIN_RECENT_SAMPLES:
        designs.append(Design("the last few executions", log_space=True,
                              half_life=config.ONLINE_RECENT_HALF_LIFE))
    if n >= config.ONLINE_MIN_TREND_SAMPLES:
        designs.append(Design("trend in recent executions", log_space=True, trend=True))
    if feature_names and n >= len(feature_names) + config.ONLINE_MIN_SPARE_SAMPLES:
        names = tuple(feature_names)
        designs.append(Design("linear in the inputs (MiB)", log_space=False, features=names))
        designs.append(Design("power law in the inputs", log_space=True, features=names,
                              log_features=True))
        with_products = Design("linear in the inputs and their products (MiB)",
                               log_space=False, features=names, products=True, relative=True)
        if 1 < len(names) <= config.ONLINE_MAX_PRODUCT_FEATURES and (
                n >= with_products.parameters + config.ONLINE_MIN_SPARE_SAMPLES):
            designs.append(with_products)
        if 1 < len(names) <= config.ONLINE_MAX_PRODUCT_FEATURES:
            designs.append(Design("a fixed footprint plus a power of the inputs (MiB)",
                                  log_space=False, features=names, relative=True,
                                  monomial=True))
    return designs


_EXPONENT_GRIDS: dict[int, FloatArray] = {}


def _exponent_grid(k: int) -> FloatArray:
    """Every combination of ONLINE_MONOMIAL_EXPONENTS for k inputs but all zero (rows)."""
    found = _EXPONENT_GRIDS.get(k)
    if found is None:
        grid = np.array(np.meshgrid(*[config.ONLINE_MONOMIAL_EXPONENTS] * k, indexing="ij"))
        rows = grid.reshape(k, -1).T
        found = _EXPONENT_GRIDS[k] = rows[np.any(rows != 0.0, axis=1)]
    return found


def _best_exponents(raw: FloatArray, y: FloatArray, w: FloatArray) -> tuple[float, ...] | None:
    """The exponents whose c0 + c1 x^e, fitted by weighted least squares, leaves the least
    weighted square of relative errors (all candidates at once: a few hundred microseconds).
    `raw`: the inputs, a row per run (all finite). The choice is made on the runs the design is
    then judged on, so its leave-one-out errors are a little optimistic (one slope, at most 63
    candidates: a small bias, not measured apart)."""
    grid = _exponent_grid(raw.shape[1])
    z = np.exp(np.log(np.maximum(raw, 1e-300)) @ grid.T)  # runs x candidates
    total = float(w.sum())
    mz = w @ z / total
    my = float(w @ y) / total
    dz = z - mz
    var = w @ (dz * dz)
    ok = var > 1e-12 * np.maximum(mz * mz, 1e-300)
    if not ok.any():
        return None
    slope = np.where(ok, (w @ (dz * (y - my)[:, None])) / np.where(ok, var, 1.0), 0.0)
    fitted = my + dz * slope
    rel = (y[:, None] - fitted) / np.maximum(fitted, config.ONLINE_RELATIVE_FLOOR * my)
    score = np.where(ok, w @ (rel * rel), np.inf)
    return tuple(float(e) for e in grid[int(np.argmin(score))])


def _pairwise(columns: Sequence[T]) -> list[T]:
    """The products of every pair of the columns (floats of a request, or arrays of a
    history), in one order for the fit and the prediction."""
    k = len(columns)
    return [columns[i] * columns[j] for i in range(k) for j in range(i + 1, k)]


@dataclass
class _Data:
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


def _fit(design: Design, data: _Data, prior_log_scale: float, judge_half_life: float = 0.0
         ) -> Fit | None:
    """One design fitted on `data`, its loss weighted at `judge_half_life` (0: as it is
    fitted; `fit_action` says when not)."""
    core = _core(design, data, judge_half_life)
    return _finish(core, prior_log_scale) if core is not None else None


def _holds_two_runs(power: FloatArray, coef: FloatArray) -> bool:
    """Whether a footprint plus activations fitted through two runs (`power`: the inputs' power
    at each, `coef`: footprint and per-item cost) is one: a per-item cost above zero (where the
    larger request held less, it is not), a footprint not below zero, and powers
    ONLINE_BORROW_POWERS_EXACT_RATIO apart (closer, the two peaks differ by little more than
    their noise, and the per-item cost through them is that noise, extrapolated)."""
    low, high = float(power.min()), float(power.max())
    return (float(coef[1]) > 0 and float(coef[0]) >= 0
            and high >= config.ONLINE_BORROW_POWERS_EXACT_RATIO * low)


@dataclass(frozen=True)
class _Core:
    """One design fitted on one history up to where the population's spread enters: what
    `_finish` needs to make the Fit for any prior scale. A new population read moves every
    action's prior scale; `ActionModels` keeps these for the actions fitted last, so the
    refit that follows redoes only `_finish` (the same operations on the same values: the
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
    """The weights the loss is judged on (`_fit`'s judge_half_life)."""
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
    """Its largest value is a peak, not an OOM's bumped lower bound of one (`_Data`)."""
    log_in: FloatArray | None = None
    """A design on inputs of its own (not lent slopes): each run's, log1p (`Fit.local`)."""


def _core(design: Design, data: _Data, judge_half_life: float = 0.0) -> _Core | None:
    n = data.y_mib.shape[0]
    p = design.parameters
    weighted = data.weighted(design.weight_half_life)
    judge = data.weighted(judge_half_life).w if judge_half_life else weighted.w
    size = np.ones(1)  # what each run's error is a share of (a relative design: its size)
    inputs: FloatArray | None = None  # a design with lent slopes: its input columns
    log_in: FloatArray | None = None  # a design with inputs of its own: them, log1p
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
                found = _best_exponents(raw[ok], data.y_mib[ok], weighted.w[ok])
                if found is None:
                    return None
                design = replace(design, exponents=found)
            power = np.prod(np.where(np.asarray(design.exponents) != 0.0,
                                     np.maximum(raw, 0.0) ** np.asarray(design.exponents),
                                     1.0), axis=1)
            cols = [cols[0], power]
        offset: FloatArray | None = None
        if design.slopes:  # one column, the given slopes' sum, set aside below
            inputs = np.column_stack(cols[1:])
            cols = [cols[0], inputs @ np.asarray(design.slopes)]
        if design.products:
            cols.extend(_pairwise(cols[1:]))
        if design.trend:
            cols.append(-data.ranks)  # newest at 0, older negative
        x = np.column_stack(cols)
        w_ok, y_mib, y, sw = weighted.w, data.y_mib, data.log_y, weighted.sw
        if design.features and not design.slopes:
            log_in = np.column_stack([data.log_inputs[f] for f in design.features])
        if design.features:  # a run that lacked an input sits out
            ok = np.all(np.isfinite(x), axis=1)
            if int(ok.sum()) < p + spare:
                return None
            if not ok.all():
                x, w_ok, y_mib, y, sw = x[ok], w_ok[ok], y_mib[ok], y[ok], sw[ok]
                judge = judge[ok]
                inputs = inputs[ok] if inputs is not None else None
                log_in = log_in[ok] if log_in is not None else None
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
        if exact and not _holds_two_runs(x[:, 1], coef):
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
    dof = max(n_eff - p, 0.0)
    # Against the prior, a design on the inputs counts its executions (ONLINE_PRIOR_DF).
    shown = max(float(y_mib.shape[0]) - p, 0.0) if design.features else dof
    log_loo = loo if design.log_space else (
        np.log(y_mib) - np.log(np.maximum(y_mib - loo * size, 1.0)))
    judged = float(judge.sum())
    lookback = _lookback(judge.shape[0])
    centre = (() if inputs is None
              else tuple(float(v) for v in (w_ok @ inputs) / float(w_ok.sum())))
    return _Core(design, coef, r_inv, y_mib, level, dof, shown,
                 float(w_ok @ (loo * loo)) / total * shown, fitted, size,
                 np.sqrt(1.0 + leverage), loo * leverage, judge, judged,
                 np.maximum(judged - np.cumsum(judge[:lookback]), 1e-300),
                 Residuals.of(log_loo, w_ok), loo, w_ok, centre, data.step,
                 data.largest_seen, log_in)


def _finish(core: _Core, prior_log_scale: float) -> Fit:
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


def _tail_weights(w: FloatArray, span: float = config.ONLINE_TAIL_SPAN) -> FloatArray:
    """The fit's weights with half-lives `span` times longer, summing to their
    effective count; those below a thousandth of the newest's are left out (they would not
    move a tail). Only for the fits that may serve (`_model`), not every design."""
    t = (w / max(float(w.max()), 1e-300)) ** (1.0 / span)
    t = np.where(t >= 1e-3, t, 0.0)
    return t * (float(t.sum()) / max(float(t @ t), 1e-300))


def _own_tail(core: _Core, fit: Fit) -> OwnTail | None:
    """The tail the design's own leave-one-out errors show, in units of its scale."""
    if core.loo.shape[0] < 2 or fit.scale <= 0:
        return None
    if fit.local is not None:  # its errors once the misfit near each input is taken out
        errors, weights = fit.local.own
        return own_tail(errors, weights, config.ONLINE_TAIL_PRIOR)
    weights = _tail_weights(core.loo_weights)
    keep = weights > 0
    return own_tail(core.loo[keep] / fit.scale, weights[keep], config.ONLINE_TAIL_PRIOR)


def _serving_fit(fit: Fit, core: _Core) -> Fit:
    """A fit that may serve, with what only serving needs: its errors near each input, then the
    tail its errors show (once the misfit near each input is out) and the peaks it saw."""
    fit = replace(fit, local=_local(core, fit))
    return replace(fit, own=_own_tail(core, fit), seen=_seen(core))


def _local(core: _Core, fit: Fit) -> LocalErrors | None:
    """The design's errors near each input, in units of its scale, weighed with half-lives
    ONLINE_LOCAL_SPAN times the fit's: a bias at one input shows only in the runs there."""
    if core.log_in is None or fit.scale <= 0:
        return None
    return local_errors(core.log_in, core.loo / fit.scale,
                        _tail_weights(core.loo_weights, config.ONLINE_LOCAL_SPAN))


def _seen(core: _Core) -> SeenPeaks | None:
    """The action's peaks, for a design without inputs that has ONLINE_SEEN_MIN_RUNS of them
    (on the inputs, a peak says what one request needed, not what the next will), weighed
    with half-life ONLINE_SEEN_HALF_LIFE executions; past the largest, a cap once it has run
    ONLINE_RECORD_MIN_RUNS times (ONLINE_RECORD_MARGIN), unless a step moved its runs or the
    largest is an OOM's."""
    n = core.y_mib.shape[0]
    if core.design.features or n < config.ONLINE_SEEN_MIN_RUNS:
        return None
    # Runs moved by a step (`core.step`) are not draws of the new level's largest: its
    # factor is read from the few runs after it. Nor is an OOM's bumped value a largest peak:
    # the need it stands for is only known to be above it.
    grown = (config.ONLINE_RECORD_MIN_RUNS if core.step is None and core.largest_seen
             else 0)
    return SeenPeaks.of(core.y_mib, _SEEN_WEIGHTS[:n], config.ONLINE_SEEN_PRIOR,
                        config.ONLINE_SEEN_RECENT, grown, config.ONLINE_RECORD_MARGIN,
                        config.ONLINE_SEEN_SMOOTHING, config.ONLINE_SEEN_SAME_RUNS,
                        config.ONLINE_SEEN_SAME_T)


_SEEN_WEIGHTS = 0.5 ** (np.arange(config.HISTORY_WINDOW, dtype=np.float64)
                        / config.ONLINE_SEEN_HALF_LIFE)


def _lookback(n: int) -> int:
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
        lookback = _lookback(log_loo.shape[0])
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
class _Posterior:
    """`_change_posterior`'s answer: prob[m - 1], the chance that the last m executions are a
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


def _change_posterior(residuals: Residuals, prior_log_scale: float, df: float) -> _Posterior:
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
    return _Posterior(prob, shifts @ post, (shifts ** 2) @ post)


_AT_S = operator.attrgetter("at_s")


def _cores(samples: Sequence[Sample], feature_names: Sequence[str], slopes: Lent = (),
           powers: tuple[float, ...] = ()) -> tuple[_Core, ...]:
    """Every design that can be fitted on `samples` (newest first), before the prior scale;
    with `slopes` (other actions', one per feature name, None where none is lent), the power
    law on the inputs that have one too; with `powers` (other actions' exponents, one per
    feature name), the monomial with those powers."""
    succeeded, oom = Outcome.SUCCEEDED, Outcome.OOM  # by identity: an Enum hashes in Python
    informative = [s for s in samples
                   if (s.outcome is succeeded and s.peak_mib > 0)
                   or (s.outcome is oom and _value(s) > 0)]
    if not informative:
        return ()
    # Newest first; stable, as reverse sorts are: samples of one time keep their order.
    informative.sort(key=_AT_S, reverse=True)
    del informative[config.HISTORY_WINDOW:]
    y = np.array([s.peak_mib if s.outcome is succeeded else _value(s) for s in informative])
    n = len(informative)
    # Each input as a column once, for every design that uses it (NaN where a run lacked it).
    inputs = {f: np.fromiter((float(s.features.get(f, math.nan)) for s in informative),
                             np.float64, n) for f in feature_names}
    log_y = np.log(y)
    step = find_step(log_y, tuple(inputs.values()))
    if step is not None:
        # The runs before a step are counted at the new level: one level, its own scatter.
        log_y[step.runs:] += step.shift
        y = np.exp(log_y)
    at = np.fromiter((s.at_s for s in informative), np.float64, n)
    log_inputs = {f: np.log1p(np.maximum(v, 0.0)) for f, v in inputs.items()}
    data = _Data(y, log_y, inputs, log_inputs, np.arange(n, dtype=np.float64),
                 np.maximum(at.max() - at, 0.0), step,
                 informative[int(np.argmax(y))].outcome is succeeded)
    designs = _designs(feature_names, n, slopes, powers)
    cores = [c for d in designs if d.features if (c := _core(d, data)) is not None]
    # Where designs on the inputs compete, every design is judged on the same runs, weighed
    # as those designs weigh them: one that follows the last few runs alone would be judged
    # on those few, and a run of small requests made it look right for a large one.
    judge = config.ONLINE_HALF_LIFE_WITH_INPUTS if cores else 0.0
    cores += [c for d in designs if not d.features if (c := _core(d, data, judge)) is not None]
    return tuple(cores)


def _model(cores: Sequence[_Core], prior_log_scale: float, input_prior: float | None = None,
           slopes_prior: float | None = None, misfit: Mapping[str, float] | None = None
           ) -> ActionModel | None:
    """The designs' fits for this prior scale, best first; `input_prior`, when known, is the
    prior of the designs on the inputs, learned across actions (ONLINE_INPUT_PRIOR_ACTIONS);
    `slopes_prior`, when given, that of the power law with other actions' slopes
    (`_slopes_prior`); `misfit`, per input, how far an action's own slope strays from a lent
    one (a variance: `Fit.misfit`)."""
    if not cores:
        return None
    priors = [_prior_of_design(c.design, prior_log_scale, input_prior, slopes_prior)
              for c in cores]
    fits = [_finish(c, prior) for c, prior in zip(cores, priors, strict=True)]
    if misfit:
        fits = [replace(f, misfit=tuple(misfit.get(n, 0.0) for n in f.design.features))
                if f.centre else f for f in fits]
    posteriors = [f.change_posterior(prior) for f, prior in zip(fits, priors, strict=True)]
    ranked = sorted(zip(fits, posteriors, cores, strict=True),
                    key=lambda fpc: fpc[0].selection_loss(fpc[1]))
    # The best design, and the best without inputs (what serves a request that lacks them).
    serving = {0, next((i for i, (f, _, _) in enumerate(ranked) if not f.design.features), 0)}
    return ActionModel(tuple(
        _serving_fit(f.with_changes(post), core)
        if i in serving else f
        for i, (f, post, core) in enumerate(ranked)))


def _prior_of_design(design: Design, prior_log_scale: float, input_prior: float | None,
                     slopes_prior: float | None) -> float:
    """A design's prior spread: the one learned for designs on the inputs, the power law with
    other actions' slopes its own while it has one (`_slopes_prior`), else the population's."""
    if design.slopes:
        return prior_log_scale if slopes_prior is None else slopes_prior
    if design.features and input_prior is not None:
        return input_prior
    return prior_log_scale


def _slopes_prior(runs: int, prior_log_scale: float, pooled_log_scale: float | None
                  ) -> float | None:
    """The prior spread of a young action's power law with other actions' slopes at its third
    execution (two runs, ONLINE_BORROW_POWERS_MIN_RUNS, where other actions' powers have no
    leave-one-out error yet and no design of its own shape can be fitted): the spread
    the population's pooled slopes leave from one run to the next (`AtInputs.log_scale`, never
    above the population's), which is how far a level plus those slopes misses; None (the
    population's spread) from then on. With two runs the prior is most of the fit's scale,
    and the spread of peaks inputs and all counted the inputs' own effect as scatter. From
    three runs the design competes by leave-one-out loss with the lent powers (two or more
    inputs) and soon the action's own designs on the inputs, and with a narrow prior a shape
    that is not the action's won where it was wrong (config, ONLINE_BORROW_*)."""
    if pooled_log_scale is None or runs > config.ONLINE_BORROW_POWERS_MIN_RUNS:
        return None
    return min(pooled_log_scale, prior_log_scale)


def fit_action(samples: Sequence[Sample], feature_names: Sequence[str],
               prior_log_scale: float, slopes: Lent = (), powers: tuple[float, ...] = ()
               ) -> ActionModel | None:
    """Every design that can be fitted on `samples` (newest first), best first; with `slopes`
    (other actions', one per feature name, None where none is lent), the power law on the
    inputs that have one too; with `powers`, the monomial with other actions' powers."""
    return _model(_cores(samples, feature_names, slopes, powers), prior_log_scale)


def input_spread(cores: Sequence[_Core]) -> float | None:
    """The least spread a design on the inputs leaves about itself on this history, from its
    own leave-one-out errors alone (no prior), as a share of the need; None without such a
    design on ONLINE_INPUT_PRIOR_MIN_RUNS executions."""
    best: float | None = None
    for c in cores:
        if (not c.design.features or c.design.slopes or c.design.lent_powers
                or c.shown < config.ONLINE_INPUT_PRIOR_MIN_RUNS):
            continue
        spread = math.sqrt(max(c.data_var, 0.0) / c.shown)
        if not (c.design.log_space or c.design.relative):
            spread /= max(c.level, 1.0)  # MiB about a need of about `level` MiB
        best = spread if best is None else min(best, spread)
    return best


def own_slopes(cores: Sequence[_Core]) -> dict[str, float] | None:
    """The action's own power law's slope per input, once it has ONLINE_BORROW_MIN_RUNS
    executions beyond its parameters to show them: what young actions borrow (`_borrowed_of`)."""
    for c in cores:
        d = c.design
        if (d.log_features and not d.slopes and not d.monomial and not d.products
                and c.shown >= config.ONLINE_BORROW_MIN_RUNS):
            return {f: float(b) for f, b in zip(d.features, c.coef[1:], strict=True)}
    return None


def own_powers(cores: Sequence[_Core]) -> tuple[tuple[str, ...], tuple[float, ...]] | None:
    """The inputs and the powers of the action's own monomial, once it has
    ONLINE_BORROW_MIN_RUNS executions beyond its parameters to show them: what young actions
    with the same inputs borrow (`_powers_of`)."""
    for c in cores:
        d = c.design
        if (d.monomial and d.exponents and not d.lent_powers
                and c.shown >= config.ONLINE_BORROW_MIN_RUNS):
            return d.features, d.exponents
    return None


def common_features(samples: Sequence[Sample]) -> tuple[str, ...]:
    """Features most of the action's recent executions carried (at most a few: each costs
    data), in a stable order."""
    counts: dict[str, int] = {}
    recent = samples[: config.HISTORY_WINDOW]
    for s in recent:
        for k in s.features:
            counts[k] = counts.get(k, 0) + 1
    need = max(1, int(len(recent) * config.ONLINE_FEATURE_PRESENCE))
    names = sorted((k for k, c in counts.items() if c >= need), key=lambda k: (-counts[k], k))
    return tuple(sorted(names[: config.ONLINE_MAX_FEATURES]))


class ActionModels:
    """Fitted models per action, refitted when the action's history changes; bounded, safe
    across threads. For the actions fitted last it also keeps their designs' cores
    (`_Core`): when only the prior scale moved (a population read), the refit finishes
    those instead of fitting every design again."""

    def __init__(self, max_actions: int = config.ONLINE_MEMO_ACTIONS,
                 max_cores: int = config.ONLINE_CORE_ACTIONS) -> None:
        self.max_actions = max_actions
        self.max_cores = max_cores
        self._fits: OrderedDict[str, tuple[tuple[object, ...], ActionModel | None]] = (
            OrderedDict())
        self._cores: OrderedDict[str, tuple[tuple[object, ...], tuple[_Core, ...]]] = (
            OrderedDict())
        self._lock = threading.Lock()
        self._spreads: OrderedDict[str, float] = OrderedDict()
        """`input_spread` of the actions fitted last (ONLINE_INPUT_PRIOR_ACTIONS): what the
        designs on the inputs leave, across actions."""
        self._input_prior: float | None = None
        self._slopes: OrderedDict[str, dict[str, float]] = OrderedDict()
        """`own_slopes` of the actions fitted last (ONLINE_INPUT_PRIOR_ACTIONS)."""
        self._borrowed: dict[str, float] = {}
        """Per input name, the slope a young action borrows (`_borrowed_of`)."""
        self._powers: OrderedDict[str, tuple[tuple[str, ...], tuple[float, ...]]] = (
            OrderedDict())
        """`own_powers` of the actions fitted last (ONLINE_INPUT_PRIOR_ACTIONS)."""
        self._borrowed_powers: dict[tuple[str, ...], tuple[float, ...]] = {}
        """Per set of input names, the powers a young action with those inputs borrows."""
        self._borrowed_version = 0
        """Moves whenever the borrowed slopes or powers do: the young actions refit."""
        self.fitted = 0
        """Refits from the history (every design fitted)."""
        self.refinished = 0
        """Refits for a new prior scale on a history whose cores were kept."""

    @property
    def input_prior(self) -> float | None:
        """The prior spread of designs on the inputs learned so far (ONLINE_INPUT_PRIOR_*),
        before the population's caps it; None until enough actions show it."""
        with self._lock:
            return self._input_prior

    def get(self, action_id: str, samples: Sequence[Sample], prior_log_scale: float,
            pooled: tuple[tuple[str, float], ...] = (), pooled_log_scale: float | None = None,
            misfit: tuple[tuple[str, float], ...] = (), noise: float | None = None
            ) -> ActionModel | None:
        """`pooled`: the population's slopes pooled within actions (`Population.slopes`), lent
        to a young action for an input none of the grown actions lends one for yet;
        `pooled_log_scale`: the run-to-run spread those slopes leave (`AtInputs.log_scale`),
        the prior of designs on the inputs until one is learned (ONLINE_INPUT_PRIOR_*);
        `misfit`: per input, how far an action's slope strays from a lent one
        (`population.Scatter.slopes`, on its grid), which widens the power law with lent
        slopes for a request far from its runs' inputs (at its third execution, with the
        run-to-run `noise` beside it as that law's prior instead of `pooled_log_scale`, which
        counts the slopes' misses at an average distance)."""
        if not samples:
            return None
        newest, oldest = samples[0], samples[-1]
        history = (len(samples), newest.at_s, newest.peak_mib, newest.execution_id,
                   oldest.at_s)
        young = len(samples) <= config.ONLINE_BORROW_MAX_RUNS
        with self._lock:
            learned = self._input_prior if self._input_prior is not None else pooled_log_scale
            input_prior = None if learned is None else min(learned, prior_log_scale)
            # A young action's fits depend on the borrowed slopes too (their version: the
            # names it has are not known before its history is read, on a miss).
            borrowed = self._borrowed_version if young else -1
            pooled_key = pooled if young else ()
            slopes_prior = _slopes_prior(
                len(samples), prior_log_scale,
                noise if misfit and noise is not None else pooled_log_scale)
            # The misfit widens only the third execution's law with lent slopes, as its prior.
            lent_misfit = misfit if slopes_prior is not None else ()
            key = (*history, round(prior_log_scale, 3), input_prior, borrowed, pooled_key,
                   slopes_prior, lent_misfit)
            found = self._fits.get(action_id)
            if found is not None and found[0] == key:
                self._fits.move_to_end(action_id)
                return found[1]
            kept = self._cores.get(action_id)
            borrowed_slopes = self._borrowed  # replaced, never changed in place
            borrowed_powers = self._borrowed_powers  # the same
            if pooled_key:
                borrowed_slopes = {**dict(pooled_key), **borrowed_slopes}
        # A grown action's names are read only when its designs are fitted again: a refinish
        # (a new prior scale) reuses its cores without reading 500 runs' features.
        names = common_features(samples) if young else None
        slopes = _slopes_for(borrowed_slopes, names) if names else ()
        powers = borrowed_powers.get(names, ()) if names else ()
        cores = (kept[1] if kept is not None and kept[0] == (*history, slopes, powers)
                 else None)
        refinish = cores is not None
        if cores is None:
            cores = _cores(samples, common_features(samples) if names is None else names,
                           slopes, powers)
        model = _model(cores, prior_log_scale, input_prior, slopes_prior, dict(lent_misfit))
        spread = None if refinish else input_spread(cores)
        own = None if refinish else own_slopes(cores)
        powers_shown = None if refinish else own_powers(cores)
        with self._lock:
            if spread is not None:
                self._input_prior = _prior_of(_latest(self._spreads, action_id, spread))
            if own is not None:
                lent: list[dict[str, float]] = _latest(self._slopes, action_id, own)
                borrowed_now = _borrowed_of(lent)
                if borrowed_now != self._borrowed:
                    self._borrowed = borrowed_now
                    self._borrowed_version += 1
            if powers_shown is not None:
                powers_now = _powers_of(_latest(self._powers, action_id, powers_shown))
                if powers_now != self._borrowed_powers:
                    self._borrowed_powers = powers_now
                    self._borrowed_version += 1
            if refinish:
                self.refinished += 1
            else:
                self.fitted += 1
            self._fits[action_id] = (key, model)
            self._fits.move_to_end(action_id)
            while len(self._fits) > self.max_actions:
                self._fits.popitem(last=False)
            if self.max_cores > 0:
                self._cores[action_id] = ((*history, slopes, powers), cores)
                self._cores.move_to_end(action_id)
                while len(self._cores) > self.max_cores:
                    self._cores.popitem(last=False)
        return model

    @property
    def borrowed(self) -> dict[str, float]:
        """The slopes a young action borrows, per input name (a copy)."""
        with self._lock:
            return dict(self._borrowed)

    @property
    def borrowed_powers(self) -> dict[tuple[str, ...], tuple[float, ...]]:
        """The powers a young action borrows, per set of input names (a copy)."""
        with self._lock:
            return dict(self._borrowed_powers)


V = TypeVar("V")


def _latest(kept: OrderedDict[str, V], action_id: str, value: V) -> list[V]:
    """`value` kept as the action's newest, the ONLINE_INPUT_PRIOR_ACTIONS actions fitted last
    kept in all: their values, what the prior, slopes and powers lent are learned from."""
    kept[action_id] = value
    kept.move_to_end(action_id)
    while len(kept) > config.ONLINE_INPUT_PRIOR_ACTIONS:
        kept.popitem(last=False)
    return list(kept.values())


def _slopes_for(borrowed: Mapping[str, float], names: Sequence[str]) -> Lent:
    """Other actions' slopes for these inputs, None for an input none is lent for yet (the
    power law leaves it out: an attention action's batch size is lent long before its
    sequence length, which only its kind of action has); () when none has one."""
    found = tuple(borrowed.get(f) for f in names)
    return found if any(b is not None for b in found) else ()


def _borrowed_of(slopes: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """Per input name, the median of the slopes of the actions whose power law has it, once
    ONLINE_INPUT_PRIOR_MIN_ACTIONS show it, on a grid of ONLINE_BORROW_SLOPE_STEP (so one more
    action rarely moves it, and the young actions' fits it keys stay valid)."""
    by_name: dict[str, list[float]] = {}
    for own in slopes:
        for f, b in own.items():
            by_name.setdefault(f, []).append(b)
    step = config.ONLINE_BORROW_SLOPE_STEP
    return {f: round(float(np.median(v)) / step) * step for f, v in by_name.items()
            if len(v) >= config.ONLINE_INPUT_PRIOR_MIN_ACTIONS}


def _powers_of(shown: Sequence[tuple[tuple[str, ...], tuple[float, ...]]]
               ) -> dict[tuple[str, ...], tuple[float, ...]]:
    """Per set of input names, the powers most of the actions with those inputs chose, once
    ONLINE_INPUT_PRIOR_MIN_ACTIONS chose them (the most such actions first, then the smaller
    powers: a stable choice). A grid of its own: one more action rarely moves the most
    common of a few dozen candidates, and the young actions' fits it keys stay valid."""
    counts: dict[tuple[str, ...], dict[tuple[float, ...], int]] = {}
    for names, powers in shown:
        by = counts.setdefault(names, {})
        by[powers] = by.get(powers, 0) + 1
    found = {}
    for names, by in counts.items():
        powers, k = min(by.items(), key=lambda pk: (-pk[1], pk[0]))
        if k >= config.ONLINE_INPUT_PRIOR_MIN_ACTIONS:
            found[names] = powers
    return found


def _prior_of(spreads: Sequence[float]) -> float | None:
    """The prior spread of designs on the inputs: the median of what they leave across
    actions, on the population's grid (so a new action's spread rarely moves it, and the
    fits it keys stay valid), never below POPULATION_MIN_LOG_SCALE; None with too few."""
    if len(spreads) < config.ONLINE_INPUT_PRIOR_MIN_ACTIONS:
        return None
    return max(on_grid(max(float(np.median(spreads)), 1e-6)), config.POPULATION_MIN_LOG_SCALE)
