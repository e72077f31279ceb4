"""The `recommender` command: serve, migrate, history, and the jobs around the service."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Sequence

from recommender import config


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
    from recommender.catalog import load_catalog
    from recommender.engine import RecommenderEngine
    from recommender.server import serve_until_signalled, start
    from recommender.store import SqlStore, connect, migrate

    catalog = load_catalog(args.catalog_override or os.environ.get("RECOMMENDER_CATALOG_OVERRIDE"))
    url = _database_url(args)
    engine = connect(url)
    migrate(engine)
    logging.getLogger(__name__).info(
        "database %s migrated; catalog has %d GPU models", _redacted(url), len(catalog))
    port = args.port if args.port is not None else int(
        os.environ.get("RECOMMENDER_PORT", config.DEFAULT_PORT))
    running = start(RecommenderEngine(SqlStore(engine)), catalog, host=args.host, port=port)
    print(f"recommender listening on {args.host}:{running.port}", flush=True)
    serve_until_signalled(running)
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


def cmd_history(args: argparse.Namespace) -> int:
    from recommender.store import SqlStore, connect
    from recommender.store.repository import HistoryFilter

    store = SqlStore(connect(_database_url(args)))
    entries, token = store.list_history(
        HistoryFilter(action_id=args.action or "", outcome=args.outcome or ""), args.limit)
    rows = []
    for e in entries:
        d = e.recommendation.decision
        rows.append({
            "created_at": e.recommendation.created_at.isoformat(timespec="seconds"),
            "action_id": e.recommendation.action_id,
            "recommendation_id": e.recommendation.id,
            "attempt": d.attempt,
            "pool_id": d.rung.pool_id,
            "gpu_model": d.rung.gpu_model,
            "profile": d.rung.profile.name,
            "count": d.rung.count,
            "slice_mib": d.rung.profile.memory_mib,
            "source": d.source,
            "outcome": e.outcome.value if e.outcome else "",
            "peak_mib": round(e.peak_memory_mib) if e.peak_memory_mib is not None else "",
        })
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    cols = ["created_at", "action_id", "attempt", "gpu_model", "profile", "count", "slice_mib",
            "source", "outcome", "peak_mib"]
    widths = {c: max([len(c), *(len(str(r[c])) for r in rows)]) for c in cols}
    print("  ".join(c.upper().ljust(widths[c]) for c in cols))
    for r in rows:
        print("  ".join(str(r[c]).ljust(widths[c]) for c in cols))
    if token:
        print("(more: raise --limit)", file=sys.stderr)
    return 0


def cmd_not_yet(args: argparse.Namespace) -> int:
    issue = {"retrain": 3, "evaluate": 3, "report": 5}[args.command]
    print(f"recommender {args.command}: not available in this version (tracked in issue "
          f"#{issue})", file=sys.stderr)
    return 2


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
    serve.add_argument("--catalog-override", default=None,
                       help="JSON file of MiB values, aliases or models measured on your nodes "
                       "(env RECOMMENDER_CATALOG_OVERRIDE)")
    serve.set_defaults(fn=cmd_serve)

    mig = with_db(sub.add_parser("migrate", help="upgrade (or downgrade) the database schema"))
    mig.add_argument("--revision", default="head")
    mig.add_argument("--downgrade", default=None, metavar="REVISION",
                     help="downgrade to REVISION (e.g. base)")
    mig.set_defaults(fn=cmd_migrate)

    hist = with_db(sub.add_parser("history", help="recommendations and how they turned out"))
    hist.add_argument("--action", default=None)
    hist.add_argument("--outcome", choices=["fitted", "oom", "unknown"], default=None)
    hist.add_argument("--limit", type=int, default=50)
    hist.add_argument("--json", action="store_true")
    hist.set_defaults(fn=cmd_history)

    for name, text in (("retrain", "fit and promote learned models"),
                       ("report", "write the HTML report"),
                       ("evaluate", "replay a trace against the baselines")):
        p = with_db(sub.add_parser(name, help=text))
        p.set_defaults(fn=cmd_not_yet)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    _setup_logging(args.log_level)
    from recommender.catalog import CatalogError
    from recommender.store import StoreUnavailable

    try:
        return int(args.fn(args))
    except CatalogError as e:
        print(f"catalog error: {e}", file=sys.stderr)
        return 2
    except StoreUnavailable as e:
        print(f"database unavailable: {e}", file=sys.stderr)
        return 3


if __name__ == "__main__":
    sys.exit(main())
