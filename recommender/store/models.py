"""Tables. Changed only together with a migration in migrations/versions/."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, BigInteger, DateTime, Float, Index, Integer, String, Text, text
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


class Base(DeclarativeBase):
    pass


_YOUNG_FIRST = "model_oom_chance IS NOT NULL"


class RecommendationRow(Base):
    """Every recommendation given, first attempts and rungs after an OOM alike."""

    __tablename__ = "recommendations"

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    action_id: Mapped[str] = mapped_column(String(256))
    execution_id: Mapped[str] = mapped_column(String(256), default="")
    parent_id: Mapped[str | None] = mapped_column(String(36), nullable=True)
    attempt: Mapped[int] = mapped_column(Integer, default=1)
    pool_id: Mapped[str] = mapped_column(String(256))
    gpu_model: Mapped[str] = mapped_column(String(64))
    profile: Mapped[str] = mapped_column(String(64))
    profile_memory_mib: Mapped[int] = mapped_column(Integer)
    compute_slices: Mapped[int] = mapped_column(Integer)
    memory_slices: Mapped[int] = mapped_column(Integer)
    whole_gpu: Mapped[bool] = mapped_column(default=False)
    count: Mapped[int] = mapped_column(Integer)
    node_id: Mapped[str] = mapped_column(String(256), default="")
    resources: Mapped[dict[str, str]] = mapped_column(JSON)
    predicted_peak_mib: Mapped[float] = mapped_column(Float)
    quantile: Mapped[float] = mapped_column(Float)
    source: Mapped[str] = mapped_column(String(32))
    model_version: Mapped[str] = mapped_column(String(64), default="")
    reason: Mapped[str] = mapped_column(Text)
    ladder: Mapped[list[dict[str, Any]]] = mapped_column(JSON)
    oom_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    oom_observed_peak_mib: Mapped[float | None] = mapped_column(Float, nullable=True)
    card_compute_slices: Mapped[int] = mapped_column(Integer, default=0)
    node_gpus: Mapped[int] = mapped_column(Integer, default=0)
    predicted_throughput: Mapped[float] = mapped_column(Float, default=0.0)
    declared_memory_mib: Mapped[int] = mapped_column(BigInteger, default=0, server_default="0")
    oom_chance: Mapped[float] = mapped_column(Float, default=0.0, server_default="0")
    model_oom_chance: Mapped[float | None] = mapped_column(Float, nullable=True)

    __table_args__ = (
        Index("ix_recommendations_action_created", "action_id", "created_at"),
        Index("ix_recommendations_created", "created_at"),
        # One rung per parent: concurrent NextAfterOom retries get the same answer.
        Index("ix_recommendations_parent", "parent_id", unique=True),
        Index("ix_recommendations_action_oom", "action_id", "oom_at",
              postgresql_where=text("oom_at IS NOT NULL"),
              sqlite_where=text("oom_at IS NOT NULL")),
        # The population's record of young actions' first attempts (store.across
        # .calibration_samples): a few percent of the rows once most actions are grown.
        Index("ix_recommendations_young_first", "created_at",
              postgresql_where=text(_YOUNG_FIRST), sqlite_where=text(_YOUNG_FIRST)),
    )


class ExecutionRow(Base):
    """A finished execution as the runner reported it; execution_id is the idempotency key."""

    __tablename__ = "executions"

    execution_id: Mapped[str] = mapped_column(String(256), primary_key=True)
    action_id: Mapped[str] = mapped_column(String(256))
    recommendation_id: Mapped[str] = mapped_column(String(36), default="")
    gpu_model: Mapped[str] = mapped_column(String(64))
    profile: Mapped[str] = mapped_column(String(64))
    slice_memory_mib: Mapped[int] = mapped_column(Integer)
    count: Mapped[int] = mapped_column(Integer)
    peak_memory_mib: Mapped[float] = mapped_column(Float)
    sm_utilization: Mapped[float] = mapped_column(Float)
    duration_s: Mapped[float] = mapped_column(Float)
    throughput: Mapped[float] = mapped_column(Float)
    outcome: Mapped[str] = mapped_column(String(16))
    started_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    ended_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    recorded_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    features: Mapped[dict[str, float]] = mapped_column(JSON)

    __table_args__ = (
        Index("ix_executions_action_ended", "action_id", "ended_at"),
        Index("ix_executions_recommendation", "recommendation_id"),
        Index("ix_executions_ended", "ended_at"),
    )


class ModelVersionRow(Base):
    """A learned model's version: plain fitted parameters (JSON, never pickle) and its record.

    At most one row is serving at a time; the retraining job flips it in one transaction.
    """

    __tablename__ = "model_versions"

    version: Mapped[str] = mapped_column(String(64), primary_key=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    kind: Mapped[str] = mapped_column(String(32), default="memory")
    promoted: Mapped[bool] = mapped_column(default=False)
    serving: Mapped[bool] = mapped_column(default=False)
    metrics: Mapped[dict[str, float]] = mapped_column(JSON)
    reason: Mapped[str] = mapped_column(Text, default="")
    training_window_start: Mapped[datetime | None] = mapped_column(
        DateTime(timezone=True), nullable=True)
    training_window_end: Mapped[datetime | None] = mapped_column(
        DateTime(timezone=True), nullable=True)
    params: Mapped[dict[str, Any]] = mapped_column(JSON)

    __table_args__ = (
        Index("ix_model_versions_kind_created", "kind", "created_at"),
        # One serving version per kind, whatever two retraining runs do at once.
        Index("uq_model_versions_one_serving", "kind", unique=True,
              postgresql_where=text("serving"), sqlite_where=text("serving")),
    )
