"""Tracing: `recommender serve` exports a span per RPC to a real OTLP receiver on loopback
(OTLP/HTTP and OTLP/gRPC), with the ids as attributes and the trace id in the access line; and
with no endpoint set, nothing of OpenTelemetry is even imported."""

from __future__ import annotations

import gzip
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent import futures
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import grpc
import pytest
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2 as otlp
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc as otlp_grpc
from opentelemetry.proto.trace.v1 import trace_pb2

from recommender._proto.intelliscale.recommender.v1 import recommender_pb2_grpc as pb_grpc
from tests.helpers import access_lines, record, request

TRACEPARENT_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
TRACEPARENT_SPAN = "00f067aa0ba902b7"


@dataclass
class Received:
    """What a receiver was sent: the decoded export requests."""

    requests: list[otlp.ExportTraceServiceRequest] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, raw: bytes) -> None:
        message = otlp.ExportTraceServiceRequest.FromString(raw)
        with self.lock:
            self.requests.append(message)

    def spans(self) -> list[tuple[dict[str, Any], trace_pb2.Span]]:
        """(resource attributes, span) for every span received."""
        out = []
        with self.lock:
            for req in self.requests:
                for rs in req.resource_spans:
                    resource = {a.key: a.value.string_value for a in rs.resource.attributes}
                    for ss in rs.scope_spans:
                        out += [(resource, s) for s in ss.spans]
        return out


@pytest.fixture
def http_receiver() -> Iterator[tuple[str, Received]]:
    """An OTLP/HTTP receiver: POST /v1/traces with a protobuf ExportTraceServiceRequest."""
    received = Received()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            if self.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            if self.path != "/v1/traces" or \
                    self.headers.get("Content-Type") != "application/x-protobuf":
                self.send_error(404)
                return
            received.add(body)
            answer = otlp.ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, format: str, *args: object) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", received
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def grpc_receiver() -> Iterator[tuple[str, Received]]:
    """An OTLP/gRPC receiver: opentelemetry.proto.collector.trace.v1.TraceService/Export."""
    received = Received()

    class Service(otlp_grpc.TraceServiceServicer):  # type: ignore[misc]
        def Export(self, req: otlp.ExportTraceServiceRequest, context: grpc.ServicerContext
                   ) -> otlp.ExportTraceServiceResponse:
            received.add(req.SerializeToString())
            return otlp.ExportTraceServiceResponse()

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    otlp_grpc.add_TraceServiceServicer_to_server(Service(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield f"http://127.0.0.1:{port}", received
    finally:
        server.stop(0)


def otel_free_environ() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}


@dataclass
class Served:
    proc: subprocess.Popen[bytes]
    port: int
    log: Path

    def stop(self) -> str:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=30)
        return self.log.read_text(errors="replace")


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Any]:
    started: list[Served] = []

    def run(env: dict[str, str]) -> Served:
        out, log = tmp_path / "out", tmp_path / "log"
        with out.open("wb") as o, log.open("wb") as e:
            proc = subprocess.Popen(
                [sys.executable, "-m", "recommender", "serve", "--host", "127.0.0.1",
                 "--port", "0", "--metrics-port", "-1",
                 "--database-url", f"sqlite:///{tmp_path / 'r.db'}"],
                cwd=tmp_path, env={**otel_free_environ(), **env}, stdin=subprocess.DEVNULL,
                stdout=o, stderr=e)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            match = re.search(r"listening on .*:(\d+)", out.read_text())
            if match:
                served = Served(proc, int(match.group(1)), log)
                started.append(served)
                return served
            time.sleep(0.05)
        proc.kill()
        raise AssertionError(f"server did not start: {log.read_text()[-2000:]}")

    yield run
    for s in started:
        if s.proc.poll() is None:
            s.proc.kill()
            s.proc.wait(timeout=10)


def make_calls(port: int) -> None:
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = pb_grpc.RecommenderStub(channel)
        stub.Recommend(request("trace-act", declared=1000, execution="exec-t1"), timeout=10,
                       metadata=[("traceparent", f"00-{TRACEPARENT_TRACE}-{TRACEPARENT_SPAN}-01")])
        stub.RecordExecution(record("exec-t1", "trace-act"), timeout=10)
        with pytest.raises(grpc.RpcError):
            stub.Recommend(request(""), timeout=10)


