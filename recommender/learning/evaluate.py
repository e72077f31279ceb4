"""Scoring a memory model, or the server's history rules, on held-out executions.

OOM rate: executions whose first slice (the smallest profile of the execution's GPU model that
holds the prediction) would have been too small (for an execution that did OOM, not above the
slice it died in). Reserved memory: that slice, for the execution's duration.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import numpy as np
from numpy.typing import NDArray

from recommender.core import config
from recommender.core.catalog import Catalog
from recommender.core.dataset import OOM, SUCCEEDED, Dataset
from recommender.core.domain import Outcome, Sample
from recommender.core.estimation import Evidence, default_estimator
from recommender.core.online import ActionModels
from recommender.core.policy import by_expected_cost, young_calibration
from recommender.core.population import Population
from recommender.core.ports import MemoryPredictor
from recommender.core.predictive import oom_wait_mib


@dataclass(frozen=True)
class Scores:
    rows: int
    oom_rate: float
    reserved_gbh: float
    coverage: float
    """Share of successful executions whose peak the prediction covered."""
    cost_gbh: float = 0.0
    """Reserved GB-h plus what the OOMs cost (`row_costs`): the one number promotion compares."""
    costs: tuple[float, ...] = ()
    """Each row's cost, for the paired comparison."""

    def as_metrics(self, prefix: str) -> dict[str, float]:
        return {f"{prefix}_rows": float(self.rows), f"{prefix}_oom_rate": self.oom_rate,
                f"{prefix}_reserved_gbh": self.reserved_gbh, f"{prefix}_coverage": self.coverage,
                f"{prefix}_cost_gbh": self.cost_gbh}

    def better_than(self, other: Scores) -> tuple[bool, str]:
        """Lower cost on the same rows, and surely so: in at least PROMOTE_CONFIDENCE of
        bootstrap resamples of the rows (in blocks of consecutive executions, since
        neighbouring executions are alike) the candidate costs less. Deterministic: the same
        hold-out always gives the same answer."""
        what = (f"cost {self.cost_gbh:,.1f} vs {other.cost_gbh:,.1f} GB-h (OOM rate "
                f"{self.oom_rate:.2%} vs {other.oom_rate:.2%}, reserved "
                f"{self.reserved_gbh:,.1f} vs {other.reserved_gbh:,.1f} GB-h)")
        if not self.costs or len(self.costs) != len(other.costs):
            return False, f"not comparable: {what}"
        diff = np.asarray(self.costs) - np.asarray(other.costs)
        share = _bootstrap_share_below_zero(diff)
        if diff.sum() < 0 and share >= config.PROMOTE_CONFIDENCE:
            return True, (f"costs {1 - self.cost_gbh / other.cost_gbh:.1%} less "
                          f"({share:.0%} of resamples): {what}")
        return False, f"not surely better ({share:.0%} of resamples cost less): {what}"


def _bootstrap_share_below_zero(diff: NDArray[np.float64]) -> float:
    n = diff.shape[0]
    if n == 0:
        return 0.0
    block = max(1, min(config.PROMOTE_BLOCK, n))
    sums = np.add.reduceat(diff, np.arange(0, n, block))
    rng = np.random.default_rng(config.PROMOTE_SEED)
    picks = rng.integers(0, sums.shape[0], size=(config.PROMOTE_RESAMPLES, sums.shape[0]))
    return float(np.mean(sums[picks].sum(axis=1) < 0))


def row_costs(data: Dataset, predicted_mib: NDArray[np.float64], catalog: Catalog,
              oom_wait_gpus: float = config.OOM_WAIT_GPUS
              ) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.bool_]]:
    """Per row: the cost, the GB-h reserved on the first attempt, and whether it ran out.

    The first attempt holds the smallest profile of the row's GPU model that holds the
    prediction; one too small also costs the user's wait (`oom_wait_gpus` whole GPUs, the
    server's price) and the rerun on the slice that fits the peak, as the policy's expected
    cost counts it."""
    rows = len(data)
    sizes = {
        i: [*sorted(p.memory_mib for p in m.profiles if p.is_base), m.memory_mib]
        for i, name in enumerate(data.gpu_models) if (m := catalog.resolve(name)) is not None
    }
    reserved = np.zeros(rows)
    held = np.array(predicted_mib, dtype=np.float64)
    """What the first attempt holds: the prediction rounded up to a slice where the GPU model
    is known (a prediction a little under the peak that rounds up past it does not run out)."""
    oom_cost = np.zeros(rows)
    """What running out would cost on top: the user's wait and the rerun."""
    for i in range(rows):
        options = sizes.get(int(data.gpu_model[i]))
        mib = float(predicted_mib[i])
        need = max(float(data.peak[i]), float(data.slice_mib[i]) + 1 if data.outcome[i] == OOM
                   else 0.0)
        rerun: float
        if options:
            mib = float(next((s for s in options if s >= mib), options[-1]))
            rerun = float(next((s for s in options if s >= need), options[-1]))
            gpu = float(options[-1])
        else:
            if not math.isfinite(mib):
                mib = float(data.slice_mib[i])  # the largest slice of a model we do not know
            rerun = max(need, mib)
            gpu = rerun  # a model we do not know: at least what the rerun holds
        held[i] = mib
        hours = max(float(data.duration_s[i]), 0.0) / 3600 or 1.0
        reserved[i] = mib / 1024 * hours
        oom_cost[i] = (oom_wait_mib(gpu, oom_wait_gpus) + rerun) / 1024 * hours
    too_small = ((data.outcome == SUCCEEDED) & (held < data.peak)) | (
        (data.outcome == OOM) & (held <= data.slice_mib))
    cost = reserved + oom_cost * too_small
    return cost, reserved, too_small


