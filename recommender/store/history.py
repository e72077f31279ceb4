"""What operators read: recommendations joined with how they turned out, newest first.

Queries on a session; `SqlStore` runs them (each in its own short transaction) and turns
database errors into StoreUnavailable.
"""

from __future__ import annotations

from sqlalchemy import ColumnElement, and_, func, or_, select
from sqlalchemy.orm import Session

from recommender.core.domain import (
    Execution,
    HistoryEntry,
    HistoryFilter,
    Outcome,
    StoredRecommendation,
)
from recommender.store.cursor import Cursor, after, encode_cursor
from recommender.store.mapping import columns, execution_of, recommendation_of
from recommender.store.models import ExecutionRow, RecommendationRow

R, X = RecommendationRow, ExecutionRow

SUMMARY_COLUMNS = (R.id, R.created_at, R.action_id, R.execution_id, R.parent_id, R.attempt,
                   R.pool_id, R.gpu_model, R.profile, R.profile_memory_mib, R.compute_slices,
                   R.memory_slices, R.whole_gpu, R.count, R.node_id, R.predicted_peak_mib,
                   R.quantile, R.source, R.model_version, R.oom_at, R.oom_observed_peak_mib,
                   R.oom_chance)
"""A recommendation without its reason, resources and ladder: what a report summarises."""

EXECUTION_SUMMARY_COLUMNS = (
    X.execution_id, X.action_id, X.recommendation_id, X.gpu_model, X.profile,
    X.slice_memory_mib, X.count, X.peak_memory_mib, X.sm_utilization, X.duration_s,
    X.throughput, X.outcome, X.ended_at, X.started_at)
"""An execution without its features."""


def _conditions(f: HistoryFilter) -> list[ColumnElement[bool]]:
    conds: list[ColumnElement[bool]] = []
    if f.action_id:
        conds.append(R.action_id == f.action_id)
    if f.pool_id:
        conds.append(R.pool_id == f.pool_id)
    if f.gpu_model:
        conds.append(R.gpu_model == f.gpu_model)
    if f.source:
        conds.append(R.source == f.source)
    if f.created_after:
        conds.append(R.created_at >= f.created_after)
    if f.created_before:
        conds.append(R.created_at < f.created_before)
    if f.outcome == "fitted":
        conds.append(X.outcome == Outcome.SUCCEEDED.value)
    elif f.outcome == "oom":
        conds.append(or_(X.outcome == Outcome.OOM.value, R.oom_at.is_not(None)))
    elif f.outcome == "unknown":
        conds.append(and_(X.execution_id.is_(None), R.oom_at.is_(None)))
    return conds


def page(s: Session, f: HistoryFilter, page_size: int, cursor: Cursor | None
         ) -> tuple[list[HistoryEntry], str]:
    """One page, newest first, and the next page's token ("" at the end)."""
    # One execution per recommendation (the last to end), however many the runner reported
    # for it: a recommendation is listed once.
    latest = (
        select(X.execution_id)
        .where(X.recommendation_id == R.id)
        .order_by(X.ended_at.desc(), X.execution_id.desc())
        .limit(1)
        .correlate(R)
        .scalar_subquery()
    )
    stmt = select(R, X).outerjoin(X, X.execution_id == latest)
    conds = _conditions(f)
    if cursor:
        conds.append(after(cursor, R.created_at, R.id))
    if conds:
        stmt = stmt.where(and_(*conds))
    rows = s.execute(stmt.order_by(R.created_at.desc(), R.id.desc()).limit(page_size + 1)).all()
    entries = []
    for rec_row, ex_row in rows[:page_size]:
        stored = recommendation_of(columns(rec_row))
        if ex_row is not None:
            outcome: Outcome | None = Outcome(ex_row.outcome)
            peak: float | None = ex_row.peak_memory_mib
        elif rec_row.oom_at is not None:
            outcome, peak = Outcome.OOM, rec_row.oom_observed_peak_mib
        else:
            outcome, peak = None, None
        entries.append(HistoryEntry(stored, outcome, peak))
    token = ""
    if len(rows) > page_size:
        last = rows[page_size - 1][0]
        token = encode_cursor(last.created_at, last.id)
    return entries, token


def count_recommendations(s: Session, action_id: str = "") -> int:
    stmt = select(func.count()).select_from(R)
    if action_id:
        stmt = stmt.where(R.action_id == action_id)
    return int(s.execute(stmt).scalar_one())


def recent_chunk(s: Session, size: int, action_id: str, cursor: Cursor | None
                 ) -> list[tuple[StoredRecommendation, Execution | None]]:
    """Up to `size` recommendations after `cursor`, newest first, each with the execution that
    ended last among those reported for it; summary columns only."""
    stmt = select(*SUMMARY_COLUMNS)
    if action_id:
        stmt = stmt.where(R.action_id == action_id)
    if cursor:
        stmt = stmt.where(after(cursor, R.created_at, R.id))
    recs = s.execute(stmt.order_by(R.created_at.desc(), R.id.desc()).limit(size)).all()
    latest: dict[str, Execution] = {}
    if recs:
        for e in s.execute(
            select(*EXECUTION_SUMMARY_COLUMNS)
            .where(X.recommendation_id.in_([row.id for row in recs]))
            .order_by(X.ended_at, X.execution_id)
        ):
            latest[e.recommendation_id] = execution_of(e._mapping)
    return [(recommendation_of(row._mapping), latest.get(row.id)) for row in recs]
