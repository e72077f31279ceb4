"""Demand for MIG instances over a window, from the executions that ran, and what a layout serves.

**Demand.** Each recorded execution held `count` instances of its profile from its start to its
end (`started_at`, or `ended_at - duration_s` when the runner did not report a start). Clipped
to the window and summed, that gives, for every profile p, d_p(t): how many instances of p ran
at the same time at moment t. It is a step function: constant between consecutive starts and
ends. Executions of every outcome count (one that died of OOM held its instance while it ran).

**Served.** A layout gives a capacity c_p: how many instances of p its GPUs hold in all. At
moment t it can hold min(d_p(t), c_p) of the instances the demand asked for; an instance of
another profile does not help (a pod asks for `nvidia.com/mig-<p>`, and only that profile
satisfies it). The layout *serves*

    served(c) = sum over p of  integral over the window of  min(d_p(t), c_p) dt

instance-seconds, and its served fraction is served(c) / (sum over p of integral of d_p(t) dt):
the share of the demanded instance-hours the layout could have held at each moment. Each
instance counts the same whatever its size: the question an operator asks is how many pods would
have found a slice of the kind they asked for.

Because served(c) is a sum of one term per profile and each term is concave in c_p, the search
needs only, per profile, `held[k]` = how long at least k instances ran at once (k = 1..peak):
the k-th instance of capacity adds exactly held[k] seconds (see `Demand.served`).

**Idle memory** (the tie-break between layouts that serve the same): GPU memory that holds no
demanded instance, integrated over the window: cards x card memory x window - the memory-seconds
of the instances served. At equal instance-hours, the layout that serves the larger instances
leaves less memory idle.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Protocol, runtime_checkable


@dataclass(frozen=True)
class Run:
    """One recorded execution as demand: `count` instances of `profile` from `start` to `end`."""

    profile: str
    count: int
    start: datetime
    end: datetime


@runtime_checkable
class RunSource(Protocol):
    """Where recorded executions are read from (SqlStore.runs_in_window)."""

    def runs_in_window(self, gpu_model: str, since: datetime, until: datetime,
                       pool_id: str = "") -> list[Run]: ...


def run_of(profile: str, count: int, ended_at: datetime, started_at: datetime | None,
           duration_s: float) -> Run:
    """A recorded execution as a run: its start is `started_at`, or its end minus its duration."""
    start = started_at if started_at is not None else ended_at - timedelta(
        seconds=max(0.0, duration_s))
    return Run(profile=profile, count=max(1, count), start=min(start, ended_at), end=ended_at)


@dataclass(frozen=True)
class Demand:
    """The step functions d_p(t) over [since, until), per profile."""

    since: datetime
    until: datetime
    profiles: tuple[str, ...]
    """Profiles that ran, sorted by name."""
    times: tuple[datetime, ...]
    """Segment boundaries: segment i is [times[i], times[i + 1]); len(levels) + 1 of them."""
    levels: tuple[tuple[int, ...], ...]
    """Instances of each profile (in `profiles` order) running during each segment."""
    held: Mapping[str, tuple[float, ...]] = field(default_factory=dict)
    """held[p][k - 1]: seconds during which at least k instances of p ran at once."""

    @property
    def seconds(self) -> float:
        return max(0.0, (self.until - self.since).total_seconds())

    @property
    def empty(self) -> bool:
        return not self.profiles

    def peak(self, profile: str) -> int:
        """The most instances of `profile` that ran at once."""
        return len(self.held.get(profile, ()))

    def instance_seconds(self, profile: str | None = None) -> float:
        """Demanded instance-seconds, of one profile or of all."""
        if profile is not None:
            return sum(self.held.get(profile, ()))
        return sum(sum(h) for h in self.held.values())

    def served(self, capacity: Mapping[str, int]) -> float:
        """Instance-seconds a layout with `capacity` instances per profile holds (module doc)."""
        return sum(sum(self.held[p][:max(0, capacity.get(p, 0))]) for p in self.profiles)

    def served_fraction(self, capacity: Mapping[str, int]) -> float:
        """served / demanded; 0 when nothing was demanded (there is nothing to serve)."""
        total = self.instance_seconds()
        return self.served(capacity) / total if total > 0 else 0.0

    def served_memory(self, capacity: Mapping[str, int], memory_mib: Mapping[str, int]) -> float:
        """MiB-seconds of the instances a layout holds (the served side of idle memory)."""
        return sum(memory_mib.get(p, 0) * sum(self.held[p][:max(0, capacity.get(p, 0))])
                   for p in self.profiles)

    def segments(self) -> Iterable[tuple[datetime, datetime, tuple[int, ...]]]:
        """(start, end, instances per profile) for each step of the demand."""
        for i, level in enumerate(self.levels):
            yield self.times[i], self.times[i + 1], level


def demand_of(runs: Iterable[Run], since: datetime, until: datetime) -> Demand:
    """The demand of `runs` over [since, until): each run clipped to the window (module doc)."""
    deltas: dict[datetime, dict[str, int]] = {}
    names: set[str] = set()
    for r in runs:
        start, end = max(r.start, since), min(r.end, until)
        if end <= start or r.count <= 0:
            continue
        names.add(r.profile)
        at_start = deltas.setdefault(start, {})
        at_start[r.profile] = at_start.get(r.profile, 0) + r.count
        at_end = deltas.setdefault(end, {})
        at_end[r.profile] = at_end.get(r.profile, 0) - r.count
    profiles = tuple(sorted(names))
    index = {p: i for i, p in enumerate(profiles)}
    times: list[datetime] = []
    levels: list[tuple[int, ...]] = []
    current = [0] * len(profiles)
    # by_level[p][k]: seconds at exactly k instances of p; turned into "at least k" below.
    exactly: list[dict[int, float]] = [{} for _ in profiles]
    moments = sorted(deltas)
    for i, t in enumerate(moments):
        for p, d in deltas[t].items():
            current[index[p]] += d
        if i + 1 == len(moments):
            break
        times.append(t)
        levels.append(tuple(current))
        seconds = (moments[i + 1] - t).total_seconds()
        for j, n in enumerate(current):
            if n:
                exactly[j][n] = exactly[j].get(n, 0.0) + seconds
    if moments:
        times.append(moments[-1])
    held: dict[str, tuple[float, ...]] = {}
    for j, p in enumerate(profiles):
        peak = max(exactly[j], default=0)
        at_least = [0.0] * peak
        running = 0.0
        for k in range(peak, 0, -1):
            running += exactly[j].get(k, 0.0)
            at_least[k - 1] = running
        held[p] = tuple(at_least)
    # A profile whose every run was clipped to nothing does not count.
    kept = tuple(p for p in profiles if held[p])
    if kept != profiles:
        keep = [index[p] for p in kept]
        levels = [tuple(level[j] for j in keep) for level in levels]
        held = {p: held[p] for p in kept}
    return Demand(since=since, until=until, profiles=kept, times=tuple(times),
                  levels=tuple(levels), held=held)


def over_time(demand: Demand, capacities: Sequence[Mapping[str, int]], buckets: int
              ) -> tuple[list[datetime], list[float], list[list[float]]]:
    """Average instances demanded, and held by each of `capacities`, in `buckets` equal spans.

    Averages (instance-seconds / span) keep the areas: a chart of them shows the same served
    fractions as the numbers. Returns the span starts, the demand and one series per capacity.
    """
    buckets = max(1, buckets)
    total = demand.seconds
    width = total / buckets if total > 0 else 1.0
    starts = [demand.since + timedelta(seconds=width * b) for b in range(buckets)]
    asked = [0.0] * buckets
    held = [[0.0] * buckets for _ in capacities]
    caps = [[c.get(p, 0) for p in demand.profiles] for c in capacities]
    for start, end, level in demand.segments():
        a = (start - demand.since).total_seconds()
        b = (end - demand.since).total_seconds()
        want = sum(level)
        holds = [sum(min(n, cap) for n, cap in zip(level, cs, strict=True)) for cs in caps]
        first = min(buckets - 1, int(a // width))
        for k in range(first, buckets):
            lo, hi = max(a, k * width), min(b, (k + 1) * width)
            if hi <= lo:
                if k * width >= b:
                    break
                continue
            share = (hi - lo) / width
            asked[k] += want * share
            for s, h in enumerate(holds):
                held[s][k] += h * share
    return starts, asked, held
