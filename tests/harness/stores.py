"""A SQL store opened for a test and closed after it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from recommender.store import SqlStore, connect, migrate


@contextmanager
def sql_store(url: str, *, migrated: bool = True) -> Iterator[SqlStore]:
    """`SqlStore` on `url`, migrated first unless told not to (a database that cannot be
    reached is not); its writers' connections and its engine are closed afterwards."""
    engine = connect(url)
    if migrated:
        migrate(engine)
    store = SqlStore(engine)
    try:
        yield store
    finally:
        store.close()
        engine.dispose()
