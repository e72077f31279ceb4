"""The retraining job: fit a candidate from the store's executions, test it on the most recent
ones against the version serving (or, when none serves, the history rules the server runs
without a model), store it with its metrics, and promote it only when it is better.

Two runs at once corrupt nothing: a version is promoted in one transaction that checks the
serving version is still the one the candidate was compared with, and a unique index allows one
serving version per kind.
"""

from __future__ import annotations

import logging
import math
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Protocol

import numpy as np

from recommender.core import config
from recommender.core.catalog import Catalog
from recommender.core.dataset import SUCCEEDED, Dataset
from recommender.core.domain import ModelVersion
from recommender.core.online import ActionModels
from recommender.core.population import Population, PopulationSource, read_population
from recommender.core.predictive import checked_oom_wait_gpus
from recommender.learning.evaluate import Scores, score, server_predictions
from recommender.learning.fit import fit_memory_model
from recommender.learning.memory_model import KIND, MemoryModel

log = logging.getLogger(__name__)


class TrainingStore(PopulationSource, Protocol):
    """What the job reads and writes (`recommender.store.SqlStore`)."""

    def read_executions(self, progress: Callable[[int], None] | None = None) -> Dataset:
        """Every execution, oldest first."""
        ...
    def serving_model_version(self, kind: str) -> ModelVersion | None: ...
    def save_model_version(self, v: ModelVersion, *, expected_serving: str | None = None
                           ) -> bool:
        """Stores `v`; when it is to serve, promotes it only if `expected_serving` still
        serves (False when another run promoted a version meanwhile)."""
        ...


@dataclass
class RetrainResult:
    version: str
    promoted: bool
    reason: str
    metrics: dict[str, float] = field(default_factory=dict)


def split_by_time(data: Dataset) -> tuple[Dataset, Dataset, Dataset]:
    """Oldest rows train, the next calibrate, the most recent test (data is in time order):
    LEARN_HOLDOUT of them, at most LEARN_HOLDOUT_MAX_ROWS."""
    n = len(data)
    test_start = int(n * (1 - config.LEARN_HOLDOUT))
    cal_start = int(n * (1 - config.LEARN_HOLDOUT - config.LEARN_CALIBRATION))
    beyond = n - test_start - config.LEARN_HOLDOUT_MAX_ROWS
    if beyond > 0:  # the rows the cap leaves out of the test calibrate, and the rest train
        test_start += beyond
        cal_start += beyond
    idx = np.arange(n)
    return data.take(idx[:cal_start]), data.take(idx[cal_start:test_start]), data.take(
        idx[test_start:])


