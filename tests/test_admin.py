"""The Admin service over real gRPC (SQLite and PostgreSQL), its token, and `history`."""

from __future__ import annotations

import csv
import io
import json
import logging
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from recommender._proto.intelliscale.recommender.v1 import recommender_pb2 as pb
from recommender._proto.intelliscale.recommender.v1 import recommender_pb2_grpc as pb_grpc
from recommender.cli import main as cli_main
from recommender.cli.logs import fields
from recommender.core.catalog import Catalog, load_catalog
from recommender.core.usecases import UseCases
from recommender.rpc.auth import AdminTokenInterceptor, AuthConfigError, resolve_admin_token
from recommender.rpc.server import start
from recommender.store import SqlStore
from tests.builders import model_version as version
from tests.harness.live import Live
from tests.harness.process import run_cli as run
from tests.helpers import pool, record, request, ts

TOKEN = "s3cr3t-admin-token-0123456789"


def ids(page: pb.ListRecommendationsResponse) -> list[str]:
    return [e.recommendation.recommendation_id for e in page.recommendations]


def listed(live: Live, **kw: object) -> list[str]:
    return ids(live.admin.ListRecommendations(
        pb.ListRecommendationsRequest(page_size=100, **kw)))  # type: ignore[arg-type]


def code_of(fn: object, *args: object, **kw: object) -> grpc.StatusCode:
    with pytest.raises(grpc.RpcError) as err:
        fn(*args, **kw)  # type: ignore[operator]
    return err.value.code()


# --- ListRecommendations -------------------------------------------------------------------


def test_filters_by_action_pool_gpu_model_and_source(live: Live) -> None:
    rec = live.recommender
    a100 = rec.Recommend(request("a", pool("a100", "A100-40GB"), declared=7500)).recommendation_id
    h100 = rec.Recommend(request("a", pool("h100", "H100-80GB"), declared=7500)).recommendation_id
    fallback = rec.Recommend(request("b", pool("a100", "A100-40GB"))).recommendation_id
    rung = rec.NextAfterOom(pb.NextAfterOomRequest(recommendation_id=a100)).recommendation_id

    assert set(listed(live)) == {a100, h100, fallback, rung}
    assert listed(live, action_id="b") == [fallback]
    assert set(listed(live, action_id="a")) == {a100, h100, rung}
    assert listed(live, pool_id="h100") == [h100]
    on_a100 = {a100, fallback, rung}
    assert set(listed(live, gpu_model="A100-40GB")) == on_a100
    # The names NVML reports resolve like everywhere else.
    assert set(listed(live, gpu_model="NVIDIA A100-SXM4-40GB")) == on_a100
    assert listed(live, gpu_model="H100-80GB") == [h100]
    assert listed(live, gpu_model="GTX-1080") == []
    assert listed(live, source="fallback") == [fallback]
    assert set(listed(live, source="prior")) == {a100, h100}
    assert listed(live, source="ladder") == [rung]
    assert listed(live, action_id="a", pool_id="a100", source="ladder") == [rung]


