"""recommender.core.placement.place on the largest nodes: 8 and 16 GPUs, empty and half occupied."""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass

from bench.common import median, table
from recommender.core.catalog import GpuModel, MigProfile, load_catalog
from recommender.core.placement import GpuState, place

CASE_BUDGET_S = 3.0
"""Stop repeating a case after this long (at least one run always happens)."""


@dataclass(frozen=True)
class Case:
    name: str
    model: GpuModel
    gpus: tuple[GpuState, ...]
    request: tuple[MigProfile, ...]
    expect: bool | None
    """Whether it must fit (None: whatever the search says)."""

    def describe(self) -> str:
        counts: dict[str, int] = {}
        for p in self.request:
            counts[p.name] = counts.get(p.name, 0) + 1
        return " + ".join(f"{n} x {name}" for name, n in counts.items())


def _mask(start: int, size: int) -> int:
    return ((1 << size) - 1) << start


def half_occupied(model: GpuModel, count: int, seed: int, *, as_profiles: bool = False
                  ) -> tuple[GpuState, ...]:
    """GPUs with random legal, non-overlapping base-profile placements filling about half the
    units; with `as_profiles`, the same instances given as occupied_profiles (placement unknown).
    """
    assert model.placement_units is not None
    rng = random.Random(seed)
    base = [p for p in model.profiles if p.is_base and p.placement is not None
            and p.placement.size <= model.placement_units // 2]
    out = []
    for g in range(count):
        used = 0
        placed: list[tuple[MigProfile, int]] = []
        for _ in range(50):
            if used.bit_count() >= model.placement_units // 2:
                break
            p = rng.choice(base)
            assert p.placement is not None
            start = rng.choice(p.placement.starts)
            m = _mask(start, p.placement.size)
            if m & used or sum(1 for q, _ in placed if q.name == p.name) >= p.max_count:
                continue
            used |= m
            placed.append((p, start))
        if as_profiles:
            names = tuple(p.name for p, _ in placed)
            out.append(GpuState(uuid=f"GPU-{g}", occupied_profiles=names))
        else:
            out.append(GpuState(uuid=f"GPU-{g}", occupied=tuple(
                (s, p.placement.size) for p, s in placed if p.placement is not None)))
    return tuple(out)


def _largest_fit(model: GpuModel, profile: MigProfile, gpus: Sequence[GpuState]) -> int:
    """How many of `profile` fit on these GPUs (setup, not timed)."""
    n = 0
    while n < 16 * 12 and place(model, [profile] * (n + 1), gpus) is not None:
        n += 1
    return n


def cases() -> list[Case]:
    catalog = load_catalog()
    a100 = catalog.resolve("A100-40GB")
    rtx = catalog.resolve("RTX-PRO-6000-96GB")
    assert a100 is not None and rtx is not None

    def p(model: GpuModel, name: str, n: int) -> tuple[MigProfile, ...]:
        prof = model.profile(name)
        assert prof is not None
        return (prof,) * n

    def empty(n: int) -> tuple[GpuState, ...]:
        return tuple(GpuState(uuid=f"GPU-{i}") for i in range(n))

    mixed_fit = p(a100, "3g.20gb", 8) + p(a100, "2g.10gb", 8) + p(a100, "1g.5gb", 16)
    # The slowest "does not fit" mix of 3g/2g/1g found on an empty 8-GPU A100 node.
    mixed_hard = p(a100, "3g.20gb", 2) + p(a100, "2g.10gb", 14) + p(a100, "1g.5gb", 24)
    half = half_occupied(a100, 8, seed=11)
    half_pinned = half_occupied(a100, 8, seed=11, as_profiles=True)
    one_g = a100.profile("1g.5gb")
    assert one_g is not None
    k = _largest_fit(a100, one_g, half)
    half_mixed = p(a100, "3g.20gb", 2) + p(a100, "2g.10gb", 3) + p(a100, "1g.5gb", 6)
    half16 = half_occupied(a100, 16, seed=12)
    k16 = _largest_fit(a100, one_g, half16)
    return [
        Case("A100 8 GPUs empty", a100, empty(8), p(a100, "1g.5gb", 56), True),
        Case("A100 8 GPUs empty", a100, empty(8), p(a100, "1g.5gb", 57), False),
        Case("A100 8 GPUs empty", a100, empty(8), mixed_fit, True),
        Case("A100 8 GPUs empty", a100, empty(8), mixed_fit + p(a100, "1g.5gb", 1), False),
        Case("A100 8 GPUs empty", a100, empty(8), mixed_hard, False),
        Case("A100 8 GPUs half occupied", a100, half, p(a100, "1g.5gb", k), True),
        Case("A100 8 GPUs half occupied", a100, half, p(a100, "1g.5gb", k + 1), False),
        Case("A100 8 GPUs half occupied", a100, half, half_mixed, None),
        Case("A100 8 GPUs half, as profiles", a100, half_pinned, p(a100, "1g.5gb", k), None),
        Case("A100 8 GPUs half, as profiles", a100, half_pinned, p(a100, "1g.5gb", k + 1), None),
        Case("A100 8 GPUs half, as profiles", a100, half_pinned, half_mixed, None),
        Case("RTX PRO 6000 8 GPUs empty", rtx, empty(8), p(rtx, "1g.24gb", 32), True),
        Case("RTX PRO 6000 8 GPUs empty", rtx, empty(8), p(rtx, "1g.24gb", 33), False),
        Case("RTX PRO 6000 8 GPUs empty", rtx, empty(8),
             p(rtx, "2g.48gb", 4) + p(rtx, "1g.24gb", 16), True),
        Case("A100 16 GPUs empty", a100, empty(16), p(a100, "1g.5gb", 112), True),
        Case("A100 16 GPUs empty", a100, empty(16), p(a100, "1g.5gb", 113), False),
        Case("A100 16 GPUs empty", a100, empty(16), mixed_fit * 2, True),
        Case("A100 16 GPUs empty", a100, empty(16), mixed_hard * 2, False),
        Case("A100 16 GPUs half occupied", a100, half16, p(a100, "1g.5gb", k16), True),
        Case("A100 16 GPUs half occupied", a100, half16, p(a100, "1g.5gb", k16 + 1), False),
    ]


def run(args: argparse.Namespace) -> None:
    reps: int = args.reps
    rows: list[list[object]] = []
    overall: list[float] = []
    for case in cases():
        times: list[float] = []
        found = None
        budget = time.perf_counter() + CASE_BUDGET_S
        for _ in range(reps):
            t0 = time.perf_counter()
            found = place(case.model, case.request, case.gpus)
            times.append((time.perf_counter() - t0) * 1000)
            if time.perf_counter() > budget:
                break
        fits = found is not None
        check = "" if case.expect is None else (" (expected)" if fits == case.expect
                                                  else " (WRONG)")
        overall += times
        rows.append([case.name, case.describe(), ("fits" if fits else "no fit") + check,
                     median(times), max(times), len(times)])
    print(f"placement.place, in process (no gRPC), up to {reps} repetitions per case "
          f"(at most {CASE_BUDGET_S:g} s each). Half-occupied GPUs: random legal placements "
          "(seeded) filling about half of each GPU; 'as profiles' gives the same instances as "
          "occupied_profiles, which the search must place too.")
    print()
    print(table(["node", "request", "result", "median ms", "max ms", "reps"], rows))
    print()
    print(f"Slowest single search: {max(overall):.2f} ms. No explicit target in the issue; for "
          "scale, >= 1,000 recommendations/s leaves 1 ms per recommendation on one core, and "
          "a Recommend may run place() several times per listed node.")
    print()
    node_lists(reps)


NODE_LISTS = (4, 16, 64, 256)


def node_lists(reps: int) -> None:
    """What a Recommend that lists many nodes costs before and after the search: turning the
    message into domain values, then the policy (rank nodes, place, build the ladder)."""
    from bench.recommend import bench_request
    from recommender._proto.intelliscale.recommender.v1 import recommender_pb2 as pb
    from recommender.core.estimation import HISTORY, Estimate
    from recommender.core.policy import recommend
    from recommender.rpc.convert import request_from_pb

    catalog = load_catalog()
    estimate = Estimate(mib=7700.0, source=HISTORY, quantile=0.9, detail="bench")
    rows: list[list[object]] = []
    for nodes in NODE_LISTS:
        for state in ("new GPUs", "new", "same"):
            # "new GPUs": GPUs never seen before (new uuids each repetition), so every GPU
            # message is converted and every node searched; "new": node states never seen
            # before (a fresh random occupancy each repetition) of GPUs listed before, each in
            # one of the states it had before (a GPU's few states are converted once);
            # "same": the listing of the call before (the runner's usual case), answered from
            # the nodes converted then.
            convert_ms: list[float] = []
            policy_ms: list[float] = []
            budget = time.perf_counter() + CASE_BUDGET_S
            node = ""
            size = 0
            for rep in range(reps):
                raw = bench_request(
                    nodes=nodes, seed=7 if state == "same" else 1000 + rep,
                    uuid_prefix=f"GPU{rep}" if state == "new GPUs" else "GPU",
                ).SerializeToString()
                size = len(raw)
                message = pb.RecommendRequest.FromString(raw)  # new objects, as each call has
                t0 = time.perf_counter()
                request = request_from_pb(catalog, message)
                t1 = time.perf_counter()
                node = recommend(request, estimate).rung.node_id
                t2 = time.perf_counter()
                if state == "same" and rep == 0:
                    continue  # the first sight of it is a "new" one
                convert_ms.append((t1 - t0) * 1000)
                policy_ms.append((t2 - t1) * 1000)
                if t2 > budget:
                    break
            rows.append([nodes, nodes * 8, size, state, median(convert_ms), median(policy_ms),
                         median([a + b for a, b in zip(convert_ms, policy_ms, strict=True)]),
                         node, len(convert_ms)])
    print("Recommend's request conversion and policy over a listed pool (A100-40GB, mixed, "
          "2 x ~7,700 MiB; 8-GPU nodes, each GPU about half occupied), in process: no gRPC, "
          "no database, no estimation. 'new GPUs': GPUs never seen; 'new': node states never "
          "seen, of GPUs seen before in those states; 'same': the pool "
          "listed as in the call before.")
    print()
    print(table(["nodes", "GPUs", "bytes", "listing", "convert ms", "policy ms", "total ms",
                 "node", "reps"], rows))