def score(data: Dataset, predicted_mib: NDArray[np.float64], catalog: Catalog,
          oom_wait_gpus: float = config.OOM_WAIT_GPUS) -> Scores:
    rows = len(data)
    if rows == 0:
        return Scores(0, 0.0, 0.0, 1.0)
    known = (data.outcome == SUCCEEDED) | (data.outcome == OOM)
    ok = data.outcome == SUCCEEDED
    cost, reserved, too_small = row_costs(data, predicted_mib, catalog, oom_wait_gpus)
    n_known = max(int(known.sum()), 1)
    return Scores(
        rows=rows,
        oom_rate=float(too_small[known].sum()) / n_known,
        reserved_gbh=float(reserved.sum()),
        coverage=float((predicted_mib[ok] >= data.peak[ok]).mean()) if ok.any() else 1.0,
        cost_gbh=float(cost.sum()),
        costs=tuple(float(c) for c in cost),
    )


def server_predictions(data: Dataset, history: Dataset, catalog: Catalog,
                       predictor: MemoryPredictor | None = None,
                       models: ActionModels | None = None,
                       population: Population | None = None,
                       reread: Sequence[tuple[int, Population | None]] = (),
                       oom_wait_gpus: float = config.OOM_WAIT_GPUS
                       ) -> NDArray[np.float64]:
    """What the server reserves for each row, with `predictor` as its learned model (None:
    the history rules alone): its own estimator chain (`estimation.default_estimator`) over
    the action's executions before that row, the earlier rows of `data` included, as the
    server would have recorded them, and its own slice choice (expected cost, a young action's
    chances moved by the population's record: `policy.young_calibration`) on the row's GPU
    model. `population`: what the server knew of other actions, for a new action's prior and
    a young one's fit and record (the retraining job reads it as of its hold-out's start).
    A row the chain has nothing for (an action never seen, with no population) gets the
    largest slice, as the policy gives it (inf: `score` rounds it up to the whole card). Pass
    one `models` to several calls over the same rows and population: the per-action fits are
    shared. `reread`: (row, population) as the server would have read it again during the
    rows, each from that row on (the server reads it every minute; `population` is the one
    before the first row). `oom_wait_gpus`: the server's price of an OOM, which its slice
    choice weighs."""
    again = dict(reread)
    estimator = default_estimator(lambda: predictor, models or ActionModels(),
                                  lambda: population)  # read at each call: the re-reads below
    window = config.HISTORY_WINDOW
    seen: dict[str, deque[Sample]] = {}
    gpu_models = {i: m for i, name in enumerate(data.gpu_models) if (m := catalog.resolve(name))}
    profiles = {i: [p for p in m.profiles if p.is_base] for i, m in gpu_models.items()}

    def features(rows: Dataset, i: int) -> dict[str, float]:
        return {f: float(v) for f, v in zip(rows.features, rows.x[i], strict=True)
                if not math.isnan(v)}

    def remember(rows: Dataset, i: int) -> None:
        outcome = _OUTCOMES[int(rows.outcome[i])]
        seen.setdefault(rows.actions[int(rows.action[i])], deque(maxlen=window)).append(Sample(
            at=datetime.fromtimestamp(float(rows.ended[i]), UTC), peak_mib=float(rows.peak[i]),
            slice_mib=float(rows.slice_mib[i]), outcome=outcome,
            execution_id=f"{id(rows)}:{i}", features=features(rows, i)))

    for i in range(len(history)):
        remember(history, i)
    out = np.full(len(data), math.inf)
    for i in range(len(data)):
        if i in again:
            population = again[i]
        # The decision is made when the execution starts; its own outcome is not yet known.
        now = datetime.fromtimestamp(float(data.ended[i]) - float(data.duration_s[i]), UTC)
        action = data.actions[int(data.action[i])]
        samples = list(seen.get(action, ()))[::-1]
        estimate = estimator.estimate(Evidence(now=now, samples=samples, action_id=action,
                                               declared_mib=float(data.declared_mib[i]),
                                               features=features(data, i)))
        if estimate is not None:
            out[i] = estimate.mib
            model = int(data.gpu_model[i])
            options = profiles.get(model)
            if estimate.predictive is not None and options:
                chosen, _ = by_expected_cost(
                    options, estimate.predictive, estimate.hard_floor_mib,
                    gpu_models[model].memory_mib,
                    young_calibration(estimate, samples, population), oom_wait_gpus)
                if chosen is not None:
                    out[i] = chosen
        remember(data, i)
    return out


_OUTCOMES = list(Outcome)
"""Dataset outcome code -> Outcome (codes are the enum's order, `core.dataset`)."""
