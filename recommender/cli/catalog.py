"""`recommender catalog`: the GPU models and profiles in force, and `catalog check FILE` to
validate an override file before an operator deploys it.

`check` loads the file exactly as `serve` does at start (`load_catalog`), so a bad file fails
with the very message the server would give (`catalog error: <path>: gpus[0]...`, printed by
the command line's one handler) and exit code 2; a good one prints what it changes and exits 0.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from recommender.core.catalog import Catalog, GpuModel, MigProfile, load_catalog


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Registers `catalog` (and `catalog check FILE`) on the top-level parser."""
    p = subparsers.add_parser(
        "catalog", help="list GPU models and MIG profiles; `catalog check FILE` validates an "
        "override file",
        description="The catalog in force: every GPU model with its NVML names, and its MIG "
        "profiles with their driver spellings, MiB (* = estimated), maximum count and "
        "placements. With `check FILE`, validate a catalog override file the way `serve` "
        "does at start (exit 0 when fine, 2 with the error).")
    p.add_argument("--json", action="store_true", help="a JSON list of models")
    p.add_argument("--catalog-override", default=None,
                   help="apply this override file (env RECOMMENDER_CATALOG_OVERRIDE)")
    p.add_argument("--model", default=None,
                   help="only this GPU model (canonical id or NVML name)")
    sub = p.add_subparsers(dest="catalog_command")
    check = sub.add_parser("check", help="validate a catalog override file",
                           description="Loads FILE on top of the shipped catalog as `serve "
                           "--catalog-override FILE` would; exit 0 when fine, 2 with the "
                           "message the server gives at start when not.")
    check.add_argument("file", metavar="FILE")
    p.set_defaults(fn=run)


def run(args: argparse.Namespace) -> int:
    """Raises CatalogError for a bad override; the command line prints it and exits 2."""
    if getattr(args, "catalog_command", None) == "check":
        return _check(args.file)
    catalog = load_catalog(args.catalog_override or os.environ.get("RECOMMENDER_CATALOG_OVERRIDE"))
    models = list(catalog)
    if args.model:
        found = catalog.resolve(args.model)
        if found is None:
            known = ", ".join(m.id for m in catalog)
            print(f"--model: unknown GPU model {args.model!r} (known: {known})",
                  file=sys.stderr)
            return 2
        models = [found]
    if args.json:
        print(json.dumps([model_to_json(m) for m in models], indent=1))
    else:
        print(format_table(models))
    return 0


def _check(path: str) -> int:
    shipped = load_catalog()
    catalog = load_catalog(path)  # CatalogError propagates: the same message as at start
    print(f"{path}: ok; {describe_changes(shipped, catalog)}")
    return 0


def describe_changes(shipped: Catalog, catalog: Catalog) -> str:
    added = sorted(set(catalog.models) - set(shipped.models))
    changed = sorted(k for k in shipped.models if catalog.models[k] != shipped.models[k])
    parts = []
    if added:
        parts.append("adds " + ", ".join(added))
    if changed:
        parts.append("changes " + ", ".join(changed))
    return "; ".join(parts) if parts else "changes nothing"


def _profile_json(p: MigProfile) -> dict[str, Any]:
    return {
        "name": p.name,
        "aliases": list(p.aliases),
        "compute_slices": p.compute_slices,
        "memory_slices": p.memory_slices,
        "memory_mib": p.memory_mib,
        "memory_estimated": p.memory_estimated,
        "max_count": p.max_count,
        "placements": {"starts": list(p.placement.starts), "size": p.placement.size}
        if p.placement else None,
        "variant_of": p.variant_of,
    }


def model_to_json(m: GpuModel) -> dict[str, Any]:
    return {
        "id": m.id,
        "aliases": list(m.aliases),
        "description": m.description,
        "memory_mib": m.memory_mib,
        "compute_slices": m.compute_slices,
        "memory_slices": m.memory_slices,
        "placement_units": m.placement_units,
        "placements_known": m.placements_known,
        "overridden": m.overridden,
        "profiles": [_profile_json(p) for p in m.profiles],
        "sources": list(m.sources),
    }


def _placements(p: MigProfile) -> str:
    if p.placement is None:
        return "unknown"
    return "{" + ",".join(str(s) for s in p.placement.starts) + "}:" + str(p.placement.size)


def format_table(models: list[GpuModel]) -> str:
    """One block per model: a header line, then its profiles as aligned columns."""
    lines: list[str] = []
    header = ("profile", "spellings", "c/m", "MiB", "max", "placements")
    for m in models:
        flags = " (overridden)" if m.overridden else ""
        units = m.placement_units or "?"
        lines.append(f"{m.id}: {m.memory_mib:,} MiB, {m.compute_slices} compute / "
                     f"{m.memory_slices} memory slices, {units} placement units{flags}")
        if m.aliases:
            lines.append(f"  names: {', '.join(m.aliases)}")
        rows = [header] + [(
            p.name, ",".join(p.aliases) or "-", f"{p.compute_slices}/{p.memory_slices}",
            f"{p.memory_mib:,}{'*' if p.memory_estimated else ''}", str(p.max_count),
            _placements(p)) for p in m.profiles]
        widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
        for r in rows:
            lines.append("  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True))
                         .rstrip())
        lines.append("")
    lines.append("* estimated from the memory fraction or copied from a model with the same "
                 "table; override with what NVML reports on your nodes")
    return "\n".join(lines)
