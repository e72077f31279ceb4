"""What other actions say about a new one: the cold-start prior and the spread to expect.

A new action is not a blank: across the actions a service has seen, first peaks have a
distribution, and (when users declare memory) real peaks relate to declared figures in a way
that holds across users ("declared 16 GB, used 6" is common). So a new action starts from the
population, on a slice chosen by expected cost, instead of the largest slice; only when nothing
at all is known (a new service) does the largest slice remain.

Built from the most recent executions across actions (one bounded query, refreshed now and then
by the use cases); pure numbers here.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from recommender.core import config
from recommender.core.predictive import Predictive


@dataclass(frozen=True)
class PopulationSample:
    """One recent execution of some action, as the population sees it."""

    action_id: str
    at_s: float
    need_mib: float
    """Its peak (an OOM's bumped value)."""
    declared_mib: float = 0.0


@dataclass(frozen=True)
class Population:
    actions: int
    log_scale: float
    """Typical spread of an action's own log peaks: the prior of every action's scale."""
    first_loc: float | None
    first_scale: float
    first_actions: int
    """Log first peak across actions: where a new action without a declared figure starts."""
    declared_loc: float | None
    declared_scale: float
    declared_actions: int
    """Log (first peak / declared) across actions that declared memory."""

    def prior(self, declared_mib: float) -> tuple[Predictive, str] | None:
        """The predictive need of a new action, and what it was learned from."""
        df_extra = config.ONLINE_PRIOR_DF
        if declared_mib > 0 and self.declared_loc is not None:
            loc = math.log(declared_mib) + self.declared_loc
            return (Predictive(loc, self.declared_scale, self.declared_actions - 1 + df_extra),
                    f"declared {declared_mib:,.0f} MiB x {math.exp(self.declared_loc):.2f}, "
                    f"how first peaks relate to declared memory across "
                    f"{self.declared_actions} actions")
        if self.first_loc is not None:
            return (Predictive(self.first_loc, self.first_scale,
                               self.first_actions - 1 + df_extra),
                    f"first peaks of {self.first_actions} other actions")
        return None


def _spread(values: Sequence[float]) -> float:
    return statistics.stdev(values) if len(values) > 1 else 0.0


def on_grid(scale: float) -> float:
    """The nearest point of a grid POPULATION_SCALE_STEP apart in log: a read that moves the
    median spread by less than its own sampling error leaves every action's prior where it
    was, so their fitted models stay valid instead of being finished again."""
    step = config.POPULATION_SCALE_STEP
    return math.exp(round(math.log(scale) / step) * step)


def build_population(samples: Sequence[PopulationSample]) -> Population:
    by_action: dict[str, list[PopulationSample]] = {}
    for s in samples:
        if s.need_mib > 0:
            by_action.setdefault(s.action_id, []).append(s)
    spreads: list[float] = []
    firsts: list[float] = []
    ratios: list[float] = []
    for runs in by_action.values():
        runs.sort(key=lambda s: s.at_s)
        logs = [math.log(s.need_mib) for s in runs]
        if len(logs) >= config.POPULATION_MIN_RUNS_FOR_SPREAD:
            # Successive differences: the run-to-run variation, not a slow drift of level.
            diffs = [b - a for a, b in itertools.pairwise(logs)]
            spreads.append(math.sqrt(statistics.fmean(d * d for d in diffs) / 2.0))
        firsts.append(logs[0])
        declared = next((s.declared_mib for s in runs if s.declared_mib > 0), 0.0)
        if declared > 0:
            ratios.append(logs[0] - math.log(declared))
    log_scale = (statistics.median(spreads) if spreads
                 else config.POPULATION_DEFAULT_LOG_SCALE)
    log_scale = on_grid(max(log_scale, config.POPULATION_MIN_LOG_SCALE))
    enough = config.POPULATION_MIN_ACTIONS
    return Population(
        actions=len(by_action),
        log_scale=log_scale,
        first_loc=statistics.fmean(firsts) if len(firsts) >= enough else None,
        first_scale=max(_spread(firsts), log_scale),
        first_actions=len(firsts),
        declared_loc=statistics.fmean(ratios) if len(ratios) >= enough else None,
        declared_scale=max(_spread(ratios), log_scale),
        declared_actions=len(ratios),
    )
