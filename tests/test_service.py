"""The real server on a loopback port, called over gRPC, on SQLite and PostgreSQL."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from sqlalchemy import func, select

from recommender._proto.intelliscale.recommender.v1 import recommender_pb2 as pb
from recommender.core import config
from recommender.store.models import ExecutionRow, RecommendationRow
from tests.harness.live import Live
from tests.helpers import pool, record, request


def counts(live: Live) -> tuple[int, int]:
    live.store.flush()  # recommendations are written behind (store/behind.py)
    with live.store.engine.connect() as c:
        recs = c.execute(select(func.count()).select_from(RecommendationRow)).scalar_one()
        execs = c.execute(select(func.count()).select_from(ExecutionRow)).scalar_one()
    return recs, execs


def code_of(fn: object, *args: object) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.RpcError) as err:
        fn(*args)  # type: ignore[operator]
    return err.value.code(), err.value.details()


def test_worked_example_end_to_end(live: Live) -> None:
    """DESIGN.md section 2, step by step over gRPC."""
    r = live.recommender.Recommend(request("ex", workers=2, declared=7500, execution="e1"))
    assert (r.profile.name, r.count, r.source, r.attempt) == ("1g.10gb", 2, "prior", 1)
    assert r.profile.memory_mib == 9856 and r.stored
    assert dict(r.resources) == {"nvidia.com/mig-1g.10gb": "2"}
    assert [(x.profile.name, x.count) for x in r.ladder] == [("3g.20gb", 2), ("7g.40gb", 2)]
    assert r.quantile == 0 and r.predicted_peak_memory_mib == pytest.approx(8250)

    n1 = live.recommender.NextAfterOom(
        pb.NextAfterOomRequest(recommendation_id=r.recommendation_id))
    assert (n1.profile.name, n1.count, n1.attempt) == ("3g.20gb", 2, 2)
    assert dict(n1.resources) == {"nvidia.com/mig-3g.20gb": "2"}
    n2 = live.recommender.NextAfterOom(
        pb.NextAfterOomRequest(recommendation_id=n1.recommendation_id))
    assert (n2.profile.name, n2.attempt) == ("7g.40gb", 3)
    code, msg = code_of(live.recommender.NextAfterOom,
                        pb.NextAfterOomRequest(recommendation_id=n2.recommendation_id))
    assert code == grpc.StatusCode.RESOURCE_EXHAUSTED and "40,192" in msg

    # An action that died in the largest slice gets no slice it is known not to fit in.
    code, msg = code_of(live.recommender.Recommend, request("ex", workers=2, declared=7500))
    assert code == grpc.StatusCode.FAILED_PRECONDITION and "40,193" in msg

    # Thirty successful executions at about 3 GB each: history takes over.
    now = datetime.now(UTC)
    for i in range(30):
        resp = live.recommender.RecordExecution(record(
            f"run-{i}", peak=3000 + 3 * i, count=2, ended=now - timedelta(minutes=30 - i)))
        assert not resp.duplicate
    h = live.recommender.Recommend(request("act", workers=2, declared=7500))
    assert (h.profile.name, h.count, h.source) == ("1g.5gb", 2, "history")
    # The action's own model (its decayed history) at the reported quantile; the slice is the
    # one of least expected cost.
    assert h.quantile == pytest.approx(config.ESTIMATE_QUANTILE)
    assert "over 30 executions" in h.reason
    assert f"p{config.ESTIMATE_QUANTILE * 100:g}" in h.reason and "expected cost" in h.reason
    # The chance of an OOM it weighed, as the reason says it and as history keeps it; a
    # declared figure weighed none.
    assert r.oom_chance == 0 and 0 < h.oom_chance < 0.5
    assert f"OOM, {h.oom_chance:.1%} likely" in h.reason
    page = live.admin.ListRecommendations(pb.ListRecommendationsRequest(action_id="act"))
    kept = {e.recommendation.recommendation_id: e.recommendation for e in page.recommendations}
    assert kept[h.recommendation_id].oom_chance == h.oom_chance


def test_rungs_are_stored_with_their_attempt_and_a_retry_gets_the_same_rung(live: Live) -> None:
    r = live.recommender.Recommend(request("act", declared=7500))
    req = pb.NextAfterOomRequest(recommendation_id=r.recommendation_id,
                                 observed_peak_memory_mib=9000)
    first = live.recommender.NextAfterOom(req)
    again = live.recommender.NextAfterOom(req)
    assert first.recommendation_id == again.recommendation_id
    page = live.admin.ListRecommendations(pb.ListRecommendationsRequest(action_id="act"))
    by_id = {e.recommendation.recommendation_id: e for e in page.recommendations}
    assert by_id[first.recommendation_id].parent_recommendation_id == r.recommendation_id
    assert by_id[first.recommendation_id].recommendation.attempt == 2
    assert by_id[r.recommendation_id].outcome == pb.OUTCOME_OOM


def test_oom_is_remembered_for_the_action(live: Live) -> None:
    now = datetime.now(UTC)
    for i in range(10):
        live.recommender.RecordExecution(record(f"ok-{i}", profile="1g.5gb", peak=4000,
                                                ended=now - timedelta(minutes=20 - i)))
    r = live.recommender.Recommend(request("act"))
    assert r.profile.name == "1g.5gb"
    live.recommender.NextAfterOom(pb.NextAfterOomRequest(recommendation_id=r.recommendation_id))
    after = live.recommender.Recommend(request("act"))
    assert after.profile.memory_mib > 4864, after.reason


def test_oom_recorded_by_record_execution_is_a_floor_too(live: Live) -> None:
    now = datetime.now(UTC)
    for i in range(10):
        live.recommender.RecordExecution(record(f"ok-{i}", profile="1g.5gb", peak=4000,
                                                ended=now - timedelta(minutes=20 - i)))
    live.recommender.RecordExecution(record("boom", profile="1g.5gb", peak=4860,
                                            outcome=pb.OUTCOME_OOM, ended=now))
    assert live.recommender.Recommend(request("act")).profile.memory_mib > 4864


def test_record_execution_is_idempotent(live: Live) -> None:
    first = live.recommender.RecordExecution(record("e-1", peak=3000))
    retry = live.recommender.RecordExecution(record("e-1", peak=9999))
    assert not first.duplicate and retry.duplicate
    assert counts(live)[1] == 1
    stored = live.store.get_execution("e-1")
    assert stored is not None and stored.peak_memory_mib == 3000  # the retry changed nothing


def test_no_information_is_safe_and_says_so(live: Live) -> None:
    r = live.recommender.Recommend(request("new-action"))
    assert r.source == "fallback" and r.profile.name == "7g.40gb"
    assert "no history and no declared memory" in r.reason


@pytest.mark.parametrize(("strategy", "profiles", "expected"), [
    (pb.MIG_STRATEGY_MIXED, (), {"nvidia.com/mig-1g.10gb": "2"}),
    (pb.MIG_STRATEGY_SINGLE, ("2g.10gb",), {"nvidia.com/gpu": "2"}),
    (pb.MIG_STRATEGY_DYNAMIC, (), {"nvidia.com/gpu": "2", "nvidia.com/gpumem": "9856"}),
    (pb.MIG_STRATEGY_NONE, (), {"nvidia.com/gpu": "2"}),
])
def test_resources_for_every_strategy(live: Live, strategy: int, profiles: tuple[str, ...],
                                      expected: dict[str, str]) -> None:
    r = live.recommender.Recommend(
        request("act", pool(strategy=strategy, profiles=profiles), workers=2, declared=7500))
    assert dict(r.resources) == expected


def test_placement_on_one_node(live: Live) -> None:
    busy = pb.Node(node_id="busy", gpus=[pb.Gpu(uuid="g0", occupied=[
        pb.Placement(start=0, size=4), pb.Placement(start=4, size=2)])])
    free = pb.Node(node_id="free", gpus=[pb.Gpu(uuid="g1")])
    r = live.recommender.Recommend(request("act", pool(nodes=(busy, free)), workers=3,
                                           declared=7500))
    assert r.node_id == "free" and r.count == 3 and r.profile.name == "1g.10gb"
    # Three 3g.20gb never fit one A100-40GB node of one GPU: not on the ladder.
    assert [x.profile.name for x in r.ladder] == []


def test_failed_precondition_names_each_pool(live: Live) -> None:
    full = pb.Node(node_id="n", gpus=[pb.Gpu(uuid="g", occupied_profiles=["7g.40gb"])])
    code, msg = code_of(live.recommender.Recommend,
                        request("act", pool(nodes=(full,)), declared=1000))
    assert code == grpc.StatusCode.FAILED_PRECONDITION and "a100" in msg
    code, msg = code_of(live.recommender.Recommend, request("act", declared=100_000))
    assert code == grpc.StatusCode.FAILED_PRECONDITION and "100,000" in msg
    code, msg = code_of(live.recommender.Recommend, request("act", p2p=True))
    assert code == grpc.StatusCode.FAILED_PRECONDITION and "peer-to-peer" in msg


BAD_RECOMMENDS = [
    (request(""), "action_id"),
    (pb.RecommendRequest(action_id="a"), "pools"),
    (request("a", pool(model="")), "pools[0].gpu_model"),
    (request("a", pool(model="GTX-1080")), "pools[0].gpu_model"),
    (request("a", pool(pool_id="")), "pools[0].pool_id"),
    (request("a", pool(strategy=pb.MIG_STRATEGY_UNSPECIFIED)), "pools[0].strategy"),
    (request("a", pool(profiles=("9g.99gb",))), "pools[0].profiles[0]"),
    (request("a", pool(strategy=pb.MIG_STRATEGY_SINGLE)), "pools[0].profiles"),
    (request("a", pool(), pool()), "pools[1].pool_id"),
    (request("a", workers=-1), "workers"),
    (request("a", declared=-5), "declared_memory_mib"),
    (request("a", pool(nodes=(pb.Node(node_id="n", gpus=[pb.Gpu(occupied=[
        pb.Placement(start=7, size=4)])]),))), "pools[0].nodes[0].gpus[0].occupied[0]"),
    (request("a", pool(nodes=(pb.Node(node_id="n", gpus=[pb.Gpu(occupied_profiles=[
        "1g.99gb"])]),))), "pools[0].nodes[0].gpus[0].occupied_profiles[0]"),
]


BAD_RECORDS = [
    (record(""), "execution_id"),
    (record("e", action=""), "action_id"),
    (record("e", model="TPU"), "gpu_model"),
    (record("e", profile="1g.99gb"), "profile"),
    (record("e", peak=-1), "peak_memory_mib"),
    (record("e", peak=float("nan")), "peak_memory_mib"),
    (record("e", count=-2), "count"),
    (record("e", sm=150), "sm_utilization"),
    (record("e", outcome=pb.OUTCOME_UNSPECIFIED), "outcome"),
]


@pytest.mark.parametrize(("rpc", "message", "field"), [
    *(("Recommend", m, f) for m, f in BAD_RECOMMENDS),
    *(("RecordExecution", m, f) for m, f in BAD_RECORDS),
])
def test_bad_input_names_the_field_and_writes_nothing(live: Live, rpc: str, message: Any,
                                                      field: str) -> None:
    code, msg = code_of(getattr(live.recommender, rpc), message)
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert msg.startswith(field + ":"), msg
    assert counts(live) == (0, 0)


def test_next_after_oom_errors(live: Live) -> None:
    code, msg = code_of(live.recommender.NextAfterOom,
                        pb.NextAfterOomRequest(recommendation_id="no-such-id"))
    assert code == grpc.StatusCode.NOT_FOUND and msg.startswith("recommendation_id:")
    code, msg = code_of(live.recommender.NextAfterOom, pb.NextAfterOomRequest())
    assert code == grpc.StatusCode.INVALID_ARGUMENT and msg.startswith("recommendation_id:")
    r = live.recommender.Recommend(request("a", declared=1000))
    code, msg = code_of(live.recommender.NextAfterOom, pb.NextAfterOomRequest(
        recommendation_id=r.recommendation_id, observed_peak_memory_mib=-3))
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert msg.startswith("observed_peak_memory_mib:")
    assert counts(live) == (1, 0)


def test_health_and_reflection(live: Live) -> None:
    health = health_pb2_grpc.HealthStub(live.channel)
    for service in ("", "intelliscale.recommender.v1.Recommender"):
        status = health.Check(health_pb2.HealthCheckRequest(service=service)).status
        assert status == health_pb2.HealthCheckResponse.SERVING
    refl = reflection_pb2_grpc.ServerReflectionStub(live.channel)
    answer = next(iter(refl.ServerReflectionInfo(iter([
        reflection_pb2.ServerReflectionRequest(list_services="")]))))
    names = {s.name for s in answer.list_services_response.service}
    assert {"intelliscale.recommender.v1.Recommender", "intelliscale.recommender.v1.Admin",
            "grpc.health.v1.Health"} <= names


def test_admin_lists_the_catalog(live: Live) -> None:
    models = {m.id: m for m in live.admin.ListGpuModels(pb.ListGpuModelsRequest()).gpu_models}
    a100 = models["A100-40GB"]
    assert "NVIDIA A100-SXM4-40GB" in a100.aliases and a100.placements_known
    p = {i.profile.name: i for i in a100.profiles}["3g.20gb"]
    assert list(p.placement_starts) == [0, 4] and p.placement_size == 4
    assert all(m.placements_known for m in models.values())


def test_throughput_target_sets_the_count(live: Live) -> None:
    """Executions measured on 1g.10gb and 7g.80gb; a target of 900 items/s per execution."""
    now = datetime.now(UTC)
    measured = {"1g.10gb": 200.0, "7g.80gb": 1000.0}
    for i in range(6):
        profile = "1g.10gb" if i % 2 else "7g.80gb"
        m = record(f"t-{i}", "tp", model="A100-80GB", profile=profile, peak=5000,
                   ended=now - timedelta(minutes=10 - i))
        m.throughput = measured[profile]
        live.recommender.RecordExecution(m)
    req = request("tp", pool("a80", "A100-80GB", profiles=(
        "1g.10gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb")))
    req.target_throughput = 900
    req.max_workers = 8
    r = live.recommender.Recommend(req)
    # 200 * c^0.83 per worker: 1g x 5 (5 slices, 1,000/s) beats 7g x 1 (7 slices).
    assert (r.profile.name, r.count) == ("1g.10gb", 5), r.reason
    assert r.predicted_throughput >= 900
    assert r.gpu_equivalents == pytest.approx(5 / 7)
    assert dict(r.resources) == {"nvidia.com/mig-1g.10gb": "5"}
    req.max_workers, req.target_throughput = 2, 2500
    r = live.recommender.Recommend(req)
    assert "cannot be met within max_workers=2" in r.reason
    assert (r.profile.name, r.count) == ("7g.80gb", 2)  # the best reachable: 2,000/s


def test_throughput_count_learns_what_several_workers_delivered(live: Live) -> None:
    """Four workers on 1g.10gb delivered 150/s each, one alone 200/s: the count accounts."""
    now = datetime.now(UTC)
    for i in range(9):
        m = record(f"e-{i}", "eff", model="A100-80GB", profile="1g.10gb",
                   count=1 if i < 3 else 4, ended=now - timedelta(minutes=10 - i))
        m.throughput = 200.0 if i < 3 else 150.0
        live.recommender.RecordExecution(m)
    req = request("eff", pool("a80", "A100-80GB", profiles=("1g.10gb", "7g.80gb")))
    req.target_throughput, req.max_workers = 700, 8
    r = live.recommender.Recommend(req)
    # Perfect scaling would take 4 (800/s); these reach 700/s with 5.
    assert (r.profile.name, r.count) == ("1g.10gb", 5), r.reason
    assert 700 <= r.predicted_throughput < 5 * 200
    assert "multi-worker executions" in r.reason


def test_a_young_actions_chance_is_moved_by_how_young_actions_first_attempts_turned_out(
        live: Live) -> None:
    """Over gRPC: young actions' first attempts on a slice, each given a small chance, ran out
    (NextAfterOom marks them); once the population is read again, a new action's chance on that
    slice is raised above its model's, and the reason says by what record."""
    now = datetime.now(UTC)
    for a in range(5):
        for k in range(3):
            live.recommender.RecordExecution(record(
                f"peer{a}-{k}", f"peer-{a}", model="A100-80GB", profile="7g.80gb",
                peak=30_000 + 400 * a + 150 * k, ended=now - timedelta(minutes=60 - 3 * a - k)))
    a80 = pool("a80", "A100-80GB")
    firsts = [live.recommender.Recommend(request(f"young-{i}", a80)) for i in range(12)]
    slice_mib = firsts[0].profile.memory_mib
    for i, first in enumerate(firsts):
        assert first.source == "population" and first.profile.memory_mib == slice_mib
        assert 0 < first.oom_chance < 0.05, first.reason
        assert first.model_oom_chance > 0, first  # young: the model's own chance is kept
        live.recommender.NextAfterOom(pb.NextAfterOomRequest(
            recommendation_id=first.recommendation_id))
        # Each record makes the population due again (a tenth of its rows).
        live.recommender.RecordExecution(record(
            f"peer0-more-{i}", "peer-0", model="A100-80GB", profile="7g.80gb", peak=30_100,
            ended=now - timedelta(minutes=10 - i / 2)))
    said = f"first attempts on {slice_mib:,} MiB ran out 12 times"
    deadline = time.monotonic() + 20
    while True:  # the server reads the population in a thread of its own, once it is due
        moved = live.recommender.Recommend(request("young-next", a80))
        if said in moved.reason or time.monotonic() > deadline:
            break
        live.recommender.RecordExecution(record(
            f"peer1-more-{time.monotonic_ns()}", "peer-1", model="A100-80GB", profile="7g.80gb",
            peak=30_500, ended=now - timedelta(minutes=1)))
        time.sleep(0.2)
    assert said in moved.reason and "its model says" in moved.reason, moved.reason
    assert moved.oom_chance > 2 * firsts[-1].oom_chance or (
        moved.profile.memory_mib > slice_mib), moved.reason
    if moved.profile.memory_mib == slice_mib:
        assert moved.oom_chance > 2 * moved.model_oom_chance > 0, moved
    # History shows what the record changed: the model's chance beside the one decided on.
    page = live.admin.ListRecommendations(pb.ListRecommendationsRequest(action_id="young-next"))
    kept = [e.recommendation for e in page.recommendations
            if e.recommendation.recommendation_id == moved.recommendation_id]
    assert kept and kept[0].model_oom_chance == pytest.approx(moved.model_oom_chance), page
    assert kept[0].oom_chance == pytest.approx(moved.oom_chance)


