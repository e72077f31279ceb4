"""`recommender serve`: the gRPC server with its cache, model poller and metrics."""

from __future__ import annotations

import argparse
import errno
import logging
import os
import socket
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING

from recommender.cli.logs import announce
from recommender.cli.options import ConfigError, database_url, redacted
from recommender.core import config
from recommender.core.domain import StoreUnavailable

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from recommender.core.cache import ActionCache
    from recommender.core.usecases import UseCases
    from recommender.learning.serving import ModelHolder
    from recommender.rpc.metrics import Sample as MetricSample
    from recommender.store.migrating import MigrationRetry

log = logging.getLogger(__name__)


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
    from recommender.store import SqlStore, connect
    from recommender.store.listener import ActionListener

    # Every setting is checked before the database is touched: a wrong one must not leave a
    # migrated database behind, nor fail after a slow migration.
    catalog = load_catalog(args.catalog_override or os.environ.get("RECOMMENDER_CATALOG_OVERRIDE"))
    admin_token = resolve_admin_token(args.admin_token, args.admin_token_file)
    try:
        tracing.configure()  # on when OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT is set
    except tracing.TracingConfigError as e:
        raise ConfigError(f"tracing: {e}") from None
    tls = None
    if args.tls_cert or args.tls_key:
        if not (args.tls_cert and args.tls_key):
            raise TlsConfigError("--tls-cert and --tls-key go together")
        tls = Tls.from_files(args.tls_cert, args.tls_key, args.tls_client_ca)
    elif args.tls_client_ca:
        raise TlsConfigError("--tls-client-ca needs --tls-cert and --tls-key")
    port = args.port if args.port is not None else config.DEFAULT_PORT
    check_bindable(args.host, port)
    url = database_url(args)
    engine = connect(url)
    stop = shutdown_on_signals()
    retry = _migrate_or_retry(engine, args.database_wait, stop)
    if retry is None:
        log.info("database %s migrated; catalog has %d GPU models", redacted(url),
                 len(catalog))
    store = SqlStore(engine)
    learned = ModelHolder(store, oom_wait_gpus=args.oom_wait_gpus)
    learned.start()  # picks up newly promoted model versions without a restart
    cache = ActionCache()
    listener = None
    if engine.dialect.name == "postgresql":
        # Other replicas may record executions: trust the cache only while listening.
        cache.enabled = False
        listener = ActionListener(engine, cache, origin=store.origin)
        listener.start()
    usecases = UseCases(store, catalog=catalog, learned=learned.current, cache=cache,
                        population_in_background=True, oom_wait_gpus=args.oom_wait_gpus)
    log.info("an OOM is priced at %g whole GPUs (--oom-wait-gpus; give retrain the same)",
             args.oom_wait_gpus)
    if args.metrics_port >= 0:
        _collect_metrics(learned, cache, usecases)
        serve_metrics(args.metrics_host, args.metrics_port)
    freeze_startup_heap()
    try:
        running = start(usecases, catalog, host=args.host, port=port, admin_token=admin_token,
                        tls=tls, max_workers=args.rpc_threads or config.RPC_THREADS)
    except (OSError, RuntimeError) as e:  # taken since check_bindable: gRPC says only "failed"
        learned.stop()
        raise ConfigError(f"--port {port} (RECOMMENDER_PORT): cannot listen on "
                          f"{args.host}:{port}: {e}") from None
    announce(log, f"recommender listening on {args.host}:{running.port}", host=args.host,
             port=running.port)
    serve_until_signalled(running, stop)
    tracing.shutdown()  # exports the spans still queued
    if retry is not None:
        retry.stop()
    learned.stop()
    if listener is not None:
        listener.stop()
    store.close()
    if retry is not None and retry.gave_up is not None:
        raise StoreUnavailable(retry.gave_up)
    return 0


