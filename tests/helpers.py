"""Builders for requests, shared by the tests."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from google.protobuf.timestamp_pb2 import Timestamp

from recommender._proto.intelliscale.recommender.v1 import recommender_pb2 as pb


def pool(pool_id: str = "a100", model: str = "A100-40GB", strategy: int = pb.MIG_STRATEGY_MIXED,
         profiles: tuple[str, ...] = (), nodes: tuple[pb.Node, ...] = ()) -> pb.Pool:
    return pb.Pool(pool_id=pool_id, gpu_model=model, strategy=strategy, profiles=list(profiles),
                   nodes=list(nodes))


def request(action: str = "act", *pools: pb.Pool, workers: int = 1, declared: int = 0,
            execution: str = "", p2p: bool = False) -> pb.RecommendRequest:
    return pb.RecommendRequest(
        action_id=action, execution_id=execution, pools=list(pools or (pool(),)),
        workers=workers, declared_memory_mib=declared, needs_peer_to_peer=p2p,
    )


def ts(dt: datetime) -> Timestamp:
    t = Timestamp()
    t.FromDatetime(dt.astimezone(UTC))
    return t


def record(execution: str, action: str = "act", *, model: str = "A100-40GB",
           profile: str = "1g.10gb", count: int = 1, peak: float = 3000.0,
           outcome: int = pb.OUTCOME_SUCCEEDED, recommendation: str = "",
           ended: datetime | None = None, sm: float = 10.0) -> pb.ExecutionRecord:
    m = pb.ExecutionRecord(
        execution_id=execution, action_id=action, recommendation_id=recommendation,
        gpu_model=model, profile=profile, count=count, peak_memory_mib=peak,
        sm_utilization=sm, duration_s=60.0, throughput=1.0, outcome=outcome,
    )
    if ended is not None:
        m.ended_at.CopyFrom(ts(ended))
    return m


def access_lines(log: str) -> list[dict[str, Any]]:
    """The access records in a server's log, which `serve` writes one JSON object a line."""
    lines = (json.loads(x) for x in log.splitlines() if x.startswith("{"))
    return [x for x in lines if x.get("logger") == "recommender.access"]
