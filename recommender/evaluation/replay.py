"""Replays a workload in time order and measures what each sizing rule would have cost.

The service is replayed as the runner calls it (`core.runner.Runner`): Recommend before each
execution, NextAfterOom after each OOM until a rung fits, RecordExecution at the end, and the
retraining job at points of the sequence. One loop and one set of metrics serve both runners:
a real server over gRPC on the wall clock (`recommender.rpc.runner`, what `recommender
evaluate` uses by default) and the use cases in process on trace time (`InProcessRunner`, on a
real temporary SQL store, fast, for tuning). The
baselines of DESIGN.md section 5 are replayed against the same offered slices, the same ladder
discipline (next bigger slice after an OOM) and the same cold start (an action's first
execution gets the largest offered slice, as the service's no-information fallback does).

Metrics (DESIGN.md section 5): OOM rate (first attempt too small), retries, wasted GB-h
(memory held by attempts that died; an attempt is assumed to hold its slice for the whole
execution), relative slack on successful first attempts, reserved GB-h against the oracle
(the smallest offered slice that fits each execution's real peak).
"""

from __future__ import annotations

import itertools
import math
import statistics
import tempfile
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from recommender.core import config
from recommender.core.catalog import Catalog
from recommender.core.domain import (
    Execution,
    Outcome,
    Pool,
    Request,
    StoredRecommendation,
    Strategy,
    relative_slack,
)
from recommender.core.estimation import decay_weight, weighted_quantile
from recommender.core.ladder import LadderExhausted
from recommender.core.options import candidate_profiles
from recommender.core.policy import slice_sizes
from recommender.core.predictive import Tail, expected_cost, oom_wait_mib
from recommender.core.runner import Attempt, Runner
from recommender.core.usecases import UseCases
from recommender.evaluation.synthetic import PHASES
from recommender.evaluation.traces import TraceExecution
from recommender.learning.retrain import retrain
from recommender.learning.serving import ModelHolder
from recommender.store import SqlStore, connect, migrate


@dataclass(frozen=True)
class FirstAttempt:
    """One execution of the service's replay, as `frontier_point` moves it."""

    chance: float
    """The chance of an OOM its first recommendation stated (0: none stated)."""
    slice_mib: float
    peak_mib: float
    hours: float
    reserved_gbh: float
    """What all its attempts held."""


@dataclass
class Metrics:
    name: str
    executions: int = 0
    first_oom: int = 0
    retries: int = 0
    unserved: int = 0
    wasted_gbh: float = 0.0
    reserved_gbh: float = 0.0
    slack: list[float] = field(default_factory=list)
    excess_gbh: dict[str, float] = field(default_factory=dict)
    """Reserved GB-h above the oracle's, by where it was spent (`excess_of`)."""
    first_from: dict[str, int] = field(default_factory=dict)
    """Executions by where their first recommendation came from (and LADDER: executions that
    went up it)."""
    oom_from: dict[str, int] = field(default_factory=dict)
    """First attempts that ran out, by where they came from: what each source's memory bought."""
    retrains: list[str] = field(default_factory=list)
    """What each run of the retraining job did (the service's replays only)."""
    stated: list[tuple[float, bool]] = field(default_factory=list)
    """Per execution whose first recommendation stated a chance of an OOM: that chance, and
    whether it ran out of memory (the service's replays only); those on the largest slice
    offered are in `stated_on_largest` instead."""
    stated_on_largest: list[tuple[float, bool]] = field(default_factory=list)
    """The same for first recommendations of the largest slice offered (none holds 10 % more):
    the chance there weighed no choice (the tail beyond every slice), and a trace whose peaks
    are capped to fit never shows those OOMs, so it is kept out of the calibration rows."""

    by_run: dict[str, list[float]] = field(default_factory=dict)
    """Per group of the actions' executions (`run_group`): executions, the GB-h their first
    slices held, the oracle's GB-h, and how many of those first attempts ran out (the service's
    replays only: where in an action's life its excess is spent)."""
    against_truth: dict[str, list[float]] = field(default_factory=dict)
    """Per group of the actions' executions (`run_group`) whose trace gives the distribution
    each peak was drawn from (a generated one's): executions, OOMs expected on the service's
    first slices and on the best ones knowing that distribution (`best_first_slice`), and the
    GB-h those two sets of first slices held (the service's replays only)."""
    firsts: list[FirstAttempt] = field(default_factory=list)
    """Per execution of the service's replays: its first attempt, its stated chance and what
    all its attempts held (`frontier_point`)."""
    by_phase: dict[str, list[float]] = field(default_factory=dict)
    """Per phase of the executions whose trace tells where each sits in its action's story
    (a generated one's, `TraceExecution.phase`): executions, first attempts that ran out, the
    chances stated for them (the service's replays; 0 for a rule) and the GB-h their first
    slices held (`phase_table`)."""

    @property
    def oom_rate(self) -> float:
        return self.first_oom / max(self.executions, 1)

    def add(self, attempts: Sequence[float], peak: float, hours: float, served: bool) -> None:
        """`attempts`: slice MiB of each attempt in order; the last one fitted if served."""
        self.executions += 1
        failed = attempts[:-1] if served else attempts
        self.first_oom += attempts[0] < peak
        self.retries += len(attempts) - 1
        self.unserved += not served
        self.wasted_gbh += sum(failed) / 1024 * hours
        self.reserved_gbh += sum(attempts) / 1024 * hours
        if served and len(attempts) == 1:
            self.slack.append(relative_slack(attempts[0], peak) or 0.0)

    def place(self, phase: str, first_mib: float, peak: float, hours: float,
              chance: float = 0.0) -> None:
        """Counts a first attempt in its `phase` (`by_phase`); nothing for no phase."""
        if not phase:
            return
        row = self.by_phase.setdefault(phase, [0.0] * 4)
        row[0] += 1
        row[1] += first_mib < peak
        row[2] += chance
        row[3] += first_mib / 1024 * hours


