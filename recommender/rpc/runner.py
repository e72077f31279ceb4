"""The replay's live runner: a real `recommender serve` in a child process, called over a
loopback socket with the generated stubs, as the workflow runner calls it.

What makes it live rather than a simulation: the server reads the wall clock (each execution
is recorded when the replay reaches it, ended now and started its duration before, so ages,
the OOM floor's window and the population's refresh all run on real time); the retraining job
is `recommender retrain`, another child process on the same database; and a promoted version
reaches the server the way it reaches any replica, through its poll of the serving version,
which the replay waits for (bounded by REPLAY_RELOAD_TIMEOUT_S) before it goes on.
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import grpc

from recommender._proto.intelliscale.recommender.v1 import recommender_pb2 as pb
from recommender._proto.intelliscale.recommender.v1 import recommender_pb2_grpc as pb_grpc
from recommender.core import config
from recommender.core.domain import Execution, Request
from recommender.core.predictive import checked_oom_wait_gpus
from recommender.core.runner import Attempt
from recommender.rpc.convert import OUTCOME_TO_PB, STRATEGIES, timestamp_pb

STRATEGY_TO_PB = {v: k for k, v in STRATEGIES.items()}

STOP_TIMEOUT_S = config.GRACE_PERIOD_S + 20.0
"""SIGTERM to exit: the server drains calls for its grace period, then stops its threads."""


class ServerFailed(RuntimeError):
    """The replay's server did not start, or a child command failed; the message carries the
    end of its log."""


def request_message(request: Request) -> pb.RecommendRequest:
    """A core Request as the runner sends it. The replay offers pools without node states
    (capacity unknown), so nodes are refused rather than half converted."""
    pools = []
    for pool in request.pools:
        if pool.nodes:
            raise ValueError(f"pool {pool.pool_id}: the replay sends no node states")
        pools.append(pb.Pool(pool_id=pool.pool_id, gpu_model=pool.gpu_model.id,
                             strategy=STRATEGY_TO_PB[pool.strategy],
                             profiles=[pool.spelling(p) for p in pool.profiles]))
    return pb.RecommendRequest(
        action_id=request.action_id, execution_id=request.execution_id, pools=pools,
        workers=request.workers, max_workers=request.max_workers,
        target_throughput=request.target_throughput,
        needs_peer_to_peer=request.needs_peer_to_peer,
        declared_memory_mib=request.declared_memory_mib, features=request.features)


def attempt_of(reply: pb.Recommendation) -> Attempt:
    return Attempt(reply.recommendation_id, reply.gpu_model, reply.profile.name,
                   reply.profile.memory_mib, reply.source, reply.model_version,
                   reply.oom_chance)


class GrpcRunner:
    """The three calls over a channel to a running server, and the retraining job as a child
    process on its database. Build it with `serving`."""

    def __init__(self, channel: grpc.Channel, database_url: str, metrics_url: str,
                 catalog_override: str | None = None, workdir: Path | None = None,
                 oom_wait_gpus: float = config.OOM_WAIT_GPUS) -> None:
        self.recommender = pb_grpc.RecommenderStub(channel)  # type: ignore[no-untyped-call]
        self.admin = pb_grpc.AdminStub(channel)  # type: ignore[no-untyped-call]
        self.database_url = database_url
        self.metrics_url = metrics_url
        self.catalog_override = catalog_override
        self.workdir = workdir
        self.oom_wait_gpus = checked_oom_wait_gpus(oom_wait_gpus)
        """The server's price of an OOM, which the retraining job must score at too."""
        self.reload_waits: list[float] = []
        """Seconds from the end of each promoting retrain to the server serving the version
        (a retrain after which it already served it adds none)."""
        self.reload_misses = 0
        """Retrains after which the server did not serve the promoted version in time."""

    def recommend(self, request: Request, at: datetime) -> Attempt:
        reply = self.recommender.Recommend(request_message(request),
                                           timeout=config.REPLAY_CALL_TIMEOUT_S)
        return attempt_of(reply)

    def next_after_oom(self, attempt: Attempt, observed_peak_mib: float, at: datetime
                       ) -> Attempt | None:
        try:
            reply = self.recommender.NextAfterOom(
                pb.NextAfterOomRequest(recommendation_id=attempt.recommendation_id,
                                       observed_peak_memory_mib=observed_peak_mib),
                timeout=config.REPLAY_CALL_TIMEOUT_S)
        except grpc.RpcError as e:
            if e.code() == grpc.StatusCode.RESOURCE_EXHAUSTED:
                return None
            raise
        return attempt_of(reply)

    def record_execution(self, execution: Execution) -> None:
        ended = datetime.now(UTC)  # stamped when recorded, as the runner does when it ends
        started = ended - timedelta(seconds=execution.duration_s)
        self.recommender.RecordExecution(pb.ExecutionRecord(
            execution_id=execution.execution_id, action_id=execution.action_id,
            recommendation_id=execution.recommendation_id, gpu_model=execution.gpu_model,
            profile=execution.profile, count=execution.count,
            peak_memory_mib=execution.peak_memory_mib,
            sm_utilization=execution.sm_utilization, duration_s=execution.duration_s,
            throughput=execution.throughput, outcome=OUTCOME_TO_PB[execution.outcome],
            started_at=timestamp_pb(started), ended_at=timestamp_pb(ended),
            features=execution.features), timeout=config.REPLAY_CALL_TIMEOUT_S)

    def retrain(self, at: datetime) -> str:
        """`recommender retrain` on the server's database, then waits until the server serves
        the version the database says serves (it polls every MODEL_POLL_S)."""
        args = [sys.executable, "-m", "recommender", "retrain", "--quiet",
                "--database-url", self.database_url, "--oom-wait-gpus", str(self.oom_wait_gpus)]
        if self.catalog_override:
            args += ["--catalog-override", self.catalog_override]
        done = subprocess.run(args, capture_output=True, text=True, cwd=self.workdir,
                              stdin=subprocess.DEVNULL)
        if done.returncode != 0:
            raise ServerFailed(f"recommender retrain exited {done.returncode}: "
                               f"{done.stderr[-3000:]}")
        said = (done.stdout.strip().splitlines() or ["(nothing printed)"])[0]
        want, before = self.serving_version(), self.loaded_version()
        if want == before:
            return f"retrain: {said}; the server serves {want or 'no version'}"
        started = time.monotonic()
        deadline = started + config.REPLAY_RELOAD_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.loaded_version() == want:
                waited = time.monotonic() - started
                self.reload_waits.append(waited)
                return (f"retrain: {said}; the server serves {want or 'no version'} after "
                        f"{waited:.1f} s")
            time.sleep(0.1)
        self.reload_misses += 1
        return (f"retrain: {said}; the server still serves {self.loaded_version() or 'none'} "
                f"after {config.REPLAY_RELOAD_TIMEOUT_S:.0f} s, not {want or 'none'}")

    def serving_version(self) -> str:
        """The version the database marks serving (Admin.ListModelVersions), '' for none."""
        reply = self.admin.ListModelVersions(pb.ListModelVersionsRequest(),
                                             timeout=config.REPLAY_CALL_TIMEOUT_S)
        return next((v.version for v in reply.model_versions if v.serving), "")

    def loaded_version(self) -> str:
        """The version the server has loaded and uses, from its /metrics
        (`recommender_model_version_info`), '' for none."""
        with urllib.request.urlopen(self.metrics_url, timeout=config.REPLAY_CALL_TIMEOUT_S
                                    ) as r:
            text = r.read().decode()
        match = re.search(r'^recommender_model_version_info\{version="([^"]*)"\} 1', text,
                          re.MULTILINE)
        return match.group(1) if match else ""


