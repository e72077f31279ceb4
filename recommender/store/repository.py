"""Queries. Every database failure surfaces as StoreUnavailable, so callers can degrade."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from functools import partial
from typing import Any, TypeVar

from sqlalchemy import Connection, Engine, and_, or_, select, text, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.exc import IntegrityError, SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from recommender.core import config
from recommender.core.calibration import CalibrationSample
from recommender.core.dataset import Dataset
from recommender.core.demand import Run
from recommender.core.domain import (
    Execution,
    HistoryEntry,
    HistoryFilter,
    ModelVersion,
    Outcome,
    Sample,
    StoredRecommendation,
    StoreUnavailable,
    ThroughputRow,
)
from recommender.core.population import PopulationSample
from recommender.store import across, history
from recommender.store.batch import GroupCommit
from recommender.store.behind import WriteBehind
from recommender.store.cursor import Cursor, decode_cursor
from recommender.store.dataset import read_executions
from recommender.store.held import HeldConnection
from recommender.store.mapping import (
    columns,
    execution_of,
    execution_values,
    recommendation_of,
    recommendation_values,
    utc,
    version_of,
)
from recommender.store.models import ExecutionRow, ModelVersionRow, RecommendationRow

T = TypeVar("T")

ACTION_CHANNEL = "intelliscale_actions"
"""PostgreSQL NOTIFY channel: the payload is an action whose history changed, as
`<origin>:<action_id>` (`notification`), the origin naming the store that wrote it."""

_ORIGIN_LENGTH = 32


def notification(origin: str, action_id: str) -> str:
    return f"{origin}:{action_id}"


def parse_notification(payload: str) -> tuple[str, str]:
    """(origin, action_id); origin "" for a payload without one (a bare action id, as
    replicas before the origin was added sent)."""
    head = payload[:_ORIGIN_LENGTH]
    if (len(payload) > _ORIGIN_LENGTH and payload[_ORIGIN_LENGTH] == ":"
            and all(c in "0123456789abcdef" for c in head)):
        return head, payload[_ORIGIN_LENGTH + 1:]
    return "", payload


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
        self.origin = uuid.uuid4().hex
        """Signs this store's notifications: its replica's listener skips them, since the
        use cases have already applied their own writes to the cache."""
        self._sessions = sessionmaker(engine, expire_on_commit=False)
        # Recommendation rows are written behind (store/behind.py); a caller writes its own
        # through the group commit when the queue is full or the database failing, and None
        # asks the group commit to write just what is queued.
        self._recommendations: GroupCommit[dict[str, Any] | None, None] = GroupCommit(
            self._insert_recommendations, "write-recommendations")
        self._behind: WriteBehind[dict[str, Any]] = WriteBehind(
            lambda: self._recommendations.submit(None), "write-behind-recommendations",
            delay_s=config.RECOMMENDATION_WRITE_BEHIND_S,
            limit=config.RECOMMENDATION_QUEUE_LIMIT, retry_s=config.RECOMMENDATION_RETRY_S)
        self._executions: GroupCommit[dict[str, Any], bool] = GroupCommit(
            self._insert_executions, "write-executions")
        self._recommendation_writer = HeldConnection(engine)
        self._execution_writer = HeldConnection(engine)
        dialect_insert = pg_insert if engine.dialect.name == "postgresql" else sqlite_insert
        # Built once: SQLAlchemy caches the compiled form of a statement it has seen, so each
        # batch is an executemany of cached SQL (a multi-row .values() compiled anew every time,
        # 1.2 ms per call).
        # ON CONFLICT: a queued row whose commit failed may have been committed all the same.
        self._insert_recommendation = (
            dialect_insert(RecommendationRow).on_conflict_do_nothing(index_elements=["id"]))
        self._insert_execution = (
            dialect_insert(ExecutionRow)
            .on_conflict_do_nothing(index_elements=["execution_id"])
            .returning(ExecutionRow.execution_id)
        )

    def close(self) -> None:
        """Writes the recommendations still queued, then closes the writers' connections (the
        engine's pool is the caller's to dispose)."""
        self._behind.close()
        self._recommendation_writer.close()
        self._execution_writer.close()

    def _write(self, writer: HeldConnection, work: Callable[[Connection], T]) -> T:
        try:
            with _unavailable_on_error():
                return writer.run(work)
        except StoreUnavailable:
            self._behind.failed()
            raise

    @contextmanager
    def _session(self) -> Iterator[Session]:
        try:
            with _unavailable_on_error(), self._sessions.begin() as session:
                yield session
        except StoreUnavailable:
            # The database is failing: Recommend writes its own row again (and sees the
            # failure, answering stored=false) instead of queueing it.
            self._behind.failed()
            raise

    def flush(self) -> None:
        """Writes the queued recommendations now (raises StoreUnavailable if it cannot): for
        whoever reads the tables beside this store and needs this replica's latest rows."""
        self._settle()

    def _settle(self, rec_id: str | None = None) -> None:
        """Writes the queued recommendations before a read or write that needs them in the
        database: when `rec_id` is queued, or with no id when any is."""
        if len(self._behind) and (rec_id is None or self._behind.get(rec_id) is not None):
            self._recommendations.submit(None)

    def _run(self, fn: Callable[[Session], T]) -> T:
        with self._session() as s:
            return fn(s)

    # --- recommendations -------------------------------------------------------------

    def save_recommendation(self, rec: StoredRecommendation) -> None:
        """Queues it to be written within RECOMMENDATION_WRITE_BEHIND_S (store/behind.py);
        when the queue is full or the database failing, stores it before returning, concurrent
        calls sharing one transaction (group commit), and raises StoreUnavailable if it cannot."""
        values = recommendation_values(rec)
        if not self._behind.add(rec.id, values):
            self._recommendations.submit(values)

    def _insert_recommendations(self, items: Sequence[dict[str, Any] | None]) -> list[None]:
        """The callers' own rows (None: a flush of the queue) with every queued row, in one
        statement and one commit."""
        queued = self._behind.take()
        rows = [v for _, v in queued] + [v for v in items if v is not None]
        if rows:
            # A Core insert: the ORM's unit of work cost three times as much on this hot path.
            self._write(self._recommendation_writer,
                        lambda conn: conn.execute(self._insert_recommendation, rows))
            self._behind.written([k for k, _ in queued])
        return [None] * len(items)

    def get_recommendation(self, rec_id: str) -> StoredRecommendation | None:
        self._settle(rec_id)

        def q(s: Session) -> StoredRecommendation | None:
            row = s.get(RecommendationRow, rec_id)
            return recommendation_of(columns(row)) if row else None

        return self._run(q)

    def child_of(self, parent_id: str) -> StoredRecommendation | None:
        """The rung already given after this recommendation's OOM, if any."""

        def q(s: Session) -> StoredRecommendation | None:
            row = s.execute(
                select(RecommendationRow).where(RecommendationRow.parent_id == parent_id).limit(1)
            ).scalar_one_or_none()
            return recommendation_of(columns(row)) if row else None

        return self._run(q)

    def mark_oom(self, rec_id: str, observed_peak_mib: float, at: datetime,
                 action_id: str = "") -> None:
        self._settle(rec_id)
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
        actions = sorted({notification(self.origin, a) for a in action_ids if a})
        if actions and self.engine.dialect.name == "postgresql":
            conn.execute(text("SELECT pg_notify(:channel, a) FROM unnest(CAST(:actions AS text[]))"
                              " AS a"), {"channel": ACTION_CHANNEL, "actions": actions})

    def save_rung_after_oom(
        self, parent_id: str, observed_peak_mib: float, at: datetime, rung: StoredRecommendation
    ) -> StoredRecommendation:
        """Marks the parent as OOM and stores the next rung, in one transaction; returns the
        rung stored. A parent has one rung: when a concurrent retry stored one first, that one
        is returned (a unique index on parent_id settles the race)."""
        self._settle(parent_id)
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
            s.add(RecommendationRow(**recommendation_values(rung)))
            self._notify(s, [rung.action_id])

    # --- executions ------------------------------------------------------------------

    def record_execution(self, e: Execution, recorded_at: datetime) -> bool:
        """Inserts the execution; False when its execution_id was already recorded."""
        return self._executions.submit(execution_values(e, recorded_at))

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
            return execution_of(columns(row)) if row else None

        return self._run(q)

    def action_samples(self, action_id: str, limit: int) -> list[Sample]:
        """The action's most recent executions, plus OOMs known only from NextAfterOom.

        An OOM known from NextAfterOom is a censored sample (the need was above the slice) only
        until the runner records how that execution ended: once a retried rung succeeded, its
        true peak is in the history and the bumped value of the failed attempt is dropped."""

        def q(s: Session) -> list[Sample]:
            x, r = ExecutionRow, RecommendationRow
            rows = s.execute(
                select(x.ended_at, x.peak_memory_mib, x.slice_memory_mib, x.outcome,
                       x.sm_utilization, x.gpu_model, x.profile, x.throughput,
                       x.execution_id, x.features, x.count, x.recommendation_id)
                .where(x.action_id == action_id)
                .order_by(x.ended_at.desc())
                .limit(limit)
            ).all()
            samples = [
                Sample(at=utc(row[0]), peak_mib=row[1], slice_mib=row[2],
                       outcome=Outcome(row[3]), sm_utilization=row[4], gpu_model=row[5],
                       profile=row[6], throughput=row[7], execution_id=row[8],
                       features=row[9] if isinstance(row[9], dict) else {}, count=row[10],
                       recommendation_id=row[11] or "")
                for row in rows
            ]
            # The execution was recorded: for the recommendation itself, or (a retry through
            # NextAfterOom) under the runner's execution id the recommendation was made for.
            recorded = (
                select(x.execution_id)
                .where(or_(x.recommendation_id == r.id,
                           and_(r.execution_id != "", x.execution_id == r.execution_id)))
                .exists()
            )
            # ix_recommendations_action_oom holds only recommendations that ran out of
            # memory: this stays small however many recommendations the action has had.
            ooms = s.execute(
                select(r.oom_at, r.oom_observed_peak_mib, r.profile_memory_mib, r.id,
                       r.execution_id)
                .where(
                    r.action_id == action_id,
                    r.oom_at.is_not(None),
                    ~recorded,
                )
                .order_by(r.oom_at.desc())
                .limit(limit)
            ).all()
            samples += [
                Sample(at=utc(row[0]), peak_mib=row[1] or 0.0, slice_mib=row[2],
                       outcome=Outcome.OOM, recommendation_id=row[3], run_id=row[4])
                for row in ooms
                if row[0] is not None
            ]
            return samples

        return self._run(q)

    # --- reads across actions (store/across.py) ----------------------------------------

    def runs_in_window(self, gpu_model: str, since: datetime, until: datetime,
                       pool_id: str = "") -> list[Run]:
        self._settle()  # these reads join executions to their recommendations
        return self._run(partial(across.runs_in_window, gpu_model=gpu_model, since=since,
                                 until=until, pool_id=pool_id))

    def population_samples(self, limit: int, before: datetime | None = None
                           ) -> list[PopulationSample]:
        self._settle()
        return self._run(partial(across.population_samples, limit=limit, before=before))

    def calibration_samples(self, limit: int, before: datetime | None = None
                            ) -> list[CalibrationSample]:
        self._settle()
        return self._run(partial(across.calibration_samples, limit=limit, before=before))

    def throughput_summary(self, since: datetime) -> list[ThroughputRow]:
        self._settle()
        return self._run(partial(across.throughput_summary, since=since))

    # --- model versions --------------------------------------------------------------

    def list_model_versions(self, kind: str = "") -> list[ModelVersion]:
        """Newest first, without their parameters (they can be large)."""

        def q(s: Session) -> list[ModelVersion]:
            stmt = select(ModelVersionRow).order_by(ModelVersionRow.created_at.desc())
            if kind:
                stmt = stmt.where(ModelVersionRow.kind == kind)
            return [version_of(r, with_params=False) for r in s.execute(stmt).scalars()]

        return self._run(q)

    def serving_model_version(self, kind: str) -> ModelVersion | None:
        def q(s: Session) -> ModelVersion | None:
            row = s.execute(
                select(ModelVersionRow)
                .where(ModelVersionRow.kind == kind, ModelVersionRow.serving.is_(True))
                .limit(1)
            ).scalar_one_or_none()
            return version_of(row, with_params=True) if row else None

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
        self._settle()
        return self._run(lambda s: history.page(s, f, page_size, cursor))

    def count_recommendations(self, action_id: str = "") -> int:
        """How many recommendations are stored (for one action when given)."""
        self._settle()
        return self._run(lambda s: history.count_recommendations(s, action_id))

    def recent_with_executions(
        self, limit: int, action_id: str = "", chunk: int = 900
    ) -> Iterator[tuple[StoredRecommendation, Execution | None]]:
        """The `limit` most recent recommendations, newest first, each with its execution.

        For reports: only the columns a summary needs are read, so the recommendations come
        without their reason, resources and ladder, and the executions without features.
        Read `chunk` rows at a time, each chunk in its own short transaction, keyset-paginated
        on (created_at, id) like list_history.
        """
        self._settle()
        cursor: Cursor | None = None
        left = limit
        while left > 0:
            size = min(chunk, left)
            rows = self._run(partial(history.recent_chunk, size=size, action_id=action_id,
                                     cursor=cursor))
            yield from rows
            if len(rows) < size:
                return
            left -= len(rows)
            last = rows[-1][0]
            cursor = (last.created_at, last.id)

    def read_executions(self, progress: Callable[[int], None] | None = None) -> Dataset:
        """Every execution as numpy columns, oldest first (the retraining job's input), with
        what its recommendation's request declared: the queued recommendations are written
        first."""
        self._settle()
        with _unavailable_on_error():
            return read_executions(self.engine, progress=progress)

    @property
    def dialect(self) -> str:
        """"sqlite" or "postgresql"."""
        return self.engine.dialect.name

