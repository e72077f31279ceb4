"""Faults the service must survive, against the real server in a child process.

* load: 16 client threads mix Recommend, NextAfterOom and RecordExecution (with retries of
  acknowledged ids and ids raced by several clients) for a minute: no call fails, and the
  executions table holds exactly the acknowledged executions;
* a NextAfterOom retried while the first call still runs gives the same single rung (a unique
  index on the parent settles the race);
* PostgreSQL stopped for about 5 s under load: Recommend keeps answering from the request alone
  (source "fallback", stored false) within seconds, RecordExecution fails UNAVAILABLE (never OK
  without being stored, never INTERNAL), and the clients' retries after the outage store
  everything exactly once;
* SIGKILL mid-load, on SQLite and on PostgreSQL: a new server on the same database has every
  execution the killed one acknowledged.

Each test runs `python -m recommender serve --port 0` on a fresh database and talks to it over
127.0.0.1. Every loop is bounded in count and in time. Run: `pytest -m slow tests/test_faults.py`.
The harness (the server in a child process, clients that keep a ledger, the database read
directly) is tests/harness/; stopping and starting PostgreSQL is in tests/postgres.py.
"""

from __future__ import annotations

import random
import signal
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc
import pytest
from sqlalchemy import make_url

from recommender._proto.intelliscale.recommender.v1 import recommender_pb2 as pb
from recommender._proto.intelliscale.recommender.v1 import recommender_pb2_grpc as pb_grpc
from tests.harness.clients import (
    CALL_TIMEOUT_S,
    OK,
    UNAVAILABLE,
    Call,
    Ledger,
    call,
    healthy,
    join_clients,
    latency_summary,
    run_clients,
)
from tests.harness.process import Server, start_server
from tests.harness.rows import assert_exactly_once, column, execution_ids, recommendation_ids
from tests.helpers import pool, record
from tests.helpers import request as recommend_request
from tests.postgres import (
    cannot_restart_postgres,
    ensure_postgres_running,
    pg_ctl,
    pg_ready,
    scratch_postgres_database,
)

pytestmark = pytest.mark.slow


# --- servers a test started --------------------------------------------------------------


@pytest.fixture
def servers() -> Iterator[list[Server]]:
    """Servers a test started; any still running at the end is killed."""
    started: list[Server] = []
    yield started
    for s in started:
        if s.proc.poll() is None:
            s.kill()


# --- a. load -----------------------------------------------------------------------------

LOAD_CLIENTS = 16
LOAD_SECONDS = 60.0
"""A minute, as the issue asks."""
LOAD_MAX_ITERATIONS = 3000
"""Per client: the time bound ends the run long before this count does on 2 cores."""

LOAD_POOLS = (pool("a100", "A100-40GB"), pool("h100", "H100-80GB"))
LOAD_ACTIONS = {f"load-{k}": 1500.0 + 1400.0 * k for k in range(8)}
"""Steady actions -> typical per-worker peak (MiB). Peaks depend on the action, not on the slice
given, so estimates settle instead of climbing (the biggest, +20 % noise, fits 20 GB)."""


