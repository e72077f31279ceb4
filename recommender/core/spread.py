"""Across actions: the mean and spread of a log quantity, and the t a new action is read from.

Both the whole population's view (`core.population`) and the nearest actions'
(`core.neighbours`) are one of these.
"""

from __future__ import annotations

from dataclasses import dataclass

from recommender.core.predictive import Predictive


@dataclass(frozen=True)
class Spread:
    """Across actions: the mean and spread of a log quantity (a first peak, a first peak over
    the declared memory), and how many actions show it."""

    loc: float
    scale: float
    actions: int
    fitted: int = 0
    """Slopes fitted across these actions beside their mean: each costs a degree of freedom."""

    def predictive(self, at: float) -> Predictive:
        """The next action's log figure: a t with the degrees of freedom its scale was
        estimated with (POPULATION_MIN_ACTIONS says why no pseudo ones are added)."""
        return Predictive(at + self.loc, self.scale, max(self.actions - 1 - self.fitted, 1))
