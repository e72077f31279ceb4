"""What a design's errors were near the request's inputs: a misfit of its shape, local to them.

Why: a design is one formula across every input it has seen. Where an action's memory has a
shape none of the designs is (attention: a base, batch x sequence and batch x sequence^2 at once,
which no single power is), the best of them misses in one direction at middling inputs and in
the other at the largest. Its leave-one-out errors there are not scatter but the shape's bias,
and one scale for every input states too small a chance of an OOM where the fit runs short and
too large where it has room (shapes seed 5, attention-0001: 0.36 % stated against 3.2 % true at
a sequence of 1,024; 21 % against 1.5 % at 4,096). The runs whose inputs were near the
request's show that bias: their errors' mean, shrunk towards none by ONLINE_LOCAL_PRIOR runs,
moves the location, and their spread about it the scale.

Only where it would have predicted the action's own runs better (`local_errors`): where the
design's shape is the action's, the errors near any input are scatter, and a local mean of
scatter would move each request by noise."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from recommender.core import config
from recommender.core.arrays import FloatArray


@dataclass(frozen=True, eq=False)
class LocalErrors:
    """A design's leave-one-out errors in units of its scale, with the inputs they were made
    at (log1p, a column per input of the design) and their weights."""

    inputs: FloatArray
    errors: FloatArray
    weights: FloatArray
    own: tuple[FloatArray, FloatArray] = (np.zeros(0), np.zeros(0))
    """The newest runs' errors as the runs near each (but itself) would have moved and scaled
    them, and their weights: the tail the design's errors show once the misfit is taken out
    (`online._own_tail`), which the errors as they were would fatten by the misfit."""

    def at(self, x: FloatArray) -> tuple[float, float]:
        """At log1p inputs `x`: the shift of the location in units of the scale, and the
        factor on the variance (the local mean square about the shift; 1 where no run was
        near, which is the design's own)."""
        d = (self.inputs - x) / config.ONLINE_LOCAL_BANDWIDTH
        k = self.weights * np.exp(-0.5 * np.einsum("ij,ij->i", d, d))
        total = float(k.sum())
        if total <= 1e-12:
            return 0.0, 1.0
        n_eff = min(total, total * total / max(float(k @ k), 1e-300))  # as `_near`
        mean = float(k @ self.errors) / total
        dev = self.errors - mean
        prior = config.ONLINE_LOCAL_PRIOR
        return (mean * n_eff / (n_eff + prior),
                (float(k @ (dev * dev)) / total * n_eff + prior) / (n_eff + prior))


def local_errors(inputs: FloatArray, errors: FloatArray, weights: FloatArray
                 ) -> LocalErrors | None:
    """The errors near each input, where they would have told the design's newest runs
    (ONLINE_LOCAL_CHECKED of them) more than the design alone: the mean square of those runs'
    errors less their shift from the other runs near them, at most ONLINE_LOCAL_GAIN times
    their mean square as they were. None where not."""
    keep = weights > 0
    if int(keep.sum()) < 2:
        return None
    inputs, errors, weights = inputs[keep], errors[keep], weights[keep]
    checked = min(errors.shape[0], config.ONLINE_LOCAL_CHECKED)
    w = weights[:checked]
    before = float(w @ (errors[:checked] ** 2))
    shift, ratio = _shifts(inputs, errors, weights, checked)
    moved = errors[:checked] - shift
    if float(w @ (moved * moved)) > config.ONLINE_LOCAL_GAIN * before:
        return None
    return LocalErrors(inputs, errors, weights, (moved / np.sqrt(ratio), w))


def _shifts(inputs: FloatArray, errors: FloatArray, weights: FloatArray, checked: int
            ) -> tuple[FloatArray, FloatArray]:
    """The newest `checked` runs' shifts and variance factors (`LocalErrors.at`) from the other
    runs alone."""
    d = (inputs[:checked, None, :] - inputs[None, :, :]) / config.ONLINE_LOCAL_BANDWIDTH
    k = weights * np.exp(-0.5 * np.einsum("ijk,ijk->ij", d, d))
    k[np.arange(checked), np.arange(checked)] = 0.0
    total = np.maximum(k.sum(axis=1), 1e-300)
    n_eff = _near(total, np.einsum("ij,ij->i", k, k))
    prior = config.ONLINE_LOCAL_PRIOR
    mean = (k @ errors) / total
    square = np.einsum("ij,ij->i", k, (errors[None, :] - mean[:, None]) ** 2) / total
    return (np.asarray(mean * n_eff / (n_eff + prior)),
            np.asarray((square * n_eff + prior) / (n_eff + prior)))


def _near(total: FloatArray, square: FloatArray) -> FloatArray:
    """How many runs the kernel's weights `k` are worth (total: sum k, square: sum k^2). The
    effective count (total^2 / square) alone would not see that every run is far: it is the
    same for weights all a millionth. The weights are the tail's (each at most about one
    run's), so their sum counts the runs near, and it is the smaller."""
    return np.asarray(np.minimum(total, total * total / np.maximum(square, 1e-300)))
