"""Protobuf messages to domain values and back, validating every field on the way in.

A bad field raises InvalidArgument whose message starts with the field's path
(`pools[0].gpu_model: unknown GPU model 'X'`), before anything is computed or written.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from functools import partial
from typing import Any, TypeVar

from google.protobuf.timestamp_pb2 import Timestamp

from recommender._proto.intelliscale.recommender.v1 import recommender_pb2 as pb
from recommender.core import config
from recommender.core.catalog import WHOLE_GPU, Catalog, GpuModel, MigProfile
from recommender.core.domain import (
    Execution,
    HistoryFilter,
    Node,
    Outcome,
    Pool,
    Request,
    Strategy,
    pool_profiles_problem,
)
from recommender.core.identity import ByIdentity
from recommender.core.placement import GpuState


class InvalidArgument(ValueError):
    """INVALID_ARGUMENT; the message names the field."""


STRATEGIES = {
    pb.MIG_STRATEGY_SINGLE: Strategy.SINGLE,
    pb.MIG_STRATEGY_MIXED: Strategy.MIXED,
    pb.MIG_STRATEGY_DYNAMIC: Strategy.DYNAMIC,
    pb.MIG_STRATEGY_NONE: Strategy.NONE,
}
OUTCOMES = {
    pb.OUTCOME_SUCCEEDED: Outcome.SUCCEEDED,
    pb.OUTCOME_OOM: Outcome.OOM,
    pb.OUTCOME_FAILED: Outcome.FAILED,
    pb.OUTCOME_CANCELLED: Outcome.CANCELLED,
}
OUTCOME_TO_PB = {v: k for k, v in OUTCOMES.items()}


def checked_text(value: str, field: str, *, required: bool = True,
          max_length: int = config.MAX_STRING) -> str:
    value = value.strip()
    if required and not value:
        raise InvalidArgument(f"{field}: required")
    if len(value) > max_length:
        raise InvalidArgument(f"{field}: longer than {max_length} characters")
    if "\x00" in value:
        # PostgreSQL text cannot hold NUL; no id or name needs one.
        raise InvalidArgument(f"{field}: contains a NUL character")
    return value


def _number(value: float, field: str, *, low: float = 0.0, high: float = math.inf) -> float:
    if not math.isfinite(value) or value < low or value > high:
        bound = f"between {low:g} and {high:g}" if math.isfinite(high) else f">= {low:g}"
        raise InvalidArgument(f"{field}: must be {bound}, got {value!r}")
    return float(value)


def _features(features: Mapping[str, float], field: str) -> dict[str, float]:
    if len(features) > config.MAX_FEATURES:
        raise InvalidArgument(f"{field}: at most {config.MAX_FEATURES} features")
    out = {}
    for key, value in features.items():
        name = checked_text(key, f"{field} key")
        if not math.isfinite(value):
            raise InvalidArgument(f"{field}[{name!r}]: must be a finite number")
        out[name] = float(value)
    return out


_RESOLVED: dict[int, tuple[Catalog, dict[str, GpuModel]]] = {}
_RESOLVED_MAX = 1024
"""Names resolved per catalog (by identity: a Catalog is not hashable), so a name the
runner sends on every call is normalised once. Only names that resolve are kept, at most
_RESOLVED_MAX of them: clients choose the strings."""


def _resolve(catalog: Catalog, name: str) -> GpuModel | None:
    entry = _RESOLVED.get(id(catalog))
    if entry is None or entry[0] is not catalog:
        if len(_RESOLVED) >= 16:  # catalogs come and go in tests; a server has one
            _RESOLVED.clear()
        entry = _RESOLVED[id(catalog)] = (catalog, {})
    known = entry[1]
    model = known.get(name)
    if model is None:
        model = catalog.resolve(name)
        if model is not None and len(known) < _RESOLVED_MAX:
            known[name] = model
    return model


def resolve_model(catalog: Catalog, name: str, field: str) -> GpuModel:
    name = checked_text(name, field)
    model = _resolve(catalog, name)
    if model is None:
        known = ", ".join(m.id for m in catalog)
        raise InvalidArgument(f"{field}: unknown GPU model {name!r} (known: {known})")
    return model


def resolve_profile(model: GpuModel, name: str, field: str) -> MigProfile:
    name = checked_text(name, field)
    profile = model.profile(name)
    if profile is None:
        known = ", ".join([p.name for p in model.profiles] + [WHOLE_GPU])
        raise InvalidArgument(f"{field}: unknown profile {name!r} on {model.id} (known: {known})")
    return profile


_OWNERS = 64
"""Catalogs or GPU models with a table of their own below (a bound for tests, which make many)."""
_NODES: ByIdentity[GpuModel, dict[bytes, Node]] = ByIdentity(_OWNERS)
_NODES_MAX = 8192
"""Nodes converted, by GPU model and the node message's bytes. The runner lists a pool's
nodes on every Recommend and most of them have not changed since the last call: the same
bytes give the same (immutable, validated) Node, with the placements the policy already
worked out for it (`Node.placements`). At most _NODES_MAX per model (a few KB each)."""
_GPUS: ByIdentity[GpuModel, dict[bytes, GpuState]] = ByIdentity(_OWNERS)
_GPUS_MAX = 16384
"""GPU states converted, by GPU model and the GPU message's bytes without its uuid: what it
holds (`_occupancies`). The GPUs of a pool are in few states (what MIG layouts allow, in
practice a handful), so a node never seen, even of GPUs never seen, costs a slice of its bytes
and a lookup per GPU, and what the policy works out for a GPU state (`GpuState.answers`)
serves every GPU in it. (A client listing many odd states fills the table: it starts over.)
The converted states are anonymous (uuid ""): the decision names a node, never a GPU, and
every reason a GPU could be refused for is checked here, with the field's path."""
_SHAPES: ByIdentity[GpuModel, dict[tuple[bytes, ...], tuple[tuple[GpuState, ...],
                                                            dict[Any, Any]]]] = ByIdentity(_OWNERS)
