"""The `recommender` command as a newcomer and an operator use it, in real processes."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from recommender._proto.intelliscale.recommender.v1 import recommender_pb2_grpc as pb_grpc
from tests.harness.process import run_cli as run
from tests.harness.process import serve_in_child as start_server
from tests.helpers import record, request


def test_serve_creates_sqlite_by_itself_and_stops_gracefully(tmp_path: Path) -> None:
    proc, port = start_server(tmp_path)
    try:
        assert (tmp_path / "recommender.db").exists()
        with grpc.insecure_channel(f"127.0.0.1:{port}") as ch:
            status = health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest()).status
            assert status == health_pb2.HealthCheckResponse.SERVING
            stub = pb_grpc.RecommenderStub(ch)
            r = stub.Recommend(request("cli", declared=7500, workers=2))
            assert r.profile.name == "1g.10gb"
            stub.RecordExecution(record("cli-1", "cli"))
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    # One structured line per call, and no request bodies in the log.
    lines = [json.loads(x.split("recommender.access ", 1)[1])
             for x in err.splitlines() if "recommender.access" in x]
    assert [x["method"] for x in lines] == ["Recommend", "RecordExecution"]
    assert all(x["code"] == "OK" and x["ms"] >= 0 for x in lines)
    assert "stopped" in err

    # The history command reads what the server wrote.
    out = run("history", "--json", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)
    assert [(r["action_id"], r["profile"], r["count"]) for r in rows] == [("cli", "1g.10gb", 2)]
    table = run("history", cwd=tmp_path)
    assert "1g.10gb" in table.stdout and "ACTION_ID" in table.stdout


def test_environment_configures_port_and_database(tmp_path: Path) -> None:
    db = tmp_path / "elsewhere.db"
    out = run("migrate", cwd=tmp_path, env={"RECOMMENDER_DATABASE_URL": f"sqlite:///{db}"})
    assert out.returncode == 0 and "0007" in out.stdout
    assert db.exists()
    out = run("migrate", "--downgrade", "base", "--database-url", f"sqlite:///{db}",
              cwd=tmp_path)
    assert out.returncode == 0 and "None" in out.stdout


def test_rpc_threads_is_checked_from_the_option_and_the_environment(tmp_path: Path) -> None:
    from recommender.cli.main import build_parser

    assert build_parser().parse_args(["serve", "--rpc-threads", "3"]).rpc_threads == 3
    for bad in ("0", "many", "257"):
        out = run("serve", "--port", "0", cwd=tmp_path, env={"RECOMMENDER_RPC_THREADS": bad})
        assert out.returncode == 2
        assert f"'{bad}': a whole number from 1 to 256" in out.stderr
        assert "RECOMMENDER_RPC_THREADS" in out.stderr
    assert not (tmp_path / "recommender.db").exists(), "refused before touching the database"


def test_malformed_catalog_override_is_refused_at_start(tmp_path: Path) -> None:
    bad = tmp_path / "override.json"
    bad.write_text(json.dumps({"gpus": [{"id": "A100-40GB", "profiles": [
        {"name": "2g.10gb", "memory_mib": -4}]}]}))
    start = time.monotonic()
    out = run("serve", "--port", "0", "--catalog-override", str(bad), cwd=tmp_path)
    assert out.returncode == 2
    assert "gpus[0].profiles[0].memory_mib" in out.stderr
    assert time.monotonic() - start < 30


def test_catalog_override_changes_what_is_served(tmp_path: Path) -> None:
    good = tmp_path / "override.json"
    good.write_text(json.dumps({"gpus": [{"id": "NVIDIA A100-SXM4-40GB", "profiles": [
        {"name": "1g.10gb", "memory_mib": 9984}, {"name": "2g.10gb", "memory_mib": 9984}]}]}))
    proc, port = start_server(tmp_path, "--catalog-override", str(good))
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as ch:
            r = pb_grpc.RecommenderStub(ch).Recommend(request("o", declared=7500))
            assert (r.profile.name, r.profile.memory_mib) == ("1g.10gb", 9984)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)


def test_unreachable_database_is_a_clear_error(tmp_path: Path) -> None:
    down = "postgresql+psycopg://postgres:pw@127.0.0.1:1/none"
    for args in (("migrate", "--database-url", down),
                 ("serve", "--port", "0", "--metrics-port", "-1", "--database-url", down)):
        out = run(*args, cwd=tmp_path)
        assert out.returncode == 3, out.stderr
        assert "database unavailable" in out.stderr and "Traceback" not in out.stderr
        assert ":pw@" not in out.stderr
