"""The `recommender` command: its parser, and configuration errors as messages."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from recommender.cli import catalog, layout
from recommender.cli.evaluate import cmd_evaluate
from recommender.cli.history import cmd_history
from recommender.cli.jobs import cmd_migrate, cmd_retrain
from recommender.cli.logs import LEVELS, announce, log_format, log_level, setup_logging
from recommender.cli.options import (
    HISTORY_MAX,
    ConfigError,
    history_limit,
    metrics_port,
    non_negative,
    oom_wait_gpus,
    percents,
    port,
    positive,
    quantile,
    rpc_threads,
    seconds,
    seeds,
    when,
)
from recommender.cli.report import cmd_report
from recommender.cli.serve import cmd_serve
from recommender.core import config

if TYPE_CHECKING:
    pass


log = logging.getLogger("recommender")

def version() -> str:
    """The installed distribution's version (what `pip show intelliscale-recommender` says)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("intelliscale-recommender")
    except PackageNotFoundError:
        return "unknown (not installed: run it from `pip install .`)"


def _logging_options(p: argparse.ArgumentParser, *, after_command: bool) -> None:
    # After the command (`recommender serve --log-level debug`) the defaults are SUPPRESS:
    # a subcommand that does not repeat an option must not reset what came before it.
    def default(env: str, fallback: str | None) -> str | None:
        return argparse.SUPPRESS if after_command else os.environ.get(env) or fallback

    p.add_argument("--log-level", type=log_level, metavar="LEVEL",
                   default=default("RECOMMENDER_LOG_LEVEL", "info"),
                   help=f"{', '.join(LEVELS)} (env RECOMMENDER_LOG_LEVEL; default info)")
    p.add_argument("--log-format", type=log_format, metavar="FORMAT",
                   default=default("RECOMMENDER_LOG_FORMAT", None),
                   help="json (one object a line) or text (env RECOMMENDER_LOG_FORMAT; default "
                   "json for serve, text for the other commands)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="recommender",
        description="IntelliScale recommender: MIG slices (profile, count) for GPU workloads.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {version()}")
    _logging_options(parser, after_command=False)
    sub = parser.add_subparsers(dest="command", required=True)

    def with_db(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
        p.add_argument("--database-url", default=None,
                       help="SQLAlchemy URL (env RECOMMENDER_DATABASE_URL; default "
                       f"{config.DEFAULT_DATABASE_URL})")
        return p

    def with_price(p: argparse.ArgumentParser, what: str) -> argparse.ArgumentParser:
        p.add_argument("--oom-wait-gpus", type=oom_wait_gpus, metavar="GPUS",
                       default=os.environ.get("RECOMMENDER_OOM_WAIT_GPUS")
                       or config.OOM_WAIT_GPUS,
                       help="what an OOM costs beyond the memory its attempts held: the wait "
                       "for the rerun, in whole GPUs of the model for the run's duration; a "
                       "higher price buys fewer OOMs with more memory (env "
                       f"RECOMMENDER_OOM_WAIT_GPUS; default {config.OOM_WAIT_GPUS:g}; {what})")
        return p

    serve = with_db(sub.add_parser("serve", help="serve gRPC (migrates the database first)"))
    with_price(serve, "give `recommender retrain` the same")
    serve.add_argument("--port", type=port, default=os.environ.get("RECOMMENDER_PORT") or None,
                       help=f"env RECOMMENDER_PORT; default {config.DEFAULT_PORT}; 0 = any free")
    serve.add_argument("--host", default="[::]")
    serve.add_argument("--database-wait", type=seconds, metavar="SECONDS",
                       default=os.environ.get("RECOMMENDER_DATABASE_WAIT_S")
                       or config.DATABASE_WAIT_S,
                       help="a database server unreachable at start: answer without it and "
                       "migrate it once it is up, stopping (status 3) if it is not within "
                       "this many seconds (env RECOMMENDER_DATABASE_WAIT_S; default "
                       f"{config.DATABASE_WAIT_S:g}; 0 = stop at once)")
    serve.add_argument("--rpc-threads", type=rpc_threads, metavar="N",
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
    serve.add_argument("--metrics-port", type=metrics_port,
                       default=os.environ.get("RECOMMENDER_METRICS_PORT")
                       or config.DEFAULT_METRICS_PORT,
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
    hist.add_argument("--since", type=when, default=None, metavar="TIME",
                      help="created at or after TIME")
    hist.add_argument("--until", type=when, default=None, metavar="TIME",
                      help="created before TIME")
    hist.add_argument("--limit", type=history_limit, default=50,
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
    rep.add_argument("--limit", type=positive, default=50_000,
                     help="at most this many recent recommendations are read (50,000)")
    rep.add_argument("--top", type=non_negative, default=20,
                     help="per-action sections for the N busiest actions (20)")
    rep.set_defaults(fn=cmd_report)

    ret = with_db(sub.add_parser(
        "retrain", help="fit a memory model from recorded executions; promote it only if it "
        "beats the serving version on the most recent executions (run it as a CronJob)"))
    ret.add_argument("--quantile", type=quantile, default=config.MODEL_QUANTILE,
                     help=f"quantile of per-worker peak memory to cover, in (0, 1) "
                     f"({config.MODEL_QUANTILE})")
    ret.add_argument("--catalog-override", default=None)
    with_price(ret, "the server's, which candidates are scored at")
    ret.add_argument("--quiet", action="store_true", help="no progress output")
    ret.set_defaults(fn=cmd_retrain)

    ev = sub.add_parser(
        "evaluate", help="replay traces in time order through the service and the baselines "
        "(VPA, Ryax 26.10, max x 1.2, declared, oracle); prints OOM rate, retries, slack, "
        "reserved GB-h")
    ev.add_argument("--database-url", default=None,
                    help="an empty database to replay the service into, e.g. PostgreSQL "
                    "(default: a new temporary SQLite file per replay; every replay of the "
                    "service adds to this one, so give one trace; RECOMMENDER_DATABASE_URL is "
                    "not read: a replay never writes into the service's own database)")
    ev.add_argument("--trace", default="all",
                    choices=["gentd26", "synthetic", "step", "modes", "shapes", "models",
                             "all"])
    ev.add_argument("--traces-dir", default=os.environ.get("RECOMMENDER_TRACES_DIR",
                                                           "../shared/traces"))
    ev.add_argument("--max-actions", type=non_negative, default=0,
                    help="GenTD26: first N pods only; synthetic, shapes: number of actions "
                    "(40); step, modes (30); models (60)")
    ev.add_argument("--window-minutes", type=positive, default=60, metavar="N",
                    help="GenTD26: each pod's peak over windows of N minutes is an execution "
                    "lasting N minutes (default 60, the README's table; 15, 30 and 120 show how "
                    "a result depends on what an execution is)")
    ev.add_argument("--executions", type=positive, default=0,
                    help="executions of the generated workloads (default: synthetic 6,000, "
                    "shapes 5,000, step and modes 4,000, models 3,000)")
    ev.add_argument("--seed", type=non_negative, default=None,
                    help="seed of the generated workloads (synthetic, step, modes, shapes and "
                    "models; default: 7, 11, 1, 5 and 1, the README's tables): other seeds draw "
                    "other actions, levels and steps from the same generator, to see how a "
                    "result holds beyond one draw")
    ev.add_argument("--seeds", type=seeds, default=None, metavar="SEEDS",
                    help="replay each generated workload --trace names once per seed (1-12, "
                    "or 1,3,5) and print one row per draw, the service's and VPA's, with "
                    "their totals, instead of one replay's tables: how often a result holds "
                    "(not with --seed; GenTD26 is one trace and is left out)")
    ev.add_argument("--runner", choices=["grpc", "in-process"], default="grpc",
                    help="grpc (default): a real `recommender serve` in a child process "
                    "called over a loopback socket, executions stamped on the wall clock when "
                    "recorded, `recommender retrain` in a child process and the server "
                    "given time to load what it promoted, as a live runner sees the service; "
                    "in-process: the same calls to the use cases on trace time (faster, for "
                    "tuning)")
    ev.add_argument("--retrain-at", type=percents, default=percents("30,50,70,90"),
                    metavar="PERCENTS",
                    help="run the retraining job at these points of every sequence, in "
                    "percent (default 30,50,70,90; 'none' for never)")
    ev.add_argument("--retrain-every", type=non_negative, default=0,
                    help="also run the retraining job every N executions (default 0: never)")
    ev.add_argument("--catalog-override", default=None)
    with_price(ev, "the replayed server's and retraining job's")
    ev.add_argument("--verbose", action="store_true", help="print each retraining result")
    ev.add_argument("--quiet", action="store_true", help="no progress output")
    ev.set_defaults(fn=cmd_evaluate)

    catalog.add_parser(sub)
    layout.add_parser(sub)
    for command in sub.choices.values():  # `recommender serve --log-level debug` too
        _logging_options(command, after_command=True)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    # Logs are for machines where the service runs (a container's collector), for people
    # where the other commands do.
    setup_logging(args.log_level, args.log_format or ("json" if args.command == "serve"
                                                      else "text"))
    from recommender.core.catalog import CatalogError
    from recommender.core.domain import StoreUnavailable
    from recommender.rpc.auth import AuthConfigError
    from recommender.rpc.runner import ServerFailed
    from recommender.rpc.server import TlsConfigError

    def refuse(message: str, status: int) -> int:
        """One line on stderr (a JSON object when the log is JSON), and the exit status."""
        announce(log, message, level=logging.ERROR, stream=sys.stderr, exit_status=status)
        return status

    try:
        return int(args.fn(args))
    except ConfigError as e:
        return refuse(f"recommender {args.command}: {e}", 2)
    except CatalogError as e:
        return refuse(f"catalog error: {e}", 2)
    except AuthConfigError as e:
        return refuse(f"admin token: {e}", 2)
    except TlsConfigError as e:
        return refuse(f"TLS: {e}", 2)
    except StoreUnavailable as e:
        return refuse(f"database unavailable: {e}", 3)
    except ServerFailed as e:  # the live replay's own server or retraining job
        return refuse(f"recommender {args.command}: {e}", 1)


if __name__ == "__main__":
    sys.exit(main())
