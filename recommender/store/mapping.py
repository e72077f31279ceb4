"""Rows to core values and back: the one place that knows how a value is laid out in a row."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from recommender.core.catalog import MigProfile
from recommender.core.domain import (
    Decision,
    Execution,
    ModelVersion,
    Outcome,
    Rung,
    StoredRecommendation,
)
from recommender.core.identity import ByIdentity
from recommender.store.models import ExecutionRow, ModelVersionRow, RecommendationRow


def utc(value: datetime) -> datetime:
    """SQLite returns naive datetimes; everything we store is UTC."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _utc_or_none(value: datetime | None) -> datetime | None:
    return utc(value) if value is not None else None


def columns(row: RecommendationRow | ExecutionRow) -> dict[str, Any]:
    """An ORM row as the mapping the functions below read (a Core row's `_mapping` is one too)."""
    return {c.key: getattr(row, c.key) for c in row.__table__.columns}


def profile_to_json(p: MigProfile) -> dict[str, Any]:
    return {
        "name": p.name,
        "compute_slices": p.compute_slices,
        "memory_slices": p.memory_slices,
        "memory_mib": p.memory_mib,
        "whole_gpu": p.whole_gpu,
    }


def profile_from_json(d: Mapping[str, Any]) -> MigProfile:
    """A stored profile: what a recommendation said, not the catalog's full entry."""
    return MigProfile(
        name=d["name"],
        compute_slices=int(d["compute_slices"]),
        memory_slices=int(d["memory_slices"]),
        memory_mib=int(d["memory_mib"]),
        max_count=0,
        placement=None,
        whole_gpu=bool(d.get("whole_gpu", False)),
    )


def rung_to_json(r: Rung) -> dict[str, Any]:
    return {
        "pool_id": r.pool_id,
        "gpu_model": r.gpu_model,
        "profile": profile_to_json(r.profile),
        "count": r.count,
        "resources": dict(r.resources),
        "node_id": r.node_id,
        "card_compute_slices": r.card_compute_slices,
        "node_gpus": r.node_gpus,
    }


def rung_from_json(d: Mapping[str, Any]) -> Rung:
    return Rung(
        pool_id=d["pool_id"],
        gpu_model=d["gpu_model"],
        profile=profile_from_json(d["profile"]),
        count=int(d["count"]),
        resources={str(k): str(v) for k, v in d["resources"].items()},
        node_id=d.get("node_id", ""),
        card_compute_slices=int(d.get("card_compute_slices", 0)),
        node_gpus=int(d.get("node_gpus", 0)),
    )


DECISIONS_KEPT = 1024
"""Decisions whose columns are kept for their next rows (`_decision_values`): more than the
use cases' memo keeps, so every decision it answers again is found."""


def _decision_values(d: Decision) -> dict[str, Any]:
    """The columns a decision gives its row, built once per decision object. The use cases'
    memo answers a request seen before with the same Decision, and each answer is a row: its
    ladder's dicts were a sixth of such a Recommend's time in process. The values are shared
    by those rows and never changed (core/identity.ByIdentity)."""
    return _decided.get(d, _columns_of)


def _columns_of(d: Decision) -> dict[str, Any]:
    return dict(
        attempt=d.attempt,
        pool_id=d.rung.pool_id,
        gpu_model=d.rung.gpu_model,
        profile=d.rung.profile.name,
        profile_memory_mib=d.rung.profile.memory_mib,
        compute_slices=d.rung.profile.compute_slices,
        memory_slices=d.rung.profile.memory_slices,
        whole_gpu=d.rung.profile.whole_gpu,
        count=d.rung.count,
        node_id=d.rung.node_id,
        resources=dict(d.rung.resources),
        predicted_peak_mib=d.predicted_peak_mib,
        quantile=d.quantile,
        source=d.source,
        model_version=d.model_version,
        reason=d.reason,
        # A tuple: its JSON is made once for all the rows (store/database.to_json).
        ladder=tuple(rung_to_json(r) for r in d.ladder),
        card_compute_slices=d.rung.card_compute_slices,
        node_gpus=d.rung.node_gpus,
        predicted_throughput=d.predicted_throughput,
        oom_chance=d.oom_chance,
        model_oom_chance=d.model_oom_chance,
    )


_decided: ByIdentity[Decision, dict[str, Any]] = ByIdentity(DECISIONS_KEPT)


