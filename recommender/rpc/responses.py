"""Core values to protobuf messages: what the servicers answer."""

from __future__ import annotations

from recommender._proto.intelliscale.recommender.v1 import recommender_pb2 as pb
from recommender.core.catalog import GpuModel, MigProfile
from recommender.core.domain import (
    Decision,
    HistoryEntry,
    ModelVersion,
    Rung,
    StoredRecommendation,
)
from recommender.rpc.convert import OUTCOME_TO_PB, timestamp_pb


def profile_to_pb(p: MigProfile) -> pb.Profile:
    return pb.Profile(name=p.name, compute_slices=p.compute_slices,
                      memory_slices=p.memory_slices, memory_mib=p.memory_mib,
                      whole_gpu=p.whole_gpu)


def rung_to_pb(r: Rung) -> pb.Rung:
    return pb.Rung(pool_id=r.pool_id, gpu_model=r.gpu_model, profile=profile_to_pb(r.profile),
                   count=r.count, resources=r.resources, node_id=r.node_id,
                   gpu_equivalents=r.gpu_equivalents)


def recommendation_to_pb(rec: StoredRecommendation, *, stored: bool = True) -> pb.Recommendation:
    d = rec.decision
    return pb.Recommendation(
        recommendation_id=rec.id,
        pool_id=d.rung.pool_id,
        gpu_model=d.rung.gpu_model,
        profile=profile_to_pb(d.rung.profile),
        count=d.rung.count,
        resources=d.rung.resources,
        predicted_peak_memory_mib=d.predicted_peak_mib,
        quantile=d.quantile,
        source=d.source,
        model_version=d.model_version,
        reason=d.reason,
        ladder=[rung_to_pb(r) for r in d.ladder],
        attempt=d.attempt,
        node_id=d.rung.node_id,
        stored=stored,
        gpu_equivalents=d.rung.gpu_equivalents,
        node_share=d.rung.node_share,
        predicted_throughput=d.predicted_throughput,
        oom_chance=d.oom_chance,
        model_oom_chance=d.model_oom_chance or 0.0,
    )


_ANSWERS: dict[int, tuple[Decision, pb.Recommendation]] = {}
_ANSWERS_MAX = 4096
"""The first message of a decision, by the decision's identity (kept with it, so the id is not
reused): the use cases hand out the same Decision object for a request asked again unchanged
(their decision memo), and copying a built message (then setting its own id and `stored`) is
a fraction of building it with its ladder. Never changed once answered. Starts over when
full."""


def answer_to_pb(rec: StoredRecommendation, *, stored: bool = True) -> pb.Recommendation:
    """`recommendation_to_pb`, the message of a decision seen before copied instead of built."""
    d = rec.decision
    found = _ANSWERS.get(id(d))
    if found is None or found[0] is not d:
        # A decision never answered (each one of the runner's pattern): built once, for this
        # call, and kept as the template of the next answers of the same decision.
        built = recommendation_to_pb(rec, stored=stored)
        if len(_ANSWERS) >= _ANSWERS_MAX:
            _ANSWERS.clear()
        _ANSWERS[id(d)] = (d, built)
        return built
    out = pb.Recommendation()
    out.CopyFrom(found[1])
    out.recommendation_id = rec.id
    out.stored = stored
    return out


def history_entry_to_pb(e: HistoryEntry) -> pb.RecommendationEntry:
    rec = e.recommendation
    out = pb.RecommendationEntry(
        recommendation=recommendation_to_pb(rec),
        action_id=rec.action_id,
        execution_id=rec.execution_id,
        created_at=timestamp_pb(rec.created_at),
        parent_recommendation_id=rec.parent_id or "",
    )
    if e.outcome is not None:
        out.outcome = OUTCOME_TO_PB[e.outcome]
    if e.peak_memory_mib is not None:
        out.peak_memory_mib = e.peak_memory_mib
    if (slack := e.relative_slack) is not None:
        out.relative_slack = slack
    return out


def gpu_model_to_pb(m: GpuModel) -> pb.GpuModel:
    return pb.GpuModel(
        id=m.id,
        aliases=list(m.aliases),
        memory_mib=m.memory_mib,
        compute_slices=m.compute_slices,
        memory_slices=m.memory_slices,
        placement_units=m.placement_units or 0,
        placements_known=m.placements_known,
        overridden=m.overridden,
        sources=list(m.sources),
        profiles=[
            pb.ProfileInfo(
                profile=profile_to_pb(p),
                max_count=p.max_count,
                placement_starts=list(p.placement.starts) if p.placement else [],
                placement_size=p.placement.size if p.placement else 0,
                variant_of=p.variant_of or "",
                memory_estimated=p.memory_estimated,
                aliases=list(p.aliases),
            )
            for p in m.profiles
        ],
    )


def model_version_to_pb(v: ModelVersion) -> pb.ModelVersion:
    out = pb.ModelVersion(
        version=v.version,
        created_at=timestamp_pb(v.created_at),
        serving=v.serving,
        promoted=v.promoted,
        metrics=dict(v.metrics),
        reason=v.reason,
    )
    if v.training_window_start is not None:
        out.training_window_start.CopyFrom(timestamp_pb(v.training_window_start))
    if v.training_window_end is not None:
        out.training_window_end.CopyFrom(timestamp_pb(v.training_window_end))
    return out
