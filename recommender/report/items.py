"""What the report is made of: a recommendation and its outcome (`Item`), and the
figures a set of them adds up to (`Stats`), with their formatting."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from recommender.core.domain import (
    Execution,
    Outcome,
    StoredRecommendation,
    relative_slack,
)
from recommender.report.svg import NDASH

REPORT_LIMIT = 50_000
"""At most this many recommendations, the most recent, are read."""
TOP_ACTIONS = 20
MAX_POINTS = 3_000
"""Points drawn in one time series; above it, a deterministic sample (every OOM kept)."""
MAX_VERSIONS = 30

@dataclass(frozen=True)
class Item:
    """One recommendation and, once known, how its execution turned out."""

    at: datetime
    action_id: str
    pool_id: str
    gpu_model: str
    profile: str
    count: int
    slice_mib: int
    source: str
    model_version: str
    attempt: int
    outcome: Outcome | None
    peak_mib: float | None
    reserved_gib_h: float | None
    oom_chance: float = 0.0
    """The chance of an OOM the recommendation stated (0: none weighed)."""

    @property
    def slack(self) -> float | None:
        if self.outcome is not Outcome.SUCCEEDED or self.peak_mib is None:
            return None
        return relative_slack(self.slice_mib, self.peak_mib)


def item_of(rec: StoredRecommendation, ex: Execution | None) -> Item:
    d = rec.decision
    outcome: Outcome | None = None
    peak: float | None = None
    reserved: float | None = None
    if ex is not None:
        outcome, peak = ex.outcome, ex.peak_memory_mib
        if ex.duration_s > 0:
            reserved = ex.slice_memory_mib * max(ex.count, 1) * ex.duration_s / 3600 / 1024
    elif rec.oom_at is not None:
        outcome, peak = Outcome.OOM, rec.oom_observed_peak_mib
    if outcome is Outcome.OOM and not peak:
        peak = None  # died before a peak was seen
    return Item(
        at=rec.created_at, action_id=rec.action_id, pool_id=d.rung.pool_id,
        gpu_model=d.rung.gpu_model, profile=d.rung.profile.name, count=d.rung.count,
        slice_mib=d.rung.profile.memory_mib, source=d.source, model_version=d.model_version,
        attempt=d.attempt, outcome=outcome, peak_mib=peak, reserved_gib_h=reserved,
        oom_chance=d.oom_chance,
    )


# --- numbers and scales ------------------------------------------------------------------


def pct(x: float | None, digits: int = 0) -> str:
    return NDASH if x is None else f"{x * 100:.{digits}f}%"


def fmt_int(x: float) -> str:
    return f"{x:,.0f}"


def fmt_gib_h(x: float) -> str:
    return f"{x:,.1f}" if x < 100 else f"{x:,.0f}"


def median_or_none(xs: Sequence[float]) -> float | None:
    return statistics.median(xs) if xs else None


def short(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


# --- tables ------------------------------------------------------------------------------


@dataclass
class Stats:
    recommendations: int
    actions: int
    first_known: int
    first_oom: int
    known: int
    rungs: int
    slack_median: float | None
    slack_n: int
    reserved: float
    reserved_oom: float
    durations_known: int
    start: datetime | None
    end: datetime | None
    stated_n: int = 0
    """First attempts with a known outcome whose recommendation stated a chance of an OOM."""
    stated_expected: float = 0.0
    """The OOMs those chances add up to."""
    stated_seen: int = 0
    """The OOMs among them."""

    @property
    def oom_rate(self) -> float | None:
        return self.first_oom / self.first_known if self.first_known else None


def stats_of(items: Sequence[Item]) -> Stats:
    firsts = [i for i in items if i.attempt == 1 and i.outcome is not None]
    slack = [s for i in items if i.attempt == 1 and (s := i.slack) is not None]
    timed = [i for i in items if i.reserved_gib_h is not None]
    stated = [i for i in firsts if i.oom_chance > 0]
    return Stats(
        recommendations=len(items),
        actions=len({i.action_id for i in items}),
        first_known=len(firsts),
        first_oom=sum(1 for i in firsts if i.outcome is Outcome.OOM),
        known=sum(1 for i in items if i.outcome is not None),
        rungs=sum(1 for i in items if i.attempt > 1),
        slack_median=median_or_none(slack),
        slack_n=len(slack),
        reserved=sum(i.reserved_gib_h or 0.0 for i in timed),
        reserved_oom=sum(i.reserved_gib_h or 0.0 for i in timed if i.outcome is Outcome.OOM),
        durations_known=len(timed),
        start=min((i.at for i in items), default=None),
        end=max((i.at for i in items), default=None),
        stated_n=len(stated),
        stated_expected=sum(i.oom_chance for i in stated),
        stated_seen=sum(1 for i in stated if i.outcome is Outcome.OOM),
    )
