"""The `recommender` command as a newcomer and an operator use it, in real processes."""

from __future__ import annotations

import itertools
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from recommender._proto.intelliscale.recommender.v1 import recommender_pb2_grpc as pb_grpc
from tests.harness.process import run_cli as run
from tests.harness.process import serve_in_child as start_server
from tests.helpers import access_lines, record, request


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
    # One JSON object a line, start-up and shutdown included; a call's method, status, time
    # and ids are fields of it (not JSON inside its message); no request bodies.
    records = [json.loads(x) for x in err.splitlines()]
    assert all({"time", "level", "logger", "message"} <= r.keys() for r in records)
    assert any("migrated" in r["message"] for r in records)
    assert records[-1]["message"] == "stopped"
    lines = access_lines(err)
    assert [x["method"] for x in lines] == ["Recommend", "RecordExecution"]
    assert all(x["code"] == "OK" and x["ms"] >= 0 for x in lines)
    assert lines[0]["action_id"] == "cli" and lines[1]["execution_id"] == "cli-1"
    assert "declared" not in err

    # The history command reads what the server wrote.
    out = run("history", "--json", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)
    assert [(r["action_id"], r["profile"], r["count"]) for r in rows] == [("cli", "1g.10gb", 2)]
    assert rows[0]["oom_chance"] == 0  # a declared figure: no chance weighed
    assert rows[0]["model_oom_chance"] is None  # nor one the young actions' record could move
    table = run("history", cwd=tmp_path)
    assert "1g.10gb" in table.stdout and "ACTION_ID" in table.stdout
    assert "OOM RISK" in table.stdout


def test_text_logs_for_people_at_a_terminal(tmp_path: Path) -> None:
    proc, port = start_server(tmp_path, "--log-format", "text", "--metrics-port", "-1")
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as ch:
            pb_grpc.RecommenderStub(ch).Recommend(request("people", declared=7500))
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    assert not any(x.startswith("{") for x in err.splitlines())
    access = [x for x in err.splitlines() if " recommender.access " in x]
    assert len(access) == 1
    assert re.search(r" INFO recommender\.access Recommend OK method=Recommend code=OK "
                     r"ms=[\d.]+ action_id=people", access[0]), access[0]


def test_environment_configures_port_and_database(tmp_path: Path) -> None:
    db = tmp_path / "elsewhere.db"
    out = run("migrate", cwd=tmp_path, env={"RECOMMENDER_DATABASE_URL": f"sqlite:///{db}"})
    assert out.returncode == 0 and "0009" in out.stdout
    assert db.exists()
    out = run("migrate", "--downgrade", "base", "--database-url", f"sqlite:///{db}",
              cwd=tmp_path)
    assert out.returncode == 0 and "None" in out.stdout


def test_the_price_of_an_oom_is_checked_from_the_option_and_the_environment(
        tmp_path: Path) -> None:
    """serve, retrain and evaluate take the same price (retrain must score candidates at the
    server's); a value that is no number of GPUs stops the command before it touches the
    database, naming the option and the variable."""
    from recommender.cli.main import build_parser
    from recommender.core import config

    for command in ("serve", "retrain", "evaluate"):
        parsed = build_parser().parse_args([command, "--oom-wait-gpus", "7.5"])
        assert parsed.oom_wait_gpus == 7.5
        assert build_parser().parse_args([command]).oom_wait_gpus == config.OOM_WAIT_GPUS
    for bad in ("-1", "lots", "nan", "5000"):
        out = run("serve", "--port", "0", cwd=tmp_path, env={"RECOMMENDER_OOM_WAIT_GPUS": bad})
        assert out.returncode == 2
        assert f"'{bad}': whole GPUs from 0 to 1000" in out.stderr
        assert "--oom-wait-gpus" in out.stderr and "RECOMMENDER_OOM_WAIT_GPUS" in out.stderr
    out = run("retrain", "--oom-wait-gpus", "-2", cwd=tmp_path)
    assert out.returncode == 2 and "'-2': whole GPUs" in out.stderr
    assert not (tmp_path / "recommender.db").exists(), "refused before touching the database"


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


