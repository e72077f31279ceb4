"""Prometheus metrics on their own port, in the text exposition format, without dependencies.

What an operator watches: calls by method and status code, their latency, recommendations by
source, executions and OOMs per action (the OOM rate by action is their ratio), the model
version serving, and the history cache's hit rate.
"""

from __future__ import annotations

import bisect
import functools
import logging
import threading
from collections.abc import Callable, Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from recommender.core import config

log = logging.getLogger(__name__)

Labels = tuple[tuple[str, str], ...]
LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(labels: Labels, extra: str = "") -> str:
    parts = [f'{k}="{_escape(v)}"' for k, v in labels]
    if extra:
        parts.append(extra)
    return "{" + ",".join(parts) + "}" if parts else ""


class Registry:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counters: dict[str, dict[Labels, float]] = {}
        self._histograms: dict[str, dict[Labels, list[float]]] = {}
        self._help: dict[str, tuple[str, str]] = {}
        self._collectors: list[Callable[[], Iterable[tuple[str, str, str, Labels, float]]]] = []
        self._actions: set[str] = set()

    def describe(self, name: str, kind: str, text: str) -> None:
        self._help[name] = (kind, text)

    def inc(self, name: str, labels: Labels = (), value: float = 1.0) -> None:
        with self._lock:
            series = self._counters.setdefault(name, {})
            series[labels] = series.get(labels, 0.0) + value

    def observe(self, name: str, labels: Labels, value: float) -> None:
        with self._lock:
            series = self._histograms.setdefault(name, {})
            counts = series.setdefault(labels, [0.0] * (len(LATENCY_BUCKETS) + 2))
            for i in range(bisect.bisect_left(LATENCY_BUCKETS, value), len(LATENCY_BUCKETS)):
                counts[i] += 1  # cumulative: every bucket whose bound is >= value
            counts[-2] += 1  # count
            counts[-1] += value  # sum

    def action_label(self, action_id: str) -> str:
        """Per-action series, up to a bound: beyond it, actions share the label "other"."""
        with self._lock:
            if action_id in self._actions:
                return action_id
            if len(self._actions) < config.METRICS_MAX_ACTIONS:
                self._actions.add(action_id)
                return action_id
        return "other"

    def collect(self, fn: Callable[[], Iterable[tuple[str, str, str, Labels, float]]]) -> None:
        """`fn` yields (name, kind, help, labels, value) at scrape time."""
        self._collectors.append(fn)

    def render(self) -> str:
        lines: list[str] = []
        with self._lock:
            counters = {k: dict(v) for k, v in self._counters.items()}
            histograms = {k: {lb: list(c) for lb, c in v.items()}
                          for k, v in self._histograms.items()}
        for name, series in sorted(counters.items()):
            kind, text = self._help.get(name, ("counter", name))
            lines += [f"# HELP {name} {text}", f"# TYPE {name} {kind}"]
            lines += [f"{name}{_labels(lb)} {v:g}" for lb, v in sorted(series.items())]
        for name, hseries in sorted(histograms.items()):
            _, text = self._help.get(name, ("histogram", name))
            lines += [f"# HELP {name} {text}", f"# TYPE {name} histogram"]
            for lb, counts in sorted(hseries.items()):
                for bound, n in zip(LATENCY_BUCKETS, counts, strict=False):
                    le = 'le="' + f"{bound:g}" + '"'
                    lines.append(f"{name}_bucket{_labels(lb, le)} {n:g}")
                inf = 'le="+Inf"'
                lines.append(f"{name}_bucket{_labels(lb, inf)} {counts[-2]:g}")
                lines.append(f"{name}_count{_labels(lb)} {counts[-2]:g}")
                lines.append(f"{name}_sum{_labels(lb)} {counts[-1]:g}")
        seen: set[str] = set()
        for fn in self._collectors:
            try:
                for name, kind, text, lb, value in fn():
                    if name not in seen:
                        lines += [f"# HELP {name} {text}", f"# TYPE {name} {kind}"]
                        seen.add(name)
                    lines.append(f"{name}{_labels(lb)} {value:g}")
            except Exception:  # a broken collector must not break the scrape
                log.exception("metrics collector failed")
        return "\n".join(lines) + "\n"


METRICS = Registry()
METRICS.describe("recommender_calls_total", "counter", "gRPC calls by method and status code.")
METRICS.describe("recommender_call_duration_seconds", "histogram",
                 "gRPC call latency in seconds, by method.")
METRICS.describe("recommender_recommendations_total", "counter",
                 "Recommendations by source (prior, history, model, fallback, ladder).")
METRICS.describe("recommender_executions_total", "counter",
                 "Recorded executions by action and outcome; the OOM rate of an action is "
                 "outcome=\"OOM\" over all its outcomes.")


def record_call(method: str, code: str, seconds: float) -> None:
    METRICS.inc("recommender_calls_total", _call_labels(method, code))
    METRICS.observe("recommender_call_duration_seconds", _method_labels(method), seconds)


@functools.lru_cache(maxsize=256)
def _call_labels(method: str, code: str) -> Labels:
    """The same few label tuples on every call, built once."""
    return (("method", method), ("code", code))


@functools.lru_cache(maxsize=64)
def _method_labels(method: str) -> Labels:
    return (("method", method),)


def record_recommendation(source: str) -> None:
    METRICS.inc("recommender_recommendations_total", (("source", source),))


def record_execution(action_id: str, outcome: str) -> None:
    METRICS.inc("recommender_executions_total",
                (("action_id", METRICS.action_label(action_id)), ("outcome", outcome)))


class _Handler(BaseHTTPRequestHandler):
    registry: Registry = METRICS

    def do_GET(self) -> None:
        if self.path.split("?")[0] not in ("/metrics", "/"):
            self.send_error(404)
            return
        body = self.registry.render().encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:  # scrapes are not news
        return


def serve_metrics(host: str, port: int) -> ThreadingHTTPServer | None:
    """Starts the endpoint in a daemon thread; None (and a warning) when the port is taken:
    metrics must never keep the recommender from serving."""
    try:
        server = ThreadingHTTPServer((host, port), _Handler)
    except OSError as e:
        log.warning("metrics endpoint not started on %s:%d: %s", host, port, e)
        return None
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="metrics", daemon=True).start()
    log.info("metrics on http://%s:%d/metrics", host, server.server_address[1])
    return server
