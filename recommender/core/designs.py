"""The shapes an action's need may take in its history: the candidates `core.online` fits.

Each is a least squares design: log peak on a constant (the decayed history), on a trend in the
action's execution order, on the log of the request's inputs, the peak in MiB linear on the raw
inputs or on them and their pairwise products, or a fixed footprint plus one power of the
inputs. Which of them an action gets depends on how many runs it has (a design is fitted only
with runs to spare beyond its parameters) and on what other actions lend a young one (their
slopes, their powers: `core.lending`). Which of them serves is decided by how well each
predicted the action's own past runs (`core.fits`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
from numpy.typing import NDArray

from recommender.core import config
from recommender.core.arrays import FloatArray

T = TypeVar("T", float, FloatArray)
Lent = tuple[float | None, ...]
"""Other actions' slope per input name of an action, None where none is lent
(`lending.slopes_for`)."""


@dataclass(frozen=True)
class Design:
    name: str
    log_space: bool
    features: tuple[str, ...] = ()
    log_features: bool = False
    trend: bool = False
    products: bool = False
    """With the pairwise products of its (raw) inputs as columns too: activations take batch x
    input size x a per-element cost, on top of a fixed footprint (weights, CUDA context)."""
    relative: bool = False
    """A design in MiB whose errors are in proportion to the need (its scale a fraction of
    the prediction): run-to-run scatter is a share of what a run holds, so one scale in MiB
    would be the big runs' and oversize the small ones."""
    half_life: float = 0.0
    """Rank half-life of its weights (executions); 0: ONLINE_HALF_LIFE_EXECUTIONS, or
    ONLINE_HALF_LIFE_WITH_INPUTS for a design on the inputs."""
    monomial: bool = False
    """A fixed footprint plus one power of the inputs, c0 + c1 x1^e1 x2^e2 ..., the exponents
    those of ONLINE_MONOMIAL_EXPONENTS that fit the action best (`exponents`, chosen when it
    is fitted): activations as batch x sequence^2 (attention), batch x side^2 (images) or
    batch x sqrt(size), which neither the products (first powers) nor the power law (no
    footprint) is."""
    exponents: tuple[float, ...] = ()
    lent_powers: bool = False
    """A monomial whose `exponents` are other actions' (`lending.powers_of`: the powers most of the
    grown actions with these inputs chose), only its footprint and per-item cost the action's
    own: two parameters, so from two runs on (fitted exactly until a third run gives it a
    leave-one-out error), where its own monomial waits for six (with two inputs). A young
    action's power law with borrowed slopes has the right level but not the shape: a
    footprint plus activations bends, and a slope that is right for one action's inputs is
    wrong for another's (ONLINE_BORROW_POWERS_MIN_RUNS says what that cost)."""
    slopes: tuple[float, ...] = ()
    """A power law in the inputs whose slopes are other actions' (`lending.borrowed_of`), only its
    level the action's own: one parameter, so from two runs on. A young action has too few
    runs for slopes of its own, and without them its third run, with a batch four times its
    first two, is sized as they were (the generated input-dependent workload's OOMs were all
    in runs 3 to 9)."""

    @property
    def weight_half_life(self) -> float:
        if self.half_life:
            return self.half_life
        return (config.ONLINE_HALF_LIFE_WITH_INPUTS if self.features
                else config.ONLINE_HALF_LIFE_EXECUTIONS)

    @property
    def said(self) -> str:
        """The name, with the powers chosen where there are some (for the reason)."""
        if not self.exponents:
            return self.name
        terms = " x ".join(f"{f}^{e:g}" for f, e in zip(self.features, self.exponents,
                                                         strict=True) if e)
        return f"{self.name}, {terms}"

    @property
    def parameters(self) -> int:
        k = len(self.features)
        if self.slopes:
            return 1
        if self.monomial:
            return 2
        return 1 + k + int(self.trend) + (k * (k - 1) // 2 if self.products else 0)


def candidates(feature_names: Sequence[str], n: int, slopes: Lent = (),
             powers: tuple[float, ...] = ()) -> list[Design]:
    designs = [Design("decayed history", log_space=True)]
    lent = [(f, b) for f, b in zip(feature_names, slopes, strict=False) if b is not None]
    if lent:
        designs.append(Design("a power law in the inputs with other actions' slopes",
                              log_space=True, features=tuple(f for f, _ in lent),
                              log_features=True, slopes=tuple(b for _, b in lent)))
    if powers and len(powers) == len(feature_names) and (
            n >= config.ONLINE_BORROW_POWERS_MIN_RUNS):
        designs.append(Design("a fixed footprint plus other actions' power of the inputs (MiB)",
                              log_space=False, features=tuple(feature_names), relative=True,
                              monomial=True, exponents=powers, lent_powers=True))
    if n >= config.ONLINE_MIN_RECENT_SAMPLES:
        designs.append(Design("the last few executions", log_space=True,
                              half_life=config.ONLINE_RECENT_HALF_LIFE))
    if n >= config.ONLINE_MIN_TREND_SAMPLES:
        designs.append(Design("trend in recent executions", log_space=True, trend=True))
    if feature_names and n >= len(feature_names) + config.ONLINE_MIN_SPARE_SAMPLES:
        names = tuple(feature_names)
        designs.append(Design("linear in the inputs (MiB)", log_space=False, features=names))
        designs.append(Design("power law in the inputs", log_space=True, features=names,
                              log_features=True))
        with_products = Design("linear in the inputs and their products (MiB)",
                               log_space=False, features=names, products=True, relative=True)
        if 1 < len(names) <= config.ONLINE_MAX_PRODUCT_FEATURES and (
                n >= with_products.parameters + config.ONLINE_MIN_SPARE_SAMPLES):
            designs.append(with_products)
        if 1 < len(names) <= config.ONLINE_MAX_PRODUCT_FEATURES:
            designs.append(Design("a fixed footprint plus a power of the inputs (MiB)",
                                  log_space=False, features=names, relative=True,
                                  monomial=True))
    return designs


_EXPONENT_GRIDS: dict[int, FloatArray] = {}


def _exponent_grid(k: int) -> FloatArray:
    """Every combination of ONLINE_MONOMIAL_EXPONENTS for k inputs but all zero (rows)."""
    found = _EXPONENT_GRIDS.get(k)
    if found is None:
        grid = np.array(np.meshgrid(*[config.ONLINE_MONOMIAL_EXPONENTS] * k, indexing="ij"))
        rows = grid.reshape(k, -1).T
        found = _EXPONENT_GRIDS[k] = rows[np.any(rows != 0.0, axis=1)]
    return found


def _candidate_columns(raw: FloatArray) -> tuple[FloatArray, FloatArray]:
    """The exponent grid for `raw`'s inputs, and each run's power of them under every
    candidate (runs x candidates): what `best_exponents` and `held_out_choices` score."""
    grid = _exponent_grid(raw.shape[1])
    return grid, np.exp(np.log(np.maximum(raw, 1e-300)) @ grid.T)


def best_exponents(raw: FloatArray, y: FloatArray, w: FloatArray) -> tuple[float, ...] | None:
    """The exponents whose c0 + c1 x^e, fitted by weighted least squares, leaves the least
    weighted square of relative errors (all candidates at once: a few hundred microseconds).
    `raw`: the inputs, a row per run (all finite). The choice is made on the runs the design is
    then judged on, so its leave-one-out errors would be optimistic: on a few dozen runs or
    fewer each is taken as the choice made without its run predicts it (`held_out_choices`);
    past ONLINE_MONOMIAL_HELD_OUT_RUNS the bias is small and the check's cost is not."""
    grid, z = _candidate_columns(raw)
    total = float(w.sum())
    mz = w @ z / total
    my = float(w @ y) / total
    dz = z - mz
    var = w @ (dz * dz)
    ok = var > 1e-12 * np.maximum(mz * mz, 1e-300)
    if not ok.any():
        return None
    slope = np.where(ok, (w @ (dz * (y - my)[:, None])) / np.where(ok, var, 1.0), 0.0)
    fitted = my + dz * slope
    rel = (y[:, None] - fitted) / np.maximum(fitted, config.ONLINE_RELATIVE_FLOOR * my)
    score = np.where(ok, w @ (rel * rel), np.inf)
    return tuple(float(e) for e in grid[int(np.argmin(score))])


_TIED = 1e-9
"""Scores within this share of each other are one: the same fit in other arithmetic."""


def held_out_choices(raw: FloatArray, y: FloatArray, w: FloatArray, chosen: tuple[float, ...]
                     ) -> tuple[NDArray[np.bool_], FloatArray] | None:
    """For each run, whether without it other exponents than `chosen` score better (as
    `best_exponents` scores them), and where they do, the run as the best of them, fitted
    without it, predicts it. None where `chosen` stays the best without any one run.

    Why: the exponents are chosen on the runs the design is then judged on, so its
    leave-one-out errors are those of a shape that already saw the run left out. On a handful
    of runs that bias is not small: among 15 powers of two inputs, one fits six runs of a
    need that grows with both inputs by a power of one of them alone, and its leave-one-out
    loss beat the straight line in both that was right (a scratch input workload: a young
    action asked for four times the tokens of its runs was put at 9.5 GB where it needed 24)."""
    grid, z = _candidate_columns(raw)
    n = raw.shape[0]
    held = np.broadcast_to(w, (n, n)) * (1.0 - np.eye(n))  # row i: the weights without run i
    total = held.sum(axis=1)
    if not np.all(total > 0):
        return None
    mz = held @ z / total[:, None]  # held-out x candidates
    my = held @ y / total
    # Centred before they are squared, as `best_exponents` does: a size in the millions
    # squared leaves nothing of the variance in a difference of raw moments.
    dz = z[None, :, :] - mz[:, None, :]  # [i, j, c]: run j's column, centred without run i
    var = np.einsum("ij,ijc->ic", held, dz * dz)
    cov = np.einsum("ij,ijc->ic", held, dz * (y[None, :] - my[:, None])[:, :, None])
    ok = var > 1e-12 * np.maximum(mz * mz, 1e-300)
    slope = np.where(ok, cov / np.where(ok, var, 1.0), 0.0)
    # fitted[i, j, c]: run j as candidate c fitted without run i predicts it
    fitted = my[:, None, None] + dz * slope[:, None, :]
    floor = config.ONLINE_RELATIVE_FLOOR * my[:, None, None]
    rel = (y[None, :, None] - fitted) / np.maximum(fitted, floor)
    score = np.where(ok, np.einsum("ij,ijc->ic", held, rel * rel), np.inf)
    pick = np.argmin(score, axis=1)
    rows = np.arange(n)
    kept = int(np.flatnonzero(np.all(grid == np.asarray(chosen)[None, :], axis=1))[0])
    # Beaten, not only other: powers of an input that never varies tie with each other.
    moved = score[rows, pick] < score[rows, kept] * (1.0 - _TIED)
    if not moved.any():
        return None
    return moved, fitted[rows, rows, pick]


def pairwise(columns: Sequence[T]) -> list[T]:
    """The products of every pair of the columns (floats of a request, or arrays of a
    history), in one order for the fit and the prediction."""
    k = len(columns)
    return [columns[i] * columns[j] for i in range(k) for j in range(i + 1, k)]
