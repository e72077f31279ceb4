"""A learned memory model as the server uses it: plain parameters in, a calibrated quantile out.

Per-worker peak memory is modelled in log space (memory grows multiplicatively with batch and
input sizes). An action with enough history has its own estimator over the request's features;
the others share a pooled one that also sees the action's typical peak (the median of its
recent peaks) as a feature. Each estimator's output is shifted by a conformal offset fitted on
held-out recent executions, so the stated quantile's coverage holds on data it has not seen.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from recommender.core.ports import LearnedPrediction
from recommender.learning.trees import Linear, Trees, load_estimator

KIND = "memory"


_MISSING = object()
_NO_NEW_OFFSET = object()


class MemoryModel:
    """Loads and validates parameters once; `predict` is cheap and thread-safe. Serves the
    core's `MemoryPredictor` port."""

    def __init__(self, version: str, params: Mapping[str, Any]) -> None:
        if params.get("kind") != KIND:
            raise ValueError(f"not a memory model: kind {params.get('kind')!r}")
        self.version = version
        self.quantile = float(params["quantile"])
        self.features: list[str] = [str(f) for f in params["features"]]
        self._actions: dict[str, tuple[Trees | Linear, float]] = {
            str(a): (load_estimator(p["estimator"]), float(p["offset"]))
            for a, p in params.get("actions", {}).items()
        }
        pooled = params.get("pooled")
        self._pooled: tuple[Trees | Linear, float] | None = (
            (load_estimator(pooled["estimator"]), float(pooled["offset"])) if pooled else None
        )
        # Versions stored before action offsets existed have none: the pooled offset serves all.
        self._pooled_action_offsets: dict[str, float] = {
            str(a): float(v) for a, v in (pooled or {}).get("action_offsets", {}).items()}
        # The offset for an action the server has no peak of: null when too few such runs were
        # there to calibrate it (the model then does not answer for one); versions stored before
        # it existed have none, and use the pooled offset as they did.
        found = (pooled or {}).get("new_offset", _MISSING)
        self._new_offset: float | object | None = (
            None if found is _MISSING else _NO_NEW_OFFSET if found is None else float(found))

    @property
    def actions(self) -> int:
        return len(self._actions)

    def predict(self, action_id: str, features: Mapping[str, float],
                action_level_mib: float | None) -> LearnedPrediction | None:
        """The calibrated quantile of per-worker peak MiB, or None when the request carries
        none of the model's features (a model without its inputs is just a prior)."""
        row = [float(features[f]) if f in features else math.nan for f in self.features]
        if all(math.isnan(v) for v in row):
            return None
        if action_id in self._actions:
            estimator, offset = self._actions[action_id]
            return LearnedPrediction(math.exp(estimator.predict_one(row) + offset), "action")
        if self._pooled is None:
            return None
        estimator, offset = self._pooled
        offset = self._pooled_action_offsets.get(action_id, offset)
        if action_level_mib and action_level_mib > 0:
            level = math.log(action_level_mib)
        elif self._new_offset is _NO_NEW_OFFSET:
            return None  # not calibrated on new actions: the population's prior answers
        else:
            level = math.nan
            if isinstance(self._new_offset, float):
                offset = self._new_offset
        return LearnedPrediction(math.exp(estimator.predict_one([*row, level]) + offset), "pooled")
