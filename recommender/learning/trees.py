"""Gradient-boosted trees as plain parameters, evaluated with numpy.

A fitted scikit-learn HistGradientBoostingRegressor is exported to lists of numbers (JSON), so a
model version is stored in the database without pickle (nothing to unpickle, nothing to
execute), and the server evaluates it without scikit-learn's per-call overhead: a one-row
`predict` costs about a millisecond in sklearn and tens of microseconds here.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray


def export_hgb(model: Any) -> dict[str, Any]:
    """Trees of a fitted HistGradientBoostingRegressor (numerical features only)."""
    trees = []
    for (predictor,) in model._predictors:
        nodes = predictor.nodes
        if np.any(nodes["is_categorical"]):
            raise ValueError("categorical splits are not supported in exported trees")
        trees.append({
            "feature": nodes["feature_idx"].astype(int).tolist(),
            # A split of the present values from the missing ones has an infinite threshold,
            # which JSON (PostgreSQL's) cannot hold: the largest float splits the same.
            "threshold": np.nan_to_num(nodes["num_threshold"].astype(float)).tolist(),
            "missing_left": nodes["missing_go_to_left"].astype(int).tolist(),
            "left": nodes["left"].astype(int).tolist(),
            "right": nodes["right"].astype(int).tolist(),
            "leaf": nodes["is_leaf"].astype(int).tolist(),
            "value": nodes["value"].astype(float).tolist(),
        })
    return {"type": "trees", "baseline": float(np.ravel(model._baseline_prediction)[0]),
            "trees": trees}


class Trees:
    """Evaluates exported trees; validates the structure once, at load."""

    def __init__(self, params: dict[str, Any]) -> None:
        if params.get("type") != "trees":
            raise ValueError("not a trees model")
        self.baseline = float(params["baseline"])
        self.trees = []
        for t in params["trees"]:
            arrays = {
                k: np.asarray(t[k], dtype=np.float64 if k in ("threshold", "value") else np.int64)
                for k in ("feature", "threshold", "missing_left", "left", "right", "leaf", "value")
            }
            n = len(arrays["value"])
            if any(len(a) != n for a in arrays.values()):
                raise ValueError("tree arrays of different lengths")
            inner = arrays["leaf"] == 0
            for child in ("left", "right"):
                if np.any((arrays[child][inner] <= 0) | (arrays[child][inner] >= n)):
                    raise ValueError("tree child index out of range")
            self.trees.append(arrays)
        # One-row evaluation walks plain lists: numpy's per-call overhead dominates there.
        self._lists = [
            tuple(t[k].tolist() for k in ("feature", "threshold", "missing_left", "left",
                                          "right", "leaf", "value"))
            for t in self.trees
        ]

    def predict_one(self, x: list[float]) -> float:
        total = self.baseline
        for feature, threshold, missing_left, left, right, leaf, value in self._lists:
            node = 0
            while not leaf[node]:
                v = x[feature[node]]
                if v != v:  # NaN
                    node = left[node] if missing_left[node] else right[node]
                elif v <= threshold[node]:
                    node = left[node]
                else:
                    node = right[node]
            total += value[node]
        return total

    def predict(self, x: NDArray[np.float64]) -> NDArray[np.float64]:
        x = np.atleast_2d(np.asarray(x, dtype=np.float64))
        out = np.full(x.shape[0], self.baseline)
        rows = np.arange(x.shape[0])
        for t in self.trees:
            node = np.zeros(x.shape[0], dtype=np.int64)
            while True:
                active = t["leaf"][node] == 0
                if not active.any():
                    break
                idx = node[active]
                values = x[rows[active], t["feature"][idx]]
                missing = np.isnan(values)
                go_left = np.where(missing, t["missing_left"][idx] == 1,
                                   values <= t["threshold"][idx])
                node[active] = np.where(go_left, t["left"][idx], t["right"][idx])
            out += t["value"][node]
        return out


def export_linear(coef: NDArray[np.float64], intercept: float, mean: NDArray[np.float64],
                  scale: NDArray[np.float64]) -> dict[str, Any]:
    return {"type": "linear", "coef": [float(c) for c in coef], "intercept": float(intercept),
            "mean": [float(m) for m in mean], "scale": [float(s) for s in scale]}


class Linear:
    """y = intercept + coef . ((x - mean) / scale), missing features at their mean."""

    def __init__(self, params: dict[str, Any]) -> None:
        if params.get("type") != "linear":
            raise ValueError("not a linear model")
        self.coef = np.asarray(params["coef"], dtype=np.float64)
        self.intercept = float(params["intercept"])
        self.mean = np.asarray(params["mean"], dtype=np.float64)
        self.scale = np.asarray(params["scale"], dtype=np.float64)
        if not (len(self.coef) == len(self.mean) == len(self.scale)):
            raise ValueError("linear parameters of different lengths")

    def predict_one(self, x: list[float]) -> float:
        return float(self.predict(np.asarray([x]))[0])

    def predict(self, x: NDArray[np.float64]) -> NDArray[np.float64]:
        x = np.atleast_2d(np.asarray(x, dtype=np.float64))
        z = np.where(np.isnan(x), 0.0, (x - self.mean) / self.scale)
        return np.asarray(self.intercept + z @ self.coef, dtype=np.float64)


def load_estimator(params: dict[str, Any]) -> Trees | Linear:
    kind = params.get("type")
    if kind == "trees":
        return Trees(params)
    if kind == "linear":
        return Linear(params)
    raise ValueError(f"unknown estimator type {kind!r}")
