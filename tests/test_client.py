"""The runner's client package (client/, import name recommender_client) against a real server.

Skipped when the package is not installed (`pip install ./client`), unless
RECOMMENDER_REQUIRE_CLIENT is set, as in CI.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
import pytest

from recommender.store import SqlStore
from tests.harness.live import Live

try:
    import recommender_client as rc
except ImportError as e:  # pragma: no cover - depends on the environment
    if os.environ.get("RECOMMENDER_REQUIRE_CLIENT"):
        raise RuntimeError("recommender_client required (RECOMMENDER_REQUIRE_CLIENT) but not "
                           "installed: pip install ./client") from e
    pytest.skip("recommender_client not installed (pip install ./client)",
                allow_module_level=True)

ROOT = Path(__file__).resolve().parents[1]
A100 = rc.pb.Pool(pool_id="a100", gpu_model="NVIDIA A100-SXM4-40GB",
                  strategy=rc.pb.MIG_STRATEGY_MIXED)


def ask(action: str = "client-act", execution: str = "") -> Any:
    return rc.pb.RecommendRequest(action_id=action, execution_id=execution, workers=2,
                                  declared_memory_mib=7500, pools=[A100])


def outcome(execution: str, rec: Any, *, oom: bool = False) -> Any:
    return rc.pb.ExecutionRecord(
        execution_id=execution, action_id="client-act", recommendation_id=rec.recommendation_id,
        gpu_model=rec.gpu_model, profile=rec.profile.name, count=rec.count,
        peak_memory_mib=7000.0, duration_s=60.0,
        outcome=rc.pb.OUTCOME_OOM if oom else rc.pb.OUTCOME_SUCCEEDED)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_the_runners_three_calls(live: Live) -> None:
    with rc.RecommenderClient(live.address) as client:
        rec = client.recommend(ask(execution="exec-c1"))
        assert (rec.profile.name, rec.count, dict(rec.resources), rec.source) == (
            "1g.10gb", 2, {"nvidia.com/mig-1g.10gb": "2"}, "prior")
        assert [(r.profile.name, r.count) for r in rec.ladder] == [("3g.20gb", 2), ("7g.40gb", 2)]
        nxt = client.next_after_oom(rc.pb.NextAfterOomRequest(
            recommendation_id=rec.recommendation_id))
        assert (nxt.profile.name, nxt.count, nxt.attempt) == ("3g.20gb", 2, 2)
        done = outcome("exec-c1", nxt)
        assert client.record_execution(done).duplicate is False
        assert client.record_execution(done).duplicate is True


def test_errors_are_typed(live: Live) -> None:
    with rc.RecommenderClient(live.address) as client:
        with pytest.raises(rc.InvalidRequest, match="action_id") as bad:
            client.recommend(rc.pb.RecommendRequest(pools=[A100]))
        assert bad.value.code == grpc.StatusCode.INVALID_ARGUMENT
        assert isinstance(bad.value.__cause__, grpc.RpcError)
        with pytest.raises(rc.UnknownRecommendation):
            client.next_after_oom(rc.pb.NextAfterOomRequest(recommendation_id="nope"))
        rec = client.recommend(ask())
        top = rec
        for _ in rec.ladder:
            top = client.next_after_oom(rc.pb.NextAfterOomRequest(
                recommendation_id=top.recommendation_id))
        with pytest.raises(rc.LadderExhausted):
            client.next_after_oom(rc.pb.NextAfterOomRequest(
                recommendation_id=top.recommendation_id))


def test_unreachable_service_is_a_typed_error_within_the_deadline() -> None:
    with rc.RecommenderClient(f"127.0.0.1:{free_port()}", timeout=3) as client:
        for call in (lambda: client.recommend(ask()),
                     lambda: client.next_after_oom(rc.pb.NextAfterOomRequest(
                         recommendation_id="r")),
                     lambda: client.record_execution(rc.pb.ExecutionRecord(execution_id="e"))):
            started = time.monotonic()
            with pytest.raises(rc.RecommenderUnavailable) as e:
                call()
            assert time.monotonic() - started < 3.5
            assert e.value.code in (grpc.StatusCode.UNAVAILABLE,
                                    grpc.StatusCode.DEADLINE_EXCEEDED)


class Scripted:
    """A gRPC server with the Recommender's method names whose handlers a test scripts: the
    failures a real server cannot be made to give on demand (a hang, N UNAVAILABLEs in a row)."""

    def __init__(self, behaviour: Callable[[str, int, grpc.ServicerContext], bytes]) -> None:
        self.calls: dict[str, int] = {}
        self.lock = threading.Lock()

        def handler(name: str) -> grpc.RpcMethodHandler[bytes, bytes]:
            def run(raw: bytes, context: grpc.ServicerContext) -> bytes:
                with self.lock:
                    n = self.calls[name] = self.calls.get(name, 0) + 1
                return behaviour(name, n, context)
            return grpc.unary_unary_rpc_method_handler(run)

        names = ("Recommend", "NextAfterOom", "RecordExecution")
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        self.server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(
            "intelliscale.recommender.v1.Recommender", {n: handler(n) for n in names}),))
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()


@pytest.fixture
def scripted() -> Iterator[Callable[..., Scripted]]:
    servers: list[Scripted] = []

    def make(behaviour: Callable[[str, int, grpc.ServicerContext], bytes]) -> Scripted:
        servers.append(Scripted(behaviour))
        return servers[-1]

    yield make
    for s in servers:
        s.server.stop(0)


def test_every_call_has_a_deadline(scripted: Callable[..., Scripted]) -> None:
    release = threading.Event()

    def hang(name: str, n: int, context: grpc.ServicerContext) -> bytes:
        release.wait(10)
        return b""

    server = scripted(hang)
    try:
        with rc.RecommenderClient(f"127.0.0.1:{server.port}", timeout=0.3) as client:
            for call in (lambda: client.recommend(ask()),
                         lambda: client.next_after_oom(rc.pb.NextAfterOomRequest()),
                         lambda: client.record_execution(rc.pb.ExecutionRecord())):
                started = time.monotonic()
                with pytest.raises(rc.RecommenderUnavailable) as e:
                    call()
                assert e.value.code == grpc.StatusCode.DEADLINE_EXCEEDED
                assert time.monotonic() - started < 2
            with pytest.raises(rc.RecommenderUnavailable):  # a call's own deadline wins
                client.recommend(ask(), timeout=0.1)
    finally:
        release.set()


def test_unavailable_is_retried_by_the_service_config(
        scripted: Callable[..., Scripted]) -> None:
    def flaky(name: str, n: int, context: grpc.ServicerContext) -> bytes:
        if n <= 2:
            context.abort(grpc.StatusCode.UNAVAILABLE, "database unavailable")
        if name == "RecordExecution":
            return rc.pb.RecordExecutionResponse(duplicate=True).SerializeToString()
        return rc.pb.Recommendation(recommendation_id=f"{name}-{n}").SerializeToString()

    server = scripted(flaky)
    target = f"127.0.0.1:{server.port}"
    with rc.RecommenderClient(target) as client:
        assert client.record_execution(rc.pb.ExecutionRecord(execution_id="e")).duplicate
        assert client.next_after_oom(rc.pb.NextAfterOomRequest()).recommendation_id == \
            "NextAfterOom-3"
        assert client.recommend(ask()).recommendation_id == "Recommend-3"
    assert server.calls == {"RecordExecution": 3, "NextAfterOom": 3, "Recommend": 3}
    # Other codes are not retried, and neither is anything with retry=False.
    with rc.RecommenderClient(target, retry=False) as client, \
            pytest.raises(rc.RecommenderUnavailable):
        server.calls.clear()
        client.record_execution(rc.pb.ExecutionRecord(execution_id="e"))
    assert server.calls == {"RecordExecution": 1}


def test_retries_give_up_after_four_attempts(scripted: Callable[..., Scripted]) -> None:
    def down(name: str, n: int, context: grpc.ServicerContext) -> bytes:
        context.abort(grpc.StatusCode.UNAVAILABLE, "database unavailable")
        return b""

    server = scripted(down)
    with rc.RecommenderClient(f"127.0.0.1:{server.port}") as client, \
            pytest.raises(rc.RecommenderUnavailable, match="database unavailable"):
        client.record_execution(rc.pb.ExecutionRecord(execution_id="e"))
    assert server.calls == {"RecordExecution": rc.RETRY_POLICY["maxAttempts"]}


def test_the_ladder_walked_locally_matches_next_after_oom(live: Live) -> None:
    """Each local step is the step the service takes, so a runner that loses the service
    mid-execution goes on as it would have."""
    with rc.RecommenderClient(live.address) as client:
        for peak in (0.0, 12_000.0, 25_000.0):
            rec = client.recommend(ask(f"ladder-{peak:.0f}", execution=f"exec-l{peak:.0f}"))
            local_step, remote_step = rec, rec
            while True:
                try:
                    remote_step = client.next_after_oom(rc.pb.NextAfterOomRequest(
                        recommendation_id=remote_step.recommendation_id,
                        observed_peak_memory_mib=peak))
                except rc.LadderExhausted:
                    with pytest.raises(rc.LadderExhausted):
                        rc.next_from_ladder(local_step, peak)
                    break
                local_step = rc.next_from_ladder(local_step, peak)
                for f in ("pool_id", "gpu_model", "profile", "count", "resources", "attempt",
                          "gpu_equivalents"):
                    assert getattr(local_step, f) == getattr(remote_step, f), f
                assert [r.profile.name for r in local_step.ladder] == \
                    [r.profile.name for r in remote_step.ladder]
                assert local_step.source == "ladder" and not local_step.stored
                assert not local_step.recommendation_id


def test_next_after_oom_or_ladder_falls_back_when_the_service_is_gone(
        store: SqlStore, catalog: Any) -> None:
    from tests.harness.live import serving

    with serving(store, catalog) as live:
        client = rc.RecommenderClient(live.address, timeout=2)
        rec = client.recommend(ask(execution="exec-gone"))
        served = client.next_after_oom_or_ladder(rec)  # the service answers
        assert served.recommendation_id and served.stored and served.profile.name == "3g.20gb"
    # The server has stopped: the same call walks the ladder of what the runner holds.
    started = time.monotonic()
    local = client.next_after_oom_or_ladder(served)
    assert time.monotonic() - started < 3
    assert (local.profile.name, local.count, local.attempt) == ("7g.40gb", 2, 3)
    assert "walked locally" in local.reason and not local.recommendation_id
    with pytest.raises(rc.LadderExhausted):
        client.next_after_oom_or_ladder(local)  # no id: walked locally, no call
    unstored = rc.pb.Recommendation()
    unstored.CopyFrom(rec)
    unstored.stored = False
    assert client.next_after_oom_or_ladder(unstored).profile.name == "3g.20gb"
    client.close()


def test_tls_credentials(live: Live) -> None:
    """With credentials the channel speaks TLS: against the plaintext test server it fails,
    typed, instead of silently sending plaintext."""
    creds = grpc.ssl_channel_credentials()
    with rc.RecommenderClient(live.address, credentials=creds, timeout=2) as client, \
            pytest.raises(rc.RecommenderUnavailable):
        client.recommend(ask())


@pytest.mark.slow
def test_pip_install_client_in_a_fresh_venv(tmp_path: Path) -> None:
    """`pip install ./client` from the repository: only grpcio and protobuf come with it."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    subprocess.run([str(python), "-m", "pip", "install", "-q", str(ROOT / "client")],
                   check=True, timeout=600, capture_output=True)
    code = ("import importlib.metadata as m, json, recommender_client as rc, sys\n"
            "assert 'recommender' not in sys.modules\n"
            "print(json.dumps([d.metadata['Name'].lower() for d in m.distributions()]))\n"
            "print(rc.pb.Recommendation.DESCRIPTOR.full_name)\n")
    out = subprocess.run([str(python), "-c", code], cwd=tmp_path, capture_output=True,
                         text=True, timeout=60, check=True)
    installed, name = out.stdout.splitlines()
    assert name == "intelliscale.recommender.v1.Recommendation"
    extra = set(json.loads(installed)) - {"intelliscale-recommender-client", "grpcio", "protobuf",
                                    "typing-extensions", "typing_extensions", "pip",
                                    "setuptools"}
    assert not extra, f"installed beyond grpcio and protobuf: {extra}"
    assert not (ROOT / "client" / "recommender_client" / "_proto" / "intelliscale").is_dir() \
        or subprocess.run(["git", "check-ignore", "-q", "client/recommender_client/_proto/x.py"],
                          cwd=ROOT).returncode == 0