DOWN = "postgresql+psycopg://postgres:pw@127.0.0.1:1/none"
"""A PostgreSQL URL where nothing listens (port 1): refused at once."""


def test_unreachable_database_is_a_clear_error(tmp_path: Path) -> None:
    for args in (("migrate", "--database-url", DOWN),
                 ("serve", "--port", "0", "--metrics-port", "-1", "--database-url", DOWN,
                  "--database-wait", "0")):
        out = run(*args, cwd=tmp_path)
        assert out.returncode == 3, out.stderr
        assert "database unavailable" in out.stderr and "Traceback" not in out.stderr
        assert ":pw@" not in out.stderr


def test_an_unopenable_sqlite_file_stops_at_once_whatever_the_wait(tmp_path: Path) -> None:
    started = time.monotonic()
    out = run("serve", "--port", "0", "--metrics-port", "-1", "--database-url",
              f"sqlite:///{tmp_path}/missing/folder/x.db", cwd=tmp_path)  # default wait
    assert out.returncode == 3, out.stderr
    assert "database unavailable" in out.stderr and "Traceback" not in out.stderr
    assert time.monotonic() - started < 30, "waited for a file that nothing will create"


def test_serve_answers_without_a_database_it_waits_for_then_gives_up(tmp_path: Path) -> None:
    """A database server down at start: `serve` listens anyway, Recommend answers from the
    request alone and says so, RecordExecution is refused UNAVAILABLE (the runner retries;
    nothing is acknowledged unstored), and after --database-wait it stops with status 3."""
    started = time.monotonic()  # before the process: its wait starts later
    proc, port = start_server(tmp_path, "--metrics-port", "-1", "--log-format", "text",
                              "--database-url", DOWN, "--database-wait", "4")
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as ch:
            status = health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest()).status
            assert status == health_pb2.HealthCheckResponse.SERVING
            stub = pb_grpc.RecommenderStub(ch)
            r = stub.Recommend(request("early", declared=7500), timeout=10)
            assert r.source == "fallback" and "database unavailable" in r.reason
            assert r.profile.name == "1g.10gb"  # the declared figure still counts
            with pytest.raises(grpc.RpcError) as refused:
                stub.RecordExecution(record("early-1", "early"), timeout=10)
            assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=10)
    assert proc.returncode == 3, err
    assert time.monotonic() - started >= 4.0, "gave up before the wait was over"
    assert "answering from the request alone" in err and "--database-wait" in err
    assert "still unavailable after" in err.splitlines()[-1]
    assert "Traceback" not in err and ":pw@" not in err


# --- configuration errors: a message naming the option, exit status 2, nothing touched --------


def script(*args: str, cwd: Path, env: dict[str, str] | None = None
           ) -> subprocess.CompletedProcess[str]:
    """The installed console script itself, as an operator types it."""
    exe = Path(sys.executable).with_name("recommender")
    return subprocess.run([str(exe), *args], cwd=cwd, text=True, capture_output=True,
                          timeout=60, env={**os.environ, **(env or {})})


