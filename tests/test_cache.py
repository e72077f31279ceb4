"""Per-action history cache: one database touch per Recommend, invalidated everywhere."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import Engine

from recommender.core.cache import ActionCache
from recommender.core.catalog import Catalog
from recommender.core.domain import Execution, Outcome, Request, Sample
from recommender.core.usecases import UseCases
from recommender.store import SqlStore, connect
from recommender.store.listener import ActionListener
from tests.builders import mk

T0 = datetime(2026, 11, 1, tzinfo=UTC)


class Counting(SqlStore):
    def __init__(self, engine: Engine) -> None:
        super().__init__(engine)
        self.reads = 0

    def action_samples(self, action_id: str, limit: int) -> list[Sample]:
        self.reads += 1
        return super().action_samples(action_id, limit)


def execution(eid: str, action: str = "act", peak: float = 3000.0) -> Execution:
    return Execution(eid, action, "", "A100-40GB", "1g.10gb", 9856, 1, peak, 10.0, 60.0, 0.0,
                     Outcome.SUCCEEDED, T0)


def test_cache_basics() -> None:
    now = [0.0]
    cache = ActionCache(max_actions=2, ttl_s=10, clock=lambda: now[0])
    s = [Sample(T0, 1.0, 2.0, Outcome.SUCCEEDED)]
    cache.put("a", s, 0.0, cache.generation("a"))
    assert cache.get("a") == s
    now[0] = 11
    assert cache.get("a") is None  # expired
    gen = cache.generation("b")
    cache.invalidate("b")  # changed while it was being read
    cache.put("b", s, now[0], gen)
    assert cache.get("b") is None
    for k in ("x", "y", "z"):
        cache.put(k, s, now[0], cache.generation(k))
    assert cache.get("x") is None and cache.get("z") == s  # LRU bound
    cache.enabled = False
    assert cache.get("z") is None


def test_recommend_reads_history_once_until_it_changes(
        migrated_engine: Engine, catalog: Catalog) -> None:
    store = Counting(migrated_engine)
    use_cases = UseCases(store, catalog=catalog, cache=ActionCache(),
                               clock=lambda: T0 + timedelta(hours=1))
    req = Request("act", "", (mk(catalog),), declared_memory_mib=7500)
    for i in range(5):
        store.record_execution(execution(f"e{i}"), T0)
    use_cases.recommend(req)
    use_cases.recommend(req)
    assert store.reads == 1
    use_cases.record_execution(execution("e-new", peak=9000))  # this replica: dropped at once
    d = use_cases.recommend(req).recommendation.decision
    assert store.reads == 2 and d.source == "history"


@pytest.mark.postgres
def test_other_replicas_hear_about_changes(postgres_url: str, catalog: Catalog) -> None:
    from recommender.store import migrate

    engine_a, engine_b = connect(postgres_url), connect(postgres_url)
    migrate(engine_a)
    cache_b = ActionCache()
    cache_b.enabled = False
    listener = ActionListener(engine_b, cache_b)
    listener.start()
    try:
        assert listener.connected.wait(10), "listener did not connect"
        a = UseCases(SqlStore(engine_a), catalog=catalog)
        store_b = Counting(engine_b)
        b = UseCases(store_b, catalog=catalog, cache=cache_b)
        req = Request("shared", "", (mk(catalog),), declared_memory_mib=7500)
        b.recommend(req)
        b.recommend(req)
        assert store_b.reads == 1
        a.record_execution(execution("from-a", "shared", peak=9000))
        deadline = time.monotonic() + 5
        while cache_b.get("shared") is not None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert cache_b.get("shared") is None, "replica B kept stale history"
        b.recommend(req)
        assert store_b.reads == 2
    finally:
        listener.stop()
        engine_a.dispose()
        engine_b.dispose()


def test_listener_failure_turns_the_cache_off() -> None:
    cache = ActionCache()
    listener = ActionListener(connect("postgresql+psycopg://postgres@127.0.0.1:1/none"), cache)
    listener.start()
    try:
        deadline = time.monotonic() + 5
        while cache.enabled and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not cache.enabled
    finally:
        listener.stop()
