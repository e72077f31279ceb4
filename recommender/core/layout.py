"""Which MIG geometry each GPU should have so that the recorded demand fits.

A *geometry* is what one card is partitioned into: a count per profile, legal by the placement
search (`placement.place` on one idle GPU decides, and its placements are kept, so every advised
geometry places), or the card with MIG off. Only *maximal* geometries are candidates: one to
which no further instance fits, since adding an instance never serves less. An 8-slot card has
a few dozen; they are enumerated exactly, by a depth-first search over count vectors with the
placement search as the judge (fitting is monotone: fewer instances of a fitting vector fit).

**The search.** What a layout serves depends only on its total capacity per profile (see
`core.demand`: served(c) is a sum of concave per-profile terms), and capacity beyond a
profile's peak demand serves nothing. So each geometry is projected onto the demanded profiles,
capped at their peaks, projections that another one dominates are dropped, and the search is
over the reachable capped capacity vectors: after i GPUs, {min(r + g, peak) : r after i - 1,
g a projection}. That set is exact (every layout of N GPUs lands on one of its vectors) and
small while the demand's peaks are small; the best vector is the one that serves the most
instance-seconds, then the one that leaves the least memory idle, and a parent pointer per step
gives back which geometry each GPU gets.

When the set would exceed `config.LAYOUT_EXACT_STATES`, a heuristic takes over: GPUs are added
one at a time, each taking the geometry that serves the most on top of the ones before
(greedy), then one GPU at a time is switched to another geometry while that strictly improves
the layout. Its answer comes with an upper bound on what any layout could serve: the better
of two fractional knapsacks (the instances' placement units, and their compute slices, against
the N cards' totals; each instance of profile p at most N times its count on one card), which
are exact bounds because every per-profile term is concave.

**Stock layouts.** NVIDIA's mig-parted ships `all-balanced` and one `all-<profile>` per profile
(`deployments/systemd/config-default.yaml`): on the 7-compute-slice cards, all-balanced is two
instances of the smallest 1-slice profile, one 2-slice and one 3-slice (A100-40GB: 2 x 1g.5gb +
2g.10gb + 3g.20gb); on the 4-slice cards (A30, RTX PRO 6000), two 1-slice and one 2-slice. They
are scored on the same demand as alternatives.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import numpy as np

from recommender.core import config
from recommender.core.catalog import GpuModel
from recommender.core.demand import Demand, RunSource, demand_of
from recommender.core.geometry import (
    MIB_PER_GIB,
    Geometry,
    LayoutError,
    capacity_of,
    card_geometries,
    check_placeable,
    compute_of,
    stock_layouts,
)


@dataclass(frozen=True)
class Score:
    """How a layout does on a demand."""

    name: str
    served_fraction: float
    served_instance_s: float
    idle_memory_mib_s: float

    @property
    def idle_memory_gib_h(self) -> float:
        return self.idle_memory_mib_s / MIB_PER_GIB / 3600


def score(model: GpuModel, demand: Demand, gpus: Sequence[Geometry], name: str = "") -> Score:
    """Served fraction and idle memory (`core.demand`) of a layout on a demand."""
    cap = capacity_of(gpus)
    memory = _memory(model, demand.profiles)
    served_memory = demand.served_memory(cap, memory)
    return Score(name=name, served_fraction=demand.served_fraction(cap),
                 served_instance_s=demand.served(cap),
                 idle_memory_mib_s=len(gpus) * model.memory_mib * demand.seconds - served_memory)


def _memory(model: GpuModel, names: Sequence[str]) -> dict[str, int]:
    out = {}
    for n in names:
        p = model.profile(n)
        if p is not None:
            out[n] = p.memory_mib
    return out


@dataclass(frozen=True)
class Advice:
    model: GpuModel
    gpus: tuple[Geometry, ...]
    score: Score
    alternatives: tuple[Score, ...]
    exact: bool
    bound: float
    """Upper bound on the served fraction of any layout (equal to it when exact)."""
    reason: str
    ignored: tuple[str, ...] = ()
    """Demanded profiles this model does not have (recorded under another catalog)."""


def advise(model: GpuModel, demand: Demand, gpus: int, *,
           exact_states: int = config.LAYOUT_EXACT_STATES) -> Advice:
    """The layout of `gpus` cards that serves the most of `demand`, then leaves the least memory
    idle; NVIDIA's stock layouts scored beside it (module doc)."""
    check_placeable(model)
    if gpus <= 0:
        raise LayoutError(f"gpus: must be positive, got {gpus}")
    known = [p for p in demand.profiles
             if (q := model.profile(p)) is not None and (q.whole_gpu or q.placement is not None)]
    ignored = tuple(p for p in demand.profiles if p not in known)
    extra = tuple(sorted(p for p in known if (q := model.profile(p)) is not None
                         and not q.is_base and not q.whole_gpu))
    geometries = card_geometries(model, extra)
    stock = stock_layouts(model)
    alternatives = tuple(score(model, demand, [g] * gpus, name) for name, g in stock)
    if not known:
        fallback_name, fallback = stock[0]
        chosen = (fallback,) * gpus
        s = score(model, demand, chosen, "advised")
        why = ("no executions" if demand.empty else
               f"only profiles {model.id} does not have ({', '.join(ignored)})")
        reason = (f"{why} on {model.id} in the window: nothing to learn from, so the stock "
                  f"{fallback_name} layout")
        return Advice(model, chosen, s, alternatives, exact=True, bound=0.0, reason=reason,
                      ignored=ignored)
    peaks = np.array([demand.peak(p) for p in known], dtype=np.int64)
    projected: dict[tuple[int, ...], Geometry] = {}
    for g in geometries:
        counts = g.profiles
        vector = tuple(min(counts.get(p, 0), int(peaks[i])) for i, p in enumerate(known))
        projected.setdefault(vector, g)  # geometries come sorted: the first is kept
    vectors = [v for v in projected if any(v)] or list(projected)
    useful = [v for v in vectors
              if not any(w != v and all(a <= b for a, b in zip(v, w, strict=True))
                         for w in vectors)]
    useful.sort()
    options = np.array(useful, dtype=np.int64)
    tables = _tables(model, demand, known, peaks)
    picks = _exact(options, peaks, gpus, tables, exact_states)
    exact = picks is not None
    if picks is None:
        picks = _heuristic(options, peaks, gpus, tables)
    chosen = tuple(sorted((projected[useful[i]] for i in picks),
                          key=lambda g: (not g.mig_enabled, g.label)))
    s = score(model, demand, chosen, "advised")
    total = demand.instance_seconds()
    bound = s.served_fraction if exact else min(
        1.0, _upper_bound(model, demand, known, options, gpus) / total)
    return Advice(model, chosen, s, alternatives, exact=exact, bound=bound,
                  reason=_reason(model, demand, gpus, s, alternatives, exact, bound,
                                 len(geometries), ignored),
                  ignored=ignored)


