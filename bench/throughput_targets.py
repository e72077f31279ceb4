"""(profile, count) for throughput targets, scored against ParvaGPU's measured A100-80GB table.

Each (DNN, batch size) of `../shared/traces/parvagpu-a100-80gb-mig-profiles` is an action. Its
row per MIG size (one process per instance) gives the measured throughput, or 0 when the
configuration did not run (out of memory). The replay, through the service's own use cases and a
real SQLite store:

1. runs a first week of executions of every action as a runner would: it asks the service for
   a slice (no target: the first action's first answer, with no history at all, is the
   largest slice, 7g.80gb; later actions start from the population's cold-start prior, so most
   of them never run 7g.80gb; the next answers are the smallest slice that holds the peaks
   seen), runs it as the table says (an OOM
   goes up the ladder through NextAfterOom) and records it. With `--first-week extremes`,
   instead, three executions on 1g.10gb and three on 7g.80gb (three OOMs on 1g.10gb where the
   batch does not fit), the protocol of earlier versions of this bench: the service would never
   send an action back to a slice it ran out of memory in, so this one is harder than a runner's
   first week;
2. asks for throughput targets of 0.5x, 1x, 2x and 4x the 7g throughput, with max_workers 8,
   then records the chosen configurations as executed and asks again (round 2);
3. scores the chosen (profile, count) against the cheapest feasible choice in the full table
   (fewest compute slices x count whose measured throughput meets the target), and against a
   baseline that scales out whole 7g.80gb slices.

ParvaGPU measured feasibility, not memory, so each action's per-worker peak is set to the
midpoint between the largest slice it does not fit in and the smallest it fits in (half the
1g.10gb slice when 1g fits): an assumption that only decides which slices the recommender
learns to avoid; the scoring uses the measured table.

Guards against tuning to the table: `--dnns` replays only some DNNs (the population the curves
borrow from is then theirs alone: a held-out split), `--workload 2..5` replays the table's
curves with that many processes per instance (other shapes, other feasibility), and `--misses`
prints every case not answered with the cheapest (profile, count), with the curve's prediction
and the table's measurement at the chosen and at the cheapest configuration and where each
prediction came from. `--held-out` runs all of them (both first weeks, the table, each half of
its DNNs, workloads 2 to 5) and totals them.
"""

from __future__ import annotations

import argparse
import csv
import math
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, fields
from datetime import UTC, datetime, timedelta
from pathlib import Path

from recommender.core.catalog import load_catalog
from recommender.core.usecases import UseCases
from recommender.rpc.convert import execution_from_pb, request_from_pb
from recommender.store import SqlStore, connect, migrate

TRACE = Path(__file__).resolve().parents[2] / "shared/traces/parvagpu-a100-80gb-mig-profiles"
PROFILES = {1: "1g.10gb", 2: "2g.20gb", 3: "3g.40gb", 4: "4g.40gb", 7: "7g.80gb"}
RECORDED = (1, 7)
"""Sizes of the first week's executions with `--first-week extremes`."""
FIRST_WEEK = 6
"""Executions per action in the first week."""
TARGETS = (0.5, 1.0, 2.0, 4.0)
MAX_WORKERS = 8
ROUNDS = 2


@dataclass(frozen=True)
class Action:
    name: str
    throughput: dict[int, float]
    """Measured items/s per instance by compute slices; 0 = did not fit."""


def load(trace: Path = TRACE, workload: int = 1, dnns: frozenset[str] = frozenset()
         ) -> list[Action]:
    """The table's actions: one per (DNN, batch) measured at every size and run at 7g.

    `workload` picks the table's "Workload Number" (processes sharing the instance, each
    reporting its own throughput): 1 is the bench's table; 2 to 5 are other curves of the same
    DNNs (contention changes where they saturate), a check that nothing is tuned to the first.
    `dnns`, when given, keeps only those DNNs (a leave-some-out split: the population the
    curves borrow from is then only theirs)."""
    actions = []
    for path in sorted(trace.glob("*.csv")):
        if dnns and path.stem not in dnns:
            continue
        table: dict[int, dict[int, float]] = {}
        with path.open() as f:
            for row in csv.DictReader(f):
                if row["Workload Number"] != str(workload):
                    continue
                batch = int(row["Batch size"])
                table.setdefault(batch, {})[int(row["Mig instance"])] = float(row["Throughput"])
        for batch, tput in sorted(table.items()):
            if tput.get(7, 0) > 0 and set(tput) >= set(PROFILES):
                actions.append(Action(f"{path.stem}-b{batch}", tput))
    return actions


