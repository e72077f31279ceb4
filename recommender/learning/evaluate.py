"""Scoring a memory model, or the server's history rules, on held-out executions.

OOM rate: executions whose recommended slice would have been too small (for an execution that
did OOM, a prediction not above the slice it died in). Reserved memory: the smallest profile of
the execution's GPU model that holds the prediction, for the execution's duration.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from datetime import UTC, datetime

import numpy as np
from numpy.typing import NDArray

from recommender.core import config
from recommender.core.catalog import Catalog
from recommender.core.dataset import OOM, SUCCEEDED, Dataset
from recommender.core.domain import Outcome, Sample
from recommender.core.estimation import Evidence, default_estimator
from recommender.learning.fit import action_levels
from recommender.learning.memory_model import MemoryModel


@dataclass(frozen=True)
class Scores:
    rows: int
    oom_rate: float
    reserved_gbh: float
    coverage: float
    """Share of successful executions whose peak the prediction covered."""

    def as_metrics(self, prefix: str) -> dict[str, float]:
        return {f"{prefix}_rows": float(self.rows), f"{prefix}_oom_rate": self.oom_rate,
                f"{prefix}_reserved_gbh": self.reserved_gbh, f"{prefix}_coverage": self.coverage}

    def better_than(self, other: Scores) -> tuple[bool, str]:
        oom_ok = self.oom_rate <= other.oom_rate + config.PROMOTE_OOM_TOLERANCE
        if oom_ok and self.reserved_gbh < other.reserved_gbh:
            return True, (f"reserves {1 - self.reserved_gbh / other.reserved_gbh:.1%} less at an "
                          f"OOM rate of {self.oom_rate:.2%} (vs {other.oom_rate:.2%})")
        if (self.oom_rate < other.oom_rate - config.PROMOTE_OOM_TOLERANCE
                and self.reserved_gbh <= other.reserved_gbh * (
                    1 + config.PROMOTE_RESERVED_TOLERANCE)):
            return True, (f"OOM rate {self.oom_rate:.2%} (vs {other.oom_rate:.2%}) at "
                          f"{self.reserved_gbh / other.reserved_gbh:.2f}x the reserved memory")
        return False, (f"not better: OOM rate {self.oom_rate:.2%} vs {other.oom_rate:.2%}, "
                       f"reserved {self.reserved_gbh:,.1f} vs {other.reserved_gbh:,.1f} GB-h")


def score(data: Dataset, predicted_mib: NDArray[np.float64], catalog: Catalog) -> Scores:
    rows = len(data)
    if rows == 0:
        return Scores(0, 0.0, 0.0, 1.0)
    known = (data.outcome == SUCCEEDED) | (data.outcome == OOM)
    ok = data.outcome == SUCCEEDED
    too_small = (ok & (predicted_mib < data.peak)) | (
        (data.outcome == OOM) & (predicted_mib <= data.slice_mib))
    reserved = 0.0
    sizes = {
        i: [*sorted(p.memory_mib for p in m.profiles if p.is_base), m.memory_mib]
        for i, name in enumerate(data.gpu_models) if (m := catalog.resolve(name)) is not None
    }
    for i in range(rows):
        options = sizes.get(int(data.gpu_model[i]))
        mib = float(predicted_mib[i])
        if options:
            mib = next((s for s in options if s >= mib), options[-1])
        elif not math.isfinite(mib):
            mib = float(data.slice_mib[i])  # the largest slice of a model we do not know
        hours = max(float(data.duration_s[i]), 0.0) / 3600 or 1.0
        reserved += mib / 1024 * hours
    n_known = max(int(known.sum()), 1)
    return Scores(
        rows=rows,
        oom_rate=float(too_small[known].sum()) / n_known,
        reserved_gbh=reserved,
        coverage=float((predicted_mib[ok] >= data.peak[ok]).mean()) if ok.any() else 1.0,
    )


def model_predictions(model: MemoryModel, data: Dataset, history: Dataset,
                      fallback: NDArray[np.float64]) -> NDArray[np.float64]:
    """The model's prediction per row; rows it cannot serve get what the service would use."""
    levels = _levels(history)
    out = fallback.copy()
    for i in range(len(data)):
        action = data.actions[int(data.action[i])]
        features = {f: float(v) for f, v in zip(data.features, data.x[i], strict=True)
                    if not math.isnan(v)}
        pred = model.predict(action, features, levels.get(action))
        if pred is not None:
            out[i] = pred.mib
    return out


def rule_predictions(data: Dataset, history: Dataset) -> NDArray[np.float64]:
    """What the server answers without a learned model, row by row: its own estimator chain
    (`estimation.default_estimator()`: decayed quantile with its margin, the sparse-history
    rule, the OOM floor, the minimum) over the action's executions before that row, the earlier
    rows of `data` included, as the server would have recorded them. A row the chain has
    nothing for (an action never seen) gets the largest slice, as the policy gives it (inf:
    `score` rounds it up to the whole card)."""
    estimator = default_estimator()
    window = config.HISTORY_WINDOW
    seen: dict[str, deque[Sample]] = {}

    def remember(rows: Dataset, i: int) -> None:
        outcome = _OUTCOMES[int(rows.outcome[i])]
        seen.setdefault(rows.actions[int(rows.action[i])], deque(maxlen=window)).append(Sample(
            at=datetime.fromtimestamp(float(rows.ended[i]), UTC), peak_mib=float(rows.peak[i]),
            slice_mib=float(rows.slice_mib[i]), outcome=outcome))

    for i in range(len(history)):
        remember(history, i)
    out = np.full(len(data), math.inf)
    for i in range(len(data)):
        # The decision is made when the execution starts; the row's own end time is the
        # nearest moment the data has, and its own outcome is not yet among the samples.
        now = datetime.fromtimestamp(float(data.ended[i]) - float(data.duration_s[i]), UTC)
        samples = seen.get(data.actions[int(data.action[i])], ())
        estimate = estimator.estimate(Evidence(now=now, samples=list(samples)[::-1]))
        if estimate is not None:
            out[i] = estimate.mib
        remember(data, i)
    return out


_OUTCOMES = list(Outcome)
"""Dataset outcome code -> Outcome (codes are the enum's order, `core.dataset`)."""


def _levels(history: Dataset) -> dict[str, float]:
    levels = action_levels(history)
    return {history.actions[a]: math.exp(v) for a, v in enumerate(levels) if not math.isnan(v)}
