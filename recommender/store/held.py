"""A connection kept open for one writer.

The group-commit leader writes through it, so a commit skips the pool's checkout and its
liveness ping (together about 0.1 ms on SQLite and 0.2 ms on PostgreSQL, a third of a
one-row write). Only one thread uses it at a time: `GroupCommit` never runs two writes at once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import suppress
from typing import TypeVar

from sqlalchemy import Connection, Engine
from sqlalchemy.exc import DBAPIError

log = logging.getLogger(__name__)

T = TypeVar("T")


class HeldConnection:
    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._conn: Connection | None = None

    def run(self, work: Callable[[Connection], T]) -> T:
        """`work` in one transaction on the held connection, committed before returning.

        Any error drops the connection. When the database had dropped it while it sat idle (a
        restart, a failover, an idle timeout: what the pool's ping would have caught), `work`
        runs once more on a new connection: the writes we make are safe to repeat (inserts of
        new ids, or ON CONFLICT DO NOTHING). Other errors go to the caller.
        """
        reused = self._conn is not None
        try:
            return self._once(work)
        except DBAPIError as e:
            if not (reused and e.connection_invalidated):
                raise
            log.warning("writer connection lost (%s); writing on a new one",
                        str(e).splitlines()[0])
            return self._once(work)

    def _once(self, work: Callable[[Connection], T]) -> T:
        if self._conn is None:
            self._conn = self._engine.connect()
        conn = self._conn
        try:
            with conn.begin():
                return work(conn)
        except BaseException:
            self._conn = None
            with suppress(Exception):
                conn.invalidate()
            raise

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with suppress(Exception):
                conn.close()
