"""The GPU catalog: shipped data against the research file, name resolution, overrides."""

from __future__ import annotations

import importlib.util
import json
import re
from importlib import resources
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from recommender.core.catalog import WHOLE_GPU, Catalog, CatalogError, GpuModel, load_catalog

RESEARCH_FILE = Path(__file__).parents[2] / "shared/reference/mig_profiles.json"
BUILD_SCRIPT = Path(__file__).parents[1] / "tools/build_catalog.py"

# The research file names models in free text; this is the canonical id each must ship under.
# Order matters where one prefix is a prefix of another ("GH200 144G" before "GH200 (").
RESEARCH_TO_ID: list[tuple[str, str]] = [
    ("A30-24GB", "A30-24GB"),
    ("A100-40GB", "A100-40GB"),
    ("A100-80GB", "A100-80GB"),
    ("H100-80GB", "H100-80GB"),
    ("H100-94GB", "H100-94GB"),
    ("GH200 144G", "GH200-144GB"),
    ("GH200 (", "GH200-96GB"),
    ("H200-141GB", "H200-141GB"),
    ("B200", "B200-180GB"),
    ("GB200", "GB200-186GB"),
    ("B300", "B300-269GB"),
    ("GB300", "GB300-278GB"),
    ("RTX PRO 6000", "RTX-PRO-6000-96GB"),
    ("RTX PRO 5000", "RTX-PRO-5000-48GB"),
    ("RTX PRO 4500", "RTX-PRO-4500-32GB"),
]


@pytest.fixture(scope="module")
def shipped() -> Catalog:
    return load_catalog()


@pytest.fixture(scope="module")
def research() -> list[dict[str, Any]]:
    if not RESEARCH_FILE.is_file():
        pytest.skip(f"research file {RESEARCH_FILE} is missing")
    gpus: list[dict[str, Any]] = json.loads(RESEARCH_FILE.read_text())["gpus"]
    return gpus


