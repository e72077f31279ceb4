"""Layout advice: demand from recorded executions, the geometry search, and Admin.AdviseLayout
over a real server."""

from __future__ import annotations

import random
import re
import signal
from datetime import UTC, datetime, timedelta
from pathlib import Path

import grpc
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from recommender._proto.intelliscale.recommender.v1 import recommender_pb2 as pb
from recommender._proto.intelliscale.recommender.v1 import recommender_pb2_grpc as pb_grpc
from recommender.cli import main as cli_main
from recommender.core.catalog import Catalog, GpuModel
from recommender.core.demand import Run, demand_of, over_time, run_of
from recommender.core.geometry import capacity_of, card_geometries, geometry_of, stock_layouts
from recommender.core.layout import advise, fewest_gpus_serving_all, mig_parted_config, score
from recommender.core.placement import GpuState, place
from recommender.report import render_report
from tests.harness.live import Live
from tests.harness.page import check_page
from tests.harness.process import run_cli
from tests.harness.process import serve_in_child as start_server
from tests.helpers import pool, record, request, ts

T0 = datetime(2026, 10, 1, tzinfo=UTC)
H = timedelta(hours=1)


def hours(n: float) -> timedelta:
    return timedelta(hours=n)


# --- demand ----------------------------------------------------------------------------------


def test_demand_counts_instances_at_once_weighted_by_time() -> None:
    runs = [Run("1g.5gb", 2, T0, T0 + 2 * H),            # 2 instances for 2 h
            Run("1g.5gb", 1, T0 + H, T0 + 3 * H),        # overlaps the last hour: 3 at once
            Run("3g.20gb", 1, T0 - H, T0 + H)]           # starts before the window
    d = demand_of(runs, T0, T0 + 4 * H)
    assert d.profiles == ("1g.5gb", "3g.20gb")
    assert d.peak("1g.5gb") == 3 and d.peak("3g.20gb") == 1
    # at least 1 for 3 h, at least 2 for 2 h, at least 3 for 1 h
    assert d.held["1g.5gb"] == (3 * 3600.0, 2 * 3600.0, 3600.0)
    assert d.instance_seconds() == pytest.approx((2 * 2 + 2 + 1) * 3600)  # clipped 3g run: 1 h
    # Two 1g.5gb and no 3g.20gb hold 3 h + 2 h of the 7 instance-hours.
    assert d.served({"1g.5gb": 2}) == pytest.approx(5 * 3600)
    assert d.served_fraction({"1g.5gb": 2}) == pytest.approx(5 / 7)
    assert d.served_fraction({"1g.5gb": 9, "3g.20gb": 1}) == pytest.approx(1.0)
    assert d.served_fraction({"2g.10gb": 5}) == 0.0  # another profile does not help


def test_a_run_without_start_uses_its_duration_and_runs_outside_the_window_do_not_count() -> None:
    r = run_of("1g.5gb", 0, T0 + 2 * H, None, 1800.0)
    assert r.start == T0 + 1.5 * H and r.count == 1
    d = demand_of([r, Run("1g.5gb", 1, T0 - 3 * H, T0 - H)], T0, T0 + 4 * H)
    assert d.instance_seconds() == pytest.approx(1800.0)
    assert demand_of([], T0, T0 + H).empty


def test_over_time_keeps_the_areas() -> None:
    runs = [Run("1g.5gb", 3, T0, T0 + 90 * timedelta(minutes=1)),
            Run("2g.10gb", 1, T0 + H, T0 + 4 * H)]
    d = demand_of(runs, T0, T0 + 4 * H)
    starts, asked, held = over_time(d, [{"1g.5gb": 2}, {"1g.5gb": 3, "2g.10gb": 1}], 4)
    assert starts[1] == T0 + H
    assert asked == pytest.approx([3.0, 1.5 + 1.0, 1.0, 1.0])
    width = 3600.0
    assert sum(held[0]) * width == pytest.approx(d.served({"1g.5gb": 2}))
    assert sum(held[1]) == pytest.approx(sum(asked))


# --- geometries --------------------------------------------------------------------------------


