"""Per-worker peak GPU memory estimates, as small composable estimators.

Like the VPA recommender's `logic/estimator.go`: a base estimator (the user's declared figure, a
decayed quantile of history, the max of a few samples) wrapped by decorators (a margin, an OOM
floor, a minimum) and combined (first that answers, the larger of two). Each estimate says where
it came from and why, so the reason line a person reads is built from the same objects.

An OOM is a censored observation: the execution needed *more* than the slice it died in, by an
unknown amount. It enters the sample set at a bumped value and also sets a hard floor while it is
recent, so a recommendation never repeats a slice that is known to be too small.
"""

from __future__ import annotations

import math
import operator
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from functools import lru_cache
from typing import Protocol

from recommender.core import config
from recommender.core.domain import Outcome, Sample
from recommender.core.fits import ActionModel, Fit
from recommender.core.online import ActionModels
from recommender.core.population import Population
from recommender.core.ports import MemoryPredictor
from recommender.core.predictive import Predictive, t_quantile

PRIOR = "prior"
HISTORY = "history"
MODEL = "model"
FALLBACK = "fallback"
POPULATION = "population"
"""A new action's prior learned from other actions."""


@dataclass(frozen=True)
class Evidence:
    """What is known about an action when a recommendation is asked for."""

    now: datetime
    samples: Sequence[Sample] = ()
    declared_mib: float = 0.0
    action_id: str = ""
    features: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Estimate:
    mib: float
    source: str
    quantile: float
    detail: str
    hard_floor_mib: float = 0.0
    """Memory known to be needed (a declared figure, a recent OOM): nothing smaller will do."""
    model_version: str = ""
    predictive: Predictive | None = None
    """The need's distribution, when the estimator knows it: the policy then chooses the slice
    by expected cost instead of the smallest one above `mib`."""


class Estimator(Protocol):
    def estimate(self, evidence: Evidence) -> Estimate | None: ...


def typical_peak_mib(peaks: Sequence[float]) -> float | None:
    """An action's typical per-worker peak, the pooled model's action-level input: the median
    of its successful peaks (the same in training, evaluation and serving)."""
    return float(statistics.median(peaks)) if peaks else None


def oom_bumped(slice_mib: float, peak_mib: float = 0.0) -> float:
    """The value an OOM contributes: more than the slice it died in (VPA's OOM bump)."""
    bumped = max(slice_mib * (1 + config.OOM_BUMP_FRACTION), slice_mib + config.OOM_BUMP_MIN_MIB)
    return max(bumped, peak_mib)


def sample_value(s: Sample) -> float:
    return oom_bumped(s.slice_mib, s.peak_mib) if s.outcome is Outcome.OOM else s.peak_mib


_INFORMATIVE = frozenset((Outcome.SUCCEEDED, Outcome.OOM))


def informative(samples: Sequence[Sample]) -> list[Sample]:
    """Successes and OOMs say how much memory was needed; other failures and cancellations don't."""
    return [s for s in samples if s.outcome in _INFORMATIVE]


def decay_weight(age: timedelta, half_life: timedelta) -> float:
    return float(0.5 ** (max(age.total_seconds(), 0.0) / half_life.total_seconds()))


def decay_weights(samples: Sequence[Sample], now: datetime, half_life: timedelta) -> list[float]:
    """`decay_weight` of each sample's age at `now`, in plain float arithmetic (hot path)."""
    now_s, half_s = now.timestamp(), half_life.total_seconds()
    return [0.5 ** (age / half_s) if (age := now_s - s.at_s) > 0 else 1.0 for s in samples]


@lru_cache(maxsize=64)
def rank_weights(n: int, half_life_executions: float) -> tuple[float, ...]:
    """0.5 ** (rank / half-life) for ranks 0..n-1: the same few tables on every call."""
    return tuple(0.5 ** (rank / half_life_executions) for rank in range(n))


_at_s = operator.attrgetter("at_s")


def weighted_quantile(values: Sequence[float], weights: Sequence[float], q: float) -> float:
    """The smallest value whose cumulative weight reaches q of the total."""
    pairs = sorted(zip(values, weights, strict=True))
    total = sum(w for _, w in pairs)
    target = q * total
    acc = 0.0
    for value, weight in pairs:
        acc += weight
        if acc >= target - 1e-12:
            return value
    return pairs[-1][0]


