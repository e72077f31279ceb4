"""Scoring a memory model, or the history rule, on held-out executions.

OOM rate: executions whose recommended slice would have been too small (for an execution that
did OOM, a prediction not above the slice it died in). Reserved memory: the smallest profile of
the execution's GPU model that holds the prediction, for the execution's duration.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from recommender import config
from recommender.catalog import Catalog
from recommender.learning.dataset import OOM, SUCCEEDED, Dataset
from recommender.learning.fit import action_levels
from recommender.learning.model import MemoryModel


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


def history_predictions(data: Dataset, history: Dataset) -> NDArray[np.float64]:
    """The service's rule without a model: P95 of the action's peaks (OOMs bumped) + 10 %,
    falling back to the largest peak seen anywhere when an action has no history."""
    from recommender.estimation import oom_bumped

    values: dict[str, list[float]] = {}
    for i in range(len(history)):
        o = int(history.outcome[i])
        if o not in (SUCCEEDED, OOM):
            continue
        v = float(history.peak[i]) if o == SUCCEEDED else oom_bumped(
            float(history.slice_mib[i]), float(history.peak[i]))
        values.setdefault(history.actions[int(history.action[i])], []).append(v)
    table = {a: float(np.quantile(v, config.MEMORY_QUANTILE, method="inverted_cdf")) * (
        1 + config.HISTORY_MARGIN) for a, v in values.items()}
    default = max(table.values(), default=0.0) or float(np.max(data.peak, initial=0.0))
    return np.array([table.get(data.actions[int(a)], default) for a in data.action])


def _levels(history: Dataset) -> dict[str, float]:
    levels = action_levels(history)
    return {history.actions[a]: math.exp(v) for a, v in enumerate(levels) if not math.isnan(v)}
