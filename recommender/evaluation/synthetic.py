"""A generated workload whose memory depends on its inputs, for tests, evaluation and benchmarks.

Each action has a base footprint (weights, CUDA context) and memory that grows with batch size
times input size, as activations do, with a little run-to-run noise. History quantiles cannot
see the inputs, so they must size every execution for the largest; a model of the features
can size each one for its own.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta


@dataclass(frozen=True)
class Truth:
    """The distribution an execution's peak was drawn from: a mixture of log-normals, its
    peaks clipped at `cap_mib`. What no rule can know, and what the best decision the price of
    an OOM allows would be made on (`replay.best_first_slice`): how far a rule's slices are
    from that decision says how much of its OOMs and memory its predictions cost, and how much
    the price."""

    components: tuple[tuple[float, float, float], ...]
    """(weight, median MiB, standard deviation of the log peak), weights adding up to 1."""
    cap_mib: float = math.inf

    def survival(self, mib: float) -> float:
        """P(peak > mib)."""
        if mib >= self.cap_mib:
            return 0.0
        if mib <= 0:
            return 1.0
        return sum(w * (0.5 * math.erfc(math.log(mib / median) / (sd * math.sqrt(2.0)))
                        if sd > 0 else float(median > mib))
                   for w, median, sd in self.components)


@dataclass(frozen=True)
class SyntheticExecution:
    action_id: str
    at: datetime
    peak_mib: float
    features: dict[str, float] = field(default_factory=dict)
    declared_mib: float = 0.0
    truth: Truth | None = None
    """The distribution `peak_mib` was drawn from (None: not given)."""
    phase: str = ""
    """Where the execution sits in its action's story as the generator wrote it (one of
    STEP_PHASES for `generate_step`, of MODES_PHASES for `generate_modes`; "" where the
    generator tells none)."""


STEP_PHASES = ("before its step", "its first run after the step", "its 2nd to 20th after",
               "its 21st after and on")
"""`generate_step`'s phases. Why these: nothing before an action's first run after its step
announces the step, so that run is what no rule learning from history can size; the next
runs are what a rule learns the new level from, and the rest is its new routine."""
STEP_SETTLED_RUNS = 20
"""Runs after its step from which an action is in its new routine (STEP_PHASES)."""
MODES_PHASES = ("before its first heavy run", "its first heavy run", "its later heavy runs",
                "its later light runs")
"""`generate_modes`' phases. Why these: nothing before an action's first heavy run says it
has a heavy mode, so that run is what no rule learning from history can size; after it, a
heavy run is one whose mode the history has shown."""
PHASES = STEP_PHASES + MODES_PHASES
"""Every generator's phases, each generator's in its story's order."""


def _step_phase(runs_after: int) -> str:
    """The phase of an execution that is its action's `runs_after`-th since its step (0:
    before it)."""
    if runs_after == 0:
        return STEP_PHASES[0]
    if runs_after == 1:
        return STEP_PHASES[1]
    return STEP_PHASES[2] if runs_after <= STEP_SETTLED_RUNS else STEP_PHASES[3]


def _modes_phase(shown: bool, heavy_run: bool) -> str:
    """The phase of a run of an action whose heavy mode has or has not yet `shown`."""
    if not shown:
        return MODES_PHASES[1 if heavy_run else 0]
    return MODES_PHASES[2 if heavy_run else 3]


def generate(actions: int, executions: int, *, start: datetime, seed: int = 0,
             spacing: timedelta = timedelta(minutes=5)) -> Iterator[SyntheticExecution]:
    """`executions` executions spread over `actions` actions (busier ones first), in time order."""
    rng = random.Random(seed)
    params = []
    for a in range(actions):
        base = rng.uniform(1500, 8000)
        per_item = rng.uniform(2.0, 60.0)
        # Users declare what they once saw, usually for a big input.
        params.append((f"act-{a:04d}", base, per_item))
    weights = [1.0 / (i + 1) ** 0.6 for i in range(actions)]
    for i in range(executions):
        name, base, per_item = rng.choices(params, weights)[0]
        batch = float(2 ** rng.randint(0, 6))
        input_mb = math.exp(rng.gauss(3.0, 0.8))
        noise = math.exp(rng.gauss(0.0, 0.04))
        median = base + per_item * batch * math.sqrt(input_mb)
        declared = base + per_item * 32 * math.sqrt(60)
        yield SyntheticExecution(name, start + spacing * i, median * noise,
                                 {"batch_size": batch, "input_mb": round(input_mb, 3)}, declared,
                                 Truth(((1.0, median, 0.04),)))


