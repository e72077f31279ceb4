"""Option values the commands share, checked where they are read: the database URL, ports,
times, limits. A bad value is a message naming the option, never a traceback."""

from __future__ import annotations

import argparse
import math
import os
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from recommender.core import config

if TYPE_CHECKING:
    from sqlalchemy import Engine


class ConfigError(ValueError):
    """A setting the command cannot work with; main() prints it (no traceback) and exits 2.
    The message names the option or environment variable that set it."""


def database_url(args: argparse.Namespace) -> str:
    """The database URL from --database-url, RECOMMENDER_DATABASE_URL or the default, checked
    before anything connects: a URL SQLAlchemy cannot parse, a dialect it does not know or a
    driver that is not installed is a ConfigError naming where the URL came from."""
    if args.database_url:
        url, where = str(args.database_url), "--database-url"
    elif os.environ.get("RECOMMENDER_DATABASE_URL"):
        url, where = os.environ["RECOMMENDER_DATABASE_URL"], "RECOMMENDER_DATABASE_URL"
    else:
        return config.DEFAULT_DATABASE_URL
    from sqlalchemy import make_url
    from sqlalchemy.exc import ArgumentError, NoSuchModuleError

    example = "e.g. sqlite:///recommender.db or postgresql+psycopg://user@host:5432/recommender"
    try:
        parsed = make_url(url)
    except ArgumentError:
        raise ConfigError(f"{where}: {_masked(url)!r} is not a database URL ({example})"
                          ) from None
    try:
        parsed.get_dialect().import_dbapi()
    except NoSuchModuleError:
        raise ConfigError(f"{where}: unknown database {parsed.drivername!r} in "
                          f"{redacted(url)!r} ({example})") from None
    except ImportError as e:
        raise ConfigError(f"{where}: the driver for {parsed.drivername!r} is not installed "
                          f"({e.name or e})") from None
    return url


def _masked(text: str) -> str:
    """`text` with anything that looks like a password (`:secret@`) hidden."""
    return re.sub(r"(?<=:)[^:@/]+(?=@)", "***", text)


def sqlite_file(url: str) -> Path | None:
    """The file of a SQLite URL (None for other databases and in-memory SQLite)."""
    from sqlalchemy import make_url

    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return None
    return Path(parsed.database)


def open_existing(args: argparse.Namespace) -> Engine:
    """An engine on a database that exists and is migrated, for the commands that only read
    (history, report): they must not leave an empty SQLite file behind in whatever folder
    they ran in, nor answer `no such table`."""
    from recommender.store import connect
    from recommender.store.database import current_revision, pending_migrations

    url = database_url(args)
    path = sqlite_file(url)
    if path is not None and not path.exists():
        raise ConfigError(
            f"database {path} does not exist (--database-url, RECOMMENDER_DATABASE_URL; "
            f"`recommender serve` or `recommender migrate` creates it)")
    engine = connect(url)
    if current_revision(engine) is None:
        engine.dispose()
        raise ConfigError(f"database {redacted(url)} is not migrated: it has no recommender "
                          "tables (`recommender migrate` creates them)")
    pending = pending_migrations(engine)
    if pending:
        engine.dispose()
        raise ConfigError(f"database {redacted(url)} lacks migrations {', '.join(pending[::-1])}"
                          ": run `recommender migrate`")
    return engine


def port(value: str) -> int:
    """--port / RECOMMENDER_PORT: 0 (any free port) to 65535. gRPC would take 70000 modulo
    65536 and serve on 4464 without a word."""
    return _whole(value, 0, 65535, "--port, RECOMMENDER_PORT; 0 = any free port")


def metrics_port(value: str) -> int:
    """--metrics-port / RECOMMENDER_METRICS_PORT: -1 (off), 0 (any free port) to 65535."""
    return _whole(value, -1, 65535,
                  "--metrics-port, RECOMMENDER_METRICS_PORT; 0 = any free port, -1 = off")


def positive(value: str) -> int:
    return _whole(value, 1, 10**12, "")


def non_negative(value: str) -> int:
    return _whole(value, 0, 10**12, "")


