"""Admin.AdviseLayout: its request checked and turned into a call, its answer into a message."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from recommender._proto.intelliscale.recommender.v1 import recommender_pb2 as pb
from recommender.core import config
from recommender.core.catalog import Catalog, GpuModel
from recommender.core.geometry import capacity_of
from recommender.core.layout import RecordedAdvice
from recommender.rpc.convert import (
    InvalidArgument,
    checked_text,
    resolve_model,
    time_from_pb,
    timestamp_pb,
)

HOURS = 3600.0
GIB_H = 1024.0 * 3600.0


@dataclass(frozen=True)
class LayoutQuery:
    model: GpuModel
    gpus: int
    pool_id: str
    since: datetime
    until: datetime


def layout_query_from_pb(catalog: Catalog, m: pb.AdviseLayoutRequest, now: datetime
                         ) -> LayoutQuery:
    """Checks every field; the window defaults to the `config.LAYOUT_WINDOW` before `until`,
    and `until` to now."""
    model = resolve_model(catalog, m.gpu_model, "gpu_model")
    if not model.placements_known:
        raise InvalidArgument(f"gpu_model: {model.id} has no known placement table; no MIG "
                              "layout can be advised for it")
    if not 1 <= m.gpus <= config.LAYOUT_MAX_GPUS:
        raise InvalidArgument(
            f"gpus: must be between 1 and {config.LAYOUT_MAX_GPUS}, got {m.gpus}")
    pool_id = checked_text(m.pool_id, "pool_id", required=False)
    until = time_from_pb(m.until, "until") if m.HasField("until") else now
    since = time_from_pb(m.since, "since") if m.HasField("since") else until - config.LAYOUT_WINDOW
    if since >= until:
        raise InvalidArgument(f"since: must be before until ({since.isoformat()} is not before "
                              f"{until.isoformat()})")
    return LayoutQuery(model, m.gpus, pool_id, since, until)


def layout_advice_to_pb(r: RecordedAdvice) -> pb.LayoutAdvice:
    a, d = r.advice, r.demand
    cap = capacity_of(a.gpus)
    return pb.LayoutAdvice(
        gpus=[pb.GpuLayout(
            profiles=dict(g.counts), index=i, mig_enabled=g.mig_enabled,
            placements=[pb.LayoutPlacement(profile=p, start=start, size=size)
                        for p, start, size in g.placements])
            for i, g in enumerate(a.gpus)],
        served_fraction=a.score.served_fraction,
        alternatives=[pb.LayoutScore(name=s.name, served_fraction=s.served_fraction,
                                     idle_memory_gib_hours=s.idle_memory_gib_h)
                      for s in a.alternatives],
        reason=a.reason,
        mig_parted_config=r.mig_parted(),
        mig_parted_config_name=r.config_name,
        gpu_model=a.model.id,
        since=timestamp_pb(d.since),
        until=timestamp_pb(d.until),
        demanded_instance_hours=d.instance_seconds() / HOURS,
        served_instance_hours=a.score.served_instance_s / HOURS,
        idle_memory_gib_hours=a.score.idle_memory_gib_h,
        exact=a.exact,
        served_fraction_bound=a.bound,
        executions=r.executions,
        demand=[pb.ProfileDemand(
            profile=p, peak=d.peak(p), instance_hours=d.instance_seconds(p) / HOURS,
            capacity=cap.get(p, 0),
            served_fraction=(d.served({p: cap.get(p, 0)}) / d.instance_seconds(p)
                             if d.instance_seconds(p) else 0.0))
            for p in d.profiles],
    )
