"""Hypothesis strategies for every RPC's request: arbitrary messages (unicode, empty and
oversized strings, NUL when `nul`, huge/negative/NaN/inf numbers, unknown enum values, bogus GPU
model and profile names, forged page tokens) and plausible ones (valid shapes with edge values,
so that many calls succeed). Used by tests/test_fuzz.py.
"""

from __future__ import annotations

import base64
import json
import math
import time
from datetime import UTC, datetime, timedelta
from typing import Any, cast

from google.protobuf.timestamp_pb2 import Timestamp
from hypothesis import strategies as st

from recommender._proto.intelliscale.recommender.v1 import recommender_pb2 as pb
from recommender.core import config
from recommender.core.catalog import WHOLE_GPU, GpuModel, load_catalog

CATALOG = load_catalog()
MODELS: list[GpuModel] = list(CATALOG)

INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)
ENUMS = st.one_of(st.integers(-1, 6), INT32)
ANY_FLOAT = st.one_of(
    st.floats(),
    st.sampled_from([0.0, -0.0, -1.0, 1e308, -1e308, 5e-324, math.inf, -math.inf, math.nan]),
)
TS_MIN, TS_MAX = -62_135_596_800, 253_402_300_799
"""Timestamp.seconds that protobuf converts (0001-01-01 .. 9999-12-31)."""
NOW = int(time.time())

MODEL_NAMES = sorted({n for m in MODELS for n in (m.id, *m.aliases)})
BOGUS_MODELS = ["", " ", "GTX-1080", "A100", "NVIDIA", "a100-40gb", " nvidia a100_sxm4_40gb ",
                "H100-80GB-X", "\uff22200", "B200"]
PROFILE_NAMES = [*sorted({p.name for m in MODELS for p in m.profiles}), WHOLE_GPU]
BOGUS_PROFILES = ["", "9g.99gb", "1g.5GB", " 1g.5gb ", "whole ", "1g", "0g.0gb"]
ACTIONS = ["fuzz-a", "fuzz-b", "fuzz-\u00fc\u00f1\u00ee", "\U0001f680", "x" * 256]
POOL_IDS = ["pool-0", "pool-1", "pool-\u00e9", "dup", " dup "]
SOURCES = ["prior", "history", "fallback", "ladder", "model"]


def texts(nul: bool) -> st.SearchStrategy[str]:
    """Any string protobuf can carry: empty, blank, unicode, NUL (when `nul`), 257+ chars."""
    chars = (st.characters(codec="utf-8") if nul
             else st.characters(codec="utf-8", exclude_characters="\x00"))
    special = ["", " ", "\t\n", "a", "\u00e9", "\u65e5\u672c\u8a9e", "\U0001f680", "x" * 256,
               "x" * 257, " " * 300 + "y", "\u200b", "\ufeff", "\u2126\u2248"]
    if nul:
        special += ["\x00", "a\x00b"]
    return st.one_of(st.sampled_from(special), st.text(chars, max_size=12),
                     st.text(chars, min_size=250, max_size=270))


def names(nul: bool) -> st.SearchStrategy[str]:
    """Strings the service accepts as ids: non-blank, at most 256 characters once stripped."""
    chars = (st.characters(codec="utf-8") if nul
             else st.characters(codec="utf-8", exclude_characters="\x00"))
    return st.one_of(
        st.sampled_from(ACTIONS),
        st.text(chars, min_size=1, max_size=30).filter(lambda s: bool(s.strip())),
    )


def timestamps() -> st.SearchStrategy[Timestamp]:
    seconds = st.one_of(st.integers(TS_MIN, TS_MAX), st.sampled_from([TS_MIN, TS_MAX, 0]),
                        st.integers(NOW - 10 * 86400, NOW + 86400))
    return st.builds(lambda s, n: Timestamp(seconds=s, nanos=n), seconds,
                     st.integers(0, 999_999_999))


def features(nul: bool) -> st.SearchStrategy[dict[str, float]]:
    return st.one_of(
        st.dictionaries(texts(nul), ANY_FLOAT, max_size=5),
        st.dictionaries(st.text(min_size=1, max_size=6), st.floats(-1e9, 1e9),
                        min_size=60, max_size=70),
    )


def arbitrary_pool(nul: bool) -> st.SearchStrategy[pb.Pool]:
    t = texts(nul)
    placement = st.builds(lambda s, z: pb.Placement(start=s, size=z),
                          st.one_of(st.integers(-2, 13), INT32),
                          st.one_of(st.integers(-1, 13), INT32))
    profile_names = st.sampled_from(PROFILE_NAMES + BOGUS_PROFILES)
    gpu = st.builds(lambda u, names, occ: pb.Gpu(uuid=u, occupied_profiles=names, occupied=occ),
                    t, st.lists(profile_names, max_size=4), st.lists(placement, max_size=4))
    node = st.builds(lambda n, g: pb.Node(node_id=n, gpus=g), t, st.lists(gpu, max_size=17))
    return st.builds(
        lambda pid, model, strategy, profiles, nodes: pb.Pool(
            pool_id=pid, gpu_model=model, strategy=strategy, profiles=profiles, nodes=nodes),
        st.one_of(st.sampled_from(POOL_IDS), t),
        st.sampled_from(MODEL_NAMES + BOGUS_MODELS),
        ENUMS,
        st.lists(profile_names, max_size=3),
        st.lists(node, max_size=3),
    )


