"""What the per-action online models cost on the hot path (issue 11): fitting an action's
designs once its history changed, and a Recommend's estimate once it is fitted.

Prints a table: median microseconds per call over the repetitions, for histories of 10 to 500
executions, with and without request features (the designs on the inputs only exist with them),
an action whose memory is a shape no design is (attention: its errors near each input are kept
and weighed, `core.local`), and a young action's fit with the power law on other actions'
slopes (and, with two inputs, the monomial on their powers), and a young action's estimate
with the slopes of the variance other actions lend it.
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import time
from datetime import UTC, datetime, timedelta

from recommender.core.domain import Outcome, Sample
from recommender.core.estimation import Evidence, default_estimator
from recommender.core.online import ActionModels, common_features, fit_action

NOW = datetime(2026, 11, 1, tzinfo=UTC)


def _history(n: int, features: bool, seed: int = 0) -> list[Sample]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        batch = float(2 ** rng.randint(0, 6))
        peak = (2000 + 120 * batch) * math.exp(rng.gauss(0, 0.05))
        out.append(Sample(NOW - timedelta(minutes=10 * (i + 1)), peak, 40960, Outcome.SUCCEEDED,
                          execution_id=f"x{i}",
                          features={"batch_size": batch, "input_mb": 10.0} if features else {}))
    return out


def _attention(n: int, seed: int = 0) -> list[Sample]:
    """A shape no design is (a base, batch x sequence and batch x sequence^2): the fit keeps
    its errors near each input (`core.local`), and each estimate weighs them."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        batch, seq = float(2 ** rng.randint(0, 5)), float(2 ** rng.randint(7, 12))
        peak = min((3000 + (20 * batch * seq + 0.01 * batch * seq * seq) / 64)
                   * math.exp(rng.gauss(0, 0.06)), 79000.0)
        out.append(Sample(NOW - timedelta(minutes=10 * (i + 1)), peak, 81920, Outcome.SUCCEEDED,
                          execution_id=f"x{i}", features={"batch_size": batch, "seq_len": seq}))
    return out


def _padded(n: int, seed: int) -> list[Sample]:
    """A scatter that grows with the batch (padding to a batch's longest item): 4 % at a batch
    of 1, 12 % at 64, beside a continuous number of tokens; grown, it shows the variance's
    slopes that young actions borrow (`lending`, ONLINE_BORROW_VARIANCE_STEP)."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        batch = float(2 ** rng.randint(0, 6))
        tokens = float(round(math.exp(rng.uniform(math.log(128), math.log(4096)))))
        peak = (3000 + 200 * batch + 2 * tokens) * math.exp(rng.gauss(0, 0.04 * (1 + batch / 32)))
        out.append(Sample(NOW - timedelta(minutes=10 * (i + 1)), peak, 40960, Outcome.SUCCEEDED,
                          execution_id=f"x{i}", features={"batch_size": batch, "tokens": tokens}))
    return out


def _median_us(fn: object, reps: int) -> float:
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()  # type: ignore[operator]
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e6


def run(args: argparse.Namespace) -> None:
    reps = max(5, min(args.reps, 200))
    print("| history | features | fit the designs (once per change), µs | "
          "estimate when fitted (each Recommend), µs |")
    print("|---|---|---|---|")
    for n in (10, 50, 200, 500):
        for features in (False, True):
            samples = _history(n, features)
            names = common_features(samples)
            fit = _median_us(lambda s=samples, f=names: fit_action(s, f, 0.2),
                             reps)
            models = ActionModels()
            estimator = default_estimator(models=models)
            evidence = Evidence(NOW, samples, action_id="a",
                                features={"batch_size": 8.0, "input_mb": 10.0} if features
                                else {})
            estimator.estimate(evidence)  # fitted once
            hot = _median_us(lambda e=evidence, est=estimator: est.estimate(e), reps * 5)
            print(f"| {n} | {'yes' if features else 'no'} | {fit:,.0f} | {hot:,.1f} |")
    for n in (200, 500):  # the errors near each input kept and weighed (core.local)
        samples = _attention(n)
        names = common_features(samples)
        fit = _median_us(lambda s=samples, f=names: fit_action(s, f, 0.2), reps)
        estimator = default_estimator(models=ActionModels())
        evidence = Evidence(NOW, samples, action_id="a",
                            features={"batch_size": 8.0, "seq_len": 1024.0})
        estimator.estimate(evidence)
        hot = _median_us(lambda e=evidence, est=estimator: est.estimate(e), reps * 5)
        print(f"| {n} | yes, a shape no design is (attention) | {fit:,.0f} | {hot:,.1f} |")
    # A young action also fits a power law on other actions' slopes (ONLINE_BORROW_*).
    samples = _history(10, True)
    names = common_features(samples)
    borrowed = tuple(0.5 for _ in names)
    fit = _median_us(lambda: fit_action(samples, names, 0.2, borrowed), reps)
    print(f"| 10 | yes, and other actions' slopes | {fit:,.0f} | |")
    # ... and, with two or more inputs, the monomial on other actions' powers.
    powers = tuple(1.0 if f == "batch_size" else 0.5 for f in names)
    fit = _median_us(lambda: fit_action(samples, names, 0.2, borrowed, powers), reps)
    print(f"| 10 | yes, other actions' slopes and powers | {fit:,.0f} | |")
    # ... and, once grown actions show it, how their scatter grows with an input.
    models = ActionModels()
    for a in range(8):
        models.get(f"grown{a}", _padded(150, a), 0.2)
    young = _padded(12, 100)
    estimator = default_estimator(models=models)
    evidence = Evidence(NOW, young, action_id="young",
                        features={"batch_size": 64.0, "tokens": 1024.0})
    estimator.estimate(evidence)
    hot = _median_us(lambda: estimator.estimate(evidence), reps * 5)
    print(f"| 12 | yes, and other actions' slopes of the variance | | {hot:,.1f} |")
