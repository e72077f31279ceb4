"""Recommendations written behind (store/behind.py): visible soon to other replicas, found at
once by this one, kept through a failing database, written at close."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
from sqlalchemy import Engine

from recommender.core import config
from recommender.core.catalog import Catalog
from recommender.core.domain import HistoryFilter, StoreUnavailable
from recommender.core.usecases import UseCases
from recommender.store import SqlStore
from recommender.store.behind import WriteBehind
from tests.builders import T0, execution, req

# --- the queue alone ----------------------------------------------------------------------


class Flushes:
    def __init__(self, queue: list[WriteBehind[int]]) -> None:
        self.queue = queue
        self.batches: list[list[int]] = []
        self.fail = False
        self.done = threading.Event()

    def __call__(self) -> None:
        if self.fail:
            raise StoreUnavailable("down")
        taken = self.queue[0].take()
        self.batches.append([v for _, v in taken])
        self.queue[0].written([k for k, _ in taken])
        self.done.set()


def queue(delay_s: float = 0.01, limit: int = 100) -> tuple[WriteBehind[int], Flushes]:
    box: list[WriteBehind[int]] = []
    flushes = Flushes(box)
    box.append(WriteBehind(flushes, "test", delay_s=delay_s, limit=limit, retry_s=0.01))
    return box[0], flushes


def test_rows_queued_together_are_written_in_one_batch_soon() -> None:
    q, flushes = queue(delay_s=0.2)
    for i in range(5):
        assert q.add(str(i), i)
    assert q.get("3") == 3
    assert flushes.done.wait(5)
    assert flushes.batches == [[0, 1, 2, 3, 4]]
    assert q.get("3") is None and len(q) == 0
    assert q.close() == 0


def test_a_full_queue_or_a_failing_database_has_the_caller_write() -> None:
    q, flushes = queue(delay_s=30, limit=2)
    assert q.add("a", 1) and q.add("b", 2)
    assert not q.add("c", 3)  # full
    q.written(["a", "b"])
    assert q.add("c", 3)
    q.failed()
    assert not q.add("d", 4)  # the caller sees the failure itself
    q.written([])  # a write succeeded
    assert q.add("d", 4)
    flushes.fail = True
    assert q.close() == 2  # c and d could not be written
    flushes.fail = False


def test_failed_writes_keep_the_rows_and_retry() -> None:
    q, flushes = queue(delay_s=0.01)
    flushes.fail = True
    assert q.add("a", 1)
    time.sleep(0.1)
    assert q.get("a") == 1 and not flushes.batches
    flushes.fail = False
    assert flushes.done.wait(5)
    assert flushes.batches == [[1]]
    q.close()


# --- on the SQL store ---------------------------------------------------------------------


@pytest.fixture
def slow_behind(monkeypatch: pytest.MonkeyPatch) -> None:
    """The queue is written only when asked (or at close) within a test."""
    monkeypatch.setattr(config, "RECOMMENDATION_WRITE_BEHIND_S", 60.0)


@pytest.fixture
def held(migrated_engine: Engine, slow_behind: None) -> Iterator[SqlStore]:
    store = SqlStore(migrated_engine)
    yield store
    store.close()


def test_another_replica_sees_the_row_within_the_bound(migrated_engine: Engine,
                                                      catalog: Catalog) -> None:
    writer, reader = SqlStore(migrated_engine), SqlStore(migrated_engine)
    rec = UseCases(writer, clock=lambda: T0).recommend(req(catalog)).recommendation
    t0 = time.monotonic()
    while reader.get_recommendation(rec.id) is None and time.monotonic() - t0 < 5:
        time.sleep(0.005)
    waited = time.monotonic() - t0
    assert reader.get_recommendation(rec.id) is not None
    assert waited < config.RECOMMENDATION_WRITE_BEHIND_S + 0.5, waited
    writer.close()
    reader.close()


def test_this_replica_uses_a_queued_recommendation_at_once(held: SqlStore,
                                                           catalog: Catalog) -> None:
    use_cases = UseCases(held, clock=lambda: T0)
    first = use_cases.recommend(req(catalog))
    assert first.stored and held._behind.get(first.recommendation.id) is not None
    assert use_cases.record_execution(execution("e1", rec=first.recommendation.id))
    again = use_cases.recommend(req(catalog)).recommendation
    assert held._behind.get(again.id) is not None
    got = held.get_recommendation(again.id)
    assert got is not None and got.decision.rung.profile.name == again.decision.rung.profile.name
    assert got.decision.predicted_peak_mib == again.decision.predicted_peak_mib
    rung = use_cases.next_after_oom(again.id, 9000).recommendation
    assert rung.parent_id == again.id and rung.decision.attempt == 2
    entries, _ = held.list_history(HistoryFilter(), 10)
    by_id = {e.recommendation.id: e for e in entries}
    assert set(by_id) == {first.recommendation.id, again.id, rung.id}
    assert by_id[first.recommendation.id].outcome is not None  # linked, though queued
    assert by_id[again.id].recommendation.oom_at is not None


def test_close_writes_the_queue(migrated_engine: Engine, slow_behind: None,
                                catalog: Catalog) -> None:
    store = SqlStore(migrated_engine)
    use_cases = UseCases(store)
    ids = [use_cases.recommend(req(catalog, f"a{i}")).recommendation.id for i in range(3)]
    assert len(store._behind) == 3
    store.close()
    other = SqlStore(migrated_engine)
    assert all(other.get_recommendation(i) is not None for i in ids)
    other.close()


def test_a_failing_database_answers_stored_false_and_keeps_what_was_queued(
        held: SqlStore, catalog: Catalog, monkeypatch: pytest.MonkeyPatch) -> None:
    use_cases = UseCases(held)
    queued = use_cases.recommend(req(catalog, "a")).recommendation
    real = held._write
    down = [True]

    def failing(*args: object, **kwargs: object) -> object:
        if down[0]:
            held._behind.failed()
            raise StoreUnavailable("database error: down")
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(held, "_write", failing)
    with pytest.raises(StoreUnavailable):
        held.flush()
    assert held._behind.get(queued.id) is not None  # still queued
    during = use_cases.recommend(req(catalog, "b"))
    assert not during.stored  # as without the queue: the caller saw the failure
    down[0] = False
    after = use_cases.recommend(req(catalog, "c"))
    assert after.stored and len(held._behind) == 0  # written with the queue, synchronously
    assert held.get_recommendation(queued.id) is not None
    assert held.get_recommendation(during.recommendation.id) is None
    assert held.count_recommendations() == 2
    assert use_cases.recommend(req(catalog, "d")).stored
    assert len(held._behind) == 1  # queued again once the database works