def _migrate_or_retry(engine: Engine, wait_s: float, stop: threading.Event
                      ) -> MigrationRetry | None:
    """Migrates now (None), or, a database server being unreachable and a wait allowed, goes
    on without it and migrates in the background (store/migrating.py): the retry, which sets
    `stop` if it gives up."""
    from recommender.store import migrate
    from recommender.store.migrating import MigrationRetry

    try:
        migrate(engine)
        return None
    except StoreUnavailable as e:
        if wait_s <= 0 or engine.dialect.name == "sqlite":
            raise
        first = str(e)
    log.warning("database unavailable at start (%s): answering from the request alone, and "
                "migrating it once it is up (stopping if it is not within %g s, "
                "--database-wait)", first, wait_s)
    retry = MigrationRetry(lambda: migrate(engine), wait_s, on_give_up=stop.set)
    retry.start()
    return retry


def check_bindable(host: str, port: int) -> None:
    """Binds (host, port) and lets go, as gRPC will bind it: a port already taken or not
    allowed is a ConfigError naming the option, before the database is migrated. (gRPC itself
    answers a taken port with a bare RuntimeError, after everything else has started.)"""
    if port == 0:
        return
    bare = host.strip("[]")
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            bare or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
    except socket.gaierror as e:
        raise ConfigError(f"--host {host}: {e.strerror}") from None
    try:
        sock = socket.socket(family, kind, proto)
    except OSError:
        if bare != "::":
            raise
        return check_bindable("0.0.0.0", port)  # no IPv6 here; gRPC falls back to IPv4 too
    with sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as gRPC sets it
        if family == socket.AF_INET6 and bare == "::":
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)  # gRPC's [::] is dual
        try:
            sock.bind(address)
        except OSError as e:
            where = f"--port {port} (RECOMMENDER_PORT)"
            if e.errno == errno.EADDRINUSE:
                raise ConfigError(f"{where}: {host}:{port} is already in use by another "
                                  "process; choose another port") from None
            if e.errno == errno.EACCES:
                raise ConfigError(f"{where}: not allowed to listen on {host}:{port} (ports "
                                  "below 1024 need privileges)") from None
            if e.errno == errno.EADDRNOTAVAIL:
                raise ConfigError(f"--host {host}: not an address of this machine") from None
            raise ConfigError(f"{where}: cannot listen on {host}:{port}: {e.strerror}"
                              ) from None


def _collect_metrics(learned: ModelHolder, cache: ActionCache, usecases: UseCases) -> None:
    from recommender.rpc.metrics import METRICS

    def gauges() -> Iterator[MetricSample]:
        current = learned.current()
        yield ("recommender_model_version_info", "gauge",
               "The learned model version serving (1), none when version=\"\".",
               (("version", current.version if current else ""),), 1.0)
        yield ("recommender_history_cache_hits_total", "counter",
               "Recommend calls answered from the per-action history cache.", (), cache.hits)
        yield ("recommender_history_cache_misses_total", "counter",
               "Recommend calls that read the action's history from the database.", (),
               cache.misses)
        yield from prior_gauges(usecases)
        yield from price_gauges(usecases)

    METRICS.collect(gauges)


def price_gauges(usecases: UseCases) -> Iterator[MetricSample]:
    """The price of an OOM this replica weighs: the one setting between memory and OOMs, to
    hold beside the retraining job's (each model version's `oom_wait_gpus`)."""
    yield ("recommender_oom_wait_gpus", "gauge",
           "The price of an OOM this replica weighs: the user's wait for the rerun, in whole "
           "GPUs of the pool's model for the run's duration (--oom-wait-gpus).", (),
           usecases.oom_wait_gpus)


def prior_gauges(usecases: UseCases) -> Iterator[MetricSample]:
    """What this replica has learned to expect of an action it knows little of: the spreads
    its young actions are shrunk towards (an operator's view of the cold start)."""
    text = ("Learned prior spread of an action's per-worker peak, in log (0.1 = about 10 %): "
            "the population's run to run (designs without inputs), and what designs on the "
            "request's inputs leave (once enough actions show it).")
    population = usecases.population
    if population is not None:
        yield ("recommender_prior_spread", "gauge", text, (("designs", "without inputs"),),
               population.log_scale)
    inputs = usecases.action_models.input_prior
    if inputs is not None:
        yield ("recommender_prior_spread", "gauge", text, (("designs", "on inputs"),), inputs)
