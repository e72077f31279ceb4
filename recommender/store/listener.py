"""Hears which actions other replicas changed (PostgreSQL LISTEN) and drops them from this
replica's history cache (`recommender.core.cache.ActionCache`).

A replica hears its own notifications too. It skips those (they carry its store's `origin`):
the use cases have already applied its own writes to the cache in place, and dropping the
entry would make the runner's next Recommend of the action read it again."""

from __future__ import annotations

import logging
import threading

from sqlalchemy import Engine

from recommender.core import config
from recommender.core.cache import ActionCache
from recommender.store.repository import ACTION_CHANNEL, parse_notification

log = logging.getLogger(__name__)


class ActionListener:
    """Listens on PostgreSQL for actions changed by any replica and drops them from the cache.

    While disconnected the cache is disabled (cleared and bypassed), so a missed notification
    can never serve stale history; it reconnects with backoff.
    """

    def __init__(self, engine: Engine, cache: ActionCache, origin: str = "") -> None:
        """`origin`: this replica's `SqlStore.origin`, whose notifications are skipped ("":
        none is, every write drops the entry)."""
        self.url = engine.url
        self.cache = cache
        self.origin = origin
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="action-listener", daemon=True)
        self.connected = threading.Event()

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=3)

    def _conninfo(self) -> str:
        import psycopg

        u = self.url
        params = {"host": u.host or "", "port": str(u.port or ""), "dbname": u.database or "",
                  "user": u.username or "", "password": u.password or "",
                  "connect_timeout": str(int(config.DATABASE_TIMEOUT_S) or 1)}
        return psycopg.conninfo.make_conninfo(**{k: v for k, v in params.items() if v})

    def _run(self) -> None:
        import psycopg

        backoff = 0.5
        while not self._stop.is_set():
            try:
                with psycopg.connect(self._conninfo(), autocommit=True) as conn:
                    conn.execute(f"LISTEN {ACTION_CHANNEL}")
                    self.cache.clear()  # whatever happened while we were away
                    self.cache.enabled = True
                    self.connected.set()
                    backoff = 0.5
                    while not self._stop.is_set():
                        for note in conn.notifies(timeout=1.0):
                            origin, action_id = parse_notification(note.payload)
                            if not origin or origin != self.origin:
                                self.cache.invalidate(action_id)
            except Exception as e:  # any failure: stop trusting the cache, reconnect
                self.cache.enabled = False
                self.cache.clear()
                self.connected.clear()
                if not self._stop.is_set():
                    log.warning("action listener disconnected (%s); cache off, retrying in "
                                "%.1f s", type(e).__name__, backoff)
                self._stop.wait(backoff)
                backoff = min(backoff * 2, 10.0)
