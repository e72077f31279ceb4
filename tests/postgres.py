"""Scratch PostgreSQL databases for the tests and the benchmarks."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from sqlalchemy import create_engine, make_url, text
from sqlalchemy.pool import NullPool


def postgres_unreachable(url: str) -> str | None:
    """None when a database answers at `url` within 2 s, else why not (for tests and
    benchmarks deciding whether to run against PostgreSQL)."""
    try:
        engine = create_engine(url, connect_args={"connect_timeout": 2}, poolclass=NullPool)
        with engine.connect() as conn:
            conn.execute(text("SELECT 1"))
        engine.dispose()
        return None
    except Exception as e:
        return f"{type(e).__name__}: {e}".splitlines()[0]


@contextmanager
def scratch_postgres_database(admin_url: str, prefix: str,
                              before_drop: Callable[[], None] = lambda: None) -> Iterator[str]:
    """A new, empty PostgreSQL database beside `admin_url`'s, dropped afterwards (its
    connections ended first): for tests and benchmarks. `before_drop` runs first (a test that
    stops PostgreSQL starts it again there). The admin connections are not pooled, so a
    restart of the server in between leaves none stale."""
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT", poolclass=NullPool)
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield make_url(admin_url).set(database=name).render_as_string(hide_password=False)
    finally:
        before_drop()
        with admin.connect() as conn:
            conn.execute(text(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = :n"
            ), {"n": name})
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}"'))
        admin.dispose()