def _whole(value: str, low: int, high: int, where: str) -> int:
    try:
        n = int(value)
    except ValueError:
        n = low - 1
    if not low <= n <= high:
        span = f"from {low:,} to {high:,}" if high < 10**12 else f"of at least {low}"
        raise argparse.ArgumentTypeError(
            f"{value!r}: a whole number {span}" + (f" ({where})" if where else ""))
    return n


def _number(text: str) -> float:
    """The number written, NaN when it is none (fails every range check that follows)."""
    try:
        return float(text)
    except ValueError:
        return math.nan


MAX_SEEDS = 100
"""--seeds: draws at most (each is a replay of a few minutes on the largest workloads)."""


def seeds(value: str) -> tuple[int, ...]:
    """--seeds: seeds of the generated workloads, comma-separated, each a number or a range
    (1-12, 1,3,5, 1-4,9), in order without repeats."""
    out: set[int] = set()
    for part in value.split(","):
        low, _, high = part.strip().partition("-")
        try:
            first, last = int(low), int(high) if high else int(low)
        except ValueError:
            first, last = -1, -1
        if not 0 <= first <= last:
            raise argparse.ArgumentTypeError(
                f"{value!r}: seeds as whole numbers or ranges of them, comma-separated "
                "(1-12, or 1,3,5)")
        out.update(range(first, last + 1))
        if len(out) > MAX_SEEDS:
            raise argparse.ArgumentTypeError(f"{value!r}: at most {MAX_SEEDS} seeds")
    return tuple(sorted(out))


def percents(value: str) -> tuple[float, ...]:
    """--retrain-at: points of a sequence in percent, comma-separated (30,50,70,90), each
    strictly between 0 and 100, as fractions in order; 'none' or '' for none."""
    if value.strip().lower() in ("", "none"):
        return ()
    out = []
    for part in value.split(","):
        x = _number(part)
        if not 0.0 < x < 100.0:
            raise argparse.ArgumentTypeError(
                f"{value!r}: percents strictly between 0 and 100, comma-separated "
                "(30,50,70,90), or none")
        out.append(x / 100)
    return tuple(sorted(set(out)))


def quantile(value: str) -> float:
    """--quantile: strictly between 0 and 1 (0.98 covers 98 % of peaks)."""
    q = _number(value)
    if not 0.0 < q < 1.0:
        raise argparse.ArgumentTypeError(
            f"{value!r}: a fraction strictly between 0 and 1, e.g. {config.MODEL_QUANTILE}")
    return q


def writable_file(path: str, option: str) -> Path:
    """A file the command will write: its folder must exist and be writable, checked before
    the work that produces it (reading the history, rendering charts)."""
    out = Path(path)
    folder = out.parent
    if out.is_dir():
        raise ConfigError(f"{option} {path}: is a directory")
    if not folder.is_dir():
        raise ConfigError(f"{option} {path}: folder {folder} does not exist")
    if not os.access(folder, os.W_OK):
        raise ConfigError(f"{option} {path}: folder {folder} is not writable")
    return out


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


def seconds(value: str) -> float:
    """--database-wait / RECOMMENDER_DATABASE_WAIT_S: seconds, 0 or more (0 = do not wait)."""
    x = _number(value)
    if not 0.0 <= x <= 86400.0:
        raise argparse.ArgumentTypeError(
            f"{value!r}: seconds from 0 to 86,400 (--database-wait, RECOMMENDER_DATABASE_WAIT_S;"
            " 0 = stop at once)")
    return x


def oom_wait_gpus(value: str) -> float:
    """--oom-wait-gpus / RECOMMENDER_OOM_WAIT_GPUS: the price of an OOM in whole GPUs for the
    run's duration, from 0 to OOM_WAIT_GPUS_MAX (core.predictive.checked_oom_wait_gpus)."""
    from recommender.core.predictive import checked_oom_wait_gpus

    try:
        return checked_oom_wait_gpus(_number(value))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{value!r}: whole GPUs from 0 to {config.OOM_WAIT_GPUS_MAX:g} (--oom-wait-gpus, "
            f"RECOMMENDER_OOM_WAIT_GPUS; default {config.OOM_WAIT_GPUS:g})") from None


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
