"""Layout advice against NVIDIA's stock mig-parted layouts, on demand built from a real trace.

The demand is Alibaba's GPU-sharing trace (`../shared/traces/alibaba-gpu-v2023`,
openb_pod_list_default.csv: 8,152 pods over 149 days, each with a fractional GPU request
`gpu_milli` for one GPU, or `num_gpu` whole GPUs). Each pod that ran (not Pending) is an
execution from `scheduled_time` to `deletion_time`, on the GPU model of the row, with:

- a fractional request f = gpu_milli / 1000 < 1: one instance of the smallest MIG profile that
  gives at least f of the card's compute slices and at least f of its memory slices (f = 0.46 on
  an A100-40GB: 4g.20gb, 4/7 of the compute and 4/8 of the memory);
- a request of whole GPUs (gpu_milli = 1000): `num_gpu` instances of the full-card profile
  (7g.40gb on an A100-40GB), in the "all pods" scenario only.

For each scenario, N* is the fewest GPUs on which some layout serves all of it
(`core.layout.fewest_gpus_serving_all`); the advice and every stock layout are then scored on
N*, N*/2 and N*/4 GPUs. Served = the share of the demanded instance-hours a layout holds at
each moment (`core.demand`). Pure computation through `recommender.core` (no server): the
advice a server gives for the same executions is the same function of the same demand.
"""

from __future__ import annotations

import argparse
import csv
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bench.common import table
from recommender.core.catalog import GpuModel, MigProfile, load_catalog
from recommender.core.demand import Demand, Run, demand_of
from recommender.core.layout import advise, fewest_gpus_serving_all

TRACE = "alibaba-gpu-v2023/openb_pod_list_default.csv"
T0 = datetime(2023, 1, 1, tzinfo=UTC)  # the trace's times are seconds from an anonymous start
MODELS = ("A100-40GB", "A30-24GB")


def profile_for(model: GpuModel, fraction: float) -> MigProfile:
    """The smallest base profile with at least `fraction` of the compute and of the memory."""
    fitting = [p for p in model.profiles if p.is_base and p.placement is not None
               and p.compute_slices / model.compute_slices >= fraction - 1e-9
               and p.memory_slices / model.memory_slices >= fraction - 1e-9]
    return min(fitting, key=lambda p: (p.compute_slices, p.memory_slices, p.name))


def trace_runs(traces_dir: Path, model: GpuModel, *, whole: bool) -> list[Run]:
    full = max((p for p in model.profiles if p.is_base and p.placement is not None),
               key=lambda p: p.compute_slices)
    runs = []
    with (traces_dir / TRACE).open(newline="") as f:
        for row in csv.DictReader(f):
            if row["pod_phase"] == "Pending" or not row["scheduled_time"]:
                continue
            gpus, milli = int(row["num_gpu"]), int(row["gpu_milli"] or 0)
            if gpus == 0:
                continue
            start = T0 + timedelta(seconds=int(row["scheduled_time"]))
            end = T0 + timedelta(seconds=int(row["deletion_time"]))
            if milli < 1000 and gpus == 1:
                runs.append(Run(profile_for(model, milli / 1000).name, 1, start, end))
            elif whole:
                runs.append(Run(full.name, gpus, start, end))
    return runs


def _rows(model: GpuModel, demand: Demand) -> tuple[int, list[list[object]]]:
    best_n = fewest_gpus_serving_all(model, demand, limit=100_000)
    rows: list[list[object]] = []
    for n in sorted({max(1, best_n // 4), max(1, best_n // 2), best_n}):
        started = time.perf_counter()
        a = advise(model, demand, n)
        seconds = time.perf_counter() - started
        stock = {s.name: s.served_fraction for s in a.alternatives}
        best_name = max((s for s in a.alternatives), key=lambda s: s.served_fraction).name
        rows.append([n, f"{a.score.served_fraction:.1%}",
                     "exact" if a.exact else f"heuristic, bound {a.bound:.1%}",
                     f"{stock['all-balanced']:.1%}", f"{best_name} {stock[best_name]:.1%}",
                     f"{seconds:.2f}"])
    return best_n, rows


def run(args: argparse.Namespace) -> None:
    traces_dir = Path(args.traces_dir)
    if not (traces_dir / TRACE).exists():
        print(f"{traces_dir / TRACE} not found (--traces-dir)")
        return
    catalog = load_catalog()
    for model_id in MODELS:
        model = catalog.resolve(model_id)
        assert model is not None
        for whole in (False, True):
            runs = trace_runs(traces_dir, model, whole=whole)
            since = min(r.start for r in runs)
            until = max(r.end for r in runs)
            demand = demand_of(runs, since, until)
            peaks = ", ".join(f"{demand.peak(p)} x {p}" for p in demand.profiles)
            scenario = "all pods" if whole else "fractional requests"
            print(f"\n{model.id}, {scenario}: {len(runs):,} executions over "
                  f"{demand.seconds / 86400:,.0f} days, "
                  f"{demand.instance_seconds() / 3600:,.0f} instance-hours; peak at once: "
                  f"{peaks}")
            best_n, rows = _rows(model, demand)
            print(f"fewest GPUs on which a layout serves it all: {best_n}")
            print(table(["GPUs", "advised", "search", "all-balanced", "best stock", "advice s"],
                        rows))
