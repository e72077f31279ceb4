"""Regenerate recommender/data/gpu_catalog.json from the research file in ../shared/reference.

The research file is descriptive (free-text model names, missing MiB on newer cards); the catalog
we ship is clean: canonical ids, NVML aliases, MiB on every profile (derived ones marked
`memory_estimated`), placements or an explicit null. Run it when the research file changes:

    python tools/build_catalog.py ../shared/reference/mig_profiles.json
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

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


def convert(src: dict) -> dict:
    gpus = []
    for g in src["gpus"]:
        cid = canonical_id(g["model"])
        nominal_mib = g["memory_gb"] * 1024
        mslices = g["memory_slices"]
        known = [
            p["memory_mib"] / (nominal_mib * p["memory_slices"] / mslices)
            for p in g["profiles"]
            if p.get("memory_mib")
        ]
        ratio = min(known) if known else FALLBACK_USABLE_RATIO
        profiles = []
        for p in g["profiles"]:
            estimated = not p.get("memory_mib")
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
        })
    return {
        "source": "../shared/reference/mig_profiles.json (see its per-entry sources)",
        "gpus": gpus,
    }


def main() -> None:
    src = Path(sys.argv[1] if len(sys.argv) > 1 else "../shared/reference/mig_profiles.json")
    out = Path(__file__).parent.parent / "recommender" / "data" / "gpu_catalog.json"
    out.write_text(json.dumps(convert(json.loads(src.read_text())), indent=1) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
