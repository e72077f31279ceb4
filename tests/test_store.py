"""Storage and Alembic migrations, on SQLite and on PostgreSQL."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import Engine, inspect

from recommender.core.catalog import Catalog
from recommender.core.domain import HistoryFilter, Outcome
from recommender.core.ports import Store
from recommender.core.usecases import UseCases
from recommender.store import SqlStore, StoreUnavailable, connect, migrate
from recommender.store.database import current_revision, downgrade
from recommender.store.repository import decode_cursor
from tests.builders import T0, execution, req


def test_migrations_upgrade_downgrade_upgrade(database_url: str) -> None:
    engine = connect(database_url)
    migrate(engine)
    assert current_revision(engine) == "0009"
    tables = set(inspect(engine).get_table_names())
    assert {"recommendations", "executions", "model_versions"} <= tables
    downgrade(engine, "base")
    assert current_revision(engine) is None
    assert not {"recommendations", "executions", "model_versions"} & set(
        inspect(engine).get_table_names())
    migrate(engine)
    migrate(engine)  # idempotent
    assert current_revision(engine) == "0009"
    engine.dispose()


def test_models_match_the_migrations(migrated_engine: object) -> None:
    """Autogenerate finds nothing to do: the tables are what the models say."""
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext

    from recommender.store.models import Base

    with migrated_engine.connect() as conn:  # type: ignore[attr-defined]
        diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
    assert diff == []


def test_record_is_idempotent_and_round_trips(store: SqlStore) -> None:
    assert store.record_execution(execution("e1"), T0)
    assert not store.record_execution(execution("e1", peak=1), T0)
    got = store.get_execution("e1")
    assert got is not None and got.peak_memory_mib == 3000 and got.features == {"batch": 8.0}
    assert got.ended_at == T0 and got.outcome is Outcome.SUCCEEDED


def test_concurrent_duplicates_insert_once(any_store: Store) -> None:
    results: list[bool] = []
    lock = threading.Lock()

    def worker() -> None:
        ok = any_store.record_execution(execution("same"), T0)
        with lock:
            results.append(ok)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == [False] * 7 + [True]


def use_cases_at(store: Store, when: datetime) -> UseCases:
    return UseCases(store, clock=lambda: when)


def test_samples_include_ooms_known_only_from_next_after_oom(any_store: Store,
                                                             catalog: Catalog) -> None:
    use_cases = use_cases_at(any_store, T0)
    first = use_cases.recommend(req(catalog)).recommendation
    use_cases.next_after_oom(first.id, 9000)
    samples = any_store.action_samples("act", 100)
    assert [(s.outcome, s.slice_mib, s.peak_mib) for s in samples] == [
        (Outcome.OOM, 9856, 9000)]
    # Once the runner records that execution, the OOM is not counted twice.
    any_store.record_execution(execution("x", peak=9800, outcome=Outcome.OOM, rec=first.id),
                               T0)
    assert len(any_store.action_samples("act", 100)) == 1


def test_history_pages_are_stable_under_inserts(any_store: Store, catalog: Catalog) -> None:
    for i in range(7):
        use_cases_at(any_store, T0 + timedelta(seconds=i)).recommend(req(catalog))
    page1, token = any_store.list_history(HistoryFilter(), 3)
    # New rows arrive between pages: they are newer, so they don't shift later pages.
    for i in range(5):
        use_cases_at(any_store, T0 + timedelta(hours=1, seconds=i)).recommend(req(catalog))
    page2, token2 = any_store.list_history(HistoryFilter(), 3, token)
    page3, token3 = any_store.list_history(HistoryFilter(), 3, token2)
    seen = [e.recommendation.created_at for e in page1 + page2 + page3]
    assert seen == [T0 + timedelta(seconds=s) for s in (6, 5, 4, 3, 2, 1, 0)]
    assert token3 == ""


def test_history_filters(any_store: Store, catalog: Catalog) -> None:
    use_cases = use_cases_at(any_store, T0)
    a = use_cases.recommend(req(catalog, "a")).recommendation
    b = use_cases.recommend(req(catalog, "b")).recommendation
    use_cases.recommend(req(catalog, "c"))
    any_store.record_execution(execution("ea", "a", rec=a.id), T0)
    use_cases.next_after_oom(b.id, 0)
    fitted, _ = any_store.list_history(HistoryFilter(outcome="fitted"), 10)
    assert [e.recommendation.action_id for e in fitted] == ["a"]
    assert fitted[0].outcome is Outcome.SUCCEEDED and fitted[0].peak_memory_mib == 3000
    oom, _ = any_store.list_history(HistoryFilter(outcome="oom"), 10)
    assert [e.recommendation.id for e in oom] == [b.id]
    unknown, _ = any_store.list_history(HistoryFilter(outcome="unknown"), 10)
    assert {e.recommendation.action_id for e in unknown} == {"b", "c"}  # b's rung, and c
    only_c, _ = any_store.list_history(HistoryFilter(action_id="c"), 10)
    assert len(only_c) == 1
    ladder, _ = any_store.list_history(HistoryFilter(source="ladder"), 10)
    assert [e.recommendation.parent_id for e in ladder] == [b.id]


def test_bad_page_token() -> None:
    with pytest.raises(ValueError, match="page_token"):
        decode_cursor("not-a-token")


def test_database_outage_degrades_recommend_and_refuses_record(catalog: Catalog) -> None:
    """Nothing listens on port 1: every query fails fast, nothing hangs."""
    down = SqlStore(connect("postgresql+psycopg://postgres@127.0.0.1:1/none"))
    use_cases = UseCases(down)
    answer = use_cases.recommend(req(catalog))
    assert not answer.stored
    d = answer.recommendation.decision
    assert d.source == "fallback" and "database unavailable" in d.reason
    assert d.rung.profile.name == "1g.10gb"  # the declared prior still applies
    with pytest.raises(StoreUnavailable):
        use_cases.record_execution(execution("e"))
    with pytest.raises(StoreUnavailable):
        use_cases.next_after_oom("whatever", 0)


def test_migration_0006_keeps_the_oldest_rung_of_each_parent(database_url: str,
                                                             catalog: Catalog) -> None:
    """Databases from before the unique index may hold several rungs for one parent."""
    from sqlalchemy import text

    engine = connect(database_url)
    migrate(engine)
    store = SqlStore(engine)
    use_cases = use_cases_at(store, T0)
    parent = use_cases.recommend(req(catalog)).recommendation
    rung = use_cases.next_after_oom(parent.id, 0).recommendation
    store.close()
    downgrade(engine, "0005")  # the schema from before the index, with these rows in it
    engine.dispose()
    engine = connect(database_url)
    store = SqlStore(engine)
    with engine.begin() as conn:  # a second rung, as concurrent retries used to store
        conn.execute(text(
            "INSERT INTO recommendations SELECT 'dup-rung', created_at, action_id, execution_id,"
            " parent_id, attempt, pool_id, gpu_model, profile, profile_memory_mib,"
            " compute_slices, memory_slices, whole_gpu, count, node_id, resources,"
            " predicted_peak_mib, quantile, source, model_version, reason, ladder, oom_at,"
            " oom_observed_peak_mib, card_compute_slices, node_gpus, predicted_throughput"
            " FROM recommendations WHERE id = :id"), {"id": rung.id})
    migrate(engine)
    assert store.child_of(parent.id) is not None
    with engine.connect() as conn:
        parents = conn.execute(text(
            "SELECT COUNT(*) FROM recommendations WHERE parent_id = :p"), {"p": parent.id}
        ).scalar_one()
    assert parents == 1
    engine.dispose()


@pytest.mark.postgres
def test_writers_reconnect_after_their_connection_is_killed(postgres_url: str) -> None:
    """The group-commit writers keep one connection each, unpinged. When the database has
    dropped it (a restart, a failover, an idle timeout), the next write notices and writes on a
    new connection, as the pool's ping would have made it do."""
    from sqlalchemy import create_engine, make_url, text

    engine = connect(postgres_url)
    migrate(engine)
    store = SqlStore(engine)
    try:
        assert store.record_execution(execution("before"), T0)
        name = make_url(postgres_url).database
        admin = create_engine(postgres_url, isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:
            killed = conn.execute(text(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE datname = :n AND pid <> pg_backend_pid()"), {"n": name}).scalar_one()
        admin.dispose()
        assert killed >= 1
        assert store.record_execution(execution("after"), T0)
        assert not store.record_execution(execution("after"), T0), "written once"
        assert store.get_execution("after") is not None
    finally:
        store.close()
        engine.dispose()


def _lose_the_answer_to_the_next_commit(engine: Engine, monkeypatch: pytest.MonkeyPatch
                                        ) -> dict[str, bool]:
    """The next commit reaches the database and then the connection drops: the caller cannot
    know whether it happened."""
    import sqlite3

    dialect = engine.dialect
    real_commit, real_is_disconnect = dialect.do_commit, dialect.is_disconnect
    armed = {"on": False}

    def do_commit(dbapi_conn: Any) -> None:
        real_commit(dbapi_conn)
        if armed["on"]:
            armed["on"] = False
            raise sqlite3.OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(dialect, "do_commit", do_commit)
    monkeypatch.setattr(dialect, "is_disconnect", lambda e, c, cur: (
        "closed the connection" in str(e) or real_is_disconnect(e, c, cur)))
    return armed


def test_a_commit_whose_answer_is_lost_is_not_written_again(
        sqlite_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Retrying would tell a first write it is a duplicate: the caller gets UNAVAILABLE and
    its retry (RecordExecution is idempotent) learns the truth."""
    engine = connect(sqlite_url)
    migrate(engine)
    store = SqlStore(engine)
    try:
        assert store.record_execution(execution("warm"), T0)
        armed = _lose_the_answer_to_the_next_commit(engine, monkeypatch)
        armed["on"] = True
        with pytest.raises(StoreUnavailable):
            store.record_execution(execution("lost-answer"), T0)
        assert store.get_execution("lost-answer") is not None, "the commit did happen"
        assert not store.record_execution(execution("lost-answer"), T0), "a retry: duplicate"
        assert store.record_execution(execution("next"), T0), "the writer reconnected"
    finally:
        store.close()
        engine.dispose()


def test_a_closed_store_refuses_writes_as_unavailable(sqlite_url: str) -> None:
    engine = connect(sqlite_url)
    migrate(engine)
    store = SqlStore(engine)
    assert store.record_execution(execution("before"), T0)
    store.close()
    with pytest.raises(StoreUnavailable, match="closed"):
        store.record_execution(execution("after"), T0)
    engine.dispose()


def test_a_decision_answered_again_is_stored_whole_with_each_answer(store: SqlStore,
                                                                    catalog: Catalog) -> None:
    """The use cases' memo answers a request seen before with the same Decision; its columns
    and its ladder's JSON are built once for all its rows, and each row still reads back as
    its own recommendation with the whole ladder."""
    import json

    from recommender.core.cache import ActionCache
    from recommender.store.database import to_json

    uc = UseCases(store, catalog=catalog, cache=ActionCache(), clock=lambda: T0)
    for i in range(5):
        uc.record_execution(execution(f"again-{i}", "again", peak=3000.0 + 100 * i,
                                      at=T0 - timedelta(hours=5 - i)))
    asked = req(catalog, "again")  # the memo knows pools by identity (the server interns them)
    first = uc.recommend(asked).recommendation
    second = uc.recommend(asked).recommendation
    assert second.decision is first.decision and second.id != first.id
    store.flush()
    for rec in (first, second):
        got = store.get_recommendation(rec.id)
        assert got is not None and got.id == rec.id and got.created_at == T0
        assert [(r.profile.name, r.count, r.resources) for r in got.decision.ladder] == [
            (r.profile.name, r.count, r.resources) for r in first.decision.ladder]
        assert len(got.decision.ladder) > 1
    # The serializer: json.dumps, a tuple's text kept by identity, a list never kept.
    rows = ({"a": 1}, {"b": [2]})
    assert to_json(rows) == json.dumps(rows) and to_json(rows) is to_json(rows)
    changing = [1]
    assert to_json(changing) == "[1]"
    changing.append(2)
    assert to_json(changing) == "[1, 2]"
