"""Shared pieces: statistics, plain-text tables, throwaway databases, a server in a child process.

The server under test runs in its own process (spawned, not forked), so the benchmark's client
threads do not compete with it for one interpreter lock; both still share the machine's cores.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import statistics
import subprocess
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import grpc

from recommender.core import config

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from recommender.rpc.server import Running

DEFAULT_PG = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
TRIVIAL_METHOD = "/bench.Trivial/Echo"
SERVER_LIFETIME_S = 900.0
"""A benchmark server child exits on its own after this long, whatever the parent does."""


# --- statistics and tables -------------------------------------------------------------


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100); NaN for no values."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(q / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A plain-text table, numbers right-aligned."""
    cells = [[_cell(v) for v in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h)
              for i, h in enumerate(headers)]
    numeric = [all(_is_number(row[i]) for row in rows) if rows else False
               for i in range(len(headers))]

    def line(values: Sequence[str]) -> str:
        return "  ".join(v.rjust(w) if num else v.ljust(w)
                         for v, w, num in zip(values, widths, numeric, strict=True)).rstrip()

    out = [line(list(headers)), line(["-" * w for w in widths])]
    out += [line(r) for r in cells]
    return "\n".join(out)


def _is_number(v: object) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _cell(v: object) -> str:
    if isinstance(v, float):
        if v != v:  # NaN
            return "-"
        if abs(v) >= 100:
            return f"{v:,.0f}"
        if abs(v) >= 10:
            return f"{v:.1f}"
        return f"{v:.2f}"
    if isinstance(v, int) and not isinstance(v, bool):
        return f"{v:,}"
    return str(v)


def verdict(ok: bool) -> str:
    return "meets" if ok else "MISSES"


# --- databases ---------------------------------------------------------------------------


@contextmanager
def fresh_database(url: str | None) -> Iterator[str]:
    """A migrated, empty database for one run: a SQLite file in a temp dir when `url` is None,
    else a new PostgreSQL database next to `url`'s (created and dropped, as the tests do)."""
    from sqlalchemy import make_url

    from recommender.store import connect, migrate
    from tests.postgres import scratch_postgres_database

    def migrated(db_url: str) -> str:
        engine = connect(db_url)
        migrate(engine)
        engine.dispose()
        return db_url

    if url is None or make_url(url).get_backend_name() == "sqlite":
        with tempfile.TemporaryDirectory(prefix="bench-") as tmp:
            yield migrated(url or f"sqlite:///{Path(tmp) / 'bench.db'}")
        return
    with scratch_postgres_database(url, "intelliscale_bench") as db_url:
        yield migrated(db_url)


def describe_url(url: str) -> str:
    from sqlalchemy import make_url

    u = make_url(url)
    return f"{u.get_backend_name()} ({u.database})"


# --- the server under test ---------------------------------------------------------------


def build_server(database_url: str, *, max_workers: int | None = None) -> Running:
    """`recommender.rpc.server.start` with the real servicers, as `recommender serve` runs them,
    and a trivial echo handler beside them, so the two share every layer except the work."""
    from recommender._proto.intelliscale.recommender.v1 import recommender_pb2 as pb
    from recommender.core.cache import ActionCache
    from recommender.core.catalog import load_catalog
    from recommender.core.usecases import UseCases
    from recommender.rpc.server import start
    from recommender.store import SqlStore, connect
    from recommender.store.listener import ActionListener

    catalog = load_catalog()
    db = connect(database_url)
    cache = ActionCache()  # as `recommender serve` runs it
    store = SqlStore(db)
    if db.dialect.name == "postgresql":
        cache.enabled = False
        ActionListener(db, cache, origin=store.origin).start()
    use_cases = UseCases(store, catalog=catalog, cache=cache, population_in_background=True)

    def echo(request: Any, _context: grpc.ServicerContext) -> Any:
        return request

    trivial = grpc.method_handlers_generic_handler("bench.Trivial", {
        "Echo": grpc.unary_unary_rpc_method_handler(
            echo,
            request_deserializer=pb.RecommendRequest.FromString,
            response_serializer=pb.RecommendRequest.SerializeToString,
        ),
    })
    running = start(use_cases, catalog, host="127.0.0.1", port=0,
                    max_workers=max_workers or config.RPC_THREADS, extra_handlers=(trivial,))
    _CACHES.append(cache)
    return running


_CACHES: list[Any] = []
"""The history cache of the server built in this process (the child's), for `cache`."""


_READERS: list[subprocess.Popen[bytes]] = []
"""The log pipe's readers (they exit when the server process does)."""


def log_pipe() -> TextIO:
    """Where the server under test writes its log: as `recommender serve` in a container, a
    line-buffered stream into a pipe that another process (here `cat`, into /dev/null) reads,
    so each write is a system call that wakes a reader. (/dev/null itself, block-buffered,
    made a write nearly free and hid what the access log's writes cost: with 16 callers,
    writing each line from its RPC thread cost 0.57 ms of server CPU a Recommend against 0.51
    in batches into a pipe, and no difference the noise let through into /dev/null.)"""
    read_end, write_end = os.pipe()
    _READERS.append(subprocess.Popen(["cat"], stdin=read_end, stdout=subprocess.DEVNULL))
    os.close(read_end)
    return os.fdopen(write_end, "w", buffering=1)


