"""Workloads to replay: real GPU memory traces and the generated feature-dependent workload."""

from __future__ import annotations

import csv
import io
import tarfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from recommender.evaluation.synthetic import (
    SyntheticExecution,
    Truth,
    generate,
    generate_models,
    generate_modes,
    generate_shapes,
    generate_step,
)

GENTD26 = "alibaba-gentd26/pod_gpu_memory_used_bytes_anon.tar.gz"


@dataclass(frozen=True)
class TraceExecution:
    action_id: str
    at: datetime
    peak_mib: float
    duration_h: float = 1.0
    features: dict[str, float] = field(default_factory=dict)
    declared_mib: float = 0.0
    truth: Truth | None = None
    """A generated execution's: the distribution its peak was drawn from."""
    phase: str = ""
    """A generated execution's: where it sits in its action's story (`synthetic.PHASES`; ""
    where the generator tells none)."""


def gentd26_hourly(traces_dir: Path, *, max_pods: int = 0) -> list[TraceExecution]:
    """Each pod an action, each hour of it an execution with that hour's peak GPU memory."""
    return gentd26_windows(traces_dir, max_pods=max_pods)


def gentd26_windows(traces_dir: Path, *, max_pods: int = 0, window_minutes: int = 60
                    ) -> list[TraceExecution]:
    """Each pod an action, each window of `window_minutes` of it an execution with that
    window's peak GPU memory, lasting the window.

    Windows are aligned on the trace's first sample. Streams the compressed CSV; nothing is
    extracted to disk. Why other windows than the hour: the trace has no executions, only a
    pod's memory about once a minute, so what an "execution" is is the replay's choice. Shorter
    windows give more, less spread executions per pod (a history rule sees more runs, and
    growth within a pod's life is split over them); longer ones fewer, each holding its slice
    longer. A result that holds at one window only is the window's, not the service's.
    """
    if window_minutes <= 0:
        raise ValueError(f"window_minutes: must be positive, got {window_minutes}")
    window_s = window_minutes * 60.0
    path = traces_dir / GENTD26
    peaks: dict[tuple[str, int], float] = {}
    with tarfile.open(path, "r:gz") as tar:
        member = next(m for m in tar.getmembers() if m.name.endswith(".csv"))
        raw = tar.extractfile(member)
        if raw is None:
            raise ValueError(f"{path}: no CSV inside")
        rows = csv.DictReader(io.TextIOWrapper(raw, encoding="utf-8"))
        samples = [(float(r["timestamp_anon"]), r["container_ip"], float(r["value"]))
                   for r in rows]
    first = min(t for t, _, _ in samples)
    for t, pod, value in samples:
        key = (pod, int((t - first) // window_s))
        mib = value / 2**20
        if mib > peaks.get(key, 0.0):
            peaks[key] = mib
    pods = sorted({p for p, _ in peaks})
    if max_pods:
        pods = pods[:max_pods]
    keep = set(pods)
    start = datetime.fromtimestamp(first, tz=UTC)
    window = timedelta(seconds=window_s)
    hours = window_s / 3600.0
    out = [
        TraceExecution(f"pod-{pod[:10]}", start + window * (index + 1), peak, hours)
        for (pod, index), peak in peaks.items()
        if pod in keep and peak > 0
    ]
    out.sort(key=lambda e: (e.at, e.action_id))
    return out


Generator = Callable[..., Iterable[SyntheticExecution]]


def _generated(generator: Generator, start: datetime, actions: int, executions: int,
               seed: int) -> list[TraceExecution]:
    """A generated workload as a trace: executions two minutes apart, each lasting 10 minutes."""
    return [
        TraceExecution(e.action_id, e.at, e.peak_mib, 10 / 60, e.features, e.declared_mib,
                       e.truth, e.phase)
        for e in generator(actions, executions, start=start, seed=seed,
                           spacing=timedelta(minutes=2))
    ]


def synthetic(actions: int = 40, executions: int = 6000, seed: int = 7) -> list[TraceExecution]:
    """The generated workload (learning/synthetic.py): memory depends on batch and input size."""
    return _generated(generate, datetime(2026, 9, 1, tzinfo=UTC), actions, executions, seed)


def step_change(actions: int = 30, executions: int = 4000, seed: int = 11
                ) -> list[TraceExecution]:
    """The step-change workload (synthetic.generate_step): a new version of each action's code
    needs more memory from some point on, and the request does not say so."""
    return _generated(generate_step, datetime(2026, 10, 1, tzinfo=UTC), actions, executions,
                      seed)


def modes(actions: int = 30, executions: int = 4000, seed: int = 1) -> list[TraceExecution]:
    """Peaks in two modes the request does not reveal (synthetic.generate_modes)."""
    return _generated(generate_modes, datetime(2026, 11, 15, tzinfo=UTC), actions, executions,
                      seed)


def shapes(actions: int = 40, executions: int = 5000, seed: int = 5) -> list[TraceExecution]:
    """Input-dependent memory of other shapes (synthetic.generate_shapes): image, attention and
    noisy actions."""
    return _generated(generate_shapes, datetime(2026, 11, 1, tzinfo=UTC), actions, executions,
                      seed)


def models(actions: int = 60, executions: int = 3000, seed: int = 1) -> list[TraceExecution]:
    """Actions that each serve one model whose size their requests carry, constant within
    each (synthetic.generate_models)."""
    return _generated(generate_models, datetime(2026, 11, 20, tzinfo=UTC), actions, executions,
                      seed)


def chronological(executions: list[TraceExecution]) -> Iterator[TraceExecution]:
    yield from sorted(executions, key=lambda e: (e.at, e.action_id))
