"""The use cases: recommend, step up after an OOM, record an execution, read the history.

No gRPC here and no SQL: the store is any `ports.Store`, learned predictions come through
`ports.MemoryPredictor`, and the adapters turn these objects into messages. Database trouble
never blocks a recommendation: without history the answer comes from the request alone and
says so.
"""

from __future__ import annotations

import contextlib
import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from recommender.core import config
from recommender.core.cache import ActionCache, Change, with_execution, with_oom
from recommender.core.catalog import Catalog, GpuModel, load_catalog
from recommender.core.domain import (
    Decision,
    Execution,
    HistoryEntry,
    HistoryFilter,
    ModelVersion,
    Outcome,
    Request,
    Sample,
    StoredRecommendation,
    StoreUnavailable,
    ThroughputRow,
)
from recommender.core.estimation import (
    FALLBACK,
    HISTORY,
    Estimator,
    Evidence,
    default_estimator,
    fit_online,
    mean_sm_utilisation,
)
from recommender.core.ids import new_id
from recommender.core.ladder import LADDER, LadderExhausted, chance_above, next_rung
from recommender.core.layout import RecordedAdvice, advise_recorded
from recommender.core.online import ActionModels
from recommender.core.policy import recommend, young_calibration
from recommender.core.population import Population, read_population
from recommender.core.ports import MemoryPredictor, Store
from recommender.core.predictive import Predictive, checked_oom_wait_gpus
from recommender.core.throughput import ThroughputCurve, ThroughputSample, fit_curve
from recommender.core.throughput_population import PopulationCache

log = logging.getLogger(__name__)


def sample_of(e: Execution) -> Sample:
    """An execution as `Store.action_samples` reads it back."""
    return Sample(at=e.ended_at, peak_mib=e.peak_memory_mib, slice_mib=e.slice_memory_mib,
                  outcome=e.outcome, sm_utilization=e.sm_utilization, gpu_model=e.gpu_model,
                  profile=e.profile, throughput=e.throughput, execution_id=e.execution_id,
                  recommendation_id=e.recommendation_id, features=dict(e.features),
                  count=e.count)


class UnknownRecommendation(LookupError):
    """NOT_FOUND: no recommendation with that id."""


@dataclass(frozen=True)
class Answer:
    recommendation: StoredRecommendation
    stored: bool


@dataclass(frozen=True)
class _Decided:
    """A decision and everything it was a function of, for `UseCases.recommend`'s memo.

    The decision is a function of the request (its execution_id aside), the action's history,
    the population, the learned model serving, and the time: the time only through the OOM
    floor's window (an OOM within OOM_FLOOR_WINDOW of now is a floor) and samples stamped after
    now (their age weighs 1 until now passes them). So it holds from `at` to `until`: the first
    moment an OOM leaves the window or a sample stops being in the future. The history, the
    population and the model are compared by identity: a cached history is a new list whenever
    it changes (a record, an OOM, a notification from another replica, a re-read), a population
    read again and a model promoted are new objects."""

    request: Request
    """Kept so that the pools' identities in the key are not reused by other objects."""
    samples: list[Sample]
    population: Population | None
    learned: MemoryPredictor | None
    at: datetime
    until: datetime
    decision: Decision


def _memo_key(request: Request) -> tuple[object, ...]:
    """What a decision depends on in a request: everything but the execution_id. Pools by
    identity (rpc.convert hands out one Pool per distinct listing)."""
    return (request.action_id, tuple(id(p) for p in request.pools), request.workers,
            request.max_workers, request.needs_peer_to_peer, request.declared_memory_mib,
            tuple(sorted(request.features.items())) if request.features else ())


def _holds_until(samples: list[Sample], now: datetime) -> datetime:
    """Until when a decision made at `now` on `samples` stays what it would be (see _Decided)."""
    now_s = now.timestamp()
    window = config.OOM_FLOOR_WINDOW.total_seconds()
    until = math.inf
    for s in samples:
        at = s.at_s
        if at > now_s:
            until = min(until, at)
        if s.outcome is Outcome.OOM and now_s - at <= window:
            until = min(until, at + window)
    if until == math.inf:
        return datetime.max.replace(tzinfo=UTC)
    return datetime.fromtimestamp(until, UTC)


