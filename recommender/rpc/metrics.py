"""Prometheus metrics on their own port, through prometheus_client, in a registry of our own.

What an operator watches: calls by method and status code, their latency, recommendations by
source, executions and OOMs per action (the OOM rate by action is their ratio), the model
version serving, the history cache's hit rate, and the process itself (CPU, memory, open file
descriptors, Python version and garbage collections: the standard process, platform and GC
collectors).

A registry of our own, not prometheus_client's global one: a library imported into the process
cannot add series to our endpoint, and each test can build a fresh `Metrics()`. Values are
written by prometheus_client in full precision (a hand-written `:g` exposition stopped a counter
moving past about a million: `1.23457e+06` before and after +5).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Iterator
from wsgiref.simple_server import WSGIServer

from prometheus_client import (
    GC_COLLECTOR,
    CollectorRegistry,
    Counter,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    disable_created_metrics,
    generate_latest,
    start_http_server,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from recommender.core import config

log = logging.getLogger(__name__)

Labels = tuple[tuple[str, str], ...]
Sample = tuple[str, str, str, Labels, float]
"""(name, kind "counter" or "gauge", help, labels, value), yielded by a collector at scrape."""

# The `_created` twin of every counter doubles the series for a timestamp nobody graphs.
disable_created_metrics()  # type: ignore[no-untyped-call]

LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)


class _Callbacks(Collector):
    """Values read at scrape time (the model version serving, the cache's counts)."""

    def __init__(self) -> None:
        self.fns: list[Callable[[], Iterable[Sample]]] = []

    def collect(self) -> Iterator[Metric]:
        families: dict[str, CounterMetricFamily | GaugeMetricFamily] = {}
        for fn in list(self.fns):
            try:
                samples = list(fn())
            except Exception:  # a broken collector must not break the scrape
                log.exception("metrics collector failed")
                continue
            for name, kind, text, labels, value in samples:
                family = families.get(name)
                if family is None:
                    cls = CounterMetricFamily if kind == "counter" else GaugeMetricFamily
                    family = families[name] = cls(name, text, labels=[k for k, _ in labels])
                family.add_metric([v for _, v in labels], value)
        yield from families.values()

    def describe(self) -> Iterable[Metric]:
        return []  # values are only known at scrape time


class Metrics:
    """The service's metrics and the registry they are exposed from."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.calls = Counter("recommender_calls_total", "gRPC calls by method and status code.",
                             ["method", "code"], registry=self.registry)
        self.call_duration = Histogram(
            "recommender_call_duration_seconds", "gRPC call latency in seconds, by method.",
            ["method"], buckets=LATENCY_BUCKETS, registry=self.registry)
        self.recommendations = Counter(
            "recommender_recommendations_total",
            "Recommendations by source (prior, history, model, fallback, ladder).",
            ["source"], registry=self.registry)
        self.executions = Counter(
            "recommender_executions_total",
            "Recorded executions by action and outcome; the OOM rate of an action is "
            "outcome=\"OOM\" over all its outcomes.",
            ["action_id", "outcome"], registry=self.registry)
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        self.registry.register(GC_COLLECTOR)
        self._callbacks = _Callbacks()
        self.registry.register(self._callbacks)
        self._lock = threading.Lock()
        self._actions: set[str] = set()

    def action_label(self, action_id: str) -> str:
        """Per-action series, up to a bound: beyond it, actions share the label "other"."""
        with self._lock:
            if action_id in self._actions:
                return action_id
            if len(self._actions) < config.METRICS_MAX_ACTIONS:
                self._actions.add(action_id)
                return action_id
        return "other"

    def collect(self, fn: Callable[[], Iterable[Sample]]) -> None:
        """`fn` yields (name, kind, help, labels, value) at scrape time."""
        self._callbacks.fns.append(fn)

    def render(self) -> str:
        """The text exposition, as a scrape gets it."""
        return generate_latest(self.registry).decode()


METRICS = Metrics()


_call_series: dict[tuple[Metrics, str, str], tuple[Counter, Histogram]] = {}
_source_series: dict[tuple[Metrics, str], Counter] = {}
"""The labelled children of the per-call series, by label values: `labels()` builds a key and
takes the metric's lock on every call; the methods, codes and sources are a few dozen values."""


def record_call(method: str, code: str, seconds: float) -> None:
    metrics = METRICS
    series = _call_series.get((metrics, method, code))
    if series is None:
        series = _call_series[(metrics, method, code)] = (
            metrics.calls.labels(method=method, code=code),
            metrics.call_duration.labels(method=method))
    series[0].inc()
    series[1].observe(seconds)


def record_recommendation(source: str) -> None:
    metrics = METRICS
    series = _source_series.get((metrics, source))
    if series is None:
        series = _source_series[(metrics, source)] = metrics.recommendations.labels(source=source)
    series.inc()


_execution_series: dict[tuple[Metrics, str, str], Counter] = {}
"""The executions series by action and outcome, like the two tables above, for the actions that
have a series of their own (at most METRICS_MAX_ACTIONS: the table stays bounded, whatever ids
clients send); an action counted under "other" takes the lock each time, as before."""


def record_execution(action_id: str, outcome: str) -> None:
    metrics = METRICS
    series = _execution_series.get((metrics, action_id, outcome))
    if series is None:
        label = metrics.action_label(action_id)
        series = metrics.executions.labels(action_id=label, outcome=outcome)
        if label == action_id:
            _execution_series[(metrics, action_id, outcome)] = series
    series.inc()


def serve_metrics(host: str, port: int, metrics: Metrics = METRICS) -> WSGIServer | None:
    """Starts the endpoint (any path answers) in a daemon thread; None (and a warning) when the
    port is taken: metrics must never keep the recommender from serving."""
    try:
        server, _thread = start_http_server(port, host, registry=metrics.registry)
    except OSError as e:
        log.warning("metrics endpoint not started on %s:%d: %s", host, port, e)
        return None
    log.info("metrics on http://%s:%d/metrics", host, server.server_address[1])
    return server