@dataclass(frozen=True)
class DeclaredPrior:
    """The user's own figure, before any history."""

    def estimate(self, evidence: Evidence) -> Estimate | None:
        if evidence.declared_mib <= 0:
            return None
        return Estimate(
            mib=evidence.declared_mib,
            source=PRIOR,
            quantile=0.0,
            detail=f"declared {evidence.declared_mib:,.0f} MiB",
            hard_floor_mib=evidence.declared_mib,
        )


@dataclass(frozen=True)
class DecayedQuantile:
    """A quantile of past per-worker peaks, recent executions weighing more.

    Two decays multiply: by age (an action's behaviour drifts over days) and by rank among the
    action's executions (the last few runs say most about the next one, however far apart they
    ran: memory in GenTD26 grows within a pod's life, and a 4-execution half-life beats VPA's
    24-hour one there on both OOMs and reserved memory).
    """

    quantile: float = config.MEMORY_QUANTILE
    half_life: timedelta = config.HISTORY_HALF_LIFE
    min_weight: float = config.HISTORY_MIN_WEIGHT
    half_life_executions: float = config.HISTORY_HALF_LIFE_EXECUTIONS

    def estimate(self, evidence: Evidence) -> Estimate | None:
        samples = sorted(informative(evidence.samples), key=_at_s, reverse=True)
        if not samples:
            return None
        weights = decay_weights(samples, evidence.now, self.half_life)
        if sum(weights) < self.min_weight:
            return None
        if self.half_life_executions > 0:
            by_rank = rank_weights(len(weights), self.half_life_executions)
            weights = [w * r for w, r in zip(weights, by_rank, strict=True)]
        oom = Outcome.OOM
        values = [oom_bumped(s.slice_mib, s.peak_mib) if s.outcome is oom else s.peak_mib
                  for s in samples]  # sample_value, inlined: this runs on every Recommend
        value = weighted_quantile(values, weights, self.quantile)
        ooms = sum(1 for s in samples if s.outcome is Outcome.OOM)
        return Estimate(
            mib=value,
            source=HISTORY,
            quantile=self.quantile,
            detail=(
                f"p{self.quantile * 100:g} of {len(samples)} executions"
                + (f" ({ooms} OOM)" if ooms else "")
                + f" {value:,.0f} MiB"
            ),
        )


@dataclass(frozen=True)
class Learned:
    """The serving learned model, for a request that carries its features.

    Its quantile is calibrated on held-out executions, so no margin is added. It comes before
    the action's own online model only while that has few executions: a new action's pooled
    prediction (its features, and no typical peak yet: the model was trained on first
    executions too) is the population's view of it.
    """

    predictor: Callable[[], MemoryPredictor | None]

    def estimate(self, evidence: Evidence) -> Estimate | None:
        model = self.predictor()
        if model is None or not evidence.features:
            return None
        level = typical_peak_mib([s.peak_mib for s in evidence.samples
                                  if s.outcome is Outcome.SUCCEEDED and s.peak_mib > 0])
        prediction = model.predict(evidence.action_id, evidence.features, level)
        if prediction is None:
            return None
        return Estimate(
            mib=prediction.mib,
            source=MODEL,
            quantile=model.quantile,
            detail=f"model {model.version} ({prediction.scope}) p{model.quantile * 100:g} "
            f"{prediction.mib:,.0f} MiB",
            model_version=model.version,
            predictive=learned_need(prediction.median_mib, prediction.mib, model.quantile),
        )


_t_at = lru_cache(maxsize=16)(t_quantile)
"""A served model's quantile and LEARN_PREDICTIVE_DF are fixed: its t point is worked out once,
not per Recommend."""


def learned_need(median_mib: float, quantile_mib: float, q: float) -> Predictive | None:
    """The need as a learned model states it: a t in log MiB with LEARN_PREDICTIVE_DF degrees
    of freedom through its calibrated median and its calibrated `q` quantile, so that the
    policy weighs each slice's chance of running out (expected cost) as it does the online
    models', instead of taking the smallest slice above one quantile. None without a median
    below the quantile (a version stored before medians: the quantile alone, as before)."""
    if not 0 < median_mib < quantile_mib or not 0.5 < q < 1:
        return None
    loc = math.log(median_mib)
    scale = (math.log(quantile_mib) - loc) / _t_at(q, config.LEARN_PREDICTIVE_DF)
    return Predictive(loc=loc, scale=scale, df=config.LEARN_PREDICTIVE_DF)


