"""`recommender serve`: the gRPC server with its cache, model poller and metrics."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING

from recommender.cli.options import database_url, redacted
from recommender.core import config

if TYPE_CHECKING:
    from recommender.core.cache import ActionCache
    from recommender.learning.serving import ModelHolder


def cmd_serve(args: argparse.Namespace) -> int:
    from recommender.core.cache import ActionCache
    from recommender.core.catalog import load_catalog
    from recommender.core.usecases import UseCases
    from recommender.learning.serving import ModelHolder
    from recommender.rpc import tracing
    from recommender.rpc.auth import resolve_admin_token
    from recommender.rpc.metrics import serve_metrics
    from recommender.rpc.server import (
        Tls,
        TlsConfigError,
        freeze_startup_heap,
        serve_until_signalled,
        shutdown_on_signals,
        start,
    )
    from recommender.store import SqlStore, connect, migrate
    from recommender.store.listener import ActionListener

    catalog = load_catalog(args.catalog_override or os.environ.get("RECOMMENDER_CATALOG_OVERRIDE"))
    admin_token = resolve_admin_token(args.admin_token, args.admin_token_file)
    try:
        tracing.configure()  # on when OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT is set
    except tracing.TracingConfigError as e:
        print(f"tracing: {e}", file=sys.stderr)
        return 2
    url = database_url(args)
    engine = connect(url)
    migrate(engine)
    logging.getLogger(__name__).info(
        "database %s migrated; catalog has %d GPU models", redacted(url), len(catalog))
    port = args.port if args.port is not None else int(
        os.environ.get("RECOMMENDER_PORT", config.DEFAULT_PORT))
    stop = shutdown_on_signals()
    store = SqlStore(engine)
    learned = ModelHolder(store)
    learned.start()  # picks up newly promoted model versions without a restart
    cache = ActionCache()
    listener = None
    if engine.dialect.name == "postgresql":
        # Other replicas may record executions: trust the cache only while listening.
        cache.enabled = False
        listener = ActionListener(engine, cache, origin=store.origin)
        listener.start()
    tls = None
    if args.tls_cert or args.tls_key:
        if not (args.tls_cert and args.tls_key):
            raise TlsConfigError("--tls-cert and --tls-key go together")
        tls = Tls.from_files(args.tls_cert, args.tls_key, args.tls_client_ca)
    elif args.tls_client_ca:
        raise TlsConfigError("--tls-client-ca needs --tls-cert and --tls-key")
    if args.metrics_port >= 0:
        _collect_metrics(learned, cache)
        serve_metrics(args.metrics_host, args.metrics_port)
    freeze_startup_heap()
    running = start(UseCases(store, catalog=catalog, learned=learned.current, cache=cache),
                    catalog, host=args.host, port=port, admin_token=admin_token, tls=tls,
                    max_workers=args.rpc_threads or config.RPC_THREADS)
    print(f"recommender listening on {args.host}:{running.port}", flush=True)
    serve_until_signalled(running, stop)
    tracing.shutdown()  # exports the spans still queued
    learned.stop()
    if listener is not None:
        listener.stop()
    store.close()
    return 0


def _collect_metrics(learned: ModelHolder, cache: ActionCache) -> None:
    from recommender.rpc.metrics import METRICS

    def gauges() -> Iterator[tuple[str, str, str, tuple[tuple[str, str], ...], float]]:
        current = learned.current()
        yield ("recommender_model_version_info", "gauge",
               "The learned model version serving (1), none when version=\"\".",
               (("version", current.version if current else ""),), 1.0)
        yield ("recommender_history_cache_hits_total", "counter",
               "Recommend calls answered from the per-action history cache.", (), cache.hits)
        yield ("recommender_history_cache_misses_total", "counter",
               "Recommend calls that read the action's history from the database.", (),
               cache.misses)

    METRICS.collect(gauges)
