"""A step of an action's level (core.steps) and what the online designs do with it."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from recommender.core.online import fit_action
from recommender.core.steps import find_step
from tests.test_online import run


def _log_peaks(before: int, after: int, shift: float, spread: float, seed: int
               ) -> np.ndarray:
    """Newest first: `after` runs `shift` (log) above the `before` older ones."""
    rng = random.Random(seed)
    return np.array([math.log(5000) + (shift if i < after else 0.0) + rng.gauss(0, spread)
                     for i in range(before + after)])


@pytest.mark.parametrize("after", [2, 5, 20, 50])
def test_a_step_is_found_where_it_happened_and_by_how_much(after: int) -> None:
    found = find_step(_log_peaks(60, after, math.log(1.6), 0.05, seed=after))
    assert found is not None
    assert found.runs == after
    # Within three of its stated errors, which shrink as runs at the new level add up.
    assert abs(found.shift - math.log(1.6)) < 3 * math.sqrt(found.variance)
    assert found.variance < 0.05 ** 2 * (1 / after + 1 / 60) * 1.5


def test_scatter_is_not_a_step() -> None:
    """The same peaks with no step, heavy tails (t with 3 degrees of freedom): over 300
    histories of 120 runs, not one split passes the threshold."""
    rng = np.random.default_rng(1)
    found = [find_step(math.log(5000) + 0.1 * rng.standard_t(3, size=120)) for _ in range(300)]
    assert sum(f is not None for f in found) == 0


def test_two_modes_are_not_a_step() -> None:
    """A fifth of the runs need 1.6x the rest: a streak of heavy runs is no new level."""
    hits = 0
    for seed in range(200):
        rng = random.Random(seed)
        y = np.array([math.log(5000) + (math.log(1.6) if rng.random() < 0.2 else 0.0)
                      + rng.gauss(0, 0.03) for _ in range(120)])
        hits += find_step(y) is not None
    assert hits <= 2


def test_larger_requests_are_not_a_step() -> None:
    """The newest runs asked for batches 8 times larger: their peaks are higher because of
    the request, which the inputs explain, not because the code changed."""
    rng = random.Random(3)
    batch = np.array([64.0 if i < 10 else 8.0 * rng.choice((0.5, 1, 2)) for i in range(80)])
    y = np.log(1000 + 60 * batch) + np.array([rng.gauss(0, 0.03) for _ in range(80)])
    assert find_step(y) is not None  # blind to the request, it is one
    assert find_step(y, (batch,)) is None


def test_after_a_step_the_next_runs_are_sized_for_the_new_level_with_its_own_scatter() -> None:
    """Twelve runs after a 1.75x step, with 4 % scatter: without the step moved out, the
    designs' spread held the two levels for dozens of runs (a p95 30 % above the new level on
    the step-change workload); with it, the p95 is the new level's, plus the step's own error."""
    rng = random.Random(7)
    samples = [run((7000 if i < 12 else 4000) * math.exp(rng.gauss(0, 0.04)), i)
               for i in range(80)]
    model = fit_action(samples, (), 0.15)
    assert model is not None
    found = model.predict({})
    assert found is not None
    need, fit = found
    assert fit.step is not None and fit.step.runs == 12
    assert 7000 * math.exp(1.645 * 0.04) < need.quantile(0.95) < 7000 * 1.15
    assert need.quantile(0.5) == pytest.approx(7000, rel=0.04)


def test_inputs_that_never_vary_or_move_together_leave_the_test_on_the_peaks() -> None:
    y = _log_peaks(60, 10, math.log(1.6), 0.05, seed=2)
    batch = np.full(70, 8.0)
    size = np.random.default_rng(2).uniform(1.0, 100.0, 70)
    found = find_step(y, (batch, 2 * batch, size, size))
    plain = find_step(y)
    assert found is not None and plain is not None
    assert found.runs == plain.runs == 10
