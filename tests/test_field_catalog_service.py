"""The catalog as the field sees it, over gRPC on a real server: driver spellings of profiles
and the models added from NVIDIA's tooling, through Recommend, NextAfterOom, RecordExecution
and Admin.ListGpuModels."""

from __future__ import annotations

import json
from pathlib import Path

import grpc
import pytest

from recommender._proto.intelliscale.recommender.v1 import recommender_pb2 as pb
from recommender.core.catalog import load_catalog
from recommender.store import SqlStore
from tests.harness.live import Live, serving
from tests.helpers import pool, record, request


def code_of(fn: object, *args: object) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.RpcError) as err:
        fn(*args)  # type: ignore[operator]
    return err.value.code(), err.value.details()


def nodes(*gpus_per_node: list[pb.Gpu]) -> tuple[pb.Node, ...]:
    return tuple(pb.Node(node_id=f"n{i}", gpus=g) for i, g in enumerate(gpus_per_node))


SPELT = ("1g.10gb", "3g.39gb", "7g.79gb")
"""An A100-80GB pool whose driver names the 3g and 7g profiles as some 535/545 drivers do."""


def test_pod_resources_use_the_pools_spelling_up_the_ladder(live: Live) -> None:
    r = live.recommender.Recommend(request(
        "spelt", pool("a80", "NVIDIA A100-SXM4-80GB", profiles=SPELT), declared=15000))
    # The catalog's name in the answer, the node's spelling in what the runner emits.
    assert (r.profile.name, r.profile.memory_mib, r.gpu_model) == ("3g.40gb", 40192, "A100-80GB")
    assert dict(r.resources) == {"nvidia.com/mig-3g.39gb": "1"}
    assert [(x.profile.name, dict(x.resources)) for x in r.ladder] == [
        ("7g.80gb", {"nvidia.com/mig-7g.79gb": "1"})]

    n = live.recommender.NextAfterOom(pb.NextAfterOomRequest(
        recommendation_id=r.recommendation_id, observed_peak_memory_mib=39000))
    assert (n.profile.name, n.attempt) == ("7g.80gb", 2)
    assert dict(n.resources) == {"nvidia.com/mig-7g.79gb": "1"}
    # A retried call gets the same stored rung, spelling included.
    again = live.recommender.NextAfterOom(pb.NextAfterOomRequest(
        recommendation_id=r.recommendation_id, observed_peak_memory_mib=39000))
    assert again.recommendation_id == n.recommendation_id
    assert dict(again.resources) == {"nvidia.com/mig-7g.79gb": "1"}


def test_canonical_names_keep_canonical_resources(live: Live) -> None:
    r = live.recommender.Recommend(request(
        "canon", pool("a80", "A100-80GB", profiles=("3g.40gb", "7g.80gb")), declared=15000))
    assert dict(r.resources) == {"nvidia.com/mig-3g.40gb": "1"}
    assert [dict(x.resources) for x in r.ladder] == [{"nvidia.com/mig-7g.80gb": "1"}]


def test_occupied_profiles_accept_driver_spellings(live: Live) -> None:
    full = [pb.Gpu(uuid="g-full", occupied_profiles=["3g.39gb", "3g.39gb"])]
    half = [pb.Gpu(uuid="g-half", occupied_profiles=["3g.39gb"])]
    r = live.recommender.Recommend(request(
        "occ", pool("a80", "A100-80GB", profiles=SPELT, nodes=nodes(full, half)),
        declared=15000))
    assert (r.profile.name, r.node_id) == ("3g.40gb", "n1")
    # Both halves taken on the only node: no 3g fits, and the pool says why.
    code, msg = code_of(live.recommender.Recommend, request(
        "occ2", pool("a80", "A100-80GB", profiles=("3g.39gb",), nodes=nodes(full)),
        declared=15000))
    assert code == grpc.StatusCode.FAILED_PRECONDITION and "a80" in msg


def test_record_execution_accepts_a_spelling_and_stores_the_catalog_name(live: Live) -> None:
    for i, profile in enumerate(("7g.79gb", "7g.80gb")):
        out = live.recommender.RecordExecution(record(
            f"x{i}", "rec-spelt", model="NVIDIA A800 80GB PCIe", profile=profile, peak=50000))
        assert not out.duplicate
    samples = live.store.action_samples("rec-spelt", 10)
    assert sorted(s.profile for s in samples) == ["7g.80gb", "7g.80gb"]
    assert {s.gpu_model for s in samples} == {"A800-80GB"}
    assert {s.slice_mib for s in samples} == {80896}


@pytest.mark.parametrize(("model", "profiles", "field", "msg"), [
    ("A100-80GB", ("3g.40gb", "3g.39gb"), "pools[0].profiles[1]", "two spellings of 3g.40gb"),
    ("A100-40GB", ("7g.79gb",), "pools[0].profiles[0]", "unknown profile '7g.79gb'"),
])
def test_bad_spellings_are_invalid_argument(
    live: Live, model: str, profiles: tuple[str, ...], field: str, msg: str
) -> None:
    code, details = code_of(live.recommender.Recommend,
                            request("bad", pool("p", model, profiles=profiles)))
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert details.startswith(field) and msg in details


def test_a_spelling_of_another_model_is_invalid_in_record_execution(live: Live) -> None:
    code, details = code_of(live.recommender.RecordExecution,
                            record("bad-x", model="A100-40GB", profile="3g.39gb"))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and details.startswith("profile:")
    assert live.store.action_samples("act", 10) == []