def test_a_new_action_is_placed_by_a_size_its_peers_differ_by(live: Live) -> None:
    """Twenty actions, each serving one model whose size its requests carry (`params_b`, the
    same in all its runs), recorded over gRPC: a new action with a 20 B model starts on a
    larger slice than one with a 0.3 B model, both from the population, and the reason names
    the slope across actions."""
    now = datetime.now(UTC)
    sizes = [0.2 * 1.35 ** a for a in range(20)]  # 0.2 to 60 B
    for a, size in enumerate(sizes):
        for k, batch in enumerate((1.0, 8.0)):
            m = record(f"m{a}-{k}", f"model-{a}", model="A100-80GB", profile="7g.80gb",
                       peak=900 * size ** 0.8 * batch ** 0.3 * (1.03 if (a + k) % 2 else 0.97),
                       ended=now - timedelta(minutes=60 - a - k))
            m.features.update({"batch_size": batch, "params_b": size})
            live.recommender.RecordExecution(m)
    a80 = pool("a80", "A100-80GB")
    answers = {}
    for size in (0.3, 20.0):
        req = request(f"new-{size}", a80)
        req.features.update({"batch_size": 4.0, "params_b": size})
        answers[size] = live.recommender.Recommend(req)
    small, large = answers[0.3], answers[20.0]
    assert small.source == large.source == "population", small.reason
    assert "params_b^0.8" in small.reason and "across actions" in small.reason, small.reason
    assert small.profile.memory_mib < large.profile.memory_mib
    assert small.predicted_peak_memory_mib < 0.1 * large.predicted_peak_memory_mib
