"""Per-action models of the next execution's need, learned online from the action's own history.

No retraining job is needed: whenever an action's history changes, a few small weighted least
squares fits (numpy, a few hundred microseconds for 500 executions) are made once and kept until
the next change; a Recommend then costs a dot product and a t tail (microseconds).

Each fit is a *design*: log peak on a constant (the decayed history), on a trend in the action's
execution order (memory that grows within a pod's life), on the log of the request's features
(memory that scales with batch and input sizes), the peak in MiB linear on the raw features
(the robust choice where data is thin and growth is additive), or linear on them and their
pairwise products with errors in proportion to the need (a fixed footprint plus activations
of batch x input size, the shape of most models' memory, which neither of the two before is),
or a fixed footprint plus one power of the inputs whose exponents are chosen from a few (batch
x sqrt(size), batch x sequence^2: first powers are not every model's shape). A young action also
has a power law in its inputs with other actions' slopes (`ActionModels` keeps them), only its
level its own: it has too few runs for slopes of its own; and, from its second run, a fixed
footprint plus the power of the inputs most grown actions with the same inputs chose, its
footprint and per-item cost its own.
The design whose calibrated bound would have been best on the action's own past executions
wins, judged by leave-one-out pinball loss: every design is scored on executions it was not
fitted on, so a richer design wins only when it really predicts better (the closed-form
leave-one-out residuals of least squares make this cheap). Beside designs on the inputs,
every design is judged on their weights (one that follows the last few runs would otherwise be
judged on those few alone), and the runs after a likely change of level are left to the change
(`Fit.selection_loss`): a step is the action's, not a design's shape.

The predictive distribution (`Predictive`) is a Student-t around the fit, its scale the
leave-one-out residuals' (so each action is calibrated on its own errors, not one offset shared
by unlike actions), shrunk towards the population's typical spread with a few pseudo-degrees of
freedom (so two executions do not make a confident action). Where a design's shape is not the
action's, its errors near the request's inputs move its location and scale there
(`core.local`). Recent executions weigh more, by
rank and by age, so a step change in the action's code is followed within a few runs; once the
newest runs stand apart from those before them by more than their scatter (`core.steps`), the
runs before are moved by the step before any design is fitted, so the designs' spread is the new
level's own and not the two levels' distance.

An OOM is a censored observation: it enters at the bumped value (more than the slice it died in)
until the runner records how the execution ended; then its true peak replaces it (the store
drops the OOM sample).

This module reads a history into columns, fits every design on it, ranks them and keeps them
per action (`ActionModels`). The parts have modules of their own: the designs
(`core.designs`), one design fitted and scored (`core.fits`), the level change
(`core.level_change`), what grown actions lend young ones (`core.lending`).
"""

from __future__ import annotations

import math
import operator
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import replace

import numpy as np

from recommender.core import config
from recommender.core.arrays import FloatArray
from recommender.core.designs import Design, Lent, candidates
from recommender.core.domain import Outcome, Sample
from recommender.core.fits import ActionModel, Core, Data, Fit, finish, fit_core
from recommender.core.lending import borrowed_of, latest, powers_of, prior_of, slopes_for
from recommender.core.local import LocalErrors, local_errors, readable
from recommender.core.predictive import OwnTail, SeenPeaks, own_tail
from recommender.core.steps import find_step


def _value(s: Sample) -> float:
    if s.outcome is Outcome.OOM:
        bumped = max(s.slice_mib * (1 + config.OOM_BUMP_FRACTION),
                     s.slice_mib + config.OOM_BUMP_MIN_MIB)
        return max(bumped, s.peak_mib)
    return s.peak_mib


def _tail_weights(w: FloatArray, span: float = config.ONLINE_TAIL_SPAN) -> FloatArray:
    """The fit's weights with half-lives `span` times longer, summing to their
    effective count; those below a thousandth of the newest's are left out (they would not
    move a tail). Only for the fits that may serve (`_model`), not every design."""
    t = (w / max(float(w.max()), 1e-300)) ** (1.0 / span)
    t = np.where(t >= 1e-3, t, 0.0)
    return t * (float(t.sum()) / max(float(t @ t), 1e-300))


