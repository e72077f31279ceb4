"""What every fuzzed call must satisfy (tests/test_fuzz.py): a status the contract names, no
row written by a call that is not OK, and OK answers that are coherent with the request.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import grpc
import pytest
from google.protobuf.timestamp_pb2 import Timestamp
from hypothesis import event, note
from sqlalchemy import func, select

from recommender._proto.intelliscale.recommender.v1 import recommender_pb2 as pb
from recommender.core import config
from recommender.core.catalog import WHOLE_GPU
from recommender.store.models import ExecutionRow, RecommendationRow
from tests.harness.live import Live
from tests.harness.strategies import CATALOG

ALLOWED = {
    grpc.StatusCode.OK,
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.NOT_FOUND,
    grpc.StatusCode.FAILED_PRECONDITION,
    grpc.StatusCode.RESOURCE_EXHAUSTED,
}
TIMEOUT = 30.0
"""Client deadline of every fuzzed call (a hang fails the test instead of hanging it)."""


def counts(live: Live) -> tuple[int, int]:
    live.store.flush()  # recommendations are written behind (store/behind.py)
    with live.store.engine.connect() as c:
        recs = c.execute(select(func.count()).select_from(RecommendationRow)).scalar_one()
        execs = c.execute(select(func.count()).select_from(ExecutionRow)).scalar_one()
    return int(recs), int(execs)


def raw_method(live: Live, method: str) -> Callable[..., Any]:
    """A method of the service called with raw bytes (no serializers)."""
    return live.channel.unary_unary(f"/intelliscale.recommender.v1.{method}",
                                    request_serializer=None, response_deserializer=None)


def call(fn: Callable[..., Any], request: Any) -> tuple[grpc.StatusCode, Any, str]:
    """(code, answer or None, details); asserts the code is one the contract allows."""
    try:
        answer = fn(request, timeout=TIMEOUT)
        code, details = grpc.StatusCode.OK, ""
    except grpc.RpcError as e:
        answer, code, details = None, e.code(), e.details() or ""
    note(f"-> {code.name} {details[:300]}")
    event(code.name + (" " + re.sub(r"\[\d+\]", "[]", details.split(":")[0])[:40]
                       if details else ""))
    assert code in ALLOWED, f"{code.name}: {details}"
    return code, answer, details


# --- what an OK answer must look like --------------------------------------------------------


def expected_resources(strategy: int, profile: pb.Profile, count: int) -> dict[str, str]:
    if strategy == pb.MIG_STRATEGY_MIXED:
        return {f"nvidia.com/mig-{profile.name}": str(count)}
    if strategy == pb.MIG_STRATEGY_DYNAMIC:
        return {"nvidia.com/gpu": str(count), "nvidia.com/gpumem": str(profile.memory_mib)}
    return {"nvidia.com/gpu": str(count)}


def check_recommendation(req: pb.RecommendRequest, r: pb.Recommendation) -> None:
    pools = {p.pool_id.strip(): p for p in req.pools}
    assert r.pool_id in pools
    pool = pools[r.pool_id]
    model = CATALOG.resolve(pool.gpu_model)
    assert model is not None and r.gpu_model == model.id
    count = max(req.workers, 1)
    if req.target_throughput > 0:
        # The count comes from the target once the action's throughput is measured.
        assert count <= r.count <= max(req.max_workers, count)
    else:
        assert r.count == count >= 1
    assert r.stored and r.recommendation_id and r.attempt == 1 and r.reason
    assert r.source in {"prior", "population", "history", "fallback"}
    assert r.profile.memory_mib > 0
    if r.profile.memory_mib < r.predicted_peak_memory_mib:
        # Above the largest slice, or a slice of least expected cost below the reported p95
        # (a wide need: a smaller slice and the ladder cost less than the largest).
        assert ("exceeds every offered slice" in r.reason or "expected cost" in r.reason), r.reason
    if pool.strategy == pb.MIG_STRATEGY_NONE:
        assert r.profile.whole_gpu and r.profile.name == WHOLE_GPU
        assert r.profile.memory_mib == model.memory_mib
    else:
        prof = model.profile(r.profile.name)
        assert prof is not None and not prof.whole_gpu
        assert r.profile.memory_mib == prof.memory_mib
        configured = {p.name for n in pool.profiles if (p := model.profile(n.strip()))}
        if configured:
            assert r.profile.name in configured
        else:
            assert prof.is_base
        if pool.strategy == pb.MIG_STRATEGY_DYNAMIC:
            assert not prof.double_memory_1g
    if req.needs_peer_to_peer:
        assert pool.strategy == pb.MIG_STRATEGY_NONE
    # r.count, not the request's: with a target, a measured throughput sets the count.
    assert dict(r.resources) == expected_resources(pool.strategy, r.profile, r.count)
    node_ids = {n.node_id.strip() for n in pool.nodes}
    assert r.node_id in node_ids if node_ids else r.node_id == ""
    last = r.profile.memory_mib
    for rung in r.ladder:
        assert rung.count == r.count and rung.pool_id in pools  # a bigger slice, same count
        assert rung.profile.memory_mib > last
        last = rung.profile.memory_mib
        assert dict(rung.resources) == expected_resources(pools[rung.pool_id].strategy,
                                                          rung.profile, r.count)


def check_next(parent: pb.Recommendation, peak: float, code: grpc.StatusCode,
               child: pb.Recommendation | None) -> None:
    if not math.isfinite(peak) or peak < 0 or peak > config.MAX_MEMORY_MIB:
        assert code == grpc.StatusCode.INVALID_ARGUMENT
        return
    need = max(float(parent.profile.memory_mib), peak)
    above = [x for x in parent.ladder if x.profile.memory_mib > need]
    if not above:
        assert code == grpc.StatusCode.RESOURCE_EXHAUSTED
        return
    assert code == grpc.StatusCode.OK and child is not None
    # The first rung above the need, or, for an action whose predictive need spreads past it
    # (one with history: the shared actions of the fuzz accumulate executions), a later one of
    # least expected cost (`ladder.next_rung`); the rest of the ladder follows it.
    keys = [(x.pool_id, x.gpu_model, x.profile.name, x.count) for x in above]
    got = (child.pool_id, child.gpu_model, child.profile.name, child.count)
    assert got in keys
    k = keys.index(got)
    assert dict(child.resources) == dict(above[k].resources)
    assert [x.profile.name for x in child.ladder] == [x.profile.name for x in above[k + 1:]]
    assert child.attempt == parent.attempt + 1 and child.source == "ladder"
    assert child.predicted_peak_memory_mib == pytest.approx(need)
    assert child.stored and child.recommendation_id != parent.recommendation_id


def _dt(ts: Timestamp) -> datetime:
    return ts.ToDatetime(tzinfo=UTC)


def check_listing(live: Live, req: pb.ListRecommendationsRequest,
                  page: pb.ListRecommendationsResponse) -> None:
    size = min(req.page_size or 50, 1000)
    assert len(page.recommendations) <= size
    # Filters are trimmed like the ids they match (ids are stored trimmed).
    model = CATALOG.resolve(req.gpu_model) if req.gpu_model.strip() else None
    keys = []
    for e in page.recommendations:
        r = e.recommendation
        if req.action_id.strip():
            assert e.action_id == req.action_id.strip()
        if req.pool_id.strip():
            assert r.pool_id == req.pool_id.strip()
        if req.gpu_model.strip():
            assert r.gpu_model == (model.id if model else req.gpu_model.strip())
        if req.source.strip():
            assert r.source == req.source.strip()
        if req.HasField("created_after"):
            assert _dt(e.created_at) >= _dt(req.created_after)
        if req.HasField("created_before"):
            assert _dt(e.created_at) < _dt(req.created_before)
        if req.outcome == pb.OUTCOME_FILTER_FITTED:
            assert e.outcome == pb.OUTCOME_SUCCEEDED
        elif req.outcome == pb.OUTCOME_FILTER_OOM:
            assert e.outcome == pb.OUTCOME_OOM
        elif req.outcome == pb.OUTCOME_FILTER_UNKNOWN:
            assert e.outcome == pb.OUTCOME_UNSPECIFIED
        keys.append((_dt(e.created_at), r.recommendation_id))
    assert keys == sorted(keys, reverse=True) and len(set(keys)) == len(keys)
    if page.next_page_token:
        assert len(page.recommendations) == size
        following = pb.ListRecommendationsRequest()
        following.CopyFrom(req)
        following.page_token = page.next_page_token
        code, nxt, _ = call(live.admin.ListRecommendations, following)
        assert code == grpc.StatusCode.OK
        later = [(_dt(e.created_at), e.recommendation.recommendation_id)
                 for e in nxt.recommendations]
        assert not later or later[0] < keys[-1]


# --- one property per RPC --------------------------------------------------------------------


def recommend_property(live: Live, req: pb.RecommendRequest) -> pb.Recommendation | None:
    before = counts(live)
    code, answer, _ = call(live.recommender.Recommend, req)
    after = counts(live)
    if code != grpc.StatusCode.OK:
        assert after == before, "a failed Recommend wrote a row"
        return None
    assert after == (before[0] + 1, before[1])
    check_recommendation(req, answer)
    return answer  # type: ignore[no-any-return]


def next_after_oom_property(live: Live, parent: pb.Recommendation | None, rec_id: str,
                            peak: float) -> None:
    req = pb.NextAfterOomRequest(recommendation_id=rec_id, observed_peak_memory_mib=peak)
    before = counts(live)
    code, child, _ = call(live.recommender.NextAfterOom, req)
    after = counts(live)
    if code != grpc.StatusCode.OK:
        assert after == before, "a failed NextAfterOom wrote a row"
    else:
        assert after == (before[0] + 1, before[1])
    if parent is not None and rec_id.strip() == parent.recommendation_id:
        check_next(parent, peak, code, child)
        if code == grpc.StatusCode.OK:
            again_code, again, _ = call(live.recommender.NextAfterOom, req)
            assert again_code == grpc.StatusCode.OK
            assert again.recommendation_id == child.recommendation_id
            assert counts(live) == after, "a retried NextAfterOom wrote a row"
    elif not rec_id.strip() or len(rec_id.strip()) > config.MAX_STRING:
        assert code == grpc.StatusCode.INVALID_ARGUMENT
    else:
        assert code in (grpc.StatusCode.NOT_FOUND, grpc.StatusCode.INVALID_ARGUMENT)


def record_property(live: Live, req: pb.ExecutionRecord) -> None:
    key = req.execution_id.strip()
    known = bool(key) and len(key) <= config.MAX_STRING and \
        live.store.get_execution(key) is not None
    before = counts(live)
    code, answer, _ = call(live.recommender.RecordExecution, req)
    after = counts(live)
    if code != grpc.StatusCode.OK:
        assert after == before, "a failed RecordExecution wrote a row"
        return
    assert answer.duplicate == known
    assert after == (before[0], before[1] + (0 if known else 1))
    stored = live.store.get_execution(key)
    assert stored is not None
    if not known:
        model = CATALOG.resolve(req.gpu_model)
        assert model is not None and stored.gpu_model == model.id
        assert stored.profile == req.profile.strip()
        assert stored.count == max(req.count, 1)
        assert stored.peak_memory_mib == req.peak_memory_mib
        assert stored.action_id == req.action_id.strip()
    retry = pb.ExecutionRecord()
    retry.CopyFrom(req)
    retry.peak_memory_mib = 1.0  # a retry's body is ignored
    code, again, _ = call(live.recommender.RecordExecution, retry)
    assert code == grpc.StatusCode.OK and again.duplicate
    assert counts(live) == after
    kept = live.store.get_execution(key)
    assert kept is not None and kept.peak_memory_mib == stored.peak_memory_mib


def list_property(live: Live, req: pb.ListRecommendationsRequest) -> None:
    before = counts(live)
    code, page, _ = call(live.admin.ListRecommendations, req)
    assert counts(live) == before, "a listing wrote a row"
    if req.page_size < 0 or req.outcome not in (0, 1, 2, 3):
        assert code == grpc.StatusCode.INVALID_ARGUMENT
    if code == grpc.StatusCode.OK:
        check_listing(live, req, page)
    else:
        assert code == grpc.StatusCode.INVALID_ARGUMENT