@dataclass(frozen=True)
class _Tables:
    served: list[np.ndarray]
    """served[j][c]: instance-seconds profile j serves with capacity c (0..peak)."""
    memory: list[np.ndarray]
    """memory[j][c]: the MiB-seconds of those instances."""


def _tables(model: GpuModel, demand: Demand, known: Sequence[str], peaks: np.ndarray
            ) -> _Tables:
    mem = _memory(model, known)
    served = [np.concatenate(([0.0], np.cumsum(demand.held[p]))) for p in known]
    memory = [s * float(mem.get(p, 0)) for s, p in zip(served, known, strict=True)]
    return _Tables(served, memory)


def _values(states: np.ndarray, tables: _Tables) -> tuple[np.ndarray, np.ndarray]:
    served = np.zeros(len(states))
    memory = np.zeros(len(states))
    for j in range(states.shape[1]):
        served += tables.served[j][states[:, j]]
        memory += tables.memory[j][states[:, j]]
    return served, memory


def _best(served: np.ndarray, memory: np.ndarray) -> int:
    """Most served, then most served memory (least idle); ties to the lowest index. Values are
    rounded so that sums in a different order compare equal."""
    s = np.round(served, 3)
    m = np.round(memory, 0)
    order = np.lexsort((np.arange(len(s)), -m, -s))
    return int(order[0])


