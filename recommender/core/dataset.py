"""Executions as numpy columns: what the retraining job learns from and is scored on.

A million executions must not become a million Python objects at once, so the store reads them
a chunk at a time into these columns (`recommender.store.dataset.read_executions`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from recommender.core.domain import Outcome

OUTCOME_CODES = {o.value: code for code, o in enumerate(Outcome)}
"""Outcome -> the int8 code in `Dataset.outcome` (the order of `Outcome`)."""
SUCCEEDED, OOM = OUTCOME_CODES[Outcome.SUCCEEDED.value], OUTCOME_CODES[Outcome.OOM.value]
FAILED = OUTCOME_CODES[Outcome.FAILED.value]


@dataclass
class Dataset:
    """Columns of executions, sorted by end time (oldest first)."""

    actions: list[str]
    """Action ids; `action` holds indices into this list."""
    features: list[str]
    action: NDArray[np.int32]
    x: NDArray[np.float64]
    """Feature matrix, NaN where an execution did not carry the feature."""
    peak: NDArray[np.float64]
    slice_mib: NDArray[np.float64]
    outcome: NDArray[np.int8]
    ended: NDArray[np.float64]
    """Seconds since the epoch."""
    gpu_model: NDArray[np.int16]
    gpu_models: list[str]
    duration_s: NDArray[np.float64]
    declared_mib: NDArray[np.float64]
    """The memory the execution's request declared; 0 where it declared none or the execution
    came with no recommendation. The server starts a new action from it (the population's
    declared ratio), so the retraining job's replay of the server must see it too."""

    def __len__(self) -> int:
        return int(self.peak.shape[0])

    def take(self, idx: NDArray[np.int64]) -> Dataset:
        return Dataset(self.actions, self.features, self.action[idx], self.x[idx], self.peak[idx],
                       self.slice_mib[idx], self.outcome[idx], self.ended[idx],
                       self.gpu_model[idx], self.gpu_models, self.duration_s[idx],
                       self.declared_mib[idx])

    def concat(self, later: Dataset) -> Dataset:
        """This dataset followed by `later` (read from the same database in the same order)."""
        return Dataset(
            self.actions, self.features, np.concatenate([self.action, later.action]),
            np.concatenate([self.x, later.x]), np.concatenate([self.peak, later.peak]),
            np.concatenate([self.slice_mib, later.slice_mib]),
            np.concatenate([self.outcome, later.outcome]),
            np.concatenate([self.ended, later.ended]),
            np.concatenate([self.gpu_model, later.gpu_model]), self.gpu_models,
            np.concatenate([self.duration_s, later.duration_s]),
            np.concatenate([self.declared_mib, later.declared_mib]))
