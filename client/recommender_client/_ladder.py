"""The OOM ladder walked here, without the service: the same rule NextAfterOom applies."""

from __future__ import annotations

import grpc

from recommender_client._errors import LadderExhausted
from recommender_client._proto.intelliscale.recommender.v1 import recommender_pb2 as pb


def next_from_ladder(recommendation: pb.Recommendation,
                     observed_peak_memory_mib: float = 0.0) -> pb.Recommendation:
    """The recommendation for the next attempt after `recommendation` ran out of GPU memory.

    The execution needed more than the slice it died in, and at least the peak seen before
    dying: the next rung is the first on the ladder with more memory per worker than both
    (rungs that add no memory are skipped, as the service skips them). Raises LadderExhausted
    when there is none.
    """
    need = max(float(recommendation.profile.memory_mib), observed_peak_memory_mib)
    ladder = list(recommendation.ladder)
    for i, rung in enumerate(ladder):
        if rung.profile.memory_mib > need:
            return pb.Recommendation(
                pool_id=rung.pool_id, gpu_model=rung.gpu_model, profile=rung.profile,
                count=rung.count, resources=dict(rung.resources), node_id=rung.node_id,
                gpu_equivalents=rung.gpu_equivalents, predicted_peak_memory_mib=need,
                source="ladder", model_version=recommendation.model_version,
                attempt=recommendation.attempt + 1, stored=False, ladder=ladder[i + 1:],
                reason=(f"walked locally (NextAfterOom not reached): OOM in "
                        f"{recommendation.profile.name} ({recommendation.profile.memory_mib:,} "
                        f"MiB), needs more than {need:,.0f} MiB per worker; next rung "
                        f"{rung.profile.name} ({rung.profile.memory_mib:,} MiB) x {rung.count} "
                        f"on {rung.pool_id} ({rung.gpu_model})"))
    raise LadderExhausted(
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        f"no rung with more than {need:,.0f} MiB per worker on the ladder (walked locally)")
