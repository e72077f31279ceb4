"""What grown actions lend young ones: their slopes, their powers, the spread their designs leave.

A young action has too few runs for a design on its inputs of its own. Grown actions' designs
show how peaks scale with inputs of the same name; `core.online.ActionModels` keeps what the
actions fitted last showed, and these pure functions turn that into what is lent, each on a
grid of its own so that one more action rarely moves it (the young actions' fits it keys stay
valid).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import TypeVar

import numpy as np

from recommender.core import config
from recommender.core.designs import Lent
from recommender.core.population import on_grid

V = TypeVar("V")


def latest(kept: OrderedDict[str, V], action_id: str, value: V) -> list[V]:
    """`value` kept as the action's newest, the ONLINE_INPUT_PRIOR_ACTIONS actions fitted last
    kept in all: their values, what the prior, slopes and powers lent are learned from."""
    kept[action_id] = value
    kept.move_to_end(action_id)
    while len(kept) > config.ONLINE_INPUT_PRIOR_ACTIONS:
        kept.popitem(last=False)
    return list(kept.values())


def slopes_for(borrowed: Mapping[str, float], names: Sequence[str]) -> Lent:
    """Other actions' slopes for these inputs, None for an input none is lent for yet (the
    power law leaves it out: an attention action's batch size is lent long before its
    sequence length, which only its kind of action has); () when none has one."""
    found = tuple(borrowed.get(f) for f in names)
    return found if any(b is not None for b in found) else ()


def borrowed_of(slopes: Sequence[Mapping[str, float]],
                step: float = config.ONLINE_BORROW_SLOPE_STEP) -> dict[str, float]:
    """Per input name, the median of the slopes of the actions whose power law has it, once
    ONLINE_INPUT_PRIOR_MIN_ACTIONS show it, on a grid of `step` (so one more action rarely
    moves it, and the young actions' fits it keys stay valid). The same for the slopes of a
    variance (`online.own_variance`, ONLINE_BORROW_VARIANCE_STEP)."""
    by_name: dict[str, list[float]] = {}
    for own in slopes:
        for f, b in own.items():
            by_name.setdefault(f, []).append(b)
    return {f: round(float(np.median(v)) / step) * step for f, v in by_name.items()
            if len(v) >= config.ONLINE_INPUT_PRIOR_MIN_ACTIONS}


def powers_of(shown: Sequence[tuple[tuple[str, ...], tuple[float, ...]]]
               ) -> dict[tuple[str, ...], tuple[float, ...]]:
    """Per set of input names, the powers most of the actions with those inputs chose, once
    ONLINE_INPUT_PRIOR_MIN_ACTIONS chose them (the most such actions first, then the smaller
    powers: a stable choice). A grid of its own: one more action rarely moves the most
    common of a few dozen candidates, and the young actions' fits it keys stay valid."""
    counts: dict[tuple[str, ...], dict[tuple[float, ...], int]] = {}
    for names, powers in shown:
        by = counts.setdefault(names, {})
        by[powers] = by.get(powers, 0) + 1
    found = {}
    for names, by in counts.items():
        powers, k = min(by.items(), key=lambda pk: (-pk[1], pk[0]))
        if k >= config.ONLINE_INPUT_PRIOR_MIN_ACTIONS:
            found[names] = powers
    return found


def prior_of(spreads: Sequence[float]) -> float | None:
    """The prior spread of designs on the inputs: the median of what they leave across
    actions, on the population's grid (so a new action's spread rarely moves it, and the
    fits it keys stay valid), never below POPULATION_MIN_LOG_SCALE; None with too few."""
    if len(spreads) < config.ONLINE_INPUT_PRIOR_MIN_ACTIONS:
        return None
    return max(on_grid(max(float(np.median(spreads)), 1e-6)), config.POPULATION_MIN_LOG_SCALE)
