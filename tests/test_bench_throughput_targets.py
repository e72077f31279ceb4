"""The ParvaGPU bench's guards against tuning to its table: held-out DNNs, other workloads, and
the cases it explains, on a small synthetic trace."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.throughput_targets import cheapest, held_out, load, replay

HEADER = "Mig instance,Batch size,Workload Number,Throughput,Latency\n"


def _trace(tmp_path: Path) -> Path:
    """Two DNNs, one batch each, measured with one and two processes per instance: `lin`
    scales with compute slices, `flat` does not; with two processes `lin` does not fit 1g."""
    rows = {
        "lin": {1: {c: 10.0 * c for c in (1, 2, 3, 4, 7)},
                2: {1: 0.0, 2: 15.0, 3: 22.0, 4: 30.0, 7: 50.0}},
        "flat": {1: {c: 40.0 for c in (1, 2, 3, 4, 7)},
                 2: {c: 30.0 for c in (1, 2, 3, 4, 7)}},
    }
    for dnn, by_workload in rows.items():
        lines = [HEADER]
        for workload, tput in by_workload.items():
            lines += [f"{c},8,{workload},{t},{0.0 if t == 0 else 0.1}\n" for c, t in tput.items()]
        (tmp_path / f"{dnn}.csv").write_text("".join(lines))
    return tmp_path


def test_load_keeps_the_workload_and_the_dnns_asked_for(tmp_path: Path) -> None:
    trace = _trace(tmp_path)
    assert [a.name for a in load(trace)] == ["flat-b8", "lin-b8"]
    assert [a.name for a in load(trace, dnns=frozenset({"lin"}))] == ["lin-b8"]
    two = {a.name: a.throughput for a in load(trace, workload=2)}
    assert two["lin-b8"][1] == 0.0 and two["lin-b8"][7] == 50.0
    assert two["flat-b8"][3] == 30.0


def test_cheapest_counts_slices_times_workers(tmp_path: Path) -> None:
    lin, = load(_trace(tmp_path), dnns=frozenset({"lin"}))
    flat, = load(_trace(tmp_path), dnns=frozenset({"flat"}))
    assert cheapest(flat, 100.0) == (1, 3)  # 3 x 1g: 40 each, flat at every size
    assert cheapest(lin, 140.0) == (2, 7)  # 14 slices either way; the smaller instance first


@pytest.mark.slow
def test_replay_explains_every_case_that_is_not_the_cheapest(tmp_path: Path) -> None:
    trace = tmp_path / "trace"
    trace.mkdir()
    actions = load(_trace(trace))
    misses: list[str] = []
    rounds, _, oracle = replay(actions, f"sqlite:///{tmp_path}/x.db", "extremes", misses)
    assert oracle.cheapest == oracle.compared == oracle.cases
    explained = sum(r.compared - r.cheapest + r.missed + r.ooms for r in rounds)
    assert len(misses) >= sum(r.compared - r.cheapest for r in rounds)
    assert len(misses) <= explained
    for line in misses:
        assert line.startswith("round ") and "predicted" in line and "cheapest" in line


@pytest.mark.slow
def test_held_out_totals_the_replays_the_trace_has(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """The synthetic trace has workloads 1 and 2 and neither half's DNNs: four replays (two
    first weeks x two workloads), two rounds each, and totals that add them up."""
    held_out(_trace(tmp_path))
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("| ")]
    rows = [[c.strip() for c in ln.split("|")[1:-1]] for ln in lines[1:]]
    each = [r for r in rows if r[0] != "total"]
    assert sorted((r[0], r[1], r[3]) for r in each) == sorted(
        (fw, w, rnd) for fw in ("service", "extremes") for w in ("1", "2") for rnd in ("1", "2"))
    assert all(int(r[4]) == 8 for r in each)  # two actions x four targets
    totals = {r[3]: r for r in rows if r[0] == "total"}
    for rnd in ("1", "2"):
        assert int(totals[rnd][4]) == sum(int(r[4]) for r in each if r[3] == rnd) == 32
        assert int(totals[rnd][8]) == sum(int(r[8]) for r in each if r[3] == rnd)
