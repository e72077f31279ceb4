"""An in-memory implementation of the store port (`recommender.core.ports.Store`).

The use-case tests run against it and against `SqlStore` alike (tests/test_usecases.py,
tests/test_store.py, tests/test_cache.py): what they assert then holds of the port, not of one
adapter's SQL. It keeps the SQL store's semantics, including the ones a caller can see only in
corner cases:

- a value comes back as a row would give it: datetimes in UTC, a recommendation's profiles
  without the catalog's placement rules, no OOM fields on a recommendation just saved;
- `record_execution` is idempotent on `execution_id`, and safe across threads;
- `save_rung_after_oom` stores one rung per parent: a retry gets the rung stored first, and the
  parent is marked only together with a rung that was stored;
- `action_samples` gives the `limit` newest executions, then the `limit` newest OOMs known
  only from NextAfterOom (a recommendation marked OOM whose execution was not recorded, under
  the recommendation's id or the runner's execution id);
- `throughput_summary` gives the mean throughput of successful executions per (action, GPU
  model, profile, count);
- `population_samples` gives the newest executions of any action that fitted or ran out of
  memory, with what they needed;
- `calibration_samples` gives, of the newest first attempts that stated a model chance, those
  whose outcome is known;
- `runs_in_window` gives the executions on a GPU model that overlap the window, as demand;
- `list_history` is keyset-paginated on (created_at, id), newest first, with the same filters;
  it raises ValueError ("page_token: ...") for a token it did not issue.

Set `available = False` and every call raises StoreUnavailable, as a database that is down.
"""

from __future__ import annotations

import base64
import json
import threading
from dataclasses import replace
from datetime import UTC, datetime

from recommender.core.calibration import CalibrationSample
from recommender.core.catalog import MigProfile
from recommender.core.demand import Run, run_of
from recommender.core.domain import (
    Execution,
    HistoryEntry,
    HistoryFilter,
    ModelVersion,
    Outcome,
    Rung,
    Sample,
    StoredRecommendation,
    StoreUnavailable,
    ThroughputRow,
)
from recommender.core.estimation import oom_bumped
from recommender.core.population import PopulationSample

Key = tuple[datetime, str]
"""(created_at, id): the order of the history, newest first."""


def _utc(value: datetime) -> datetime:
    return value.astimezone(UTC)


def _as_stored_profile(p: MigProfile) -> MigProfile:
    """What a stored recommendation keeps of a profile (not the catalog's placement rules)."""
    return MigProfile(name=p.name, compute_slices=p.compute_slices,
                      memory_slices=p.memory_slices, memory_mib=p.memory_mib, max_count=0,
                      placement=None, whole_gpu=p.whole_gpu)


def _as_stored_rung(r: Rung) -> Rung:
    return replace(r, profile=_as_stored_profile(r.profile), resources=dict(r.resources))


def _as_stored(rec: StoredRecommendation) -> StoredRecommendation:
    """A recommendation as saving it stores it: its OOM fields are set only by mark_oom and
    save_rung_after_oom."""
    d = rec.decision
    decision = replace(d, rung=_as_stored_rung(d.rung),
                       ladder=tuple(_as_stored_rung(r) for r in d.ladder))
    return replace(rec, created_at=_utc(rec.created_at), decision=decision, oom_at=None,
                   oom_observed_peak_mib=None)


def _encode_token(key: Key) -> str:
    created, rec_id = key
    return base64.urlsafe_b64encode(json.dumps(
        {"after": created.isoformat(), "id": rec_id}).encode()).decode()


def _decode_token(token: str) -> Key:
    try:
        raw = json.loads(base64.urlsafe_b64decode(token.encode()))
        return _utc(datetime.fromisoformat(raw["after"])), str(raw["id"])
    except Exception as e:
        raise ValueError("page_token: not a token this store issued") from e


