"""A learned memory model as the server uses it: plain parameters in, a calibrated quantile (and
for the pooled model a calibrated median) out.

Per-worker peak memory is modelled in log space (memory grows multiplicatively with batch and
input sizes). An action with enough history has its own estimator over the request's features;
the others share a pooled one that also sees the action's typical peak (the median of its
recent peaks) as a feature. Each estimator's output is shifted by a conformal offset fitted on
held-out recent executions, so the stated quantile's coverage holds on data it has not seen.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from recommender.core.ports import LearnedPrediction
from recommender.learning.trees import Linear, Trees, load_estimator

KIND = "memory"


_MISSING = object()


@dataclass(frozen=True)
class _Shift:
    """A scope's conformal shift in log MiB, and its median estimator's shift (None in versions
    stored before medians were: those serve a quantile alone, as they did)."""

    offset: float
    median: float | None = None

    @classmethod
    def of(cls, offset: Any, median: Any) -> _Shift:
        return cls(float(offset), None if median is None else float(median))


@dataclass(frozen=True)
class _Scope:
    estimator: Trees | Linear
    median_estimator: Trees | Linear | None
    shift: _Shift

    @classmethod
    def of(cls, p: Mapping[str, Any]) -> _Scope:
        mid = p.get("median_estimator")
        return cls(load_estimator(p["estimator"]),
                   None if mid is None else load_estimator(mid),
                   _Shift.of(p["offset"], p.get("median") if mid is not None else None))

    def predict(self, row: list[float], scope: str, shift: _Shift | None = None
                ) -> LearnedPrediction:
        shift = shift or self.shift
        quantile = self.estimator.predict_one(row) + shift.offset
        median = 0.0
        if self.median_estimator is not None and shift.median is not None:
            median = math.exp(min(self.median_estimator.predict_one(row) + shift.median,
                                  quantile))
        return LearnedPrediction(math.exp(quantile), scope, median)


class MemoryModel:
    """Loads and validates parameters once; `predict` is cheap and thread-safe. Serves the
    core's `MemoryPredictor` port."""

    def __init__(self, version: str, params: Mapping[str, Any]) -> None:
        if params.get("kind") != KIND:
            raise ValueError(f"not a memory model: kind {params.get('kind')!r}")
        self.version = version
        self.quantile = float(params["quantile"])
        self.features: list[str] = [str(f) for f in params["features"]]
        self._actions: dict[str, _Scope] = {
            str(a): _Scope.of(p) for a, p in params.get("actions", {}).items()}
        pooled = params.get("pooled")
        self._pooled: _Scope | None = _Scope.of(pooled) if pooled else None
        # Versions stored before action offsets existed have none: the pooled offset serves all.
        medians = (pooled or {}).get("action_medians", {})
        self._pooled_action_offsets: dict[str, _Shift] = {
            str(a): _Shift.of(v, medians.get(a))
            for a, v in (pooled or {}).get("action_offsets", {}).items()}
        # The shift for an action the server has no peak of: null when too few such runs were
        # there to calibrate it (the model then does not answer for one); versions stored before
        # it existed have none, and use the pooled shift as they did.
        found = (pooled or {}).get("new_offset", _MISSING)
        self._answers_new = found is not None
        self._new: _Shift | None = (
            None if found is _MISSING or found is None
            else _Shift.of(found, (pooled or {}).get("new_median")))

    @property
    def actions(self) -> int:
        return len(self._actions)

    def predict(self, action_id: str, features: Mapping[str, float],
                action_level_mib: float | None) -> LearnedPrediction | None:
        """The calibrated quantile of per-worker peak MiB (and the calibrated median, which the
        server draws the need's distribution through), or None when the request carries none
        of the model's features (a model without its inputs is just a prior), or when the action
        is new to the server and the version had too few new actions to calibrate on."""
        row = [float(features[f]) if f in features else math.nan for f in self.features]
        if all(math.isnan(v) for v in row):
            return None
        if action_id in self._actions:
            return self._actions[action_id].predict(row, "action")
        if self._pooled is None:
            return None
        shift = self._pooled_action_offsets.get(action_id)
        if action_level_mib and action_level_mib > 0:
            level = math.log(action_level_mib)
        elif not self._answers_new:
            return None  # not calibrated on new actions: the population's prior answers
        else:
            level = math.nan
            shift = self._new or shift
        return self._pooled.predict([*row, level], "pooled", shift)
