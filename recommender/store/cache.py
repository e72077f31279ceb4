"""Per-action history cached in each replica, so Recommend touches the database once (to store
the recommendation) instead of twice.

An entry is dropped when this replica records an execution or an OOM of the action, when any
replica does (PostgreSQL NOTIFY on the `intelliscale_actions` channel, heard by a listener
thread), and in any case after `CACHE_TTL_S`: the bound on staleness when notifications are not
available (SQLite, or the listener is reconnecting; the cache is not used while it is).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable

from sqlalchemy import Engine

from recommender import config
from recommender.domain import Sample
from recommender.store.repository import ACTION_CHANNEL

log = logging.getLogger(__name__)


class ActionCache:
    """A bounded LRU of action -> recent samples, safe across threads."""

    def __init__(self, max_actions: int = config.CACHE_MAX_ACTIONS,
                 ttl_s: float = config.CACHE_TTL_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.max_actions = max_actions
        self.ttl_s = ttl_s
        self.clock = clock
        self.enabled = True
        self._entries: OrderedDict[str, tuple[float, list[Sample]]] = OrderedDict()
        self._generation: dict[str, int] = {}
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, action_id: str) -> list[Sample] | None:
        with self._lock:
            entry = self._entries.get(action_id) if self.enabled else None
            if entry is None or self.clock() - entry[0] > self.ttl_s:
                self.misses += 1
                return None
            self._entries.move_to_end(action_id)
            self.hits += 1
            return entry[1]

    def generation(self, action_id: str) -> int:
        """Take this before reading from the database and hand it to put()."""
        with self._lock:
            return self._generation.get(action_id, 0)

    def put(self, action_id: str, samples: list[Sample], read_at: float, generation: int
            ) -> None:
        """Caches a read, unless the action changed while it was being read."""
        with self._lock:
            if not self.enabled or self._generation.get(action_id, 0) != generation:
                return
            self._entries[action_id] = (read_at, samples)
            self._entries.move_to_end(action_id)
            while len(self._entries) > self.max_actions:
                self._entries.popitem(last=False)

    def invalidate(self, action_id: str) -> None:
        with self._lock:
            self._entries.pop(action_id, None)
            self._generation[action_id] = self._generation.get(action_id, 0) + 1

    def clear(self) -> None:
        with self._lock:
            for action_id in self._entries:
                self._generation[action_id] = self._generation.get(action_id, 0) + 1
            self._entries.clear()

    def now(self) -> float:
        return self.clock()


class ActionListener:
    """Listens on PostgreSQL for actions changed by any replica and drops them from the cache.

    While disconnected the cache is disabled (cleared and bypassed), so a missed notification
    can never serve stale history; it reconnects with backoff.
    """

    def __init__(self, engine: Engine, cache: ActionCache) -> None:
        self.url = engine.url
        self.cache = cache
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
                            self.cache.invalidate(note.payload)
            except Exception as e:  # any failure: stop trusting the cache, reconnect
                self.cache.enabled = False
                self.cache.clear()
                self.connected.clear()
                if not self._stop.is_set():
                    log.warning("action listener disconnected (%s); cache off, retrying in "
                                "%.1f s", type(e).__name__, backoff)
                self._stop.wait(backoff)
                backoff = min(backoff * 2, 10.0)
