"""`recommender retrain` and `recommender migrate`: the jobs around the service."""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING

from recommender.cli.options import database_url

if TYPE_CHECKING:
    pass


def cmd_retrain(args: argparse.Namespace) -> int:
    from recommender.cli.progress import Progress
    from recommender.core.catalog import load_catalog
    from recommender.learning.retrain import retrain
    from recommender.store import SqlStore, connect, migrate

    catalog = load_catalog(args.catalog_override or os.environ.get("RECOMMENDER_CATALOG_OVERRIDE"))
    engine = connect(database_url(args), timeout_s=None)
    migrate(engine)
    with Progress(not args.quiet) as progress:
        result = retrain(SqlStore(engine), catalog, quantile=args.quantile, progress=progress,
                         oom_wait_gpus=args.oom_wait_gpus)
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

    engine = connect(database_url(args))
    if args.downgrade:
        downgrade(engine, args.downgrade)
    else:
        migrate(engine, args.revision)
    print(f"database at revision {current_revision(engine)}")
    return 0