def test_outcome_filter_and_the_join_with_executions(live: Live) -> None:
    rec = live.recommender
    fitted = rec.Recommend(request("act", declared=7500, execution="e-fit"))
    oom_recorded = rec.Recommend(request("act", declared=7500, execution="e-oom"))
    oom_laddered = rec.Recommend(request("act", declared=7500, execution="e-lad"))
    unknown = rec.Recommend(request("act", declared=7500, execution="e-unk"))
    rec.RecordExecution(record("e-fit", peak=6900, recommendation=fitted.recommendation_id))
    rec.RecordExecution(record("e-oom", peak=9800, outcome=pb.OUTCOME_OOM,
                               recommendation=oom_recorded.recommendation_id))
    rung = rec.NextAfterOom(pb.NextAfterOomRequest(
        recommendation_id=oom_laddered.recommendation_id, observed_peak_memory_mib=9500))

    assert listed(live, outcome=pb.OUTCOME_FILTER_FITTED) == [fitted.recommendation_id]
    assert set(listed(live, outcome=pb.OUTCOME_FILTER_OOM)) == {
        oom_recorded.recommendation_id, oom_laddered.recommendation_id}
    assert set(listed(live, outcome=pb.OUTCOME_FILTER_UNKNOWN)) == {
        unknown.recommendation_id, rung.recommendation_id}

    page = live.admin.ListRecommendations(pb.ListRecommendationsRequest(action_id="act"))
    by_id = {e.recommendation.recommendation_id: e for e in page.recommendations}
    fit = by_id[fitted.recommendation_id]
    assert fit.outcome == pb.OUTCOME_SUCCEEDED and fit.execution_id == "e-fit"
    assert fit.peak_memory_mib == 6900
    assert fit.recommendation.profile.memory_mib == 9856
    assert fit.relative_slack == pytest.approx((9856 - 6900) / 9856)
    oom = by_id[oom_recorded.recommendation_id]
    assert (oom.outcome, oom.peak_memory_mib, oom.relative_slack) == (pb.OUTCOME_OOM, 9800, 0)
    lad = by_id[oom_laddered.recommendation_id]
    assert (lad.outcome, lad.peak_memory_mib) == (pb.OUTCOME_OOM, 9500)
    after = by_id[rung.recommendation_id]
    assert after.parent_recommendation_id == oom_laddered.recommendation_id
    assert (after.outcome, after.peak_memory_mib) == (pb.OUTCOME_UNSPECIFIED, 0)
    assert by_id[unknown.recommendation_id].outcome == pb.OUTCOME_UNSPECIFIED


def test_time_range(live: Live) -> None:
    for _ in range(3):
        live.recommender.Recommend(request("act", declared=1000))
    page = live.admin.ListRecommendations(pb.ListRecommendationsRequest())
    newest, middle, oldest = page.recommendations
    t_old, t_mid = oldest.created_at.ToDatetime(UTC), middle.created_at.ToDatetime(UTC)
    assert t_old < t_mid < newest.created_at.ToDatetime(UTC)
    rid = [e.recommendation.recommendation_id for e in page.recommendations]

    assert listed(live, created_after=ts(t_mid)) == rid[:2]  # inclusive
    assert listed(live, created_before=ts(t_mid)) == rid[2:]  # exclusive
    assert listed(live, created_after=ts(t_old), created_before=ts(t_mid)) == [rid[2]]
    assert listed(live, created_after=ts(datetime.now(UTC) + timedelta(hours=1))) == []


def test_pagination_is_stable_while_rows_are_inserted(live: Live) -> None:
    first = [live.recommender.Recommend(request("act", declared=1000)).recommendation_id
             for _ in range(7)]
    seen: list[str] = []
    req = pb.ListRecommendationsRequest(page_size=3)
    page = live.admin.ListRecommendations(req)
    seen += ids(page)
    pages = 1
    while page.next_page_token:
        # New recommendations keep arriving between pages: they come before the cursor.
        live.recommender.Recommend(request("act", declared=1000))
        live.recommender.Recommend(request("other", declared=1000))
        req = pb.ListRecommendationsRequest(page_size=3, page_token=page.next_page_token)
        page = live.admin.ListRecommendations(req)
        seen += ids(page)
        pages += 1
    assert pages == 3
    assert seen == list(reversed(first))  # each exactly once, newest first, nothing new
    everything = live.admin.ListRecommendations(pb.ListRecommendationsRequest(page_size=100))
    assert len(everything.recommendations) == 7 + 2 * 2 and not everything.next_page_token


def test_bad_list_requests(live: Live) -> None:
    list_ = live.admin.ListRecommendations
    assert code_of(list_, pb.ListRecommendationsRequest(page_token="garbage!")) == \
        grpc.StatusCode.INVALID_ARGUMENT
    assert code_of(list_, pb.ListRecommendationsRequest(page_size=-1)) == \
        grpc.StatusCode.INVALID_ARGUMENT
    assert code_of(list_, pb.ListRecommendationsRequest(outcome=9)) == \
        grpc.StatusCode.INVALID_ARGUMENT  # type: ignore[arg-type]


