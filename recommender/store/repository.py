"""Queries. Every database failure surfaces as StoreUnavailable, so callers can degrade."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

from sqlalchemy import Connection, Engine, and_, func, insert, or_, select, text, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.exc import IntegrityError, SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from recommender import config
from recommender.catalog import MigProfile
from recommender.domain import (
    Decision,
    Execution,
    HistoryEntry,
    ModelVersion,
    Outcome,
    Rung,
    Sample,
    StoredRecommendation,
    ThroughputRow,
)
from recommender.store.batch import GroupCommit
from recommender.store.database import StoreUnavailable
from recommender.store.held import HeldConnection
from recommender.store.models import ExecutionRow, ModelVersionRow, RecommendationRow

T = TypeVar("T")

ACTION_CHANNEL = "intelliscale_actions"
"""PostgreSQL NOTIFY channel: the payload is an action whose history changed."""


def _utc(value: datetime) -> datetime:
    """SQLite returns naive datetimes; everything we store is UTC."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def profile_to_json(p: MigProfile) -> dict[str, Any]:
    return {
        "name": p.name,
        "compute_slices": p.compute_slices,
        "memory_slices": p.memory_slices,
        "memory_mib": p.memory_mib,
        "whole_gpu": p.whole_gpu,
    }


def profile_from_json(d: dict[str, Any]) -> MigProfile:
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


def rung_from_json(d: dict[str, Any]) -> Rung:
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


@dataclass(frozen=True)
class HistoryFilter:
    action_id: str = ""
    pool_id: str = ""
    gpu_model: str = ""
    source: str = ""
    outcome: str = ""
    """"fitted", "oom", "unknown" or "" for all."""
    created_after: datetime | None = None
    created_before: datetime | None = None


def encode_cursor(created_at: datetime, rec_id: str) -> str:
    raw = json.dumps([_utc(created_at).isoformat(), rec_id]).encode()
    return base64.urlsafe_b64encode(raw).decode()


def decode_cursor(token: str) -> tuple[datetime, str]:
    """Raises ValueError on a token we did not make."""
    try:
        created, rec_id = json.loads(base64.urlsafe_b64decode(token.encode()))
        rec_id = str(rec_id)
        if len(rec_id) > 36 or "\x00" in rec_id:
            raise ValueError(rec_id)
        return _utc(datetime.fromisoformat(created)), rec_id
    except Exception as e:
        raise ValueError("page_token: not a token this service issued") from e


@contextmanager
def _unavailable_on_error() -> Iterator[None]:
    """Database errors become StoreUnavailable, with the first line of what the driver said."""
    try:
        yield
    except SQLAlchemyError as e:  # DBAPIError included
        raise StoreUnavailable(f"database error: {type(e).__name__}: {e}".splitlines()[0]
                               ) from e