def _own_tail(core: Core, fit: Fit) -> OwnTail | None:
    """The tail the design's own leave-one-out errors show, in units of its scale."""
    if core.loo.shape[0] < 2 or fit.scale <= 0:
        return None
    if fit.local is not None:  # its errors once the misfit near each input is taken out
        errors, weights = fit.local.own
        return own_tail(errors, weights, config.ONLINE_TAIL_PRIOR)
    weights = _tail_weights(core.loo_weights)
    keep = weights > 0
    return own_tail(core.loo[keep] / fit.scale, weights[keep], config.ONLINE_TAIL_PRIOR)


def _serving_fit(fit: Fit, core: Core, variance: Mapping[str, float]) -> Fit:
    """A fit that may serve, with what only serving needs: its errors near each input, then the
    tail its errors show (once the misfit near each input is out) and the peaks it saw."""
    fit = replace(fit, local=_local(core, fit, variance), span=core.span)
    return replace(fit, own=_own_tail(core, fit), seen=_seen(core))


def _local(core: Core, fit: Fit, variance: Mapping[str, float]) -> LocalErrors | None:
    """The design's errors near each input, in units of its scale, weighed with half-lives
    ONLINE_LOCAL_SPAN times the fit's: a bias at one input shows only in the runs there.
    `variance`: other actions' slopes of the variance (`own_variance`), for a design whose
    runs are too few to read its own; only those for a design with lent slopes. Lent to a
    design in MiB too: its one scale misses both the need's growth and the scatter's, and
    the lent slopes are the scatter's part."""
    if core.log_in is None or fit.scale <= 0:
        return None
    lent = np.array([variance.get(f, 0.0) for f in core.design.features])
    return local_errors(core.log_in, core.loo / fit.scale, _local_weights(core),
                        lent if lent.any() else None, kernel=not core.design.slopes)


def _local_weights(core: Core) -> FloatArray:
    """The weights its errors near each input are read with (`_local`)."""
    return _tail_weights(core.loo_weights, config.ONLINE_LOCAL_SPAN)


def _seen(core: Core) -> SeenPeaks | None:
    """The action's peaks, for a design without inputs that has ONLINE_SEEN_MIN_RUNS of them
    (on the inputs, a peak says what one request needed, not what the next will), weighed
    with half-life ONLINE_SEEN_HALF_LIFE executions; past the largest, a cap once it has run
    ONLINE_RECORD_MIN_RUNS times (ONLINE_RECORD_MARGIN), unless a step moved its runs or the
    largest is an OOM's."""
    n = core.y_mib.shape[0]
    if core.design.features or n < config.ONLINE_SEEN_MIN_RUNS:
        return None
    # Runs moved by a step (`core.step`) are not draws of the new level's largest: its
    # factor is read from the few runs after it. Nor is an OOM's bumped value a largest peak:
    # the need it stands for is only known to be above it.
    grown = (config.ONLINE_RECORD_MIN_RUNS if core.step is None and core.largest_seen
             else 0)
    return SeenPeaks.of(core.y_mib, _SEEN_WEIGHTS[:n], config.ONLINE_SEEN_PRIOR,
                        config.ONLINE_SEEN_RECENT, grown, config.ONLINE_RECORD_MARGIN,
                        config.ONLINE_SEEN_SMOOTHING, config.ONLINE_SEEN_SAME_RUNS,
                        config.ONLINE_SEEN_SAME_T)


_SEEN_WEIGHTS = 0.5 ** (np.arange(config.HISTORY_WINDOW, dtype=np.float64)
                        / config.ONLINE_SEEN_HALF_LIFE)


_AT_S = operator.attrgetter("at_s")


