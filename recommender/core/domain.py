"""Plain values the core works with: what the runner offers, what happened, what we decided."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from typing import Any

from recommender.core.catalog import WHOLE_GPU, GpuModel, MigProfile
from recommender.core.placement import GpuState


class StoreUnavailable(RuntimeError):
    """The database cannot be reached or did not answer in time.

    Raised by any store adapter; the use cases degrade on it (a recommendation from the
    request alone) instead of failing the runner."""


def relative_slack(slice_mib: float, peak_mib: float) -> float | None:
    """(slice - peak) / slice: the share of the slice a successful execution left unused
    (DESIGN.md section 5). None for a slice of no memory."""
    return (slice_mib - peak_mib) / slice_mib if slice_mib > 0 else None


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


_BUSY = ("busy GPUs",)
"""`Node.placements` key of the busy count (the policy's keys are longer tuples)."""


@dataclass(frozen=True)
class Node:
    node_id: str
    gpus: tuple[GpuState, ...]
    placements: dict[Any, Any] = field(default_factory=dict, compare=False, repr=False)
    """The policy's answers for this node, by (model, units, profile, count): a node is
    immutable, so each is computed once however often it is asked (`policy.find_node`). An
    answer depends only on the GPU states in order: `rpc.convert` hands nodes of one shape the
    same dict."""

    @property
    def busy_gpus(self) -> int:
        """GPUs with something on them. Computed once per shape (kept with its placements):
        the policy ranks nodes by it for the recommendation and again for each rung."""
        busy = self.placements.get(_BUSY)
        if busy is None:
            busy = self.placements[_BUSY] = sum(1 for g in self.gpus if not g.idle)
        return int(busy)



def pool_profiles_problem(strategy: Strategy, profiles: tuple[MigProfile, ...]) -> str | None:
    """What is wrong with the profiles a pool configures for its strategy, or None.

    A whole card is not a MIG profile: only a pool with MIG off offers it. The device plugin's
    single strategy exposes one profile per node (it calls each slice `nvidia.com/gpu`), so a
    pool in that strategy names exactly one."""
    if any(p.whole_gpu for p in profiles) and strategy is not Strategy.NONE:
        return f"'{WHOLE_GPU}' needs MIG_STRATEGY_NONE"
    if strategy is Strategy.SINGLE and len(profiles) != 1:
        return f"MIG_STRATEGY_SINGLE exposes exactly one profile per pool, got {len(profiles)}"
    return None


@dataclass(frozen=True)
class Pool:
    pool_id: str
    gpu_model: GpuModel
    strategy: Strategy
    profiles: tuple[MigProfile, ...]
    """Profiles configured on the pool (resolved); empty means every base profile."""
    nodes: tuple[Node, ...] = ()
    spellings: tuple[tuple[str, str], ...] = ()
    """(catalog name, the pool's name) where the pool lists a profile by a driver spelling:
    the device plugin advertises `nvidia.com/mig-<the node's spelling>`."""

    def spelling(self, profile: MigProfile) -> str:
        """The profile's name as this pool's nodes spell it."""
        for name, spelt in self.spellings:
            if name == profile.name:
                return spelt
        return profile.name

    @cached_property
    def nodes_by_busy(self) -> tuple[Node, ...]:
        """Nodes with more GPUs in use first (stable): the order the policy tries them in,
        sorted once per pool instead of once per candidate profile."""
        return tuple(sorted(self.nodes, key=lambda n: -n.busy_gpus))


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
    execution_id: str = field(default="", compare=False)
    """The execution this sample is; "" for an OOM known only from NextAfterOom. With
    `recommendation_id`, what lets a replica update its cached history in place
    (`cache.with_execution`) instead of reading it again."""
    recommendation_id: str = field(default="", compare=False)
    """The recommendation the execution ran (an OOM-only sample: the one that ran out)."""
    run_id: str = field(default="", compare=False)
    """An OOM known only from NextAfterOom: the runner's execution it was recommended for. When
    the runner records how that execution ended (a retried rung that fitted), the OOM gives way
    to the true peak."""
    features: Mapping[str, float] = field(default_factory=dict, compare=False)
    """The request's features, for the per-action model of peak on inputs."""
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
    oom_chance: float = 0.0
    """The chance the decision put on the first rung running out of memory, when it weighed
    a predictive distribution of the need (0 when it did not: a user's figure, a learned
    model's quantile, no information). After an OOM, the chance given that the need is above
    what was known. Kept so that an operator, and `recommender evaluate`, can hold the stated
    risk against what happened: expected cost is only as good as these chances."""
    model_oom_chance: float | None = None
    """For a young action's first attempt (core.calibration): the chance its model put on the
    slice before the population's record at that size moved it, and before the action's own
    count of its runs past the size raised it; None otherwise. What the record is kept from:
    the stated chance includes the record's own factor and the count."""


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
    declared_memory_mib: int = 0
    """The user's own figure in the request, kept for the population prior."""


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

    @property
    def relative_slack(self) -> float | None:
        """Slack of a fitted execution; None while the outcome is unknown or was not a fit."""
        if self.outcome is not Outcome.SUCCEEDED or self.peak_memory_mib is None:
            return None
        return relative_slack(self.recommendation.decision.rung.profile.memory_mib,
                              self.peak_memory_mib)


@dataclass(frozen=True)
class HistoryFilter:
    """Which recommendations an operator asks for (Admin.ListRecommendations, `history`)."""

    action_id: str = ""
    pool_id: str = ""
    gpu_model: str = ""
    source: str = ""
    outcome: str = ""
    """"fitted", "oom", "unknown" or "" for all."""
    created_after: datetime | None = None
    created_before: datetime | None = None


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