class SqlStore:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._sessions = sessionmaker(engine, expire_on_commit=False)
        self._recommendations: GroupCommit[dict[str, Any], None] = GroupCommit(
            self._insert_recommendations, "write-recommendations")
        self._executions: GroupCommit[dict[str, Any], bool] = GroupCommit(
            self._insert_executions, "write-executions")
        self._recommendation_writer = HeldConnection(engine)
        self._execution_writer = HeldConnection(engine)
        dialect_insert = pg_insert if engine.dialect.name == "postgresql" else sqlite_insert
        # Built once: SQLAlchemy caches the compiled form of a statement it has seen, so each
        # batch is an executemany of cached SQL (a multi-row .values() compiled anew every time,
        # 1.2 ms per call).
        self._insert_recommendation = insert(RecommendationRow)
        self._insert_execution = (
            dialect_insert(ExecutionRow)
            .on_conflict_do_nothing(index_elements=["execution_id"])
            .returning(ExecutionRow.execution_id)
        )

    def close(self) -> None:
        """Closes the writers' connections (the engine's pool is the caller's to dispose)."""
        self._recommendation_writer.close()
        self._execution_writer.close()

    def _write(self, writer: HeldConnection, work: Callable[[Connection], T]) -> T:
        with _unavailable_on_error():
            return writer.run(work)

    @contextmanager
    def _session(self) -> Iterator[Session]:
        with _unavailable_on_error(), self._sessions.begin() as session:
            yield session

    def _run(self, fn: Callable[[Session], T]) -> T:
        with self._session() as s:
            return fn(s)

    def ping(self) -> None:
        self._run(lambda s: s.execute(text("SELECT 1")))

    # --- recommendations -------------------------------------------------------------

    def save_recommendation(self, rec: StoredRecommendation) -> None:
        """Stores it before returning; concurrent calls share one transaction (group commit)."""
        self._recommendations.submit(_row_values(rec))

    def _insert_recommendations(self, rows: Sequence[dict[str, Any]]) -> list[None]:
        # A Core insert: the ORM's unit of work cost three times as much on this hot path.
        self._write(self._recommendation_writer,
                    lambda conn: conn.execute(self._insert_recommendation, list(rows)))
        return [None] * len(rows)

    def get_recommendation(self, rec_id: str) -> StoredRecommendation | None:
        def q(s: Session) -> StoredRecommendation | None:
            row = s.get(RecommendationRow, rec_id)
            return _to_stored(row) if row else None

        return self._run(q)

    def child_of(self, parent_id: str) -> StoredRecommendation | None:
        """The rung already given after this recommendation's OOM, if any."""

        def q(s: Session) -> StoredRecommendation | None:
            row = s.execute(
                select(RecommendationRow).where(RecommendationRow.parent_id == parent_id).limit(1)
            ).scalar_one_or_none()
            return _to_stored(row) if row else None

        return self._run(q)

    def mark_oom(self, rec_id: str, observed_peak_mib: float, at: datetime,
                 action_id: str = "") -> None:
        with self._session() as s:
            s.execute(
                update(RecommendationRow)
                .where(RecommendationRow.id == rec_id, RecommendationRow.oom_at.is_(None))
                .values(oom_at=at, oom_observed_peak_mib=observed_peak_mib or None)
            )
            self._notify(s, [action_id])

    def _notify(self, conn: Session | Connection, action_ids: Iterable[str]) -> None:
        """Tells every replica (on PostgreSQL) that these actions' history changed, when the
        transaction commits: their cached statistics for them are dropped. One statement for
        all of them (one round trip per group-commit batch)."""
        actions = sorted({a for a in action_ids if a})
        if actions and self.engine.dialect.name == "postgresql":
            conn.execute(text("SELECT pg_notify(:channel, a) FROM unnest(CAST(:actions AS text[]))"
                              " AS a"), {"channel": ACTION_CHANNEL, "actions": actions})

    def save_rung_after_oom(
        self, parent_id: str, observed_peak_mib: float, at: datetime, rung: StoredRecommendation
    ) -> StoredRecommendation:
        """Marks the parent as OOM and stores the next rung, in one transaction; returns the
        rung stored. A parent has one rung: when a concurrent retry stored one first, that one
        is returned (a unique index on parent_id settles the race)."""
        try:
            self._save_rung(parent_id, observed_peak_mib, at, rung)
            return rung
        except StoreUnavailable as e:
            if not isinstance(e.__cause__, IntegrityError):
                raise
            existing = self.child_of(parent_id)
            if existing is None:
                raise
            return existing

    def _save_rung(self, parent_id: str, observed_peak_mib: float, at: datetime,
                   rung: StoredRecommendation) -> None:
        with self._session() as s:
            s.execute(
                update(RecommendationRow)
                .where(RecommendationRow.id == parent_id)
                .values(oom_at=at, oom_observed_peak_mib=observed_peak_mib or None)
            )
            s.add(_to_row(rung))
            self._notify(s, [rung.action_id])

    # --- executions ------------------------------------------------------------------

    def record_execution(self, e: Execution, recorded_at: datetime) -> bool:
        """Inserts the execution; False when its execution_id was already recorded."""
        values = {
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
        return self._executions.submit(values)

    def _insert_executions(self, batch: Sequence[dict[str, Any]]) -> list[bool]:
        """One INSERT .. ON CONFLICT DO NOTHING for the batch; True where a row was added.

        Within a batch an id's first occurrence is written and any later one is a duplicate,
        as it would have been had they come one after the other.
        """
        first: dict[str, dict[str, Any]] = {}
        for values in batch:
            first.setdefault(values["execution_id"], values)

        def insert(conn: Connection) -> set[str]:
            # A row comes back only when it was inserted; rowcount is unreliable here.
            inserted = {row[0] for row in conn.execute(self._insert_execution,
                                                       list(first.values()))}
            self._notify(conn, (first[i]["action_id"] for i in inserted))
            return inserted

        inserted = self._write(self._execution_writer, insert)
        answered: set[str] = set()
        out = []
        for values in batch:
            eid = values["execution_id"]
            out.append(eid in inserted and eid not in answered)
            answered.add(eid)
        return out

    def get_execution(self, execution_id: str) -> Execution | None:
        def q(s: Session) -> Execution | None:
            row = s.get(ExecutionRow, execution_id)
            return _to_execution(row) if row else None

        return self._run(q)

    def action_samples(self, action_id: str, limit: int) -> list[Sample]:
        """The action's most recent executions, plus OOMs known only from NextAfterOom."""

        def q(s: Session) -> list[Sample]:
            rows = s.execute(
                select(ExecutionRow.ended_at, ExecutionRow.peak_memory_mib,
                       ExecutionRow.slice_memory_mib, ExecutionRow.outcome,
                       ExecutionRow.sm_utilization, ExecutionRow.gpu_model,
                       ExecutionRow.profile, ExecutionRow.throughput, ExecutionRow.count)
                .where(ExecutionRow.action_id == action_id)
                .order_by(ExecutionRow.ended_at.desc())
                .limit(limit)
            ).all()
            samples = [
                Sample(at=_utc(r[0]), peak_mib=r[1], slice_mib=r[2], outcome=Outcome(r[3]),
                       sm_utilization=r[4], gpu_model=r[5], profile=r[6], throughput=r[7],
                       count=r[8])
                for r in rows
            ]
            recorded = (
                select(ExecutionRow.execution_id)
                .where(ExecutionRow.recommendation_id == RecommendationRow.id)
                .exists()
            )
            # ix_recommendations_action_oom holds only recommendations that ran out of
            # memory: this stays small however many recommendations the action has had.
            ooms = s.execute(
                select(RecommendationRow.oom_at, RecommendationRow.oom_observed_peak_mib,
                       RecommendationRow.profile_memory_mib)
                .where(
                    RecommendationRow.action_id == action_id,
                    RecommendationRow.oom_at.is_not(None),
                    ~recorded,
                )
                .order_by(RecommendationRow.oom_at.desc())
                .limit(limit)
            ).all()
            samples += [
                Sample(at=_utc(r[0]), peak_mib=r[1] or 0.0, slice_mib=r[2], outcome=Outcome.OOM)
                for r in ooms
                if r[0] is not None
            ]
            return samples

        return self._run(q)

    def throughput_summary(self, since: datetime) -> list[ThroughputRow]:
        """Mean per-worker throughput of successful executions ended since `since`, per
        (action, GPU model, profile, count): what the population of throughput curves is
        built from. One aggregate read; the use case caches it for minutes."""

        def q(s: Session) -> list[ThroughputRow]:
            if s.get_bind().dialect.name == "postgresql":
                # A background read, not the runner's: the 2 s statement timeout is not for it.
                timeout_ms = int(config.THROUGHPUT_POPULATION_TIMEOUT_S * 1000)
                s.execute(text(f"SET LOCAL statement_timeout = {timeout_ms}"))
            rows = s.execute(
                select(ExecutionRow.action_id, ExecutionRow.gpu_model, ExecutionRow.profile,
                       ExecutionRow.count, func.avg(ExecutionRow.throughput),
                       func.count())
                .where(ExecutionRow.outcome == Outcome.SUCCEEDED.value,
                       ExecutionRow.throughput > 0, ExecutionRow.ended_at >= since)
                .group_by(ExecutionRow.action_id, ExecutionRow.gpu_model, ExecutionRow.profile,
                          ExecutionRow.count)
            ).all()
            return [ThroughputRow(r[0], r[1], r[2], int(r[3]), float(r[4]), int(r[5]))
                    for r in rows]

        return self._run(q)

    # --- model versions --------------------------------------------------------------

    def list_model_versions(self, kind: str = "") -> list[ModelVersion]:
        """Newest first, without their parameters (they can be large)."""

        def q(s: Session) -> list[ModelVersion]:
            stmt = select(ModelVersionRow).order_by(ModelVersionRow.created_at.desc())
            if kind:
                stmt = stmt.where(ModelVersionRow.kind == kind)
            return [_to_version(r, with_params=False) for r in s.execute(stmt).scalars()]

        return self._run(q)

    def serving_model_version(self, kind: str) -> ModelVersion | None:
        def q(s: Session) -> ModelVersion | None:
            row = s.execute(
                select(ModelVersionRow)
                .where(ModelVersionRow.kind == kind, ModelVersionRow.serving.is_(True))
                .limit(1)
            ).scalar_one_or_none()
            return _to_version(row, with_params=True) if row else None

        return self._run(q)

    def save_model_version(self, v: ModelVersion, *, expected_serving: str | None = None
                           ) -> bool:
        """Stores a version. When it is to serve, the previous serving one stops in the same
        transaction, but only if the serving version is still `expected_serving` (the one the
        candidate was compared with); otherwise it is stored unpromoted and False returned.

        Two runs promoting at once: the unique index on the serving version lets one commit;
        the other is stored again, unpromoted.
        """
        try:
            return self._save_model_version(v, expected_serving, v.serving)
        except StoreUnavailable as e:
            if not v.serving or not isinstance(e.__cause__, IntegrityError):
                raise
            self._save_model_version(v, expected_serving, False)
            return False

    def _save_model_version(self, v: ModelVersion, expected_serving: str | None,
                            serving: bool) -> bool:
        with self._session() as s:
            if serving:
                current = s.execute(
                    select(ModelVersionRow.version)
                    .where(ModelVersionRow.kind == v.kind, ModelVersionRow.serving.is_(True))
                    .with_for_update()
                ).scalar_one_or_none()
                if current != expected_serving:
                    serving = False
                else:
                    s.execute(
                        update(ModelVersionRow)
                        .where(ModelVersionRow.kind == v.kind, ModelVersionRow.serving.is_(True))
                        .values(serving=False)
                    )
                    s.flush()
            s.add(ModelVersionRow(
                version=v.version, created_at=v.created_at, kind=v.kind,
                promoted=v.promoted and serving, serving=serving, metrics=dict(v.metrics),
                reason=v.reason, training_window_start=v.training_window_start,
                training_window_end=v.training_window_end, params=dict(v.params),
            ))
            return serving == v.serving

    def serving_version_id(self, kind: str) -> str | None:
        """Just the id: servers poll this every few seconds."""
        return self._run(lambda s: s.execute(
            select(ModelVersionRow.version)
            .where(ModelVersionRow.kind == kind, ModelVersionRow.serving.is_(True))
        ).scalar_one_or_none())

    # --- history ---------------------------------------------------------------------

    def list_history(
        self, f: HistoryFilter, page_size: int, page_token: str = ""
    ) -> tuple[list[HistoryEntry], str]:
        """Newest first, keyset-paginated on (created_at, id): stable under inserts."""
        cursor = decode_cursor(page_token) if page_token else None

        def q(s: Session) -> tuple[list[HistoryEntry], str]:
            r, x = RecommendationRow, ExecutionRow
            # One execution per recommendation (the last to end), however many the runner
            # reported for it: a recommendation is listed once.
            latest = (
                select(x.execution_id)
                .where(x.recommendation_id == r.id)
                .order_by(x.ended_at.desc(), x.execution_id.desc())
                .limit(1)
                .correlate(r)
                .scalar_subquery()
            )
            stmt = select(r, x).outerjoin(x, x.execution_id == latest)
            conds = []
            if f.action_id:
                conds.append(r.action_id == f.action_id)
            if f.pool_id:
                conds.append(r.pool_id == f.pool_id)
            if f.gpu_model:
                conds.append(r.gpu_model == f.gpu_model)
            if f.source:
                conds.append(r.source == f.source)
            if f.created_after:
                conds.append(r.created_at >= f.created_after)
            if f.created_before:
                conds.append(r.created_at < f.created_before)
            if f.outcome == "fitted":
                conds.append(x.outcome == Outcome.SUCCEEDED.value)
            elif f.outcome == "oom":
                conds.append(or_(x.outcome == Outcome.OOM.value, r.oom_at.is_not(None)))
            elif f.outcome == "unknown":
                conds.append(and_(x.execution_id.is_(None), r.oom_at.is_(None)))
            if cursor:
                created, rec_id = cursor
                conds.append(or_(r.created_at < created,
                                 and_(r.created_at == created, r.id < rec_id)))
            if conds:
                stmt = stmt.where(and_(*conds))
            rows = s.execute(
                stmt.order_by(r.created_at.desc(), r.id.desc()).limit(page_size + 1)
            ).all()
            entries = []
            for rec_row, ex_row in rows[:page_size]:
                stored = _to_stored(rec_row)
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

        return self._run(q)

    # --- report (read-only, bounded) -------------------------------------------------

    def count_recommendations(self, action_id: str = "") -> int:
        """How many recommendations are stored (for one action when given)."""
        from sqlalchemy import func

        stmt = select(func.count()).select_from(RecommendationRow)
        if action_id:
            stmt = stmt.where(RecommendationRow.action_id == action_id)
        return self._run(lambda s: int(s.execute(stmt).scalar_one()))

    def recent_with_executions(
        self, limit: int, action_id: str = "", chunk: int = 900
    ) -> Iterator[tuple[StoredRecommendation, Execution | None]]:
        """The `limit` most recent recommendations, newest first, each with its execution.

        For reports: only the columns a summary needs are read, so the recommendations come
        without their reason, resources and ladder, and the executions without features.
        Read `chunk` rows at a time, each chunk in its own short transaction, keyset-paginated
        on (created_at, id) like list_history. When the runner reported several executions
        for one recommendation, the one that ended last is given.
        """
        r, x = RecommendationRow, ExecutionRow
        rec_cols = (r.id, r.created_at, r.action_id, r.execution_id, r.parent_id, r.attempt,
                    r.pool_id, r.gpu_model, r.profile, r.profile_memory_mib, r.compute_slices,
                    r.memory_slices, r.whole_gpu, r.count, r.node_id, r.predicted_peak_mib,
                    r.quantile, r.source, r.model_version, r.oom_at, r.oom_observed_peak_mib)
        ex_cols = (x.execution_id, x.action_id, x.recommendation_id, x.gpu_model, x.profile,
                   x.slice_memory_mib, x.count, x.peak_memory_mib, x.sm_utilization,
                   x.duration_s, x.throughput, x.outcome, x.ended_at, x.started_at)
        cursor: tuple[datetime, str] | None = None
        left = limit
        while left > 0:
            size = min(chunk, left)

            def q(s: Session, cursor: tuple[datetime, str] | None = cursor, size: int = size
                  ) -> list[tuple[StoredRecommendation, Execution | None]]:
                stmt = select(*rec_cols)
                if action_id:
                    stmt = stmt.where(r.action_id == action_id)
                if cursor:
                    created, rec_id = cursor
                    stmt = stmt.where(or_(r.created_at < created,
                                          and_(r.created_at == created, r.id < rec_id)))
                recs = s.execute(
                    stmt.order_by(r.created_at.desc(), r.id.desc()).limit(size)
                ).all()
                latest: dict[str, Execution] = {}
                if recs:
                    for e in s.execute(
                        select(*ex_cols).where(x.recommendation_id.in_([row.id for row in recs]))
                        .order_by(x.ended_at, x.execution_id)
                    ):
                        latest[e.recommendation_id] = Execution(
                            execution_id=e.execution_id, action_id=e.action_id,
                            recommendation_id=e.recommendation_id, gpu_model=e.gpu_model,
                            profile=e.profile, slice_memory_mib=e.slice_memory_mib,
                            count=int(e._mapping["count"]),  # Row.count is tuple.count
                            peak_memory_mib=e.peak_memory_mib, sm_utilization=e.sm_utilization,
                            duration_s=e.duration_s, throughput=e.throughput,
                            outcome=Outcome(e.outcome), ended_at=_utc(e.ended_at),
                            started_at=_utc(e.started_at) if e.started_at else None,
                        )
                out: list[tuple[StoredRecommendation, Execution | None]] = []
                for row in recs:
                    profile = MigProfile(
                        name=row.profile, compute_slices=row.compute_slices,
                        memory_slices=row.memory_slices, memory_mib=row.profile_memory_mib,
                        max_count=0, placement=None, whole_gpu=row.whole_gpu)
                    decision = Decision(
                        rung=Rung(pool_id=row.pool_id, gpu_model=row.gpu_model, profile=profile,
                                  count=int(row._mapping["count"]), resources={},
                                  node_id=row.node_id),
                        predicted_peak_mib=row.predicted_peak_mib, quantile=row.quantile,
                        source=row.source, reason="", ladder=(),
                        model_version=row.model_version, attempt=row.attempt)
                    rec = StoredRecommendation(
                        id=row.id, created_at=_utc(row.created_at), action_id=row.action_id,
                        execution_id=row.execution_id, decision=decision,
                        parent_id=row.parent_id,
                        oom_at=_utc(row.oom_at) if row.oom_at else None,
                        oom_observed_peak_mib=row.oom_observed_peak_mib)
                    out.append((rec, latest.get(row.id)))
                return out

            rows = self._run(q)
            yield from rows
            if len(rows) < size:
                return
            left -= len(rows)
            last = rows[-1][0]
            cursor = (last.created_at, last.id)


def _to_version(row: ModelVersionRow, *, with_params: bool) -> ModelVersion:
    return ModelVersion(
        version=row.version,
        created_at=_utc(row.created_at),
        kind=row.kind,
        promoted=row.promoted,
        serving=row.serving,
        metrics={str(k): float(v) for k, v in row.metrics.items()},
        reason=row.reason,
        training_window_start=_utc(row.training_window_start)
        if row.training_window_start else None,
        training_window_end=_utc(row.training_window_end) if row.training_window_end else None,
        params=dict(row.params) if with_params else {},
    )


def _to_row(rec: StoredRecommendation) -> RecommendationRow:
    return RecommendationRow(**_row_values(rec))


def _row_values(rec: StoredRecommendation) -> dict[str, Any]:
    d = rec.decision
    return dict(
        id=rec.id,
        created_at=rec.created_at,
        action_id=rec.action_id,
        execution_id=rec.execution_id,
        parent_id=rec.parent_id,
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
        ladder=[rung_to_json(r) for r in d.ladder],
        card_compute_slices=d.rung.card_compute_slices,
        node_gpus=d.rung.node_gpus,
        predicted_throughput=d.predicted_throughput,
    )


def _to_stored(row: RecommendationRow) -> StoredRecommendation:
    rung = Rung(
        pool_id=row.pool_id,
        gpu_model=row.gpu_model,
        profile=profile_from_json({
            "name": row.profile, "compute_slices": row.compute_slices,
            "memory_slices": row.memory_slices, "memory_mib": row.profile_memory_mib,
            "whole_gpu": row.whole_gpu,
        }),
        count=row.count,
        resources={str(k): str(v) for k, v in row.resources.items()},
        node_id=row.node_id,
        card_compute_slices=row.card_compute_slices,
        node_gpus=row.node_gpus,
    )
    decision = Decision(
        rung=rung,
        predicted_peak_mib=row.predicted_peak_mib,
        quantile=row.quantile,
        source=row.source,
        reason=row.reason,
        ladder=tuple(rung_from_json(d) for d in row.ladder),
        model_version=row.model_version,
        attempt=row.attempt,
        predicted_throughput=row.predicted_throughput,
    )
    return StoredRecommendation(
        id=row.id,
        created_at=_utc(row.created_at),
        action_id=row.action_id,
        execution_id=row.execution_id,
        decision=decision,
        parent_id=row.parent_id,
        oom_at=_utc(row.oom_at) if row.oom_at else None,
        oom_observed_peak_mib=row.oom_observed_peak_mib,
    )


def _to_execution(row: ExecutionRow) -> Execution:
    return Execution(
        execution_id=row.execution_id,
        action_id=row.action_id,
        recommendation_id=row.recommendation_id,
        gpu_model=row.gpu_model,
        profile=row.profile,
        slice_memory_mib=row.slice_memory_mib,
        count=row.count,
        peak_memory_mib=row.peak_memory_mib,
        sm_utilization=row.sm_utilization,
        duration_s=row.duration_s,
        throughput=row.throughput,
        outcome=Outcome(row.outcome),
        ended_at=_utc(row.ended_at),
        started_at=_utc(row.started_at) if row.started_at else None,
        features=dict(row.features),
    )