_SHAPES_MAX = 8192
"""Node shapes, by GPU model and the states of its GPUs in order: nodes of one shape share their
GPUs tuple and the policy's answers (`Node.placements`: an answer depends only on the GPU
states in order), so a listing of many alike nodes is placed once per shape."""
_POOLS: ByIdentity[Catalog, dict[bytes, Pool]] = ByIdentity(_OWNERS)
_POOLS_MAX = 16
"""Whole pools listing nodes, by catalog and the pool message's bytes: a pool listed again
unchanged costs one serialisation and a lookup."""
_BARE_POOLS: ByIdentity[Catalog, dict[bytes, Pool]] = ByIdentity(_OWNERS)
_BARE_POOLS_MAX = 1024
"""Pools that list no nodes (a model, a strategy, maybe profiles: tens of bytes), likewise: the
runner sends the same few on every Recommend, and one Pool object per listing lets the use
cases' decision memo know the request by its pools' identities (`UseCases.recommend`)."""

K = TypeVar("K")
R = TypeVar("R", bytes, tuple[bytes, ...])
V = TypeVar("V")


def _interned(tables: ByIdentity[K, dict[R, V]], owner: K) -> dict[R, V]:
    """`owner`'s table (by identity: catalogs and models are few and live as long as the
    server; tests make many, hence the bound)."""
    return tables.get(owner, _new_table)


def _new_table(_owner: object) -> dict[Any, Any]:
    return {}


def _intern(known: dict[R, V], raw: R, limit: int, make: Callable[[], V]) -> V:
    """The value converted from these message bytes before, else `make()` kept for next time;
    a full table starts over (bounded memory, and a listing's entries come back at once)."""
    found = known.get(raw)
    if found is None:
        found = make()
        if len(known) >= limit:
            known.clear()
        known[raw] = found
    return found


def _field(raw: bytes, pos: int) -> tuple[int, int, int]:
    """(tag, start, end) of the length-delimited field at `pos` of a message's bytes."""
    tag = raw[pos]
    length, shift, pos = 0, 0, pos + 1
    while True:
        byte = raw[pos]
        length |= (byte & 0x7F) << shift
        pos += 1
        if byte < 0x80:
            return tag, pos, pos + length
        shift += 7


