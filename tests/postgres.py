"""PostgreSQL for the tests and the benchmarks: is it reachable, scratch databases, and the
local cluster stopped and started (tests/test_faults.py's outage)."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from sqlalchemy import create_engine, make_url, text
from sqlalchemy.pool import NullPool


def postgres_unreachable(url: str) -> str | None:
    """None when a database answers at `url` within 2 s, else why not (for tests and
    benchmarks deciding whether to run against PostgreSQL)."""
    try:
        engine = create_engine(url, connect_args={"connect_timeout": 2}, poolclass=NullPool)
        with engine.connect() as conn:
            conn.execute(text("SELECT 1"))
        engine.dispose()
        return None
    except Exception as e:
        return f"{type(e).__name__}: {e}".splitlines()[0]


@contextmanager
def scratch_postgres_database(admin_url: str, prefix: str,
                              before_drop: Callable[[], None] = lambda: None) -> Iterator[str]:
    """A new, empty PostgreSQL database beside `admin_url`'s, dropped afterwards (its
    connections ended first): for tests and benchmarks. `before_drop` runs first (a test that
    stops PostgreSQL starts it again there). The admin connections are not pooled, so a
    restart of the server in between leaves none stale."""
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT", poolclass=NullPool)
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield make_url(admin_url).set(database=name).render_as_string(hide_password=False)
    finally:
        before_drop()
        with admin.connect() as conn:
            conn.execute(text(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = :n"
            ), {"n": name})
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}"'))
        admin.dispose()


def _pg_version() -> str:
    versions = os.listdir("/etc/postgresql")
    return max(versions, key=lambda v: [int(x) for x in v.split(".") if x.isdigit()])


def pg_ready() -> bool:
    return subprocess.run(["pg_isready", "-q", "-h", "127.0.0.1", "-p", "5432"],
                          timeout=15, check=False).returncode == 0


def pg_ctl(action: str) -> None:
    done = subprocess.run(
        ["pg_ctlcluster", "--skip-systemctl-redirect", _pg_version(), "main", action],
        capture_output=True, text=True, timeout=90, check=False)
    assert done.returncode == 0, f"pg_ctlcluster {action}: {done.stdout} {done.stderr}"


def ensure_postgres_running() -> None:
    """Starts the local cluster when it is down and waits until it accepts connections."""
    if pg_ready():
        return
    subprocess.run(["pg_ctlcluster", "--skip-systemctl-redirect", _pg_version(), "main",
                    "start"], capture_output=True, timeout=90, check=False)
    for _ in range(120):
        if pg_ready():
            return
        time.sleep(0.5)
    raise RuntimeError("PostgreSQL did not come back: start it with pg_ctlcluster")


def cannot_restart_postgres(admin_url: str) -> str:
    """Why a test may not stop and start the PostgreSQL at `admin_url` ("" when it may): it
    must be this machine's cluster, and stopping it takes root."""
    if shutil.which("pg_ctlcluster") is None or not os.path.isdir("/etc/postgresql"):
        return "pg_ctlcluster not found"
    if os.geteuid() != 0:
        return "stopping PostgreSQL needs root"
    url = make_url(admin_url)
    if url.host not in ("127.0.0.1", "localhost") or (url.port or 5432) != 5432:
        return f"the test database is not the local cluster on 127.0.0.1:5432 ({url.host})"
    return ""
