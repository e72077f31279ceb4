"""Per-action history cached in each replica, so Recommend touches the database once (to store
the recommendation) instead of twice.

An entry is dropped when this replica records an execution or an OOM of the action, when any
replica does (the store adapter's listener hears PostgreSQL notifications and calls
`invalidate`), and in any case after `CACHE_TTL_S`: the bound on staleness when notifications
are not available (SQLite, or the listener is reconnecting; the cache is not used while it is).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable

from recommender.core import config
from recommender.core.domain import Sample


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