@dataclass(frozen=True)
class Slices:
    """Every slice the offered pools expose, smallest memory first (fewer compute at ties)."""

    mib: tuple[int, ...]

    @classmethod
    def of(cls, pools: Sequence[Pool]) -> Slices:
        sizes = sorted({p.memory_mib for pool in pools for p in candidate_profiles(pool)})
        return cls(tuple(sizes))

    def fit(self, need: float) -> int:
        return next((s for s in self.mib if s >= need), self.mib[-1])

    def attempts(self, first: int, peak: float) -> tuple[list[float], bool]:
        """Ladder from `first`: the next bigger slice after each OOM, until it fits."""
        tried = [float(first)]
        while tried[-1] < peak:
            bigger = [s for s in self.mib if s > tried[-1]]
            if not bigger:
                return tried, False
            tried.append(float(bigger[0]))
        return tried, True


# --- baselines ----------------------------------------------------------------------------


@dataclass
class History:
    """Per action: (time, value) where an OOM's value is the slice it died in, bumped."""

    values: dict[str, list[tuple[datetime, float]]] = field(default_factory=dict)
    last: dict[str, float] = field(default_factory=dict)


Rule = Callable[[History, TraceExecution], float | None]


def vpa(h: History, e: TraceExecution) -> float | None:
    """Kubernetes VPA: P90 of decayed peaks (24 h half-life) x 1.15."""
    v = h.values.get(e.action_id)
    if not v:
        return None
    weights = [decay_weight(e.at - t, timedelta(hours=24)) for t, _ in v]
    return weighted_quantile([x for _, x in v], weights, 0.90) * 1.15


def ryax_2610(h: History, e: TraceExecution) -> float | None:
    """Ryax IntelliScale 26.10: the last observed peak + 10 %."""
    last = h.last.get(e.action_id)
    return None if last is None else last * 1.10


def max_x12(h: History, e: TraceExecution) -> float | None:
    v = h.values.get(e.action_id)
    return None if not v else max(x for _, x in v) * 1.2


def declared(h: History, e: TraceExecution) -> float | None:
    return e.declared_mib or None


VPA = "Kubernetes VPA (P90 x 1.15, 24 h)"
"""The baseline the issue's bars are set against (`frontier_table`'s last line)."""

BASELINES: dict[str, Rule] = {
    VPA: vpa,
    "Ryax 26.10 (peak + 10 %)": ryax_2610,
    "max of history x 1.2": max_x12,
    "user's declared memory": declared,
}


def replay_rule(name: str, rule: Rule, trace: Sequence[TraceExecution], slices: Slices
                ) -> Metrics:
    m = Metrics(name)
    h = History()
    for e in trace:
        need = rule(h, e)
        first = slices.fit(need) if need is not None else slices.mib[-1]
        attempts, served = slices.attempts(first, e.peak_mib)
        m.add(attempts, e.peak_mib, e.duration_h, served)
        m.place(e.phase, attempts[0], e.peak_mib, e.duration_h)
        values = h.values.setdefault(e.action_id, [])
        for slice_mib in attempts[:-1] if served else attempts:
            # The VPA OOM bump: max(+20 %, +100 MiB) over the memory it died with.
            values.append((e.at, max(slice_mib * 1.2, slice_mib + 100)))
        if served:
            values.append((e.at, e.peak_mib))
        h.last[e.action_id] = e.peak_mib if served else attempts[-1]
    return m


def oracle(trace: Sequence[TraceExecution], slices: Slices) -> Metrics:
    m = Metrics("oracle (smallest slice that fits the real peak)")
    for e in trace:
        m.add([float(slices.fit(e.peak_mib))], e.peak_mib, e.duration_h,
              slices.fit(e.peak_mib) >= e.peak_mib)
    return m


# --- the service ----------------------------------------------------------------------------


