"""gRPC servicers: thin adapters from messages to the use cases, errors to status codes.

Each call writes one access log record whose fields are the method, status code, milliseconds,
and the ids that let an operator follow an execution. Request bodies are never logged.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, TypeVar

import grpc
from google.protobuf.message import DecodeError

from recommender._proto.intelliscale.recommender.v1 import recommender_pb2 as pb
from recommender._proto.intelliscale.recommender.v1 import recommender_pb2_grpc as pb_grpc
from recommender.core.catalog import Catalog
from recommender.core.domain import StoreUnavailable
from recommender.core.ladder import LadderExhausted
from recommender.core.options import NoFit
from recommender.core.usecases import UnknownRecommendation, UseCases
from recommender.rpc import metrics, tracing
from recommender.rpc.convert import (
    InvalidArgument,
    execution_from_pb,
    history_query_from_pb,
    next_after_oom_from_pb,
    request_from_pb,
)
from recommender.rpc.layout import layout_advice_to_pb, layout_query_from_pb
from recommender.rpc.responses import (
    answer_to_pb,
    gpu_model_to_pb,
    history_entry_to_pb,
    model_version_to_pb,
    recommendation_to_pb,
)

access_log = logging.getLogger("recommender.access")
log = logging.getLogger(__name__)

R = TypeVar("R")

ERRORS: list[tuple[type[Exception], grpc.StatusCode]] = [
    (InvalidArgument, grpc.StatusCode.INVALID_ARGUMENT),
    (UnknownRecommendation, grpc.StatusCode.NOT_FOUND),
    (NoFit, grpc.StatusCode.FAILED_PRECONDITION),
    (LadderExhausted, grpc.StatusCode.RESOURCE_EXHAUSTED),
    (StoreUnavailable, grpc.StatusCode.UNAVAILABLE),
]


def handle(method: str, context: grpc.ServicerContext, ids: dict[str, str],
           fn: Callable[[], R]) -> R:
    """Runs one call: maps domain errors to status codes and writes the access line (and the
    call's span, when tracing is on)."""
    start = time.perf_counter()
    code = grpc.StatusCode.OK
    message = ""
    span = tracing.start_call(method, context)
    try:
        return fn()
    except Exception as e:
        for kind, status in ERRORS:
            if isinstance(e, kind):
                code, message = status, str(e)
                break
        else:
            log.exception("%s failed", method)
            code, message = grpc.StatusCode.INTERNAL, "internal error; see the server log"
        context.abort(code, message)
        raise  # unreachable: abort raises
    finally:
        seconds = time.perf_counter() - start
        trace_id = ""
        if span is not None:
            trace_id = span.trace_id
            span.end(code.name, message, ids)
        if access_log.isEnabledFor(logging.INFO):
            # The line's fields are fields of the log record (the JSON log format writes them
            # as keys of its object; see cli/logs.py), the message is for a person reading it.
            access_log.info("%s %s", method, code.name,
                            extra=access_fields(method, code.name, seconds, ids, message,
                                                trace_id))
        metrics.record_call(method, code.name, seconds)


def access_fields(method: str, code: str, seconds: float, ids: dict[str, str],
                  message: str = "", trace_id: str = "") -> dict[str, Any]:
    """The access line's fields: method, status, milliseconds, the ids that are set, the error
    and the trace id when there are. Only strings and a float, which the JSON log format
    writes without the general encoder (the line is written on every call)."""
    fields: dict[str, Any] = {"method": method, "code": code, "ms": round(seconds * 1000, 3)}
    for k, v in ids.items():
        if v:
            fields[k] = v
    if message:
        fields["error"] = message
    if trace_id:
        fields["trace_id"] = trace_id
    return fields


def add_to_server(servicer: object, service_name: str, server: grpc.Server) -> None:
    """Registers `servicer`'s methods for the proto service `service_name` (e.g. "Recommender").

    What the generated `add_*Servicer_to_server` does, except that requests arrive as bytes and
    are parsed here: gRPC-Python answers INTERNAL for bytes its deserializer rejects, before any
    of our code runs, and the contract says malformed input is INVALID_ARGUMENT.
    """
    service = pb.DESCRIPTOR.services_by_name[service_name]
    handlers = {}
    for method in service.methods:
        request_type = getattr(pb, method.input_type.name)
        response_type = getattr(pb, method.output_type.name)
        handlers[method.name] = grpc.unary_unary_rpc_method_handler(
            _parsing(method.name, request_type, getattr(servicer, method.name)),
            request_deserializer=None,
            response_serializer=response_type.SerializeToString,
        )
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler(service.full_name, handlers),))
    # As the generated code does; grpc's type stubs do not know this method yet.
    server.add_registered_method_handlers(  # type: ignore[attr-defined]
        service.full_name, handlers)


