"""Shared fixtures: databases (SQLite always, PostgreSQL when reachable) and a live server."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine

from recommender.core.catalog import Catalog, load_catalog
from recommender.core.ports import Store
from recommender.store import SqlStore, connect, migrate
from tests.fakes import InMemoryStore
from tests.harness.live import Live, serving
from tests.harness.stores import sql_store
from tests.postgres import postgres_unreachable, scratch_postgres_database

PG_ENV = "RECOMMENDER_TEST_POSTGRES_URL"
DEFAULT_PG = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
SHARED = Path(__file__).resolve().parents[2] / "shared"


@pytest.fixture(scope="session")
def catalog() -> Catalog:
    return load_catalog()


def _postgres_admin_url() -> str | None:
    """The admin URL when PostgreSQL answers; otherwise None (or a failure when required)."""
    url = os.environ.get(PG_ENV, DEFAULT_PG)
    why = postgres_unreachable(url)
    if why is None:
        return url
    if os.environ.get("RECOMMENDER_REQUIRE_POSTGRES"):
        raise RuntimeError(f"PostgreSQL required but unreachable at {url}: {why}")
    return None


@pytest.fixture(scope="session")
def postgres_admin_url() -> str:
    url = _postgres_admin_url()
    if url is None:
        pytest.skip(f"PostgreSQL not reachable (set {PG_ENV}); PostgreSQL tests skipped")
    return url


@pytest.fixture
def postgres_url(postgres_admin_url: str) -> Iterator[str]:
    """A fresh, empty database for one test, dropped afterwards."""
    with scratch_postgres_database(postgres_admin_url, "intelliscale_test") as url:
        yield url


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'recommender.db'}"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest) -> str:
    """Runs a test on both backends."""
    name = "sqlite_url" if request.param == "sqlite" else "postgres_url"
    return str(request.getfixturevalue(name))


@pytest.fixture
def migrated_engine(database_url: str) -> Iterator[Engine]:
    engine = connect(database_url)
    migrate(engine)
    yield engine
    engine.dispose()


@pytest.fixture
def store(migrated_engine: Engine) -> Iterator[SqlStore]:
    store = SqlStore(migrated_engine)
    yield store
    store.close()  # writes the recommendations it queued, before the database goes


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres),
                        "memory"])
def any_store(request: pytest.FixtureRequest) -> Iterator[Store]:
    """Runs a test against every implementation of the store port: `SqlStore` on SQLite and
    on PostgreSQL, and tests/fakes.py's `InMemoryStore`."""
    if request.param == "memory":
        yield InMemoryStore()
        return
    with sql_store(str(request.getfixturevalue(f"{request.param}_url"))) as store:
        yield store


@pytest.fixture
def live(store: SqlStore, catalog: Catalog) -> Iterator[Live]:
    with serving(store, catalog) as server:
        yield server
