"""A new action placed among the actions whose runs were nearest its request.

The population's prior (`core.population`) is one power law of the inputs with one spread
about it. Where memory is a footprint plus a part that grows with the inputs (weights and
context, then activations), no single power fits, and the spread about it is not one spread:
at a batch of 1 every action's peak is its footprint, a few GB whatever the action declared;
at a batch of 64 the actions that declared most are the ones whose activations dominate. The
one spread, fitted to all of them, is wide, and a new action's first run at a batch of 1 was
given a 20 GB slice for a 7 GB peak (`recommender evaluate --trace synthetic --max-actions
1000`: 39 of 141 first runs at a batch of 1 on a slice twice the one that held them).

So once enough actions have run (POPULATION_NEAREST_MIN_ACTIONS), a new action's first run
is read from the POPULATION_NEAREST actions that ran nearest its request, each by its run
nearest it among its latest POPULATION_POOL_RUNS: near in the inputs the request carries and
the memory it declared, each in log and in units of its spread across the runs. Their values
(log peak, or log peak over declared memory), moved to the inputs' centres by the same slopes
as the population's, give the prior's mean and spread there: the power law still moves the
prior the short way between those runs and the request, and the neighbours say where the level
and its spread really are. An action's run nearest the request says more than its first run
moved there by an average slope would (POPULATION_NEAREST: the first runs alone were measured
too). An input the request lacks is left out of the distance, not taken at its centre (a
request without inputs is not a request at the average input); a request with none of them is
placed by the power law, as before (declared memory alone was measured and not kept). Pure
numbers; built with the population.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from recommender.core import config
from recommender.core.arrays import FloatArray
from recommender.core.spread import Spread

if TYPE_CHECKING:
    from recommender.core.population import PopulationSample


@dataclass(frozen=True, eq=False)
class Nearest:
    """The actions' latest runs as points: their log inputs (`names`, in order) and, when
    `declared`, their log declared memory last, each centred and divided by its spread; each
    point knows its action (`owners`, the points of an action together)."""

    names: tuple[str, ...]
    declared: bool
    centres: FloatArray
    scales: FloatArray
    columns: FloatArray
    """The points column by column: one row per coordinate."""
    owners: NDArray[np.int64]
    actions: int
    moved: FloatArray
    """Each run's value less its inputs' shift to their centres."""
    unmoved: FloatArray
    """The same before the shift: for a prior that is not placed at the request's inputs."""
    least_scale: float
    """The run-to-run spread: the neighbours' spread is never taken below it."""

    @classmethod
    def of(cls, runs_of: Sequence[Sequence[PopulationSample]], names: Sequence[str],
           declared: bool, shift: Callable[[Mapping[str, float]], float], least_scale: float
           ) -> Nearest | None:
        """From each action's latest POPULATION_POOL_RUNS runs (those that declared memory,
        when `declared`), as the pooled slopes take them: one busy action does not crowd the
        others out, and the search stays bounded; None without inputs to measure nearness in,
        or with too few actions."""
        if not names:
            return None
        rows: list[list[float]] = []
        owners: list[int] = []
        unmoved: list[float] = []
        moved: list[float] = []
        actions = 0
        for runs in runs_of:
            mine = [s for s in runs[-config.POPULATION_POOL_RUNS:]
                    if s.declared_mib > 0 or not declared]
            for s in mine:
                row = [math.log(v) if (v := s.features.get(f, 0.0)) > 0 else math.nan
                       for f in names]
                value = math.log(s.need_mib)
                if declared:
                    row.append(math.log(s.declared_mib))
                    value -= math.log(s.declared_mib)
                rows.append(row)
                owners.append(actions)
                unmoved.append(value)
                moved.append(value - shift(s.features))
            actions += bool(mine)
        if actions < config.POPULATION_NEAREST_MIN_ACTIONS:
            return None
        raw = np.array(rows, dtype=np.float64)
        # A run without an input sits at its centre: no nearer to any request than the
        # average one, and no farther. (An input none of them carries moves no distance.)
        carried = ~np.all(np.isnan(raw), axis=0)
        centres = np.zeros(raw.shape[1])
        centres[carried] = np.nanmean(raw[:, carried], axis=0)
        raw = np.where(np.isnan(raw), centres, raw)
        spread = raw.std(axis=0)
        scales = np.where(spread > 1e-9, spread, 1.0)
        return cls(tuple(names), declared, centres, scales,
                   np.ascontiguousarray(((raw - centres) / scales).T),
                   np.array(owners, dtype=np.int64), actions, np.array(moved),
                   np.array(unmoved), least_scale)

    def said(self, features: Mapping[str, float], declared_mib: float) -> str:
        """What nearness was measured in, for the reason."""
        used = [f for f in self.names if features.get(f, 0.0) > 0]
        if self.declared and declared_mib > 0:
            used.append("declared memory")
        return "by " + ", ".join(used)

    def around(self, features: Mapping[str, float], declared_mib: float, moved: bool
               ) -> Spread | None:
        """The POPULATION_NEAREST actions nearest a request (in the inputs it carries and its
        declared memory); None when it carries none of the inputs."""
        coords = [(k, math.log(v)) for k, f in enumerate(self.names)
                  if (v := features.get(f, 0.0)) > 0]
        if not coords:
            return None  # declared memory alone: POPULATION_NEAREST says why not
        if self.declared and declared_mib > 0:
            coords.append((len(self.names), math.log(declared_mib)))
        # Column by column on the points stored column-major: a new action's Recommend pays a
        # fraction of a millisecond for it (POPULATION_NEAREST).
        distance = np.zeros(self.columns.shape[1])
        for k, x in coords:
            gap = self.columns[k] - (x - self.centres[k]) / self.scales[k]
            distance += gap * gap
        n = min(config.POPULATION_NEAREST, self.actions)
        # The nearest POPULATION_POOL_RUNS x n runs hold n actions at least (no action has
        # more runs here); each action is taken by its nearest.
        m = min(config.POPULATION_POOL_RUNS * n, len(distance))
        near = np.argpartition(distance, m - 1)[:m]
        near = near[np.argsort(distance[near], kind="stable")]
        _, first = np.unique(self.owners[near], return_index=True)
        chosen = near[np.sort(first)[:n]]
        values = (self.moved if moved else self.unmoved)[chosen]
        mean = float(values.sum()) / n
        gaps = values - mean
        spread = math.sqrt(float(gaps @ gaps) / (n - 1)) if n > 1 else 0.0
        return Spread(mean, max(spread, self.least_scale), n)
