"""Profile aliases: the spellings drivers give a profile, in the shipped data and overrides."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from recommender.core.catalog import Catalog, CatalogError, load_catalog


def override(tmp_path: Path, gpus: list[dict[str, Any]]) -> Path:
    path = tmp_path / "override.json"
    path.write_text(json.dumps({"gpus": gpus}))
    return path


@pytest.mark.parametrize(("model_id", "spelling", "name"), [
    ("A100-80GB", "3g.39gb", "3g.40gb"),
    ("A100-80GB", "7g.79gb", "7g.80gb"),
    ("A100-80GB", " 3G.39GB ", "3g.40gb"),
    ("A800-80GB", "7g.79gb", "7g.80gb"),
    ("GB200-186GB", "1g.24gb", "1g.23gb"),
    ("GB200-186GB", "1g.24gb+me", "1g.23gb+me"),
    ("GB200-186GB", "7g.189gb", "7g.186gb"),
])
def test_a_spelling_finds_the_catalog_profile(
    catalog: Catalog, model_id: str, spelling: str, name: str
) -> None:
    model = catalog.models[model_id]
    assert model.profile(spelling) is model.profile(name)


def test_spellings_are_per_model(catalog: Catalog) -> None:
    """1g.24gb is GB200's early 1g name, but a profile of its own on H100 NVL."""
    assert catalog.models["A100-40GB"].profile("3g.39gb") is None
    h100 = catalog.models["H100-94GB"].profile("1g.24gb")
    assert h100 is not None and h100.name == "1g.24gb" and h100.memory_slices == 2


def test_no_shipped_spelling_names_two_profiles(catalog: Catalog) -> None:
    for model in catalog:
        names = [n for p in model.profiles for n in (p.name, *p.aliases)]
        assert len(names) == len(set(names)), model.id


def test_override_adds_an_alias_to_a_profile(tmp_path: Path) -> None:
    path = override(tmp_path, [{"id": "H100-80GB", "profiles": [
        {"name": "7g.80gb", "aliases": ["7g.79gb"]}]}])
    model = load_catalog(path).models["H100-80GB"]
    p = model.profile("7g.79gb")
    assert p is not None and p.name == "7g.80gb" and p.aliases == ("7g.79gb",)
    assert model.overridden


def test_override_keeps_shipped_aliases(tmp_path: Path) -> None:
    path = override(tmp_path, [{"id": "A100-80GB", "profiles": [
        {"name": "3g.40gb", "aliases": ["3g.38gb"]}]}])
    p = load_catalog(path).models["A100-80GB"].profile("3g.40gb")
    assert p is not None and p.aliases == ("3g.39gb", "3g.38gb")


def test_new_model_in_override_may_carry_profile_aliases(tmp_path: Path) -> None:
    path = override(tmp_path, [{
        "id": "X1-16GB", "compute_slices": 2, "memory_slices": 2, "placement_units": 2,
        "profiles": [
            {"name": "1g.8gb", "aliases": ["1g.7gb"], "compute_slices": 1, "memory_slices": 1,
             "memory_mib": 7936, "max_count": 2, "placements": {"starts": [0, 1], "size": 1}},
            {"name": "2g.16gb", "compute_slices": 2, "memory_slices": 2, "memory_mib": 15872,
             "max_count": 1, "placements": {"starts": [0], "size": 2}}]}])
    p = load_catalog(path).models["X1-16GB"].profile("1g.7gb")
    assert p is not None and p.name == "1g.8gb"


@pytest.mark.parametrize(("patch", "message"), [
    ({"name": "3g.40gb", "aliases": ["4g.40gb"]},
     "gpus[0].profiles: '4g.40gb' would name both 3g.40gb and 4g.40gb"),
    ({"name": "1g.10gb", "aliases": ["3g.39gb"]},
     "gpus[0].profiles: '3g.39gb' would name both"),
    ({"name": "3g.40gb", "aliases": ["three"]},
     "gpus[0].profiles[0].aliases[0]: 'three' is not a MIG profile name"),
    ({"name": "3g.40gb", "aliases": "3g.39gb"},
     "gpus[0].profiles[0].aliases: must be a list of profile names"),
])
def test_bad_aliases_are_refused_with_their_path(
    tmp_path: Path, patch: dict[str, Any], message: str
) -> None:
    path = override(tmp_path, [{"id": "A100-80GB", "profiles": [patch]}])
    with pytest.raises(CatalogError) as err:
        load_catalog(path)
    assert message in str(err.value) and str(path) in str(err.value)
