"""What a workflow runner asks of the service, as a replay drives it: Recommend before an
execution, NextAfterOom after each OOM, RecordExecution when it ends, and now and then the
retraining job. The replay (`recommender.evaluation.replay`) runs one loop and one set of
metrics over this port; one runner calls the use cases in process on trace time (fast, for
tuning), another calls a real server over gRPC on the wall clock, as a live runner does
(`recommender.rpc.runner`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from recommender.core.domain import Execution, Request


@dataclass(frozen=True)
class Attempt:
    """One recommendation as the runner uses it: what to run on, and where it came from."""

    recommendation_id: str
    gpu_model: str
    profile: str
    memory_mib: int
    """Memory of one slice of `profile` (per worker)."""
    source: str
    model_version: str = ""
    oom_chance: float = 0.0
    """The chance of an OOM the service stated for this slice (0: it weighed none)."""


class Runner(Protocol):
    """The service as the runner reaches it. `at` is the trace's time of the call: a runner on
    trace time answers as of then, a live one ignores it (its service reads the wall clock)."""

    def recommend(self, request: Request, at: datetime) -> Attempt: ...

    def next_after_oom(self, attempt: Attempt, observed_peak_mib: float, at: datetime
                       ) -> Attempt | None:
        """The next rung after `attempt` ran out of memory; None when the ladder has none."""
        ...

    def record_execution(self, execution: Execution) -> None:
        """Records a finished execution. Its `started_at` and `ended_at` are the trace's; a
        live runner stamps it when it records it (ended now, started its duration before)."""
        ...

    def retrain(self, at: datetime) -> str:
        """Runs the retraining job on what was recorded and returns once the service serves
        what it promoted (or a bound passed); a line saying what happened."""
        ...


__all__ = ["Attempt", "Runner"]
