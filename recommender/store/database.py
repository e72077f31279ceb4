"""Engines and migrations for SQLite (the embedded default) and PostgreSQL."""

from __future__ import annotations

import json
from collections.abc import Callable
from importlib import resources
from typing import Any

from alembic import command
from alembic.config import Config
from sqlalchemy import Engine, create_engine, event, make_url
from sqlalchemy.exc import DBAPIError

from recommender.core import config
from recommender.core.domain import StoreUnavailable
from recommender.core.identity import ByIdentity

JSON_KEPT = 1024
"""Tuples whose JSON is kept for their next rows (`to_json`)."""

_json_of: ByIdentity[tuple[Any, ...], str] = ByIdentity(JSON_KEPT)


def to_json(value: Any) -> str:
    """JSON columns' serializer: `json.dumps`, except that a tuple's text is made once for all
    the rows that carry the same tuple (mapping.py stores a decision's ladder as a tuple and
    never changes it; a list or a dict may change between two rows, so it is serialized every
    time). A decision the use cases' memo answers again is stored with each answer; its
    ladder's JSON was about 13 us of a row's 30 us in SQLite's executemany."""
    if type(value) is not tuple:
        return json.dumps(value)
    return _json_of.get(value, json.dumps)


def connect(url: str, *, timeout_s: float | None = config.DATABASE_TIMEOUT_S) -> Engine:
    """An engine with short timeouts: the runner must never wait long on us. Batch jobs
    (retraining) pass timeout_s=None: their long reads are expected."""
    parsed = make_url(url)
    kwargs: dict[str, Any] = {"pool_pre_ping": True, "json_serializer": to_json}
    timeout = timeout_s or config.DATABASE_TIMEOUT_S
    if parsed.get_backend_name() == "sqlite":
        kwargs["connect_args"] = {"timeout": timeout, "check_same_thread": False}
    elif parsed.get_backend_name() == "postgresql":
        if parsed.drivername == "postgresql":
            parsed = parsed.set(drivername="postgresql+psycopg")
        kwargs["connect_args"] = {"connect_timeout": max(1, int(timeout))}
        if timeout_s is not None:
            kwargs["connect_args"]["options"] = f"-c statement_timeout={int(timeout_s * 1000)}"
        kwargs["pool_size"] = 10
        kwargs["max_overflow"] = 10
        kwargs["pool_timeout"] = timeout
    engine = create_engine(parsed, **kwargs)
    if parsed.get_backend_name() == "sqlite":

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
            cur = dbapi_conn.cursor()
            # WAL lets readers run beside the writer; synchronous=NORMAL is durable in WAL
            # mode across process crashes (the case we test), which is what the runner needs.
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.close()

    return engine


def alembic_config(engine: Engine) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(resources.files("recommender.migrations")))
    cfg.attributes["engine"] = engine
    return cfg


def migrate(engine: Engine, revision: str = "head") -> None:
    """Upgrades (or, with a revision below the current one, downgrades) the schema."""
    _run_alembic(engine, lambda cfg: command.upgrade(cfg, revision))


def downgrade(engine: Engine, revision: str) -> None:
    _run_alembic(engine, lambda cfg: command.downgrade(cfg, revision))


def _run_alembic(engine: Engine, step: Callable[[Config], None]) -> None:
    cfg = alembic_config(engine)
    try:
        with engine.begin() as conn:
            if engine.dialect.name == "postgresql":
                # The runner's 2 s statement timeout is not for schema changes on big tables.
                conn.exec_driver_sql("SET LOCAL statement_timeout = 0")
            cfg.attributes["connection"] = conn
            step(cfg)
    except DBAPIError as e:
        raise StoreUnavailable(f"cannot migrate the database: {type(e).__name__}: "
                               f"{str(e).splitlines()[0]}") from e


def current_revision(engine: Engine) -> str | None:
    from alembic.runtime.migration import MigrationContext

    try:
        with engine.connect() as conn:
            return MigrationContext.configure(conn).get_current_revision()
    except DBAPIError as e:
        raise StoreUnavailable(f"{type(e).__name__}: {str(e).splitlines()[0]}") from e


def pending_migrations(engine: Engine) -> list[str]:
    """The migrations this version ships that the database has not had, newest first: all of
    them when it was never migrated, none when it is at head or at a revision newer than this
    version knows (another replica upgraded it; migrations only add)."""
    from alembic.script import ScriptDirectory
    from alembic.script.revision import ResolutionError

    script = ScriptDirectory.from_config(alembic_config(engine))
    current = current_revision(engine)
    try:
        return [r.revision for r in script.iterate_revisions("heads", current)]
    except ResolutionError:  # a revision this version does not know: newer than its head
        return []