def peak_mib(action: Action, memory: dict[int, int]) -> float:
    fits = [memory[c] for c, t in action.throughput.items() if t > 0]
    too_small = [memory[c] for c, t in action.throughput.items() if t <= 0]
    low = max(too_small, default=0)
    return (low + min(fits)) / 2


def cheapest(action: Action, target: float) -> tuple[int, int] | None:
    """(compute slices, count) with the fewest slices x count that meets the target."""
    best: tuple[int, int, int] | None = None
    for c, t in action.throughput.items():
        if t <= 0:
            continue
        n = max(1, math.ceil(target / t - 1e-9))
        if n > MAX_WORKERS:
            continue
        key = (c * n, c, n)
        best = key if best is None or key < best else best
    return None if best is None else (best[1], best[2])


@dataclass
class Score:
    cases: int = 0
    cheapest: int = 0
    extra_slices: float = 0.0
    compared: int = 0
    ooms: int = 0
    missed: int = 0
    slices: int = 0

    def add(self, action: Action, target: float, c: int, n: int) -> None:
        self.cases += 1
        self.slices += c * n
        measured = action.throughput.get(c, 0.0)
        if measured <= 0:
            self.ooms += 1
        elif measured * n < target * (1 - 1e-9):
            self.missed += 1
        best = cheapest(action, target)
        if best is not None and measured > 0:
            self.compared += 1
            extra = c * n - best[0] * best[1]
            self.extra_slices += extra
            self.cheapest += extra <= 0

    def absorb(self, other: Score) -> None:
        """Adds another replay's counts to these (totals over replays)."""
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))