class InProcessRunner:
    """The use cases called in process on trace time, on a real SQL store: what the server
    runs, minus the socket and the wall clock (fast, for tuning). The retraining job runs in
    process and its promoted version serves from the next call."""

    def __init__(self, store: SqlStore, catalog: Catalog,
                 oom_wait_gpus: float = config.OOM_WAIT_GPUS) -> None:
        self.store = store
        self.catalog = catalog
        self.oom_wait_gpus = oom_wait_gpus
        self.now = datetime.now(UTC)
        self.holder = ModelHolder(store, oom_wait_gpus=oom_wait_gpus)
        self.use_cases = UseCases(store, catalog=catalog, learned=self.holder.current,
                                  clock=lambda: self.now, oom_wait_gpus=oom_wait_gpus)

    def recommend(self, request: Request, at: datetime) -> Attempt:
        self.now = at
        return attempt_of(self.use_cases.recommend(request).recommendation)

    def next_after_oom(self, attempt: Attempt, observed_peak_mib: float, at: datetime
                       ) -> Attempt | None:
        self.now = at
        try:
            rec = self.use_cases.next_after_oom(attempt.recommendation_id, observed_peak_mib)
        except LadderExhausted:
            return None
        return attempt_of(rec.recommendation)

    def record_execution(self, execution: Execution) -> None:
        # Recorded at the clock of the execution's start, as the replay always did: on trace
        # time the next execution of the action starts no earlier than this one did.
        self.use_cases.record_execution(execution)

    def retrain(self, at: datetime) -> str:
        self.now = at
        result = retrain(self.store, self.catalog, now=at, oom_wait_gpus=self.oom_wait_gpus)
        self.holder.refresh()
        return f"retrain {result.version or '-'}: {result.reason}"


def attempt_of(rec: StoredRecommendation) -> Attempt:
    rung = rec.decision.rung
    return Attempt(rec.id, rung.gpu_model, rung.profile.name, rung.profile.memory_mib,
                   rec.decision.source, rec.decision.model_version, rec.decision.oom_chance)


@contextmanager
def in_process(catalog: Catalog, database_url: str = "",
               oom_wait_gpus: float = config.OOM_WAIT_GPUS) -> Iterator[InProcessRunner]:
    """An in-process runner on `database_url`, or on a temporary SQLite file, pricing an OOM
    at `oom_wait_gpus`."""
    with tempfile.TemporaryDirectory() as tmp:
        engine = connect(database_url or f"sqlite:///{tmp}/replay.db")
        migrate(engine)
        store = SqlStore(engine)
        try:
            yield InProcessRunner(store, catalog, oom_wait_gpus)
        finally:
            store.close()
            engine.dispose()


RunnerFactory = Callable[[], AbstractContextManager[Runner]]
"""Starts a fresh service (its own empty store) for one replay and stops it afterwards."""

RETRAIN_AT = (0.3, 0.5, 0.7, 0.9)
"""Where in the sequence the retraining job runs: the maintainers' protocol (issue 11)."""


SPARSE_RUNS = config.ONLINE_MIN_SAMPLES_OVER_LEARNED
SPARSE = f"history, sparse (its first {SPARSE_RUNS} runs)"
"""The excess table's name for history-based first recommendations of an action with fewer
than SPARSE_RUNS executions before it: the service's own line between a history it trusts over
a learned model and one it does not."""
LADDER = "ladder (the rungs after an OOM)"


RUN_GROUPS = ("its first", "its second", "its third", "its 4th to 10th", "its 11th on")
"""`run_table`'s rows: the first three executions one by one (where the population, then its
first two runs, speak for an action), then the rest of its sparse history, then the rest."""


def run_group(runs_before: int) -> str:
    """The `RUN_GROUPS` row of an execution after `runs_before` of its action's."""
    return RUN_GROUPS[min(runs_before, 3) if runs_before < 10 else 4]


def excess_of(attempts: Sequence[float], oracle_mib: float, source: str
              ) -> list[tuple[str, float]]:
    """One execution's memory above the oracle's slice (MiB, each held for the run), split by
    where it was spent: the first attempt to `source` (all of it when it ran out of memory,
    else what it held beyond the oracle's slice), the rungs after it to LADDER (beyond the
    oracle's slice, which the last rung holds at least). The parts add up to the attempts'
    memory less the oracle's."""
    if len(attempts) == 1:
        return [(source, attempts[0] - oracle_mib)]
    return [(source, attempts[0]), (LADDER, sum(attempts[1:]) - oracle_mib)]


def retrain_points(n: int, retrain_at: Sequence[float] = (), retrain_every: int = 0
                   ) -> set[int]:
    """Indices of the executions before which the retraining job runs: each fraction of
    `retrain_at` of the `n` executions, and every `retrain_every` executions."""
    points = {round(f * n) for f in retrain_at}
    if retrain_every:
        points |= set(range(retrain_every, n, retrain_every))
    return {i for i in points if 0 < i < n}


Ladder = tuple[list[float], float]
"""A pool's slice sizes, smallest first, and what an OOM's wait costs there (MiB x duration)."""


def ladders_of(pools: Sequence[Pool], oom_wait_gpus: float) -> list[Ladder]:
    """Each pool's sizes (`policy.slice_sizes`) and its wait at `oom_wait_gpus` whole GPUs of
    its model (`oom_wait_mib`): what `best_first_slice` weighs, worked out once a replay."""
    return [(slice_sizes(candidate_profiles(pool)),
             oom_wait_mib(pool.gpu_model.memory_mib, oom_wait_gpus)) for pool in pools]


