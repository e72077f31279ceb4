"""Plain values the core works with: what the runner offers, what happened, what we decided."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from typing import Any

from recommender.catalog import GpuModel, MigProfile
from recommender.placement import GpuState


class Strategy(enum.Enum):
    SINGLE = "single"
    MIXED = "mixed"
    DYNAMIC = "dynamic"
    NONE = "none"


class Outcome(enum.Enum):
    SUCCEEDED = "SUCCEEDED"
    OOM = "OOM"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"


@dataclass(frozen=True)
class Node:
    node_id: str
    gpus: tuple[GpuState, ...]

    @cached_property
    def busy_gpus(self) -> int:
        """GPUs with something on them. Computed once: the policy ranks nodes by it for the
        recommendation and again for each rung of the ladder."""
        return sum(1 for g in self.gpus if not g.idle)


@dataclass(frozen=True)
class Pool:
    pool_id: str
    model: GpuModel
    strategy: Strategy
    profiles: tuple[MigProfile, ...]
    """Profiles configured on the pool (resolved); empty means every base profile."""
    nodes: tuple[Node, ...] = ()


@dataclass(frozen=True)
class Request:
    action_id: str
    execution_id: str
    pools: tuple[Pool, ...]
    workers: int = 1
    max_workers: int = 0
    target_throughput: float = 0.0
    needs_peer_to_peer: bool = False
    declared_memory_mib: int = 0
    features: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Sample:
    """One past execution of an action, as estimation sees it."""

    at: datetime
    peak_mib: float
    slice_mib: float
    outcome: Outcome
    sm_utilization: float = 0.0
    gpu_model: str = ""
    profile: str = ""
    throughput: float = 0.0
    """Items/s per worker, 0 when not measured."""
    count: int = 1
    """Workers the execution ran with: per-worker throughput may fall as the count grows."""
    at_s: float = field(init=False, repr=False, compare=False)
    """`at` as POSIX seconds, computed once: decays weigh every sample on every Recommend, and
    datetime arithmetic cost them more than the rest of the estimate."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "at_s", self.at.timestamp())


@dataclass(frozen=True)
class Rung:
    pool_id: str
    gpu_model: str
    profile: MigProfile
    count: int
    resources: dict[str, str]
    node_id: str = ""
    card_compute_slices: int = 0
    """Compute slices of a whole card of this GPU model (7 on A100, 4 on A30)."""
    node_gpus: int = 0
    """GPUs on the chosen node (0 when the pool listed no nodes)."""

    @property
    def gpu_equivalents(self) -> float:
        """Cards' worth of compute: compute slices x count / compute slices per card."""
        return self.profile.compute_slices * self.count / max(self.card_compute_slices, 1)

    @property
    def node_share(self) -> float:
        """Share of the chosen node's GPU compute; 0 when the node is not known."""
        return self.gpu_equivalents / self.node_gpus if self.node_gpus else 0.0


@dataclass(frozen=True)
class Decision:
    """A recommendation before it has an id: the first rung and the ladder above it."""

    rung: Rung
    predicted_peak_mib: float
    quantile: float
    source: str
    reason: str
    ladder: tuple[Rung, ...]
    model_version: str = ""
    attempt: int = 1
    predicted_throughput: float = 0.0
    """Items/s for the whole execution, when a throughput curve is known."""


@dataclass(frozen=True)
class StoredRecommendation:
    id: str
    created_at: datetime
    action_id: str
    execution_id: str
    decision: Decision
    parent_id: str | None = None
    oom_at: datetime | None = None
    oom_observed_peak_mib: float | None = None


@dataclass(frozen=True)
class Execution:
    """A finished execution as the runner reported it."""

    execution_id: str
    action_id: str
    recommendation_id: str
    gpu_model: str
    profile: str
    slice_memory_mib: int
    count: int
    peak_memory_mib: float
    sm_utilization: float
    duration_s: float
    throughput: float
    outcome: Outcome
    ended_at: datetime
    started_at: datetime | None = None
    features: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class ThroughputRow:
    """Mean per-worker throughput of an action's successful executions with one (GPU model,
    profile, count): a row of the population the throughput curves borrow shapes from."""

    action_id: str
    gpu_model: str
    profile: str
    count: int
    throughput: float
    executions: int


@dataclass(frozen=True)
class HistoryEntry:
    """A recommendation joined with how it turned out, for operators."""

    recommendation: StoredRecommendation
    outcome: Outcome | None
    peak_memory_mib: float | None


@dataclass(frozen=True)
class ModelVersion:
    """A learned model's version and what is known about it."""

    version: str
    created_at: datetime
    kind: str
    promoted: bool
    serving: bool
    metrics: dict[str, float]
    reason: str
    training_window_start: datetime | None
    training_window_end: datetime | None
    params: dict[str, Any] = field(default_factory=dict)
