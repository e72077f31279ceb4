"""How the chances stated for young actions' first attempts turned out, slice size by slice size.

A young action's predictive need is a t fitted to a handful of runs with the population's spread
as its prior: its tail says what such a t says, not what peaks of real workloads do. Beyond the
run-to-run scatter, memory has structure at absolute sizes that no single action's few runs can
show: a caching allocator that grows into what the card it was profiled on held, a model or a
batch sized to fill a card of some size. On GenTD26 (real pods), first attempts on a
40 GB slice ran out 24 times where their chances added up to 6.8, and on a 47 GB slice never,
where they added up to 12.9: the t was too bold below the sizes where peaks pile up and too
timid above them. An action that has run long enough counts its own runs past each size
(`predictive.SeenPeaks`, from ONLINE_SEEN_MIN_RUNS); until it has run CALIBRATION_YOUNG_RUNS
times, a count of so few runs says little, and the population's record at each size is the best
evidence there is. This module holds that record: per slice size, the chances
stated and the OOMs seen, and the factor that brings the one to the other, shrunk towards 1 by
a prior worth CALIBRATION_PRIOR OOMs (a size no first attempt was given keeps the model's
chance; one OOM where little was stated moves it by less than double).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from recommender.core import config
from recommender.core.predictive import CountedTail


@dataclass(frozen=True)
class CalibrationSample:
    """A young action's first attempt whose outcome is known."""

    slice_mib: int
    model_chance: float
    """The chance the action's model put on this slice running out, before calibration."""
    ran_out: bool


@dataclass(frozen=True)
class SliceCalibration:
    stated: Mapping[int, float] = field(default_factory=lambda: MappingProxyType({}))
    """Slice MiB -> the model chances of the first attempts given it, added up."""
    seen: Mapping[int, float] = field(default_factory=lambda: MappingProxyType({}))
    """Slice MiB -> how many of those ran out."""

    @classmethod
    def of(cls, samples: Iterable[CalibrationSample]) -> SliceCalibration:
        stated: dict[int, float] = {}
        seen: dict[int, float] = {}
        for s in samples:
            stated[s.slice_mib] = stated.get(s.slice_mib, 0.0) + s.model_chance
            seen[s.slice_mib] = seen.get(s.slice_mib, 0.0) + float(s.ran_out)
        return cls(MappingProxyType(stated), MappingProxyType(seen))

    def factor(self, mib: float) -> float:
        """Seen over stated at this size, each with CALIBRATION_PRIOR OOMs added (a gamma
        prior on the ratio centred on 1): 1 where no first attempt was given the size."""
        key = int(mib)
        prior = config.CALIBRATION_PRIOR
        return (self.seen.get(key, 0.0) + prior) / (self.stated.get(key, 0.0) + prior)

    def tail(self, need: CountedTail, sizes_mib: Sequence[float]) -> Calibrated:
        return Calibrated(self, need, sizes_mib)

    def describe(self, mib: float) -> str:
        key = int(mib)
        return (f"young actions' first attempts on {key:,} MiB ran out "
                f"{self.seen.get(key, 0.0):.0f} times where their chances added up to "
                f"{self.stated.get(key, 0.0):.1f}")


class Calibrated:
    """A need's chance of running out of each of `sizes_mib`: the model's times the
    calibration's factor there, then the action's own count of its runs past the size has its
    say (`predictive.SeenPeaks`: from ONLINE_SEEN_MIN_RUNS on it can raise the chance), and
    never higher at a size than at a smaller one (a larger slice does not run out more often):
    the tail the expected cost climbs. Sizes outside `sizes_mib` are the model's.

    Why the factor goes on the model and not on the count: the record says how a t fitted to
    a handful of runs misjudges a size, not how often this action's runs passed it. Where the
    young actions' t had been too timid at a size, the factor scaled a share the action had
    counted itself down with it: two modes seed 5's modes-0025, whose runs passed the 40 GB
    slice one time in six (its count said 12-20 %), was put there at a stated 2-8 % for its
    runs 4 to 20. Each size is worked out when first asked for (with the sizes below it), once:
    the expected cost stops climbing where the tail has run out, and the sizes above are never
    read."""

    __slots__ = ("_at", "_calibration", "_need", "_sizes")

    def __init__(self, calibration: SliceCalibration, need: CountedTail,
                 sizes_mib: Sequence[float]) -> None:
        self._calibration = calibration
        self._need = need
        self._sizes = sorted(set(sizes_mib))
        self._at: dict[float, float] = {}

    def model(self, mib: float) -> float:
        """The model's own chance, before the calibration and before the action's count of
        its runs past `mib`: what the record's factor multiplies, so what it is kept from."""
        return self._need.model_survival(mib)

    def survival(self, mib: float) -> float:
        found = self._at.get(mib)
        if found is not None:
            return found
        if mib not in self._sizes:
            return self._need.survival(mib)
        below = 1.0
        for size in self._sizes:  # a handful of profiles: the smallest first
            done = self._at.get(size)
            if done is None:
                model = self._need.model_survival(size) * self._calibration.factor(size)
                done = self._at[size] = min(below, self._need.counted(size, min(model, 1.0)))
            below = done
            if size == mib:
                break
        return below


EMPTY = SliceCalibration()
"""Nothing recorded yet: every factor is 1 (the model's chances), and a young action's
decisions still record their model chance, so that the record can begin."""