def best_first_slice(ladders: Sequence[Ladder], truth: Tail) -> float:
    """The first slice a rule that knew the distribution of the peak would start on: least
    expected cost over every pool's sizes (`ladders_of`), by the policy's own measure
    (`expected_cost`: the slice, the climb after an OOM, the wait), smaller at a tie. The
    service's slices against these say what its predictions cost at its price; what the price
    itself buys is the difference between these and the oracle's."""
    found = [(expected_cost(sizes, i, truth, wait), size)
             for sizes, wait in ladders for i, size in enumerate(sizes)]
    if not found:
        raise ValueError("no pool offers a slice")
    return min(found)[1]


def replay_service(name: str, trace: Sequence[TraceExecution], pools: Sequence[Pool],
                   catalog: Catalog, *, retrain_at: Sequence[float] = (),
                   retrain_every: int = 0, database_url: str = "", use_features: bool = True,
                   runner: RunnerFactory | None = None,
                   progress: Callable[[str], None] | None = None,
                   status: Callable[[str], None] | None = None,
                   oom_wait_gpus: float = config.OOM_WAIT_GPUS) -> Metrics:
    """The service itself, as the runner calls it: Recommend, NextAfterOom until it fits,
    RecordExecution; the retraining job before the executions `retrain_points` names.
    `runner` starts the service (default: in process on trace time, on `database_url` or a
    temporary SQLite file). `progress` hears each retraining's result, `status` the count of
    executions replayed (a progress display). `oom_wait_gpus`: the price the service was
    started with, at which the best first slices of a trace that gives each peak's
    distribution are weighed (`best_first_slice`)."""
    say = progress or (lambda _m: None)
    tell = status or (lambda _m: None)
    m = Metrics(name)
    slices = Slices.of(pools)
    points = retrain_points(len(trace), retrain_at, retrain_every)
    runs: dict[str, int] = {}  # executions of each action replayed so far
    ladders = ladders_of(pools, oom_wait_gpus)  # the best first slices' (`best_first_slice`)
    start = runner or (lambda: in_process(catalog, database_url))
    with start() as service:
        for i, e in enumerate(trace):
            tell(f"{i:,}/{len(trace):,} executions")
            if i in points:
                tell(f"{i:,}/{len(trace):,} executions, retraining")
                said = service.retrain(e.at)
                m.retrains.append(f"{i:,} executions: {said}")
                say(m.retrains[-1])
            request = Request(
                action_id=e.action_id, execution_id=f"x{i}", pools=tuple(pools),
                declared_memory_mib=int(e.declared_mib),
                features=dict(e.features) if use_features else {},
            )
            first = attempt = service.recommend(request, e.at)
            attempts = [float(attempt.memory_mib)]
            served = True
            while attempts[-1] < e.peak_mib:
                step = service.next_after_oom(attempt, 0.0, e.at)
                if step is None:
                    served = False
                    break
                attempt = step
                attempts.append(float(attempt.memory_mib))
            m.add(attempts, e.peak_mib, e.duration_h, served)
            m.place(e.phase, attempts[0], e.peak_mib, e.duration_h, first.oom_chance)
            m.firsts.append(FirstAttempt(first.oom_chance, attempts[0], e.peak_mib,
                                         e.duration_h, sum(attempts) / 1024 * e.duration_h))
            source = (first.source if first.source != "model"
                      else f"model ({first.model_version})")
            before = runs.get(e.action_id, 0)
            runs[e.action_id] = before + 1
            if source == "history" and before < SPARSE_RUNS:
                source = SPARSE
            ran_out = attempts[0] < e.peak_mib
            oracle_mib = slices.fit(e.peak_mib)
            where_in_life = run_group(before)
            group = m.by_run.setdefault(where_in_life, [0.0] * 5)
            group[0] += 1
            group[1] += attempts[0] / 1024 * e.duration_h
            group[2] += oracle_mib / 1024 * e.duration_h
            group[3] += ran_out
            group[4] += first.oom_chance
            if e.truth is not None:
                best_mib = best_first_slice(ladders, e.truth)
                truth = m.against_truth.setdefault(where_in_life, [0.0] * 5)
                truth[0] += 1
                truth[1] += e.truth.survival(attempts[0])
                truth[2] += e.truth.survival(best_mib)
                truth[3] += attempts[0] / 1024 * e.duration_h
                truth[4] += best_mib / 1024 * e.duration_h
            if ran_out:
                m.oom_from[source] = m.oom_from.get(source, 0) + 1
            for where, mib in excess_of(attempts, oracle_mib, source):
                m.excess_gbh[where] = m.excess_gbh.get(where, 0.0) + mib / 1024 * e.duration_h
                m.first_from[where] = m.first_from.get(where, 0) + 1
            if first.oom_chance > 0:
                on_largest = attempts[0] * LARGEST_SHARE > slices.mib[-1]
                (m.stated_on_largest if on_largest else m.stated).append(
                    (first.oom_chance, attempts[0] < e.peak_mib))
            service.record_execution(Execution(
                execution_id=f"x{i}", action_id=e.action_id,
                recommendation_id=attempt.recommendation_id, gpu_model=attempt.gpu_model,
                profile=attempt.profile, slice_memory_mib=attempt.memory_mib, count=1,
                peak_memory_mib=e.peak_mib if served else attempt.memory_mib,
                sm_utilization=0.0, duration_s=e.duration_h * 3600, throughput=0.0,
                outcome=Outcome.SUCCEEDED if served else Outcome.OOM,
                started_at=e.at, ended_at=e.at + timedelta(hours=e.duration_h),
                features=dict(e.features)))
    return m