def _exact(options: np.ndarray, peaks: np.ndarray, gpus: int, tables: _Tables, limit: int
           ) -> list[int] | None:
    """Reachable capped capacity vectors, one GPU at a time; None past the state limit."""
    radix = peaks + 1
    weights = np.concatenate(([1], np.cumprod(radix[:-1]))).astype(np.int64)
    states = np.zeros((1, len(peaks)), dtype=np.int64)
    parents: list[tuple[np.ndarray, np.ndarray]] = []
    full = peaks.copy()
    k = len(options)
    for _ in range(gpus):
        grown = np.minimum(states[:, None, :] + options[None, :, :], peaks).reshape(-1, len(peaks))
        codes = grown @ weights
        _, first = np.unique(codes, return_index=True)
        states = grown[first]
        parents.append((first // k, first % k))
        if len(states) > limit:
            return None
        if (states == full).all(axis=1).any():
            break  # everything is served: no later GPU can do better
    served, memory = _values(states, tables)
    at = _best(served, memory)
    picks = []
    for parent, option in reversed(parents):
        picks.append(int(option[at]))
        at = int(parent[at])
    # GPUs after the demand was fully served take the best single geometry.
    if len(picks) < gpus:
        single_s, single_m = _values(np.minimum(options, peaks), tables)
        picks += [_best(single_s, single_m)] * (gpus - len(picks))
    return picks


def _heuristic(options: np.ndarray, peaks: np.ndarray, gpus: int, tables: _Tables
               ) -> list[int]:
    """Greedy, then improving one-GPU swaps (module doc)."""
    picks: list[int] = []
    total = np.zeros(len(peaks), dtype=np.int64)
    for _ in range(gpus):
        served, memory = _values(np.minimum(total + options, peaks), tables)
        best = _best(served, memory)
        picks.append(best)
        total += options[best]
    counts = np.bincount(np.array(picks), minlength=len(options))
    for _ in range(config.LAYOUT_SWAP_ROUNDS):
        here_s, here_m = _values(np.minimum(total, peaks)[None, :], tables)
        improved = False
        for a in np.flatnonzero(counts):
            trial = np.minimum(total - options[a] + options, peaks)
            served, memory = _values(trial, tables)
            b = _best(served, memory)
            gain = (round(float(served[b]), 3), round(float(memory[b]), 0))
            if gain > (round(float(here_s[0]), 3), round(float(here_m[0]), 0)):
                counts[a] -= 1
                counts[b] += 1
                total += options[b] - options[a]
                improved = True
                break
        if not improved:
            break
    return [int(i) for i in np.repeat(np.arange(len(options)), counts)]


def _upper_bound(model: GpuModel, demand: Demand, known: Sequence[str], options: np.ndarray,
                 gpus: int) -> float:
    """Instance-seconds no layout of `gpus` cards can exceed (module doc)."""
    per_card = options.max(axis=0)
    best = float("inf")
    for resource in ("units", "compute"):
        per_gpu = (model.placement_units or 0) if resource == "units" else model.compute_slices
        budget = float(gpus * per_gpu)
        items: list[tuple[float, float]] = []  # (seconds per resource, seconds)
        for j, p in enumerate(known):
            prof = model.profile(p)
            assert prof is not None
            if prof.whole_gpu:
                size = float(model.placement_units or 0) if resource == "units" else float(
                    model.compute_slices)
            else:
                size = float(prof.placement.size if prof.placement and resource == "units"
                             else prof.compute_slices)
            cap = int(per_card[j]) * gpus
            for held in demand.held[p][:cap]:
                items.append((held / size, held))
        items.sort(key=lambda x: -x[0])
        value, left = 0.0, budget
        for ratio, held in items:
            size = held / ratio if ratio > 0 else 0.0
            if size <= left:
                value += held
                left -= size
            else:
                value += ratio * left
                break
        best = min(best, value)
    return best


def _hours(seconds: float) -> str:
    return f"{seconds / 3600:,.1f}"


def _reason(model: GpuModel, demand: Demand, gpus: int, s: Score,
            alternatives: Sequence[Score], exact: bool, bound: float, candidates: int,
            ignored: Sequence[str]) -> str:
    peaks = ", ".join(f"{demand.peak(p)} x {p}" for p in demand.profiles if p not in ignored)
    method = (f"exact search over {candidates} one-card geometries" if exact else
              f"heuristic (greedy, then one-GPU swaps) over {candidates} one-card geometries; "
              f"no layout can serve more than {bound:.1%}")
    stock = {a.name: a for a in alternatives}
    best_stock = max(alternatives, key=lambda a: a.served_fraction)
    parts = [f"serves {s.served_fraction:.1%} of {_hours(demand.instance_seconds())} "
             f"instance-hours demanded on {gpus} {model.id} ({method}); peak at once: {peaks}"]
    if "all-balanced" in stock:
        parts.append(f"all-balanced serves {stock['all-balanced'].served_fraction:.1%}")
    if best_stock.name != "all-balanced":
        parts.append(f"the best stock layout, {best_stock.name}, "
                     f"{best_stock.served_fraction:.1%}")
    if ignored:
        parts.append(f"ignored profiles {model.id} does not have: {', '.join(ignored)}")
    return "; ".join(parts)


def mig_parted_config(model: GpuModel, gpus: Sequence[Geometry],
                      name: str = config.LAYOUT_CONFIG_NAME, comment: str = "") -> str:
    """The layout as a mig-parted configuration file (`nvidia-mig-parted apply -f FILE -c NAME`,
    or the `nvidia.com/mig.config=NAME` label with the GPU operator).

    GPU i of the layout is device index i; identical geometries share one entry, and a layout
    whose GPUs are all alike uses `devices: all`, so the same file serves every node of a pool.
    """
    lines = []
    if comment:
        lines += [f"# {line}".rstrip() for line in comment.splitlines()]
    lines += ["version: v1", "mig-configs:", f"  {name}:"]
    groups: dict[Geometry, list[int]] = {}
    for i, g in enumerate(gpus):
        groups.setdefault(g, []).append(i)
    for g, devices in groups.items():
        where = "all" if len(groups) == 1 else "[" + ", ".join(str(d) for d in devices) + "]"
        lines.append(f"    - devices: {where}")
        if not g.mig_enabled:
            lines.append("      mig-enabled: false")
            continue
        lines.append("      mig-enabled: true")
        lines.append("      mig-devices:")
        for p, n in sorted(g.counts, key=lambda pc: (compute_of(pc[0]), pc[0])):
            lines.append(f'        "{p}": {n}')
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class RecordedAdvice:
    """Advice learned from the executions recorded in a window."""

    advice: Advice
    demand: Demand
    executions: int
    pool_id: str = ""

    @property
    def config_name(self) -> str:
        return config.LAYOUT_CONFIG_NAME

    def mig_parted(self) -> str:
        a = self.advice
        where = f" on pool {self.pool_id}" if self.pool_id else ""
        comment = (
            f"IntelliScale layout advice for {len(a.gpus)} {a.model.id}{where}, learned from "
            f"{self.executions} executions\n"
            f"from {self.demand.since:%Y-%m-%dT%H:%MZ} to {self.demand.until:%Y-%m-%dT%H:%MZ}: "
            f"serves {a.score.served_fraction:.1%} of the demanded instance-hours.\n"
            f"Apply: nvidia-mig-parted apply -f FILE -c {self.config_name}, or label the nodes "
            f"nvidia.com/mig.config={self.config_name}.")
        return mig_parted_config(a.model, a.gpus, self.config_name, comment)


def advise_recorded(source: RunSource, model: GpuModel, gpus: int, since: datetime,
                    until: datetime, pool_id: str = "") -> RecordedAdvice:
    """The layout advice for the executions `source` recorded on `model` in [since, until)."""
    check_placeable(model)
    runs = source.runs_in_window(model.id, since, until, pool_id)
    demand = demand_of(runs, since, until)
    return RecordedAdvice(advise(model, demand, gpus), demand, len(runs), pool_id)


def fewest_gpus_serving_all(model: GpuModel, demand: Demand,
                            limit: int = config.LAYOUT_MAX_GPUS) -> int:
    """The fewest cards on which some layout serves all of `demand` (at most `limit`).

    Between the cards the peak needs if it packed perfectly and enough cards to give every
    profile its own (its peak over the most instances of it one card holds, summed), a binary
    search: what the best layout serves never falls as cards are added.
    """
    check_placeable(model)
    if demand.empty:
        return 1
    units = model.placement_units or 1
    per_card: dict[str, int] = {}
    size: dict[str, int] = {}
    for g in card_geometries(model, tuple(p for p in demand.profiles
                                          if (q := model.profile(p)) and not q.is_base)):
        for p, n in g.counts:
            per_card[p] = max(per_card.get(p, 0), n)
    for p in demand.profiles:
        prof = model.profile(p)
        size[p] = 0 if prof is None else units if prof.placement is None else prof.placement.size
    peak_units = max(sum(n * size[p] for p, n in zip(demand.profiles, level, strict=True))
                     for _, _, level in demand.segments())
    lo = max(1, -(-peak_units // units))
    hi = sum(-(-demand.peak(p) // per_card[p]) for p in demand.profiles if per_card.get(p))
    hi = max(lo, min(hi, limit))
    while lo < hi:
        mid = (lo + hi) // 2
        if advise(model, demand, mid).score.served_fraction >= 1 - 1e-9:
            hi = mid
        else:
            lo = mid + 1
    return lo