def test_load_mixed_calls_lose_and_duplicate_nothing(postgres_url: str, tmp_path: Path,
                                                     servers: list[Server]) -> None:
    server = start_server(postgres_url, tmp_path)
    servers.append(server)
    ledger = Ledger()
    tag = uuid.uuid4().hex[:8]
    fresh: Counter[str] = Counter()  # duplicate=false answers per execution id
    repeated: set[str] = set()  # ids answered duplicate=true
    stored_recs: set[str] = set()
    deadline = time.monotonic() + LOAD_SECONDS

    def client(k: int) -> None:
        rng = random.Random(k)
        acked: dict[str, pb.ExecutionRecord] = {}
        with grpc.insecure_channel(server.address) as ch:
            stub = pb_grpc.RecommenderStub(ch)

            def send(m: pb.ExecutionRecord, retry: bool) -> None:
                c = ledger.add(call("RecordExecution", stub.RecordExecution, m,
                                    key=m.execution_id))
                if c.code != OK:
                    ledger.error(c.describe())
                    return
                with ledger.lock:
                    if c.reply.duplicate:
                        repeated.add(m.execution_id)
                    else:
                        fresh[m.execution_id] += 1
                if retry and not c.reply.duplicate:
                    ledger.error(f"retry of acknowledged {m.execution_id}: duplicate=false")
                if not c.reply.duplicate:
                    acked[m.execution_id] = m

            for i in range(LOAD_MAX_ITERATIONS):
                if time.monotonic() >= deadline:
                    break
                # A quarter of the executions run out of memory once. Each of those is an
                # action of its own, so OOM floors do not pile up on the steady actions.
                dies = rng.random() < 0.25
                steady = rng.choice(sorted(LOAD_ACTIONS))
                typical = LOAD_ACTIONS[steady]
                action = f"{tag}-oom-{k}-{i}" if dies else steady
                c = ledger.add(call("Recommend", stub.Recommend, recommend_request(
                    action, *LOAD_POOLS, workers=rng.choice((1, 1, 2)), declared=int(typical),
                    execution=f"{tag}-{k}-{i}")))
                if c.code != OK:
                    ledger.error(c.describe())
                    continue
                rec: pb.Recommendation = c.reply
                if not rec.stored or rec.source == "fallback":
                    ledger.error(f"Recommend degraded on a healthy database: stored="
                                 f"{rec.stored} source={rec.source} ({rec.reason})")
                with ledger.lock:
                    stored_recs.add(rec.recommendation_id)
                ran_in = rec
                if dies and rec.ladder:
                    ask = pb.NextAfterOomRequest(recommendation_id=rec.recommendation_id,
                                                 observed_peak_memory_mib=typical)
                    first = ledger.add(call("NextAfterOom", stub.NextAfterOom, ask))
                    again = ledger.add(call("NextAfterOom", stub.NextAfterOom, ask))  # a retry
                    for n in (first, again):
                        if n.code != OK:
                            ledger.error(n.describe())
                    if first.code == OK and again.code == OK:
                        nxt: pb.Recommendation = first.reply
                        if again.reply.recommendation_id != nxt.recommendation_id:
                            ledger.error(f"NextAfterOom retried on {rec.recommendation_id}: "
                                         f"{nxt.recommendation_id} then "
                                         f"{again.reply.recommendation_id}")
                        if nxt.attempt != rec.attempt + 1 or not nxt.stored or \
                                nxt.profile.memory_mib <= rec.profile.memory_mib:
                            ledger.error(f"bad rung after {rec.profile.name}: "
                                         f"{nxt.profile.name} attempt {nxt.attempt}")
                        with ledger.lock:
                            stored_recs.add(nxt.recommendation_id)
                        ran_in = nxt
                slice_mib = ran_in.profile.memory_mib
                peak = typical * rng.uniform(0.8, 1.2)
                oom = peak > slice_mib or (dies and rng.random() < 0.3)
                send(record(f"{tag}-{k}-{i}", action, model=ran_in.gpu_model,
                            profile=ran_in.profile.name, count=ran_in.count,
                            peak=min(peak, slice_mib) if oom else peak,
                            outcome=pb.OUTCOME_OOM if oom else pb.OUTCOME_SUCCEEDED,
                            recommendation=ran_in.recommendation_id), retry=False)
                if acked and rng.random() < 0.15:  # the runner retries: same record again
                    send(acked[rng.choice(sorted(acked))], retry=True)
                if i % 25 == 0:  # every client reports the same execution: one wins
                    send(record(f"{tag}-raced-{i // 25}", steady), retry=False)

    started = time.monotonic()
    threads = run_clients(LOAD_CLIENTS, client, ledger)
    join_clients(threads, LOAD_SECONDS + 4 * CALL_TIMEOUT_S)
    elapsed = time.monotonic() - started
    assert server.stop() == 0, server.log_text()[-3000:]

    records = ledger.of("RecordExecution")
    summary = {m: latency_summary(ledger.of(m))
               for m in ("Recommend", "NextAfterOom", "RecordExecution")}
    print(f"\nload: {LOAD_CLIENTS} clients for {elapsed:.1f} s; {summary}; "
          f"{len(fresh)} executions stored, {len(repeated)} ids answered duplicate")
    assert not ledger.errors, f"{len(ledger.errors)} errors: {ledger.errors[:10]}"
    assert len(records) > 500, f"only {len(records)} RecordExecution calls in {elapsed:.0f} s"
    assert repeated, "no retry was made"
    many = {k: n for k, n in fresh.items() if n > 1}
    assert not many, f"ids answered duplicate=false more than once: {list(many.items())[:10]}"
    assert repeated <= set(fresh), f"duplicate=true for ids never stored: " \
                                   f"{sorted(repeated - set(fresh))[:10]}"
    assert_exactly_once(postgres_url, set(fresh))
    lost = stored_recs - set(recommendation_ids(postgres_url))
    assert not lost, f"{len(lost)} recommendations answered stored=true are missing"
    codes = {code for (_, code) in server.access_codes()}
    assert codes == {"OK"}, server.access_codes()


