"""Published MIG geometries must place on one empty GPU of every model they are meant for.

The cases are NVIDIA's default mig-parted configuration (`deployments/systemd/config-default.yaml`
at commit 1400787, the same configurations as gpu-operator's default-mig-parted-config), written
out here by hand from its `mig-devices` and the models its device filters and comments name:
each named configuration, per model. GB200 appears under the early driver's names (1g.24gb,
3g.95gb, ...), which the catalog accepts as aliases. B300 and GB300 come from the newer
configuration quoted in the research notes (mig_profiles.json). The RTX PRO 5000 and 4500 cases
are NVIDIA's MIG guide instance counts, which the derived placement tables must honour.

Each geometry is a full or maximal one, so one more instance of its first profile must not fit:
the test would fail if the placement search (or the catalog) were too permissive.
"""

from __future__ import annotations

import pytest

from recommender.core.catalog import Catalog, GpuModel, MigProfile
from recommender.core.placement import GpuState, place

A100_40 = ("A100-40GB", "A800-40GB")
A100_80 = ("A100-80GB", "A800-80GB", "H100-80GB", "H800-80GB")
H100_NVL = ("H100-94GB", "H800-94GB")
H100_96 = ("GH200-96GB", "H20-96GB")
RTX6000 = ("RTX-PRO-6000-96GB",)
A30 = ("A30-24GB",)
H200 = ("H200-141GB",)
GH200_144 = ("GH200-144GB",)
B200 = ("B200-180GB",)
GB200 = ("GB200-186GB",)
B300 = ("B300-269GB",)
GB300 = ("GB300-278GB",)

Geometry = dict[str, int]
# configuration name -> [(models, mig-devices)]
MIG_PARTED: dict[str, list[tuple[tuple[str, ...], Geometry]]] = {
    "all-1g.5gb": [(A100_40, {"1g.5gb": 7})],
    "all-1g.5gb.me": [(A100_40, {"1g.5gb+me": 1})],
    "all-2g.10gb": [(A100_40, {"2g.10gb": 3})],
    "all-3g.20gb": [(A100_40, {"3g.20gb": 2})],
    "all-4g.20gb": [(A100_40, {"4g.20gb": 1})],
    "all-7g.40gb": [(A100_40, {"7g.40gb": 1})],
    "all-1g.24gb.gfx": [(RTX6000, {"1g.24gb+gfx": 4})],
    "all-1g.24gb.me.all": [(RTX6000, {"1g.24gb+me.all": 1})],
    "all-1g.24gb-me": [(RTX6000, {"1g.24gb-me": 4})],
    "all-2g.48gb": [(RTX6000, {"2g.48gb": 2})],
    "all-2g.48gb.gfx": [(RTX6000, {"2g.48gb+gfx": 2})],
    "all-2g.48gb.me.all": [(RTX6000, {"2g.48gb+me.all": 1})],
    "all-2g.48gb-me": [(RTX6000, {"2g.48gb-me": 2})],
    "all-4g.96gb": [(RTX6000, {"4g.96gb": 1})],
    "all-4g.96gb.gfx": [(RTX6000, {"4g.96gb+gfx": 1})],
    "all-1g.10gb": [(A100_80, {"1g.10gb": 7}), (A100_40, {"1g.10gb": 4})],
    "all-1g.10gb.me": [(A100_80, {"1g.10gb+me": 1})],
    "all-1g.20gb": [(A100_80, {"1g.20gb": 4})],
    "all-2g.20gb": [(A100_80, {"2g.20gb": 3})],
    "all-3g.40gb": [(A100_80, {"3g.40gb": 2})],
    "all-4g.40gb": [(A100_80, {"4g.40gb": 1})],
    "all-7g.80gb": [(A100_80, {"7g.80gb": 1})],
    "all-1g.6gb": [(A30, {"1g.6gb": 4})],
    "all-1g.6gb.me": [(A30, {"1g.6gb+me": 1})],
    "all-2g.12gb": [(A30, {"2g.12gb": 2})],
    "all-2g.12gb.me": [(A30, {"2g.12gb+me": 1})],
    "all-4g.24gb": [(A30, {"4g.24gb": 1})],
    "all-1g.12gb": [(H100_NVL + H100_96, {"1g.12gb": 7})],
    "all-1g.12gb.me": [(H100_NVL + H100_96, {"1g.12gb+me": 1})],
    "all-1g.24gb": [(GB200, {"1g.24gb": 7}), (H100_NVL + RTX6000, {"1g.24gb": 4})],
    "all-2g.24gb": [(H100_NVL + H100_96, {"2g.24gb": 3})],
    "all-3g.47gb": [(H100_NVL, {"3g.47gb": 2})],
    "all-4g.47gb": [(H100_NVL, {"4g.47gb": 1})],
    "all-7g.94gb": [(H100_NVL, {"7g.94gb": 1})],
    "all-3g.48gb": [(H100_96, {"3g.48gb": 2})],
    "all-4g.48gb": [(H100_96, {"4g.48gb": 1})],
    "all-7g.96gb": [(H100_96, {"7g.96gb": 1})],
    "all-balanced": [
        (GB200, {"1g.24gb": 2, "2g.47gb": 1, "3g.95gb": 1}),
        (RTX6000, {"1g.24gb": 2, "2g.48gb": 1}),
        (B200, {"1g.23gb": 2, "2g.45gb": 1, "3g.90gb": 1}),
        (GH200_144, {"1g.18gb": 2, "2g.36gb": 1, "3g.72gb": 1}),
        (H200, {"1g.18gb": 2, "2g.35gb": 1, "3g.71gb": 1}),
        (H100_NVL, {"1g.12gb": 2, "2g.24gb": 1, "3g.47gb": 1}),
        (A100_80, {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}),
        (A100_40, {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1}),
        (A30, {"1g.6gb": 2, "2g.12gb": 1}),
        (H100_96, {"1g.12gb": 2, "2g.24gb": 1, "3g.48gb": 1}),
        (B300, {"1g.34gb": 2, "2g.67gb": 1, "3g.135gb": 1}),
        (GB300, {"1g.35gb": 2, "2g.70gb": 1, "3g.139gb": 1}),
    ],
    "all-1g.18gb": [(H200 + GH200_144, {"1g.18gb": 7})],
    "all-1g.18gb.me": [(H200 + GH200_144, {"1g.18gb+me": 1})],
    "all-1g.23gb": [(B200, {"1g.23gb": 7})],
    "all-1g.23gb.me": [(B200, {"1g.23gb+me": 1})],
    "all-1g.35gb": [(H200, {"1g.35gb": 4}), (GB300, {"1g.35gb": 7})],
    "all-2g.35gb": [(H200, {"2g.35gb": 3})],
    "all-3g.71gb": [(H200, {"3g.71gb": 2})],
    "all-4g.71gb": [(H200, {"4g.71gb": 1})],
    "all-7g.141gb": [(H200, {"7g.141gb": 1})],
    "all-1g.36gb": [(GH200_144, {"1g.36gb": 4})],
    "all-1g.45gb": [(B200, {"1g.45gb": 4})],
    "all-1g.47gb": [(GB200, {"1g.47gb": 4})],
    "all-2g.36gb": [(GH200_144, {"2g.36gb": 3})],
    "all-2g.45gb": [(B200, {"2g.45gb": 3})],
    "all-2g.47gb": [(GB200, {"2g.47gb": 3})],
    "all-3g.72gb": [(GH200_144, {"3g.72gb": 2})],
    "all-3g.90gb": [(B200, {"3g.90gb": 2})],
    "all-3g.95gb": [(GB200, {"3g.95gb": 2})],
    "all-4g.72gb": [(GH200_144, {"4g.72gb": 1})],
    "all-4g.90gb": [(B200, {"4g.90gb": 1})],
    "all-4g.95gb": [(GB200, {"4g.95gb": 1})],
    "all-7g.144gb": [(GH200_144, {"7g.144gb": 1})],
    "all-7g.180gb": [(B200, {"7g.180gb": 1})],
    "all-7g.189gb": [(GB200, {"7g.189gb": 1})],
}