def generate_step(actions: int, executions: int, *, start: datetime, seed: int = 0,
                  spacing: timedelta = timedelta(minutes=5)) -> Iterator[SyntheticExecution]:
    """A workload whose memory steps up part-way: each action's code gets a new version at a
    random point of the sequence, after which it needs 1.2 to 2 times as much; nothing in the
    request says so (its one feature, an input size, explains only a little of the spread)."""
    rng = random.Random(seed)
    params = []
    for a in range(actions):
        level = math.exp(rng.uniform(math.log(1500), math.log(25000)))
        spread = rng.uniform(0.03, 0.15)
        step_at = rng.uniform(0.3, 0.7) * executions
        factor = rng.uniform(1.2, 2.0)
        params.append((f"step-{a:04d}", level, spread, step_at, factor))
    weights = [1.0 / (i + 1) ** 0.5 for i in range(actions)]
    after: dict[str, int] = {}  # each action's runs since its step
    for i in range(executions):
        name, level, spread, step_at, factor = rng.choices(params, weights)[0]
        size = math.exp(rng.gauss(0.0, 0.5))
        median = level * (factor if i >= step_at else 1.0) * size ** 0.1
        if i >= step_at:
            after[name] = after.get(name, 0) + 1
        yield SyntheticExecution(name, start + spacing * i,
                                 median * math.exp(rng.gauss(0.0, spread)),
                                 {"input_mb": round(100 * size, 3)}, 0.0,
                                 Truth(((1.0, median, spread),)),
                                 _step_phase(after.get(name, 0)))


def generate_modes(actions: int, executions: int, *, start: datetime, seed: int = 0,
                   spacing: timedelta = timedelta(minutes=5)) -> Iterator[SyntheticExecution]:
    """Peaks in two modes: 10 to 40 % of an action's runs need 1.3 to 1.9 times the rest (a
    heavier input now and then, a second code path), and nothing in the request says which;
    a few percent of noise within each mode; no inputs (as GenTD26's pods carry none). No t
    has that tail: a slice between the modes is
    too small for a fifth of the runs where a t fitted to them says a few percent."""
    rng = random.Random(seed)
    params = []
    for a in range(actions):
        params.append((f"modes-{a:04d}", math.exp(rng.uniform(math.log(1500), math.log(30000))),
                       rng.uniform(0.015, 0.06), rng.uniform(0.1, 0.4), rng.uniform(1.3, 1.9)))
    weights = [1.0 / (i + 1) ** 0.5 for i in range(actions)]
    shown: set[str] = set()  # the actions whose heavy mode has run
    for i in range(executions):
        name, level, noise, share, heavy = rng.choices(params, weights)[0]
        heavy_run = rng.random() < share
        peak = level * (heavy if heavy_run else 1.0) * math.exp(rng.gauss(0.0, noise))
        truth = Truth(((1.0 - share, level, noise), (share, level * heavy, noise)), 78_000.0)
        phase = _modes_phase(name in shown, heavy_run)
        if heavy_run:
            shown.add(name)
        yield SyntheticExecution(name, start + spacing * i, min(peak, 78_000.0), {}, 0.0, truth,
                                 phase)


SHAPES = ("image", "attention", "noisy")
"""The memory shapes of `generate_shapes`, one per action in turn."""


def generate_shapes(actions: int, executions: int, *, start: datetime, seed: int = 0,
                    spacing: timedelta = timedelta(minutes=5)) -> Iterator[SyntheticExecution]:
    """Input-dependent memory of shapes the generated workload does not have, one per action
    in turn: an image model (base + batch x side^2, beside an input size that does not matter),
    attention (base + batch x sequence + batch x sequence^2, two terms no single power is) and
    batch x sqrt(input) with 12 % run-to-run noise instead of 4 %. A check that the per-action
    designs were not fitted to one generator; capped below an 80 GB card."""
    rng = random.Random(seed)
    params = []
    for a in range(actions):
        shape = SHAPES[a % len(SHAPES)]
        params.append((f"{shape}-{a:04d}", shape, rng.uniform(1500, 8000),
                       rng.uniform(2.0, 60.0), rng.uniform(0.001, 0.02)))
    weights = [1.0 / (i + 1) ** 0.6 for i in range(actions)]
    for i in range(executions):
        name, shape, base, per_item, quadratic = rng.choices(params, weights)[0]
        batch = float(2 ** rng.randint(0, 5))
        features: dict[str, float]
        if shape == "image":
            side = float(rng.choice([224, 384, 512]))
            size = math.exp(rng.gauss(3.0, 0.8))
            peak, noise = base + per_item * batch * (side / 224) ** 2 * 20, 0.05
            features = {"batch_size": batch, "input_mb": round(size, 3), "side": side}
        elif shape == "attention":
            seq = float(2 ** rng.randint(7, 12))
            peak = base + (per_item * batch * seq + quadratic * batch * seq * seq) / 64
            noise = 0.06
            features = {"batch_size": batch, "seq_len": seq}
        else:
            size = math.exp(rng.gauss(3.0, 0.8))
            peak, noise = base + per_item * batch * math.sqrt(size), 0.12
            features = {"batch_size": batch, "input_mb": round(size, 3)}
        truth = Truth(((1.0, peak, noise),), 79_000.0)
        peak = min(peak * math.exp(rng.gauss(0.0, noise)), 79_000.0)
        yield SyntheticExecution(name, start + spacing * i, peak, features, 0.0, truth)