# --- a'. a retried NextAfterOom that overlaps the first call -------------------------------

RACE_PARENTS = 40
RACE_CALLERS = 5


def _next_after_oom_together(stub: pb_grpc.RecommenderStub, rec_id: str) -> list[Call]:
    """RACE_CALLERS NextAfterOom calls for one recommendation, released at the same moment (a
    runner retrying after its deadline while the first call still runs, or two runner pods)."""
    barrier = threading.Barrier(RACE_CALLERS, timeout=CALL_TIMEOUT_S)
    ask = pb.NextAfterOomRequest(recommendation_id=rec_id)

    def one() -> Call:
        barrier.wait()
        return call("NextAfterOom", stub.NextAfterOom, ask)

    with ThreadPoolExecutor(RACE_CALLERS) as pool_:
        futures = [pool_.submit(one) for _ in range(RACE_CALLERS)]
        return [f.result(timeout=2 * CALL_TIMEOUT_S) for f in futures]


def test_concurrent_next_after_oom_gives_one_rung(database_url: str, tmp_path: Path,
                                                  servers: list[Server]) -> None:
    url, backend = database_url, make_url(database_url).get_backend_name()
    server = start_server(url, tmp_path)
    servers.append(server)
    split: dict[str, set[str]] = {}
    with grpc.insecure_channel(server.address) as ch:
        stub = pb_grpc.RecommenderStub(ch)
        for j in range(RACE_PARENTS):
            parent = stub.Recommend(recommend_request(f"race-{j}", declared=3000),
                                    timeout=CALL_TIMEOUT_S)
            assert parent.stored and parent.ladder
            calls = _next_after_oom_together(stub, parent.recommendation_id)
            failed = [c.describe() for c in calls if c.code != OK]
            assert not failed, failed
            ids = {c.reply.recommendation_id for c in calls}
            if len(ids) > 1:
                split[parent.recommendation_id] = ids
    assert server.stop() == 0, server.log_text()[-3000:]
    children = Counter(column(url, "SELECT parent_id FROM recommendations "
                                   "WHERE parent_id IS NOT NULL"))
    print(f"\nconcurrent NextAfterOom on {backend}: {len(split)} of {RACE_PARENTS} "
          f"recommendations got different rungs; rows per parent: {Counter(children.values())}")
    assert not split, f"{len(split)} of {RACE_PARENTS} recommendations got several rungs " \
                      f"from {RACE_CALLERS} simultaneous NextAfterOom calls"
    assert set(children.values()) == {1}, f"rungs stored per parent: {children.most_common(3)}"


# --- b. PostgreSQL stopped and started under load ----------------------------------------

OUTAGE_CLIENTS = 8
OUTAGE_S = 5.0
WARMUP_S = 3.0
AFTER_S = 5.0
RECOVERY_S = 2.0
"""Calls that start this long after PostgreSQL answers again must be served normally."""

CACHE_OFF_S = 1.5
"""A replica's per-action history cache is off this soon after PostgreSQL goes away."""

DEGRADED_CALL_MAX_S = 5.0
"""During the outage a call answers within this (the database timeout is 2 s)."""

RETRY_ROUNDS = 40
RETRY_PAUSE_S = 0.25


@pytest.fixture
def restartable_postgres_url(postgres_admin_url: str) -> Iterator[str]:
    """A fresh database on the local cluster, which the test may stop and start: like
    conftest's postgres_url, and PostgreSQL is running again whatever the test did."""
    reason = cannot_restart_postgres(postgres_admin_url)
    if reason:
        pytest.skip(reason)
    with scratch_postgres_database(postgres_admin_url, "intelliscale_faults",
                                   before_drop=ensure_postgres_running) as url:
        yield url


