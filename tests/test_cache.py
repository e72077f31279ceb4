"""Per-action history cache: one database touch per Recommend, invalidated everywhere."""

from __future__ import annotations

import time
from dataclasses import replace
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
    before = use_cases.recommend(req).recommendation.decision
    use_cases.recommend(req)
    assert store.reads == 1
    # This replica's own write updates the cached history in place: no read, and the same
    # decision as from a fresh read.
    use_cases.record_execution(replace(execution("e-new", peak=9000),
                                       ended_at=T0 + timedelta(minutes=1)))
    d = use_cases.recommend(req).recommendation.decision
    assert store.reads == 1 and d.source == "history"
    fresh = UseCases(store, catalog=catalog, clock=lambda: T0 + timedelta(hours=1))
    assert fresh.recommend(req).recommendation.decision == d
    assert d.predicted_peak_mib > before.predicted_peak_mib  # the new peak counts


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


def _as_read(samples: list[Sample] | None) -> list[tuple[object, ...]] | None:
    """What a history is, ids included (Sample equality leaves the ids out)."""
    if samples is None:
        return None
    return [(s.at, s.peak_mib, s.slice_mib, s.outcome, s.sm_utilization, s.gpu_model,
             s.profile, s.throughput, s.execution_id, s.recommendation_id) for s in samples]


def test_own_writes_keep_the_cached_history_exact(
        migrated_engine: Engine, catalog: Catalog, monkeypatch: pytest.MonkeyPatch) -> None:
    """After each kind of write this replica makes, the cached history is what a fresh read
    returns: executions newest first within the window, then OOMs known only from
    NextAfterOom; no read is made for it."""
    from recommender.core import config
    from recommender.core.ladder import LadderExhausted

    window = 4
    monkeypatch.setattr(config, "HISTORY_WINDOW", window)
    store = SqlStore(migrated_engine)
    cache = ActionCache()
    now = [T0 + timedelta(hours=2)]
    use_cases = UseCases(store, catalog=catalog, cache=cache, clock=lambda: now[0])

    def check(action: str) -> None:
        got = cache.get(action)
        assert got is not None, "the entry was dropped"
        assert _as_read(got) == _as_read(store.action_samples(action, window))

    def req(action: str) -> Request:
        return Request(action, "", (mk(catalog),), declared_memory_mib=7500)

    use_cases.recommend(req("act"))
    check("act")
    for i, minutes in enumerate([10, 5, 30, 1, 20, 40]):  # out of order; beyond the window
        use_cases.record_execution(replace(execution(f"e{i}", peak=3000 + i),
                                           ended_at=T0 + timedelta(minutes=minutes)))
        check("act")
    use_cases.record_execution(execution("e0", peak=1.0))  # a duplicate changes nothing
    check("act")
    # OOMs, on an action whose window is not full.
    first = use_cases.recommend(req("oom")).recommendation
    use_cases.record_execution(execution("o1", "oom"))
    check("oom")
    now[0] += timedelta(minutes=1)
    rung = use_cases.next_after_oom(first.id, 8000).recommendation  # marks `first` OOM
    check("oom")
    assert any(s.recommendation_id == first.id for s in cache.get("oom") or [])
    assert use_cases.next_after_oom(first.id, 8000).recommendation.id == rung.id  # a retry
    check("oom")
    # Its execution, recorded: the OOM-only sample gives way to it.
    use_cases.record_execution(replace(execution("o-oom", "oom", peak=0.0),
                                       recommendation_id=first.id, outcome=Outcome.OOM,
                                       ended_at=T0 + timedelta(hours=2)))
    check("oom")
    assert not any(s.recommendation_id == first.id and not s.execution_id
                   for s in cache.get("oom") or [])
    # Up the ladder to its top, where the last one is marked OOM without a rung.
    top = rung
    while True:
        now[0] += timedelta(minutes=1)
        try:
            top = use_cases.next_after_oom(top.id, 0.0).recommendation
        except LadderExhausted:
            break
        check("oom")
    check("oom")
    with pytest.raises(LadderExhausted):
        use_cases.next_after_oom(top.id, 0.0)  # marked once: the second mark keeps the first
    check("oom")
    assert cache.misses == 2  # one read per action: the writes needed none
    assert cache.updates > 0
    # A full window: an OOM mark drops the entry (its execution could be older than the
    # window), and the next read is exact again.
    use_cases.next_after_oom(use_cases.recommend(req("act")).recommendation.id, 0.0)
    assert cache.get("act") is None
    use_cases.recommend(req("act"))
    check("act")


