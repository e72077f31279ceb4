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

    def prior(self, declared_mib: float, first_run_mib: float = 0.0
              ) -> tuple[Predictive, str] | None:
        """The predictive need of a new action, and what it was learned from; with
        `first_run_mib`, the peak of its one execution so far, weighed against it
        (`after_one_run`)."""
        df_extra = config.ONLINE_PRIOR_DF
        found: tuple[Predictive, str] | None = None
        if declared_mib > 0 and self.declared_loc is not None:
            loc = math.log(declared_mib) + self.declared_loc
            found = (Predictive(loc, self.declared_scale, self.declared_actions - 1 + df_extra),
                     f"declared {declared_mib:,.0f} MiB x {math.exp(self.declared_loc):.2f}, "
                     f"how first peaks relate to declared memory across "
                     f"{self.declared_actions} actions")
        elif self.first_loc is not None:
            found = (Predictive(self.first_loc, self.first_scale,
                                self.first_actions - 1 + df_extra),
                     f"first peaks of {self.first_actions} other actions")
        if found is None or first_run_mib <= 0:
            return found
        prior, why = found
        return (after_one_run(prior, math.log(first_run_mib), self.log_scale),
                f"its one run ({first_run_mib:,.0f} MiB) weighed against {why}")


def after_one_run(prior: Predictive, first_run: float, log_scale: float) -> Predictive:
    """The need at a new action's second execution: its level is somewhere among other
    actions' (the prior holds their levels and one run's scatter about them), and its first
    run (log `first_run`) is one draw about that level with the population's run-to-run
    spread `log_scale`. The level's posterior weighs the run and the prior by their
    precisions; the prior on levels is a t with ONLINE_PRIOR_DF degrees of freedom, so a run
    far outside the others' (an action unlike them) is believed over them rather than pulled
    back to them (its mode by iteratively reweighted means, started at the run). The need is
    the level plus one more run's scatter, a t with ONLINE_PRIOR_DF (the action's own spread is
    not known yet), never wider than the prior. Why, and what it changed: config,
    POPULATION_MODE_STEPS."""
    within = log_scale * log_scale
    between = max(prior.scale * prior.scale - within, 0.0)
    if between <= 0.0:
        return prior  # the actions differ no more than runs do: the run says nothing new
    df = config.ONLINE_PRIOR_DF
    level, weight = first_run, 1.0 / between
    for _ in range(config.POPULATION_MODE_STEPS):
        gap = level - prior.loc
        weight = (df + 1.0) / (df * between + gap * gap)
        level = (first_run / within + prior.loc * weight) / (1.0 / within + weight)
    scale = math.sqrt(1.0 / (1.0 / within + weight) + within)
    return Predictive(level, min(scale, prior.scale), min(prior.df, df))


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