def test_every_geometry_places_and_is_maximal(catalog: Catalog) -> None:
    for model in catalog:
        if not model.placements_known:
            continue
        geometries = card_geometries(model)
        mig = [g for g in geometries if g.mig_enabled]
        assert geometries[-1].mig_enabled is False  # the card with MIG off is a choice too
        if model.placement_units == 8:
            assert 20 <= len(mig) <= 40, model.id  # "a few dozen"
        for g in mig:
            _assert_places(model, g.profiles)
            # Maximal: no further base instance fits.
            for p in model.profiles:
                if p.is_base and p.placement is not None:
                    more = dict(g.profiles)
                    more[p.name] = more.get(p.name, 0) + 1
                    assert geometry_of(model, more) is None, (model.id, g.label, p.name)
            # The kept placements are legal and do not overlap.
            used = 0
            for name, start, size in g.placements:
                prof = model.profile(name)
                assert prof is not None and prof.placement is not None
                assert start in prof.placement.starts and size == prof.placement.size
                mask = ((1 << size) - 1) << start
                assert not used & mask
                used |= mask


def _assert_places(model: GpuModel, counts: dict[str, int]) -> None:
    requests = [p for name, n in counts.items() for p in [model.profile(name)] * n]
    assert all(p is not None for p in requests)
    assert place(model, [p for p in requests if p is not None], [GpuState("x")]) is not None


def test_stock_layouts_are_nvidias(catalog: Catalog) -> None:
    """mig-parted's config-default.yaml: all-balanced per model, all-<profile>, all-disabled."""
    a100 = dict(stock_layouts(catalog.resolve("A100-40GB")))  # type: ignore[arg-type]
    assert a100["all-balanced"].profiles == {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1}
    assert a100["all-1g.5gb"].profiles == {"1g.5gb": 7}
    assert a100["all-1g.10gb"].profiles == {"1g.10gb": 4}
    assert a100["all-2g.10gb"].profiles == {"2g.10gb": 3}
    assert a100["all-3g.20gb"].profiles == {"3g.20gb": 2}
    assert a100["all-7g.40gb"].profiles == {"7g.40gb": 1}
    assert not a100["all-disabled"].mig_enabled
    expected = {
        "A100-80GB": {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1},
        "H100-80GB": {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1},
        "H100-94GB": {"1g.12gb": 2, "2g.24gb": 1, "3g.47gb": 1},
        "H200-141GB": {"1g.18gb": 2, "2g.35gb": 1, "3g.71gb": 1},
        "B200-180GB": {"1g.23gb": 2, "2g.45gb": 1, "3g.90gb": 1},
        "GH200-144GB": {"1g.18gb": 2, "2g.36gb": 1, "3g.72gb": 1},
        "A30-24GB": {"1g.6gb": 2, "2g.12gb": 1},
        "RTX-PRO-6000-96GB": {"1g.24gb": 2, "2g.48gb": 1},
    }
    for model_id, counts in expected.items():
        model = catalog.resolve(model_id)
        assert model is not None
        stock = dict(stock_layouts(model))
        assert stock["all-balanced"].profiles == counts, model_id
        for g in stock.values():
            if g.mig_enabled:
                _assert_places(model, g.profiles)


# --- the search --------------------------------------------------------------------------------


def test_advice_serves_demand_that_a_layout_can_hold_and_all_balanced_does_not(
        catalog: Catalog) -> None:
    a100 = catalog.resolve("A100-40GB")
    assert a100 is not None
    # Two cards' worth: 5 x 1g.5gb and a 2g.10gb at once during the day (one card: 7 of its 8
    # units), 2 x 3g.20gb at night (the other card). all-balanced has 4 x 1g.5gb on two cards.
    runs = []
    for day in range(3):
        start = T0 + timedelta(days=day)
        runs += [Run("1g.5gb", 5, start + 8 * H, start + 18 * H),
                 Run("2g.10gb", 1, start + 9 * H, start + 17 * H),
                 Run("3g.20gb", 2, start + 20 * H, start + 23 * H)]
    d = demand_of(runs, T0, T0 + timedelta(days=3))
    full = {"1g.5gb": 5, "2g.10gb": 1, "3g.20gb": 2}
    assert d.served_fraction(full) == pytest.approx(1.0)  # such a layout would hold it all
    a = advise(a100, d, 2)
    assert a.exact
    assert a.score.served_fraction == pytest.approx(1.0)
    assert all(capacity_of(a.gpus).get(p, 0) >= n for p, n in full.items())
    for g in a.gpus:
        _assert_places(a100, g.profiles)
    stock = {s.name: s for s in a.alternatives}
    assert stock["all-balanced"].served_fraction < 0.999
    assert {"all-balanced", "all-1g.5gb", "all-2g.10gb", "all-3g.20gb",
            "all-disabled"} <= set(stock)
    assert all(s.served_fraction <= a.score.served_fraction + 1e-12 for s in a.alternatives)
    assert "all-balanced serves" in a.reason and "100.0%" in a.reason


