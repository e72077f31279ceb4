"""Operations: Prometheus metrics, TLS and mutual TLS, no secrets in logs."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import grpc
import pytest
from sqlalchemy import make_url

from recommender._proto.intelliscale.recommender.v1 import recommender_pb2 as pb
from recommender._proto.intelliscale.recommender.v1 import recommender_pb2_grpc as pb_grpc
from recommender.core.catalog import Catalog
from recommender.core.usecases import UseCases
from recommender.rpc.metrics import Metrics, serve_metrics
from recommender.rpc.server import Tls, start
from recommender.store import SqlStore
from tests.harness.live import Live
from tests.helpers import record, request


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        assert r.headers["Content-Type"].startswith("text/plain")
        return str(r.read().decode())


def test_metrics_count_calls_latencies_and_ooms(live: Live) -> None:
    server = serve_metrics("127.0.0.1", 0)
    assert server is not None
    try:
        live.recommender.Recommend(request("m-act", declared=1000))
        live.recommender.RecordExecution(record("m-1", "m-act", outcome=pb.OUTCOME_OOM))
        with pytest.raises(grpc.RpcError):
            live.recommender.Recommend(request(""))
        text = scrape(server.server_address[1])
    finally:
        server.shutdown()
    assert re.search(r'recommender_calls_total\{code="OK",method="Recommend"\} [1-9]', text)
    assert re.search(r'recommender_calls_total\{code="INVALID_ARGUMENT",method="Recommend"\}',
                     text)
    assert 'recommender_call_duration_seconds_bucket{le="+Inf",method="Recommend"}' in text
    assert re.search(r'recommender_executions_total\{action_id="m-act",outcome="OOM"\} [1-9]',
                     text)
    assert re.search(r'recommender_recommendations_total\{source="prior"\} [1-9]', text)
    assert "# TYPE recommender_call_duration_seconds histogram" in text


def test_a_counter_past_a_million_still_moves() -> None:
    m = Metrics()
    m.calls.labels(method="Recommend", code="OK").inc(1_234_567)
    before = m.render()
    m.calls.labels(method="Recommend", code="OK").inc(5)
    after = m.render()
    line = 'recommender_calls_total{code="OK",method="Recommend"} '
    assert line + "1.234567e+06" in before
    assert line + "1.234572e+06" in after


def test_executions_are_counted_per_action_up_to_the_bound_then_as_other(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The kept per-action series count as labels() would: each action's own up to
    METRICS_MAX_ACTIONS actions, "other" beyond, again and again."""
    from recommender.core import config
    from recommender.rpc import metrics

    m = Metrics()
    monkeypatch.setattr(metrics, "METRICS", m)
    monkeypatch.setattr(config, "METRICS_MAX_ACTIONS", 2)
    for _ in range(3):
        for action in ("a", "b", "c", "d"):
            metrics.record_execution(action, "SUCCEEDED")
        metrics.record_execution("a", "OOM")
    text = m.render()
    for action, n in (("a", 3), ("b", 3), ("other", 6)):
        assert (f'recommender_executions_total{{action_id="{action}",outcome="SUCCEEDED"}} '
                f"{n:.1f}") in text
    assert 'recommender_executions_total{action_id="a",outcome="OOM"} 3.0' in text
    assert 'action_id="c"' not in text and 'action_id="d"' not in text


def test_metrics_include_process_and_platform_collectors() -> None:
    server = serve_metrics("127.0.0.1", 0)
    assert server is not None
    try:
        text = scrape(server.server_address[1])
    finally:
        server.shutdown()
    assert re.search(r"^process_resident_memory_bytes [1-9]", text, re.M)
    assert re.search(r"^process_cpu_seconds_total ", text, re.M)
    assert re.search(r'^python_info\{implementation="CPython"', text, re.M)
    assert "python_gc_collections_total" in text
    assert "_created" not in text


def test_metrics_port_taken_does_not_stop_the_service() -> None:
    first = serve_metrics("127.0.0.1", 0)
    assert first is not None
    try:
        assert serve_metrics("127.0.0.1", first.server_address[1]) is None
    finally:
        first.shutdown()


def openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A CA, a server certificate for localhost/127.0.0.1 and a client certificate."""
    d = tmp_path_factory.mktemp("pki")
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out",
            "ca.pem", "-days", "2", "-subj", "/CN=test-ca", cwd=d)
    (d / "san.cnf").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    for name in ("server", "client"):
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out",
                f"{name}.csr", "-subj", f"/CN={name}", cwd=d)
        openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
                "-CAcreateserial", "-out", f"{name}.pem", "-days", "2", "-extfile", "san.cnf",
                cwd=d)
    return d


def tls_server(store: SqlStore, catalog: Catalog, tls: Tls) -> Iterator[int]:
    running = start(UseCases(store, catalog=catalog), catalog, host="127.0.0.1",
                    port=0, tls=tls)
    try:
        yield running.port
    finally:
        running.stop(grace=1)


def call(channel: grpc.Channel) -> str:
    stub = pb_grpc.RecommenderStub(channel)
    return str(stub.Recommend(request("tls", declared=1000), timeout=5).profile.name)


def test_tls(store: SqlStore, catalog: Catalog, pki: Path) -> None:
    tls = Tls((pki / "server.pem").read_bytes(), (pki / "server.key").read_bytes())
    for port in tls_server(store, catalog, tls):
        creds = grpc.ssl_channel_credentials(root_certificates=(pki / "ca.pem").read_bytes())
        with grpc.secure_channel(f"localhost:{port}", creds) as ch:
            assert call(ch) == "1g.5gb"
        with grpc.insecure_channel(f"127.0.0.1:{port}") as ch, pytest.raises(grpc.RpcError):
            call(ch)


def test_mutual_tls(store: SqlStore, catalog: Catalog, pki: Path) -> None:
    tls = Tls((pki / "server.pem").read_bytes(), (pki / "server.key").read_bytes(),
              (pki / "ca.pem").read_bytes())
    ca = (pki / "ca.pem").read_bytes()
    for port in tls_server(store, catalog, tls):
        anonymous = grpc.ssl_channel_credentials(root_certificates=ca)
        with grpc.secure_channel(f"localhost:{port}", anonymous) as ch, \
                pytest.raises(grpc.RpcError):
            call(ch)
        mine = grpc.ssl_channel_credentials(
            root_certificates=ca, private_key=(pki / "client.key").read_bytes(),
            certificate_chain=(pki / "client.pem").read_bytes())
        with grpc.secure_channel(f"localhost:{port}", mine) as ch:
            assert call(ch) == "1g.5gb"


def test_tls_options_are_checked_at_start(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "recommender", "serve", "--port", "0",
                          "--tls-cert", "/nonexistent.pem", "--tls-key", "/nonexistent.key"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "TLS certificate" in out.stderr
    out = subprocess.run([sys.executable, "-m", "recommender", "serve", "--port", "0",
                          "--tls-cert", "/x.pem"], cwd=tmp_path, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 2 and "go together" in out.stderr


@pytest.mark.postgres
def test_database_password_never_reaches_the_log(postgres_url: str, tmp_path: Path) -> None:
    url = make_url(postgres_url).set(password="s3cret-pw").render_as_string(hide_password=False)
    proc = subprocess.Popen(
        [sys.executable, "-m", "recommender", "serve", "--port", "0", "--metrics-port", "-1",
         "--database-url", url, "--admin-token", "adm1n-t0ken"],
        cwd=tmp_path, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    port = int(re.search(r"listening on .*:(\d+)", line).group(1))  # type: ignore[union-attr]
    with grpc.insecure_channel(f"127.0.0.1:{port}") as ch:
        pb_grpc.RecommenderStub(ch).Recommend(request("secret", declared=1000), timeout=10)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=30)
    assert "s3cret-pw" not in out + err and "adm1n-t0ken" not in out + err
    assert "***" in err


def test_the_price_of_an_oom_is_a_metric(catalog: Catalog) -> None:
    from recommender.cli.serve import price_gauges
    from tests.fakes import InMemoryStore

    for price in (0.0, 7.5):
        uc = UseCases(InMemoryStore(), catalog=catalog, oom_wait_gpus=price)
        assert [(name, kind, labels, value) for name, kind, _, labels, value
                in price_gauges(uc)] == [("recommender_oom_wait_gpus", "gauge", (), price)]


def test_the_learned_priors_are_metrics(catalog: Catalog) -> None:
    """An operator sees what a replica expects of an action it knows little of: the
    population's spread once read, and the spread of designs on the inputs once five actions
    show it; neither before."""
    from recommender.cli.serve import prior_gauges
    from tests.builders import T0, execution
    from tests.fakes import InMemoryStore
    from tests.test_online import _precise

    uc = UseCases(InMemoryStore(), catalog=catalog, clock=lambda: T0)
    assert list(prior_gauges(uc)) == []
    for a in range(3):
        for k in range(3):
            uc.record_execution(execution(f"e{a}-{k}", f"act-{a}", peak=3000.0 * (1 + 0.5 * k),
                                          at=T0 - timedelta(hours=k)))
    population = uc.memory_population()
    assert population is not None
    for a in range(5):
        uc.action_models.get(f"in-{a}", _precise(a, 30), population.log_scale)
    values = {dict(labels)["designs"]: value for name, kind, _, labels, value
              in prior_gauges(uc) if name == "recommender_prior_spread" and kind == "gauge"}
    assert values["without inputs"] == population.log_scale
    assert 0.0 < values["on inputs"] < 0.1 <= population.log_scale