def mixed_pools(catalog: Catalog, models: Sequence[str]) -> tuple[Pool, ...]:
    pools = []
    for name in models:
        model = catalog.resolve(name)
        if model is None:
            raise ValueError(f"unknown GPU model {name}")
        pools.append(Pool(f"{model.id.lower()}-{uuid.uuid4().hex[:4]}", model, Strategy.MIXED,
                          ()))
    return tuple(pools)


def table(results: Sequence[Metrics], oracle_gbh: float) -> str:
    lines = [
        "| rule | OOM rate | retries | wasted GB-h | median slack | reserved GB-h | vs oracle |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in results:
        slack = statistics.median(r.slack) if r.slack else math.nan
        lines.append(
            f"| {r.name} | {r.oom_rate:.2%} | {r.retries} | {r.wasted_gbh:,.0f} | "
            f"{slack:.1%} | {r.reserved_gbh:,.0f} | {r.reserved_gbh / oracle_gbh:.2f}x |")
    return "\n".join(lines)


@dataclass(frozen=True)
class Draw:
    """One draw of a generated workload (`recommender evaluate --seeds`): the service's replay
    and VPA's, and the oracle's reserved GB-h."""

    seed: int
    service: Metrics
    vpa: Metrics
    oracle_gbh: float
    at_vpa_gbh: float | None
    """The service's reserved GB-h at VPA's count of first attempts that ran out
    (`frontier_at`); None where its stated chances do not reach it."""

    @classmethod
    def of(cls, seed: int, service: Metrics, vpa: Metrics, oracle_gbh: float,
           slices: Slices) -> Draw:
        return cls(seed, service, vpa, oracle_gbh, frontier_at(service, slices, vpa.first_oom))


def _summed(name: str, runs: Sequence[Metrics]) -> Metrics:
    return Metrics(name, executions=sum(m.executions for m in runs),
                   first_oom=sum(m.first_oom for m in runs),
                   retries=sum(m.retries for m in runs),
                   reserved_gbh=math.fsum(m.reserved_gbh for m in runs))


def _totals(draws: Sequence[Draw]) -> tuple[Metrics, Metrics]:
    """The service's and VPA's replays over all the draws, added up."""
    return (_summed("service", [d.service for d in draws]),
            _summed(VPA, [d.vpa for d in draws]))


def _against_rule(gbh: float | None, rule_gbh: float, unit: str = "", against: str = ""
                  ) -> str:
    """The service's GB-h at a rule's count of OOMs (`frontier_at`) and how it stands to the
    rule's own `rule_gbh`: "156,309 (-4.8%)", or with `unit` and `against` "156,309 GB-h
    (-4.8% against its)"; "not reached" where no bar gets there."""
    return ("not reached" if gbh is None
            else f"{gbh:,.0f}{unit} ({gbh / max(rule_gbh, 1e-9) - 1:+.1%}{against})")


def draws_table(draws: Sequence[Draw]) -> str:
    """A row per draw, then their total: first attempts that ran out, retries and reserved
    GB-h (and x the oracle), the service's beside VPA's; last, the service's GB-h at VPA's
    count of OOMs (`frontier_at`) and how it stands to VPA's. Why: on one draw a difference of
    a few OOMs is what the next draw moves; on how many draws a rule wins, and by how much in
    total, is what holds; and where the service ran out more often at less memory, whether
    its own chances buy VPA's count for less memory than VPA held (a price) or not (the
    predictions)."""
    lines = ["| seed | service: first attempts that ran out | retries | reserved GB-h | x oracle "
             "| VPA: first attempts that ran out | retries | reserved GB-h | x oracle "
             "| service at VPA's OOMs: GB-h (vs VPA) |",
             "|---|---|---|---|---|---|---|---|---|---|"]

    def cells(m: Metrics, oracle_gbh: float) -> str:
        return (f"{m.first_oom:,} | {m.retries:,} | {m.reserved_gbh:,.0f} | "
                f"{m.reserved_gbh / oracle_gbh:.2f}x")

    for d in draws:
        lines.append(f"| {d.seed} | {cells(d.service, d.oracle_gbh)} | "
                     f"{cells(d.vpa, d.oracle_gbh)} | "
                     f"{_against_rule(d.at_vpa_gbh, d.vpa.reserved_gbh)} |")
    if len(draws) > 1:
        oracle = math.fsum(d.oracle_gbh for d in draws)
        ours, theirs = _totals(draws)
        reached = [d.at_vpa_gbh for d in draws if d.at_vpa_gbh is not None]
        at_vpa = math.fsum(reached) if len(reached) == len(draws) else None
        lines.append(f"| all {len(draws)} | {cells(ours, oracle)} | {cells(theirs, oracle)} | "
                     f"{_against_rule(at_vpa, theirs.reserved_gbh)} |")
    return "\n".join(lines)


def draws_said(draws: Sequence[Draw]) -> str:
    """On how many draws the service ran out fewer times than VPA, as often, more often, and
    on how many it reserved less memory; the totals' difference; and of the draws where it
    ran out more often, on how many its own chances reach VPA's count with less memory than
    VPA held (`frontier_at`)."""
    fewer = sum(d.service.first_oom < d.vpa.first_oom for d in draws)
    same = sum(d.service.first_oom == d.vpa.first_oom for d in draws)
    less = sum(d.service.reserved_gbh < d.vpa.reserved_gbh for d in draws)
    ours, theirs = _totals(draws)
    change = ours.reserved_gbh / max(theirs.reserved_gbh, 1e-9) - 1.0
    said = (f"Against VPA, the service's first attempts ran out fewer times on {fewer} of "
            f"{len(draws)} draws, as many on {same}, more on {len(draws) - fewer - same}; it "
            f"reserved less memory on {less}. In all, {ours.first_oom:,} against "
            f"{theirs.first_oom:,} (retries: {ours.retries:,} against {theirs.retries:,}), at "
            f"{abs(change):.1%} {'less' if change < 0 else 'more'} memory.")
    more = [d for d in draws if d.service.first_oom > d.vpa.first_oom]
    if more:
        cheaper = sum(d.at_vpa_gbh is not None and d.at_vpa_gbh < d.vpa.reserved_gbh
                      for d in more)
        said += (f" Where it ran out more often, its riskiest first attempts moved a slice up "
                 f"(the last column, a static estimate) reach VPA's count with less memory "
                 f"than VPA held on {cheaper} of {len(more)}: there the difference is the "
                 f"price of an OOM, elsewhere the predictions'.")
    return said


def excess_table(m: Metrics, oracle_gbh: float) -> str:
    """Where the service's reserved memory above the oracle comes from: by the source of each
    execution's first recommendation (its memory beyond the oracle's slice, or all of it when
    it ran out), history split at SPARSE_RUNS of the action's executions, and the ladder's
    rungs after an OOM (`excess_of`); beside it, how many of each source's first attempts ran
    out (the price of what it saved)."""
    total = sum(m.excess_gbh.values())
    lines = ["| spent by | executions | excess GB-h | share of the excess | "
             "x oracle | first attempts that ran out |", "|---|---|---|---|---|---|"]
    for source, gbh in sorted(m.excess_gbh.items(), key=lambda kv: -kv[1]):
        ran_out = "" if source == LADDER else f"{m.oom_from.get(source, 0):,}"
        lines.append(f"| {source} | {m.first_from.get(source, 0):,} | {gbh:,.0f} | "
                     f"{gbh / total if total else 0:.0%} | {gbh / oracle_gbh:.2f} | "
                     f"{ran_out} |")
    return "\n".join(lines)


def run_table(m: Metrics) -> str:
    """The service's first slices by how many executions of the action came before each
    (`run_group`): how far above the oracle's slice they were, how many ran out, and how many
    the chances it stated for them added up to (none stated counts nothing). Why: the sources
    (`excess_table`) say who spoke, this says when in an action's life the memory went, so
    that a third execution dearer than the second shows as itself; and the chance table
    (`calibration_table`) pools every age, where an action's 4th to 10th runs can state too little
    while its grown runs state too much (GenTD26 by the hour, 2026-12-07: 4.6 stated where 12
    ran out, and past the 10th run 6.4 where 3 did)."""
    lines = ["| execution of its action | executions | first slices x oracle | "
             "first attempts that ran out | their stated chances added up |",
             "|---|---|---|---|---|"]
    for group in RUN_GROUPS:
        found = m.by_run.get(group)
        if found is None:
            continue
        n, held, best, ran_out, stated = found
        lines.append(f"| {group} | {n:,.0f} | {held / best if best else math.nan:.2f}x | "
                     f"{ran_out:,.0f} | {stated:.1f} |")
    return "\n".join(lines)


def truth_table(m: Metrics) -> str:
    """The service's first slices against the best ones knowing each peak's distribution
    (`Metrics.against_truth`), by how many executions of the action came before: the OOMs each
    set of slices makes in expectation and the GB-h it holds. Why: the frontier
    (`frontier_table`) moves the service's own riskier attempts, so it cannot tell a price
    from a prediction that ranked the wrong attempts riskiest; this can, on a trace that
    knows its distributions. More OOMs at no less memory than the best slices is what the
    predictions cost; the best slices' own OOMs are what the price accepts."""
    lines = ["| execution of its action | executions | OOMs expected, the service's slices | "
             "the best slices' | GB-h, the service's first slices | the best slices' |",
             "|---|---|---|---|---|---|"]
    rows = [(group, m.against_truth[group]) for group in RUN_GROUPS
            if group in m.against_truth]
    rows.append(("all", [sum(column) for column in zip(*(v for _, v in rows), strict=True)]
                 if rows else [0.0] * 5))
    for label, (n, ours, best, held, best_held) in rows:
        lines.append(f"| {label} | {n:,.0f} | {ours:,.1f} | {best:,.1f} | {held:,.0f} | "
                     f"{best_held:,.0f} |")
    return "\n".join(lines)


def phase_table(service: Sequence[Metrics], rule: Sequence[Metrics]) -> str:
    """The first attempts of the service's replays and of a rule's on the same traces, by
    where each execution sits in its action's story as the generator wrote it (`by_phase`,
    added up over the replays given: one, or a draw each): how many ran out, the chances the
    service stated for them, and the GB-h their first slices held. Why: on the step change the
    run right after an action's step is one nothing before it announces, and the runs after it
    are where a rule learns the new level; pooled with the rest, the OOMs of the one and the
    memory of the other read as the same predictions' cost (and so, on two modes, an action's
    first heavy run). The stated chances test the service's only where a phase is not the
    run's own outcome: the step change's phases are its step times, two modes' are the run's
    mode (a light run's stated chance is that it would be heavy). Phases in the order the
    generators name them (`synthetic.PHASES`), then any other; "" where no replay has a
    phase."""

    def added(runs: Sequence[Metrics]) -> dict[str, list[float]]:
        total: dict[str, list[float]] = {}
        for m in runs:
            for phase, row in m.by_phase.items():
                into = total.setdefault(phase, [0.0] * 4)
                for i, v in enumerate(row):
                    into[i] += v
        return total

    ours, theirs = added(service), added(rule)
    if not ours:
        return ""
    name = rule[0].name if rule else "the rule"
    order = [p for p in PHASES if p in ours] + sorted(set(ours) - set(PHASES))
    lines = [f"| where in its action's story | executions | service: first attempts that ran "
             f"out | its stated chances added up | its first slices' GB-h | {name}: first "
             f"attempts that ran out | its first slices' GB-h |",
             "|---|---|---|---|---|---|---|"]
    rows = [(p, ours[p], theirs.get(p, [0.0] * 4)) for p in order]
    rows.append(("all", [math.fsum(r[1][i] for r in rows) for i in range(4)],
                 [math.fsum(r[2][i] for r in rows) for i in range(4)]))
    for label, (n, ran_out, stated, held), (_, their_out, _, their_held) in rows:
        lines.append(f"| {label} | {n:,.0f} | {ran_out:,.0f} | {stated:.1f} | {held:,.0f} | "
                     f"{their_out:,.0f} | {their_held:,.0f} |")
    return "\n".join(lines)


CHANCE_BINS = (0.0, 0.001, 0.003, 0.01, 0.03, 0.1, 1.0)
"""Edges of the stated chances `calibration_table` groups: half a decade each, over the range
where expected cost puts its first rungs."""


LARGEST_SHARE = 1.1
"""A first slice is the largest offered when no offered slice holds this much more memory
(80,896 and 81,152 MiB are both a whole 80 GB card's)."""


def calibration_table(m: Metrics) -> str:
    """The service's stated chances of an OOM against what happened, by stated chance: OOMs
    expected from those chances (their sum) beside the OOMs seen. A decision by expected
    cost is only as good as its chances: a row with more OOMs seen than expected says the tails
    it stated there are too light, one with fewer that it reserves memory for risks that are
    not there. First slices that were the largest offered are a row of their own, after the
    decisions': no bigger slice was weighed against their chance."""
    lines = ["| stated chance of an OOM | executions | OOMs expected | OOMs seen |",
             "|---|---|---|---|"]

    def row(label: str, rows: list[tuple[float, bool]]) -> None:
        lines.append(f"| {label} | {len(rows):,} | {sum(p for p, _ in rows):,.1f} | "
                     f"{sum(o for _, o in rows):,} |")

    for lo, hi in itertools.pairwise(CHANCE_BINS):
        rows = [(p, oom) for p, oom in m.stated if lo < p <= hi]
        if rows:
            row(f"{lo:.1%} to {hi:.1%}", rows)
    if m.stated_on_largest:
        row("all stated on a smaller slice than the largest", m.stated)
        row("on the largest slice offered (no bigger one to choose)", m.stated_on_largest)
    every = m.stated + m.stated_on_largest
    row("all stated", every)
    unstated = m.executions - len(every)
    if unstated:
        lines.append(f"| none stated (a user's figure, a model's quantile, no information) | "
                     f"{unstated:,} | | {m.first_oom - sum(o for _, o in every):,} |")
    return "\n".join(lines)


FRONTIER_CHANCES = (0.10, 0.05, 0.03, 0.02, 0.01, 0.005, 0.002)
"""Stated chances above which `frontier_table` moves first attempts a slice up: from where
expected cost already buys the slice above on most cards (8 % for 80 GB over 40) down to where
nearly every first attempt with a chance at all would move."""


def frontier_point(m: Metrics, slices: Slices, above: float) -> tuple[int, int, float]:
    """(executions moved, first attempts that ran out, reserved GB-h) had every first attempt
    whose stated chance passed `above` started on the next offered slice that holds
    LARGEST_SHARE times its memory, and climbed from there as the replay's ladder does (the
    next bigger slice after each OOM). A static estimate: the history each decision saw stays
    the replay's (an OOM avoided would also not have been recorded as one). What it shows: how
    many OOMs more memory buys where the service itself saw the risk, roughly the trade a
    higher price of an OOM (`OOM_WAIT_GPUS`) would make (a price weighs each size's cost too),
    so a baseline's point can be read against it."""
    moved = ran_out = 0
    gbh = m.reserved_gbh
    for f in m.firsts:
        up = _moved_up(f, slices) if f.chance > above else None
        if up is None:
            ran_out += f.slice_mib < f.peak_mib
            continue
        moved += 1
        ran_out += up[0]
        gbh += up[1] - f.reserved_gbh
    return moved, ran_out, gbh


def _moved_up(f: FirstAttempt, slices: Slices) -> tuple[int, float] | None:
    """(1 if it still ran out else 0, what its attempts held in GB-h) had this first attempt
    started on the next offered slice that holds LARGEST_SHARE times its memory and climbed
    from there; None where no offered slice does."""
    bigger = next((s for s in slices.mib if s >= f.slice_mib * LARGEST_SHARE), None)
    if bigger is None:
        return None
    attempts, _ = slices.attempts(bigger, f.peak_mib)
    return int(attempts[0] < f.peak_mib), sum(attempts) / 1024 * f.hours


def frontier_at(m: Metrics, slices: Slices, ooms: int) -> float | None:
    """The least reserved GB-h at which the service's replay would have run out no more than
    `ooms` times on first attempts, its bar on the stated chance lowered through every chance
    it stated: the first attempts the most likely to run out moved a slice up first, ties
    together, as `frontier_point` moves them (a static estimate, the same caveats). The least,
    not the first bar that gets there: moving a first attempt that ran out anyway skips the
    rung it died on, and saves memory. None where no bar gets there. Why: on a draw where the
    service ran out more often than a rule at less memory, the two are at different prices of
    an OOM, not better and worse predictions, if the service's own chances reach the rule's
    count with less memory than the rule held; where they do not, the rule bought those OOMs
    more cheaply (`recommender evaluate --seeds`)."""
    ran_out, gbh = m.first_oom, m.reserved_gbh
    least = gbh if ran_out <= ooms else None
    stated = sorted((f for f in m.firsts if f.chance > 0), key=lambda f: -f.chance)
    for _, tied in itertools.groupby(stated, key=lambda f: f.chance):
        for f in tied:
            up = _moved_up(f, slices)
            if up is not None:
                ran_out += up[0] - (f.slice_mib < f.peak_mib)
                gbh += up[1] - f.reserved_gbh
        if ran_out <= ooms and (least is None or gbh < least):
            least = gbh
    return least


def frontier_table(m: Metrics, slices: Slices, against: Metrics | None = None) -> str:
    """The service's replay as it ran, then with its riskier first attempts moved a slice up
    (`frontier_point`) at each of FRONTIER_CHANCES; with `against` (a baseline's replay of the
    same trace), a last line: what the fewest of these reserved GB-h are among the rows with no
    more OOMs than it had. Why: fewer OOMs than a rule at more memory, or less memory at more
    OOMs, is a choice of price. Where these rows reach the rule's OOMs with less memory than it
    held, the OOMs the service has beyond its are the price the service puts on one; where they
    do not, the rule buys them more cheaply than the service's predictions could. The finest
    bar (`frontier_at`) follows: the rows' bars are coarse, and a draw's table says it too."""
    lines = ["| first attempts moved a slice up | executions moved | first attempts that ran "
             "out | reserved GB-h | vs as replayed |", "|---|---|---|---|---|"]
    rows = [("none (as replayed)", 0, m.first_oom, m.reserved_gbh)]
    rows += [(f"stated chance above {x:.1%}", *frontier_point(m, slices, x))
             for x in FRONTIER_CHANCES]
    for label, moved, ran_out, gbh in rows:
        lines.append(f"| {label} | {moved:,} | {ran_out:,} | {gbh:,.0f} | "
                     f"{gbh / m.reserved_gbh - 1 if m.reserved_gbh else 0:+.1%} |")
    if against is not None:
        fewer = [(gbh, label) for label, _, ran_out, gbh in rows if ran_out <= against.first_oom]
        best = min(fewer, key=lambda row: row[0]) if fewer else None  # the first, at a tie
        cheapest = (f"{best[0]:,.0f} GB-h ({best[1]})" if best is not None
                    else "none of these rows has as few")
        finest_said = _against_rule(frontier_at(m, slices, against.first_oom),
                                    against.reserved_gbh, " GB-h", " against its")
        lines.append("")
        lines.append(f"{against.name}: {against.first_oom:,} first attempts ran out at "
                     f"{against.reserved_gbh:,.0f} GB-h; with no more: {cheapest}; the bar "
                     f"lowered one stated chance at a time: {finest_said}.")
    return "\n".join(lines)


__all__ = ["BASELINES", "CHANCE_BINS", "FRONTIER_CHANCES", "LADDER", "LARGEST_SHARE",
           "RETRAIN_AT", "RUN_GROUPS", "SPARSE", "VPA", "Draw", "FirstAttempt",
           "InProcessRunner", "Metrics", "RunnerFactory", "Slices", "calibration_table",
           "draws_said", "draws_table", "excess_of",
           "excess_table", "frontier_at", "frontier_point", "frontier_table", "in_process",
           "mixed_pools", "oracle", "phase_table", "replay_rule", "replay_service",
           "retrain_points", "run_group", "run_table", "table"]
