"""The runner's client for the IntelliScale recommender.

    from recommender_client import RecommenderClient, pb

    with RecommenderClient("intelliscale-recommender:50051") as client:
        rec = client.recommend(pb.RecommendRequest(...))

`pb` is the contract's message module (`intelliscale.recommender.v1`), generated from the
service's proto/ when this package was built. See README.md for the three calls.
"""

from recommender_client._client import (
    DEFAULT_TIMEOUT_S,
    RETRY_POLICY,
    RecommenderClient,
    service_config,
)
from recommender_client._errors import (
    InvalidRequest,
    LadderExhausted,
    NoFit,
    PermissionDenied,
    RecommenderError,
    RecommenderUnavailable,
    UnknownRecommendation,
)
from recommender_client._ladder import next_from_ladder
from recommender_client._proto.intelliscale.recommender.v1 import recommender_pb2 as pb
from recommender_client._proto.intelliscale.recommender.v1 import recommender_pb2_grpc as pb_grpc

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "RETRY_POLICY",
    "InvalidRequest",
    "LadderExhausted",
    "NoFit",
    "PermissionDenied",
    "RecommenderClient",
    "RecommenderError",
    "RecommenderUnavailable",
    "UnknownRecommendation",
    "next_from_ladder",
    "pb",
    "pb_grpc",
    "service_config",
]