def build_tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("build_catalog", BUILD_SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def merged(research: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The research notes with our supplement (tools/catalog_supplement.json) applied."""
    tool = build_tool()
    supplement = json.loads(tool.SUPPLEMENT.read_text())
    gpus: list[dict[str, Any]] = tool.merge({"gpus": research}, supplement)["gpus"]
    return gpus


def test_shipped_catalog_is_the_build_of_research_and_supplement() -> None:
    """gpu_catalog.json is generated: editing it by hand, or the supplement without running
    tools/build_catalog.py, fails here."""
    if not RESEARCH_FILE.is_file():
        pytest.skip(f"research file {RESEARCH_FILE} is missing")
    tool = build_tool()
    want = tool.build(json.loads(RESEARCH_FILE.read_text()),
                      json.loads(tool.SUPPLEMENT.read_text()))
    got = json.loads(resources.files("recommender").joinpath("data/gpu_catalog.json")
                     .read_text())
    assert got == want


def research_id(model: str) -> str:
    for prefix, cid in RESEARCH_TO_ID:
        if model.startswith(prefix):
            return cid
    raise AssertionError(f"research model {model!r} has no canonical id in RESEARCH_TO_ID")


def model_of(catalog: Catalog, name: str) -> GpuModel:
    model = catalog.resolve(name)
    assert model is not None, f"{name!r} does not resolve"
    return model


def write_override(tmp_path: Path, content: Any, *, raw: str | None = None) -> Path:
    path = tmp_path / "override.json"
    path.write_text(raw if raw is not None else json.dumps(content))
    return path


# --- shipped catalog against the research file ------------------------------------------


def test_every_research_model_is_in_the_catalog(
    shipped: Catalog, research: list[dict[str, Any]]
) -> None:
    ids = [research_id(g["model"]) for g in research]
    assert len(set(ids)) == len(ids), "two research models map to one canonical id"
    missing = [cid for cid in ids if cid not in shipped.models]
    assert not missing
    for cid in ids:
        assert model_of(shipped, cid).id == cid


def test_research_aliases_resolve_to_their_model(
    shipped: Catalog, research: list[dict[str, Any]]
) -> None:
    errors = []
    for g in research:
        cid = research_id(g["model"])
        for alias in g.get("aliases", []):
            clean = re.sub(r"\s*\(.*\)\s*$", "", alias).strip()  # drop "(older drivers, ...)"
            found = shipped.resolve(clean)
            if found is None or found.id != cid:
                errors.append((clean, cid, found.id if found else None))
    assert not errors


def test_model_geometry_matches_research(
    shipped: Catalog, merged: list[dict[str, Any]]
) -> None:
    errors = []
    for g in merged:
        model = shipped.models[g["id"]]
        got = (model.compute_slices, model.memory_slices, model.placement_units)
        want = (g["compute_slices"], g["memory_slices"], g.get("placement_units"))
        if got != want:
            errors.append((model.id, got, want))
    assert not errors


def test_profiles_match_research(shipped: Catalog, merged: list[dict[str, Any]]) -> None:
    errors: list[str] = []
    for g in merged:
        model = shipped.models[g["id"]]
        names = [p.name for p in model.profiles]
        want_names = [p["name"] for p in g["profiles"]]
        if sorted(names) != sorted(want_names):
            errors.append(f"{model.id}: profiles {sorted(names)} != {sorted(want_names)}")
            continue
        for rp in g["profiles"]:
            p = model.profile(rp["name"])
            assert p is not None
            where = f"{model.id} {p.name}"
            if (p.compute_slices, p.memory_slices) != (rp["compute_slices"], rp["memory_slices"]):
                errors.append(f"{where}: slices {p.compute_slices}/{p.memory_slices}")
            if p.max_count != rp["max_count"]:
                errors.append(f"{where}: max_count {p.max_count} != {rp['max_count']}")
            if p.variant_of != rp.get("variant_of"):
                errors.append(f"{where}: variant_of {p.variant_of} != {rp.get('variant_of')}")
            rpl = rp.get("placements")
            if rpl is None:
                if p.placement is not None:
                    errors.append(f"{where}: placement {p.placement} where research has none")
            elif p.placement is None or (
                (sorted(p.placement.starts), p.placement.size)
                != (sorted(rpl["starts"]), rpl["size"])
            ):
                errors.append(f"{where}: placement {p.placement} != {rpl}")
    assert not errors, "\n".join(errors)


def test_memory_mib_matches_research_or_is_a_conservative_estimate(
    shipped: Catalog, merged: list[dict[str, Any]]
) -> None:
    errors: list[str] = []
    estimated = 0
    for g in merged:
        model = shipped.models[g["id"]]
        for rp in g["profiles"]:
            p = model.profile(rp["name"])
            assert p is not None
            where = f"{model.id} {p.name}"
            if rp.get("memory_mib") is not None and rp.get("memory_derived"):
                # Copied from the model it shares a table with: the figure, marked estimated.
                if (p.memory_mib, p.memory_estimated) != (rp["memory_mib"], True):
                    errors.append(f"{where}: derived {p.memory_mib} est={p.memory_estimated}")
            elif rp.get("memory_mib") is not None:
                if (p.memory_mib, p.memory_estimated) != (rp["memory_mib"], False):
                    errors.append(f"{where}: {p.memory_mib} est={p.memory_estimated}, "
                                  f"research {rp['memory_mib']}")
            else:
                estimated += 1
                nominal = rp["memory_gb_nominal"] * 1024
                if not p.memory_estimated:
                    errors.append(f"{where}: missing in research but not memory_estimated")
                if not 0 < p.memory_mib < nominal:
                    errors.append(f"{where}: estimate {p.memory_mib} not in (0, {nominal})")
    assert estimated > 0, "the research file is expected to have profiles without MiB"
    assert not errors, "\n".join(errors)


# --- resolve --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name", ["A100-40GB", "H100-80GB", "H200-141GB", "A30-24GB", "RTX-PRO-6000-96GB"]
)
def test_resolve_by_canonical_id(shipped: Catalog, name: str) -> None:
    assert model_of(shipped, name).id == name
    assert model_of(shipped, name.lower()).id == name
    assert model_of(shipped, f"NVIDIA {name}").id == name


@pytest.mark.parametrize(
    ("name", "model_id"),
    [
        ("NVIDIA A100-SXM4-40GB", "A100-40GB"),
        ("A100-SXM4-40GB", "A100-40GB"),
        ("NVIDIA A100-PCIE-40GB", "A100-40GB"),
        ("NVIDIA H200", "H200-141GB"),
        ("NVIDIA H200 NVL", "H200-141GB"),
        ("NVIDIA H100 NVL", "H100-94GB"),
        ("NVIDIA H100 80GB HBM3", "H100-80GB"),
        ("NVIDIA A30", "A30-24GB"),
        ("nvidia a100-sxm4-80gb", "A100-80GB"),
        ("NVIDIA A100 80GB PCIe", "A100-80GB"),
        ("  NVIDIA   GH200 480GB ", "GH200-96GB"),
        ("NVIDIA RTX PRO 6000 Blackwell Server Edition", "RTX-PRO-6000-96GB"),
        ("nvidia rtx pro 6000 blackwell max-q workstation edition", "RTX-PRO-6000-96GB"),
    ],
)
def test_resolve_by_nvml_alias(shipped: Catalog, name: str, model_id: str) -> None:
    assert model_of(shipped, name).id == model_id


@pytest.mark.parametrize("name", ["NVIDIA L40S", "A100-40", "", "Tesla V100-SXM2-16GB", "H2"])
def test_resolve_unknown_is_none(shipped: Catalog, name: str) -> None:
    assert shipped.resolve(name) is None


@pytest.mark.parametrize("name", ["H100", "NVIDIA H100", "A100", "GH200"])
def test_resolve_ambiguous_short_name_is_none(shipped: Catalog, name: str) -> None:
    assert shipped.resolve(name) is None


@pytest.mark.parametrize(("name", "model_id"), [("B200", "B200-180GB"), ("A30", "A30-24GB")])
def test_resolve_unique_short_name(shipped: Catalog, name: str, model_id: str) -> None:
    assert model_of(shipped, name).id == model_id


def test_catalog_iterates_sorted_and_has_a_length(shipped: Catalog) -> None:
    ids = [m.id for m in shipped]
    assert ids == sorted(ids)
    assert len(shipped) == len(ids) == len(shipped.models)


# --- profiles -------------------------------------------------------------------------------


def test_profiles_are_keyed_by_model_and_name(shipped: Catalog) -> None:
    h100 = model_of(shipped, "H100-94GB").profile("1g.24gb")
    rtx = model_of(shipped, "RTX-PRO-6000-96GB").profile("1g.24gb")
    assert h100 is not None and rtx is not None
    assert h100.memory_slices == 2 and h100.compute_slices == 1
    assert h100.placement is not None and h100.placement.size == 2
    assert h100.placement.starts == (0, 2, 4, 6)
    assert h100.double_memory_1g
    assert rtx.memory_slices == 1
    assert rtx.placement is not None and rtx.placement.size == 3
    assert rtx.placement.starts == (0, 3, 6, 9)
    assert not rtx.double_memory_1g
    assert h100 != rtx
    assert model_of(shipped, "A100-40GB").profile("1g.24gb") is None


@pytest.mark.parametrize(
    "model_id", ["A30-24GB", "A100-40GB", "H100-94GB", "RTX-PRO-6000-96GB", "RTX-PRO-5000-48GB"]
)
def test_whole_card_profile(shipped: Catalog, model_id: str) -> None:
    model = model_of(shipped, model_id)
    whole = model.profile(WHOLE_GPU)
    assert whole is not None
    assert whole.whole_gpu and whole.name == WHOLE_GPU
    assert whole.max_count == 1 and whole.placement is None
    assert whole.memory_mib >= max(p.memory_mib for p in model.profiles)
    assert (whole.compute_slices, whole.memory_slices) == (
        model.compute_slices, model.memory_slices
    )
    assert all(not p.whole_gpu for p in model.profiles)


def test_every_shipped_model_has_whole_memory_at_least_its_largest_profile(
    shipped: Catalog,
) -> None:
    for model in shipped:
        assert model.whole.memory_mib >= max(p.memory_mib for p in model.profiles), model.id


def test_unknown_profile_is_none(shipped: Catalog) -> None:
    assert model_of(shipped, "A100-40GB").profile("1g.6gb") is None


@pytest.mark.parametrize(("model_id", "one", "two"), [
    ("RTX-PRO-5000-48GB", "1g.24gb", "2g.48gb"), ("RTX-PRO-4500-32GB", "1g.16gb", "2g.32gb"),
])
def test_small_rtx_pro_placements_are_derived_from_instance_counts(
    shipped: Catalog, model_id: str, one: str, two: str
) -> None:
    """NVIDIA lists 1g x 2 (half the memory each) and 2g x 1: the two 1g places are disjoint
    and together are the 2g place, on RTX PRO 6000's grid of 3 units per compute slice."""
    model = model_of(shipped, model_id)
    assert model.placements_known and model.placement_units == 6
    small, big = model.profile(one), model.profile(two)
    assert small is not None and small.placement is not None and small.max_count == 2
    assert big is not None and big.placement is not None and big.max_count == 1
    assert (small.placement.starts, small.placement.size) == ((0, 3), 3)
    assert (big.placement.starts, big.placement.size) == ((0,), 6)
    for p in model.profiles:
        base = model.profile(p.variant_of or p.name)
        assert base is not None and p.placement == base.placement


def test_placements_known_everywhere(shipped: Catalog) -> None:
    assert [m.id for m in shipped if not m.placements_known] == []


def test_variants_point_at_a_base_profile_with_the_same_geometry(shipped: Catalog) -> None:
    for model in shipped:
        for p in model.profiles:
            if p.is_base:
                continue
            assert p.variant_of is not None
            base = model.profile(p.variant_of)
            assert base is not None and base.is_base, (model.id, p.name)
            assert (p.compute_slices, p.memory_slices, p.placement) == (
                base.compute_slices, base.memory_slices, base.placement
            ), (model.id, p.name)


def test_shipped_models_are_not_overridden(shipped: Catalog) -> None:
    assert not any(m.overridden for m in shipped)


# --- overrides ------------------------------------------------------------------------------


def test_override_replaces_profile_mib(tmp_path: Path, shipped: Catalog) -> None:
    path = write_override(tmp_path, {"gpus": [
        {"id": "A100-40GB", "profiles": [{"name": "2g.10gb", "memory_mib": 9984}]},
    ]})
    catalog = load_catalog(path)
    model = model_of(catalog, "A100-40GB")
    p = model.profile("2g.10gb")
    assert p is not None
    assert p.memory_mib == 9984
    assert p.memory_estimated is False
    assert model.overridden is True
    # The rest of the profile and model is unchanged.
    before = model_of(shipped, "A100-40GB")
    old = before.profile("2g.10gb")
    assert old is not None and old.memory_mib == 9856
    assert (p.placement, p.max_count, p.compute_slices) == (
        old.placement, old.max_count, old.compute_slices
    )
    assert [q for q in model.profiles if q.name != "2g.10gb"] == [
        q for q in before.profiles if q.name != "2g.10gb"
    ]
    assert model.aliases == before.aliases
    # Other models are not touched, and the shipped catalog is not mutated.
    assert not model_of(catalog, "A100-80GB").overridden
    assert model_of(load_catalog(), "A100-40GB").profile("2g.10gb") == old


def test_override_mib_clears_memory_estimated(tmp_path: Path, shipped: Catalog) -> None:
    before = model_of(shipped, "B200-180GB").profile("3g.90gb")
    assert before is not None and before.memory_estimated
    path = write_override(tmp_path, {"gpus": [
        {"id": "NVIDIA B200", "profiles": [{"name": "3g.90gb", "memory_mib": 90112}]},
    ]})
    p = model_of(load_catalog(path), "B200-180GB").profile("3g.90gb")
    assert p is not None
    assert (p.memory_mib, p.memory_estimated) == (90112, False)


def test_override_adds_alias(tmp_path: Path, shipped: Catalog) -> None:
    path = write_override(tmp_path, {"gpus": [
        {"id": "a100-40gb", "aliases": ["NVIDIA A100-SXM4-40GB-CUSTOM"]},
    ]})
    catalog = load_catalog(path)
    model = model_of(catalog, "nvidia a100-sxm4-40gb-custom")
    assert model.id == "A100-40GB"
    assert model.overridden
    assert set(model_of(shipped, "A100-40GB").aliases) < set(model.aliases)
    assert model_of(catalog, "NVIDIA A100-SXM4-40GB").id == "A100-40GB"
    assert shipped.resolve("NVIDIA A100-SXM4-40GB-CUSTOM") is None


NEW_MODEL: dict[str, Any] = {
    "id": "X1-16GB",
    "aliases": ["NVIDIA X1 16GB"],
    "description": "made-up test card",
    "compute_slices": 2,
    "memory_slices": 2,
    "placement_units": 2,
    "profiles": [
        {"name": "1g.8gb", "compute_slices": 1, "memory_slices": 1, "memory_mib": 7936,
         "max_count": 2, "placements": {"starts": [1, 0], "size": 1}},
        {"name": "2g.16gb", "compute_slices": 2, "memory_slices": 2, "memory_mib": 15872,
         "max_count": 1, "placements": {"starts": [0], "size": 2}},
    ],
}


def test_override_adds_a_new_model(tmp_path: Path, shipped: Catalog) -> None:
    catalog = load_catalog(write_override(tmp_path, {"gpus": [NEW_MODEL]}))
    assert len(catalog) == len(shipped) + 1
    model = model_of(catalog, "NVIDIA X1 16GB")
    assert model is model_of(catalog, "x1-16gb")
    assert model.id == "X1-16GB" and model.overridden
    assert model.placements_known
    p = model.profile("1g.8gb")
    assert p is not None and p.placement is not None
    assert p.placement.starts == (0, 1) and p.placement.size == 1
    assert (p.memory_mib, p.memory_estimated, p.max_count) == (7936, False, 2)
    assert model.whole.memory_mib >= 15872
    assert shipped.resolve("X1-16GB") is None


def test_override_new_model_states_whole_card_memory(tmp_path: Path) -> None:
    entry = {**NEW_MODEL, "memory_mib": 16384}
    catalog = load_catalog(write_override(tmp_path, {"gpus": [entry]}))
    assert model_of(catalog, "X1-16GB").whole.memory_mib == 16384


def test_override_adds_a_profile_to_an_existing_model(tmp_path: Path) -> None:
    path = write_override(tmp_path, {"gpus": [{"id": "A30-24GB", "profiles": [
        {"name": "1g.6gb+gfx", "compute_slices": 1, "memory_slices": 1, "memory_mib": 5952,
         "max_count": 4, "placements": {"starts": [0, 1, 2, 3], "size": 1},
         "variant_of": "1g.6gb"},
    ]}]})
    model = model_of(load_catalog(path), "A30-24GB")
    p = model.profile("1g.6gb+gfx")
    assert p is not None and p.variant_of == "1g.6gb" and not p.is_base
    assert model.profile("1g.6gb") is not None


def test_empty_override_changes_nothing(tmp_path: Path, shipped: Catalog) -> None:
    catalog = load_catalog(write_override(tmp_path, {"gpus": []}))
    assert catalog.models == shipped.models


def _raises(tmp_path: Path, content: Any, *parts: str, raw: str | None = None) -> str:
    with pytest.raises(CatalogError) as exc:
        load_catalog(write_override(tmp_path, content, raw=raw))
    message = str(exc.value)
    for part in parts:
        assert part in message, f"{part!r} not in {message!r}"
    return message


def test_malformed_negative_mib(tmp_path: Path) -> None:
    _raises(tmp_path, {"gpus": [
        {"id": "A100-40GB", "profiles": [{"name": "2g.10gb", "memory_mib": -1}]},
    ]}, "gpus[0]", "profiles[0]", "memory_mib")


@pytest.mark.parametrize("bad", [0, -9984, "9984", 9984.0, True, None])
def test_malformed_mib_values(tmp_path: Path, bad: Any) -> None:
    _raises(tmp_path, {"gpus": [
        {"id": "A100-40GB"},
        {"id": "A30-24GB", "profiles": [{"name": "1g.6gb"}, {"name": "2g.12gb",
                                                             "memory_mib": bad}]},
    ]}, "gpus[1]", "profiles[1]", "memory_mib")


def test_malformed_new_model_without_profiles(tmp_path: Path) -> None:
    entry = {k: v for k, v in NEW_MODEL.items() if k != "profiles"}
    _raises(tmp_path, {"gpus": [entry]}, "gpus[0]", "profiles")


def test_malformed_new_model_with_empty_profiles(tmp_path: Path) -> None:
    _raises(tmp_path, {"gpus": [{**NEW_MODEL, "profiles": []}]}, "gpus[0]", "profiles")


def test_malformed_placement_past_units_in_new_model(tmp_path: Path) -> None:
    profiles = [dict(NEW_MODEL["profiles"][0]), NEW_MODEL["profiles"][1]]
    profiles[0]["placements"] = {"starts": [0, 1, 2], "size": 1}
    _raises(tmp_path, {"gpus": [{**NEW_MODEL, "profiles": profiles}]},
            "gpus[0]", "profiles[0]", "placements")


def test_malformed_placement_past_units_in_patch(tmp_path: Path) -> None:
    _raises(tmp_path, {"gpus": [{"id": "A100-40GB", "profiles": [
        {"name": "3g.20gb", "placements": {"starts": [0, 6], "size": 4}},
    ]}]}, "gpus[0]", "profiles[0]", "placements")


def test_malformed_invalid_json(tmp_path: Path) -> None:
    _raises(tmp_path, None, "override.json", "JSON", raw='{"gpus": [')


def test_malformed_unknown_key_in_profile_patch(tmp_path: Path) -> None:
    _raises(tmp_path, {"gpus": [{"id": "A100-40GB", "profiles": [
        {"name": "2g.10gb", "memory_mb": 9984},
    ]}]}, "gpus[0]", "profiles[0]", "memory_mb")


def test_malformed_missing_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.json"
    with pytest.raises(CatalogError) as exc:
        load_catalog(missing)
    assert str(missing) in str(exc.value)


@pytest.mark.parametrize("content", [[], {"gpus": {}}, {"gpu": []}, "gpus"])
def test_malformed_top_level(tmp_path: Path, content: Any) -> None:
    _raises(tmp_path, content, "gpus")


def test_malformed_entry_without_id(tmp_path: Path) -> None:
    _raises(tmp_path, {"gpus": [{"aliases": ["x"]}]}, "gpus[0]", "id")


def test_malformed_aliases(tmp_path: Path) -> None:
    _raises(tmp_path, {"gpus": [{"id": "A30-24GB", "aliases": "NVIDIA A30X"}]},
            "gpus[0]", "aliases")


def test_malformed_profile_name(tmp_path: Path) -> None:
    profiles = [{**NEW_MODEL["profiles"][0], "name": "one-g"}]
    _raises(tmp_path, {"gpus": [{**NEW_MODEL, "profiles": profiles}]},
            "gpus[0]", "profiles[0]", "name")


def test_malformed_duplicate_profile_names(tmp_path: Path) -> None:
    p = NEW_MODEL["profiles"][0]
    _raises(tmp_path, {"gpus": [{**NEW_MODEL, "profiles": [p, p]}]}, "gpus[0]", "duplicate")


def test_two_entries_for_one_model_both_apply_or_are_refused(tmp_path: Path) -> None:
    path = write_override(tmp_path, {"gpus": [
        {"id": "A100-40GB", "aliases": ["MY-A100"]},
        {"id": "NVIDIA A100-SXM4-40GB", "profiles": [{"name": "2g.10gb", "memory_mib": 9984}]},
    ]})
    try:
        catalog = load_catalog(path)
    except CatalogError:
        return  # refusing the duplicate entry is fine too
    model = model_of(catalog, "A100-40GB")
    p = model.profile("2g.10gb")
    assert p is not None and p.memory_mib == 9984
    assert catalog.resolve("MY-A100") is model


def test_unknown_key_in_model_patch_is_refused(tmp_path: Path) -> None:
    _raises(tmp_path, {"gpus": [{"id": "A100-40GB", "alias": ["MY-A100"]}]},
            "gpus[0]", "alias")


def test_alias_taken_by_another_model_is_refused(tmp_path: Path) -> None:
    _raises(tmp_path, {"gpus": [{"id": "H200-141GB", "aliases": ["NVIDIA A100-SXM4-40GB"]}]},
            "gpus[0]", "aliases")
