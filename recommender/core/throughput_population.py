"""The population of throughput curves, read from the store and kept for a few minutes.

A size an action never ran is predicted from other actions on the same GPU model that did
(recommender.core.throughput.Population). That population is built here from one aggregate read of
recent successful executions (mean per-worker throughput per action, GPU model, profile and
count), refreshed at most every `THROUGHPUT_POPULATION_TTL_S`: it changes only as actions run
on new sizes, so a replica reading it every few minutes sees a new size within minutes and
costs the database one grouped query per replica per TTL, never one per Recommend.

Why here and not in the offline retraining job: the shape is a summary, not a model that needs
a champion and a challenger, and it must be there from the first executions, before any
retraining has run (or would promote anything). Every replica computes the same thing from the
same table.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import datetime, timedelta

from recommender.core import config
from recommender.core.catalog import Catalog
from recommender.core.domain import ThroughputRow
from recommender.core.throughput import EMPTY, Population, ThroughputSample

log = logging.getLogger(__name__)

Reader = Callable[[datetime], "list[ThroughputRow] | None"]
"""Rows ended since the given time, or None when the store cannot be read now."""


def memory_slices_by_size(catalog: Catalog) -> dict[str, dict[int, int]]:
    """Per GPU model, the memory slices of the base profile with each compute-slice count
    (the fewest when several share it: 1g.10gb rather than 1g.20gb)."""
    out: dict[str, dict[int, int]] = {}
    for model in catalog:
        sizes: dict[int, int] = {}
        for p in model.profiles:
            if p.is_base and not p.whole_gpu:
                sizes[p.compute_slices] = min(sizes.get(p.compute_slices, p.memory_slices),
                                              p.memory_slices)
        out[model.id] = sizes
    return out


def build(catalog: Catalog, rows: list[ThroughputRow]) -> Population:
    """The population from summary rows; rows on unknown models or profiles are skipped."""
    samples: list[tuple[str, ThroughputSample]] = []
    for r in rows:
        model = catalog.resolve(r.gpu_model)
        profile = model.profile(r.profile) if model else None
        if model is None or profile is None or r.throughput <= 0:
            continue
        samples.append((r.action_id, ThroughputSample(model.id, profile.compute_slices,
                                                      r.throughput, max(r.count, 1))))
    return Population.from_samples(samples, memory_slices_by_size(catalog))


class PopulationCache:
    """The current population, refreshed when older than the TTL (by the use case's clock).

    The read is a full grouped scan of recent executions (about a second at 200,000 of them,
    bench/throughput_population.py), so by default it runs in a background thread and
    Recommend keeps using the previous population meanwhile; a replica that has none yet
    answers without borrowed shapes (cautiously) until its first read completes.
    `background=False` reads inline, for deterministic replays. A store that cannot be read
    leaves the previous population (or none) in place for a tenth of the TTL.
    """

    def __init__(self, catalog: Catalog, read: Reader, clock: Callable[[], datetime],
                 ttl_s: float = config.THROUGHPUT_POPULATION_TTL_S, background: bool = True
                 ) -> None:
        self.catalog = catalog
        self.read = read
        self.clock = clock
        self.ttl = timedelta(seconds=ttl_s)
        self.background = background
        self.memory_slices = memory_slices_by_size(catalog)
        self._population: Population | None = None
        self._read_at: datetime | None = None
        self._lock = threading.Lock()

    def get(self) -> Population:
        now = self.clock()
        if self._read_at is None or now - self._read_at >= self.ttl:
            if self.background:
                if self._lock.acquire(blocking=False):
                    threading.Thread(target=self._refresh, args=(now, True),
                                     name="throughput-population", daemon=True).start()
            else:
                with self._lock:
                    self._refresh(now, False)
        return self._population or EMPTY

    def _refresh(self, now: datetime, release: bool) -> None:
        try:
            rows = self.read(now - timedelta(days=config.THROUGHPUT_POPULATION_DAYS))
            if rows is not None:
                population = build(self.catalog, rows)
                self._population, self._read_at = population, now
                log.debug("throughput population: %d actions", population.actions)
            else:
                # Unreadable: keep what we had, try again after a tenth of the TTL rather
                # than on every Recommend.
                self._read_at = now - self.ttl * 0.9
        except Exception:  # a background thread must not die silently
            log.exception("throughput population not refreshed")
            self._read_at = now - self.ttl * 0.9
        finally:
            if release:
                self._lock.release()

    def wait(self) -> None:
        """Until a background refresh in progress has finished (tests, benchmarks)."""
        with self._lock:
            pass

    def invalidate(self) -> None:
        """Read again on the next call."""
        self._read_at = None