def _occupancies(raw: bytes) -> tuple[str, list[bytes]] | None:
    """The node_id, and each GPU's bytes without its uuid, read from the bytes of a Node
    message (node_id = 1, gpus = 2, a Gpu's uuid = 1, each written once and first, as
    protobuf writes them): the keys of the GPU states, without a protobuf object per GPU.
    None for bytes written otherwise (the caller reads the message instead)."""
    out = []
    node_id = ""
    pos, end = 0, len(raw)
    while pos < end:
        tag, length = raw[pos], raw[pos + 1]
        if length < 0x80:  # short fields (most): read inline
            start, pos = pos + 2, pos + 2 + length
        else:
            tag, start, pos = _field(raw, pos)
        if tag == 0x12:
            if start < pos and raw[start] == 0x0A:
                uuid_length = raw[start + 1]
                skip = (start + 2 + uuid_length if uuid_length < 0x80
                        else _field(raw, start)[2])
                out.append(raw[skip:pos])
            else:
                out.append(raw[start:pos])
        elif tag == 0x0A:
            node_id = raw[start:pos].decode()  # valid UTF-8: protobuf checked it on parsing
        else:
            return None
    return node_id, out


def _node_bytes(raw: bytes) -> list[bytes] | None:
    """Each node's bytes, read from the bytes of a Pool message (fields 1, 2 and 4 strings,
    3 an enum, 5 the nodes), without a protobuf object per node; None for bytes written
    otherwise."""
    out = []
    pos, end = 0, len(raw)
    while pos < end:
        tag = raw[pos]
        if tag == 0x18:  # strategy: a varint
            pos += 1
            while raw[pos] >= 0x80:
                pos += 1
            pos += 1
            continue
        tag, start, pos = _field(raw, pos)
        if tag == 0x2A:
            out.append(raw[start:pos])
        elif tag not in (0x0A, 0x12, 0x22):
            return None
    return out


def _node(model: GpuModel, p: pb.Pool, j: int, raw: bytes, field: str) -> Node:
    field = f"{field}.nodes[{j}]"
    read = _occupancies(raw)
    if read is None:
        n = p.nodes[j]
        read = n.node_id, [g.SerializeToString() for g in n.gpus]
    node_id = checked_text(read[0], f"{field}.node_id")
    keys = read[1]
    if len(keys) > config.MAX_GPUS_PER_NODE:
        raise InvalidArgument(f"{field}.gpus: at most {config.MAX_GPUS_PER_NODE} GPUs")
    shapes = _interned(_SHAPES, model)
    key = tuple(keys)
    shape = shapes.get(key)
    if shape is None:
        known = _interned(_GPUS, model)
        states = tuple(
            _intern(known, key, _GPUS_MAX,
                    partial(_gpu, model, p.nodes[j].gpus[k], f"{field}.gpus[{k}]"))
            for k, key in enumerate(keys))
        shape = _intern(shapes, key, _SHAPES_MAX, lambda: (states, {}))
    return Node(node_id=node_id, gpus=shape[0], placements=shape[1])


def _gpu(model: GpuModel, g: pb.Gpu, field: str) -> GpuState:
    units = model.placement_units or 0
    # Field paths are formatted only for an error: a pool can list thousands of GPUs.
    occupied = []
    for m, pl in enumerate(g.occupied):
        start, size = pl.start, pl.size
        if start < 0 or size <= 0 or (units and start + size > units):
            raise InvalidArgument(
                f"{field}.occupied[{m}]: {start}:{size} is "
                f"not a placement on {model.id} (units 0..{units})"
            )
        occupied.append((start, size))
    names = g.occupied_profiles
    return GpuState(
        uuid="", occupied=tuple(occupied),
        occupied_profiles=tuple(
            resolve_profile(model, name, f"{field}.occupied_profiles[{m}]").name
            for m, name in enumerate(names)
        ) if names else ())


def _pool(catalog: Catalog, p: pb.Pool, field: str) -> Pool:
    raw = p.SerializeToString()
    if not p.nodes:
        return _intern(_interned(_BARE_POOLS, catalog), raw, _BARE_POOLS_MAX,
                       lambda: _convert_pool(catalog, p, field))
    return _intern(_interned(_POOLS, catalog), raw, _POOLS_MAX,
                   lambda: _convert_pool(catalog, p, field, raw))