# --- ListGpuModels and ListModelVersions ---------------------------------------------------


@pytest.fixture
def overridden(store: SqlStore, tmp_path: Path) -> Iterator[pb_grpc.AdminStub]:
    """A server whose catalog has the operator's override file applied."""
    path = tmp_path / "override.json"
    path.write_text(json.dumps({"gpus": [
        {"id": "A100-40GB", "aliases": ["A100-SXM4-40GB-custom"], "profiles": [
            {"name": "1g.10gb", "memory_mib": 9984}, {"name": "2g.10gb", "memory_mib": 9984}]},
        {"id": "L40-48GB", "compute_slices": 4, "memory_slices": 4, "placement_units": 4,
         "profiles": [{"name": "4g.48gb", "compute_slices": 4, "memory_slices": 4,
                       "memory_mib": 46000, "max_count": 1,
                       "placements": {"starts": [0], "size": 4}}]},
    ]}))
    running = start(UseCases(store), load_catalog(path), host="127.0.0.1", port=0)
    channel = grpc.insecure_channel(f"127.0.0.1:{running.port}")
    try:
        yield pb_grpc.AdminStub(channel)
    finally:
        channel.close()
        running.stop(grace=1)


def test_list_gpu_models_shows_the_operators_overrides(overridden: pb_grpc.AdminStub) -> None:
    models = {m.id: m for m in overridden.ListGpuModels(pb.ListGpuModelsRequest()).gpu_models}
    a100 = models["A100-40GB"]
    assert a100.overridden
    assert {"A100-SXM4-40GB-custom", "NVIDIA A100-SXM4-40GB"} <= set(a100.aliases)
    profiles = {p.profile.name: p for p in a100.profiles}
    assert profiles["1g.10gb"].profile.memory_mib == 9984
    assert profiles["2g.10gb"].profile.memory_mib == 9984
    assert not profiles["1g.10gb"].memory_estimated
    shipped = load_catalog().resolve("A100-40GB")
    assert shipped is not None and shipped.profile("3g.20gb") is not None
    assert profiles["3g.20gb"].profile.memory_mib == shipped.profile(  # type: ignore[union-attr]
        "3g.20gb").memory_mib  # untouched
    l40 = models["L40-48GB"]
    assert l40.overridden and l40.placements_known and l40.placement_units == 4
    (only,) = l40.profiles
    assert (only.profile.name, only.profile.memory_mib, list(only.placement_starts)) == (
        "4g.48gb", 46000, [0])
    assert not models["H100-80GB"].overridden


def test_list_gpu_models_without_overrides(live: Live) -> None:
    models = live.admin.ListGpuModels(pb.ListGpuModelsRequest()).gpu_models
    assert len(models) >= 15 and not any(m.overridden for m in models)
    a100 = {m.id: m for m in models}["A100-40GB"]
    assert {p.profile.name: p.profile.memory_mib for p in a100.profiles}["1g.10gb"] == 9856


T0 = datetime(2026, 10, 1, tzinfo=UTC)


def test_list_model_versions(live: Live) -> None:
    assert list(live.admin.ListModelVersions(pb.ListModelVersionsRequest()).model_versions) == []
    live.store.save_model_version(version("v1", T0, serving=True, promoted=True))
    live.store.save_model_version(replace(version("v2", T0 + timedelta(days=1)), metrics={},
                                          training_window_start=None, training_window_end=None))
    got = live.admin.ListModelVersions(pb.ListModelVersionsRequest()).model_versions
    assert [v.version for v in got] == ["v2", "v1"]  # newest first
    v2, v1 = got
    assert (v1.serving, v1.promoted, v2.serving, v2.promoted) == (True, True, False, False)
    assert dict(v1.metrics) == pytest.approx({"oom_rate": 0.01, "median_slack": 0.21})
    assert v1.reason == "v1: beats the baseline"
    assert v1.created_at.ToDatetime(UTC) == T0
    assert v1.training_window_start.ToDatetime(UTC) == T0 - timedelta(days=7)
    assert v1.training_window_end.ToDatetime(UTC) == T0
    assert not v2.HasField("training_window_start") and dict(v2.metrics) == {}

    live.store.save_model_version(version("v3", T0 + timedelta(days=2), serving=True,
                                          promoted=True), expected_serving="v1")
    got = live.admin.ListModelVersions(pb.ListModelVersionsRequest()).model_versions
    assert [(v.version, v.serving) for v in got] == [("v3", True), ("v2", False), ("v1", False)]


