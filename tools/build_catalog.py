"""Regenerate recommender/data/gpu_catalog.json from the research file in ../shared/reference
and our supplement (tools/catalog_supplement.json).

The research file is descriptive (free-text model names, missing MiB on newer cards) and shared,
so we never edit it; what we found on top (driver spellings of profiles, models NVIDIA's tooling
supports that it lacks, derived placement tables, production MiB) is in the supplement, each
fact with its source. The catalog we ship is clean: canonical ids, NVML aliases, MiB on every
profile (derived ones marked `memory_estimated`), placements or an explicit null. Run it when
either file changes:

    python tools/build_catalog.py ../shared/reference/mig_profiles.json
"""

from __future__ import annotations

import copy
import json
import re
import sys
from pathlib import Path
from typing import Any

SUPPLEMENT = Path(__file__).with_name("catalog_supplement.json")

CANONICAL = [
    (r"^A30-24GB", "A30-24GB"),
    (r"^A100-40GB", "A100-40GB"),
    (r"^A100-80GB", "A100-80GB"),
    (r"^H100-80GB", "H100-80GB"),
    (r"^H100-94GB", "H100-94GB"),
    (r"^GH200 144G", "GH200-144GB"),
    (r"^GH200 \(", "GH200-96GB"),
    (r"^H200-141GB", "H200-141GB"),
    (r"^B200", "B200-180GB"),
    (r"^GB200", "GB200-186GB"),
    (r"^B300", "B300-269GB"),
    (r"^GB300", "GB300-278GB"),
    (r"^RTX PRO 6000", "RTX-PRO-6000-96GB"),
    (r"^RTX PRO 5000", "RTX-PRO-5000-48GB"),
    (r"^RTX PRO 4500", "RTX-PRO-4500-32GB"),
]
EXTRA_ALIASES = {
    "RTX-PRO-6000-96GB": [
        "NVIDIA RTX PRO 6000 Blackwell Workstation Edition",
        "NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition",
    ],
}
# Where a card has no MiB at all, NVML's usable memory over the nominal figure is about this
# (the lowest ratio seen among cards with real values, so an estimate never overstates).
FALLBACK_USABLE_RATIO = 0.90


def canonical_id(model: str) -> str:
    for pattern, cid in CANONICAL:
        if re.search(pattern, model):
            return cid
    raise SystemExit(f"no canonical id for model {model!r}: add it to CANONICAL")


def clean_alias(alias: str) -> str:
    return re.sub(r"\s*\(.*\)\s*$", "", alias).strip()


def merge(src: dict[str, Any], supplement: dict[str, Any]) -> dict[str, Any]:
    """The research file with the supplement applied, still in the research file's format
    (plus an `id` on every model), so `convert` derives MiB from the merged facts."""
    out = copy.deepcopy(src)
    by_id: dict[str, dict[str, Any]] = {}
    for g in out["gpus"]:
        g["id"] = canonical_id(g["model"])
        by_id[g["id"]] = g
    for patch in supplement.get("amend", []):
        g = by_id.get(patch["id"])
        if g is None:
            raise SystemExit(f"supplement amends unknown model {patch['id']!r}")
        g["aliases"] = [*g.get("aliases", []), *patch.get("aliases", [])]
        g["sources"] = [*g.get("sources", []), *patch.get("sources", [])]
        g["notes"] = [*g.get("notes", []), *patch.get("notes", [])]
        if "placement_units" in patch:
            g["placement_units"] = patch["placement_units"]
        rules = patch.get("placements_by_compute_slices", {})
        profiles = {p["name"]: p for p in g["profiles"]}
        for p in g["profiles"]:
            rule = rules.get(str(p["compute_slices"]))
            if rule is not None:
                p["placements"] = {**rule, "inferred": True, "basis": "tools/catalog_supplement"
                                   ".json: derived from NVIDIA's instance counts (see notes)"}
        for pp in patch.get("profiles", []):
            p = profiles.get(pp["name"])
            if p is None:
                raise SystemExit(f"supplement amends unknown profile {patch['id']} {pp['name']}")
            p["aliases"] = [*p.get("aliases", []), *pp.get("aliases", [])]
            if "memory_mib" in pp:
                p["memory_mib"] = pp["memory_mib"]
                p["memory_mib_source"] = pp["memory_mib_source"]
    for new in supplement.get("gpus", []):
        if new["id"] in by_id:
            raise SystemExit(f"supplement adds {new['id']!r}, which the research file has")
        base = by_id[new["same_profiles_as"]]
        g = {k: v for k, v in new.items() if k != "same_profiles_as"}
        for key in ("compute_slices", "memory_slices", "placement_units"):
            g.setdefault(key, base.get(key))
        g["profiles"] = []
        for p in base["profiles"]:
            q = copy.deepcopy(p)
            q["memory_derived"] = True  # copied from the model it shares a table with
            g["profiles"].append(q)
        out["gpus"].append(g)
        by_id[g["id"]] = g
    return out


def convert(src: dict[str, Any]) -> dict[str, Any]:
    gpus = []
    for g in src["gpus"]:
        cid = g.get("id") or canonical_id(g["model"])
        nominal_mib = g["memory_gb"] * 1024
        mslices = g["memory_slices"]
        known = [
            p["memory_mib"] / (nominal_mib * p["memory_slices"] / mslices)
            for p in g["profiles"]
            if p.get("memory_mib") and not p.get("memory_derived")
        ]
        ratio = min(known) if known else FALLBACK_USABLE_RATIO
        profiles = []
        for p in g["profiles"]:
            estimated = bool(p.get("memory_derived")) or not p.get("memory_mib")
            mib = p.get("memory_mib") or int(nominal_mib * p["memory_slices"] / mslices * ratio)
            pl = p.get("placements")
            profiles.append({
                "name": p["name"],
                "compute_slices": p["compute_slices"],
                "memory_slices": p["memory_slices"],
                "memory_mib": int(mib),
                "memory_estimated": estimated,
                "max_count": p["max_count"],
                "placements": {"starts": pl["starts"], "size": pl["size"]} if pl else None,
                "variant_of": p.get("variant_of"),
                "aliases": sorted(set(p.get("aliases", []))),
            })
        aliases = [clean_alias(a) for a in g.get("aliases", [])] + EXTRA_ALIASES.get(cid, [])
        gpus.append({
            "id": cid,
            "description": g["model"],
            "aliases": sorted(set(aliases)),
            "memory_gb": g["memory_gb"],
            "compute_slices": g["compute_slices"],
            "memory_slices": mslices,
            "placement_units": g.get("placement_units"),
            "profiles": profiles,
            "sources": list(dict.fromkeys(g.get("sources", []))),
            "notes": list(dict.fromkeys(g.get("notes", []))),
        })
    return {
        "source": "../shared/reference/mig_profiles.json and tools/catalog_supplement.json "
                  "(see each model's sources)",
        "gpus": gpus,
    }


def build(src: dict[str, Any], supplement: dict[str, Any]) -> dict[str, Any]:
    return convert(merge(src, supplement))


def main() -> None:
    src = Path(sys.argv[1] if len(sys.argv) > 1 else "../shared/reference/mig_profiles.json")
    supplement = json.loads(SUPPLEMENT.read_text())
    out = Path(__file__).parent.parent / "recommender" / "data" / "gpu_catalog.json"
    out.write_text(json.dumps(build(json.loads(src.read_text()), supplement), indent=1) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