def recommendation_values(rec: StoredRecommendation) -> dict[str, Any]:
    values = dict(_decision_values(rec.decision))
    values.update(
        id=rec.id,
        created_at=rec.created_at,
        action_id=rec.action_id,
        execution_id=rec.execution_id,
        parent_id=rec.parent_id,
        declared_memory_mib=rec.declared_memory_mib,
    )
    return values


def recommendation_of(m: Mapping[Any, Any]) -> StoredRecommendation:
    """From all of a recommendation's columns, or from a summary's few (reports read no
    reason, resources or ladder: those come back empty)."""
    rung = Rung(
        pool_id=m["pool_id"],
        gpu_model=m["gpu_model"],
        profile=MigProfile(
            name=m["profile"], compute_slices=m["compute_slices"],
            memory_slices=m["memory_slices"], memory_mib=m["profile_memory_mib"],
            max_count=0, placement=None, whole_gpu=bool(m["whole_gpu"])),
        count=int(m["count"]),
        resources={str(k): str(v) for k, v in (m.get("resources") or {}).items()},
        node_id=m["node_id"],
        card_compute_slices=int(m.get("card_compute_slices") or 0),
        node_gpus=int(m.get("node_gpus") or 0),
    )
    decision = Decision(
        rung=rung,
        predicted_peak_mib=m["predicted_peak_mib"],
        quantile=m["quantile"],
        source=m["source"],
        reason=m.get("reason") or "",
        ladder=tuple(rung_from_json(d) for d in m.get("ladder") or ()),
        model_version=m["model_version"],
        attempt=m["attempt"],
        predicted_throughput=float(m.get("predicted_throughput") or 0.0),
        oom_chance=float(m.get("oom_chance") or 0.0),
        model_oom_chance=(None if m.get("model_oom_chance") is None
                          else float(m["model_oom_chance"])),
    )
    return StoredRecommendation(
        id=m["id"],
        created_at=utc(m["created_at"]),
        action_id=m["action_id"],
        execution_id=m["execution_id"],
        decision=decision,
        parent_id=m["parent_id"],
        oom_at=_utc_or_none(m["oom_at"]),
        oom_observed_peak_mib=m["oom_observed_peak_mib"],
        declared_memory_mib=int(m.get("declared_memory_mib") or 0),
    )


def execution_values(e: Execution, recorded_at: datetime) -> dict[str, Any]:
    return {
        "execution_id": e.execution_id,
        "action_id": e.action_id,
        "recommendation_id": e.recommendation_id,
        "gpu_model": e.gpu_model,
        "profile": e.profile,
        "slice_memory_mib": e.slice_memory_mib,
        "count": e.count,
        "peak_memory_mib": e.peak_memory_mib,
        "sm_utilization": e.sm_utilization,
        "duration_s": e.duration_s,
        "throughput": e.throughput,
        "outcome": e.outcome.value,
        "started_at": e.started_at,
        "ended_at": e.ended_at,
        "recorded_at": recorded_at,
        "features": dict(e.features),
    }


def execution_of(m: Mapping[Any, Any]) -> Execution:
    """From an execution's columns (reports read no features: they come back empty)."""
    return Execution(
        execution_id=m["execution_id"],
        action_id=m["action_id"],
        recommendation_id=m["recommendation_id"],
        gpu_model=m["gpu_model"],
        profile=m["profile"],
        slice_memory_mib=m["slice_memory_mib"],
        count=int(m["count"]),
        peak_memory_mib=m["peak_memory_mib"],
        sm_utilization=m["sm_utilization"],
        duration_s=m["duration_s"],
        throughput=m["throughput"],
        outcome=Outcome(m["outcome"]),
        ended_at=utc(m["ended_at"]),
        started_at=_utc_or_none(m["started_at"]),
        features=dict(m.get("features") or {}),
    )


def version_of(row: ModelVersionRow, *, with_params: bool) -> ModelVersion:
    return ModelVersion(
        version=row.version,
        created_at=utc(row.created_at),
        kind=row.kind,
        promoted=row.promoted,
        serving=row.serving,
        metrics={str(k): float(v) for k, v in row.metrics.items()},
        reason=row.reason,
        training_window_start=_utc_or_none(row.training_window_start),
        training_window_end=_utc_or_none(row.training_window_end),
        params=dict(row.params) if with_params else {},
    )