def _cores(samples: Sequence[Sample], feature_names: Sequence[str], slopes: Lent = (),
           powers: tuple[float, ...] = ()) -> tuple[Core, ...]:
    """Every design that can be fitted on `samples` (newest first), before the prior scale;
    with `slopes` (other actions', one per feature name, None where none is lent), the power
    law on the inputs that have one too; with `powers` (other actions' exponents, one per
    feature name), the monomial with those powers."""
    succeeded, oom = Outcome.SUCCEEDED, Outcome.OOM  # by identity: an Enum hashes in Python
    informative = [s for s in samples
                   if (s.outcome is succeeded and s.peak_mib > 0)
                   or (s.outcome is oom and _value(s) > 0)]
    if not informative:
        return ()
    # Newest first; stable, as reverse sorts are: samples of one time keep their order.
    informative.sort(key=_AT_S, reverse=True)
    del informative[config.HISTORY_WINDOW:]
    y = np.array([s.peak_mib if s.outcome is succeeded else _value(s) for s in informative])
    n = len(informative)
    # Each input as a column once, for every design that uses it (NaN where a run lacked it).
    inputs = {f: np.fromiter((float(s.features.get(f, math.nan)) for s in informative),
                             np.float64, n) for f in feature_names}
    log_y = np.log(y)
    step = find_step(log_y, tuple(inputs.values()))
    if step is not None:
        # The runs before a step are counted at the new level: one level, its own scatter.
        log_y[step.runs:] += step.shift
        y = np.exp(log_y)
    at = np.fromiter((s.at_s for s in informative), np.float64, n)
    log_inputs = {f: np.log1p(np.maximum(v, 0.0)) for f, v in inputs.items()}
    data = Data(y, log_y, inputs, log_inputs, np.arange(n, dtype=np.float64),
                 np.maximum(at.max() - at, 0.0), step,
                 informative[int(np.argmax(y))].outcome is succeeded)
    designs = candidates(feature_names, n, slopes, powers)
    cores = [c for d in designs if d.features if (c := fit_core(d, data)) is not None]
    # Where designs on the inputs compete, every design is judged on the same runs, weighed
    # as those designs weigh them: one that follows the last few runs alone would be judged
    # on those few, and a run of small requests made it look right for a large one.
    judge = config.ONLINE_HALF_LIFE_WITH_INPUTS if cores else 0.0
    cores += [c for d in designs if not d.features if (c := fit_core(d, data, judge)) is not None]
    return tuple(cores)


def _model(cores: Sequence[Core], prior_log_scale: float, input_prior: float | None = None,
           slopes_prior: float | None = None, misfit: Mapping[str, float] | None = None,
           variance: Mapping[str, float] | None = None) -> ActionModel | None:
    """The designs' fits for this prior scale, best first; `input_prior`, when known, is the
    prior of the designs on the inputs, learned across actions (ONLINE_INPUT_PRIOR_ACTIONS);
    `slopes_prior`, when given, that of the power law with other actions' slopes
    (`_slopes_prior`); `misfit`, per input, how far an action's own slope strays from a lent
    one (a variance: `Fit.misfit`); `variance`, other actions' slopes of the variance
    (`own_variance`), per input."""
    if not cores:
        return None
    priors = [_prior_of_design(c.design, prior_log_scale, input_prior, slopes_prior)
              for c in cores]
    fits = [finish(c, prior) for c, prior in zip(cores, priors, strict=True)]
    if misfit:
        fits = [replace(f, misfit=tuple(misfit.get(n, 0.0) for n in f.design.features))
                if f.centre else f for f in fits]
    posteriors = [f.change_posterior(prior) for f, prior in zip(fits, priors, strict=True)]
    ranked = sorted(zip(fits, posteriors, cores, strict=True),
                    key=lambda fpc: fpc[0].selection_loss(fpc[1]))
    # The best design, and the best without inputs (what serves a request that lacks them).
    serving = {0, next((i for i, (f, _, _) in enumerate(ranked) if not f.design.features), 0)}
    return ActionModel(tuple(
        _serving_fit(f.with_changes(post), core, variance or {})
        if i in serving else f
        for i, (f, post, core) in enumerate(ranked)))


def _prior_of_design(design: Design, prior_log_scale: float, input_prior: float | None,
                     slopes_prior: float | None) -> float:
    """A design's prior spread: the one learned for designs on the inputs, the power law with
    other actions' slopes its own while it has one (`_slopes_prior`), else the population's."""
    if design.slopes:
        return prior_log_scale if slopes_prior is None else slopes_prior
    if design.features and input_prior is not None:
        return input_prior
    return prior_log_scale


