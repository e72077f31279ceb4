"""Builders for the core's plain values (pools, estimates, executions, requests, model versions),
shared by the tests. Builders for protobuf messages are in tests/helpers.py.

A test module imports its builders from here or from tests/helpers.py, never from another test
module: a builder changed for one test then visibly changes it for every test that uses it.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from recommender.core.catalog import Catalog
from recommender.core.domain import (
    Execution,
    ModelVersion,
    Node,
    Outcome,
    Pool,
    Request,
    Strategy,
)
from recommender.core.estimation import PRIOR, Estimate

T0 = datetime(2026, 11, 1, tzinfo=UTC)
"""When the executions built here end, unless told otherwise."""


def mk(catalog: Catalog, pool_id: str = "a100", model: str = "A100-40GB",
       strategy: Strategy = Strategy.MIXED, profiles: tuple[str, ...] = (),
       nodes: tuple[Node, ...] = ()) -> Pool:
    """A pool of `model` GPUs offering `profiles` (every base profile when empty)."""
    m = catalog.resolve(model)
    assert m is not None
    resolved = tuple(p for name in profiles if (p := m.profile(name)) is not None)
    return Pool(pool_id, m, strategy, resolved, nodes)


def est(mib: float, source: str = PRIOR, floor: float = 0.0) -> Estimate:
    return Estimate(mib=mib, source=source, quantile=0.0, detail="test", hard_floor_mib=floor)


def req(catalog: Catalog, action: str = "act") -> Request:
    """One worker declaring 7,500 MiB on an A100-40GB mixed pool (DESIGN.md's worked
    example): the prior gives 1g.10gb, with 3g.20gb and 7g.40gb above it."""
    return Request(action, "", (mk(catalog),), declared_memory_mib=7500)


def execution(eid: str, action: str = "act", peak: float = 3000.0,
              outcome: Outcome = Outcome.SUCCEEDED, at: datetime = T0,
              rec: str = "") -> Execution:
    """An execution of one worker in a 1g.10gb slice of an A100-40GB, ended at `at`."""
    return Execution(eid, action, rec, "A100-40GB", "1g.10gb", 9856, 1, peak, 10.0, 60.0, 1.0,
                     outcome, at, at - timedelta(minutes=1), {"batch": 8.0})


def model_version(name: str, at: datetime, *, serving: bool = False, promoted: bool = False,
                  kind: str = "memory") -> ModelVersion:
    """A learned model's version with metrics, a training window and (large) parameters."""
    return ModelVersion(
        version=name, created_at=at, kind=kind, promoted=promoted, serving=serving,
        metrics={"oom_rate": 0.01, "median_slack": 0.21}, reason=f"{name}: beats the baseline",
        training_window_start=at - timedelta(days=7), training_window_end=at,
        params={"big": list(range(10))},
    )