@dataclass(frozen=True)
class MaxOfSamples:
    """With too few samples for a quantile, the largest one seen."""

    def estimate(self, evidence: Evidence) -> Estimate | None:
        samples = informative(evidence.samples)
        if not samples:
            return None
        value = max(sample_value(s) for s in samples)
        return Estimate(
            mib=value,
            source=HISTORY,
            quantile=1.0,
            detail=f"max of {len(samples)} execution{'s' if len(samples) > 1 else ''} "
            f"{value:,.0f} MiB",
        )


@dataclass(frozen=True)
class WithMargin:
    inner: Estimator
    fraction: float

    def estimate(self, evidence: Evidence) -> Estimate | None:
        e = self.inner.estimate(evidence)
        if e is None:
            return None
        return replace(
            e, mib=e.mib * (1 + self.fraction), detail=f"{e.detail} +{self.fraction:.0%}"
        )


@dataclass(frozen=True)
class WithOomFloor:
    """A recent OOM is a hard floor: the need is above the slice the execution died in."""

    inner: Estimator
    window: timedelta = config.OOM_FLOOR_WINDOW

    def estimate(self, evidence: Evidence) -> Estimate | None:
        e = self.inner.estimate(evidence)
        if e is None:
            return None
        recent = [
            s for s in evidence.samples
            if s.outcome is Outcome.OOM and evidence.now - s.at <= self.window
        ]
        if not recent:
            return e
        floor = max(oom_bumped(s.slice_mib, s.peak_mib) for s in recent)
        # Known for certain: more than the slice it died in, and at least the peak seen.
        known = max(max(s.slice_mib + 1, s.peak_mib) for s in recent)
        e = replace(e, hard_floor_mib=max(e.hard_floor_mib, known),
                    predictive=e.predictive.with_floor(known) if e.predictive else None)
        if floor <= e.mib:
            return e
        return replace(e, mib=floor, detail=f"{e.detail}, raised to a recent OOM's {floor:,.0f}")


@dataclass(frozen=True)
class WithMinimum:
    inner: Estimator
    mib: float = config.MIN_ESTIMATE_MIB

    def estimate(self, evidence: Evidence) -> Estimate | None:
        e = self.inner.estimate(evidence)
        if e is None or e.mib >= self.mib:
            return e
        return replace(e, mib=self.mib, detail=f"{e.detail}, at least {self.mib:,.0f}")


@dataclass(frozen=True)
class FirstOf:
    estimators: tuple[Estimator, ...]

    def estimate(self, evidence: Evidence) -> Estimate | None:
        for estimator in self.estimators:
            e = estimator.estimate(evidence)
            if e is not None:
                return e
        return None


@dataclass(frozen=True)
class LargerOf:
    """Both opinions count while history is thin: take the more cautious one."""

    estimators: tuple[Estimator, ...]

    def estimate(self, evidence: Evidence) -> Estimate | None:
        found = [e for est in self.estimators if (e := est.estimate(evidence)) is not None]
        if not found:
            return None
        best = max(found, key=lambda e: e.mib)
        return replace(best, hard_floor_mib=max(e.hard_floor_mib for e in found))


def fit_online(models: ActionModels, action_id: str, samples: Sequence[Sample],
               pop: Population | None) -> ActionModel | None:
    """The action's online model with what the population lends it (its spread, slopes, the
    spread those slopes leave and how far they miss): the one call both Recommend and the fit
    ahead of it make, so that the fit ahead is the one Recommend finds."""
    at_inputs = pop.at_inputs if pop is not None else None
    return models.get(
        action_id, samples, pop.log_scale if pop else config.POPULATION_DEFAULT_LOG_SCALE,
        pop.slopes if pop else (), at_inputs.log_scale if at_inputs is not None else None,
        pop.misfit if pop is not None else (), pop.noise if pop is not None else None)


