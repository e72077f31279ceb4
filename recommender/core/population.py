"""What other actions say about a new one: the cold-start prior and the spread to expect.

A new action is not a blank: across the actions a service has seen, first peaks have a
distribution, and (when users declare memory) real peaks relate to declared figures in a way
that holds across users ("declared 16 GB, used 6" is common). So a new action starts from the
population, on a slice chosen by expected cost, instead of the largest slice; only when nothing
at all is known (a new service) does the largest slice remain. Where peaks grow with inputs
that actions' requests share (a batch size), a new action is placed at its request's inputs:
slopes pooled within actions (`_pooled_slopes`) move the first peaks to the inputs' centres
(`AtInputs`), and from there to the request's; an input constant within each action (a model's
size) is given a slope across the actions' first peaks instead (`_slopes_across`). Once many
actions have run, a new action's first run is read from those that ran nearest its request
instead of the one power law and spread across them all (`core.neighbours`).

Built from the most recent executions across actions (one bounded query, refreshed now and then
by the use cases); pure numbers here.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from functools import cached_property
from typing import Protocol, TypeVar

import numpy as np

from recommender.core import config
from recommender.core.arrays import FloatArray
from recommender.core.calibration import EMPTY, CalibrationSample, SliceCalibration
from recommender.core.neighbours import Nearest
from recommender.core.predictive import Predictive
from recommender.core.spread import Spread

T = TypeVar("T", float, FloatArray)


@dataclass(frozen=True)
class PopulationSample:
    """One recent execution of some action, as the population sees it."""

    action_id: str
    at_s: float
    need_mib: float
    """Its peak (an OOM's bumped value)."""
    declared_mib: float = 0.0
    features: Mapping[str, float] = field(default_factory=dict, compare=False)
    """Its request's features: how steeply peaks grow with inputs, learned across actions."""


@dataclass(frozen=True)
class Bend:
    """How the slope of log peak on one log input changes along it, pooled within actions
    (`_pooled_bends`): `curvature` times (x - `at`) squared, where x is the log input, taken
    straight on past the log inputs the fit saw (`low` to `high`) with the slope it has at
    their edge. Why: a footprint plus a cost per batch item grows slowly in log at small
    batches and nearly in proportion at large ones, so one power law moves a run from a batch
    of 16 to one of 64 by a fraction of what it grows; a bend carried on past the inputs seen
    would grow without bound."""

    curvature: float
    at: float
    low: float
    high: float

    def of(self, x: float) -> float:
        """The bend's part of the log peak at log input `x`."""
        return self._at(x, min(max(x, self.low), self.high))

    def of_array(self, x: FloatArray) -> FloatArray:
        """`of` for each of the log inputs `x`."""
        return self._at(x, np.clip(x, self.low, self.high))

    def _at(self, x: T, edge: T) -> T:
        """The curve up to `edge` (x clipped to the inputs seen), straight on from there."""
        return self.curvature * ((edge - self.at) ** 2 + 2.0 * (edge - self.at) * (x - edge))


@dataclass(frozen=True)
class Inputs:
    """How peaks move with a request's inputs across actions (`_pooled_slopes`): per input
    name a slope of log peak on log input, about a centre (the mean log input of the first
    runs that carry it), and where the slope itself changes along the input, a `Bend`. An
    input a request lacks is taken at its centre; an input no slope is known for moves
    nothing."""

    slopes: Mapping[str, float]
    centres: Mapping[str, float]
    across: tuple[str, ...] = ()
    """Those of `slopes` fitted across actions' first runs (`_slopes_across`), not within."""
    inverse: tuple[tuple[float, ...], ...] = ()
    """(X'X)^-1 of that fit (a column of ones, then the centred log inputs in `across`
    order): how uncertain its mean and slopes are, so a request far from the inputs seen is
    given a wider prior."""
    bends: Mapping[str, Bend] = field(default_factory=dict)
    """Per input of `slopes` fitted within actions whose slope changes along it; with a bend,
    that input's slope is the one at the bend's `at`."""

    @cached_property
    def _terms(self) -> dict[str, tuple[float, float, Bend | None, float]]:
        """Per input: its slope, centre, bend and the bend's part at the centre."""
        return {f: (b, self.centres[f], bend := self.bends.get(f),
                    0.0 if bend is None else bend.of(self.centres[f]))
                for f, b in self.slopes.items()}

    def shift(self, features: Mapping[str, float]) -> float:
        moved = []
        for f, (b, centre, bend, at_centre) in self._terms.items():
            if (v := features.get(f, 0.0)) > 0:
                x = math.log(v)
                moved.append(b * (x - centre))
                if bend is not None:
                    moved.append(bend.of(x) - at_centre)
        return math.fsum(moved)

    def shift_runs(self, names: Sequence[str], x: FloatArray) -> FloatArray:
        """`shift` of runs whose log inputs `names` are the columns of `x`."""
        moved = np.zeros(len(x))
        for j, f in enumerate(names):
            if (term := self._terms.get(f)) is not None:
                b, centre, bend, at_centre = term
                moved += b * (x[:, j] - centre)
                if bend is not None:
                    moved += bend.of_array(x[:, j]) - at_centre
        return moved

    def leverage(self, features: Mapping[str, float]) -> float:
        """d' (X'X)^-1 d of the request's centred log inputs across actions (d = [1, ...]):
        the variance of the fit's mean there, in units of the spread about it (1/n at the
        centres; 0 without slopes across actions)."""
        if not self.across:
            return 0.0
        d = [1.0] + [math.log(v) - self.centres[f] if (v := features.get(f, 0.0)) > 0 else 0.0
                     for f in self.across]
        return max(math.fsum(d[i] * row[j] * d[j] for i, row in enumerate(self.inverse)
                             for j in range(len(d))), 0.0)

    def said(self) -> str:
        return ", ".join(f"{f}^{b:.2f}" + (" across actions" if f in self.across else "")
                         + (f" bending {bend.curvature:+.2f}" if (bend := self.bends.get(f))
                            else "")
                         for f, b in sorted(self.slopes.items()))


@dataclass(frozen=True)
class Scatter:
    """An action's runs about its level once the pooled slopes have moved them: each run
    scatters by `noise` (a variance in log), and an action's own slope on each input strays
    from the pooled one by a variance `slopes[f]`, so two runs whose log inputs differ by d
    differ by 2 noise + sum of slopes[f] d_f^2 (`_scatter`). Why: the run-to-run spread is one
    figure for every pair of runs, but a pooled slope misses an action's own by the most where
    the inputs moved the most. A second run at the first run's inputs is its first run again,
    give or take the noise; one at a batch 32 times the first's depends mostly on how steeply
    this action grows, which no run of it has shown yet."""

    noise: float
    slopes: Mapping[str, float]

    def away(self, features: Mapping[str, float], first: Mapping[str, float]) -> float:
        """The variance of a first run at inputs `first` about the level at `features`."""
        return self.noise + math.fsum(
            t * (math.log(v) - math.log(u)) ** 2 for f, t in self.slopes.items()
            if (v := features.get(f, 0.0)) > 0 and (u := first.get(f, 0.0)) > 0)


@dataclass(frozen=True)
class AtInputs:
    """The population moved to the centres of the inputs (each first peak less its inputs'
    shift): where that leaves less spread across actions than the raw figures, a new action is
    placed at its request's inputs."""

    inputs: Inputs
    """The slopes pooled within actions: what the declared ratios and the run-to-run spread
    are moved by."""
    log_scale: float
    """Run-to-run spread of an action's log peak once its inputs are accounted for."""
    first: Spread | None
    declared: Spread | None
    first_inputs: Inputs | None = None
    """What `first` was moved by: the slopes within actions where they narrowed it, and
    slopes across actions' first runs for inputs constant within them (a model's size), where
    those narrowed it further; None: `inputs`."""
    scatter: Scatter | None = None
    """How far a run strays from the next once both are moved by `inputs`, by how far the
    inputs moved between them (`_scatter`): what a second run at other inputs than the first
    is weighed with, instead of `log_scale` for every pair."""

    @property
    def for_first(self) -> Inputs:
        return self.first_inputs or self.inputs


@dataclass(frozen=True)
class Population:
    actions: int
    log_scale: float
    """Typical spread of an action's own log peaks: the prior of every action's scale."""
    first: Spread | None
    """Log first peak across actions: where a new action without a declared figure starts."""
    declared: Spread | None
    """Log (first peak / declared) across actions that declared memory."""
    at_inputs: AtInputs | None = None
    """The same at the request's inputs, where that tells a new action more."""
    slopes: tuple[tuple[str, float], ...] = ()
    """The slopes pooled within actions (`_pooled_slopes`), on a grid ONLINE_BORROW_SLOPE_STEP
    apart, by input name in order: what a young action borrows for an input no grown action
    lends one for yet (as pairs, so each Recommend keys its fits on them as they are)."""
    calibration: SliceCalibration = EMPTY
    """How young actions' first attempts on each slice size turned out against the chances
    stated for them (`core.calibration`), read with the population."""
    rows: int = 0
    """How many executions it was read from: when to read it again (`UseCases`)."""
    nearest: Nearest | None = field(default=None, compare=False, repr=False)
    """The actions' latest runs by their inputs: a new action's first run is read from the
    actions that ran nearest its request, once there are enough (`core.neighbours`)."""
    nearest_declared: Nearest | None = field(default=None, compare=False, repr=False)
    """The same for the declared ratios, by the inputs and the declared memory."""

    @property
    def scatter(self) -> Scatter | None:
        """How an action's runs stray from each other (`AtInputs.scatter`), if known."""
        return self.at_inputs.scatter if self.at_inputs is not None else None

    @cached_property
    def misfit(self) -> tuple[tuple[str, float], ...]:
        """Per input, how far an action's own slope strays from the pooled one (a variance in
        log, `Scatter.slopes`, its square root on the population's grid, by input name): what
        a young action's power law with lent slopes is widened by far from its runs' inputs.
        On the grid, so that a new read rarely moves it and the fits it keys stay valid."""
        scatter = self.scatter
        return () if scatter is None else tuple(sorted(
            (f, on_grid(math.sqrt(t)) ** 2) for f, t in scatter.slopes.items() if t > 0))

    @cached_property
    def noise(self) -> float | None:
        """The run-to-run noise beside `misfit` (`Scatter.noise`, as a spread on the grid):
        that power law's prior spread at its runs' inputs."""
        scatter = self.scatter
        return None if scatter is None else on_grid(math.sqrt(scatter.noise))

    def prior(self, declared_mib: float, first_run_mib: float = 0.0,
              features: Mapping[str, float] | None = None,
              first_features: Mapping[str, float] | None = None
              ) -> tuple[Predictive, str] | None:
        """The predictive need of a new action, and what it was learned from; with
        `first_run_mib`, the peak of its one execution so far (whose request carried
        `first_features`), weighed against it (`after_one_run`)."""
        declared = declared_mib > 0 and self.declared is not None
        moved = self.at_inputs
        inputs = None if moved is None else moved.inputs if declared else moved.for_first
        if inputs is None or not features or not any(
                features.get(f, 0.0) > 0 for f in inputs.slopes):
            moved = None  # a request without the inputs: the narrower spread is not for it
        spread = (self.declared if declared else self.first) if moved is None else (
            moved.declared if declared else moved.first)
        if spread is None:
            moved, spread = None, self.declared if declared else self.first
        if spread is None:
            return None
        at = math.log(declared_mib) if declared else 0.0
        nearest = self.nearest_declared if declared else self.nearest
        around = (nearest.around(features or {}, declared_mib, moved is not None)
                  if nearest is not None and first_run_mib <= 0 else None)
        if around is not None and nearest is not None:
            spread = around
            among = (f"the {around.actions} of {nearest.actions} actions nearest this request "
                     f"({nearest.said(features or {}, declared_mib)})")
        else:
            among = f"{spread.actions} actions" if declared else f"{spread.actions} other actions"
        if declared:
            why = (f"declared {declared_mib:,.0f} MiB x {math.exp(spread.loc):.2f}, how first "
                   f"peaks relate to declared memory across {among}")
        else:
            why = f"first peaks of {among}"
        prior = spread.predictive(at)
        shift: Callable[[Mapping[str, float]], float] = _unmoved
        if moved is not None and inputs is not None:
            shift = inputs.shift
            why += f" at this request's inputs ({inputs.said()})"
            # Near or far, a request beyond the inputs seen is moved there by slopes that are
            # themselves uncertain (the nearest actions are then the farthest out).
            widened = 1.0 + inputs.leverage(features or {})
            prior = replace(prior, scale=prior.scale * math.sqrt(widened))
        if first_run_mib > 0:
            scatter = moved.scatter if moved is not None else None
            prior = after_one_run(
                prior, math.log(first_run_mib) - shift(first_features or {}),
                moved.log_scale if moved is not None else self.log_scale,
                None if scatter is None else (
                    scatter.away(features or {}, first_features or {}), scatter.noise))
            why = f"its one run ({first_run_mib:,.0f} MiB) weighed against {why}"
        return replace(prior, loc=prior.loc + shift(features or {})), why


def _unmoved(_features: Mapping[str, float]) -> float:
    """The shift of a prior that is not at the request's inputs."""
    return 0.0


def after_one_run(prior: Predictive, first_run: float, log_scale: float,
                  scatter: tuple[float, float] | None = None) -> Predictive:
    """The need at a new action's second execution: its level is somewhere among other
    actions' (the prior holds their levels and one run's scatter about them), and its first
    run (log `first_run`) is one draw about that level with the population's run-to-run
    spread `log_scale`. The level's posterior weighs the run and the prior by their
    precisions; the prior on levels is a t with ONLINE_PRIOR_DF degrees of freedom, so a run
    far outside the others' (an action unlike them) is believed over them rather than pulled
    back to them (its mode by iteratively reweighted means, started at the run). The need is
    the level plus one more run's scatter, a t with ONLINE_PRIOR_DF (the action's own spread is
    not known yet), never wider than the prior. With `scatter` (`Scatter`: the variance of the
    first run about the level at the request's inputs, and of one run about its level), the
    run is weighed by how far the inputs moved since it, and the next run scatters by the
    noise alone. Why, and what it changed: config, POPULATION_MODE_STEPS and POPULATION_PAIRS."""
    within = log_scale * log_scale
    between = max(prior.scale * prior.scale - within, 0.0)
    if between <= 0.0:
        return prior  # the actions differ no more than runs do: the run says nothing new
    away, noise = scatter if scatter is not None else (within, within)
    df = config.ONLINE_PRIOR_DF
    level, weight = first_run, 1.0 / between
    for _ in range(config.POPULATION_MODE_STEPS):
        gap = level - prior.loc
        weight = (df + 1.0) / (df * between + gap * gap)
        level = (first_run / away + prior.loc * weight) / (1.0 / away + weight)
    scale = math.sqrt(1.0 / (1.0 / away + weight) + noise)
    return Predictive(level, min(scale, prior.scale), min(prior.df, df))


def _spread(values: Sequence[float]) -> float:
    return statistics.stdev(values) if len(values) > 1 else 0.0


def on_grid(scale: float) -> float:
    """The nearest point of a grid POPULATION_SCALE_STEP apart in log: a read that moves the
    median spread by less than its own sampling error leaves every action's prior where it
    was, so their fitted models stay valid instead of being finished again."""
    step = config.POPULATION_SCALE_STEP
    return math.exp(round(math.log(scale) / step) * step)


class PopulationSource(Protocol):
    """Where the population is read from (`ports.RecommendationStore` has both)."""

    def population_samples(self, limit: int, before: datetime | None = None
                           ) -> list[PopulationSample]: ...
    def calibration_samples(self, limit: int, before: datetime | None = None
                            ) -> list[CalibrationSample]: ...


def read_population(source: PopulationSource, before: datetime | None = None) -> Population:
    """The population and young actions' record, read with the same bounds by the server (now)
    and by the retraining job (`before` its hold-out began)."""
    return build_population(
        source.population_samples(config.POPULATION_SAMPLES, before),
        source.calibration_samples(config.CALIBRATION_SAMPLES, before))


def build_population(samples: Sequence[PopulationSample],
                     first_attempts: Iterable[CalibrationSample] = ()) -> Population:
    """The population as read from recent executions across actions, with the record of young
    actions' first attempts (`core.calibration`) beside it: what the server reads once a minute
    and the retraining job reads as of its hold-out's start."""
    by_action: dict[str, list[PopulationSample]] = {}
    for s in samples:
        if s.need_mib > 0:
            by_action.setdefault(s.action_id, []).append(s)
    logs: list[_Logs] = []
    for runs in by_action.values():
        runs.sort(key=lambda s: s.at_s)
        logs.append(_logs_of(runs))
    log_scale = _log_scale([_run_spread(a.y) for a in logs])
    first = _across([float(a.y[0]) for a in logs], log_scale)
    declared = _across(_ratios(by_action, lambda _: 0.0), log_scale)
    pooled = _pooled_slopes(logs)
    step = config.ONLINE_BORROW_SLOPE_STEP
    at_inputs = _at_inputs(by_action, logs, _pooled_bends(logs, pooled), first, declared,
                           log_scale)
    nearest = nearest_declared = None
    if at_inputs is not None:  # without slopes on inputs there is nothing to be near in
        on_first, on_declared = at_inputs.for_first, at_inputs.inputs
        grouped, least = list(by_action.values()), at_inputs.log_scale
        nearest = Nearest.of(grouped, sorted(on_first.slopes), False, on_first.shift, least)
        nearest_declared = Nearest.of(grouped, sorted(on_declared.slopes), True,
                                      on_declared.shift, least)
    return Population(actions=len(by_action), log_scale=log_scale, first=first,
                      declared=declared, nearest=nearest, nearest_declared=nearest_declared,
                      at_inputs=at_inputs,
                      slopes=tuple(sorted((f, round(b / step) * step)
                                          for f, b in pooled.items())),
                      calibration=SliceCalibration.of(first_attempts), rows=len(samples))


@dataclass(frozen=True)
class _Logs:
    """An action's runs in time order, in log: its needs, and for its latest
    POPULATION_POOL_RUNS the inputs all of them carry."""

    y: FloatArray
    names: tuple[str, ...]
    x: FloatArray
    """Its latest runs x names."""

    @property
    def recent(self) -> FloatArray:
        """The needs of the runs `x` is of."""
        return self.y[len(self.y) - len(self.x):]


def _logs_of(runs: Sequence[PopulationSample]) -> _Logs:
    y = np.log(np.array([s.need_mib for s in runs], dtype=np.float64))
    recent = runs[-config.POPULATION_POOL_RUNS:]
    names = tuple(sorted(f for f, v in recent[0].features.items() if v > 0))
    if not names:
        return _Logs(y, (), np.empty((len(recent), 0)))
    raw = np.array([[s.features.get(f, 0.0) for f in names] for s in recent], dtype=np.float64)
    carried = np.all(raw > 0, axis=0)
    return _Logs(y, tuple(f for f, c in zip(names, carried.tolist(), strict=True) if c),
                 np.log(raw[:, carried]))


def _ratios(by_action: Mapping[str, Sequence[PopulationSample]],
            shift: Callable[[Mapping[str, float]], float]) -> list[float]:
    """Log (first peak / declared memory), less the first run's `shift`, of each action that
    declared some."""
    found = []
    for runs in by_action.values():
        declared = next((s.declared_mib for s in runs if s.declared_mib > 0), 0.0)
        if declared > 0:
            found.append(math.log(runs[0].need_mib / declared) - shift(runs[0].features))
    return found


def _across(values: Sequence[float], least_scale: float) -> Spread | None:
    if len(values) < config.POPULATION_MIN_ACTIONS:
        return None
    return Spread(statistics.fmean(values), max(_spread(values), least_scale), len(values))


def _log_scale(spreads: Sequence[float | None]) -> float:
    """The median of the actions' run-to-run spreads (`_run_spread`), on the grid."""
    known = [s for s in spreads if s is not None]
    found = statistics.median(known) if known else config.POPULATION_DEFAULT_LOG_SCALE
    return on_grid(max(found, config.POPULATION_MIN_LOG_SCALE))


def _run_spread(y: FloatArray) -> float | None:
    """From successive differences: the run-to-run variation, not a slow drift of level;
    None for an action with fewer than POPULATION_MIN_RUNS_FOR_SPREAD runs."""
    if len(y) < config.POPULATION_MIN_RUNS_FOR_SPREAD:
        return None
    d = np.diff(y)
    return math.sqrt(float(np.mean(d * d)) / 2.0)


class _Stacked:
    """The latest runs of every action that carries one of `names` (and has run twice),
    stacked: the log inputs by name (NaN where an action does not carry one), and the needs
    about each action's own mean. What a fit within actions regresses: how actions differ in
    level is the prior's spread, not a slope."""

    def __init__(self, logs: Sequence[_Logs], names: Sequence[str]) -> None:
        self.column = column = {f: k for k, f in enumerate(names)}
        """Each name's column in `raw`."""
        self.used = [a for a in logs if len(a.x) >= 2 and any(f in column for f in a.names)]
        self.raw = np.full((sum(len(a.x) for a in self.used), len(names)), np.nan)
        self._group = np.repeat(np.arange(len(self.used)), [len(a.x) for a in self.used])
        self._sizes = np.bincount(self._group, minlength=len(self.used)).astype(np.float64)
        row = 0
        for a in self.used:
            for j, f in enumerate(a.names):
                if (k := column.get(f)) is not None:
                    self.raw[row:row + len(a.x), k] = a.x[:, j]
            row += len(a.x)
        self.y = self.within(np.concatenate([a.recent for a in self.used])
                             if self.used else np.empty(0))

    def within(self, v: FloatArray) -> FloatArray:
        """`v` about each action's own mean, 0 where an action lacks the input."""
        present = ~np.isnan(v)
        mean = np.bincount(self._group, np.where(present, v, 0.0),
                           minlength=len(self.used)) / self._sizes
        return np.where(present, v - mean[self._group], 0.0)

    def linear(self) -> list[FloatArray]:
        """Each input's column about each action's own mean."""
        return [self.within(self.raw[:, k]) for k in range(self.raw.shape[1])]


def _pooled_slopes(logs: Sequence[_Logs]) -> dict[str, float]:
    """Per input name carried by POPULATION_MIN_ACTIONS actions' runs, the slope of log peak
    on log input within actions, pooled across them (each action's runs about its own means,
    one least-squares fit; an input an action's runs do not all carry is a zero column for it),
    each action by its latest POPULATION_POOL_RUNS runs: a busy action does not speak for
    all. Within, because how actions differ in level is what the prior's spread is for; pooled,
    because a new service's actions have two or three runs each when most of its first runs
    come, far too few for a power law of their own."""
    counts: dict[str, int] = {}
    for a in logs:
        if len(a.x) >= 2:
            for f, varies in zip(a.names, (np.ptp(a.x, axis=0) > 1e-9).tolist(), strict=True):
                if varies:
                    counts[f] = counts.get(f, 0) + 1
    shared = sorted(f for f, c in counts.items() if c >= config.POPULATION_MIN_ACTIONS)
    if not shared:
        return {}
    stacked = _Stacked(logs, shared)
    if not stacked.used:
        return {}
    coef = np.linalg.lstsq(np.column_stack(stacked.linear()), stacked.y, rcond=None)[0]
    return {f: float(b) for f, b in zip(shared, coef, strict=True)}


def _pooled_bends(logs: Sequence[_Logs], pooled: Mapping[str, float]
                  ) -> tuple[Mapping[str, float], Mapping[str, Bend]]:
    """`pooled` refitted with a `Bend` for each input whose slope changes along it: the same
    fit within actions, plus per input a column of its squared log input about the mean of
    the runs' (each action's about its own mean), kept where POPULATION_BEND_ACTIONS actions
    ran at three values of it or more (a curve needs three points) and the curvature is
    POPULATION_BEND_T of its standard errors from none, then fitted again with the kept
    ones alone. The slopes are then those at the bends' centres. `pooled` unchanged, and no
    bends, where none is kept. Why: config, POPULATION_BEND_T."""
    names = sorted(pooled)
    stacked = _Stacked(logs, names)
    if not stacked.used:
        return pooled, {}
    raw = stacked.raw
    counts = dict.fromkeys(names, 0)
    for a in stacked.used:
        for j, f in enumerate(a.names):
            if f in counts:
                counts[f] += len(set(np.round(a.x[:, j], 9).tolist())) >= 3
    curved = [f for f in names if counts[f] >= config.POPULATION_BEND_ACTIONS]
    if not curved:
        return pooled, {}
    y = stacked.y
    linear = stacked.linear()
    column = stacked.column
    centre = {f: float(np.nanmean(raw[:, column[f]])) for f in curved}
    square = {f: stacked.within((raw[:, column[f]] - centre[f]) ** 2) for f in curved}
    actions = len(stacked.used)

    def fit(bent: Sequence[str]) -> tuple[FloatArray, FloatArray, float]:
        design = np.column_stack(linear + [square[f] for f in bent])
        coef = np.linalg.lstsq(design, y, rcond=None)[0]
        residual = y - design @ coef
        dof = len(y) - actions - design.shape[1]
        variance = float(residual @ residual) / dof if dof > 0 else math.inf
        inverse = np.asarray(np.linalg.pinv(design.T @ design), dtype=np.float64)
        return np.asarray(coef, dtype=np.float64), inverse, variance

    coef, inverse, variance = fit(curved)
    kept = [f for i, f in enumerate(curved)
            if abs(coef[len(names) + i]) >= config.POPULATION_BEND_T * math.sqrt(
                max(variance * inverse[len(names) + i, len(names) + i], 0.0))]
    if not kept:
        return pooled, {}
    coef = fit(kept)[0]
    return ({f: float(coef[k]) for f, k in column.items()},
            {f: Bend(float(coef[len(names) + i]), centre[f],
                     float(np.nanmin(raw[:, column[f]])), float(np.nanmax(raw[:, column[f]])))
             for i, f in enumerate(kept)})


def _at_inputs(by_action: Mapping[str, Sequence[PopulationSample]], logs: Sequence[_Logs],
               bent: tuple[Mapping[str, float], Mapping[str, Bend]], first: Spread | None,
               declared: Spread | None, raw_log_scale: float) -> AtInputs | None:
    """The population moved to the centres of the inputs by the pooled slopes, each part kept
    only where it spreads less than the raw one (POPULATION_INPUTS_NARROWER: the inputs
    explain some of how actions' first runs differ); then the first peaks moved further by
    slopes across actions for the inputs no slope within them is known for
    (`_slopes_across`), where that narrows them again. None where no part is kept."""
    if first is None:
        return None
    firsts = [runs[0] for runs in by_action.values()]
    carried: dict[str, list[float]] = {}
    for s in firsts:
        for f, v in s.features.items():
            if v > 0:
                carried.setdefault(f, []).append(math.log(v))
    centres = {f: statistics.fmean(v) for f, v in carried.items()}
    pooled, bends = bent
    slopes = {f: b for f, b in pooled.items() if f in carried}
    inputs = Inputs(slopes, {f: centres[f] for f in slopes},
                    bends={f: bend for f, bend in bends.items() if f in slopes})

    def moved(a: _Logs) -> FloatArray:
        return a.recent - inputs.shift_runs(a.names, a.x)

    kept_first = kept_declared = None
    log_scale = raw_log_scale
    if slopes:
        log_scale = _log_scale([_run_spread(moved(a)) for a in logs])
        moved_first = _across([math.log(s.need_mib) - inputs.shift(s.features)
                               for s in firsts], log_scale)
        moved_declared = _across(_ratios(by_action, inputs.shift), log_scale)
        kept_first = moved_first if _narrower(moved_first, first) else None
        kept_declared = moved_declared if _narrower(moved_declared, declared) else None
    # Across actions on top of the slopes within them, whether or not those narrowed the
    # first peaks alone: a second run is moved between its inputs by them all, and the
    # run-to-run spread it is weighed with (`log_scale`) is the one left by the slopes within.
    across = _slopes_across(firsts, inputs, centres, set(pooled), log_scale)
    first_inputs = None
    if across is not None and _narrower(across[1], kept_first or first):
        first_inputs, kept_first = across
    if kept_first is None and kept_declared is None:
        return None
    return AtInputs(inputs, log_scale, kept_first, kept_declared, first_inputs,
                    _scatter(logs, moved, slopes))


def _scatter(logs: Sequence[_Logs], moved: Callable[[_Logs], FloatArray],
             slopes: Mapping[str, float]) -> Scatter | None:
    """The `Scatter` that best explains how each action's successive latest runs differ once
    `moved`: the squared differences regressed on the squared differences of their log inputs
    (a variance-components fit, each pair weighed by its expected variance squared,
    reweighted POPULATION_PAIR_STEPS times, a pair past POPULATION_PAIR_CAP of its variance
    counted at the cap so that an OOM's bumped value does not set it). None with fewer than
    POPULATION_PAIRS pairs per term."""
    names = sorted(slopes)
    column = {f: k + 1 for k, f in enumerate(names)}
    blocks, targets = [], []
    for a in logs:
        if len(a.x) < 2:
            continue
        d = np.diff(moved(a))
        block = np.zeros((len(d), len(names) + 1))
        block[:, 0] = 2.0
        for j, f in enumerate(a.names):
            if f in column:
                block[:, column[f]] = np.diff(a.x[:, j]) ** 2
        blocks.append(block)
        targets.append(d * d)
    if not blocks or sum(len(t) for t in targets) < config.POPULATION_PAIRS * (len(names) + 1):
        return None
    design, target = np.vstack(blocks), np.concatenate(targets)
    least = 2.0 * config.POPULATION_MIN_LOG_SCALE ** 2
    theta = np.full(design.shape[1], 0.0)
    theta[0] = max(float(np.median(target)) / 2.0, least / 2.0)
    for _ in range(config.POPULATION_PAIR_STEPS):
        var = np.maximum(design @ theta, least)
        w = 1.0 / var
        capped = np.minimum(target, config.POPULATION_PAIR_CAP * var)
        theta = np.linalg.lstsq(design * w[:, None], capped * w, rcond=None)[0]
        theta = np.maximum(theta, 0.0)
        theta[0] = max(float(theta[0]), least / 2.0)
    return Scatter(float(theta[0]), {f: float(theta[column[f]]) for f in names})


def _slopes_across(firsts: Sequence[PopulationSample], within: Inputs,
                   centres: Mapping[str, float], known: set[str], least_scale: float
                   ) -> tuple[Inputs, Spread] | None:
    """Slopes of the first peaks (less `within`'s shift) on log inputs across actions, for
    the inputs their first runs carry that no slope within actions is `known` for: an input
    constant within each action (a model's size, a dataset's) shows no slope within any, yet
    may tell how actions differ. The busiest inputs first, at most ONLINE_MAX_FEATURES, and
    POPULATION_ACROSS_ACTIONS_PER_SLOPE actions for each slope and the mean; an input a first
    run lacks is taken at its centre (as a request's is). The spread about the fit counts the
    degrees of freedom it used; None without such an input."""
    counts: dict[str, int] = {}
    for s in firsts:
        for f, v in s.features.items():
            if v > 0 and f not in known and f in centres:
                counts[f] = counts.get(f, 0) + 1
    names = [f for f in sorted(counts, key=lambda f: (-counts[f], f))
             if counts[f] >= config.POPULATION_MIN_ACTIONS]
    x = np.array([[math.log(v) - centres[f] if (v := s.features.get(f, 0.0)) > 0 else 0.0
                   for f in names] for s in firsts], dtype=np.float64).reshape(len(firsts), -1)
    keep = [k for k in range(len(names)) if np.ptp(x[:, k]) > 1e-9][:config.ONLINE_MAX_FEATURES]
    keep = keep[:max(len(firsts) // config.POPULATION_ACROSS_ACTIONS_PER_SLOPE - 1, 0)]
    if not keep:
        return None
    design = np.column_stack([np.ones(len(firsts)), x[:, keep]])
    y = np.array([math.log(s.need_mib) - within.shift(s.features) for s in firsts])
    coef = np.linalg.lstsq(design, y, rcond=None)[0]
    residual = y - design @ coef
    dof = len(firsts) - design.shape[1]
    scale = max(math.sqrt(float(residual @ residual) / dof), least_scale)
    across = tuple(names[k] for k in keep)
    inputs = Inputs({**within.slopes, **dict(zip(across, coef[1:].tolist(), strict=True))},
                    {**within.centres, **{f: centres[f] for f in across}}, across,
                    tuple(tuple(r) for r in np.linalg.pinv(design.T @ design).tolist()),
                    within.bends)
    return inputs, Spread(float(coef[0]), scale, len(firsts), len(across))


def _narrower(moved: Spread | None, raw: Spread | None) -> bool:
    return (moved is not None and raw is not None
            and moved.scale < raw.scale * config.POPULATION_INPUTS_NARROWER)