def arbitrary_recommend(nul: bool) -> st.SearchStrategy[pb.RecommendRequest]:
    t = texts(nul)
    return st.builds(
        lambda a, e, pools, w, mw, tp, p2p, mem, feats: pb.RecommendRequest(
            action_id=a, execution_id=e, pools=pools, workers=w, max_workers=mw,
            target_throughput=tp, needs_peer_to_peer=p2p, declared_memory_mib=mem,
            features=feats),
        st.one_of(st.sampled_from(ACTIONS), t), t,
        st.lists(arbitrary_pool(nul), max_size=4),
        st.one_of(st.integers(-2, 70), INT32), INT32, ANY_FLOAT, st.booleans(),
        st.one_of(st.integers(-1, 100_000), INT64), features(nul),
    )


@st.composite
def plausible_gpu(draw: st.DrawFn, model: GpuModel, index: int, wild: bool) -> pb.Gpu:
    """Placements drawn from the model's legal ones or within its grid (possibly overlapping;
    outside it too when `wild`), and occupied profiles."""
    occupied = []
    legal = [(s, p.placement.size) for p in model.profiles if p.placement is not None
             for s in p.placement.starts]
    units = model.placement_units or 8
    for _ in range(draw(st.integers(0, 3))):
        kind = draw(st.sampled_from(["legal", "legal", "in range"] + (["any"] if wild else [])))
        if legal and kind == "legal":
            s, size = draw(st.sampled_from(legal))
        elif kind == "in range":
            s = draw(st.integers(0, units - 1))
            size = draw(st.integers(1, units - s))
        else:
            s, size = draw(st.integers(-1, 12)), draw(st.integers(0, 12))
        occupied.append(pb.Placement(start=s, size=size))
    pinned = draw(st.lists(st.sampled_from([p.name for p in model.profiles] + [WHOLE_GPU]),
                           max_size=2))
    uuid_ = draw(st.sampled_from(["", f"GPU-{index}", "\U0001f680"]))
    return pb.Gpu(uuid=uuid_, occupied=occupied, occupied_profiles=pinned)


@st.composite
def plausible_pool(draw: st.DrawFn, nul: bool, index: int) -> pb.Pool:
    model = draw(st.sampled_from(MODELS))
    name = draw(st.sampled_from([model.id, *model.aliases, model.id.lower(), f" {model.id} "]))
    strategy = draw(st.sampled_from([pb.MIG_STRATEGY_SINGLE, pb.MIG_STRATEGY_MIXED,
                                     pb.MIG_STRATEGY_DYNAMIC, pb.MIG_STRATEGY_NONE]))
    mig = [p.name for p in model.profiles]
    if strategy == pb.MIG_STRATEGY_SINGLE:
        profiles = [draw(st.sampled_from(mig))]
    elif strategy == pb.MIG_STRATEGY_NONE:
        profiles = draw(st.lists(st.sampled_from([*mig, WHOLE_GPU]), max_size=2))  # ignored
    else:
        profiles = draw(st.lists(st.sampled_from(mig), max_size=3))
    nodes = []
    wild = draw(st.integers(0, 9)) == 0  # one pool in ten may list placements off the grid
    for n in range(draw(st.integers(0, 3))):
        gpus = [draw(plausible_gpu(model, k, wild)) for k in range(draw(st.integers(0, 8)))]
        nodes.append(pb.Node(node_id=draw(st.sampled_from([f"node-{n}", f" node-{n} "])),
                             gpus=gpus))
    pool_id = draw(st.sampled_from([f"pool-{index}", f"pool-{index}-\u00e9", "dup"]))
    return pb.Pool(pool_id=pool_id, gpu_model=name, strategy=strategy, profiles=profiles,
                   nodes=nodes)


@st.composite
def plausible_recommend(draw: st.DrawFn, nul: bool) -> pb.RecommendRequest:
    pools = [draw(plausible_pool(nul, i)) for i in range(draw(st.integers(1, 3)))]
    return pb.RecommendRequest(
        action_id=draw(names(nul)),
        execution_id=draw(st.one_of(st.just(""), names(nul))),
        pools=pools,
        workers=draw(st.one_of(st.integers(0, 8), st.integers(0, config.MAX_WORKERS))),
        max_workers=draw(st.integers(0, config.MAX_WORKERS)),
        target_throughput=draw(st.floats(0, 1e6)),
        needs_peer_to_peer=draw(st.sampled_from([False, False, False, True])),
        declared_memory_mib=draw(st.one_of(st.integers(0, 300_000),
                                           st.sampled_from([0, 7500, 40192, 40193]))),
        features=draw(st.dictionaries(names(nul), st.floats(-1e12, 1e12), max_size=5)),
    )