@pytest.mark.parametrize(("nvml", "model_id", "declared", "profile"), [
    ("NVIDIA A800 80GB PCIe", "A800-80GB", 8000, "1g.10gb"),
    ("NVIDIA A800-SXM4-40GB", "A800-40GB", 4000, "1g.5gb"),
    ("NVIDIA A800 40GB Active", "A800-40GB", 8000, "1g.10gb"),
    ("NVIDIA H800", "H800-80GB", 8000, "1g.10gb"),
    ("NVIDIA H800 PCIe", "H800-80GB", 15000, "1g.20gb"),
    ("NVIDIA H800 NVL", "H800-94GB", 10000, "1g.12gb"),
    ("NVIDIA H20", "H20-96GB", 20000, "1g.24gb"),
    ("NVIDIA GH200 144G HBM3e", "GH200-144GB", 16000, "1g.18gb"),
])
def test_new_models_recommend_by_nvml_name(
    live: Live, nvml: str, model_id: str, declared: int, profile: str
) -> None:
    one_node = nodes([pb.Gpu(uuid="g0"), pb.Gpu(uuid="g1")])
    r = live.recommender.Recommend(request(
        f"new-{model_id}", pool("p", nvml, nodes=one_node), declared=declared, workers=2))
    assert (r.gpu_model, r.profile.name, r.count, r.node_id) == (model_id, profile, 2, "n0")
    assert r.ladder, "a ladder of larger slices"
    n = live.recommender.NextAfterOom(pb.NextAfterOomRequest(
        recommendation_id=r.recommendation_id))
    assert n.gpu_model == model_id and n.profile.memory_mib > r.profile.memory_mib


def test_rtx_pro_5000_is_placed_instead_of_refused(live: Live) -> None:
    busy = [pb.Gpu(uuid="g0", occupied=[pb.Placement(start=0, size=3)])]
    r = live.recommender.Recommend(request(
        "pro5000", pool("p", "RTX-PRO-5000-48GB", nodes=nodes(busy, [pb.Gpu(uuid="g1")])),
        declared=15000))
    # The half-used card takes the 1g.24gb in its free half; the idle card stays whole.
    assert (r.profile.name, r.node_id) == ("1g.24gb", "n0")
    assert dict(r.resources) == {"nvidia.com/mig-1g.24gb": "1"}
    assert [x.profile.name for x in r.ladder] == ["2g.48gb"]


def test_list_gpu_models_shows_new_models_aliases_and_sources(live: Live) -> None:
    models = {m.id: m for m in live.admin.ListGpuModels(pb.ListGpuModelsRequest()).gpu_models}
    assert {"A800-40GB", "A800-80GB", "H800-80GB", "H800-94GB", "H20-96GB"} <= set(models)
    assert "NVIDIA A800 80GB PCIe" in models["A800-80GB"].aliases
    assert "NVIDIA GH200 144G HBM3e" in models["GH200-144GB"].aliases
    a80 = {p.profile.name: p for p in models["A100-80GB"].profiles}
    assert list(a80["3g.40gb"].aliases) == ["3g.39gb"]
    assert list(a80["7g.80gb"].aliases) == ["7g.79gb"]
    gb200 = {p.profile.name: p for p in models["GB200-186GB"].profiles}
    assert (gb200["1g.23gb"].profile.memory_mib, gb200["1g.23gb"].memory_estimated) == (
        22528, False)
    assert (gb200["2g.47gb"].profile.memory_mib, gb200["2g.47gb"].memory_estimated) == (
        46592, False)
    assert list(gb200["1g.23gb"].aliases) == ["1g.24gb"]
    a800 = {p.profile.name: p for p in models["A800-80GB"].profiles}
    assert a800["3g.40gb"].memory_estimated and list(a800["3g.40gb"].aliases) == ["3g.39gb"]
    pro = models["RTX-PRO-5000-48GB"]
    assert pro.placements_known and pro.placement_units == 6
    assert all(m.sources for m in models.values()), "every model says where its facts are from"
    assert any("mig-parted" in s for s in models["H20-96GB"].sources)


def test_operator_adds_a_profile_alias_in_the_override(store: SqlStore, tmp_path: Path) -> None:
    path = tmp_path / "override.json"
    path.write_text(json.dumps({"gpus": [
        {"id": "NVIDIA A100-SXM4-80GB",
         "profiles": [{"name": "4g.40gb", "aliases": ["4g.39gb"]},
                      {"name": "3g.39gb", "memory_mib": 40064}]},
    ]}))
    with serving(store, load_catalog(path)) as live:
        r = live.recommender.Recommend(request(
            "op", pool("p", "A100-80GB", profiles=("4g.39gb",)), declared=30000))
        assert (r.profile.name, r.profile.memory_mib) == ("4g.40gb", 40192)
        assert dict(r.resources) == {"nvidia.com/mig-4g.39gb": "1"}
        models = {m.id: m for m in live.admin.ListGpuModels(pb.ListGpuModelsRequest()).gpu_models}
        a80 = models["A100-80GB"]
        profiles = {p.profile.name: p for p in a80.profiles}
        assert a80.overridden and list(profiles["4g.40gb"].aliases) == ["4g.39gb"]
        # A patch named by a spelling patches the profile it spells.
        assert profiles["3g.40gb"].profile.memory_mib == 40064