def retrain(store: TrainingStore, catalog: Catalog, *, now: datetime | None = None,
            quantile: float = config.MODEL_QUANTILE,
            progress: Callable[[str], None] | None = None,
            oom_wait_gpus: float = config.OOM_WAIT_GPUS) -> RetrainResult:
    """Fits a candidate and promotes it only if it beats the serving version (or the history
    rules) on the newest executions, each scored by what the server would reserve with it and
    what its OOMs cost at `oom_wait_gpus` (the server's price: `recommender serve
    --oom-wait-gpus`). The price is checked (ValueError) and stored with the version's
    metrics, where a server that loads it compares it with its own (`serving.ModelHolder`)."""
    oom_wait_gpus = checked_oom_wait_gpus(oom_wait_gpus)
    say = progress or (lambda _m: None)
    now = now or datetime.now(UTC)
    serving = store.serving_model_version(KIND)
    say("reading executions")
    data = store.read_executions(progress=lambda n: say(f"read {n:,} executions"))
    usable = int(((data.outcome == SUCCEEDED) & (data.peak > 0)).sum())
    train_share = 1 - config.LEARN_HOLDOUT - config.LEARN_CALIBRATION
    needed = math.ceil(config.LEARN_MIN_ROWS / train_share)
    if usable < needed:
        return RetrainResult("", False, (
            f"not enough data: {usable} successful executions; {needed} are needed (the oldest "
            f"{train_share:.0%} train, and a model is worth fitting from {config.LEARN_MIN_ROWS})"))
    train, calib, test = split_by_time(data)
    params, report = fit_memory_model(train, calib, quantile, progress=say)
    version = f"mem-{now:%Y%m%d-%H%M%S}-{uuid.uuid4().hex[:6]}"
    candidate = MemoryModel(version, params)
    say("testing on the hold-out")
    seen_all = train.concat(calib)
    # Each scored as the server would run it: its estimator chain with that model (or none),
    # and what it knew of other actions when the hold-out began, and again as it went on.
    population, reread = _populations(store, test)
    models = ActionModels()

    def replay(predictor: MemoryModel | None) -> Scores:
        return score(test, server_predictions(test, seen_all, catalog, predictor, models,
                                              population, reread, oom_wait_gpus),
                     catalog, oom_wait_gpus)

    cand = replay(candidate)
    history = replay(None)
    if serving is not None:
        try:
            incumbent = replay(MemoryModel(serving.version, serving.params))
            against = f"serving version {serving.version}"
        except (ValueError, KeyError, TypeError) as e:
            log.warning("serving version %s cannot be evaluated: %s", serving.version, e)
            incumbent, against = history, "the history rules (serving version unreadable)"
    else:
        incumbent, against = history, "the history rules (no version serving)"
    better, why = cand.better_than(incumbent)
    metrics = {
        **cand.as_metrics("test"),
        **incumbent.as_metrics("incumbent"),
        **history.as_metrics("history"),
        **{f"validation_pinball_{k}": v for k, v in report.validation.items()},
        "train_rows": float(len(train)),
        "calibration_rows": float(len(calib)),
        "action_models": float(report.action_models),
        "quantile": quantile,
        "oom_wait_gpus": oom_wait_gpus,
    }
    reason = f"{'promoted' if better else 'not promoted'} against {against}: {why}; " \
             f"family {report.family}, {report.action_models} action models; an OOM " \
             f"priced at {oom_wait_gpus:g} whole GPUs"
    result = RetrainResult(version, better, reason, metrics)
    v = ModelVersion(
        version=version, created_at=now, kind=KIND, promoted=better, serving=better,
        metrics=metrics, reason=reason,
        training_window_start=_when(train.ended[0]) if len(train) else None,
        training_window_end=_when(calib.ended[-1]) if len(calib) else None,
        params=params,
    )
    expected = serving.version if serving else None
    if not store.save_model_version(v, expected_serving=expected) and better:
        result.promoted = False
        result.reason = reason.replace("promoted against", "compared against", 1) + (
            "; another run promoted a version meanwhile, so this one is stored unpromoted")
    return result


def _populations(store: TrainingStore, test: Dataset
                 ) -> tuple[Population | None, list[tuple[int, Population | None]]]:
    """The population (and young actions' record) as the server read it when the hold-out
    began, and as it read it again at LEARN_REPLAY_POPULATION_READS evenly spaced rows of it
    (by row). The first is from executions ended before the hold-out's first one ended (a
    microsecond before: a training row that ended at the same instant is left out with it);
    each later one from executions ended before any row from there on started (a decision is
    made when its execution starts). So no hold-out outcome informs its own replay, and a new
    action late in a long hold-out meets the population the server would have read by then,
    not the one from its start: the server's rules lean on it for new and young actions, a
    learned model's pooled estimator does not. (None, []) on an empty hold-out."""
    n = len(test)
    if not n:
        return None, []
    tick = timedelta(microseconds=1)
    first = read_population(store, _when(test.ended[0]) - tick)
    reads = config.LEARN_REPLAY_POPULATION_READS
    starts = test.ended - np.maximum(test.duration_s, 0.0)
    first_start_from = np.minimum.accumulate(starts[::-1])[::-1]  # the earliest start from row i on
    again: list[tuple[int, Population | None]] = []
    last = float(test.ended[0])
    for row in sorted({n * k // reads for k in range(1, reads)} - {0}):
        bound = float(first_start_from[row])
        if bound > last:  # a row that ran long can hold the bound back: no older read
            last = bound
            again.append((row, read_population(store, _when(bound) - tick)))
    return first, again


def _when(epoch: float) -> datetime:
    return datetime.fromtimestamp(float(epoch), tz=UTC)
