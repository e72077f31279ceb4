"""Reads across actions: recorded demand for the layout advice, the population the memory
prior learns from, the throughput summary the curves borrow shapes from. Queries on a session;
`SqlStore` runs them."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from datetime import datetime
from typing import Any

from sqlalchemy import Text, cast, func, or_, select, text
from sqlalchemy.orm import Session

from recommender.core import config
from recommender.core.calibration import CalibrationSample
from recommender.core.demand import Run, run_of
from recommender.core.domain import Outcome, ThroughputRow
from recommender.core.estimation import oom_bumped
from recommender.core.population import PopulationSample
from recommender.store.mapping import utc
from recommender.store.models import ExecutionRow, RecommendationRow


def runs_in_window(s: Session, gpu_model: str, since: datetime, until: datetime,
                   pool_id: str = "") -> list[Run]:
    """Executions on `gpu_model` (canonical id) that overlap [since, until), as demand.

    An execution's pool is its recommendation's: with `pool_id`, executions recorded without a
    recommendation id (or with one this store does not hold) are left out, their pool being
    unknown. Runs are not clipped here; `core.demand.demand_of` clips them.
    """
    x, r = ExecutionRow, RecommendationRow
    stmt = select(x.profile, x.count, x.ended_at, x.started_at, x.duration_s).where(
        x.gpu_model == gpu_model, x.ended_at > since,
        or_(x.started_at.is_(None), x.started_at < until))
    if pool_id:
        stmt = stmt.join(r, r.id == x.recommendation_id).where(r.pool_id == pool_id)
    runs = (run_of(row[0], int(row[1]), utc(row[2]),
                   utc(row[3]) if row[3] is not None else None, float(row[4]))
            for row in s.execute(stmt))
    return [run for run in runs if run.start < until]


def population_samples(s: Session, limit: int, before: datetime | None = None
                       ) -> list[PopulationSample]:
    """The `limit` most recent executions across actions that say how much memory was needed,
    with the memory their recommendation's request declared; with `before`, those that had
    ended by then (the population as it was read at that time)."""
    x, r = ExecutionRow, RecommendationRow
    before = utc(before) if before is not None else None  # SQLite binds it naive
    ended = (x.ended_at <= before,) if before is not None else ()
    # On the session's connection, not the session: the same rows without the ORM's loading
    # of each (177 -> 149 ms of CPU for 20,000 rows on SQLite).
    rows = s.connection().execute(
        select(x.action_id, x.ended_at, x.peak_memory_mib, x.slice_memory_mib,
               x.outcome, r.declared_memory_mib, cast(x.features, Text))
        .outerjoin(r, r.id == x.recommendation_id)
        .where(x.outcome.in_((Outcome.SUCCEEDED.value, Outcome.OOM.value)), *ended)
        .order_by(x.ended_at.desc())
        .limit(limit)
    ).all()
    succeeded = Outcome.SUCCEEDED.value
    return [
        PopulationSample(
            action_id=action_id,
            # utc(ended_at).timestamp() without a new datetime per row: SQLite's are naive UTC
            # (the same seconds since the epoch, to the bit), PostgreSQL's aware.
            at_s=((ended_at - _NAIVE_EPOCH).total_seconds() if ended_at.tzinfo is None
                  else ended_at.timestamp()),
            need_mib=(peak if outcome == succeeded else oom_bumped(slice_mib, peak)),
            declared_mib=float(declared or 0), features=_Decoded(features))
        for action_id, ended_at, peak, slice_mib, outcome, declared, features in rows
    ]


_NAIVE_EPOCH = datetime(1970, 1, 1)


def calibration_samples(s: Session, limit: int, before: datetime | None = None
                        ) -> list[CalibrationSample]:
    """Of the `limit` most recent first attempts with a model chance, those whose outcome is
    known: ran out when NextAfterOom marked them or the runner recorded an OOM on them, fitted
    when it recorded a success on them (the few still running are left out). Only first
    attempts have a model chance (a rung after an OOM is not a young action's first attempt).
    The newest are taken first, by the partial index on created_at of the rows with one, and
    only then joined to their executions, 5,000 index lookups whatever the tables' size. With
    the join first, PostgreSQL hashed every execution (72 ms at 200,000, growing with the
    table), and parent_id IS NULL made SQLite walk every first attempt and sort them (100 ms at
    200,000 rows, 5 % young). Now 37 ms on SQLite, 60-110 ms on PostgreSQL (scratch, 200,000
    of each, median of 7): off the Recommend path, with the population, once a minute.
    With `before`, the record as it stood then: first attempts made by then, with the outcomes
    known by then."""
    x, r = ExecutionRow, RecommendationRow
    before = utc(before) if before is not None else None  # SQLite binds it naive
    made = (r.created_at <= before,) if before is not None else ()
    young = (select(r.id, r.profile_memory_mib, r.model_oom_chance, r.oom_at, r.created_at)
             .where(r.model_oom_chance.is_not(None), *made)
             .order_by(r.created_at.desc())
             .limit(limit)
             .subquery())
    recorded = x.outcome.in_((Outcome.SUCCEEDED.value, Outcome.OOM.value))
    known = (or_(young.c.oom_at.is_not(None), recorded) if before is None else
             or_(young.c.oom_at <= before, recorded & (x.ended_at <= before)))
    rows = s.connection().execute(
        select(young.c.profile_memory_mib, young.c.model_oom_chance, young.c.oom_at, x.outcome)
        .outerjoin(x, x.recommendation_id == young.c.id)
        .where(known)
        .order_by(young.c.created_at.desc())
    ).all()
    ran_out = Outcome.OOM.value
    return [CalibrationSample(int(mib), float(chance or 0.0),
                              (oom_at is not None and (before is None or utc(oom_at) <= before))
                              or outcome == ran_out)
            for mib, chance, oom_at, outcome in rows]


class _Decoded(Mapping[str, float]):
    """A row's features, decoded from their JSON text when first looked at: the population
    looks at those of each action's first and latest few runs only, and decoding all 20,000
    rows' took longer than the rest of the read (SQLite: 100 -> 180 ms)."""

    __slots__ = ("_decoded", "_raw")

    def __init__(self, raw: Any) -> None:
        self._raw = raw
        self._decoded: Mapping[str, float] | None = None

    def _get(self) -> Mapping[str, float]:
        if self._decoded is None:
            raw = self._raw
            found = json.loads(raw) if isinstance(raw, str | bytes) else raw
            self._decoded = found if isinstance(found, dict) else {}
        return self._decoded

    def __getitem__(self, key: str) -> float:
        return self._get()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._get())

    def __len__(self) -> int:
        return len(self._get())


def throughput_summary(s: Session, since: datetime) -> list[ThroughputRow]:
    """Mean per-worker throughput of successful executions ended since `since`, per (action,
    GPU model, profile, count): what the population of throughput curves is built from. One
    aggregate read; the use case caches it for minutes."""
    if s.get_bind().dialect.name == "postgresql":
        # A background read, not the runner's: the 2 s statement timeout is not for it.
        timeout_ms = int(config.THROUGHPUT_POPULATION_TIMEOUT_S * 1000)
        s.execute(text(f"SET LOCAL statement_timeout = {timeout_ms}"))
    x = ExecutionRow
    rows = s.execute(
        select(x.action_id, x.gpu_model, x.profile, x.count, func.avg(x.throughput),
               func.count())
        .where(x.outcome == Outcome.SUCCEEDED.value, x.throughput > 0, x.ended_at >= since)
        .group_by(x.action_id, x.gpu_model, x.profile, x.count)
    ).all()
    return [ThroughputRow(r[0], r[1], r[2], int(r[3]), float(r[4]), int(r[5])) for r in rows]
