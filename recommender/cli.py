"""The `recommender` command: serve, migrate, history, and the jobs around the service."""

from __future__ import annotations

import argparse
import csv
import json
import logging
import os
import re
import sys
from collections import Counter
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from recommender.learning.serving import ModelHolder
    from recommender.store.cache import ActionCache
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from recommender import config

if TYPE_CHECKING:
    from recommender.domain import HistoryEntry


def _database_url(args: argparse.Namespace) -> str:
    return str(args.database_url or os.environ.get("RECOMMENDER_DATABASE_URL")
               or config.DEFAULT_DATABASE_URL)


def _setup_logging(level: str) -> None:
    logging.basicConfig(
        level=getattr(logging, level.upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s %(message)s",
        stream=sys.stderr,
    )
    # Alembic narrates every plugin at INFO; only its warnings concern an operator.
    logging.getLogger("alembic").setLevel(logging.WARNING)


def _redacted(url: str) -> str:
    from sqlalchemy import make_url

    return make_url(url).render_as_string(hide_password=True)


def cmd_serve(args: argparse.Namespace) -> int:
    from recommender.auth import resolve_admin_token
    from recommender.catalog import load_catalog
    from recommender.engine import RecommenderEngine
    from recommender.learning.serving import ModelHolder
    from recommender.metrics import serve_metrics
    from recommender.rpc import tracing
    from recommender.server import (
        Tls,
        TlsConfigError,
        freeze_startup_heap,
        serve_until_signalled,
        shutdown_on_signals,
        start,
    )
    from recommender.store import SqlStore, connect, migrate
    from recommender.store.cache import ActionCache, ActionListener

    catalog = load_catalog(args.catalog_override or os.environ.get("RECOMMENDER_CATALOG_OVERRIDE"))
    admin_token = resolve_admin_token(args.admin_token, args.admin_token_file)
    try:
        tracing.configure()  # on when OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT is set
    except tracing.TracingConfigError as e:
        print(f"tracing: {e}", file=sys.stderr)
        return 2
    url = _database_url(args)
    engine = connect(url)
    migrate(engine)
    logging.getLogger(__name__).info(
        "database %s migrated; catalog has %d GPU models", _redacted(url), len(catalog))
    port = args.port if args.port is not None else int(
        os.environ.get("RECOMMENDER_PORT", config.DEFAULT_PORT))
    stop = shutdown_on_signals()
    store = SqlStore(engine)
    models = ModelHolder(store)
    models.start()  # picks up newly promoted model versions without a restart
    cache = ActionCache()
    listener = None
    if engine.dialect.name == "postgresql":
        # Other replicas may record executions: trust the cache only while listening.
        cache.enabled = False
        listener = ActionListener(engine, cache)
        listener.start()
    tls = None
    if args.tls_cert or args.tls_key:
        if not (args.tls_cert and args.tls_key):
            raise TlsConfigError("--tls-cert and --tls-key go together")
        tls = Tls.from_files(args.tls_cert, args.tls_key, args.tls_client_ca)
    elif args.tls_client_ca:
        raise TlsConfigError("--tls-client-ca needs --tls-cert and --tls-key")
    if args.metrics_port >= 0:
        _collect_metrics(models, cache)
        serve_metrics(args.metrics_host, args.metrics_port)
    freeze_startup_heap()
    running = start(RecommenderEngine(store, catalog=catalog, models=models, cache=cache),
                    catalog, host=args.host, port=port, admin_token=admin_token, tls=tls,
                    max_workers=args.rpc_threads or config.RPC_THREADS)
    print(f"recommender listening on {args.host}:{running.port}", flush=True)
    serve_until_signalled(running, stop)
    tracing.shutdown()  # exports the spans still queued
    models.stop()
    if listener is not None:
        listener.stop()
    store.close()
    return 0


def _collect_metrics(models: ModelHolder, cache: ActionCache) -> None:
    from recommender.metrics import METRICS

    def gauges() -> Iterator[tuple[str, str, str, tuple[tuple[str, str], ...], float]]:
        current = models.current()
        yield ("recommender_model_version_info", "gauge",
               "The learned model version serving (1), none when version=\"\".",
               (("version", current.version if current else ""),), 1.0)
        yield ("recommender_history_cache_hits_total", "counter",
               "Recommend calls answered from the per-action history cache.", (), cache.hits)
        yield ("recommender_history_cache_misses_total", "counter",
               "Recommend calls that read the action's history from the database.", (),
               cache.misses)

    METRICS.collect(gauges)


def cmd_retrain(args: argparse.Namespace) -> int:
    from recommender.catalog import load_catalog
    from recommender.learning.retrain import Progress, retrain
    from recommender.store import connect, migrate

    catalog = load_catalog(args.catalog_override or os.environ.get("RECOMMENDER_CATALOG_OVERRIDE"))
    engine = connect(_database_url(args), timeout_s=None)
    migrate(engine)
    progress = Progress(not args.quiet)
    result = retrain(engine, catalog, quantile=args.quantile, progress=progress)
    progress.done()
    if not result.version:
        print(f"no new version: {result.reason}")
        return 0
    print(f"version {result.version}: {result.reason}")
    for key in ("test_oom_rate", "test_reserved_gbh", "test_coverage", "incumbent_oom_rate",
                "incumbent_reserved_gbh"):
        print(f"  {key}: {result.metrics[key]:,.4f}")
    return 0


def cmd_migrate(args: argparse.Namespace) -> int:
    from recommender.store import connect
    from recommender.store.database import current_revision, downgrade, migrate

    engine = connect(_database_url(args))
    if args.downgrade:
        downgrade(engine, args.downgrade)
    else:
        migrate(engine, args.revision)
    print(f"database at revision {current_revision(engine)}")
    return 0


def _when(value: str) -> datetime:
    """An ISO time (naive means UTC), or a duration ago: 30m, 24h, 7d, 2w."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*", value)
    if m:
        seconds = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}[m.group(2)]
        return datetime.now(UTC) - timedelta(seconds=float(m.group(1)) * seconds)
    try:
        t = datetime.fromisoformat(value.strip())
    except ValueError as e:
        raise argparse.ArgumentTypeError(
            f"{value!r}: not an ISO time (2025-01-31T12:00Z) nor a duration ago (24h, 7d)"
        ) from e
    return t.replace(tzinfo=UTC) if t.tzinfo is None else t.astimezone(UTC)


def _rpc_threads(value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        n = 0
    if not 1 <= n <= 256:
        raise argparse.ArgumentTypeError(
            f"{value!r}: a whole number from 1 to 256 (--rpc-threads, RECOMMENDER_RPC_THREADS)")
    return n


def _limit(value: str) -> int:
    n = int(value)
    if not 1 <= n <= HISTORY_MAX:
        raise argparse.ArgumentTypeError(f"must be between 1 and {HISTORY_MAX}")
    return n


HISTORY_MAX = 10_000
HISTORY_FIELDS = ["created_at", "action_id", "execution_id", "recommendation_id",
                  "parent_recommendation_id", "attempt", "pool_id", "gpu_model", "profile",
                  "count", "slice_mib", "predicted_peak_mib", "source", "model_version",
                  "outcome", "peak_mib", "relative_slack"]
OUTCOME_WORDS = {"SUCCEEDED": "fitted", "OOM": "OOM", "FAILED": "failed",
                 "CANCELLED": "cancelled"}


def _history_rows(entries: Sequence[HistoryEntry]) -> list[dict[str, Any]]:
    rows = []
    for e in entries:
        rec = e.recommendation
        d = rec.decision
        mem = d.rung.profile.memory_mib
        slack = None
        if e.outcome is not None and e.outcome.value == "SUCCEEDED" and \
                e.peak_memory_mib is not None and mem:
            slack = round((mem - e.peak_memory_mib) / mem, 4)
        rows.append({
            "created_at": rec.created_at.isoformat(timespec="seconds"),
            "action_id": rec.action_id,
            "execution_id": rec.execution_id,
            "recommendation_id": rec.id,
            "parent_recommendation_id": rec.parent_id or "",
            "attempt": d.attempt,
            "pool_id": d.rung.pool_id,
            "gpu_model": d.rung.gpu_model,
            "profile": d.rung.profile.name,
            "count": d.rung.count,
            "slice_mib": mem,
            "predicted_peak_mib": round(d.predicted_peak_mib),
            "source": d.source,
            "model_version": d.model_version,
            "outcome": e.outcome.value if e.outcome else None,
            "peak_mib": round(e.peak_memory_mib) if e.peak_memory_mib is not None else None,
            "relative_slack": slack,
        })
    return rows


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "~"


def _history_table(rows: Sequence[dict[str, Any]], colour: bool) -> str:
    """Aligned columns: text left, numbers right; slack as a percent, OOM marked."""
    cols: list[tuple[str, str]] = [  # (header, "<" left or ">" right)
        ("TIME (UTC)", "<"), ("ACTION_ID", "<"), ("TRY", ">"), ("POOL", "<"),
        ("GPU MODEL", "<"), ("SLICE", "<"), ("SLICE MiB", ">"), ("PEAK MiB", ">"),
        ("SLACK", ">"), ("OUTCOME", "<"), ("SOURCE", "<"),
    ]
    table = []
    for r in rows:
        outcome = OUTCOME_WORDS.get(r["outcome"] or "", "-")
        table.append([
            r["created_at"][:16].replace("T", " "),
            _clip(r["action_id"], 32),
            str(r["attempt"]),
            _clip(r["pool_id"], 20),
            r["gpu_model"],
            f"{r['profile']} x{r['count']}",
            f"{r['slice_mib']:,}",
            f"{r['peak_mib']:,}" if r["peak_mib"] is not None else "-",
            f"{r['relative_slack'] * 100:.0f}%" if r["relative_slack"] is not None else "-",
            "OOM !" if outcome == "OOM" else outcome,
            r["source"],
        ])
    widths = [max([len(h), *(len(t[k]) for t in table)]) for k, (h, _) in enumerate(cols)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.ljust(w) if a == "<" else c.rjust(w)
                         for c, w, (_, a) in zip(cells, widths, cols, strict=True)).rstrip()

    out = [line([h for h, _ in cols])]
    for t in table:
        text = line(t)
        if colour and t[9].startswith("OOM"):
            text = f"\033[31m{text}\033[0m"
        out.append(text)
    return "\n".join(out)


def cmd_history(args: argparse.Namespace) -> int:
    from recommender.catalog import load_catalog
    from recommender.store import SqlStore, connect
    from recommender.store.repository import HistoryFilter

    gpu_model = args.gpu_model or ""
    if gpu_model:  # an NVML name or a short one, as ListRecommendations resolves them
        model = load_catalog(os.environ.get("RECOMMENDER_CATALOG_OVERRIDE")).resolve(gpu_model)
        gpu_model = model.id if model else gpu_model
    store = SqlStore(connect(_database_url(args)))
    f = HistoryFilter(action_id=args.action or "", pool_id=args.pool or "", gpu_model=gpu_model,
                      source=args.source or "", outcome=args.outcome or "",
                      created_after=args.since, created_before=args.until)
    try:
        entries, token = store.list_history(f, args.limit, args.page_token or "")
    except ValueError as e:
        print(f"recommender history: {e}", file=sys.stderr)
        return 2
    rows = _history_rows(entries)
    if args.json:
        print(json.dumps(rows, indent=1))
    elif args.csv:
        writer = csv.DictWriter(sys.stdout, fieldnames=HISTORY_FIELDS, lineterminator="\n")
        writer.writeheader()
        writer.writerows({k: "" if v is None else v for k, v in r.items()} for r in rows)
    elif not rows:
        print("no recommendations match" + (" on this page" if args.page_token else ""))
    else:
        colour = sys.stdout.isatty() and not os.environ.get("NO_COLOR")
        print(_history_table(rows, colour))
        outcomes = Counter(OUTCOME_WORDS.get(r["outcome"] or "", "no outcome yet")
                           for r in rows)
        print(f"\n{len(rows)} recommendation{'s' if len(rows) != 1 else ''}, newest first: "
              + ", ".join(f"{n} {k}" for k, n in outcomes.most_common())
              + ". SLACK = (slice - peak) / slice, on fitted executions.")
    if token:
        print(f"more: add --page-token {token}", file=sys.stderr)
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from recommender.report import render_report
    from recommender.store import SqlStore, connect

    store = SqlStore(connect(_database_url(args)))
    page = render_report(store, action_id=args.action or None, limit=args.limit,
                         top_actions=args.top)
    out = Path(args.out)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(page, encoding="utf-8")
    tmp.replace(out)  # a reader never sees half a page
    print(f"wrote {out} ({len(page.encode()) / 1024:,.0f} KiB); open it in a browser, "
          "it needs no network")
    return 0


def cmd_evaluate(args: argparse.Namespace) -> int:
    """Replays traces through the service and the baselines; prints DESIGN.md section 5."""
    from pathlib import Path

    from recommender import replay
    from recommender.catalog import load_catalog
    from recommender.traces import TraceExecution, gentd26_hourly, synthetic

    catalog = load_catalog(args.catalog_override)
    say = (lambda m: print(f"  {m}", file=sys.stderr, flush=True)) if args.verbose else None
    traces_dir = Path(args.traces_dir)
    runs: list[tuple[str, list[TraceExecution], tuple[str, ...], int]] = []
    if args.trace in ("gentd26", "all"):
        if not (traces_dir / "alibaba-gentd26").exists():
            print(f"GenTD26 not found under {traces_dir} (--traces-dir)", file=sys.stderr)
            return 2
        runs.append((
            "GenTD26 (each pod an action, each hour an execution with that hour's peak; "
            "H100-80GB, H100-94GB and H200 pools, mixed strategy)",
            gentd26_hourly(traces_dir, max_pods=args.max_actions),
            ("H100-80GB", "H100-94GB", "H200-141GB"), 0))
    if args.trace in ("synthetic", "all"):
        runs.append((
            "generated workload (memory = base + per-item x batch x sqrt(input), per action; "
            "A100-80GB and H100-80GB pools; retraining every "
            f"{args.retrain_every:,} executions)",
            synthetic(actions=args.max_actions or 40, executions=args.executions),
            ("A100-80GB", "H100-80GB"), args.retrain_every))
    for title, trace, models, retrain_every in runs:
        pools = replay.mixed_pools(catalog, models)
        slices = replay.Slices.of(pools)
        actions = len({e.action_id for e in trace})
        print(f"\n### {title}\n\n{len(trace):,} executions of {actions} actions\n")
        results = [replay.replay_service(
            "IntelliScale (this service)", trace, pools, catalog, retrain_every=retrain_every,
            database_url=args.database_url or "", progress=say)]
        if retrain_every:
            results.append(replay.replay_service(
                "IntelliScale without the learned model", trace, pools, catalog,
                use_features=False, database_url=args.database_url or ""))
        for name, rule in replay.BASELINES.items():
            if name.startswith("user's") and not any(e.declared_mib for e in trace):
                continue  # the trace declares nothing
            results.append(replay.replay_rule(name, rule, trace, slices))
        best = replay.oracle(trace, slices)
        results.append(best)
        print(replay.table(results, best.reserved_gbh))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="recommender",
        description="IntelliScale recommender: MIG slices (profile, count) for GPU workloads.")
    parser.add_argument("--log-level", default=os.environ.get("RECOMMENDER_LOG_LEVEL", "info"))
    sub = parser.add_subparsers(dest="command", required=True)

    def with_db(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
        p.add_argument("--database-url", default=None,
                       help="SQLAlchemy URL (env RECOMMENDER_DATABASE_URL; default "
                       f"{config.DEFAULT_DATABASE_URL})")
        return p

    serve = with_db(sub.add_parser("serve", help="serve gRPC (migrates the database first)"))
    serve.add_argument("--port", type=int, default=None,
                       help=f"env RECOMMENDER_PORT; default {config.DEFAULT_PORT}; 0 = any free")
    serve.add_argument("--host", default="[::]")
    serve.add_argument("--rpc-threads", type=_rpc_threads, metavar="N",
                       default=os.environ.get("RECOMMENDER_RPC_THREADS") or None,
                       help="threads serving calls (env RECOMMENDER_RPC_THREADS; default "
                       f"{config.RPC_THREADS})")
    serve.add_argument("--tls-cert", default=os.environ.get("RECOMMENDER_TLS_CERT"),
                       help="PEM certificate (chain) for TLS on the gRPC port "
                       "(env RECOMMENDER_TLS_CERT)")
    serve.add_argument("--tls-key", default=os.environ.get("RECOMMENDER_TLS_KEY"),
                       help="PEM private key (env RECOMMENDER_TLS_KEY)")
    serve.add_argument("--tls-client-ca", default=os.environ.get("RECOMMENDER_TLS_CLIENT_CA"),
                       help="PEM CA bundle: clients must present a certificate it signed "
                       "(mutual TLS; env RECOMMENDER_TLS_CLIENT_CA)")
    serve.add_argument("--metrics-port", type=int,
                       default=int(os.environ.get("RECOMMENDER_METRICS_PORT",
                                                  config.DEFAULT_METRICS_PORT)),
                       help=f"Prometheus /metrics port (env RECOMMENDER_METRICS_PORT; default "
                       f"{config.DEFAULT_METRICS_PORT}; 0 = any free port, -1 = off)")
    serve.add_argument("--metrics-host", default="0.0.0.0")
    serve.add_argument("--catalog-override", default=None,
                       help="JSON file of MiB values, aliases or models measured on your nodes "
                       "(env RECOMMENDER_CATALOG_OVERRIDE)")
    serve.add_argument("--admin-token", default=None,
                       help="require 'authorization: Bearer <token>' on every Admin call (env "
                       "RECOMMENDER_ADMIN_TOKEN; visible to `ps`, prefer --admin-token-file)")
    serve.add_argument("--admin-token-file", default=None, metavar="PATH",
                       help="read the admin token from a file, e.g. a mounted Kubernetes "
                       "secret (env RECOMMENDER_ADMIN_TOKEN_FILE)")
    serve.set_defaults(fn=cmd_serve)

    mig = with_db(sub.add_parser("migrate", help="upgrade (or downgrade) the database schema"))
    mig.add_argument("--revision", default="head")
    mig.add_argument("--downgrade", default=None, metavar="REVISION",
                     help="downgrade to REVISION (e.g. base)")
    mig.set_defaults(fn=cmd_migrate)

    hist = with_db(sub.add_parser(
        "history", help="recommendations and how they turned out",
        description="Recommendations, newest first, with their outcome once known. Times are "
        "ISO (2025-01-31T12:00Z; naive means UTC) or a duration ago (30m, 24h, 7d)."))
    hist.add_argument("--action", default=None, help="only this action_id")
    hist.add_argument("--pool", default=None, help="only this pool_id")
    hist.add_argument("--gpu-model", default=None,
                      help="only this GPU model (canonical id or NVML name)")
    hist.add_argument("--source", default=None,
                      help="only this source (prior, history, model, ladder, fallback)")
    hist.add_argument("--outcome", choices=["fitted", "oom", "unknown"], default=None)
    hist.add_argument("--since", type=_when, default=None, metavar="TIME",
                      help="created at or after TIME")
    hist.add_argument("--until", type=_when, default=None, metavar="TIME",
                      help="created before TIME")
    hist.add_argument("--limit", type=_limit, default=50,
                      help=f"rows per page (default 50, at most {HISTORY_MAX})")
    hist.add_argument("--page-token", default=None,
                      help="continue where the previous page ended (printed as 'more:')")
    fmt = hist.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="a JSON list of rows")
    fmt.add_argument("--csv", action="store_true", help="CSV with a header row")
    hist.set_defaults(fn=cmd_history)

    rep = with_db(sub.add_parser(
        "report", help="write the HTML report",
        description="One self-contained HTML page (inline SVG charts, no network needed to "
        "view it): peak memory against the recommended slice with OOMs, slack, use per pool "
        "and GPU model, model versions; overall and per action."))
    rep.add_argument("--out", default="report.html", help="the file to write (report.html)")
    rep.add_argument("--action", default=None, help="only this action_id")
    rep.add_argument("--limit", type=int, default=50_000,
                     help="at most this many recent recommendations are read (50,000)")
    rep.add_argument("--top", type=int, default=20,
                     help="per-action sections for the N busiest actions (20)")
    rep.set_defaults(fn=cmd_report)

    ret = with_db(sub.add_parser(
        "retrain", help="fit a memory model from recorded executions; promote it only if it "
        "beats the serving version on the most recent executions (run it as a CronJob)"))
    ret.add_argument("--quantile", type=float, default=config.MODEL_QUANTILE,
                     help=f"quantile of per-worker peak memory to cover "
                     f"({config.MODEL_QUANTILE})")
    ret.add_argument("--catalog-override", default=None)
    ret.add_argument("--quiet", action="store_true", help="no progress output")
    ret.set_defaults(fn=cmd_retrain)

    ev = with_db(sub.add_parser(
        "evaluate", help="replay traces in time order through the service and the baselines "
        "(VPA, Ryax 26.10, max x 1.2, declared, oracle); prints OOM rate, retries, slack, "
        "reserved GB-h"))
    ev.add_argument("--trace", choices=["gentd26", "synthetic", "all"], default="all")
    ev.add_argument("--traces-dir", default=os.environ.get("RECOMMENDER_TRACES_DIR",
                                                           "../shared/traces"))
    ev.add_argument("--max-actions", type=int, default=0,
                    help="GenTD26: first N pods only; synthetic: number of actions (40)")
    ev.add_argument("--executions", type=int, default=6000, help="synthetic executions")
    ev.add_argument("--retrain-every", type=int, default=1000,
                    help="synthetic: run the retraining job every N executions")
    ev.add_argument("--catalog-override", default=None)
    ev.add_argument("--verbose", action="store_true", help="print each retraining result")
    ev.set_defaults(fn=cmd_evaluate)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    _setup_logging(args.log_level)
    from recommender.auth import AuthConfigError
    from recommender.catalog import CatalogError
    from recommender.server import TlsConfigError
    from recommender.store import StoreUnavailable

    try:
        return int(args.fn(args))
    except CatalogError as e:
        print(f"catalog error: {e}", file=sys.stderr)
        return 2
    except AuthConfigError as e:
        print(f"admin token: {e}", file=sys.stderr)
        return 2
    except TlsConfigError as e:
        print(f"TLS: {e}", file=sys.stderr)
        return 2
    except StoreUnavailable as e:
        print(f"database unavailable: {e}", file=sys.stderr)
        return 3


if __name__ == "__main__":
    sys.exit(main())