def test_idle_memory_breaks_ties_between_layouts_that_serve_the_same(catalog: Catalog) -> None:
    """One 1g.10gb-sized need: 1g.10gb and 2g.10gb are different profiles, but between the
    geometries that hold the demanded 1g.5gb, the tie-break is the memory they serve."""
    a100 = catalog.resolve("A100-40GB")
    assert a100 is not None
    d = demand_of([Run("1g.5gb", 1, T0, T0 + H), Run("7g.40gb", 1, T0 + 2 * H, T0 + 3 * H)],
                  T0, T0 + 4 * H)
    a = advise(a100, d, 1)
    # One card cannot hold both; each serves half the instance-hours; 7g.40gb serves more
    # memory, so less stays idle.
    assert a.score.served_fraction == pytest.approx(0.5)
    assert a.gpus[0].profiles == {"7g.40gb": 1}


def test_whole_card_demand_needs_mig_off(catalog: Catalog) -> None:
    h100 = catalog.resolve("H100-80GB")
    assert h100 is not None
    d = demand_of([Run("whole", 1, T0, T0 + H), Run("1g.10gb", 7, T0, T0 + H)], T0, T0 + H)
    a = advise(h100, d, 2)
    assert a.score.served_fraction == pytest.approx(1.0)
    assert sorted(g.mig_enabled for g in a.gpus) == [False, True]