# NVIDIA MIG guide, Supported MIG Profiles: instance counts of the small RTX PRO cards.
MIG_GUIDE: dict[str, list[tuple[tuple[str, ...], Geometry]]] = {
    "1g x 2": [(("RTX-PRO-5000-48GB",), {"1g.24gb": 2}),
               (("RTX-PRO-4500-32GB",), {"1g.16gb": 2})],
    "2g x 1": [(("RTX-PRO-5000-48GB",), {"2g.48gb": 1}),
               (("RTX-PRO-4500-32GB",), {"2g.32gb": 1})],
    "variants x max": [(("RTX-PRO-5000-48GB",), {"1g.24gb+gfx": 2}),
                       (("RTX-PRO-5000-48GB",), {"1g.24gb-me": 2}),
                       (("RTX-PRO-5000-48GB",), {"1g.24gb+me": 1, "1g.24gb": 1}),
                       (("RTX-PRO-4500-32GB",), {"1g.16gb-me": 2}),
                       (("RTX-PRO-4500-32GB",), {"2g.32gb+gfx": 1})],
}

CASES = [
    pytest.param(model_id, geometry, id=f"{name}-{model_id}")
    for table in (MIG_PARTED, MIG_GUIDE)
    for name, entries in table.items()
    for models, geometry in entries
    for model_id in models
]


def _requests(model: GpuModel, geometry: Geometry) -> list[MigProfile]:
    out = []
    for name, count in geometry.items():
        profile = model.profile(name)
        assert profile is not None, f"{model.id} does not know {name!r}"
        out += [profile] * count
    return out


@pytest.mark.parametrize(("model_id", "geometry"), CASES)
def test_published_geometry_fills_one_empty_gpu(
    catalog: Catalog, model_id: str, geometry: Geometry
) -> None:
    model = catalog.models[model_id]
    requests = _requests(model, geometry)
    found = place(model, requests, [GpuState("GPU-0")])
    assert found is not None, f"{geometry} does not place on an empty {model_id}"
    assert len(found.assignments) == len(requests) and found.gpus_used == (0,)
    # One more of the first profile does not fit on that GPU ...
    first = requests[0]
    assert place(model, [*requests, first], [GpuState("GPU-0")]) is None
    # ... but does on a second one: the search splits the instances across the node's GPUs.
    two = place(model, [*requests, first], [GpuState("GPU-0"), GpuState("GPU-1")])
    assert two is not None and two.gpus_used == (0, 1)


def test_every_published_model_is_covered(catalog: Catalog) -> None:
    """Every model whose placements come from a real -lgipp, an inference or a derivation has
    at least one published geometry here (a new model must bring its cases)."""
    covered = {model_id for param in CASES for model_id in param.values[:1]}
    assert covered == set(catalog.models)