def _sm_weighed(samples: list[Sample], now: datetime) -> float | None:
    """`mean_sm_utilisation` where it can decide anything, else None (as with no execution to
    weigh): a decision reads the mean only against SM_HUNGRY_UTILISATION (`sm_hungry`, and
    `_remember`'s closeness to it), and a weighted mean of values all below the threshold by
    more than its rounding is below it, not close to it. One look per sample, not a decay
    weight and a product each (12 us against 127 to 157 on a 500-sample history)."""
    below = config.SM_HUNGRY_UTILISATION * (1.0 - _SM_MARGIN)
    succeeded = Outcome.SUCCEEDED
    for s in samples:
        if s.outcome is succeeded and s.sm_utilization >= below:
            return mean_sm_utilisation(samples, now)
    return None


_SM_MARGIN = 1e-6
"""Far above the mean's relative rounding error (the history's length times 1e-16) and
`_remember`'s closeness (1e-9)."""


def _now() -> datetime:
    return datetime.now(UTC)


class UseCases:
    """What the service does, whatever calls it: the gRPC servicers, the replay, the tests.

    `learned` returns the learned model serving now (None while none does); it is called on
    every recommendation, so a newly promoted version is used at once.
    `population_in_background` (the server): the memory population is read again in a thread
    of its own (about 100 ms at 20,000 rows), the one read before serving meanwhile; off, the
    caller that finds it stale reads it (deterministic: replays, tests).
    `oom_wait_gpus`: what an OOM costs the user beyond the memory its attempts held, in whole
    GPUs for the run's duration (OOM_WAIT_GPUS unless the operator priced it otherwise). The
    first slice and the rung after an OOM are chosen by expected cost at this price; the
    retraining job must score candidates at the same one (`recommender retrain
    --oom-wait-gpus`), or it promotes for another trade than the server makes."""

    def __init__(
        self,
        store: Store,
        estimator: Estimator | None = None,
        clock: Callable[[], datetime] = _now,
        catalog: Catalog | None = None,
        learned: Callable[[], MemoryPredictor | None] | None = None,
        cache: ActionCache | None = None,
        population_in_background: bool = False,
        oom_wait_gpus: float = config.OOM_WAIT_GPUS,
    ) -> None:
        self.oom_wait_gpus = checked_oom_wait_gpus(oom_wait_gpus)
        self.store = store
        self.population_in_background = population_in_background
        self.cache = cache
        self.action_models = ActionModels()
        self._population: Population | None = None
        self._population_read_at = -math.inf
        self._records_since_population = 0
        self._population_rows = 0
        self._population_lock = threading.Lock()
        self.estimator = estimator or default_estimator(learned, self.action_models,
                                                        self.memory_population)
        self._learned = learned
        self._memo: dict[tuple[object, ...], _Decided] | None = {} if estimator is None else None
        """Decisions for requests asked again unchanged on an unchanged history (_Decided):
        the estimate and the policy cost most of a Recommend, and the runner asks the same
        request of an action again and again. Only with the default estimator, whose inputs
        are known; an estimator given by the caller may depend on anything."""
        self.memo_hits = 0
        self.memo_misses = 0
        self.clock = clock
        self.catalog = catalog or load_catalog()
        self.throughput_population = PopulationCache(self.catalog, self._throughput_rows, clock)

    @property
    def population(self) -> Population | None:
        """The memory population read last, without reading it (metrics)."""
        return self._population

    def memory_population(self) -> Population | None:
        """What other actions say about a new one, read again now and then (POPULATION_*):
        by one reader at a time, the others meanwhile use what was read before. Only the
        first read (nothing to serve meanwhile) is made on the caller's request when
        `population_in_background`."""
        # A young service (few rows read) refreshes after a few records (its first actions are
        # the whole population), a large one after as many more as its read cost.
        every = max(1, int(self._population_rows * config.POPULATION_REFRESH_SHARE))
        stale = (time.monotonic() - self._population_read_at > config.POPULATION_REFRESH_S
                 or self._records_since_population >= every)
        if stale and self._population_lock.acquire(blocking=False):
            self._records_since_population = 0
            self._population_read_at = time.monotonic()
            if self.population_in_background and self._population is not None:
                threading.Thread(target=self._read_population, args=(True,),
                                 name="memory-population", daemon=True).start()
            else:
                self._read_population(False)
        return self._population

    def _read_population(self, background: bool) -> None:
        """Holds `_population_lock` (taken by the caller) and releases it."""
        try:
            self._population = population = read_population(self.store)
            self._population_rows = population.rows
        except StoreUnavailable as e:
            log.warning("population prior not refreshed: %s", e)
        except Exception:
            if not background:
                raise  # on the caller's request, a bug surfaces as every other does
            log.exception("population prior not refreshed")  # a thread must not die silently
        finally:
            self._population_lock.release()

    def wait_for_population(self) -> None:
        """Until a population read in progress has finished (tests, benchmarks)."""
        with self._population_lock:
            pass

    def _samples(self, action_id: str) -> list[Sample]:
        if self.cache is None:
            return self.store.action_samples(action_id, config.HISTORY_WINDOW)
        cached = self.cache.get(action_id)
        if cached is not None:
            return cached
        read_at, generation = self.cache.now(), self.cache.generation(action_id)
        samples = self.store.action_samples(action_id, config.HISTORY_WINDOW)
        self.cache.put(action_id, samples, read_at, generation)
        return samples

    def _throughput_rows(self, since: datetime) -> list[ThroughputRow] | None:
        try:
            return self.store.throughput_summary(since)
        except StoreUnavailable as e:
            log.warning("throughput population not read: %s", e)
            return None

    def _changed(self, action_id: str) -> None:
        """The action changed in a way the cache cannot follow (or may have: a write that
        failed may still have committed): read it again next time."""
        if self.cache is not None:
            self.cache.invalidate(action_id)

    def _wrote(self, action_id: str, change: Change) -> None:
        """This replica committed a change: the cached history follows it in place (the
        runner's Recommend, RecordExecution, Recommend ... keeps hitting the cache)."""
        if self.cache is not None:
            self.cache.update(action_id, change)

    def _oom_marked(self, parent: StoredRecommendation, observed_peak_mib: float,
                    at: datetime, *, overwrite: bool) -> None:
        oom = Sample(at=at, peak_mib=observed_peak_mib or 0.0,
                     slice_mib=parent.decision.rung.profile.memory_mib, outcome=Outcome.OOM,
                     recommendation_id=parent.id, run_id=parent.execution_id)
        self._wrote(parent.action_id, lambda samples: with_oom(
            samples, oom, config.HISTORY_WINDOW, overwrite=overwrite))

    def throughput_curve(self, samples: list[Sample], action_id: str = ""
                         ) -> ThroughputCurve | None:
        """The action's throughput-by-profile curve from its successful executions, with the
        shapes of other actions on the same GPU models (PopulationCache) for sizes it never
        ran."""
        points = []
        for s in samples:
            if s.outcome is not Outcome.SUCCEEDED or s.throughput <= 0:
                continue
            model = self.catalog.resolve(s.gpu_model)
            profile = model.profile(s.profile) if model else None
            if model is None or profile is None:
                continue
            points.append(ThroughputSample(model.id, profile.compute_slices, s.throughput,
                                           max(s.count, 1)))
        if not points:
            return None
        return fit_curve(points[: config.THROUGHPUT_HISTORY], self.throughput_population.get(),
                         action_id, self.throughput_population.memory_slices)

    def recommend(self, request: Request) -> Answer:
        now = self.clock()
        degraded = ""
        samples: list[Sample] = []
        try:
            samples = self._samples(request.action_id)
        except StoreUnavailable as e:
            degraded = f"database unavailable ({e}); answered from the request alone"
            log.warning("recommend without history: %s", e)
        # Without a cache (or with it off: PostgreSQL until its listener is up) every history
        # is a new read, never the list a decision was made on: nothing to remember.
        cache = self.cache
        memo = (self._memo if not degraded and request.target_throughput <= 0
                and cache is not None and cache.enabled else None)
        key: tuple[object, ...] = ()
        decision: Decision | None = None
        population: Population | None = None
        learned: MemoryPredictor | None = None
        if memo is not None:
            # The throughput curve reads a population of its own on its own clock: requests
            # with a throughput target are decided every time.
            key = _memo_key(request)
            population = self.memory_population()  # as the estimator would: it may refresh
            learned = self._learned() if self._learned is not None else None
            found = memo.get(key)
            if (found is not None and found.samples is samples
                    and found.population is population and found.learned is learned
                    and found.at <= now <= found.until):
                decision = found.decision
                self.memo_hits += 1
        if decision is None:
            decision, sm = self._decide(request, samples, now, degraded)
            if memo is not None:
                self.memo_misses += 1
                self._remember(memo, key, request, samples, population, learned, now, decision,
                               sm)
        rec = StoredRecommendation(
            id=new_id(),
            created_at=now,
            action_id=request.action_id,
            execution_id=request.execution_id,
            decision=decision,
            declared_memory_mib=request.declared_memory_mib,
        )
        return Answer(rec, self._save(rec))

    def _decide(self, request: Request, samples: list[Sample], now: datetime, degraded: str
                ) -> tuple[Decision, float | None]:
        """The decision, and the SM utilisation it weighed."""
        evidence = Evidence(now=now, samples=samples, declared_mib=request.declared_memory_mib,
                            action_id=request.action_id, features=request.features)
        estimate = self.estimator.estimate(evidence)
        sm = _sm_weighed(samples, now)
        curve = (self.throughput_curve(samples, request.action_id)
                 if request.target_throughput > 0 else None)
        decision = recommend(
            request, estimate, sm_hungry=sm is not None and sm >= config.SM_HUNGRY_UTILISATION,
            curve=curve, calibration=young_calibration(estimate, samples, self._population),
            oom_wait_gpus=self.oom_wait_gpus,
        )
        if estimate is not None and estimate.model_version:
            decision = replace(decision, model_version=estimate.model_version)
        if degraded:
            decision = replace(decision, source=FALLBACK,
                               reason=f"{degraded}: {decision.reason}")
        return decision, sm

    def _remember(self, memo: dict[tuple[object, ...], _Decided], key: tuple[object, ...],
                  request: Request, samples: list[Sample], population: Population | None,
                  learned: MemoryPredictor | None, now: datetime, decision: Decision,
                  sm: float | None) -> None:
        """Keeps the decision unless its inputs moved while it was made (a population read in
        its thread finished, a model was promoted: it may have used either), or the SM
        utilisation it weighed is within rounding of the threshold (a mean weighted by age at
        another moment could fall on the other side)."""
        if (self._population is not population
                or (self._learned() if self._learned is not None else None) is not learned):
            return
        if sm is not None and math.isclose(sm, config.SM_HUNGRY_UTILISATION, rel_tol=1e-9):
            return
        if len(memo) >= config.DECISION_MEMO_MAX:
            with contextlib.suppress(StopIteration, KeyError, RuntimeError):  # another thread
                del memo[next(iter(memo))]  # the oldest (dicts keep their insertion order)
        memo[key] = _Decided(request, samples, population, learned, now,
                             _holds_until(samples, now), decision)

    def _save(self, rec: StoredRecommendation) -> bool:
        try:
            self.store.save_recommendation(rec)
            return True
        except StoreUnavailable as e:
            log.warning("recommendation %s not stored: %s", rec.id, e)
            return False

    def _own_need(self, action_id: str, now: datetime) -> Predictive | None:
        """The action's predictive need from its own history (the first rung after an OOM is
        chosen by expected cost on it), or None without one."""
        try:
            samples = self._samples(action_id)
        except StoreUnavailable:
            return None
        estimate = self.estimator.estimate(Evidence(now=now, samples=samples,
                                                    action_id=action_id))
        if estimate is None or estimate.source != HISTORY:
            return None
        return estimate.predictive

    def next_after_oom(self, recommendation_id: str, observed_peak_mib: float) -> Answer:
        """The next rung above what the execution is known to have needed.

        It needed more than the slice it died in, and at least the peak seen before dying.
        Raises UnknownRecommendation, LadderExhausted or StoreUnavailable.
        """
        parent = self.store.get_recommendation(recommendation_id)
        if parent is None:
            raise UnknownRecommendation(
                f"recommendation_id: no recommendation {recommendation_id!r}")
        retried = self.store.child_of(parent.id)
        if retried is not None:
            return Answer(retried, True)  # the runner retried the call: same answer
        d = parent.decision
        need = max(float(d.rung.profile.memory_mib), observed_peak_mib)
        now = self.clock()
        own = self._own_need(parent.action_id, now)
        try:
            rung, above = next_rung(d.ladder, need, own, self.oom_wait_gpus)
        except LadderExhausted:
            try:
                self.store.mark_oom(parent.id, observed_peak_mib, now, parent.action_id)
            except BaseException:
                self._changed(parent.action_id)
                raise
            self._oom_marked(parent, observed_peak_mib, now, overwrite=False)
            raise
        reason = (
            f"OOM in {d.rung.profile.name} ({d.rung.profile.memory_mib:,} MiB)"
            + (f" after a peak of {observed_peak_mib:,.0f} MiB" if observed_peak_mib else "")
            + f": needs more than {need:,.0f} MiB per worker; next rung {rung.profile.name} "
            f"({rung.profile.memory_mib:,} MiB) x {rung.count} on {rung.pool_id} ({rung.gpu_model})"
        )
        child = StoredRecommendation(
            id=new_id(),
            created_at=now,
            action_id=parent.action_id,
            execution_id=parent.execution_id,
            parent_id=parent.id,
            declared_memory_mib=parent.declared_memory_mib,
            decision=Decision(
                rung=rung,
                predicted_peak_mib=need,
                quantile=0.0,
                source=LADDER,
                reason=reason,
                ladder=above,
                model_version=d.model_version,
                attempt=d.attempt + 1,
                oom_chance=chance_above(own, need, rung.profile.memory_mib),
            ),
        )
        try:
            stored = self.store.save_rung_after_oom(parent.id, observed_peak_mib, now, child)
        except BaseException:
            self._changed(parent.action_id)
            raise
        if stored is child:
            self._oom_marked(parent, observed_peak_mib, now, overwrite=True)
        else:  # a concurrent retry marked it first, at its own time
            self._changed(parent.action_id)
        return Answer(stored, True)

    def record_execution(self, execution: Execution) -> bool:
        """True when recorded now, False when the execution_id was already there."""
        try:
            created = self.store.record_execution(execution, self.clock())
        except BaseException:
            self._changed(execution.action_id)  # it may have committed all the same
            raise
        if created:
            new = sample_of(execution)
            self._wrote(execution.action_id,
                        lambda samples: with_execution(samples, new, config.HISTORY_WINDOW))
            self._fit_ahead(execution.action_id)
        self._records_since_population += created
        return created

    def _fit_ahead(self, action_id: str) -> None:
        """Refit the action's online model now, on the history the cache just updated, so that
        the runner's next Recommend finds it fitted (microseconds) instead of fitting it (a
        few hundred): the runner waits on Recommend before it can start an execution, while
        the execution it just recorded has already ended."""
        samples = self.cache.peek(action_id) if self.cache is not None else None
        if samples:
            fit_online(self.action_models, action_id, samples, self.memory_population())

    def list_history(self, f: HistoryFilter, page_size: int, page_token: str = ""
                     ) -> tuple[list[HistoryEntry], str]:
        """Recommendations and how they turned out, newest first; raises ValueError for a page
        token the store did not issue, StoreUnavailable when it cannot answer."""
        return self.store.list_history(f, page_size, page_token)

    def list_model_versions(self) -> list[ModelVersion]:
        """Learned model versions, newest first, the serving one marked."""
        return self.store.list_model_versions()

    def advise_layout(self, gpu_model: GpuModel, gpus: int, since: datetime, until: datetime,
                      pool_id: str = "") -> RecordedAdvice:
        """Which MIG geometry each of `gpus` cards should have for the demand recorded on
        `gpu_model` (and `pool_id`) in [since, until)."""
        return advise_recorded(self.store, gpu_model, gpus, since, until, pool_id)