@pytest.mark.postgres
def test_postgres_outage_degrades_then_recovers(restartable_postgres_url: str, tmp_path: Path,
                                                servers: list[Server]) -> None:
    url = restartable_postgres_url
    server = start_server(url, tmp_path)
    servers.append(server)
    ledger = Ledger()
    tag = uuid.uuid4().hex[:8]
    stop = threading.Event()
    flush = threading.Event()  # set once PostgreSQL is back: retry what failed
    pending: dict[int, list[pb.ExecutionRecord]] = {k: [] for k in range(OUTAGE_CLIENTS)}
    phase: dict[str, float] = {}

    def client(k: int) -> None:
        with grpc.insecure_channel(server.address) as ch:
            stub = pb_grpc.RecommenderStub(ch)
            for i in range(5000):
                if stop.is_set() or time.monotonic() > hard_deadline:
                    break
                c = ledger.add(call("Recommend", stub.Recommend, recommend_request(
                    f"outage-{k % 3}", declared=3000, execution=f"{tag}-{k}-{i}")))
                if c.code != OK:
                    ledger.error(c.describe())
                m = record(f"{tag}-{k}-{i}", f"outage-{k % 3}")
                c = ledger.add(call("RecordExecution", stub.RecordExecution, m,
                                    key=m.execution_id))
                if c.code == UNAVAILABLE:
                    pending[k].append(m)
                elif c.code != OK:
                    ledger.error(c.describe())
                if flush.is_set() and pending[k]:  # the runner retries once it can
                    retry(stub, k)
                time.sleep(0.02)
            for _ in range(RETRY_ROUNDS):  # whatever is still pending, bounded
                if not pending[k]:
                    break
                time.sleep(RETRY_PAUSE_S)
                retry(stub, k)

    def retry(stub: pb_grpc.RecommenderStub, k: int) -> None:
        failed = []
        for m in pending[k]:
            c = ledger.add(call("RecordExecution", stub.RecordExecution, m, key=m.execution_id))
            if c.code == UNAVAILABLE:
                failed.append(m)
            elif c.code != OK:
                ledger.error(c.describe())
        pending[k] = failed

    hard_deadline = time.monotonic() + WARMUP_S + OUTAGE_S + AFTER_S + 60
    threads = run_clients(OUTAGE_CLIENTS, client, ledger)
    health_during_outage = None
    try:
        time.sleep(WARMUP_S)
        phase["stop"] = time.monotonic()
        pg_ctl("stop")
        phase["down"] = time.monotonic()
        assert not pg_ready()
        time.sleep(OUTAGE_S / 2)
        health_during_outage = healthy(server.address)
        time.sleep(OUTAGE_S / 2)
        phase["start"] = time.monotonic()
        pg_ctl("start")
    except BaseException:
        stop.set()
        raise
    finally:
        ensure_postgres_running()
    phase["up"] = time.monotonic()
    flush.set()
    time.sleep(AFTER_S)
    stop.set()
    join_clients(threads, 4 * CALL_TIMEOUT_S + RETRY_ROUNDS * RETRY_PAUSE_S + 30)
    assert server.stop() == 0, server.log_text()[-3000:]

    recommends, records = ledger.of("Recommend"), ledger.of("RecordExecution")
    t0 = phase["stop"]
    print(f"\noutage: stop took {phase['down'] - t0:.1f} s, down for "
          f"{phase['start'] - phase['down']:.1f} s, start took {phase['up'] - phase['start']:.1f}"
          f" s; Recommend {latency_summary(recommends)}; RecordExecution "
          f"{latency_summary(records)}; codes {Counter(c.code.name for c in records)}")
    assert not ledger.errors, f"{len(ledger.errors)} errors: {ledger.errors[:10]}"
    assert health_during_outage, "gRPC health did not say SERVING while PostgreSQL was down"

    # Never a hang: every call answered within seconds, outage or not.
    slow = [c.describe() for c in recommends + records if c.seconds > DEGRADED_CALL_MAX_S]
    assert not slow, f"{len(slow)} calls took over {DEGRADED_CALL_MAX_S} s: {slow[:10]}"

    # While PostgreSQL was surely down: fallback answers, and records refused UNAVAILABLE.
    down = [c for c in recommends + records
            if c.started >= phase["down"] and c.ended <= phase["start"]]
    down_recs = [c for c in down if c.method == "Recommend"]
    down_records = [c for c in down if c.method == "RecordExecution"]
    assert len(down_recs) >= OUTAGE_CLIENTS and len(down_records) >= OUTAGE_CLIENTS, \
        f"too few calls during the outage: {len(down_recs)}, {len(down_records)}"
    stored = [c.reply.recommendation_id for c in down_recs if c.reply.stored]
    assert not stored, f"{len(stored)} recommendations said stored while PostgreSQL was down"
    # From the request alone, once the history cache is off (its listener lost PostgreSQL: at
    # most about a second); just before, an action's cached history may still answer.
    settled = [c for c in down_recs if c.started >= phase["down"] + CACHE_OFF_S]
    assert len(settled) >= OUTAGE_CLIENTS, f"only {len(settled)} settled outage calls"
    wrong = Counter(c.reply.source for c in settled if c.reply.source != "fallback"
                    or "database unavailable" not in c.reply.reason)
    assert not wrong, f"Recommend during the outage, not from the request alone: {wrong}"
    refused = Counter(c.code.name for c in down_records)
    assert refused == {"UNAVAILABLE": len(down_records)}, refused

    # PostgreSQL back: served normally again, by the same server.
    after = [c for c in recommends + records if c.started >= phase["up"] + RECOVERY_S]
    assert len(after) >= OUTAGE_CLIENTS
    not_ok = [c.describe() for c in after if c.code != OK]
    assert not not_ok, f"calls failing after PostgreSQL came back: {not_ok[:10]}"
    degraded = [c.reply.source for c in after
                if c.method == "Recommend" and (not c.reply.stored or c.reply.source == "fallback")]
    assert not degraded, f"{len(degraded)} recommendations still degraded after the outage"

    # Every execution eventually acknowledged, stored once; OK always meant stored.
    attempted = {c.key for c in records}
    acked = {c.key for c in records if c.code == OK}
    left = sorted(attempted - acked)
    assert not left, f"{len(left)} executions never acknowledged, even after retries: {left[:5]}"
    fresh = Counter(c.key for c in records if c.code == OK and not c.reply.duplicate)
    assert max(fresh.values()) == 1, "an execution answered duplicate=false twice"
    ambiguous = acked - set(fresh)  # UNAVAILABLE, yet stored: its retry said duplicate
    retried = {c.key for c in records if c.code != OK}
    print(f"outage: {len(acked)} executions, {len(retried)} of them refused then retried, "
          f"{len(ambiguous)} stored although answered UNAVAILABLE")
    assert_exactly_once(url, acked)
    said_stored = {c.reply.recommendation_id for c in recommends if c.reply.stored}
    missing = said_stored - set(recommendation_ids(url))
    assert not missing, f"{len(missing)} recommendations answered stored=true are missing"
    codes = Counter(code for (method, code) in server.access_codes())
    assert set(codes) <= {"OK", "UNAVAILABLE"}, codes


