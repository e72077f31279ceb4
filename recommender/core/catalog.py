"""GPU models and their MIG profiles: the facts every decision rests on.

The shipped catalog (`data/gpu_catalog.json`, built by `tools/build_catalog.py` from the research
notes) is a starting point: NVML reports MiB that vary by driver, so an operator can override a
profile's MiB, add aliases, or add a whole model from a JSON file. A malformed override is
refused at start with the path of the offending entry, because a wrong memory figure silently
turns into OOMs or waste later.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Any

WHOLE_GPU = "whole"
"""Profile name of a whole card with MIG off."""


class CatalogError(ValueError):
    """The catalog or an override file is malformed; the message names the entry."""


@dataclass(frozen=True)
class PlacementRule:
    """Legal placements of a profile: `starts`, each occupying `size` consecutive units."""

    starts: tuple[int, ...]
    size: int


@dataclass(frozen=True)
class MigProfile:
    name: str
    compute_slices: int
    memory_slices: int
    memory_mib: int
    max_count: int
    placement: PlacementRule | None
    memory_estimated: bool = False
    variant_of: str | None = None
    whole_gpu: bool = False
    aliases: tuple[str, ...] = ()
    """Other spellings drivers give this profile (A100-80GB's `3g.40gb` is `3g.39gb` on some
    535/545 drivers): accepted wherever the name is, while the catalog keeps one name."""

    @property
    def is_base(self) -> bool:
        """Not a +me/+gfx/-me variant: variants share slices but restrict use."""
        return self.variant_of is None

    @property
    def double_memory_1g(self) -> bool:
        """The 1-compute, 2-memory-slice profile (ID 15 on 8-slot cards).

        HAMi's dynamic MIG maps names to `GPU_INSTANCE_PROFILE_<N>_SLICE` and cannot request it.
        """
        return self.compute_slices == 1 and self.memory_slices == 2 and not self.whole_gpu


@dataclass(frozen=True)
class GpuModel:
    id: str
    aliases: tuple[str, ...]
    memory_mib: int
    compute_slices: int
    memory_slices: int
    placement_units: int | None
    profiles: tuple[MigProfile, ...]
    overridden: bool = False
    description: str = ""
    sources: tuple[str, ...] = ()
    """Where the facts about this model come from (the research notes and our supplement)."""

    @property
    def placements_known(self) -> bool:
        return self.placement_units is not None and all(
            p.placement is not None for p in self.profiles
        )

    @property
    def whole(self) -> MigProfile:
        """The card with MIG off, as a profile: one per card, all of its memory."""
        return MigProfile(
            name=WHOLE_GPU,
            compute_slices=self.compute_slices,
            memory_slices=self.memory_slices,
            memory_mib=self.memory_mib,
            max_count=1,
            placement=None,
            whole_gpu=True,
        )

    def profile(self, name: str) -> MigProfile | None:
        """The profile by its catalog name or any of its driver spellings."""
        if name == WHOLE_GPU:
            return self.whole
        for p in self.profiles:
            if p.name == name:
                return p
        key = name.strip().lower()
        for p in self.profiles:
            if key == p.name or key in p.aliases:
                return p
        return None


def _normalise(name: str) -> str:
    key = name.strip().lower()
    key = re.sub(r"^nvidia[\s_-]+", "", key)
    return re.sub(r"[\s_]+", "-", key)


@dataclass
class Catalog:
    """All GPU models, found by canonical id or by any product name NVML reports."""

    models: dict[str, GpuModel]
    _by_alias: dict[str, str] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self._by_alias = {}
        for model in self.models.values():
            for name in (model.id, *model.aliases):
                self._by_alias[_normalise(name)] = model.id
        # A short name ("B200", "A30") is an alias when only one model carries it.
        shorts: dict[str, list[str]] = {}
        for model in self.models.values():
            shorts.setdefault(_normalise(re.sub(r"-\d+GB$", "", model.id)), []).append(model.id)
        for short, ids in shorts.items():
            if len(ids) == 1:
                self._by_alias.setdefault(short, ids[0])

    def resolve(self, name: str) -> GpuModel | None:
        model_id = self._by_alias.get(_normalise(name))
        return self.models[model_id] if model_id else None

    def __iter__(self) -> Iterator[GpuModel]:
        return iter(sorted(self.models.values(), key=lambda m: m.id))

    def __len__(self) -> int:
        return len(self.models)


# --- loading -----------------------------------------------------------------------------


def _int(entry: Mapping[str, Any], key: str, where: str, *, positive: bool = True) -> int:
    value = entry.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or (positive and value <= 0):
        raise CatalogError(f"{where}.{key}: must be a positive integer, got {value!r}")
    return value


def _str(entry: Mapping[str, Any], key: str, where: str) -> str:
    value = entry.get(key)
    if not isinstance(value, str) or not value.strip():
        raise CatalogError(f"{where}.{key}: must be a non-empty string, got {value!r}")
    return value.strip()


def _parse_placement(raw: Any, units: int | None, where: str) -> PlacementRule | None:
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise CatalogError(f"{where}: must be an object with starts and size")
    size = _int(raw, "size", where)
    starts = raw.get("starts")
    if (
        not isinstance(starts, list)
        or not starts
        or not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in starts)
    ):
        raise CatalogError(f"{where}.starts: must be a non-empty list of non-negative integers")
    if units is not None and any(s + size > units for s in starts):
        raise CatalogError(f"{where}: a placement runs past the card's {units} units")
    return PlacementRule(starts=tuple(sorted(starts)), size=size)


PROFILE_NAME = re.compile(r"\d+g\.\d+gb([+-][a-z.]+)?")
"""A MIG profile name as NVML prints it: compute slices, memory label, optional variant."""


def _profile_aliases(raw: Mapping[str, Any], where: str) -> tuple[str, ...]:
    aliases = raw.get("aliases", [])
    if not isinstance(aliases, list) or not all(isinstance(a, str) for a in aliases):
        raise CatalogError(f"{where}.aliases: must be a list of profile names")
    out = []
    for i, alias in enumerate(aliases):
        alias = alias.strip().lower()
        if not PROFILE_NAME.fullmatch(alias):
            raise CatalogError(
                f"{where}.aliases[{i}]: {alias!r} is not a MIG profile name like 1g.10gb")
        out.append(alias)
    return tuple(dict.fromkeys(out))


def _check_profile_names(profiles: tuple[MigProfile, ...], where: str) -> None:
    """Each name or spelling leads to one profile of the model."""
    owner: dict[str, str] = {}
    for p in profiles:
        for name in (p.name, *p.aliases):
            if owner.setdefault(name, p.name) != p.name:
                raise CatalogError(f"{where}: {name!r} would name both {owner[name]} and "
                                   f"{p.name}")


def _parse_profile(raw: Any, units: int | None, where: str) -> MigProfile:
    if not isinstance(raw, Mapping):
        raise CatalogError(f"{where}: must be an object")
    name = _str(raw, "name", where)
    if not PROFILE_NAME.fullmatch(name):
        raise CatalogError(f"{where}.name: {name!r} is not a MIG profile name like 1g.10gb")
    return MigProfile(
        name=name,
        compute_slices=_int(raw, "compute_slices", where),
        memory_slices=_int(raw, "memory_slices", where),
        memory_mib=_int(raw, "memory_mib", where),
        max_count=_int(raw, "max_count", where),
        placement=_parse_placement(raw.get("placements"), units, f"{where}.placements"),
        memory_estimated=bool(raw.get("memory_estimated", False)),
        variant_of=raw.get("variant_of") or None,
        aliases=_profile_aliases(raw, where),
    )


def _parse_model(raw: Any, where: str, *, overridden: bool = False) -> GpuModel:
    if not isinstance(raw, Mapping):
        raise CatalogError(f"{where}: must be an object")
    model_id = _str(raw, "id", where)
    units = raw.get("placement_units")
    if units is not None:
        units = _int(raw, "placement_units", where)
    profiles_raw = raw.get("profiles")
    if not isinstance(profiles_raw, list) or not profiles_raw:
        raise CatalogError(f"{where}.profiles: must be a non-empty list")
    profiles = tuple(
        _parse_profile(p, units, f"{where}.profiles[{i}]") for i, p in enumerate(profiles_raw)
    )
    names = [p.name for p in profiles]
    if len(set(names)) != len(names):
        raise CatalogError(f"{where}.profiles: duplicate profile names")
    _check_profile_names(profiles, f"{where}.profiles")
    aliases = raw.get("aliases", [])
    if not isinstance(aliases, list) or not all(isinstance(a, str) for a in aliases):
        raise CatalogError(f"{where}.aliases: must be a list of strings")
    # With MIG off the card has its nominal memory (NVML's memory.total is within 0.5 % of
    # it), which is more than its full-card MIG profile: MIG keeps some for itself. An
    # operator states the exact figure with memory_mib.
    largest = max(p.memory_mib for p in profiles)
    if raw.get("memory_mib") is not None:
        memory_mib = _int(raw, "memory_mib", where)
    elif raw.get("memory_gb") is not None:
        memory_mib = max(largest, _int(raw, "memory_gb", where) * 1024)
    else:
        memory_mib = largest
    return GpuModel(
        id=model_id,
        aliases=tuple(aliases),
        memory_mib=memory_mib,
        compute_slices=_int(raw, "compute_slices", where),
        memory_slices=_int(raw, "memory_slices", where),
        placement_units=units,
        profiles=profiles,
        overridden=overridden,
        description=str(raw.get("description", "")),
        sources=tuple(str(x) for x in raw.get("sources", []) or []),
    )


def _apply_override(models: dict[str, GpuModel], raw: Any, source: str) -> None:
    if not isinstance(raw, Mapping) or not isinstance(raw.get("gpus"), list):
        raise CatalogError(f"{source}: must be an object with a list under 'gpus'")
    for i, entry in enumerate(raw["gpus"]):
        where = f"{source}: gpus[{i}]"
        if not isinstance(entry, Mapping):
            raise CatalogError(f"{where}: must be an object")
        model_id = _str(entry, "id", where)
        # Resolve against the catalog as patched so far: two entries for one model both apply.
        existing = Catalog(models).resolve(model_id)
        if existing is None:
            model = _parse_model(entry, where, overridden=True)
            models[model.id] = model
        else:
            unknown = set(entry) - MODEL_PATCH_KEYS
            if unknown:
                raise CatalogError(f"{where}: unknown keys {sorted(unknown)} for a model "
                                   f"already in the catalog (allowed: {sorted(MODEL_PATCH_KEYS)})")
            models[existing.id] = _patch_model(existing, entry, where)
        _check_aliases(models, where)


MODEL_PATCH_KEYS = frozenset({"id", "aliases", "memory_mib", "profiles", "description"})


def _check_aliases(models: Mapping[str, GpuModel], where: str) -> None:
    """A name must lead to one model: an alias that another model claims is refused."""
    owner: dict[str, str] = {}
    for model in models.values():
        for name in (model.id, *model.aliases):
            key = _normalise(name)
            if owner.setdefault(key, model.id) != model.id:
                raise CatalogError(
                    f"{where}.aliases: {name!r} would name both {owner[key]} and {model.id}")


def _patch_model(model: GpuModel, entry: Mapping[str, Any], where: str) -> GpuModel:
    """Changes what the operator measured on their nodes; everything else stays."""
    profiles = {p.name: p for p in model.profiles}
    patches = entry.get("profiles", [])
    if not isinstance(patches, list):
        raise CatalogError(f"{where}.profiles: must be a list")
    for j, patch in enumerate(patches):
        pwhere = f"{where}.profiles[{j}]"
        if not isinstance(patch, Mapping):
            raise CatalogError(f"{pwhere}: must be an object")
        name = _str(patch, "name", pwhere)
        known = model.profile(name)
        if known is not None and not known.whole_gpu:
            name = known.name  # a driver spelling patches the profile it spells
        if name not in profiles:
            profiles[name] = _parse_profile(patch, model.placement_units, pwhere)
            continue
        changes: dict[str, Any] = {}
        if "aliases" in patch:
            changes["aliases"] = tuple(dict.fromkeys(
                (*profiles[name].aliases, *_profile_aliases(patch, pwhere))))
        if "memory_mib" in patch:
            changes["memory_mib"] = _int(patch, "memory_mib", pwhere)
            changes["memory_estimated"] = False
        if "max_count" in patch:
            changes["max_count"] = _int(patch, "max_count", pwhere)
        if "placements" in patch:
            changes["placement"] = _parse_placement(
                patch["placements"], model.placement_units, f"{pwhere}.placements"
            )
        unknown = set(patch) - {"name", "memory_mib", "max_count", "placements", "aliases"}
        if unknown:
            raise CatalogError(f"{pwhere}: unknown keys {sorted(unknown)}")
        profiles[name] = replace(profiles[name], **changes)
    aliases = entry.get("aliases", [])
    if not isinstance(aliases, list) or not all(isinstance(a, str) for a in aliases):
        raise CatalogError(f"{where}.aliases: must be a list of strings")
    memory = model.memory_mib
    if "memory_mib" in entry:
        memory = _int(entry, "memory_mib", where)
    patched = tuple(profiles.values())
    _check_profile_names(patched, f"{where}.profiles")
    return replace(
        model,
        aliases=tuple(dict.fromkeys((*model.aliases, *aliases))),
        profiles=patched,
        memory_mib=memory,
        overridden=True,
    )


def load_catalog(override: str | Path | None = None) -> Catalog:
    """The shipped catalog, with the operator's override file applied when given."""
    text = resources.files("recommender").joinpath("data/gpu_catalog.json").read_text()
    shipped = json.loads(text)
    models: dict[str, GpuModel] = {}
    for i, raw in enumerate(shipped["gpus"]):
        model = _parse_model(raw, f"gpu_catalog.json: gpus[{i}]")
        models[model.id] = model
    if override:
        path = Path(override)
        try:
            data = json.loads(path.read_text())
        except OSError as e:
            raise CatalogError(f"{path}: cannot read the catalog override: {e}") from e
        except json.JSONDecodeError as e:
            raise CatalogError(f"{path}: not valid JSON: {e}") from e
        _apply_override(models, data, str(path))
    return Catalog(models)