def _parsing(method: str, request_type: Any, behaviour: Callable[[Any, grpc.ServicerContext], R]
             ) -> Callable[[bytes, grpc.ServicerContext], R]:
    def parse_then_call(raw: bytes, context: grpc.ServicerContext) -> R:
        try:
            request = request_type.FromString(raw)
        except DecodeError as e:
            problem = (f"request: not a valid {request_type.DESCRIPTOR.full_name} message"
                       f" ({e})")

            def reject() -> R:
                raise InvalidArgument(problem)

            return handle(method, context, {}, reject)
        return behaviour(request, context)

    return parse_then_call


class RecommenderServicer(pb_grpc.RecommenderServicer):
    def __init__(self, use_cases: UseCases, catalog: Catalog) -> None:
        self.use_cases = use_cases
        self.catalog = catalog

    def Recommend(self, request: pb.RecommendRequest, context: grpc.ServicerContext
                  ) -> pb.Recommendation:
        ids = {"action_id": request.action_id[:256], "execution_id": request.execution_id[:256]}

        def run() -> pb.Recommendation:
            answer = self.use_cases.recommend(request_from_pb(self.catalog, request))
            ids["recommendation_id"] = answer.recommendation.id
            ids["source"] = answer.recommendation.decision.source
            metrics.record_recommendation(answer.recommendation.decision.source)
            return answer_to_pb(answer.recommendation, stored=answer.stored)

        return handle("Recommend", context, ids, run)

    def NextAfterOom(self, request: pb.NextAfterOomRequest, context: grpc.ServicerContext
                     ) -> pb.Recommendation:
        ids = {"recommendation_id": request.recommendation_id[:256]}

        def run() -> pb.Recommendation:
            rec_id, peak = next_after_oom_from_pb(request)
            answer = self.use_cases.next_after_oom(rec_id, peak)
            ids["next_recommendation_id"] = answer.recommendation.id
            metrics.record_recommendation(answer.recommendation.decision.source)
            return recommendation_to_pb(answer.recommendation, stored=answer.stored)

        return handle("NextAfterOom", context, ids, run)

    def RecordExecution(self, request: pb.ExecutionRecord, context: grpc.ServicerContext
                        ) -> pb.RecordExecutionResponse:
        ids = {"execution_id": request.execution_id[:256], "action_id": request.action_id[:256]}

        def run() -> pb.RecordExecutionResponse:
            execution = execution_from_pb(self.catalog, request, datetime.now(UTC))
            created = self.use_cases.record_execution(execution)
            if created:
                metrics.record_execution(execution.action_id, execution.outcome.value)
            return pb.RecordExecutionResponse(duplicate=not created)

        return handle("RecordExecution", context, ids, run)




class AdminServicer(pb_grpc.AdminServicer):
    def __init__(self, use_cases: UseCases, catalog: Catalog) -> None:
        self.use_cases = use_cases
        self.catalog = catalog

    def ListRecommendations(self, request: pb.ListRecommendationsRequest,
                            context: grpc.ServicerContext) -> pb.ListRecommendationsResponse:
        def run() -> pb.ListRecommendationsResponse:
            f, size, page_token = history_query_from_pb(self.catalog, request)
            try:
                entries, token = self.use_cases.list_history(f, size, page_token)
            except ValueError as e:
                if isinstance(e, InvalidArgument):
                    raise
                raise InvalidArgument(str(e)) from e
            return pb.ListRecommendationsResponse(
                recommendations=[history_entry_to_pb(e) for e in entries],
                next_page_token=token,
            )

        return handle("ListRecommendations", context, {"action_id": request.action_id}, run)

    def ListGpuModels(self, request: pb.ListGpuModelsRequest, context: grpc.ServicerContext
                      ) -> pb.ListGpuModelsResponse:
        return handle("ListGpuModels", context, {}, lambda: pb.ListGpuModelsResponse(
            gpu_models=[gpu_model_to_pb(m) for m in self.catalog]))

    def ListModelVersions(self, request: pb.ListModelVersionsRequest,
                          context: grpc.ServicerContext) -> pb.ListModelVersionsResponse:
        def run() -> pb.ListModelVersionsResponse:
            return pb.ListModelVersionsResponse(model_versions=[
                model_version_to_pb(v) for v in self.use_cases.list_model_versions()])

        return handle("ListModelVersions", context, {}, run)

    def AdviseLayout(self, request: pb.AdviseLayoutRequest, context: grpc.ServicerContext
                     ) -> pb.LayoutAdvice:
        def run() -> pb.LayoutAdvice:
            q = layout_query_from_pb(self.catalog, request, datetime.now(UTC))
            return layout_advice_to_pb(self.use_cases.advise_layout(
                q.model, q.gpus, q.since, q.until, q.pool_id))

        return handle("AdviseLayout", context, {"gpu_model": request.gpu_model[:64]}, run)