def test_changes_it_cannot_follow_drop_the_entry() -> None:
    from recommender.core.cache import with_execution, with_oom

    ok = Sample(T0, 1.0, 2.0, Outcome.SUCCEEDED, execution_id="e1")
    unknown = Sample(T0, 1.0, 2.0, Outcome.SUCCEEDED)  # a store that does not say its ids
    new = Sample(T0 + timedelta(minutes=1), 3.0, 4.0, Outcome.SUCCEEDED, execution_id="e2",
                 recommendation_id="r9")
    assert with_execution([unknown], new, 10) is None
    assert with_execution([ok], replace(new, execution_id=""), 10) is None
    got = with_execution([ok], new, 10)
    assert got is not None and [s.execution_id for s in got] == ["e2", "e1"]
    assert [s.execution_id for s in with_execution([ok], new, 1) or []] == ["e2"]
    # Recording the execution of the oldest OOM-only sample in a full window: an older one
    # would come in, which only a read can tell.
    ooms = [Sample(T0, 0.0, 2.0, Outcome.OOM, recommendation_id=f"r{i}") for i in range(9, 7, -1)]
    assert with_execution([ok, *ooms], new, 2) is None
    oom = Sample(T0, 0.0, 2.0, Outcome.OOM, recommendation_id="r1")
    assert with_oom([unknown], oom, 10, overwrite=True) is None
    assert with_oom([ok], oom, 1, overwrite=True) is None  # its execution may be older
    cache = ActionCache()
    cache.put("a", [unknown], 0.0, cache.generation("a"))
    cache.update("a", lambda s: with_execution(s, new, 10))
    assert cache.get("a") is None
    gen = cache.generation("b")
    cache.update("b", lambda s: s)  # a write while "b" was being read: that read is not kept
    cache.put("b", [ok], 0.0, gen)
    assert cache.get("b") is None


@pytest.mark.postgres
def test_two_replicas_in_the_runners_pattern(postgres_url: str, catalog: Catalog) -> None:
    """Two servers on one PostgreSQL, each with its cache and listener, as `recommender serve`
    runs them. Each replica's Recommend/RecordExecution pairs hit its cache (its own
    notifications do not drop the entries it updated), its cached history stays what a fresh
    read returns, and a write through the other replica drops it."""
    import grpc

    from recommender._proto.intelliscale.recommender.v1 import recommender_pb2 as pb
    from recommender._proto.intelliscale.recommender.v1 import recommender_pb2_grpc as pb_grpc
    from recommender.core import config
    from recommender.rpc.server import start
    from recommender.store import migrate

    migrate_engine = connect(postgres_url)
    migrate(migrate_engine)
    migrate_engine.dispose()
    replicas = []
    try:
        for _ in range(2):
            engine = connect(postgres_url)
            store = SqlStore(engine)
            cache = ActionCache()
            cache.enabled = False
            listener = ActionListener(engine, cache, origin=store.origin)
            listener.start()
            assert listener.connected.wait(10), "listener did not connect"
            running = start(UseCases(store, catalog=catalog, cache=cache), catalog,
                            host="127.0.0.1", port=0)
            channel = grpc.insecure_channel(f"127.0.0.1:{running.port}")
            replicas.append((pb_grpc.RecommenderStub(channel), cache, store, listener,
                             running, channel, engine))

        def pair(replica: int, action: str, n: int) -> None:
            stub = replicas[replica][0]
            r = stub.Recommend(pb.RecommendRequest(
                action_id=action, workers=1, declared_memory_mib=7500,
                pools=[pb.Pool(pool_id="a100", gpu_model="A100-40GB",
                               strategy=pb.MIG_STRATEGY_MIXED)]), timeout=10)
            m = pb.ExecutionRecord(
                execution_id=f"{action}-{n}", action_id=action, gpu_model="A100-40GB",
                profile=r.profile.name, count=r.count, peak_memory_mib=5000.0 + 37 * n,
                sm_utilization=20.0, duration_s=60.0, outcome=pb.OUTCOME_SUCCEEDED,
                recommendation_id=r.recommendation_id)
            m.ended_at.FromDatetime(datetime.now(UTC))
            assert not stub.RecordExecution(m, timeout=10).duplicate

        def settled(replica: int, action: str) -> bool:
            cache, store = replicas[replica][1], replicas[replica][2]
            got = cache._entries.get(action)  # peek: get() would count a hit
            return got is None or _as_read(got[1]) == _as_read(
                store.action_samples(action, config.HISTORY_WINDOW))

        actions = [f"act-{k}" for k in range(5)]
        for n in range(8):  # replica 0 alone: its own pattern
            for action in actions:
                pair(0, action, n)
        time.sleep(0.5)  # its own notifications have arrived by now
        cache0 = replicas[0][1]
        assert cache0.hits / (cache0.hits + cache0.misses) >= 0.85  # 35 of 40
        for action in actions:
            assert cache0._entries.get(action) is not None, "own notification dropped it"
            assert settled(0, action)
        for n in range(8, 12):  # both, alternating: each one's writes drop the other's entry
            for action in actions:
                pair(n % 2, action, n)
                for replica in (0, 1):
                    deadline = time.monotonic() + 5
                    while not settled(replica, action) and time.monotonic() < deadline:
                        time.sleep(0.02)
                    assert settled(replica, action), f"replica {replica} kept stale history"
    finally:
        for _stub, _cache, store, listener, running, channel, engine in replicas:
            channel.close()
            running.stop(grace=1)
            listener.stop()
            store.close()
            engine.dispose()