# --- b'. PostgreSQL down when the server starts -------------------------------------------

@pytest.mark.postgres
def test_a_server_started_while_postgres_is_down_migrates_it_once_up(
        restartable_postgres_url: str, tmp_path: Path, servers: list[Server]) -> None:
    """The servers and PostgreSQL restarted together: `serve` answers from the request alone
    until the database is up, then migrates the (empty) database and stores as usual."""
    url = restartable_postgres_url
    pg_ctl("stop")
    try:
        assert not pg_ready()
        server = start_server(url, tmp_path)  # the default --database-wait (5 minutes)
        servers.append(server)
        with grpc.insecure_channel(server.address) as ch:
            stub = pb_grpc.RecommenderStub(ch)
            r = stub.Recommend(recommend_request("late-db", declared=3000), timeout=10)
            assert r.source == "fallback" and "database unavailable" in r.reason
            pg_ctl("start")
            stored = None
            for _ in range(120):  # bounded: the retry's pause is at most 10 s
                c = call("RecordExecution", stub.RecordExecution, record("late-db-1", "late-db"),
                         key="late-db-1")
                if c.code == OK:
                    stored = c
                    break
                assert c.code == UNAVAILABLE, c.describe()
                time.sleep(0.25)
            assert stored is not None, server.log_text()[-3000:]
            r = stub.Recommend(recommend_request("late-db", declared=3000,
                                                 execution="late-db-2"), timeout=10)
            assert r.source != "fallback", r.reason
    finally:
        ensure_postgres_running()
    assert server.stop() == 0, server.log_text()[-3000:]
    assert execution_ids(url) == ["late-db-1"]
    assert recommendation_ids(url)  # the second Recommend was stored
    assert "migrated after" in server.log_text()


