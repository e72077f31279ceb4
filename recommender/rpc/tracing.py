"""OpenTelemetry tracing: one span per RPC, exported over OTLP, configured the standard way.

On when `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or `OTEL_EXPORTER_OTLP_ENDPOINT` is set, with the
protocol of `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL` or `OTEL_EXPORTER_OTLP_PROTOCOL`
(`http/protobuf`, the default as in the OpenTelemetry specification, or `grpc`). The exporters
read the rest of the standard variables themselves (headers, timeouts, certificates,
`OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`, `OTEL_BSP_*`). Off otherwise, and then costless:
nothing from `opentelemetry` is imported and `start_call` returns None after one global read.

A call's span is named after the gRPC method (`intelliscale.recommender.v1.Recommender/
Recommend`) and carries the RPC semantic attributes, the status code and the ids the access log
line carries (`recommender.action_id`, `recommender.execution_id`, ...). A caller that sends a
W3C `traceparent` in its metadata gets the span as a child of its own; the access line carries
the span's `trace_id` so that a log line leads to its trace.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Any

import grpc

log = logging.getLogger(__name__)

ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
PROTOCOL_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")
PROTOCOLS = ("http/protobuf", "grpc")
DEFAULT_SERVICE_NAME = "intelliscale-recommender"
ATTRIBUTE_PREFIX = "recommender."

_tracer: Any = None
"""The opentelemetry Tracer while tracing is on; None (and nothing imported) while it is off."""
_provider: Any = None
_services: dict[str, str] = {}


class TracingConfigError(ValueError):
    """The OTLP settings in the environment cannot be used (an unknown protocol)."""


def enabled_by(environ: Mapping[str, str]) -> bool:
    return any(environ.get(v, "").strip() for v in ENDPOINT_VARIABLES)


def protocol_of(environ: Mapping[str, str]) -> str:
    for variable in PROTOCOL_VARIABLES:
        value = environ.get(variable, "").strip()
        if value:
            if value not in PROTOCOLS:
                raise TracingConfigError(
                    f"{variable}={value!r}: the recommender exports traces over "
                    f"{' or '.join(PROTOCOLS)}")
            return value
    return "http/protobuf"


def configure(environ: Mapping[str, str] | None = None) -> bool:
    """Turns tracing on when the environment names an OTLP endpoint; True when on."""
    global _tracer, _provider
    environ = os.environ if environ is None else environ
    if not enabled_by(environ):
        return False
    protocol = protocol_of(environ)
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter

    exporter: SpanExporter
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
            OTLPSpanExporter as GrpcExporter,
        )
        exporter = GrpcExporter()
    else:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
            OTLPSpanExporter as HttpExporter,
        )
        exporter = HttpExporter()
    # Resource.create reads OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES, which win.
    defaults = {} if environ.get("OTEL_SERVICE_NAME") else {SERVICE_NAME: DEFAULT_SERVICE_NAME}
    provider = TracerProvider(resource=Resource.create(defaults))
    # Spans are exported from a background thread, in batches: a call never waits for the
    # collector, and a collector that is down costs dropped spans, never slower calls.
    provider.add_span_processor(BatchSpanProcessor(exporter))
    _provider = provider
    _tracer = provider.get_tracer("recommender.rpc")
    endpoint = next(environ[v] for v in ENDPOINT_VARIABLES if environ.get(v, "").strip())
    log.info("tracing on: OTLP %s to %s", protocol, endpoint)
    return True


def shutdown() -> None:
    """Exports the spans still queued and turns tracing off (at server stop)."""
    global _tracer, _provider
    provider, _tracer, _provider = _provider, None, None
    if provider is not None:
        provider.shutdown()


def force_flush() -> None:
    if _provider is not None:
        _provider.force_flush()


def _full_method(method: str) -> str:
    if not _services:
        from recommender._proto.intelliscale.recommender.v1 import recommender_pb2 as pb

        for service in pb.DESCRIPTOR.services_by_name.values():
            for m in service.methods:
                _services[m.name] = service.full_name
    return f"{_services.get(method, 'unknown')}/{method}"


class Call:
    """One RPC's span, ended with its status and ids."""

    def __init__(self, span: Any) -> None:
        self.span = span
        context = span.get_span_context()
        self.trace_id = f"{context.trace_id:032x}"
        self.span_id = f"{context.span_id:016x}"

    def end(self, code: str, message: str, ids: Mapping[str, str]) -> None:
        from opentelemetry.trace import Status, StatusCode

        span = self.span
        for key, value in ids.items():
            if value:
                span.set_attribute(ATTRIBUTE_PREFIX + key, value)
        span.set_attribute("rpc.grpc.status_code", grpc.StatusCode[code].value[0])
        if code != "OK":
            # As the RPC conventions say for servers: these codes are the server's fault;
            # the others (INVALID_ARGUMENT, NOT_FOUND, ...) are the caller's and leave it unset.
            if code in ("UNKNOWN", "DEADLINE_EXCEEDED", "UNIMPLEMENTED", "INTERNAL",
                        "UNAVAILABLE", "DATA_LOSS"):
                span.set_status(Status(StatusCode.ERROR, f"{code}: {message}"))
            span.set_attribute("rpc.grpc.status_text", message)
        span.end()


def start_call(method: str, context: grpc.ServicerContext) -> Call | None:
    """The span of one call, or None when tracing is off (the common, costless case)."""
    tracer = _tracer
    if tracer is None:
        return None
    return _start(tracer, method, context)


def _start(tracer: Any, method: str, context: grpc.ServicerContext) -> Call:
    from opentelemetry import propagate
    from opentelemetry.trace import SpanKind

    try:
        carrier = {k: v for k, v in (context.invocation_metadata() or ())
                   if isinstance(v, str)}
    except Exception:  # a context without metadata (a test double): a root span
        carrier = {}
    full = _full_method(method)
    service = full.rsplit("/", 1)[0]
    span = tracer.start_span(full, context=propagate.extract(carrier), kind=SpanKind.SERVER,
                             attributes={"rpc.system": "grpc", "rpc.service": service,
                                         "rpc.method": method})
    return Call(span)