def replay(actions: list[Action], db_url: str, first_week: str = "service",
           misses: list[str] | None = None) -> tuple[list[Score], Score, Score]:
    """The rounds' scores, 7g.80gb scaled out, and the oracle. With `misses`, a line for each
    case that is not the cheapest (or misses its target): what was chosen and what was
    cheapest, each with the curve's prediction and the table's measurement."""
    import grpc  # noqa: F401  (the protobuf modules need the runtime loaded)

    from recommender._proto.intelliscale.recommender.v1 import recommender_pb2 as pb

    catalog = load_catalog()
    engine_db = connect(db_url)
    migrate(engine_db)
    start = datetime(2026, 11, 1, tzinfo=UTC)
    clock = [start]
    use_cases = UseCases(SqlStore(engine_db), clock=lambda: clock[0], catalog=catalog)
    use_cases.throughput_population.background = False  # read inline: a deterministic replay
    model = catalog.resolve("A100-80GB")
    assert model is not None
    memory = {c: p.memory_mib for c, name in PROFILES.items()
              if (p := model.profile(name)) is not None}
    pool = pb.Pool(pool_id="a100-80", gpu_model="A100-80GB", strategy=pb.MIG_STRATEGY_MIXED,
                   profiles=list(PROFILES.values()))

    def run(execution_id: str, action: Action, c: int, count: int) -> None:
        """Records the execution as the table says it went: OOM where the batch did not fit."""
        fits = action.throughput[c] > 0
        m = pb.ExecutionRecord(
            execution_id=execution_id, action_id=action.name, gpu_model="A100-80GB",
            profile=PROFILES[c], count=count,
            peak_memory_mib=peak_mib(action, memory) if fits else memory[c],
            sm_utilization=50.0, duration_s=600.0,
            throughput=action.throughput[c] if fits else 0.0,
            outcome=pb.OUTCOME_SUCCEEDED if fits else pb.OUTCOME_OOM,
        )
        use_cases.record_execution(execution_from_pb(catalog, m, clock[0]))

    serial = 0
    by_name = {name: c for c, name in PROFILES.items()}
    for action in actions:
        if first_week == "extremes":
            for c in RECORDED:
                for _ in range(FIRST_WEEK // len(RECORDED)):
                    serial += 1
                    clock[0] += timedelta(minutes=1)
                    run(f"x{serial}", action, c, 1)
            continue
        for _ in range(FIRST_WEEK):
            clock[0] += timedelta(minutes=1)
            req = pb.RecommendRequest(action_id=action.name, pools=[pool], workers=1)
            rec = use_cases.recommend(request_from_pb(catalog, req)).recommendation
            while True:
                serial += 1
                c = by_name[rec.decision.rung.profile.name]
                run(f"x{serial}", action, c, 1)
                if action.throughput[c] > 0:
                    break
                clock[0] += timedelta(seconds=10)
                rec = use_cases.next_after_oom(rec.id, float(memory[c])).recommendation
    rounds: list[Score] = []
    whole, oracle = Score(), Score()
    for round_no in range(ROUNDS):
        ours = Score()
        ran: list[tuple[Action, int, int]] = []
        for action in actions:
            for factor in TARGETS:
                goal = factor * action.throughput[7]
                clock[0] += timedelta(seconds=1)
                req = pb.RecommendRequest(action_id=action.name, pools=[pool], workers=1,
                                          max_workers=MAX_WORKERS, target_throughput=goal)
                rec = use_cases.recommend(request_from_pb(catalog, req)).recommendation.decision
                c, n = rec.rung.profile.compute_slices, rec.rung.count
                ours.add(action, goal, c, n)
                if misses is not None:
                    miss = explain(action, goal, c, n, use_cases)
                    if miss:
                        misses.append(f"round {round_no + 1} {miss}")
                ran.append((action, c, n))
                if round_no == 0 and (best := cheapest(action, goal)) is not None:
                    oracle.add(action, goal, *best)
                if round_no == 0:
                    whole.add(action, goal, 7,
                              min(MAX_WORKERS, math.ceil(goal / action.throughput[7])))
        rounds.append(ours)
        # The chosen configurations run and are recorded: the next round learns from them.
        for action, c, n in ran:
            serial += 1
            clock[0] += timedelta(seconds=1)
            run(f"x{serial}", action, c, n)
    engine_db.dispose()
    return rounds, whole, oracle


def explain(action: Action, goal: float, c: int, n: int, use_cases: UseCases) -> str:
    """One line for a case not answered with the cheapest (profile, count), else ''."""
    best = cheapest(action, goal)
    measured = action.throughput.get(c, 0.0)
    if best is not None and c * n <= best[0] * best[1] and measured * n >= goal * (1 - 1e-9):
        return ""
    curve = use_cases.throughput_curve(use_cases._samples(action.name), action.name)

    def one(size: int, count: int) -> str:
        predicted = curve.total("A100-80GB", size, count) if curve else None
        how = curve.source("A100-80GB", size) if curve else "no curve"
        return (f"{size}g x{count}: predicted {predicted or 0:,.1f} ({how}), "
                f"measured {action.throughput.get(size, 0.0) * count:,.1f}")

    cheap = one(*best) if best else "none"
    return (f"{action.name} target {goal:,.1f} ({goal / action.throughput[7]:g}x 7g): "
            f"chose {one(c, n)} | cheapest {cheap}")


def table(rows: Iterator[tuple[str, Score]]) -> str:
    lines = ["| chooser | cases | picks the cheapest | mean extra slices | OOMs | target missed "
             "| slices used |", "|---|---|---|---|---|---|---|"]
    for name, s in rows:
        lines.append(
            f"| {name} | {s.cases} | {s.cheapest / max(s.compared, 1):.1%} | "
            f"{s.extra_slices / max(s.compared, 1):.2f} | {s.ooms} | {s.missed} | {s.slices} |")
    return "\n".join(lines)


HALVES = ("bert,densenet121,densenet201,inceptionv3,resnet101,vgg16",
          "densenet169,mobilenetv2,resnet152,resnet50,vgg19")
"""The held-out halves of the table's DNNs `--held-out` replays (each half's population is
then its own)."""


def held_out(trace: Path) -> None:
    """The full table, each half of its DNNs and the table's curves with 2 to 5 processes per
    instance, each with both first-week protocols: 14 replays, 28 rounds, and their totals."""
    runs = [(fw, w, d) for fw in ("service", "extremes")
            for w, d in [(1, ""), (1, HALVES[0]), (1, HALVES[1]), (2, ""), (3, ""), (4, ""),
                         (5, "")]]
    totals: dict[int, Score] = {}
    print("| first week | workload | DNNs | round | cases | picks the cheapest "
          "| mean extra slices | OOMs | target missed |")
    print("|---|---|---|---|---|---|---|---|---|")
    for fw, w, d in runs:
        actions = load(trace, w, frozenset(x for x in d.split(",") if x))
        if not actions:
            continue  # a trace without that workload or those DNNs
        with tempfile.TemporaryDirectory() as tmp:
            rounds, _, _ = replay(actions, f"sqlite:///{tmp}/targets.db", fw)
        for i, r in enumerate(rounds, 1):
            totals.setdefault(i, Score()).absorb(r)
            print(f"| {fw} | {w} | {'half ' + str(HALVES.index(d) + 1) if d else 'all'} | {i} "
                  f"| {r.cases} | {r.cheapest / max(r.compared, 1):.1%} "
                  f"| {r.extra_slices / max(r.compared, 1):.2f} | {r.ooms} | {r.missed} |")
    for i, t in sorted(totals.items()):
        print(f"| total | | | {i} | {t.cases} | {t.cheapest / max(t.compared, 1):.1%} "
              f"| {t.extra_slices / max(t.compared, 1):.2f} | {t.ooms} | {t.missed} |")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else "")
    parser.add_argument("--trace", type=Path, default=TRACE)
    parser.add_argument("--database-url", default="")
    parser.add_argument("--first-week", choices=["service", "extremes"], default="service",
                        help="how the first executions are chosen: by the service (default), "
                        "or on 1g.10gb and 7g.80gb whether they fit or not")
    parser.add_argument("--workload", type=int, default=1, choices=range(1, 6),
                        help="the table's Workload Number (processes per instance): 1 is the "
                        "bench's table, 2-5 other curves of the same DNNs")
    parser.add_argument("--dnns", default="",
                        help="comma-separated DNNs to keep (file stems), e.g. a held-out split")
    parser.add_argument("--misses", action="store_true",
                        help="print each case not answered with the cheapest (profile, count)")
    parser.add_argument("--held-out", action="store_true",
                        help="replay the table, each half of its DNNs and workloads 2-5, with "
                        "both first-week protocols (14 replays, about 40 s), and total them")
    args = parser.parse_args(argv)
    if not args.trace.exists():
        raise SystemExit(f"trace not found: {args.trace}")
    if args.held_out:
        held_out(args.trace)
        return
    actions = load(args.trace, args.workload,
                   frozenset(d for d in args.dnns.split(",") if d))
    if not actions:
        raise SystemExit(f"no action in {args.trace} for --dnns {args.dnns!r} "
                         f"and --workload {args.workload}")
    misses: list[str] | None = [] if args.misses else None
    with tempfile.TemporaryDirectory() as tmp:
        url = args.database_url or f"sqlite:///{tmp}/targets.db"
        rounds, whole, oracle = replay(actions, url, args.first_week, misses)
    for line in misses or []:
        print(line)
    week = (f"first week on {', '.join(PROFILES[c] for c in RECORDED)}"
            if args.first_week == "extremes" else
            "first week as the service chose")
    print(f"ParvaGPU A100-80GB, workload {args.workload}: {len(actions)} actions (DNN x batch), "
          "targets "
          f"{', '.join(f'{t:g}x' for t in TARGETS)} the 7g throughput, max_workers {MAX_WORKERS},"
          f" {week}")
    rows = [(f"IntelliScale, round {i + 1}", r) for i, r in enumerate(rounds)]
    print(table(iter([*rows, ("7g.80gb scaled out", whole),
                      ("oracle (cheapest in the full table)", oracle)])))
    print("round 1: curves from the first week only; round 2: also from round 1's choices, "
          "run and recorded")


if __name__ == "__main__":
    main()