@st.composite
def arbitrary_record(draw: st.DrawFn, nul: bool) -> pb.ExecutionRecord:
    t = texts(nul)
    m = pb.ExecutionRecord(
        execution_id=draw(st.one_of(t, st.uuids().map(str))),
        action_id=draw(st.one_of(st.sampled_from(ACTIONS), t)),
        recommendation_id=draw(t if nul else st.one_of(st.just(""), st.text(max_size=36).filter(
            lambda s: "\x00" not in s))),
        gpu_model=draw(st.sampled_from(MODEL_NAMES + BOGUS_MODELS)),
        profile=draw(st.sampled_from(PROFILE_NAMES + BOGUS_PROFILES)),
        count=draw(st.one_of(st.integers(-2, 5), INT32)),
        peak_memory_mib=draw(ANY_FLOAT),
        sm_utilization=draw(ANY_FLOAT),
        duration_s=draw(ANY_FLOAT),
        throughput=draw(ANY_FLOAT),
        outcome=cast(Any, draw(ENUMS)),  # unknown enum values on purpose
        features=draw(features(nul)),
    )
    if draw(st.booleans()):
        m.started_at.CopyFrom(draw(timestamps()))
    if draw(st.booleans()):
        m.ended_at.CopyFrom(draw(timestamps()))
    return m


@st.composite
def plausible_record(draw: st.DrawFn, nul: bool) -> pb.ExecutionRecord:
    model = draw(st.sampled_from(MODELS))
    rec_ids = [st.just(""), st.uuids().map(str)]
    m = pb.ExecutionRecord(
        execution_id=draw(st.one_of(st.uuids().map(str), names(nul))),
        action_id=draw(names(nul)),
        recommendation_id=draw(st.one_of(*rec_ids)),
        gpu_model=draw(st.sampled_from([model.id, *model.aliases])),
        profile=draw(st.sampled_from([p.name for p in model.profiles] + [WHOLE_GPU])),
        count=draw(st.integers(0, config.MAX_WORKERS)),
        peak_memory_mib=draw(st.one_of(st.floats(0, 1e6), st.sampled_from([0.0, 1e308]))),
        sm_utilization=draw(st.floats(0, 100)),
        duration_s=draw(st.floats(0, 1e9)),
        throughput=draw(st.floats(0, 1e9)),
        outcome=draw(st.sampled_from([pb.OUTCOME_SUCCEEDED, pb.OUTCOME_OOM, pb.OUTCOME_FAILED,
                                      pb.OUTCOME_CANCELLED])),
        features=draw(st.dictionaries(names(nul), st.floats(-1e12, 1e12), max_size=5)),
    )
    if draw(st.booleans()):
        ended = datetime.now(UTC) - timedelta(seconds=draw(st.floats(0, 30 * 86400)))
        m.ended_at.FromDatetime(ended)
        if draw(st.booleans()):
            m.started_at.FromDatetime(ended - timedelta(seconds=draw(st.floats(-10, 3600))))
    elif draw(st.booleans()):
        m.ended_at.CopyFrom(draw(timestamps()))
    return m


def page_tokens(nul: bool) -> st.SearchStrategy[str]:
    """Random strings, and forged tokens shaped like the service's (base64 of JSON)."""

    def forge(value: Any) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).decode()

    iso = st.datetimes(timezones=st.sampled_from([UTC, None])).map(lambda d: d.isoformat())
    ids = texts(nul)
    shaped = st.builds(lambda d, i: forge([d, i]), iso, ids)
    junk_json = st.recursive(
        st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False),
                  st.text(max_size=5)),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner,
                                                                    max_size=3),
        max_leaves=6,
    ).map(forge)
    raw = st.binary(max_size=40).map(lambda b: base64.urlsafe_b64encode(b).decode())
    return st.one_of(st.just(""), texts(nul), shaped, junk_json, raw)


@st.composite
def list_request(draw: st.DrawFn, nul: bool) -> pb.ListRecommendationsRequest:
    t = texts(nul)
    m = pb.ListRecommendationsRequest(
        action_id=draw(st.one_of(st.just(""), st.sampled_from(ACTIONS), t)),
        pool_id=draw(st.one_of(st.just(""), st.sampled_from(POOL_IDS), t)),
        gpu_model=draw(st.one_of(st.just(""), st.sampled_from(MODEL_NAMES + BOGUS_MODELS))),
        source=draw(st.one_of(st.just(""), st.sampled_from(SOURCES), t)),
        outcome=cast(Any, draw(st.one_of(st.integers(0, 3), ENUMS))),
        page_size=draw(st.one_of(st.integers(-2, 5), st.integers(0, 2000), INT32)),
        page_token=draw(page_tokens(nul)),
    )
    if draw(st.booleans()):
        m.created_after.CopyFrom(draw(timestamps()))
    if draw(st.booleans()):
        m.created_before.CopyFrom(draw(timestamps()))
    return m
