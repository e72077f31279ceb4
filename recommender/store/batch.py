"""Group commit: concurrent writes share one transaction.

Each caller hands its row to a writer thread and waits for the commit. The thread takes every
row waiting when it wakes, writes them in one statement and one commit, and answers each caller.
A lone caller waits only for its own commit; sixteen callers share one, which is what lets the
rate grow with concurrency instead of with the number of fsyncs. A caller is answered only
after the commit, so an acknowledged write is durable.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Generic, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")
R = TypeVar("R")


class GroupCommit(Generic[T, R]):
    def __init__(self, write: Callable[[Sequence[T]], Sequence[R]], name: str,
                 max_batch: int = 500) -> None:
        self._write = write
        self._max_batch = max_batch
        self._pending: list[tuple[T, Future[R]]] = []
        self._ready = threading.Condition()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._started = False

    def submit(self, item: T, timeout: float | None = None) -> R:
        future: Future[R] = Future()
        with self._ready:
            if not self._started:
                self._thread.start()
                self._started = True
            self._pending.append((item, future))
            self._ready.notify()
        return future.result(timeout)

    def _run(self) -> None:
        while True:
            with self._ready:
                while not self._pending:
                    self._ready.wait()
                batch = self._pending[: self._max_batch]
                del self._pending[: self._max_batch]
            try:
                results = self._write([item for item, _ in batch])
            except BaseException as e:  # every caller of the batch gets the failure
                for _, future in batch:
                    future.set_exception(e)
                continue
            for (_, future), result in zip(batch, results, strict=True):
                future.set_result(result)