def _child(database_url: str, conn: Connection) -> None:
    """Child process: serve until told to stop (or SERVER_LIFETIME_S), answer CPU-time asks."""
    # As `recommender serve` does: access lines at INFO as JSON objects, into a pipe, so the
    # cost of formatting and writing them is part of what is measured.
    from recommender.cli.logs import setup_logging

    setup_logging("info", "json", stream=log_pipe())
    running = build_server(database_url)
    from recommender.rpc.server import freeze_startup_heap

    freeze_startup_heap()  # as `recommender serve` does
    conn.send(running.port)
    deadline = time.monotonic() + SERVER_LIFETIME_S
    try:
        while time.monotonic() < deadline:
            if not conn.poll(1.0):
                continue
            msg = conn.recv()
            if msg == "cpu":
                conn.send(time.process_time())
            elif msg == "cache":
                conn.send((_CACHES[-1].hits, _CACHES[-1].misses) if _CACHES else (0, 0))
            elif msg == "stop":
                break
    except EOFError:
        pass
    finally:
        running.stop(grace=1)


@dataclass
class ServerProcess:
    """The server under test in a spawned child process."""

    database_url: str
    port: int = 0
    _proc: Any = None
    _conn: Connection | None = None

    def __enter__(self) -> ServerProcess:
        ctx = mp.get_context("spawn")
        parent, child = ctx.Pipe()
        self._proc = ctx.Process(target=_child, args=(self.database_url, child), daemon=True)
        self._proc.start()
        self._conn = parent
        if not parent.poll(60):
            self._proc.kill()
            raise RuntimeError("benchmark server did not start within 60 s")
        self.port = int(parent.recv())
        return self

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def cpu_seconds(self) -> float:
        """CPU time (user + system, all threads) the server process has used so far."""
        assert self._conn is not None
        self._conn.send("cpu")
        if not self._conn.poll(10):
            raise RuntimeError("benchmark server did not answer")
        return float(self._conn.recv())

    def cache_counts(self) -> tuple[int, int]:
        """(hits, misses) of the server's history cache so far."""
        assert self._conn is not None
        self._conn.send("cache")
        if not self._conn.poll(10):
            raise RuntimeError("benchmark server did not answer")
        hits, misses = self._conn.recv()
        return int(hits), int(misses)

    def __exit__(self, *_exc: object) -> None:
        if self._conn is not None:
            with suppress(BrokenPipeError, OSError):
                self._conn.send("stop")
        if self._proc is not None:
            self._proc.join(10)
            if self._proc.is_alive():
                self._proc.kill()
                self._proc.join(5)


# --- closed-loop load ---------------------------------------------------------------------


@dataclass
class LoadResult:
    latencies_ms: list[float] = field(default_factory=list)
    seconds: float = 0.0
    codes: Counter[str] = field(default_factory=Counter)
    notes: Counter[str] = field(default_factory=Counter)

    @property
    def calls(self) -> int:
        return len(self.latencies_ms)

    @property
    def rate(self) -> float:
        return self.calls / self.seconds if self.seconds else float("nan")


Call = Callable[[], Any]
Check = Callable[[Any], str | None]


def closed_loop(make_call: Callable[[], tuple[Call, Callable[[], None]]], callers: int,
                seconds: float, *, check: Check | None = None, max_calls: int = 10_000_000,
                warmup: int = 5) -> LoadResult:
    """`callers` threads each call back-to-back for `seconds` (and at most `max_calls` in all).

    `make_call` gives each thread its own call and a close function (its own channel). Each
    thread warms up with `warmup` calls first. `check` may return a note for an answer (counted).
    """
    result = LoadResult()
    lock = threading.Lock()
    ready = threading.Barrier(callers + 1, timeout=60)
    go = threading.Event()
    per_thread_cap = max(1, max_calls // callers)
    stop_at = [0.0]

    def worker() -> None:
        call, close = make_call()
        lat: list[float] = []
        codes: Counter[str] = Counter()
        notes: Counter[str] = Counter()
        try:
            for _ in range(warmup):
                with suppress(grpc.RpcError):
                    call()
            ready.wait()
            go.wait(60)
            end = stop_at[0]
            while len(lat) < per_thread_cap:
                t0 = time.perf_counter()
                if t0 >= end:
                    break
                try:
                    answer = call()
                    codes["OK"] += 1
                    if check is not None and (note := check(answer)):
                        notes[note] += 1
                except grpc.RpcError as e:
                    codes[e.code().name] += 1
                lat.append((time.perf_counter() - t0) * 1000)
        finally:
            close()
            with lock:
                result.latencies_ms += lat
                result.codes += codes
                result.notes += notes

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(callers)]
    for t in threads:
        t.start()
    ready.wait()
    start = time.perf_counter()
    stop_at[0] = start + seconds
    go.set()
    for t in threads:
        t.join(seconds + 60)
    result.seconds = time.perf_counter() - start
    return result


def insert_executions(engine: Engine, rows: Iterable[dict[str, object]],
                      batch: int = 20_000) -> None:
    """Executions straight into the table, `batch` rows to a statement, in one transaction:
    the benchmarks fill 100,000s of rows, far faster than through RecordExecution."""
    from sqlalchemy import insert

    from recommender.store.models import ExecutionRow

    chunk: list[dict[str, object]] = []
    with engine.begin() as conn:
        for row in rows:
            chunk.append(row)
            if len(chunk) == batch:
                conn.execute(insert(ExecutionRow), chunk)
                chunk.clear()
        if chunk:
            conn.execute(insert(ExecutionRow), chunk)