@contextmanager
def serving(database_url: str = "", *, catalog_override: str | None = None,
            oom_wait_gpus: float = config.OOM_WAIT_GPUS) -> Iterator[GrpcRunner]:
    """`recommender serve` in a child process on a free loopback port (and a free metrics
    port), on `database_url` or a new temporary SQLite file; a runner calling it; the server
    stopped (SIGTERM) afterwards. Its output goes to files in a temporary folder."""
    price = str(checked_oom_wait_gpus(oom_wait_gpus))  # a bad one: this error, not a dead child
    with tempfile.TemporaryDirectory(prefix="recommender-replay-") as tmp:
        folder = Path(tmp)
        url = database_url or f"sqlite:///{folder / 'replay.db'}"
        out_path, log_path = folder / "serve.out", folder / "serve.log"
        args = [sys.executable, "-m", "recommender", "--log-format", "text", "serve",
                "--host", "127.0.0.1", "--port", "0", "--database-url", url,
                "--metrics-host", "127.0.0.1", "--metrics-port", "0",
                "--oom-wait-gpus", price]
        if catalog_override:
            args += ["--catalog-override", catalog_override]
        with out_path.open("wb") as out, log_path.open("wb") as err:
            proc = subprocess.Popen(args, cwd=folder, stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=err, preexec_fn=_die_with_parent)
        try:
            port, metrics_port = _wait_listening(proc, out_path, log_path)
            with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
                grpc.channel_ready_future(channel).result(timeout=config.REPLAY_START_TIMEOUT_S)
                yield GrpcRunner(channel, url, f"http://127.0.0.1:{metrics_port}/metrics",
                                 catalog_override, folder, oom_wait_gpus)
        finally:
            _stop(proc)


def _wait_listening(proc: subprocess.Popen[bytes], out_path: Path, log_path: Path
                    ) -> tuple[int, int]:
    deadline = time.monotonic() + config.REPLAY_START_TIMEOUT_S
    while time.monotonic() < deadline:
        listening = re.search(r"listening on .*:(\d+)", out_path.read_text(errors="replace"))
        metrics = re.search(r"metrics on http://[^:]+:(\d+)/",
                            log_path.read_text(errors="replace"))
        if listening and metrics:
            return int(listening.group(1)), int(metrics.group(1))
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    raise ServerFailed(f"recommender serve did not start (exit {proc.poll()}): "
                       f"{log_path.read_text(errors='replace')[-3000:]}")


def _die_with_parent() -> None:
    """In the server child before it runs: SIGTERM when the replay dies without stopping it
    (killed outright), so no server is left behind holding a port. Linux only (prctl)."""
    if sys.platform != "linux":
        return
    import ctypes

    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


__all__ = ["GrpcRunner", "ServerFailed", "request_message", "serving"]