def wait_for(received: Received, n: int) -> list[tuple[dict[str, Any], trace_pb2.Span]]:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        spans = received.spans()
        if len(spans) >= n:
            return spans
        time.sleep(0.05)
    raise AssertionError(f"{len(received.spans())} spans received, {n} expected")


def attributes(span: trace_pb2.Span) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for a in span.attributes:
        kind = a.value.WhichOneof("value")
        out[a.key] = getattr(a.value, kind) if kind else None
    return out


def check_spans(spans: list[tuple[dict[str, Any], trace_pb2.Span]], log: str) -> None:
    by_name: dict[str, list[trace_pb2.Span]] = {}
    for resource, span in spans:
        assert resource["service.name"] == "intelliscale-recommender"
        by_name.setdefault(span.name, []).append(span)
    recommend = by_name["intelliscale.recommender.v1.Recommender/Recommend"]
    assert len(recommend) == 2
    ok = next(s for s in recommend if attributes(s)["rpc.grpc.status_code"] == 0)
    bad = next(s for s in recommend if attributes(s)["rpc.grpc.status_code"] == 3)
    a = attributes(ok)
    assert a["recommender.action_id"] == "trace-act"
    assert a["recommender.execution_id"] == "exec-t1"
    assert a["recommender.recommendation_id"]
    assert a["rpc.system"] == "grpc" and a["rpc.method"] == "Recommend"
    assert ok.kind == trace_pb2.Span.SPAN_KIND_SERVER
    # The caller's traceparent makes the call's span its child.
    assert ok.trace_id.hex() == TRACEPARENT_TRACE
    assert ok.parent_span_id.hex() == TRACEPARENT_SPAN
    assert "pools" in attributes(bad)["rpc.grpc.status_text"] or \
        "action_id" in attributes(bad)["rpc.grpc.status_text"]
    (recorded,) = by_name["intelliscale.recommender.v1.Recommender/RecordExecution"]
    assert attributes(recorded)["recommender.execution_id"] == "exec-t1"
    assert not recorded.parent_span_id
    # Each access line names its span's trace.
    lines = access_lines(log)
    traced = {line["trace_id"]: line for line in lines if "trace_id" in line}
    assert traced[TRACEPARENT_TRACE]["method"] == "Recommend"
    assert traced[recorded.trace_id.hex()]["method"] == "RecordExecution"
    assert traced[recorded.trace_id.hex()]["execution_id"] == "exec-t1"


def test_spans_over_otlp_http(serve: Any, http_receiver: tuple[str, Received]) -> None:
    endpoint, received = http_receiver
    served = serve({"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_BSP_SCHEDULE_DELAY": "50"})
    make_calls(served.port)
    spans = wait_for(received, 3)
    check_spans(spans, served.stop())


def test_spans_over_otlp_grpc(serve: Any, grpc_receiver: tuple[str, Received]) -> None:
    endpoint, received = grpc_receiver
    served = serve({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": endpoint,
                    "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"})
    make_calls(served.port)
    log = served.stop()  # the default 5 s batch delay: the spans go at shutdown
    check_spans(wait_for(received, 3), log)


def test_unknown_protocol_is_a_configuration_error(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "recommender", "serve", "--port", "0", "--metrics-port", "-1"],
        cwd=tmp_path, capture_output=True, text=True, timeout=60,
        env={**otel_free_environ(), "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9",
             "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"})
    assert out.returncode == 2
    assert "OTEL_EXPORTER_OTLP_PROTOCOL='http/json'" in out.stderr
    assert "Traceback" not in out.stderr
    assert not (tmp_path / "recommender.db").exists()


def test_off_without_an_endpoint_imports_nothing(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "import recommender.cli, recommender.rpc.server, recommender.rpc.servicers\n"
        "from recommender.rpc import tracing\n"
        "assert tracing.configure() is False\n"
        "assert tracing.start_call('Recommend', None) is None\n"
        "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                         text=True, timeout=60, env=otel_free_environ())
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_access_line_has_no_trace_id_when_off(serve: Any) -> None:
    served = serve({})
    with grpc.insecure_channel(f"127.0.0.1:{served.port}") as channel:
        pb_grpc.RecommenderStub(channel).Recommend(request("untraced", declared=1000),
                                                   timeout=10)
    log = served.stop()
    lines = access_lines(log)
    assert lines and all("trace_id" not in line for line in lines)