def _convert_pool(catalog: Catalog, p: pb.Pool, field: str, raw: bytes = b"") -> Pool:
    pool_id = checked_text(p.pool_id, f"{field}.pool_id")
    model = resolve_model(catalog, p.gpu_model, f"{field}.gpu_model")
    if p.strategy not in STRATEGIES:
        raise InvalidArgument(
            f"{field}.strategy: required, one of MIG_STRATEGY_SINGLE, MIG_STRATEGY_MIXED, "
            "MIG_STRATEGY_DYNAMIC, MIG_STRATEGY_NONE"
        )
    strategy = STRATEGIES[p.strategy]
    profiles: tuple[MigProfile, ...] = ()
    spellings: dict[str, str] = {}
    if strategy is not Strategy.NONE:
        profiles = tuple(
            resolve_profile(model, name, f"{field}.profiles[{i}]")
            for i, name in enumerate(p.profiles)
        )
        for i, (name, pr) in enumerate(zip(p.profiles, profiles, strict=True)):
            spelt = name.strip()
            if spellings.setdefault(pr.name, spelt) != spelt:
                raise InvalidArgument(
                    f"{field}.profiles[{i}]: {spelt!r} and {spellings[pr.name]!r} are two "
                    f"spellings of {pr.name} on {model.id}; a pool's nodes use one")
        if problem := pool_profiles_problem(strategy, profiles):
            raise InvalidArgument(f"{field}.profiles: {problem}")
    if len(p.nodes) > config.MAX_NODES_PER_POOL:
        raise InvalidArgument(f"{field}.nodes: at most {config.MAX_NODES_PER_POOL} nodes")
    known = _interned(_NODES, model)
    listed = _node_bytes(raw) if raw else None
    if listed is None:
        listed = [n.SerializeToString() for n in p.nodes]
    nodes = []
    for j, node_raw in enumerate(listed):
        node = known.get(node_raw)
        if node is None:
            node = _intern(known, node_raw, _NODES_MAX,
                           partial(_node, model, p, j, node_raw, field))
        nodes.append(node)
    return Pool(pool_id=pool_id, gpu_model=model, strategy=strategy, profiles=profiles,
                nodes=tuple(nodes),
                spellings=tuple((k, v) for k, v in spellings.items() if k != v))


def request_from_pb(catalog: Catalog, m: pb.RecommendRequest) -> Request:
    action_id = checked_text(m.action_id, "action_id")
    execution_id = checked_text(m.execution_id, "execution_id", required=False)
    if not m.pools:
        raise InvalidArgument("pools: at least one pool is required")
    if len(m.pools) > config.MAX_POOLS:
        raise InvalidArgument(f"pools: at most {config.MAX_POOLS}")
    pools = tuple(_pool(catalog, p, f"pools[{i}]") for i, p in enumerate(m.pools))
    seen: set[str] = set()
    for i, pool in enumerate(pools):
        if pool.pool_id in seen:
            raise InvalidArgument(f"pools[{i}].pool_id: duplicate {pool.pool_id!r}")
        seen.add(pool.pool_id)
    if m.workers < 0 or m.workers > config.MAX_WORKERS:
        raise InvalidArgument(
            f"workers: must be between 0 and {config.MAX_WORKERS}, got {m.workers}")
    if m.max_workers < 0 or m.max_workers > config.MAX_WORKERS:
        raise InvalidArgument(
            f"max_workers: must be between 0 and {config.MAX_WORKERS}, got {m.max_workers}")
    if not 0 <= m.declared_memory_mib <= config.MAX_MEMORY_MIB:
        raise InvalidArgument(f"declared_memory_mib: must be between 0 and "
                              f"{config.MAX_MEMORY_MIB} (16 TiB), got {m.declared_memory_mib}")
    return Request(
        action_id=action_id,
        execution_id=execution_id,
        pools=pools,
        workers=max(m.workers, 1),
        max_workers=m.max_workers,
        target_throughput=_number(m.target_throughput, "target_throughput"),
        needs_peer_to_peer=m.needs_peer_to_peer,
        declared_memory_mib=m.declared_memory_mib,
        features=_features(m.features, "features"),
    )


def time_from_pb(ts: Timestamp, field: str) -> datetime:
    try:
        return ts.ToDatetime(tzinfo=UTC)
    except (ValueError, OverflowError) as e:
        raise InvalidArgument(f"{field}: {e}") from e