# --- c. SIGKILL mid-load ------------------------------------------------------------------

KILL_CLIENTS = 8
KILL_AFTER_ACKS = 400
KILL_AFTER_S = 10.0
"""The server is killed once this many executions are acknowledged, or after this long."""


def test_sigkill_loses_no_acknowledged_execution(database_url: str, tmp_path: Path,
                                                 servers: list[Server]) -> None:
    url, backend = database_url, make_url(database_url).get_backend_name()
    server = start_server(url, tmp_path, "first")
    servers.append(server)
    ledger = Ledger()
    tag = uuid.uuid4().hex[:8]
    stop = threading.Event()
    messages: dict[str, pb.ExecutionRecord] = {}

    def client(k: int) -> None:
        with grpc.insecure_channel(server.address) as ch:
            stub = pb_grpc.RecommenderStub(ch)
            for i in range(5000):
                if stop.is_set() or time.monotonic() > hard_deadline:
                    break
                m = record(f"{tag}-{k}-{i}", f"kill-{k % 4}", peak=2000.0 + 10 * (i % 50))
                with ledger.lock:
                    messages[m.execution_id] = m
                c = ledger.add(call("RecordExecution", stub.RecordExecution, m,
                                    key=m.execution_id, timeout=5))
                if c.code != OK:
                    break  # the server is gone: this runner backs off (the retry comes later)

    hard_deadline = time.monotonic() + KILL_AFTER_S + 30
    threads = run_clients(KILL_CLIENTS, client, ledger)
    wait_until = time.monotonic() + KILL_AFTER_S
    while time.monotonic() < wait_until:
        if sum(1 for c in ledger.of("RecordExecution") if c.code == OK) >= KILL_AFTER_ACKS:
            break
        time.sleep(0.05)
    killed_at = time.monotonic()
    server.kill()  # SIGKILL: no handler, no grace
    assert server.proc.returncode == -signal.SIGKILL
    time.sleep(0.5)  # the clients see the server gone
    stop.set()
    join_clients(threads, 3 * CALL_TIMEOUT_S)

    records = ledger.of("RecordExecution")
    assert not ledger.errors, ledger.errors[:10]
    before = [c.describe() for c in records if c.code != OK and c.ended < killed_at]
    assert not before, f"{len(before)} calls failed before the kill: {before[:10]}"
    acked = {c.key for c in records if c.code == OK}
    assert all(not c.reply.duplicate for c in records if c.code == OK)
    attempted = set(messages)
    assert len(acked) >= 50, f"only {len(acked)} acknowledged before the kill"

    # What the database holds right after the crash: all acknowledged, nothing invented.
    rows = execution_ids(url)
    lost = sorted(acked - set(rows))
    assert not lost, f"{len(lost)} of {len(acked)} acknowledged executions lost by SIGKILL " \
                     f"on {backend}: {lost[:10]}"
    assert set(rows) <= attempted and len(rows) == len(set(rows))

    # A new server on the same database agrees: acknowledged ids are duplicates, and the
    # runner's retries of the unacknowledged ones store each once.
    second = start_server(url, tmp_path, "second")
    servers.append(second)
    with grpc.insecure_channel(second.address) as ch:
        stub = pb_grpc.RecommenderStub(ch)
        for key in sorted(attempted):
            c = call("RecordExecution", stub.RecordExecution, messages[key], key=key)
            assert c.code == OK, c.describe()
            if key in acked:
                assert c.reply.duplicate, f"{key}: acknowledged before the kill, " \
                                          "yet the new server stored it again"
    assert second.stop() == 0, second.log_text()[-3000:]
    print(f"\nsigkill on {backend}: {len(acked)} acknowledged before the kill, "
          f"{len(set(rows))} rows after it, {len(attempted)} after the retries; "
          f"{latency_summary(records)}")
    assert_exactly_once(url, attempted)
