"""Typed errors: what a runner does next depends on which one it got."""

from __future__ import annotations

import grpc


class RecommenderError(Exception):
    """A call failed; `code` is the gRPC status code and `details` the service's message."""

    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(f"{code.name}: {details}" if details else code.name)
        self.code = code
        self.details = details


class RecommenderUnavailable(RecommenderError):
    """The service could not be reached, or did not answer, within the deadline (UNAVAILABLE or
    DEADLINE_EXCEEDED after the retries). Schedule without a recommendation (or walk the
    ladder you have: `RecommenderClient.next_after_oom_or_ladder`); keep an ExecutionRecord and
    send it again later (RecordExecution is idempotent)."""


class InvalidRequest(RecommenderError):
    """INVALID_ARGUMENT: the message names the field (`pools[0].gpu_model: ...`)."""


class UnknownRecommendation(RecommenderError):
    """NOT_FOUND: NextAfterOom on a recommendation id the service does not have."""


class NoFit(RecommenderError):
    """FAILED_PRECONDITION: no offered pool can ever fit; the message says why, per pool."""


class LadderExhausted(RecommenderError):
    """RESOURCE_EXHAUSTED: the ladder has no rung above the one that ran out of memory."""


class PermissionDenied(RecommenderError):
    """UNAUTHENTICATED or PERMISSION_DENIED (TLS client certificates, a token)."""


_BY_CODE: dict[grpc.StatusCode, type[RecommenderError]] = {
    grpc.StatusCode.UNAVAILABLE: RecommenderUnavailable,
    grpc.StatusCode.DEADLINE_EXCEEDED: RecommenderUnavailable,
    grpc.StatusCode.INVALID_ARGUMENT: InvalidRequest,
    grpc.StatusCode.NOT_FOUND: UnknownRecommendation,
    grpc.StatusCode.FAILED_PRECONDITION: NoFit,
    grpc.StatusCode.RESOURCE_EXHAUSTED: LadderExhausted,
    grpc.StatusCode.UNAUTHENTICATED: PermissionDenied,
    grpc.StatusCode.PERMISSION_DENIED: PermissionDenied,
}


def from_rpc_error(error: grpc.RpcError) -> RecommenderError:
    code = error.code() if isinstance(error, grpc.Call) else grpc.StatusCode.UNKNOWN
    details = (error.details() or "") if isinstance(error, grpc.Call) else str(error)
    return _BY_CODE.get(code, RecommenderError)(code, details)
