"""Per-worker throughput by profile, learned from an action's recorded executions.

Throughput grows with compute slices, but rarely linearly: a small batch is latency-bound and
gains nothing from more slices, a large one scales almost linearly until memory bandwidth
saturates (ParvaGPU's A100 tables show both). So each action gets its own scaling curve, a
log-log linear fit of throughput against compute slices (a power law t = a * c^b), with one
intercept per GPU model. A profile never tried is estimated from the curve, not guessed. With
observations at a single size the exponent cannot be fitted; the pooled exponent of all actions
with several sizes is used, or a conservative default.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from recommender.core import config


@dataclass(frozen=True)
class ThroughputSample:
    gpu_model: str
    compute_slices: int
    throughput: float
    """Items/s per worker."""


@dataclass(frozen=True)
class ThroughputCurve:
    """t(model, c) = exp(intercept[model]) * c ** exponent, fitted in log space.

    Without a fitted exponent (one size measured), the curve is anchored at the measured size
    `anchor` and extrapolates with a cautious exponent in each direction.
    """

    intercepts: dict[str, float]
    exponent: float
    samples: int
    fitted_exponent: bool
    anchor: float = 0.0

    def predict(self, gpu_model: str, compute_slices: int) -> float | None:
        """Items/s per worker, or None when nothing is known about this GPU model."""
        if gpu_model in self.intercepts:
            base = self.intercepts[gpu_model]
        elif self.intercepts:
            # Another model's curve is a guess across hardware: use the most cautious one.
            base = min(self.intercepts.values())
        else:
            return None
        at_anchor = base + self.exponent * math.log(self.anchor or compute_slices)
        if self.fitted_exponent or not self.anchor:
            return float(math.exp(base + self.exponent * math.log(compute_slices)))
        b = (config.THROUGHPUT_EXPONENT_DOWN if compute_slices < self.anchor
             else config.THROUGHPUT_EXPONENT_UP)
        return float(math.exp(at_anchor + b * math.log(compute_slices / self.anchor)))

    def describe(self) -> str:
        if self.fitted_exponent:
            return f"throughput ~ slices^{self.exponent:.2f} ({self.samples} executions)"
        return (f"throughput measured at {self.anchor:g} slices only, extrapolated with "
                f"exponents {config.THROUGHPUT_EXPONENT_DOWN:g} down and "
                f"{config.THROUGHPUT_EXPONENT_UP:g} up ({self.samples} executions)")


def _fit_exponent(samples: Sequence[ThroughputSample]) -> float | None:
    """The scaling exponent with per-model intercepts, robust to a few odd runs."""
    sizes = {s.compute_slices for s in samples}
    if len(sizes) < 2:
        return None
    models = sorted({s.gpu_model for s in samples})
    x = np.array(
        [[math.log(s.compute_slices)] + [1.0 if s.gpu_model == m else 0.0 for m in models]
         for s in samples]
    )
    y = np.array([math.log(s.throughput) for s in samples])
    coef = huber_fit(x, y)
    return float(np.clip(coef[0], 0.0, config.THROUGHPUT_MAX_EXPONENT))


def huber_fit(x: np.ndarray, y: np.ndarray, delta: float = 1.35, iterations: int = 50
              ) -> np.ndarray:
    """Least squares made robust by iteratively reweighting (Huber's loss): residuals beyond
    `delta` robust standard deviations weigh 1/|r|, so a few odd runs bend the fit little.
    Plain numpy, microseconds for the handful of rows an action has."""
    coef = np.linalg.lstsq(x, y, rcond=None)[0]
    for _ in range(iterations):
        r = y - x @ coef
        scale = float(np.median(np.abs(r - np.median(r)))) / 0.6745 or 1e-9
        u = np.abs(r) / (delta * scale)
        w = np.where(u <= 1.0, 1.0, 1.0 / np.maximum(u, 1e-12))
        sw = np.sqrt(w)
        new = np.linalg.lstsq(x * sw[:, None], y * sw, rcond=None)[0]
        if np.allclose(new, coef, atol=1e-10):
            return np.asarray(new)
        coef = new
    return np.asarray(coef)


def fit_curve(samples: Sequence[ThroughputSample], pooled_exponent: float | None = None
              ) -> ThroughputCurve | None:
    """The action's curve, or None without any throughput measurement."""
    good = [s for s in samples if s.throughput > 0 and s.compute_slices > 0]
    if not good:
        return None
    exponent = _fit_exponent(good)
    fitted = exponent is not None
    anchor = 0.0
    if exponent is None:
        # One size measured: anchor there; a pooled exponent (fitted over other actions)
        # replaces the cautious pair when given.
        anchor = float(good[0].compute_slices)
        exponent = pooled_exponent if pooled_exponent is not None else 0.0
        fitted = pooled_exponent is not None
    intercepts: dict[str, list[float]] = {}
    for s in good:
        intercepts.setdefault(s.gpu_model, []).append(
            math.log(s.throughput) - exponent * math.log(s.compute_slices))
    # The median keeps one slow run (a noisy neighbour, a cold cache) from moving the curve.
    return ThroughputCurve(
        intercepts={m: float(np.median(v)) for m, v in intercepts.items()},
        exponent=exponent,
        samples=len(good),
        fitted_exponent=fitted,
        anchor=anchor,
    )


def pooled_exponent(per_action: Sequence[Sequence[ThroughputSample]]) -> float | None:
    """Median fitted exponent over actions measured at several sizes."""
    found = [e for samples in per_action if (e := _fit_exponent(samples)) is not None]
    return float(np.median(found)) if found else None