def in_process(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """main() in this process (fast): the exit status, stdout and stderr."""
    from recommender.cli.main import main

    try:
        code = main(list(argv))
    except SystemExit as e:  # argparse's errors
        code = int(e.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def test_version_is_the_installed_distributions(tmp_path: Path) -> None:
    from importlib.metadata import version

    out = script("--version", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"recommender {version('intelliscale-recommender')}"


@pytest.mark.parametrize(("argv", "env", "named"), [
    (["serve", "--port", "70000"], {}, "--port"),  # gRPC would serve on 70000 - 65536 = 4464
    (["serve", "--port", "-1"], {}, "--port"),
    (["serve"], {"RECOMMENDER_PORT": "abc"}, "RECOMMENDER_PORT"),
    (["serve"], {"RECOMMENDER_METRICS_PORT": "abc"}, "RECOMMENDER_METRICS_PORT"),
    (["serve", "--metrics-port", "-2"], {}, "--metrics-port"),
    (["--log-level", "bogus", "history"], {}, "--log-level"),
    (["history", "--log-level", "bogus"], {}, "--log-level"),
    (["migrate"], {"RECOMMENDER_LOG_LEVEL": "bogus"}, "RECOMMENDER_LOG_LEVEL"),
    (["serve", "--log-format", "xml"], {}, "--log-format"),
    (["serve"], {"RECOMMENDER_LOG_FORMAT": "xml"}, "RECOMMENDER_LOG_FORMAT"),
    (["retrain", "--quantile", "5"], {}, "--quantile"),
    (["retrain", "--quantile", "0"], {}, "--quantile"),
    (["retrain", "--quantile", "1"], {}, "--quantile"),
    (["report", "--limit", "0"], {}, "--limit"),
    (["serve", "--database-wait", "-1"], {}, "--database-wait"),
    (["serve"], {"RECOMMENDER_DATABASE_WAIT_S": "soon"}, "RECOMMENDER_DATABASE_WAIT_S"),
])
def test_bad_values_are_refused_naming_the_option(
        argv: list[str], env: dict[str, str], named: str, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    from recommender.cli.main import build_parser

    for key, value in env.items():
        monkeypatch.setenv(key, value)
    with pytest.raises(SystemExit) as refused:  # while parsing: before any command runs
        build_parser().parse_args(argv)
    assert refused.value.code == 2
    err = capsys.readouterr().err
    assert named in err and "Traceback" not in err


def test_log_options_go_before_or_after_the_command(monkeypatch: pytest.MonkeyPatch) -> None:
    from recommender.cli.main import build_parser

    monkeypatch.delenv("RECOMMENDER_LOG_LEVEL", raising=False)
    monkeypatch.delenv("RECOMMENDER_LOG_FORMAT", raising=False)
    parse = build_parser().parse_args
    assert parse(["serve", "--log-level", "debug"]).log_level == "debug"
    assert parse(["--log-level", "DEBUG", "serve"]).log_level == "debug"
    assert parse(["--log-level", "debug", "serve", "--log-level", "error"]).log_level == "error"
    assert parse(["serve"]).log_level == "info"
    assert parse(["serve"]).log_format is None  # json for serve, text for the others
    assert parse(["history", "--log-format", "json"]).log_format == "json"
    monkeypatch.setenv("RECOMMENDER_LOG_FORMAT", "text")
    assert build_parser().parse_args(["serve"]).log_format == "text"


def test_a_bad_environment_breaks_neither_help_nor_other_commands(tmp_path: Path) -> None:
    env = {"RECOMMENDER_METRICS_PORT": "abc", "RECOMMENDER_PORT": "abc"}
    for args in (("--help",), ("serve", "--help")):
        out = script(*args, cwd=tmp_path, env=env)
        assert out.returncode == 0 and "usage: recommender" in out.stdout, out.stderr
    out = script("serve", cwd=tmp_path, env=env)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "RECOMMENDER_PORT" in out.stderr
    out = script("serve", "--port", "70000", cwd=tmp_path)
    assert out.returncode == 2 and "'70000'" in out.stderr and "Traceback" not in out.stderr
    assert list(tmp_path.iterdir()) == []


def test_a_port_in_use_is_refused_before_the_database_is_touched(tmp_path: Path) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        port = taken.getsockname()[1]
        out = script("serve", "--port", str(port), "--metrics-port", "-1", cwd=tmp_path)
    assert out.returncode == 2, out.stderr
    assert f"--port {port}" in out.stderr and "already in use" in out.stderr
    assert "Traceback" not in out.stderr and len(out.stderr.splitlines()) == 1
    assert list(tmp_path.iterdir()) == [], "nothing migrated"


@pytest.mark.parametrize("url", ["notaurl", "foo://", "postgresql//user:secret@db/x",
                                 "mysql://user:secret@db/x"])
def test_database_url_mistakes_are_messages(url: str, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    for command in ("migrate", "history", "report"):
        code, _, err = in_process(capsys, command, "--database-url", url)
        assert code == 2, err
        assert "--database-url" in err and "Traceback" not in err
        assert "secret" not in err
    monkeypatch.setenv("RECOMMENDER_DATABASE_URL", url)
    code, _, err = in_process(capsys, "serve", "--port", "0", "--metrics-port", "-1")
    assert code == 2 and "RECOMMENDER_DATABASE_URL" in err and "secret" not in err
    assert list(tmp_path.iterdir()) == []


def test_read_only_commands_never_create_a_database(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    from recommender.store import connect, migrate

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("RECOMMENDER_DATABASE_URL", raising=False)
    readers = (["history"], ["report"], ["layout", "--gpu-model", "A100-40GB", "--gpus", "1"])
    for command in readers:
        code, _, err = in_process(capsys, *command)
        assert code == 2, err
        assert "recommender.db does not exist" in err and "recommender migrate" in err
    assert list(tmp_path.iterdir()) == [], "no empty recommender.db left behind"

    (tmp_path / "recommender.db").touch()  # an empty SQLite database: no tables
    for command in readers:
        code, _, err = in_process(capsys, *command)
        assert code == 2 and "is not migrated" in err and "no such table" not in err
    assert [p.name for p in tmp_path.iterdir()] == ["recommender.db"]

    engine = connect("sqlite:///recommender.db")
    migrate(engine, "0003")
    code, _, err = in_process(capsys, "history")
    assert code == 2 and "lacks migrations 0004" in err and "recommender migrate" in err
    migrate(engine)
    engine.dispose()
    code, out, err = in_process(capsys, "history")
    assert code == 0, err
    assert "no recommendations match" in out


def test_report_to_a_missing_folder_is_a_message(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nope" / "r.html"
    code, _, err = in_process(capsys, "report", "--out", str(missing), "--database-url",
                              f"sqlite:///{tmp_path / 'never.db'}")
    assert code == 2
    assert f"--out {missing}" in err and "does not exist" in err and "Traceback" not in err
    assert not (tmp_path / "never.db").exists(), "checked before the database is read"


def test_evaluate_refuses_one_database_for_several_replays(tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]
                                                           ) -> None:
    """A second replay on the first one's database would learn from its executions (and its
    execution ids would be duplicates): a clear error, nothing written."""
    db = tmp_path / "replay.db"
    code, _, err = in_process(capsys, "evaluate", "--trace", "synthetic", "--quiet",
                              "--executions", "50", "--database-url", f"sqlite:///{db}")
    assert code == 2, err
    assert "--database-url" in err and "2" in err and "Traceback" not in err
    assert not db.exists()


def test_evaluate_shapes_replays_each_shape(capsys: pytest.CaptureFixture[str]) -> None:
    """--trace shapes: image, attention and noisy actions, each carrying its own inputs, below
    an 80 GB card; the same seed the same executions."""
    from recommender.evaluation.synthetic import SHAPES
    from recommender.evaluation.traces import shapes

    trace = shapes(actions=6, executions=300, seed=2)
    assert len(trace) == 300 and trace == shapes(actions=6, executions=300, seed=2)
    kinds = {e.action_id.split("-")[0]: set(e.features) for e in trace}
    assert kinds == {"image": {"batch_size", "input_mb", "side"},
                     "attention": {"batch_size", "seq_len"},
                     "noisy": {"batch_size", "input_mb"}} and set(kinds) == set(SHAPES)
    assert all(0 < e.peak_mib <= 79_000 for e in trace)
    code, out, err = in_process(capsys, "evaluate", "--trace", "shapes", "--quiet",
                                "--runner", "in-process", "--retrain-at", "none",
                                "--executions", "60", "--max-actions", "6")
    assert code == 0, err
    assert "other shapes" in out and "| IntelliScale (this service) |" in out


def test_evaluate_models_carries_a_size_constant_within_each_action(
        capsys: pytest.CaptureFixture[str]) -> None:
    """--trace models: each action's requests carry its model's size, never changing within
    it, and its peaks grow with that size across actions; the same seed the same executions."""
    from recommender.evaluation.traces import models

    trace = models(actions=8, executions=400, seed=3)
    assert len(trace) == 400 and trace == models(actions=8, executions=400, seed=3)
    sizes: dict[str, set[float]] = {}
    for e in trace:
        assert set(e.features) == {"batch_size", "params_b"} and 0 < e.peak_mib <= 79_000
        sizes.setdefault(e.action_id, set()).add(e.features["params_b"])
    assert all(len(s) == 1 for s in sizes.values()) and len(sizes) > 1
    lightest = min(e.peak_mib for e in trace if e.features["params_b"] == min(
        min(s) for s in sizes.values()))
    assert lightest < min(e.peak_mib for e in trace if e.features["params_b"] == max(
        max(s) for s in sizes.values()))
    code, out, err = in_process(capsys, "evaluate", "--trace", "models", "--quiet",
                                "--runner", "in-process", "--retrain-at", "none",
                                "--executions", "60", "--max-actions", "6")
    assert code == 0, err
    assert "one model per action" in out and "| IntelliScale (this service) |" in out


def test_evaluate_modes_replays_two_modes_per_action(capsys: pytest.CaptureFixture[str]) -> None:
    """--trace modes: each action's runs fall in a light and a heavy mode 1.3-1.9x apart, with
    nothing in the request to tell them; the same seed the same executions."""
    from recommender.evaluation.traces import modes

    trace = modes(actions=4, executions=800, seed=2)
    assert len(trace) == 800 and trace == modes(actions=4, executions=800, seed=2)
    for action in {e.action_id for e in trace}:
        peaks = sorted(e.peak_mib for e in trace if e.action_id == action)
        if len(peaks) < 50:
            continue
        p5, p50, p95 = (peaks[int(q * (len(peaks) - 1))] for q in (0.05, 0.5, 0.95))
        assert p95 / p50 > 1.2 > p50 / p5  # a heavy mode above a tight light one
    code, out, err = in_process(capsys, "evaluate", "--trace", "modes", "--quiet",
                                "--runner", "in-process", "--retrain-at", "none",
                                "--executions", "60", "--max-actions", "4")
    assert code == 0, err
    assert "two modes" in out and "| IntelliScale (this service) |" in out


def test_evaluate_step_places_the_first_attempts_around_each_action_s_step(
        capsys: pytest.CaptureFixture[str]) -> None:
    """--trace step sized by --max-actions and --executions; its replay, and its draws added
    up, say where each execution sat around its action's step, the service's beside VPA's."""
    from recommender.evaluation.synthetic import STEP_PHASES
    from recommender.evaluation.traces import step_change

    assert len(step_change(actions=3, executions=90, seed=2)) == 90
    small = ("--trace", "step", "--quiet", "--runner", "in-process", "--retrain-at", "none",
             "--executions", "90", "--max-actions", "3")
    for extra in (("--seed", "2"), ("--seeds", "2,3")):
        code, out, err = in_process(capsys, "evaluate", *small, *extra)
        assert code == 0, err
        lines = out.splitlines()
        head = next(i for i, line in enumerate(lines)
                    if line.startswith("| where in its action's story |"))
        assert "| Kubernetes VPA (P90 x 1.15, 24 h): first attempts that ran out |" in lines[head]
        table = list(itertools.takewhile(lambda line: line.startswith("| "), lines[head + 2:]))
        cells = [[c.strip() for c in line.split("|")[1:-1]] for line in table]
        assert [r[0] for r in cells] == [p for p in STEP_PHASES if p in {r[0] for r in cells}
                                         ] + ["all"]
        assert cells[0][0] == STEP_PHASES[0]
        executions = 180 if extra[0] == "--seeds" else 90  # the draws added up
        assert cells[-1][1] == str(executions) == str(sum(int(r[1]) for r in cells[:-1]))


def test_evaluate_seed_draws_another_workload_from_the_same_generator(
        capsys: pytest.CaptureFixture[str]) -> None:
    """--seed: the same seed replays the same executions (the oracle's row is the same), another
    seed other ones; the default stays the README's draw."""
    def oracle_row(*seed: str) -> str:
        code, out, err = in_process(capsys, "evaluate", "--trace", "synthetic", "--quiet",
                                    "--runner", "in-process", "--retrain-at", "none",
                                    "--executions", "40", "--max-actions", "5", *seed)
        assert code == 0, err
        return next(line for line in out.splitlines() if line.startswith("| oracle"))

    assert oracle_row("--seed", "3") == oracle_row("--seed", "3")
    assert oracle_row("--seed", "3") != oracle_row("--seed", "4")
    assert oracle_row() == oracle_row("--seed", "7")


def test_evaluate_seeds_gives_a_row_per_draw_and_their_total(
        capsys: pytest.CaptureFixture[str]) -> None:
    """--seeds: one row per draw, each the replay --seed gives, and a total that adds them up;
    the sentence under it counts the draws where the service ran out less often than VPA."""
    small = ("--trace", "modes", "--quiet", "--runner", "in-process", "--retrain-at", "none",
             "--executions", "80", "--max-actions", "4")
    code, out, err = in_process(capsys, "evaluate", *small, "--seeds", "3,1-2")
    assert code == 0, err
    lines = out.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("| seed"))
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in
            itertools.takewhile(lambda line: line.startswith("| "), lines[head + 2:])]
    assert [r[0] for r in rows] == ["1", "2", "3", "all 3"]
    # Under it, the draws' first attempts around each action's first heavy run, added up.
    phases = next(i for i, line in enumerate(lines)
                  if line.startswith("| where in its action's story"))
    assert lines[phases + 2].startswith("| before its first heavy run |")
    assert next(line for line in lines[phases:] if line.startswith("| all |")).split("|")[2] == (
        " 240 ")

    def number(cell: str) -> float:
        return float(cell.replace(",", "").rstrip("x"))

    for seed, row in zip(("1", "2", "3"), rows, strict=False):
        code, one, err = in_process(capsys, "evaluate", *small, "--seed", seed)
        assert code == 0, err
        ours, vpa = (next(line for line in one.splitlines() if line.startswith(f"| {name}"))
                     .strip("|").split("|") for name in ("IntelliScale (this", "Kubernetes VPA"))
        for cells, at in ((ours, 1), (vpa, 5)):
            assert round(number(cells[1].strip().rstrip("%")) * 80 / 100) == number(row[at])
            assert cells[2].strip() == row[at + 1] and cells[5].strip() == row[at + 2]
    for at in (1, 2, 5, 6):
        assert sum(number(r[at]) for r in rows[:3]) == number(rows[3][at])
    fewer = sum(number(r[1]) < number(r[5]) for r in rows[:3])
    assert f"fewer times on {fewer} of 3 draws" in out
    # The last column: the service's GB-h at VPA's count against VPA's; where it had no more
    # OOMs, at most its own (the replay is one of the bars).
    for r in rows[:3]:
        if r[9] == "not reached":
            assert number(r[1]) > number(r[5])
            continue
        at_vpa = number(r[9].split(" (")[0])
        assert float(r[9].split("(")[1].rstrip("%)")) == pytest.approx(
            100 * (at_vpa / number(r[7]) - 1), abs=0.5)
        if number(r[1]) <= number(r[5]):
            assert at_vpa <= number(r[3])


def test_evaluate_seeds_refuses_what_it_cannot_draw(capsys: pytest.CaptureFixture[str]) -> None:
    """--seeds with --seed, with GenTD26 alone, or with a range that runs backwards: a clear
    error, nothing replayed."""
    code, _, err = in_process(capsys, "evaluate", "--trace", "modes", "--quiet", "--seed", "1",
                              "--seeds", "1-2")
    assert code == 2 and "--seed and --seeds" in err
    code, _, err = in_process(capsys, "evaluate", "--trace", "gentd26", "--quiet",
                              "--seeds", "1-2")
    assert code == 2 and "GenTD26 is one trace" in err
    code, _, err = in_process(capsys, "evaluate", "--trace", "modes", "--seeds", "3-1")
    assert code == 2 and "'3-1'" in err and "ranges" in err
    code, _, err = in_process(capsys, "evaluate", "--trace", "modes", "--seeds", "1-500")
    assert code == 2 and "at most 100 seeds" in err
