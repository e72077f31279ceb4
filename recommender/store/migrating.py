"""Migrating a database that is not up yet, while the server already answers without it.

Why: the servers and PostgreSQL often start together (a cluster restarted, a database failed
over). A server that refused to start until the database answered left the runner with no
answer at all, when a database outage at run time only costs it history-based answers
(Recommend falls back on the request alone and says so). So `serve` starts anyway, and this
thread migrates as soon as the database answers. Until then every store call fails and degrades,
as during any outage; a query that reaches a database not yet migrated fails the same way.

Why it gives up: a wrong URL, password or database name never heals, and a server that
answered from the request alone for ever would hide it. After the wait the server stops with
status 3 (as it always did at once), so an orchestrator shows a failing pod.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from recommender.core import config
from recommender.core.domain import StoreUnavailable

log = logging.getLogger(__name__)


class MigrationRetry:
    """Calls `migrate` with a growing pause between tries until it succeeds (`done` set) or
    `wait_s` has passed since start (`gave_up` holds the last error, `on_give_up` is called)."""

    def __init__(self, migrate: Callable[[], None], wait_s: float,
                 on_give_up: Callable[[], None],
                 clock: Callable[[], float] = time.monotonic,
                 first_pause_s: float = config.DATABASE_RETRY_FIRST_S,
                 max_pause_s: float = config.DATABASE_RETRY_MAX_S) -> None:
        self.migrate = migrate
        self.wait_s = wait_s
        self.on_give_up = on_give_up
        self.clock = clock
        self.first_pause_s = first_pause_s
        self.max_pause_s = max_pause_s
        self.done = threading.Event()
        self.gave_up: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self.run, name="migrate-when-up", daemon=True)
        self._thread.start()

    def run(self) -> None:
        deadline = self.clock() + self.wait_s
        pause = self.first_pause_s
        tries = 1  # the caller's own, which failed
        while not self._stop.wait(min(pause, max(deadline - self.clock(), 0.0))):
            tries += 1
            try:
                self.migrate()
            except StoreUnavailable as e:
                left = deadline - self.clock()
                if left <= 0:
                    self.gave_up = (f"{e} (still unavailable after {tries} tries "
                                    f"in {self.wait_s:g} s, --database-wait)")
                    log.error("database unavailable: giving up: %s", self.gave_up)
                    self.on_give_up()
                    return
                pause = min(pause * 2, self.max_pause_s)
                log.warning("database still unavailable (%s); answering without it, next try "
                            "in %.1f s, giving up in %.1f s", e,
                            min(pause, left), left)
                continue
            log.info("database reachable and migrated after %d tries: answers use history "
                     "again", tries)
            self.done.set()
            return

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.max_pause_s + 1)