def _slopes_prior(runs: int, prior_log_scale: float, pooled_log_scale: float | None
                  ) -> float | None:
    """The prior spread of a young action's power law with other actions' slopes at its third
    execution (two runs, ONLINE_BORROW_POWERS_MIN_RUNS, where other actions' powers have no
    leave-one-out error yet and no design of its own shape can be fitted): the spread
    the population's pooled slopes leave from one run to the next (`AtInputs.log_scale`, never
    above the population's), which is how far a level plus those slopes misses; None (the
    population's spread) from then on. With two runs the prior is most of the fit's scale,
    and the spread of peaks inputs and all counted the inputs' own effect as scatter. From
    three runs the design competes by leave-one-out loss with the lent powers (two or more
    inputs) and soon the action's own designs on the inputs, and with a narrow prior a shape
    that is not the action's won where it was wrong (config, ONLINE_BORROW_*)."""
    if pooled_log_scale is None or runs > config.ONLINE_BORROW_POWERS_MIN_RUNS:
        return None
    return min(pooled_log_scale, prior_log_scale)


def fit_action(samples: Sequence[Sample], feature_names: Sequence[str],
               prior_log_scale: float, slopes: Lent = (), powers: tuple[float, ...] = ()
               ) -> ActionModel | None:
    """Every design that can be fitted on `samples` (newest first), best first; with `slopes`
    (other actions', one per feature name, None where none is lent), the power law on the
    inputs that have one too; with `powers`, the monomial with other actions' powers."""
    return _model(_cores(samples, feature_names, slopes, powers), prior_log_scale)


def input_spread(cores: Sequence[Core]) -> float | None:
    """The least spread a design on the inputs leaves about itself on this history, from its
    own leave-one-out errors alone (no prior), as a share of the need; None without such a
    design on ONLINE_INPUT_PRIOR_MIN_RUNS executions."""
    best: float | None = None
    for c in cores:
        if (not c.design.features or c.design.slopes or c.design.lent_powers
                or c.shown < config.ONLINE_INPUT_PRIOR_MIN_RUNS):
            continue
        spread = math.sqrt(max(c.data_var, 0.0) / c.shown)
        if not (c.design.log_space or c.design.relative):
            spread /= max(c.level, 1.0)  # MiB about a need of about `level` MiB
        best = spread if best is None else min(best, spread)
    return best


def own_slopes(cores: Sequence[Core]) -> dict[str, float] | None:
    """The action's own power law's slope per input, once it has ONLINE_BORROW_MIN_RUNS
    executions beyond its parameters to show them: what young actions borrow (`borrowed_of`)."""
    for c in cores:
        d = c.design
        if (d.log_features and not d.slopes and not d.monomial and not d.products
                and c.shown >= config.ONLINE_BORROW_MIN_RUNS):
            return {f: float(b) for f, b in zip(d.features, c.coef[1:], strict=True)}
    return None


def own_variance(model: ActionModel | None, cores: Sequence[Core]) -> dict[str, float] | None:
    """The slopes of the variance of the action's best design on inputs of its own, per input,
    nought where it kept none (`core.local`), once it has the runs to read them
    (ONLINE_LOCAL_SCALE_MIN_RUNS): what young actions borrow (`borrowed_of`). An action whose
    runs showed no slope counts, or every action's scatter would be lent the few actions'
    slopes. Only a design whose errors are shares of the need (log or relative): in MiB, the
    slopes would count the need's growth beside the scatter's, and lent to a share's design
    they would widen it twice."""
    if model is None or not model.fits:
        return None
    best = model.fits[0]
    d = best.design
    if (not d.features or d.slopes or d.lent_powers
            or not (d.log_space or d.relative)):
        return None
    core = next((c for c in cores if c.design == d), None)
    if core is None or core.log_in is None:
        return None
    runs = int(readable(core.log_in, _local_weights(core)).sum())
    if min(runs, config.ONLINE_LOCAL_CHECKED) < config.ONLINE_LOCAL_SCALE_MIN_RUNS:
        return None
    variance = best.local.variance if best.local is not None else None
    slopes = (variance.coef[1:] if variance is not None and not variance.lent
              else np.zeros(len(d.features)))
    return {f: float(b) for f, b in zip(d.features, slopes, strict=True)}


def own_powers(cores: Sequence[Core]) -> tuple[tuple[str, ...], tuple[float, ...]] | None:
    """The inputs and the powers of the action's own monomial, once it has
    ONLINE_BORROW_MIN_RUNS executions beyond its parameters to show them: what young actions
    with the same inputs borrow (`powers_of`)."""
    for c in cores:
        d = c.design
        if (d.monomial and d.exponents and not d.lent_powers
                and c.shown >= config.ONLINE_BORROW_MIN_RUNS):
            return d.features, d.exponents
    return None


