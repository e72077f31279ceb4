"""RecommenderClient: the runner's three calls, each with a deadline, retried where it is safe."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Any

import grpc

from recommender_client._errors import RecommenderUnavailable, from_rpc_error
from recommender_client._ladder import next_from_ladder
from recommender_client._proto.intelliscale.recommender.v1 import recommender_pb2 as pb
from recommender_client._proto.intelliscale.recommender.v1 import recommender_pb2_grpc as pb_grpc

SERVICE = "intelliscale.recommender.v1.Recommender"

DEFAULT_TIMEOUT_S = 5.0
"""Deadline of one call, all its attempts included. A recommendation takes milliseconds; a
runner that waited longer would hold up its scheduling for an answer it can do without."""

RETRY_POLICY: dict[str, Any] = {
    # 1 call + 3 retries, waiting about 0.1, 0.2, 0.4 s (randomised by gRPC) in between: a
    # replica restarting, a connection reset, a Service that moved to another pod.
    "maxAttempts": 4,
    "initialBackoff": "0.1s",
    "maxBackoff": "1s",
    "backoffMultiplier": 2,
    # UNAVAILABLE only: the call did not reach the service, the connection broke, or
    # RecordExecution found the database down. DEADLINE_EXCEEDED is not retried: the deadline
    # covers every attempt, so none would be left.
    "retryableStatusCodes": ["UNAVAILABLE"],
}


def service_config(retry: bool = True) -> str:
    """The gRPC service config the client's channel uses, as JSON.

    Every call of the Recommender service is safe to repeat on UNAVAILABLE:
    - RecordExecution is idempotent on `execution_id` (a repeat answers `duplicate: true`);
    - NextAfterOom is idempotent on `recommendation_id` (a repeat gets the rung it got first);
    - Recommend is not idempotent (each call stores a new recommendation), but the service never
      answers UNAVAILABLE itself (with its database down it answers from the request alone), so
      UNAVAILABLE means the call never reached it or the connection broke; at worst, a retry
      after a call that did run leaves one recommendation no execution used, which changes
      nothing the service learns (it learns from recorded executions only).
    `retryThrottling` stops retrying once failures outnumber successes by about 50 in a row (a
    token bucket of 100, -1 a failure, +0.1 a success, retries while above half), so that an
    outage is not multiplied by the number of attempts; gRPC keeps the bucket per target.
    """
    config: dict[str, Any] = {
        "methodConfig": [{
            "name": [{"service": SERVICE}],
            **({"retryPolicy": RETRY_POLICY} if retry else {}),
        }],
    }
    if retry:
        config["retryThrottling"] = {"maxTokens": 100, "tokenRatio": 0.1}
    return json.dumps(config)


class RecommenderClient:
    """The runner's side of the recommender.

    `target` is a gRPC target (`host:port`, `dns:///name:port`). `credentials` makes the
    channel TLS (`grpc.ssl_channel_credentials(...)`, with a client key and certificate for
    mutual TLS); plaintext without. `timeout` is every call's deadline in seconds (a call may
    pass its own). `metadata` goes with every call. `options` are extra channel arguments (for
    example `("grpc.lb_policy_name", "round_robin")` with a headless Service). `retry=False`
    turns the retries off; `channel` uses a channel of your own instead (then `credentials`,
    `options` and `retry` are yours to set on it).

    Errors are typed (see `recommender_client.errors`): `RecommenderUnavailable` when the service
    cannot be reached in time, `LadderExhausted`, `InvalidRequest`, `UnknownRecommendation`,
    `NoFit`, or `RecommenderError` for anything else; each keeps the `grpc.RpcError` as its
    cause.
    """

    def __init__(self, target: str, *, timeout: float = DEFAULT_TIMEOUT_S,
                 credentials: grpc.ChannelCredentials | None = None,
                 metadata: Sequence[tuple[str, str]] = (),
                 options: Sequence[tuple[str, Any]] = (), retry: bool = True,
                 channel: grpc.Channel | None = None) -> None:
        if timeout <= 0:
            raise ValueError(f"timeout: must be positive, not {timeout}")
        self.target = target
        self.timeout = timeout
        self.metadata = tuple(metadata)
        if channel is None:
            opts = [("grpc.service_config", service_config(retry)),
                    ("grpc.enable_retries", 1 if retry else 0), *options]
            channel = (grpc.secure_channel(target, credentials, options=opts)
                       if credentials is not None
                       else grpc.insecure_channel(target, options=opts))
        self.channel = channel
        # The generated stub module has no type stubs: its methods are typed below.
        self._stub: Any = pb_grpc.RecommenderStub(channel)  # type: ignore[no-untyped-call]

    def recommend(self, request: pb.RecommendRequest, *, timeout: float | None = None
                  ) -> pb.Recommendation:
        """Which slice and how many for an execution, and the OOM ladder above it."""
        reply: pb.Recommendation = self._call(self._stub.Recommend, request, timeout)
        return reply

    def next_after_oom(self, request: pb.NextAfterOomRequest, *, timeout: float | None = None
                       ) -> pb.Recommendation:
        """The next rung after an OOM (`LadderExhausted` at the top). Safe to repeat."""
        reply: pb.Recommendation = self._call(self._stub.NextAfterOom, request, timeout)
        return reply

    def record_execution(self, request: pb.ExecutionRecord, *, timeout: float | None = None
                         ) -> pb.RecordExecutionResponse:
        """Records a finished execution; idempotent on `execution_id` (`duplicate` on a repeat).
        `RecommenderUnavailable` after the retries: keep the record and send it again later."""
        reply: pb.RecordExecutionResponse = self._call(self._stub.RecordExecution, request,
                                                       timeout)
        return reply

    def next_after_oom_or_ladder(self, recommendation: pb.Recommendation,
                                 observed_peak_memory_mib: float = 0.0, *,
                                 timeout: float | None = None) -> pb.Recommendation:
        """NextAfterOom, or the next rung of `recommendation.ladder` walked here when the service
        cannot be reached or never stored the recommendation (`stored` false, or one this helper
        made: `recommendation_id` empty). The local rung is chosen by the service's own rule
        (the first rung with more memory per worker than the slice that ran out and the peak
        seen); it has `source: "ladder"`, `stored: false`, no `recommendation_id`, the rungs
        above it as its `ladder`, and a `reason` saying it was walked locally. Raises
        `LadderExhausted` at the top either way.
        """
        if recommendation.recommendation_id and recommendation.stored:
            try:
                return self.next_after_oom(pb.NextAfterOomRequest(
                    recommendation_id=recommendation.recommendation_id,
                    observed_peak_memory_mib=observed_peak_memory_mib), timeout=timeout)
            except RecommenderUnavailable:
                pass
        return next_from_ladder(recommendation, observed_peak_memory_mib)

    def _call(self, method: Callable[..., Any], request: Any, timeout: float | None) -> Any:
        try:
            return method(request, timeout=self.timeout if timeout is None else timeout,
                          metadata=self.metadata)
        except grpc.RpcError as e:
            raise from_rpc_error(e) from e

    def close(self) -> None:
        self.channel.close()

    def __enter__(self) -> RecommenderClient:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

