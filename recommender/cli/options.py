"""Option values the commands share: the database URL, times, limits, logging."""

from __future__ import annotations

import argparse
import logging
import os
import re
import sys
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from recommender.core import config

if TYPE_CHECKING:
    pass


def database_url(args: argparse.Namespace) -> str:
    return str(args.database_url or os.environ.get("RECOMMENDER_DATABASE_URL")
               or config.DEFAULT_DATABASE_URL)


def setup_logging(level: str) -> None:
    logging.basicConfig(
        level=getattr(logging, level.upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s %(message)s",
        stream=sys.stderr,
    )
    # Alembic narrates every plugin at INFO; only its warnings concern an operator.
    logging.getLogger("alembic").setLevel(logging.WARNING)


def redacted(url: str) -> str:
    from sqlalchemy import make_url

    return make_url(url).render_as_string(hide_password=True)


def when(value: str) -> datetime:
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


def rpc_threads(value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        n = 0
    if not 1 <= n <= 256:
        raise argparse.ArgumentTypeError(
            f"{value!r}: a whole number from 1 to 256 (--rpc-threads, RECOMMENDER_RPC_THREADS)")
    return n


def history_limit(value: str) -> int:
    n = int(value)
    if not 1 <= n <= HISTORY_MAX:
        raise argparse.ArgumentTypeError(f"must be between 1 and {HISTORY_MAX}")
    return n


HISTORY_MAX = 10_000
"""Most rows `history` prints in one call (--limit); page on with --page-token."""