@dataclass(frozen=True)
class OnlineModel:
    """The action's own model, fitted online on its history (`core.online`): the design that
    predicted its past executions best, a Student-t around it calibrated on its own errors."""

    models: ActionModels
    population: Callable[[], Population | None] = lambda: None
    min_samples: int = 1

    def estimate(self, evidence: Evidence) -> Estimate | None:
        samples = evidence.samples
        if len(samples) < self.min_samples:
            return None
        model = fit_online(self.models, evidence.action_id, samples, self.population())
        found = model.predict(evidence.features) if model else None
        if found is None:
            return None
        need, fit = found
        if fit.samples < self.min_samples:
            return None
        mib = need.quantile(config.ESTIMATE_QUANTILE)
        return Estimate(
            mib=mib, source=HISTORY,
            quantile=config.ESTIMATE_QUANTILE,
            detail=f"{fit.design.said} over {fit.samples} executions"
            f"{'; ' + fit.step.said() if fit.step else ''}"
            f"{_near_said(fit, need)}: {need.describe()}, "
            f"p{config.ESTIMATE_QUANTILE * 100:g} {mib:,.0f} MiB",
            predictive=need)


def _near_said(fit: Fit, need: Predictive) -> str:
    """For the reason: how its runs near the request's inputs moved the design (`core.local`)."""
    if fit.local is None:
        return ""
    shift, ratio = need.near
    variance = fit.local.variance
    lent = (", as other actions' errors grow with them"
            if variance is not None and variance.lent else "")
    if fit.local.variance_alone:
        return f"; its errors' spread at these inputs x{math.sqrt(ratio):.2f}{lent}"
    return (f"; its runs near these inputs were {abs(shift):.2f} of its scale "
            f"{'above' if shift > 0 else 'below'} its shape, their spread x{math.sqrt(ratio):.2f}"
            f"{lent}")


@dataclass(frozen=True)
class PopulationPrior:
    """A new action's need as other actions suggest it (`core.population`): their first
    peaks, or how first peaks relate to declared memory when the user declared some."""

    population: Callable[[], Population | None]

    def estimate(self, evidence: Evidence) -> Estimate | None:
        pop = self.population()
        # Only an action with one recorded run, which succeeded (an OOM's value is a floor).
        only = evidence.samples[0] if len(evidence.samples) == 1 else None
        first = (only.peak_mib if only is not None and only.outcome is Outcome.SUCCEEDED
                 and only.peak_mib > 0 else 0.0)
        found = (pop.prior(evidence.declared_mib, first, evidence.features,
                           only.features if only is not None else None) if pop else None)
        if found is None:
            return None
        need, why = found
        mib = need.quantile(config.ESTIMATE_QUANTILE)
        said = "one run so far" if first else "new action"
        return Estimate(mib=mib, source=POPULATION, quantile=config.ESTIMATE_QUANTILE,
                        detail=f"{said}: {why}; p{config.ESTIMATE_QUANTILE * 100:g} "
                        f"{mib:,.0f} MiB", predictive=need)


def default_estimator(predictor: Callable[[], MemoryPredictor | None] | None = None,
                      models: ActionModels | None = None,
                      population: Callable[[], Population | None] | None = None
                      ) -> Estimator:
    """The action's own online model once it has a few executions (the offline learned model
    first while it has fewer and a version serves); for a new action, the population's prior,
    else the declared figure. A recent OOM is a floor; nothing goes below the minimum."""
    models = models or ActionModels()
    population = population or (lambda: None)
    prior = WithMargin(DeclaredPrior(), config.PRIOR_MARGIN)
    chain: tuple[Estimator, ...] = (
        OnlineModel(models, population, config.ONLINE_MIN_SAMPLES_OVER_LEARNED),
        *((Learned(predictor),) if predictor is not None else ()),
        OnlineModel(models, population, 1),
        PopulationPrior(population),
        prior,
    )
    return WithMinimum(WithOomFloor(FirstOf(chain), config.OOM_FLOOR_WINDOW),
                       config.MIN_ESTIMATE_MIB)


def mean_sm_utilisation(samples: Sequence[Sample], now: datetime) -> float | None:
    """Decayed mean SM use of successful executions, or None without any."""
    ok = [s for s in samples if s.outcome is Outcome.SUCCEEDED and s.sm_utilization > 0]
    if not ok:
        return None
    weights = decay_weights(ok, now, config.HISTORY_HALF_LIFE)
    total = sum(weights)
    if total <= 0 or math.isclose(total, 0.0):
        return None
    return math.fsum(map(operator.mul, weights, (s.sm_utilization for s in ok))) / total