class InMemoryStore:
    """Every method of `recommender.core.ports.Store`, on dicts behind one lock; plus
    `save_model_version` (the retraining job's write) for tests to set up versions."""

    def __init__(self) -> None:
        self.available = True
        self._lock = threading.Lock()
        self._recommendations: dict[str, StoredRecommendation] = {}
        self._child: dict[str, str] = {}
        """parent id -> the id of its one rung."""
        self._executions: dict[str, Execution] = {}
        self._versions: dict[str, ModelVersion] = {}

    def _check(self) -> None:
        if not self.available:
            raise StoreUnavailable("in-memory store: set unavailable by the test")

    # --- recommendations -------------------------------------------------------------

    def save_recommendation(self, rec: StoredRecommendation) -> None:
        with self._lock:
            self._check()
            self._insert(_as_stored(rec))

    def _insert(self, rec: StoredRecommendation) -> None:
        """As the table's keys do: one row per id, one rung per parent."""
        if rec.id in self._recommendations:
            raise StoreUnavailable(f"duplicate recommendation id {rec.id!r}")
        if rec.parent_id is not None and rec.parent_id in self._child:
            raise StoreUnavailable(f"recommendation {rec.parent_id!r} has a rung already")
        self._recommendations[rec.id] = rec
        if rec.parent_id is not None:
            self._child[rec.parent_id] = rec.id

    def get_recommendation(self, rec_id: str) -> StoredRecommendation | None:
        with self._lock:
            self._check()
            return self._recommendations.get(rec_id)

    def child_of(self, parent_id: str) -> StoredRecommendation | None:
        with self._lock:
            self._check()
            return self._child_of(parent_id)

    def _child_of(self, parent_id: str) -> StoredRecommendation | None:
        child = self._child.get(parent_id)
        return self._recommendations[child] if child is not None else None

    def mark_oom(self, rec_id: str, observed_peak_mib: float, at: datetime,
                 action_id: str = "") -> None:
        """The first OOM of a recommendation is the one kept."""
        with self._lock:
            self._check()
            rec = self._recommendations.get(rec_id)
            if rec is not None and rec.oom_at is None:
                self._mark(rec, observed_peak_mib, at)

    def _mark(self, rec: StoredRecommendation, observed_peak_mib: float, at: datetime) -> None:
        self._recommendations[rec.id] = replace(
            rec, oom_at=_utc(at), oom_observed_peak_mib=observed_peak_mib or None)

    def save_rung_after_oom(self, parent_id: str, observed_peak_mib: float, at: datetime,
                            rung: StoredRecommendation) -> StoredRecommendation:
        with self._lock:
            self._check()
            if rung.id in self._recommendations or (
                    rung.parent_id is not None and rung.parent_id in self._child):
                # A retry (the unique index on parent_id, in SQL): nothing is written, the
                # parent stays as the first call marked it, and that call's rung is the answer.
                existing = self._child_of(parent_id)
                if existing is None:
                    raise StoreUnavailable(f"recommendation id {rung.id!r} is taken")
                return existing
            self._insert(_as_stored(rung))
            parent = self._recommendations.get(parent_id)
            if parent is not None:
                self._mark(parent, observed_peak_mib, at)
            return rung

    # --- executions ------------------------------------------------------------------

    def record_execution(self, e: Execution, recorded_at: datetime) -> bool:
        with self._lock:
            self._check()
            if e.execution_id in self._executions:
                return False
            self._executions[e.execution_id] = replace(
                e, ended_at=_utc(e.ended_at),
                started_at=_utc(e.started_at) if e.started_at is not None else None,
                features=dict(e.features))
            return True

    def action_samples(self, action_id: str, limit: int) -> list[Sample]:
        with self._lock:
            self._check()
            executions = sorted((e for e in self._executions.values()
                                 if e.action_id == action_id),
                                key=lambda e: e.ended_at, reverse=True)[:limit]
            # Recorded: for the recommendation itself, or (a retry through NextAfterOom) under
            # the runner's execution id the recommendation was made for.
            recorded = {e.recommendation_id for e in self._executions.values()}
            ooms = sorted((r for r in self._recommendations.values()
                           if r.action_id == action_id and r.oom_at is not None
                           and r.id not in recorded
                           and not (r.execution_id and r.execution_id in self._executions)),
                          key=lambda r: r.oom_at or r.created_at, reverse=True)[:limit]
        samples = [Sample(at=e.ended_at, peak_mib=e.peak_memory_mib,
                          slice_mib=e.slice_memory_mib, outcome=e.outcome,
                          sm_utilization=e.sm_utilization, gpu_model=e.gpu_model,
                          profile=e.profile, throughput=e.throughput,
                          execution_id=e.execution_id, features=dict(e.features),
                          count=e.count, recommendation_id=e.recommendation_id)
                   for e in executions]
        return samples + [
            Sample(at=r.oom_at, peak_mib=r.oom_observed_peak_mib or 0.0,
                   slice_mib=r.decision.rung.profile.memory_mib, outcome=Outcome.OOM,
                   recommendation_id=r.id, run_id=r.execution_id)
            for r in ooms if r.oom_at is not None
        ]

    def population_samples(self, limit: int, before: datetime | None = None
                           ) -> list[PopulationSample]:
        """As `SqlStore.population_samples`: the `limit` latest executions of any action that
        say how much memory was needed (an OOM's bumped value), with the declared memory of
        their recommendation (0 when this store does not hold it); with `before`, of those
        ended by then."""
        with self._lock:
            self._check()
            latest = sorted((e for e in self._executions.values()
                             if e.outcome in (Outcome.SUCCEEDED, Outcome.OOM)
                             and (before is None or e.ended_at <= before)),
                            key=lambda e: e.ended_at, reverse=True)[:limit]
            declared = {e.execution_id: rec.declared_memory_mib for e in latest
                        if (rec := self._recommendations.get(e.recommendation_id)) is not None}
        return [PopulationSample(
            action_id=e.action_id, at_s=e.ended_at.timestamp(),
            need_mib=(e.peak_memory_mib if e.outcome is Outcome.SUCCEEDED
                      else oom_bumped(e.slice_memory_mib, e.peak_memory_mib)),
            declared_mib=float(declared.get(e.execution_id, 0)), features=dict(e.features))
            for e in latest]

    def calibration_samples(self, limit: int, before: datetime | None = None
                            ) -> list[CalibrationSample]:
        """As `SqlStore.calibration_samples`: of the `limit` latest first attempts with a model
        chance, those whose outcome is known (marked OOM, or an execution recorded on them);
        with `before`, made and known by then."""
        def by(at: datetime | None) -> bool:
            return at is not None and (before is None or at <= before)

        with self._lock:
            self._check()
            outcome = {e.recommendation_id: e.outcome for e in self._executions.values()
                       if by(e.ended_at)}
            latest = sorted((r for r in self._recommendations.values()
                             if r.decision.model_oom_chance is not None and by(r.created_at)),
                            key=lambda r: r.created_at, reverse=True)[:limit]
            firsts = [r for r in latest if by(r.oom_at)
                      or outcome.get(r.id) in (Outcome.SUCCEEDED, Outcome.OOM)]
        return [CalibrationSample(
            r.decision.rung.profile.memory_mib, float(r.decision.model_oom_chance or 0.0),
            by(r.oom_at) or outcome.get(r.id) is Outcome.OOM) for r in firsts]

    def throughput_summary(self, since: datetime) -> list[ThroughputRow]:
        """As `SqlStore.throughput_summary`: the mean per-worker throughput of successful
        executions ended since `since`, per (action, GPU model, profile, count)."""
        groups: dict[tuple[str, str, str, int], list[float]] = {}
        with self._lock:
            self._check()
            for e in self._executions.values():
                if e.outcome is Outcome.SUCCEEDED and e.throughput > 0 and e.ended_at >= since:
                    key = (e.action_id, e.gpu_model, e.profile, e.count)
                    groups.setdefault(key, []).append(e.throughput)
        return [ThroughputRow(*key, sum(v) / len(v), len(v)) for key, v in groups.items()]

    def runs_in_window(self, gpu_model: str, since: datetime, until: datetime,
                       pool_id: str = "") -> list[Run]:
        """As `SqlStore.runs_in_window`: executions on `gpu_model` that overlap [since,
        until); with `pool_id`, only those whose recommendation this store holds, on that pool."""
        with self._lock:
            self._check()
            chosen = [e for e in self._executions.values()
                      if e.gpu_model == gpu_model and e.ended_at > since
                      and (e.started_at is None or e.started_at < until)
                      and (not pool_id or self._pool_of(e) == pool_id)]
        runs = (run_of(e.profile, e.count, e.ended_at, e.started_at, e.duration_s)
                for e in chosen)
        return [run for run in runs if run.start < until]

    def _pool_of(self, e: Execution) -> str | None:
        rec = self._recommendations.get(e.recommendation_id)
        return rec.decision.rung.pool_id if rec is not None else None

    # --- history ---------------------------------------------------------------------

    def list_history(self, f: HistoryFilter, page_size: int, page_token: str = ""
                     ) -> tuple[list[HistoryEntry], str]:
        after = _decode_token(page_token) if page_token else None
        with self._lock:
            self._check()
            latest = self._latest_executions()
            entries = [self._entry(r, latest.get(r.id))
                       for r in self._recommendations.values()]
        chosen = sorted((e for e in entries if _matches(f, e, latest)
                         and (after is None or _key(e) < after)),
                        key=_key, reverse=True)[:page_size + 1]
        token = _encode_token(_key(chosen[page_size - 1])) if len(chosen) > page_size else ""
        return chosen[:page_size], token

    def _latest_executions(self) -> dict[str, Execution]:
        """Per recommendation, the execution that ended last (by id among equal ends)."""
        latest: dict[str, Execution] = {}
        for e in sorted(self._executions.values(), key=lambda e: (e.ended_at, e.execution_id)):
            latest[e.recommendation_id] = e
        return latest

    @staticmethod
    def _entry(rec: StoredRecommendation, e: Execution | None) -> HistoryEntry:
        if e is not None:
            return HistoryEntry(rec, e.outcome, e.peak_memory_mib)
        if rec.oom_at is not None:
            return HistoryEntry(rec, Outcome.OOM, rec.oom_observed_peak_mib)
        return HistoryEntry(rec, None, None)

    # --- model versions --------------------------------------------------------------

    def list_model_versions(self, kind: str = "") -> list[ModelVersion]:
        """Newest first, without their parameters."""
        with self._lock:
            self._check()
            versions = [replace(v, params={}) for v in self._versions.values()
                        if not kind or v.kind == kind]
        return sorted(versions, key=lambda v: v.created_at, reverse=True)

    def save_model_version(self, v: ModelVersion, *, expected_serving: str | None = None
                           ) -> bool:
        """As `SqlStore.save_model_version`: a version to serve replaces the serving one only
        if that is still `expected_serving`; otherwise it is stored unpromoted and False
        returned."""
        with self._lock:
            self._check()
            if v.version in self._versions:
                raise StoreUnavailable(f"duplicate model version {v.version!r}")
            serving = v.serving
            if serving:
                current = next((k for k, old in self._versions.items()
                                if old.kind == v.kind and old.serving), None)
                if current != expected_serving:
                    serving = False
                elif current is not None:
                    self._versions[current] = replace(self._versions[current], serving=False)
            self._versions[v.version] = replace(
                v, created_at=_utc(v.created_at), serving=serving,
                promoted=v.promoted and serving, metrics=dict(v.metrics), params=dict(v.params))
            return serving == v.serving


def _key(e: HistoryEntry) -> Key:
    return e.recommendation.created_at, e.recommendation.id


def _matches(f: HistoryFilter, entry: HistoryEntry, latest: dict[str, Execution]) -> bool:
    rec, rung = entry.recommendation, entry.recommendation.decision.rung
    executed = latest.get(rec.id)
    outcome = executed.outcome if executed is not None else None
    by_outcome = {
        "fitted": outcome is Outcome.SUCCEEDED,
        "oom": outcome is Outcome.OOM or rec.oom_at is not None,
        "unknown": executed is None and rec.oom_at is None,
    }
    return ((not f.action_id or rec.action_id == f.action_id)
            and (not f.pool_id or rung.pool_id == f.pool_id)
            and (not f.gpu_model or rung.gpu_model == f.gpu_model)
            and (not f.source or rec.decision.source == f.source)
            and (not f.created_after or rec.created_at >= f.created_after)
            and (not f.created_before or rec.created_at < f.created_before)
            and by_outcome.get(f.outcome, True))