# --- the admin token -----------------------------------------------------------------------


@pytest.fixture
def secured(store: SqlStore, catalog: Catalog) -> Iterator[Live]:
    """The `live` server with an admin token configured."""
    running = start(UseCases(store), catalog, host="127.0.0.1", port=0,
                    admin_token=TOKEN)
    address = f"127.0.0.1:{running.port}"
    channel = grpc.insecure_channel(address)
    try:
        yield Live(running, channel, pb_grpc.RecommenderStub(channel),
                   pb_grpc.AdminStub(channel), store, address)
    finally:
        channel.close()
        running.stop(grace=1)


# The token check is the same on every backend: these run on SQLite only.
sqlite_only = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)

ADMIN_CALLS = [
    ("ListRecommendations", pb.ListRecommendationsRequest()),
    ("ListGpuModels", pb.ListGpuModelsRequest()),
    ("ListModelVersions", pb.ListModelVersionsRequest()),
]


@sqlite_only
@pytest.mark.parametrize("metadata", [
    None,
    (("authorization", "Bearer wrong-token"),),
    (("authorization", f"Bearer {TOKEN}x"),),
    (("authorization", f"Bearer {TOKEN[:-1]}"),),
    (("authorization", TOKEN),),
    (("authorization", f"Basic {TOKEN}"),),
    (("x-admin-token", TOKEN),),
])
def test_admin_calls_without_the_right_token_are_unauthenticated(
        secured: Live, metadata: tuple[tuple[str, str], ...] | None,
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    for method, message in ADMIN_CALLS:
        with pytest.raises(grpc.RpcError) as err:
            getattr(secured.admin, method)(message, metadata=metadata)
        assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED, method
        assert "authorization" in (err.value.details() or "")
    assert TOKEN not in caplog.text
    refused = [fields(r) for r in caplog.records if r.name == "recommender.access"]
    assert [r["method"] for r in refused] == [m for m, _ in ADMIN_CALLS]
    assert {r["code"] for r in refused} == {"UNAUTHENTICATED"}


@sqlite_only
@pytest.mark.parametrize("header", [f"Bearer {TOKEN}", f"bearer {TOKEN}", f"Bearer  {TOKEN} "])
def test_the_right_token_opens_every_admin_call(secured: Live, header: str,
                                                caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    secured.recommender.Recommend(request("act", declared=1000))
    md = (("authorization", header),)
    page = secured.admin.ListRecommendations(pb.ListRecommendationsRequest(), metadata=md)
    assert len(page.recommendations) == 1
    assert secured.admin.ListGpuModels(pb.ListGpuModelsRequest(), metadata=md).gpu_models
    secured.admin.ListModelVersions(pb.ListModelVersionsRequest(), metadata=md)
    assert TOKEN not in caplog.text


@sqlite_only
def test_the_runner_health_and_reflection_need_no_token(secured: Live) -> None:
    r = secured.recommender.Recommend(request("act", declared=7500, execution="e1"))
    assert r.profile.name == "1g.10gb"
    secured.recommender.NextAfterOom(pb.NextAfterOomRequest(recommendation_id=r.recommendation_id))
    assert not secured.recommender.RecordExecution(record("e1")).duplicate
    status = health_pb2_grpc.HealthStub(secured.channel).Check(
        health_pb2.HealthCheckRequest(service="intelliscale.recommender.v1.Admin")).status
    assert status == health_pb2.HealthCheckResponse.SERVING


@sqlite_only
def test_no_token_configured_leaves_admin_open(live: Live) -> None:
    assert live.admin.ListGpuModels(pb.ListGpuModelsRequest()).gpu_models


def test_token_configuration(tmp_path: Path) -> None:
    secret = tmp_path / "token"
    secret.write_text(TOKEN + "\n")  # as `kubectl create secret --from-file` often leaves it
    assert resolve_admin_token(environ={}) is None
    assert resolve_admin_token("  ", environ={}) is None
    assert resolve_admin_token(environ={"RECOMMENDER_ADMIN_TOKEN": "env"}) == "env"
    assert resolve_admin_token("opt", environ={"RECOMMENDER_ADMIN_TOKEN": "env"}) == "opt"
    assert resolve_admin_token(token_file=str(secret), environ={}) == TOKEN
    assert resolve_admin_token("opt", str(secret), environ={}) == TOKEN
    assert resolve_admin_token(environ={"RECOMMENDER_ADMIN_TOKEN_FILE": str(secret),
                                        "RECOMMENDER_ADMIN_TOKEN": "env"}) == TOKEN
    (tmp_path / "empty").write_text("\n")
    with pytest.raises(AuthConfigError, match="empty"):
        resolve_admin_token(token_file=str(tmp_path / "empty"), environ={})
    with pytest.raises(AuthConfigError, match="cannot read"):
        resolve_admin_token(token_file=str(tmp_path / "missing"), environ={})
    assert TOKEN not in repr(AdminTokenInterceptor(TOKEN))


def test_serve_with_a_token_file(tmp_path: Path) -> None:
    secret = tmp_path / "admin-token"
    secret.write_text(TOKEN + "\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("RECOMMENDER_ADMIN")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "recommender", "serve", "--port", "0", "--host", "127.0.0.1",
         "--admin-token-file", str(secret)],
        cwd=tmp_path, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    try:
        assert proc.stdout is not None
        match = re.search(r"listening on .*:(\d+)", proc.stdout.readline())
        assert match
        with grpc.insecure_channel(f"127.0.0.1:{match.group(1)}") as ch:
            admin = pb_grpc.AdminStub(ch)
            assert code_of(admin.ListGpuModels, pb.ListGpuModelsRequest()) == \
                grpc.StatusCode.UNAUTHENTICATED
            assert admin.ListGpuModels(pb.ListGpuModelsRequest(),
                                       metadata=(("authorization", f"Bearer {TOKEN}"),))
            assert pb_grpc.RecommenderStub(ch).Recommend(request("a", declared=100)).stored
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert "need the admin token" in err and TOKEN not in err


def test_serve_refuses_an_unreadable_token_file(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    db = f"sqlite:///{tmp_path / 'never.db'}"
    assert cli_main(["serve", "--database-url", db, "--admin-token-file",
                     str(tmp_path / "nope")]) == 2
    assert "admin token" in capsys.readouterr().err
    assert not (tmp_path / "never.db").exists()  # refused before touching the database


# --- `recommender history` -----------------------------------------------------------------


@pytest.fixture
def history(live: Live) -> dict[str, str]:
    """A fitted execution, a recorded OOM, a fallback and one with no outcome yet."""
    rec = live.recommender
    out = {}
    out["fit"] = rec.Recommend(request("resize", declared=7500, execution="e1")).recommendation_id
    rec.RecordExecution(record("e1", "resize", peak=6900, recommendation=out["fit"]))
    out["oom"] = rec.Recommend(request("resize", pool("h100", "H100-80GB"), declared=7500,
                                       execution="e2")).recommendation_id
    rec.RecordExecution(record("e2", "resize", model="H100-80GB", profile="1g.10gb", peak=9900,
                               outcome=pb.OUTCOME_OOM, recommendation=out["oom"]))
    out["fallback"] = rec.Recommend(request("train")).recommendation_id
    out["unknown"] = rec.Recommend(request("embed", declared=3000)).recommendation_id
    return out


@pytest.fixture
def db_url(history: dict[str, str], live: Live) -> str:
    """The server's database, for the `history` command to read from another connection: the
    server writes its recommendation rows behind (within RECOMMENDATION_WRITE_BEHIND_S), so the
    test waits for that write rather than racing it."""
    live.store.flush()
    return live.store.engine.url.render_as_string(hide_password=False)


@sqlite_only
def test_history_json_and_csv(history: dict[str, str], db_url: str, tmp_path: Path) -> None:
    out = run("history", "--json", "--database-url", db_url, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    rows = {r["recommendation_id"]: r for r in json.loads(out.stdout)}
    assert len(rows) == 4
    fit = rows[history["fit"]]
    assert (fit["outcome"], fit["peak_mib"], fit["slice_mib"]) == ("SUCCEEDED", 6900, 9856)
    assert fit["relative_slack"] == pytest.approx((9856 - 6900) / 9856, abs=1e-4)
    assert rows[history["oom"]]["outcome"] == "OOM"
    assert rows[history["oom"]]["relative_slack"] is None
    assert rows[history["unknown"]]["outcome"] is None

    out = run("history", "--csv", "--outcome", "oom", "--database-url", db_url, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    (row,) = list(csv.DictReader(io.StringIO(out.stdout)))
    assert (row["recommendation_id"], row["outcome"], row["gpu_model"], row["peak_mib"]) == (
        history["oom"], "OOM", "H100-80GB", "9900")
    assert row["relative_slack"] == ""


def history_main(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """The command in this process (fast); the subprocess test above covers the real one."""
    try:
        code = cli_main(["history", *args])
    except SystemExit as e:  # argparse errors
        code = int(e.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def test_history_filters_and_pages(history: dict[str, str], db_url: str,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    def got(*args: str) -> list[str]:
        code, out, err = history_main(capsys, "--json", "--database-url", db_url, *args)
        assert code == 0, err
        return [r["recommendation_id"] for r in json.loads(out)]

    assert set(got("--gpu-model", "NVIDIA A100-SXM4-40GB")) == {
        history["fit"], history["fallback"], history["unknown"]}
    assert got("--pool", "h100") == [history["oom"]]
    assert got("--source", "fallback", "--action", "train") == [history["fallback"]]
    assert got("--outcome", "unknown", "--action", "embed") == [history["unknown"]]
    assert got("--since", "1h", "--outcome", "fitted") == [history["fit"]]
    assert got("--until", "2000-01-01") == []
    assert got("--since", (datetime.now(UTC) + timedelta(hours=1)).isoformat()) == []

    code, out, err = history_main(capsys, "--json", "--limit", "3", "--database-url", db_url)
    token = re.search(r"--page-token (\S+)", err)
    assert code == 0 and token, err
    rest = got("--limit", "3", "--page-token", token.group(1))
    page1 = [r["recommendation_id"] for r in json.loads(out)]
    assert len(page1) == 3 and len(rest) == 1 and set(page1 + rest) == set(history.values())

    code, _, err = history_main(capsys, "--since", "yesterday-ish", "--database-url", db_url)
    assert code == 2 and "--since" in err
    code, _, err = history_main(capsys, "--page-token", "nope", "--database-url", db_url)
    assert code == 2 and "page_token" in err
    code, _, err = history_main(capsys, "--json", "--csv", "--database-url", db_url)
    assert code == 2 and "not allowed with" in err


def test_history_table_reads_at_a_glance(history: dict[str, str], db_url: str,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = history_main(capsys, "--database-url", db_url)
    assert code == 0, err
    lines = out.splitlines()
    header = lines[0]
    assert header.split()[:4] == ["TIME", "(UTC)", "ACTION_ID", "TRY"]
    body = lines[1:5]
    # Aligned: every row has its OUTCOME column where the header has it.
    col = header.index("OUTCOME")
    assert sorted(line[col:].split()[0] for line in body) == ["-", "-", "OOM", "fitted"]
    fit = next(line for line in body if "fitted" in line)
    assert "30%" in fit and "6,900" in fit and "9,856" in fit  # (9856-6900)/9856 = 30 %
    oom = next(line for line in body if "OOM" in line)
    assert "OOM !" in oom and "9,900" in oom
    assert "4 recommendations" in out and "1 OOM" in out
    assert "\033[" not in out  # no colour when not a terminal
    code, out, _ = history_main(capsys, "--database-url", db_url, "--action", "nothing")
    assert code == 0 and "no recommendations match" in out
