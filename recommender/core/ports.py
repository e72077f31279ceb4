"""What the use cases need from the world, as Protocols: a store, a source of learned
predictions. The adapters implement them (`recommender.store.SqlStore`,
`recommender.learning.serving.ModelHolder`), the tests also with an in-memory fake; the core
never imports an adapter.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from recommender.core.calibration import CalibrationSample
from recommender.core.demand import Run
from recommender.core.domain import (
    Execution,
    HistoryEntry,
    HistoryFilter,
    ModelVersion,
    Sample,
    StoredRecommendation,
    ThroughputRow,
)
from recommender.core.population import PopulationSample


class RecommendationStore(Protocol):
    """Where the runner's calls are kept: recommendations, rungs after an OOM, executions.

    Every method raises `StoreUnavailable` when the database cannot answer."""

    def save_recommendation(self, rec: StoredRecommendation) -> None: ...
    def get_recommendation(self, rec_id: str) -> StoredRecommendation | None: ...
    def save_rung_after_oom(self, parent_id: str, observed_peak_mib: float, at: datetime,
                            rung: StoredRecommendation) -> StoredRecommendation:
        """Stores `rung` as the one child of `parent_id` and marks the parent OOM; when a
        child exists already (a retried call), returns that one instead."""
        ...
    def mark_oom(self, rec_id: str, observed_peak_mib: float, at: datetime,
                 action_id: str = "") -> None: ...
    def child_of(self, parent_id: str) -> StoredRecommendation | None: ...
    def record_execution(self, e: Execution, recorded_at: datetime) -> bool:
        """True when stored now, False when `e.execution_id` was there already."""
        ...
    def action_samples(self, action_id: str, limit: int) -> list[Sample]:
        """The action's `limit` most recent executions, newest first."""
        ...
    def runs_in_window(self, gpu_model: str, since: datetime, until: datetime,
                       pool_id: str = "") -> list[Run]:
        """Executions on `gpu_model` (and `pool_id`) that ran in [since, until), as demand."""
        ...
    def throughput_summary(self, since: datetime) -> list[ThroughputRow]:
        """Mean per-worker throughput per (action, GPU model, profile, count) since `since`:
        what the throughput curves of other actions are learned from."""
        ...
    def population_samples(self, limit: int, before: datetime | None = None
                           ) -> list[PopulationSample]:
        """The `limit` most recent executions across actions, for the population prior (with
        `before`, of those that had ended by then)."""
        ...

    def calibration_samples(self, limit: int, before: datetime | None = None
                            ) -> list[CalibrationSample]:
        """Of the `limit` most recent first attempts that stated a model chance (a young
        action's, `Decision.model_oom_chance`), those whose outcome is known: ran out (marked by
        NextAfterOom, or recorded as an OOM) or recorded as succeeded on it (with `before`, the
        record as it stood then)."""
        ...


class HistoryStore(Protocol):
    """What operators read: recommendations joined with their outcomes, model versions."""

    def list_history(self, f: HistoryFilter, page_size: int, page_token: str = ""
                     ) -> tuple[list[HistoryEntry], str]:
        """A page, newest first, and the token of the next one ("" at the end). Raises
        ValueError for a page token this store did not issue."""
        ...
    def list_model_versions(self, kind: str = "") -> list[ModelVersion]: ...


class Store(RecommendationStore, HistoryStore, Protocol):
    """Everything the use cases ask of a store."""


@dataclass(frozen=True)
class LearnedPrediction:
    mib: float
    scope: str
    """"action" (a model of the action alone) or "pooled" (one shared by many actions)."""
    median_mib: float = 0.0
    """The calibrated median, drawn with `mib` into the need's distribution; 0 where there is
    none (an action's own estimator, a version stored before medians): a quantile alone."""


class MemoryPredictor(Protocol):
    """A learned model of per-worker peak memory, calibrated to `quantile`."""

    @property
    def version(self) -> str: ...
    @property
    def quantile(self) -> float: ...
    def predict(self, action_id: str, features: Mapping[str, float],
                action_level_mib: float | None) -> LearnedPrediction | None:
        """The calibrated quantile in MiB, or None when the model cannot serve the request
        (none of its features given, no estimator for the action). `action_level_mib` is the
        action's typical peak (`estimation.typical_peak_mib`) when it has one."""
        ...
