"""Axis ticks: round numbers for values, calendar steps for times."""

from __future__ import annotations

import math
from datetime import UTC, datetime


def nice_ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    """Round ticks (1, 2, 5 x 10^k) covering [lo, hi]."""
    if hi <= lo:
        hi = lo + 1
    raw = (hi - lo) / max(n, 1)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    start = math.floor(lo / step) * step
    ticks = []
    t = start
    while t <= hi + step * 1e-9:
        ticks.append(round(t, 10))
        t += step
    if ticks[-1] < hi:
        ticks.append(round(t, 10))
    return ticks


TIME_STEPS = [60, 300, 600, 900, 1800, 3600, 2 * 3600, 3 * 3600, 6 * 3600, 12 * 3600, 86400,
              2 * 86400, 7 * 86400, 14 * 86400]
MONTH_STEPS = [1, 2, 3, 6, 12, 24, 60, 120]


def _month_ticks(t0: datetime, t1: datetime, n: int) -> tuple[list[datetime], str]:
    """First days of months (or of years), calendar-aligned."""
    months = (t1.year - t0.year) * 12 + t1.month - t0.month + 1
    step = next((m for m in MONTH_STEPS if months / m <= n), MONTH_STEPS[-1])
    index = t0.year * 12 + t0.month - 1
    index += -index % step
    ticks = []
    while True:
        t = datetime(index // 12, index % 12 + 1, 1, tzinfo=UTC)
        if t > t1:
            break
        if t >= t0:
            ticks.append(t)
        index += step
    return ticks, "%Y" if step >= 12 else "%b %Y"


def time_ticks(t0: datetime, t1: datetime, n: int = 7) -> tuple[list[datetime], str]:
    """Round UTC times in [t0, t1] and the strftime format that reads best at that step."""
    span = (t1 - t0).total_seconds()
    step = next((s for s in TIME_STEPS if span / s <= n), 0)
    if not step:
        return _month_ticks(t0, t1, n)
    first = math.ceil(t0.timestamp() / step) * step
    ticks = []
    t = first
    while t <= t1.timestamp():
        ticks.append(datetime.fromtimestamp(t, UTC))
        t += step
    if step >= 86400:
        fmt = "%b %d" if t1.year == t0.year else "%Y-%m-%d"
    elif t0.date() == t1.date():
        fmt = "%H:%M"
    else:
        fmt = "%b %d %H:%M"
    return ticks, fmt