def test_no_demand_answers_the_stock_layout_and_says_why(catalog: Catalog) -> None:
    a100 = catalog.resolve("A100-40GB")
    assert a100 is not None
    a = advise(a100, demand_of([], T0, T0 + H), 3)
    assert [g.profiles for g in a.gpus] == [{"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1}] * 3
    assert a.score.served_fraction == 0.0 and "no executions" in a.reason


def _random_demand(rng: random.Random, profiles: list[str], n: int) -> list[Run]:
    runs = []
    for _ in range(n):
        start = T0 + timedelta(minutes=rng.uniform(0, 24 * 60))
        runs.append(Run(rng.choice(profiles), rng.choice([1, 1, 2, 3]), start,
                        start + timedelta(minutes=rng.uniform(5, 240))))
    return runs


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), gpus=st.integers(1, 4), kinds=st.integers(1, 4))
def test_exact_beats_every_stock_layout_and_the_heuristic_stays_under_its_bound(
        catalog: Catalog, seed: int, gpus: int, kinds: int) -> None:
    a100 = catalog.resolve("A100-40GB")
    assert a100 is not None
    rng = random.Random(seed)
    profiles = rng.sample(["1g.5gb", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"],
                          kinds)
    d = demand_of(_random_demand(rng, profiles, 40), T0, T0 + timedelta(days=1))
    exact = advise(a100, d, gpus, exact_states=10**9)
    heuristic = advise(a100, d, gpus, exact_states=0)
    assert exact.exact and not heuristic.exact
    assert len(exact.gpus) == len(heuristic.gpus) == gpus
    for g in (*exact.gpus, *heuristic.gpus):
        if g.mig_enabled:
            _assert_places(a100, g.profiles)
    best_stock = max(s.served_fraction for s in exact.alternatives)
    assert exact.score.served_fraction >= best_stock - 1e-9
    assert heuristic.score.served_fraction <= exact.score.served_fraction + 1e-9
    assert exact.score.served_fraction <= heuristic.bound + 1e-9
    # The layout's own score agrees with a direct count over the demand's steps.
    cap = capacity_of(exact.gpus)
    direct = sum((b - a).total_seconds() * sum(min(n, cap.get(p, 0))
                                               for p, n in zip(d.profiles, level, strict=True))
                 for a, b, level in d.segments())
    assert score(a100, d, exact.gpus).served_instance_s == pytest.approx(direct)


def test_exact_search_is_optimal_against_brute_force(catalog: Catalog) -> None:
    a30 = catalog.resolve("A30-24GB")
    assert a30 is not None
    rng = random.Random(3)
    geometries = card_geometries(a30)
    for _ in range(20):
        d = demand_of(_random_demand(rng, ["1g.6gb", "2g.12gb", "4g.24gb", "whole"], 12),
                      T0, T0 + timedelta(days=1))
        a = advise(a30, d, 3)
        best = max(d.served(capacity_of([x, y, z]))
                   for x in geometries for y in geometries for z in geometries)
        assert a.score.served_instance_s == pytest.approx(best)


def test_large_demand_uses_the_heuristic_within_its_bound(catalog: Catalog) -> None:
    h100 = catalog.resolve("H100-80GB")
    assert h100 is not None
    rng = random.Random(11)
    kinds = ["1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"]
    d = demand_of(_random_demand(rng, kinds, 2000), T0, T0 + timedelta(days=1))
    a = advise(h100, d, 64)
    assert not a.exact
    assert a.score.served_fraction <= a.bound + 1e-12
    assert a.score.served_fraction >= 0.97 * a.bound
    assert "no layout can serve more than" in a.reason
    assert len(a.gpus) == 64


def test_mig_parted_config_is_valid_yaml_in_mig_parteds_format(catalog: Catalog) -> None:
    a100 = catalog.resolve("A100-40GB")
    assert a100 is not None
    g1 = geometry_of(a100, {"1g.5gb": 7})
    g2 = geometry_of(a100, {"3g.20gb": 2})
    assert g1 is not None and g2 is not None
    whole = card_geometries(a100)[-1]
    text = mig_parted_config(a100, [g1, g1, g2, whole], "mine", "a comment\nsecond line")
    doc = yaml.safe_load(text)
    assert doc == {"version": "v1", "mig-configs": {"mine": [
        {"devices": [0, 1], "mig-enabled": True, "mig-devices": {"1g.5gb": 7}},
        {"devices": [2], "mig-enabled": True, "mig-devices": {"3g.20gb": 2}},
        {"devices": [3], "mig-enabled": False},
    ]}}
    same = yaml.safe_load(mig_parted_config(a100, [g2, g2]))
    assert same["mig-configs"]["intelliscale-advised"] == [
        {"devices": "all", "mig-enabled": True, "mig-devices": {"3g.20gb": 2}}]


# --- Admin.AdviseLayout over a real server ---------------------------------------------------


def _ran(live: Live, eid: str, profile: str, count: int, start: datetime, end: datetime,
         *, model: str = "A100-40GB", rec: str = "") -> None:
    m = record(eid, "layout-act", model=model, profile=profile, count=count, recommendation=rec)
    m.started_at.CopyFrom(ts(start))
    m.ended_at.CopyFrom(ts(end))
    assert not live.recommender.RecordExecution(m).duplicate


def _busy_days(live: Live, now: datetime) -> None:
    """Three days of 5 x 1g.5gb and a 2g.10gb by day, 2 x 3g.20gb at night: two A100-40GB
    can hold all of it, all-balanced cannot."""
    for day in range(3):
        start = (now - timedelta(days=3 - day)).replace(hour=0, minute=0, second=0,
                                                        microsecond=0)
        _ran(live, f"d{day}-a", "1g.5gb", 5, start + 8 * H, start + 18 * H)
        _ran(live, f"d{day}-b", "2g.10gb", 1, start + 9 * H, start + 17 * H)
        _ran(live, f"d{day}-c", "3g.20gb", 2, start + 20 * H, start + 23 * H)
    _ran(live, "other-model", "1g.10gb", 7, now - 30 * H, now - 20 * H, model="H100-80GB")


def test_advise_layout_over_a_real_server(live: Live) -> None:
    now = datetime.now(UTC)
    _busy_days(live, now)
    a = live.admin.AdviseLayout(pb.AdviseLayoutRequest(gpu_model="NVIDIA A100-SXM4-40GB",
                                                       gpus=2))
    assert a.gpu_model == "A100-40GB" and a.executions == 9 and a.exact
    assert a.served_fraction == pytest.approx(1.0)
    assert len(a.gpus) == 2 and [g.index for g in a.gpus] == [0, 1]
    total: dict[str, int] = {}
    for g in a.gpus:
        assert g.mig_enabled
        for p, n in g.profiles.items():
            total[p] = total.get(p, 0) + n
        assert sorted(x.profile for x in g.placements) == sorted(
            p for p, n in g.profiles.items() for _ in range(n))
    assert total["1g.5gb"] >= 5 and total["2g.10gb"] >= 1 and total["3g.20gb"] >= 2
    scores = {s.name: s.served_fraction for s in a.alternatives}
    assert scores["all-balanced"] < 0.999
    assert set(scores) >= {"all-balanced", "all-1g.5gb", "all-3g.20gb", "all-7g.40gb"}
    assert a.demanded_instance_hours == pytest.approx(3 * (50 + 8 + 6))
    demand = {x.profile: x for x in a.demand}
    assert demand["1g.5gb"].peak == 5 and demand["1g.5gb"].served_fraction == pytest.approx(1.0)
    doc = yaml.safe_load(a.mig_parted_config)
    entries = doc["mig-configs"][a.mig_parted_config_name]
    assert doc["version"] == "v1" and all(e["mig-enabled"] for e in entries)
    assert (a.until.ToDatetime(tzinfo=UTC) - a.since.ToDatetime(tzinfo=UTC)) == timedelta(days=7)
    assert "all-balanced serves" in a.reason

    # A window that ends before any of it: nothing to learn from.
    empty = live.admin.AdviseLayout(pb.AdviseLayoutRequest(
        gpu_model="A100-40GB", gpus=1, since=ts(now - timedelta(days=30)),
        until=ts(now - timedelta(days=20))))
    assert empty.executions == 0 and empty.served_fraction == 0.0
    assert "no executions" in empty.reason


def test_advise_layout_filters_by_pool(live: Live) -> None:
    now = datetime.now(UTC)
    r = live.recommender.Recommend(request("pooled", pool("east", "A100-40GB"), declared=30000,
                                           execution="p-1"))
    assert r.profile.name == "7g.40gb"
    _ran(live, "p-1", "7g.40gb", 1, now - 5 * H, now - 4 * H, rec=r.recommendation_id)
    _ran(live, "p-2", "1g.5gb", 3, now - 5 * H, now - 4 * H)  # no recommendation: no pool
    east = live.admin.AdviseLayout(pb.AdviseLayoutRequest(gpu_model="A100-40GB", gpus=1,
                                                          pool_id="east"))
    assert east.executions == 1 and [x.profile for x in east.demand] == ["7g.40gb"]
    assert dict(east.gpus[0].profiles) == {"7g.40gb": 1}
    everything = live.admin.AdviseLayout(pb.AdviseLayoutRequest(gpu_model="A100-40GB", gpus=1))
    assert everything.executions == 2
    west = live.admin.AdviseLayout(pb.AdviseLayoutRequest(gpu_model="A100-40GB", gpus=1,
                                                          pool_id="west"))
    assert west.executions == 0


BAD_REQUESTS = [
    (pb.AdviseLayoutRequest(gpu_model="A999", gpus=1), "gpu_model: unknown GPU model"),
    (pb.AdviseLayoutRequest(gpus=1), "gpu_model: required"),
    (pb.AdviseLayoutRequest(gpu_model="A100-40GB", gpus=0), "gpus: must be between 1 and"),
    (pb.AdviseLayoutRequest(gpu_model="A100-40GB", gpus=-3), "gpus: must be between 1 and"),
    (pb.AdviseLayoutRequest(gpu_model="A100-40GB", gpus=100_000), "gpus: must be between 1 and"),
    (pb.AdviseLayoutRequest(gpu_model="A100-40GB", gpus=1, since=ts(T0), until=ts(T0)),
     "since: must be before until"),
    (pb.AdviseLayoutRequest(gpu_model="A100-40GB", gpus=1, since=ts(T0 + H), until=ts(T0)),
     "since: must be before until"),
]


# Checked before any query: SQLite only.
@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_advise_layout_bad_input_is_invalid_argument_naming_the_field(live: Live) -> None:
    for req, field in BAD_REQUESTS:
        with pytest.raises(grpc.RpcError) as err:
            live.admin.AdviseLayout(req)
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT, field
        assert (err.value.details() or "").startswith(field), err.value.details()


# --- recommender layout ----------------------------------------------------------------------


def test_layout_command_reads_what_a_real_server_recorded(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    proc, port = start_server(tmp_path)
    now = datetime.now(UTC)
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as ch:
            server = Live(None, ch, pb_grpc.RecommenderStub(ch),  # type: ignore[arg-type]
                          pb_grpc.AdminStub(ch), None, "")  # type: ignore[arg-type]
            _busy_days(server, now)
            rpc = server.admin.AdviseLayout(pb.AdviseLayoutRequest(gpu_model="A100-40GB",
                                                                   gpus=2))
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
    out = run_cli("layout", "--gpu-model", "A100-40GB", "--gpus", "2", "--out", "mp.yaml",
                  cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "Layout for 2 A100-40GB, learned from 9 executions" in text
    assert "5 x 1g.5gb + 1 x 2g.10gb" in text and "2 x 3g.20gb" in text
    assert re.search(r"^advised\s+100\.0%", text, flags=re.M)
    balanced = next(s.served_fraction for s in rpc.alternatives if s.name == "all-balanced")
    assert re.search(rf"^all-balanced\s+{balanced:.1%}".replace(".", r"\."), text, flags=re.M)
    assert re.search(r"^1g\.5gb\s+5\s+150\.0\s+5\s+100\.0%", text, flags=re.M)
    written = yaml.safe_load((tmp_path / "mp.yaml").read_text())
    assert written == yaml.safe_load(rpc.mig_parted_config)  # the same advice as the RPC
    assert "nvidia-mig-parted apply -f mp.yaml -c intelliscale-advised" in text

    # A window with nothing in it, printed to stdout.
    assert cli_main(["layout", "--gpu-model", "A100-40GB", "--gpus", "1", "--since", "90d",
                     "--until", "60d", "--out", "-", "--database-url",
                     f"sqlite:///{tmp_path / 'recommender.db'}"]) == 0
    quiet = capsys.readouterr().out
    assert "no executions" in quiet and "version: v1" in quiet


@pytest.mark.parametrize(("args", "message"), [
    (["--gpu-model", "A999", "--gpus", "1"], "--gpu-model: unknown GPU model"),
    (["--gpu-model", "A100-40GB", "--gpus", "0"], "--gpus: must be between 1 and"),
    (["--gpu-model", "A100-40GB", "--gpus", "1", "--since", "1d", "--until", "2d"],
     "--since: must be before --until"),
])
def test_layout_command_refuses_bad_input_with_exit_2(
        tmp_path: Path, args: list[str], message: str, capsys: pytest.CaptureFixture[str]
        ) -> None:
    out = tmp_path / "mig-parted.yaml"
    code = cli_main(["layout", *args, "--database-url", f"sqlite:///{tmp_path / 'x.db'}",
                     "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and message in err, err
    assert not out.exists()


# --- the report's section --------------------------------------------------------------------


def test_report_shows_the_demand_against_the_current_and_advised_layouts(live: Live) -> None:
    now = datetime.now(UTC)
    _busy_days(live, now)
    page = render_report(live.store, now=now)
    check_page(page)
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page))
    assert 'href="#layout"' in page and 'id="layout"' in page
    assert "A100-40GB: demand against the layouts" in text
    assert "H100-80GB: demand against the layouts" in text  # the other model's one execution
    # Two cards is the fewest that serve it all; all-balanced on two cards does not.
    assert "2 A100-40GB GPUs, 9 executions" in text
    assert "serves 100.0% of 192.0 demanded instance-hours; all-balanced serves 84.4%" in text
    assert re.search(r"1g\.5gb 5 150\.0 4 80\.0% 5 100\.0%", text), text
    svg = next(s for s in re.findall(r"<svg\b.*?</svg>", page, flags=re.S)
               if "held by the advised layout" in s)
    assert svg.count("<polyline") == 2 and svg.count("<polygon") == 1
    # An action's report has no layout section: the layout is the cluster's.
    assert 'id="layout"' not in render_report(live.store, now=now, action_id="layout-act")
    # With another current layout and a chosen size.
    other = render_report(live.store, now=now, layout_gpus=3, layout_current="all-1g.5gb")
    other_text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", other))
    assert "3 A100-40GB GPUs" in other_text and "all-1g.5gb serves" in other_text


def test_fewest_gpus_serving_all(catalog: Catalog) -> None:
    a100 = catalog.resolve("A100-40GB")
    assert a100 is not None
    runs = [Run("1g.5gb", 5, T0, T0 + H), Run("2g.10gb", 1, T0, T0 + H),
            Run("3g.20gb", 2, T0 + 2 * H, T0 + 3 * H)]
    d = demand_of(runs, T0, T0 + 4 * H)
    assert fewest_gpus_serving_all(a100, d) == 2
    assert advise(a100, d, 1).score.served_fraction < 1.0
    many = demand_of([Run("7g.40gb", 9, T0, T0 + H)], T0, T0 + H)
    assert fewest_gpus_serving_all(a100, many) == 9