def timestamp_pb(dt: datetime) -> Timestamp:
    ts = Timestamp()
    ts.FromDatetime(dt.astimezone(UTC))
    return ts


def execution_from_pb(catalog: Catalog, m: pb.ExecutionRecord, now: datetime) -> Execution:
    execution_id = checked_text(m.execution_id, "execution_id")
    action_id = checked_text(m.action_id, "action_id")
    model = resolve_model(catalog, m.gpu_model, "gpu_model")
    profile = resolve_profile(model, m.profile, "profile")
    if m.count < 0 or m.count > config.MAX_WORKERS:
        raise InvalidArgument(f"count: must be between 0 and {config.MAX_WORKERS}, got {m.count}")
    if m.outcome not in OUTCOMES:
        raise InvalidArgument("outcome: required, one of OUTCOME_SUCCEEDED, OUTCOME_OOM, "
                              "OUTCOME_FAILED, OUTCOME_CANCELLED")
    started = time_from_pb(m.started_at, "started_at") if m.HasField("started_at") else None
    ended = time_from_pb(m.ended_at, "ended_at") if m.HasField("ended_at") else now
    if started and started > ended:
        raise InvalidArgument("started_at: after ended_at")
    return Execution(
        execution_id=execution_id,
        action_id=action_id,
        recommendation_id=checked_text(m.recommendation_id, "recommendation_id", required=False,
                                max_length=RECOMMENDATION_ID_LENGTH),
        gpu_model=model.id,
        profile=profile.name,
        slice_memory_mib=profile.memory_mib,
        count=max(m.count, 1),
        peak_memory_mib=_number(m.peak_memory_mib, "peak_memory_mib",
                                high=config.MAX_MEMORY_MIB),
        sm_utilization=_number(m.sm_utilization, "sm_utilization", high=100.0),
        duration_s=_number(m.duration_s, "duration_s"),
        throughput=_number(m.throughput, "throughput"),
        outcome=OUTCOMES[m.outcome],
        ended_at=ended,
        started_at=started,
        features=_features(m.features, "features"),
    )


RECOMMENDATION_ID_LENGTH = 36
"""Recommendation ids are UUIDs; a longer one was not issued here."""

OUTCOME_FILTERS = {
    pb.OUTCOME_FILTER_UNSPECIFIED: "",
    pb.OUTCOME_FILTER_FITTED: "fitted",
    pb.OUTCOME_FILTER_OOM: "oom",
    pb.OUTCOME_FILTER_UNKNOWN: "unknown",
}
MAX_PAGE = 1000
DEFAULT_PAGE = 50


def history_query_from_pb(catalog: Catalog, m: pb.ListRecommendationsRequest
                          ) -> tuple[HistoryFilter, int, str]:
    """The filter, page size and page token of a ListRecommendations request."""
    if m.page_size < 0:
        raise InvalidArgument("page_size: must be >= 0")
    if m.outcome not in OUTCOME_FILTERS:
        raise InvalidArgument("outcome: unknown filter")
    gpu_model = checked_text(m.gpu_model, "gpu_model", required=False)
    if gpu_model and (model := catalog.resolve(gpu_model)) is not None:
        gpu_model = model.id
    f = HistoryFilter(
        action_id=checked_text(m.action_id, "action_id", required=False),
        pool_id=checked_text(m.pool_id, "pool_id", required=False),
        gpu_model=gpu_model,
        source=checked_text(m.source, "source", required=False),
        outcome=OUTCOME_FILTERS[m.outcome],
        created_after=time_from_pb(m.created_after, "created_after")
        if m.HasField("created_after") else None,
        created_before=time_from_pb(m.created_before, "created_before")
        if m.HasField("created_before") else None,
    )
    token = checked_text(m.page_token, "page_token", required=False, max_length=1024)
    return f, min(m.page_size or DEFAULT_PAGE, MAX_PAGE), token


def next_after_oom_from_pb(m: pb.NextAfterOomRequest) -> tuple[str, float]:
    return (
        checked_text(m.recommendation_id, "recommendation_id"),
        _number(m.observed_peak_memory_mib, "observed_peak_memory_mib",
                high=config.MAX_MEMORY_MIB),
    )
