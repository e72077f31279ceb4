"""Does a retrained candidate beat the server's own rules on its hold-out?

`recommender retrain` on a fresh SQLite store of 1,500 executions of scratch workloads, each
compared as the server runs (the population and young actions' record as they stood when the
hold-out began and as they were read again through it, the slice each prediction rounds up
to, expected cost): the generated input-dependent workload with 1,000, 300 and 100 actions
(new actions keep arriving with the most; with the fewest, every hold-out action has a history
of its own), one-off actions whose memory a table of model kinds sets, and actions whose memory
steps up past a batch size. The table says what the job decided and why, in numbers: a
learned model earns its place only where it knows what the server's rules cannot.
"""

from __future__ import annotations

import argparse
import re
import tempfile
from collections.abc import Callable, Iterable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from recommender.core.catalog import load_catalog
from recommender.core.domain import Execution, Outcome
from recommender.evaluation.synthetic import (
    SyntheticExecution,
    generate,
    generate_one_off,
    generate_threshold,
)
from recommender.learning.retrain import retrain
from recommender.store import SqlStore, connect, migrate

T0 = datetime(2026, 10, 1, tzinfo=UTC)
EXECUTIONS = 1500

WORKLOADS: dict[str, Callable[[int], Iterable[SyntheticExecution]]] = {
    "generated, 1,000 actions": lambda s: generate(1000, EXECUTIONS, start=T0, seed=s),
    "generated, 300 actions": lambda s: generate(300, EXECUTIONS, start=T0, seed=s),
    "generated, 100 actions": lambda s: generate(100, EXECUTIONS, start=T0, seed=s),
    "one-off actions, memory by kind": lambda s: generate_one_off(EXECUTIONS, start=T0, seed=s),
    "1,000 actions, a step past batch 16": lambda s: generate_threshold(
        1000, EXECUTIONS, start=T0, seed=s),
}

_COST = re.compile(r"cost ([\d,.]+) vs ([\d,.]+) GB-h \(OOM rate ([\d.]+)% vs ([\d.]+)%")
_SHARE = re.compile(r"\((\d+)% of resamples")
_FAMILY = re.compile(r"family (\w+)")


def _run(executions: Iterable[SyntheticExecution]) -> str:
    with tempfile.TemporaryDirectory() as d:
        engine = connect(f"sqlite:///{Path(d) / 'bench.db'}")
        migrate(engine)
        store = SqlStore(engine)
        for i, e in enumerate(executions):
            store.record_execution(Execution(
                f"b{i}", e.action_id, "", "A100-80GB", "7g.80gb", 80896, 1, e.peak_mib, 20.0,
                600.0, 0.0, Outcome.SUCCEEDED, e.at, e.at - timedelta(minutes=10), e.features),
                e.at)
        result = retrain(store, load_catalog(), now=T0 + timedelta(days=10))
        engine.dispose()
        return result.reason


def run(args: argparse.Namespace) -> None:
    seeds = [int(s) for s in str(getattr(args, "seeds", "0")).split(",")]
    print("| workload | seed | family | candidate vs the server's rules, cost GB-h | OOM rate "
          "| resamples cheaper | promoted |")
    print("|---|---|---|---|---|---|---|")
    for name, make in WORKLOADS.items():
        for seed in seeds:
            reason = _run(make(seed))
            cost, share, family = _COST.search(reason), _SHARE.search(reason), \
                _FAMILY.search(reason)
            if cost is None:
                print(f"| {name} | {seed} | | {reason} | | | no |")
                continue
            cand, rules = (float(v.replace(",", "")) for v in cost.group(1, 2))
            print(f"| {name} | {seed} | {family.group(1) if family else ''} | "
                  f"{cand:,.1f} vs {rules:,.1f} ({cand / rules - 1:+.1%}) | "
                  f"{cost.group(3)} % vs {cost.group(4)} % | "
                  f"{share.group(1) if share else '?'} % | "
                  f"{'yes' if reason.startswith('promoted') else 'no'} |")
