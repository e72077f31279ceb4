"""Write-behind: rows acknowledged now, written a moment later in batches by one thread.

For recommendation rows only (executions stay written before they are acknowledged). A lone
Recommend spent about 0.2 ms of its 0.55 ms on its own INSERT and commit; a batch written every
`RECOMMENDATION_WRITE_BEHIND_S` costs a few tens of microseconds a row, off the request path,
and sixteen callers no longer wait on each other's commit.

The queue is bounded. A row is written by the caller itself, as before (through the group
commit), when the queue is full or while the database is failing: then a failed write is the
caller's to see (Recommend answers `stored=false`), as it was without the queue, and rows queued
before the outage stay queued, to be written with the first write that succeeds. Readers of the
same store look a pending row up, or write the queue first (`SqlStore`); `close` writes what is
left.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")

CLOSE_WAIT_S = 10.0
"""How long `close` waits for a write the thread has begun (then writes what is left itself)."""


class WriteBehind(Generic[T]):
    """Pending rows by key, in arrival order, and the thread that has them written.

    `flush` writes every pending row (it calls `take` and `written`, and raises when the
    database fails); the thread calls it `delay_s` after the first row of a batch arrives, and
    every `retry_s` while a write keeps failing."""

    def __init__(self, flush: Callable[[], None], name: str, *, delay_s: float, limit: int,
                 retry_s: float) -> None:
        self._flush = flush
        self.name = name
        self._delay_s = delay_s
        self._limit = limit
        self._retry_s = retry_s
        self._pending: dict[str, T] = {}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._healthy = True
        self._closed = False
        self._thread: threading.Thread | None = None

    def add(self, key: str, item: T) -> bool:
        """Queues `item`; False when the caller must write it now (the queue is full, the last
        write failed, or the store is closing)."""
        with self._lock:
            if not self._healthy or self._closed or len(self._pending) >= self._limit:
                return False
            first = not self._pending
            self._pending[key] = item
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
                self._thread.start()
        if first:
            self._wake.set()
        return True

    def get(self, key: str) -> T | None:
        with self._lock:
            return self._pending.get(key)

    def __len__(self) -> int:
        return len(self._pending)

    def take(self) -> list[tuple[str, T]]:
        """What is pending now, oldest first (it stays pending until `written`)."""
        with self._lock:
            return list(self._pending.items())

    def written(self, keys: list[str]) -> None:
        """These rows are committed: no longer pending, and the database works."""
        with self._lock:
            for k in keys:
                self._pending.pop(k, None)
            self._healthy = True

    def failed(self) -> None:
        """The database failed: callers write their own rows until a write succeeds."""
        with self._lock:
            self._healthy = False

    def _run(self) -> None:
        while not self._closed:
            self._wake.wait()
            self._wake.clear()
            # Gather a batch: callers keep queueing meanwhile without waking anyone.
            self._stop.wait(self._delay_s)
            pause = self._retry_s
            failing = False
            while self._pending and not self._closed:
                try:
                    self._flush()
                except Exception as e:  # StoreUnavailable, kept queued: try again later
                    self.failed()
                    if not failing:  # once per outage, not once per retry
                        log.warning("%s: %d rows not written yet, will retry: %s", self.name,
                                    len(self._pending), e)
                    failing = True
                    self._stop.wait(pause)
                    pause = min(2 * pause, 16 * self._retry_s)
                else:
                    if failing:
                        log.warning("%s: the queued rows are written again", self.name)
                    failing = False
                    pause = self._retry_s

    def close(self) -> int:
        """Stops the thread and writes what is pending; returns how many rows could not be
        written (logged as lost)."""
        with self._lock:
            self._closed = True
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(CLOSE_WAIT_S)
        if self._pending:
            try:
                self._flush()
            except Exception as e:
                log.error("%s: %d rows lost at shutdown, the database failing: %s", self.name,
                          len(self._pending), e)
        return len(self._pending)
