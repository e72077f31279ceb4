"""Per-action history cached in each replica, so Recommend touches the database once (to store
the recommendation) instead of twice.

The runner's pattern is Recommend, then RecordExecution for the same action. If this replica's
own writes dropped the action's entry, every Recommend would read the history again (0 hits in
2,402 calls in that pattern). So its own writes update the entry in place: the new execution
goes in where a fresh read would put it (`with_execution`), an OOM marked through NextAfterOom
likewise (`with_oom`), and the result is what `Store.action_samples` would now return. Other
replicas' writes drop the entry (the store adapter's listener hears PostgreSQL notifications,
ignores the ones this replica sent, and calls `invalidate`), and in any case an entry is read
again after `CACHE_TTL_S`: the bound on staleness when notifications are not available (SQLite,
or the listener is reconnecting; the cache is not used while it is).
"""

from __future__ import annotations

import bisect
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence

from recommender.core import config
from recommender.core.domain import Sample

Change = Callable[[list[Sample]], list[Sample] | None]
"""A cached history -> the history after a write, or None when it cannot be known without
reading it again."""


class ActionCache:
    """A bounded LRU of action -> recent samples, safe across threads.

    A cached list is never changed once handed out: an update builds a new one, so a caller
    that is still estimating from the old list is not disturbed."""

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
        self.updates = 0
        """Own writes applied in place (the entry kept)."""

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

    def update(self, action_id: str, change: Change) -> None:
        """This replica committed a change to the action: apply it to the cached history.

        The generation moves on as for `invalidate`, so a read that was in flight during the
        write (it may or may not have seen it) is not cached; the entry itself, if any, is
        replaced by `change` of it, or dropped when `change` cannot tell. `change` must be
        idempotent: a read that started after the commit may have cached the change already.
        The entry keeps its read time, so the TTL still bounds what other replicas' writes
        could leave unseen.
        """
        with self._lock:
            self._generation[action_id] = self._generation.get(action_id, 0) + 1
            entry = self._entries.get(action_id)
            if entry is None:
                return
            changed = change(entry[1]) if self.enabled else None
            if changed is None:
                del self._entries[action_id]
                return
            self._entries[action_id] = (entry[0], changed)
            self.updates += 1

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


# --- what a write does to a history, as `Store.action_samples` returns it ---------------------
#
# A history is the action's `window` most recent executions, newest first, then the OOMs known
# only from NextAfterOom (recommendations marked OOM that no recorded execution names), newest
# first, `window` at most.


def _split(samples: Sequence[Sample]) -> tuple[list[Sample], list[Sample]] | None:
    """(executions, OOM-only samples), or None when a sample does not say which it is."""
    executions: list[Sample] = []
    ooms: list[Sample] = []
    for s in samples:
        if s.execution_id:
            executions.append(s)
        elif s.recommendation_id:
            ooms.append(s)
        else:
            return None
    return executions, ooms


def _insert_newest_first(samples: list[Sample], new: Sample) -> list[Sample]:
    """A copy with `new` placed by time, newest first (after any sample at the same time)."""
    keys = [-s.at_s for s in samples]
    out = list(samples)
    out.insert(bisect.bisect_right(keys, -new.at_s), new)
    return out


def with_execution(samples: Sequence[Sample], new: Sample, window: int) -> list[Sample] | None:
    """The history after `new` (an execution with its id) was recorded, or None when that
    cannot be told from the cached history alone."""
    parts = _split(samples)
    if parts is None or not new.execution_id:
        return None
    executions, ooms = parts
    if any(s.execution_id == new.execution_id for s in executions):
        return list(samples)  # the read that filled the entry saw it already
    executions = _insert_newest_first(executions, new)[:window]
    if new.recommendation_id or new.execution_id:
        # The store's rule (`action_samples`): an OOM-only sample gives way once the execution
        # it was for is recorded, under its recommendation or under the runner's execution id.
        kept = [s for s in ooms if s.recommendation_id != new.recommendation_id
                and not (s.run_id and s.run_id == new.execution_id)]
        if len(kept) < len(ooms) and len(ooms) >= window:
            return None  # an older OOM beyond the window would now come in
        ooms = kept
    return executions + ooms


def with_oom(samples: Sequence[Sample], oom: Sample, window: int, *, overwrite: bool
             ) -> list[Sample] | None:
    """The history after the recommendation `oom.recommendation_id` was marked OOM (at
    `oom.at`); `overwrite` when the mark replaces an earlier one (a rung stored after it),
    not when it is kept (`mark_oom` only marks a recommendation once). None when that cannot
    be told from the cached history alone."""
    parts = _split(samples)
    rec_id = oom.recommendation_id
    if parts is None or not rec_id or oom.execution_id:
        return None
    executions, ooms = parts
    if any(s.recommendation_id == rec_id or (oom.run_id and s.execution_id == oom.run_id)
           for s in executions):
        return list(samples)  # its execution is recorded: the mark adds no sample
    if len(executions) >= window:
        return None  # its execution could be recorded beyond the window
    earlier = [s for s in ooms if s.recommendation_id == rec_id]
    if earlier and not overwrite:
        return list(samples)
    ooms = _insert_newest_first([s for s in ooms if s.recommendation_id != rec_id], oom)
    return executions + ooms[:window]