def common_features(samples: Sequence[Sample]) -> tuple[str, ...]:
    """Features most of the action's recent executions carried (at most a few: each costs
    data), in a stable order."""
    counts: dict[str, int] = {}
    recent = samples[: config.HISTORY_WINDOW]
    for s in recent:
        for k in s.features:
            counts[k] = counts.get(k, 0) + 1
    need = max(1, int(len(recent) * config.ONLINE_FEATURE_PRESENCE))
    names = sorted((k for k, c in counts.items() if c >= need), key=lambda k: (-counts[k], k))
    return tuple(sorted(names[: config.ONLINE_MAX_FEATURES]))


class ActionModels:
    """Fitted models per action, refitted when the action's history changes; bounded, safe
    across threads. For the actions fitted last it also keeps their designs' cores
    (`Core`): when only the prior scale moved (a population read), the refit finishes
    those instead of fitting every design again."""

    def __init__(self, max_actions: int = config.ONLINE_MEMO_ACTIONS,
                 max_cores: int = config.ONLINE_CORE_ACTIONS) -> None:
        self.max_actions = max_actions
        self.max_cores = max_cores
        self._fits: OrderedDict[str, tuple[tuple[object, ...], ActionModel | None]] = (
            OrderedDict())
        self._cores: OrderedDict[str, tuple[tuple[object, ...], tuple[Core, ...]]] = (
            OrderedDict())
        self._lock = threading.Lock()
        self._spreads: OrderedDict[str, float] = OrderedDict()
        """`input_spread` of the actions fitted last (ONLINE_INPUT_PRIOR_ACTIONS): what the
        designs on the inputs leave, across actions."""
        self._input_prior: float | None = None
        self._slopes: OrderedDict[str, dict[str, float]] = OrderedDict()
        """`own_slopes` of the actions fitted last (ONLINE_INPUT_PRIOR_ACTIONS)."""
        self._borrowed: dict[str, float] = {}
        """Per input name, the slope a young action borrows (`borrowed_of`)."""
        self._powers: OrderedDict[str, tuple[tuple[str, ...], tuple[float, ...]]] = (
            OrderedDict())
        """`own_powers` of the actions fitted last (ONLINE_INPUT_PRIOR_ACTIONS)."""
        self._borrowed_powers: dict[tuple[str, ...], tuple[float, ...]] = {}
        """Per set of input names, the powers a young action with those inputs borrows."""
        self._variances: OrderedDict[str, dict[str, float]] = OrderedDict()
        """`own_variance` of the actions fitted last (ONLINE_INPUT_PRIOR_ACTIONS)."""
        self._borrowed_variance: dict[str, float] = {}
        """Per input name, the slope of the variance a young action borrows."""
        self._borrowed_version = 0
        """Moves whenever the borrowed slopes, powers or variance do: the young actions
        refit."""
        self.fitted = 0
        """Refits from the history (every design fitted)."""
        self.refinished = 0
        """Refits for a new prior scale on a history whose cores were kept."""

    @property
    def input_prior(self) -> float | None:
        """The prior spread of designs on the inputs learned so far (ONLINE_INPUT_PRIOR_*),
        before the population's caps it; None until enough actions show it."""
        with self._lock:
            return self._input_prior

    def get(self, action_id: str, samples: Sequence[Sample], prior_log_scale: float,
            pooled: tuple[tuple[str, float], ...] = (), pooled_log_scale: float | None = None,
            misfit: tuple[tuple[str, float], ...] = (), noise: float | None = None
            ) -> ActionModel | None:
        """`pooled`: the population's slopes pooled within actions (`Population.slopes`), lent
        to a young action for an input none of the grown actions lends one for yet;
        `pooled_log_scale`: the run-to-run spread those slopes leave (`AtInputs.log_scale`),
        the prior of designs on the inputs until one is learned (ONLINE_INPUT_PRIOR_*);
        `misfit`: per input, how far an action's slope strays from a lent one
        (`population.Scatter.slopes`, on its grid), which widens the power law with lent
        slopes for a request far from its runs' inputs (at its third execution, with the
        run-to-run `noise` beside it as that law's prior instead of `pooled_log_scale`, which
        counts the slopes' misses at an average distance)."""
        if not samples:
            return None
        newest, oldest = samples[0], samples[-1]
        history = (len(samples), newest.at_s, newest.peak_mib, newest.execution_id,
                   oldest.at_s)
        young = len(samples) <= config.ONLINE_BORROW_MAX_RUNS
        with self._lock:
            learned = self._input_prior if self._input_prior is not None else pooled_log_scale
            input_prior = None if learned is None else min(learned, prior_log_scale)
            # A young action's fits depend on the borrowed slopes too (their version: the
            # names it has are not known before its history is read, on a miss).
            borrowed = self._borrowed_version if young else -1
            pooled_key = pooled if young else ()
            slopes_prior = _slopes_prior(
                len(samples), prior_log_scale,
                noise if misfit and noise is not None else pooled_log_scale)
            # The misfit widens only the third execution's law with lent slopes, as its prior.
            lent_misfit = misfit if slopes_prior is not None else ()
            key = (*history, round(prior_log_scale, 3), input_prior, borrowed, pooled_key,
                   slopes_prior, lent_misfit)
            found = self._fits.get(action_id)
            if found is not None and found[0] == key:
                self._fits.move_to_end(action_id)
                return found[1]
            kept = self._cores.get(action_id)
            borrowed_slopes = self._borrowed  # replaced, never changed in place
            borrowed_powers = self._borrowed_powers  # the same
            borrowed_variance = self._borrowed_variance  # the same
            if pooled_key:
                borrowed_slopes = {**dict(pooled_key), **borrowed_slopes}
        # A grown action's names are read only when its designs are fitted again: a refinish
        # (a new prior scale) reuses its cores without reading 500 runs' features.
        names = common_features(samples) if young else None
        slopes = slopes_for(borrowed_slopes, names) if names else ()
        powers = borrowed_powers.get(names, ()) if names else ()
        cores = (kept[1] if kept is not None and kept[0] == (*history, slopes, powers)
                 else None)
        refinish = cores is not None
        if cores is None:
            cores = _cores(samples, common_features(samples) if names is None else names,
                           slopes, powers)
        model = _model(cores, prior_log_scale, input_prior, slopes_prior, dict(lent_misfit),
                       borrowed_variance)
        spread = None if refinish else input_spread(cores)
        own = None if refinish else own_slopes(cores)
        powers_shown = None if refinish else own_powers(cores)
        variance_shown = None if refinish else own_variance(model, cores)
        with self._lock:
            if spread is not None:
                self._input_prior = prior_of(latest(self._spreads, action_id, spread))
            if own is not None:
                lent: list[dict[str, float]] = latest(self._slopes, action_id, own)
                borrowed_now = borrowed_of(lent)
                if borrowed_now != self._borrowed:
                    self._borrowed = borrowed_now
                    self._borrowed_version += 1
            if powers_shown is not None:
                powers_now = powers_of(latest(self._powers, action_id, powers_shown))
                if powers_now != self._borrowed_powers:
                    self._borrowed_powers = powers_now
                    self._borrowed_version += 1
            if variance_shown is not None:
                shown: list[dict[str, float]] = latest(
                    self._variances, action_id, variance_shown)
                variance_now = borrowed_of(shown, config.ONLINE_BORROW_VARIANCE_STEP)
                if variance_now != self._borrowed_variance:
                    self._borrowed_variance = variance_now
                    self._borrowed_version += 1
            if refinish:
                self.refinished += 1
            else:
                self.fitted += 1
            self._fits[action_id] = (key, model)
            self._fits.move_to_end(action_id)
            while len(self._fits) > self.max_actions:
                self._fits.popitem(last=False)
            if self.max_cores > 0:
                self._cores[action_id] = ((*history, slopes, powers), cores)
                self._cores.move_to_end(action_id)
                while len(self._cores) > self.max_cores:
                    self._cores.popitem(last=False)
        return model

    @property
    def borrowed(self) -> dict[str, float]:
        """The slopes a young action borrows, per input name (a copy)."""
        with self._lock:
            return dict(self._borrowed)

    @property
    def borrowed_variance(self) -> dict[str, float]:
        """The slopes of the variance a young action borrows, per input name (a copy)."""
        with self._lock:
            return dict(self._borrowed_variance)

    @property
    def borrowed_powers(self) -> dict[tuple[str, ...], tuple[float, ...]]:
        """The powers a young action borrows, per set of input names (a copy)."""
        with self._lock:
            return dict(self._borrowed_powers)