def generate_models(actions: int, executions: int, *, start: datetime, seed: int = 0,
                    spacing: timedelta = timedelta(minutes=5)) -> Iterator[SyntheticExecution]:
    """Each action serves one model, whose size (`params_b`, billions of parameters, 0.1 to
    30) its requests carry and which never changes within it: a context, the weights (2 bytes a
    parameter and 15 % more) and activations that grow with the batch and the model's width.
    An input constant within each action shows no slope within any; only across actions does
    it say how they differ. Capped below an 80 GB card."""
    rng = random.Random(seed)
    params = []
    for a in range(actions):
        size = math.exp(rng.uniform(math.log(0.1), math.log(30.0)))
        params.append((f"model-{a:04d}", size, rng.uniform(0.5, 3.0)))
    weights = [1.0 / (i + 1) ** 0.6 for i in range(actions)]
    for i in range(executions):
        name, size, per_item = rng.choices(params, weights)[0]
        batch = float(2 ** rng.randint(0, 5))
        median = 800 + size * 2048 * 1.15 + per_item * batch * 200 * math.sqrt(size)
        peak = median * math.exp(rng.gauss(0.0, 0.05))
        yield SyntheticExecution(name, start + spacing * i, min(peak, 79_000.0),
                                 {"batch_size": batch, "params_b": round(size, 3)}, 0.0,
                                 Truth(((1.0, median, 0.05),), 79_000.0))


KIND_LEVELS = (2000.0, 30000.0, 5000.0, 60000.0, 3000.0, 45000.0, 8000.0, 20000.0)
"""MiB a one-off action needs, by the model kind its request names (`generate_one_off`)."""


def generate_one_off(executions: int, *, start: datetime, seed: int = 0,
                     spacing: timedelta = timedelta(minutes=5)) -> Iterator[SyntheticExecution]:
    """Every execution a new action (a notebook's job) whose memory its `kind` input sets, the
    same way for every action and not monotone in the code (KIND_LEVELS), with 4 % noise: what
    only a model learnt across actions knows of a new one. The server's own rules meet each as
    a stranger, through the population, whose view of an input is a slope."""
    rng = random.Random(seed)
    for i in range(executions):
        kind = rng.randrange(len(KIND_LEVELS))
        yield SyntheticExecution(f"once-{i:05d}", start + spacing * i,
                                 KIND_LEVELS[kind] * math.exp(rng.gauss(0.0, 0.04)),
                                 {"kind": float(kind)})


def generate_threshold(actions: int, executions: int, *, start: datetime, seed: int = 0,
                       spacing: timedelta = timedelta(minutes=5)
                       ) -> Iterator[SyntheticExecution]:
    """Actions whose memory is 2.5 times as much from a batch of 16 on (another kernel, a
    cache that no longer fits), the same step for all and beside an input that does not
    matter: a shape no single power of the batch is."""
    rng = random.Random(seed)
    params = [(f"thr-{a:04d}", rng.uniform(1500, 8000)) for a in range(actions)]
    weights = [1.0 / (i + 1) ** 0.6 for i in range(actions)]
    for i in range(executions):
        name, base = rng.choices(params, weights)[0]
        batch = float(2 ** rng.randint(0, 6))
        peak = base * (1.0 if batch < 16 else 2.5) * math.exp(rng.gauss(0.0, 0.04))
        yield SyntheticExecution(name, start + spacing * i, peak,
                                 {"batch_size": batch, "other": round(rng.random(), 3)})
