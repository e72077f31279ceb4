"""Executions from SQL as numpy columns (`recommender.core.dataset.Dataset`), read in chunks.

A million executions must not become a million Python objects at once: rows stream from the
database (server-side cursor on PostgreSQL) a chunk at a time and are appended to growing
column arrays; only the current chunk exists as tuples.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime

import numpy as np
from numpy.typing import NDArray
from sqlalchemy import Engine, select

from recommender.core.dataset import FAILED, OUTCOME_CODES, Dataset
from recommender.store.models import ExecutionRow, RecommendationRow


def _rows(engine: Engine, columns: Sequence[object], chunk: int,
          since: datetime | None, declared: bool = False
          ) -> Iterator[Sequence[tuple[object, ...]]]:
    """`columns` of the executions in end order; with `declared`, then the memory their
    recommendation's request declared (None for an execution without one)."""
    r = RecommendationRow
    stmt = select(*columns, *((r.declared_memory_mib,) if declared else ()))  # type: ignore[call-overload]
    if declared:
        stmt = stmt.outerjoin(r, r.id == ExecutionRow.recommendation_id)
    stmt = stmt.order_by(ExecutionRow.ended_at, ExecutionRow.execution_id)
    if since is not None:
        stmt = stmt.where(ExecutionRow.ended_at >= since)
    with engine.connect() as conn:
        result = conn.execution_options(stream_results=True, yield_per=chunk).execute(stmt)
        yield from result.partitions(chunk)


def _epoch(value: object) -> float:
    assert isinstance(value, datetime)
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.timestamp()


def read_executions(
    engine: Engine,
    *,
    max_features: int = 16,
    chunk: int = 20_000,
    since: datetime | None = None,
    progress: Callable[[int], None] | None = None,
) -> Dataset:
    """All executions (or those ended since `since`), oldest first.

    Two passes over the features column: the first counts feature names (the most frequent
    `max_features` become columns), the second fills the arrays.
    """
    counts: Counter[str] = Counter()
    for part in _rows(engine, [ExecutionRow.features], chunk, since):
        for (features,) in part:
            if isinstance(features, dict):
                counts.update(features.keys())
    names = sorted(n for n, _ in counts.most_common(max_features))
    col = {n: i for i, n in enumerate(names)}
    actions: dict[str, int] = {}
    models: dict[str, int] = {}
    parts: list[tuple[NDArray[np.float64], ...]] = []
    seen = 0
    columns = [ExecutionRow.action_id, ExecutionRow.features, ExecutionRow.peak_memory_mib,
               ExecutionRow.slice_memory_mib, ExecutionRow.outcome, ExecutionRow.ended_at,
               ExecutionRow.gpu_model, ExecutionRow.duration_s]
    for part in _rows(engine, columns, chunk, since, declared=True):
        n = len(part)
        x = np.full((n, len(names)), np.nan)
        meta = np.empty((n, 8), dtype=np.float64)
        for i, (action, features, peak, slice_mib, outcome, ended, model, duration,
                declared) in enumerate(part):
            if isinstance(features, dict):
                for k, v in features.items():
                    j = col.get(k)
                    if j is not None and isinstance(v, int | float) and math.isfinite(v):
                        x[i, j] = v
            meta[i] = (
                actions.setdefault(str(action), len(actions)),
                float(peak),  # type: ignore[arg-type]
                float(slice_mib),  # type: ignore[arg-type]
                OUTCOME_CODES.get(str(outcome), FAILED),
                _epoch(ended),
                models.setdefault(str(model), len(models)),
                float(duration),  # type: ignore[arg-type]
                float(declared or 0),  # type: ignore[arg-type]
            )
        parts.append((x, meta))
        seen += n
        if progress:
            progress(seen)
    if parts:
        x = np.concatenate([p[0] for p in parts])
        meta = np.concatenate([p[1] for p in parts])
    else:
        x = np.empty((0, len(names)))
        meta = np.empty((0, 8))
    return Dataset(
        actions=list(actions),
        features=names,
        action=meta[:, 0].astype(np.int32),
        x=x,
        peak=meta[:, 1],
        slice_mib=meta[:, 2],
        outcome=meta[:, 3].astype(np.int8),
        ended=meta[:, 4],
        gpu_model=meta[:, 5].astype(np.int16),
        gpu_models=list(models),
        duration_s=meta[:, 6],
        declared_mib=meta[:, 7],
    )
