"""Progress of long commands (`retrain`, `evaluate`): one redrawn line with a bar at a
terminal, a log line every few seconds otherwise (a CronJob's log).

The work reports plain messages through a `Callable[[str], None]` (learning and evaluation
know nothing of terminals); a message with a count in it ("fitted 40/120 action models",
"2,000/6,000 executions") gets a bar and a time left. Steps that cannot report (one
scikit-learn fit of the pooled trees takes tens of seconds and has no callback) are covered by
a heartbeat thread that shows how long the current step has been running.
"""

from __future__ import annotations

import logging
import re
import sys
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import TextIO

log = logging.getLogger("recommender.progress")

_COUNT = re.compile(r"(\d[\d,]*)/(\d[\d,]*)")
_DIGITS = re.compile(r"\d[\d,.]*")

TTY_REDRAW_S = 0.1
"""At a terminal, the line is redrawn at most 10 times a second: faster is flicker, and a
caller may report every one of 6,000 executions."""
LOG_EVERY_S = 10.0
"""Elsewhere, a line every 10 s at most for one step: a 20-minute retrain in a CronJob logs
about a hundred lines, and a stuck one shows within 10 s that it is still alive."""


class Progress:
    """Callable with each progress message; `note` for lines that must stay; `close` (or use
    it as a context manager) to stop the heartbeat and end the line."""

    def __init__(self, enabled: bool = True, *, stream: TextIO | None = None,
                 tty: bool | None = None, log_every_s: float = LOG_EVERY_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.enabled = enabled
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty() if tty is None else tty
        self.log_every_s = log_every_s
        self.clock = clock
        self.start = clock()
        self._lock = threading.Lock()
        self._message = ""
        self._shape = ""
        self._step_start = self.start
        self._shown = 0.0  # when the line was last drawn or logged
        self._pending = False  # the current message has not been shown
        self._count_base: tuple[str, int, float, int] = ("", 0, 0.0, 0)
        """(text before the count, total, when, done) when this count began: the rate so far
        gives the time left, retraining pauses included."""
        self._drawn = False  # a transient line is on the terminal
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # --- what the work calls -------------------------------------------------------------

    def __call__(self, message: str) -> None:
        if not self.enabled:
            return
        with self._lock:
            now = self.clock()
            shape = _DIGITS.sub("#", message)
            if shape != self._shape:
                if self._pending and not self.tty:
                    self._log(now)  # the last count of the step before ("6,000/6,000")
                self._shape, self._step_start = shape, now
                self._message = message
                self._show(now)
            else:
                self._message = message
                self._pending = True
                if now - self._shown >= (TTY_REDRAW_S if self.tty else self.log_every_s):
                    self._show(now)
        self._ensure_heartbeat()

    def note(self, message: str) -> None:
        """A line that stays (a result, not a step): above the progress line at a terminal."""
        if not self.enabled:
            return
        with self._lock:
            if self.tty:
                self._erase()
                self.stream.write(message + "\n")
                self.stream.flush()
                if self._message:
                    self._draw(self.clock())
            else:
                log.info(message)

    def clear(self) -> None:
        """Takes the progress line off the terminal, before the command prints its results."""
        with self._lock:
            self._erase()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        with self._lock:
            if self._pending and not self.tty:
                self._log(self.clock())
            self._erase()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    # --- display -------------------------------------------------------------------------

    def line(self, now: float) -> str:
        """The current message with a bar (at a terminal, after the time since the start) and
        the time left when it has a count, and how long the step has run when it is slow. A
        log line has its own time stamp."""
        text = f"[{now - self.start:6.1f}s] {self._message}" if self.tty else self._message
        step_s = now - self._step_start
        m = _COUNT.search(self._message)
        if m:
            done, total = (int(g.replace(",", "")) for g in m.groups())
            key = self._message[:m.start()]
            if self._count_base[:2] != (key, total) or done < self._count_base[3]:
                self._count_base = (key, total, now, done)
            _, _, since, done0 = self._count_base
            if total > 0:
                share = min(1.0, done / total)
                if self.tty:
                    filled = round(share * 20)
                    text += f" [{'#' * filled}{'.' * (20 - filled)}]"
                text += f" {share:.0%}"
                if done > done0 and done < total and now - since >= 2:
                    left = (now - since) / (done - done0) * (total - done)
                    text += f", about {_duration(left)} left"
        elif step_s >= 2:
            text += f" ({_duration(step_s)})"
        return text

    def _show(self, now: float) -> None:
        if self.tty:
            self._draw(now)
        else:
            self._log(now)

    def _draw(self, now: float) -> None:
        self.stream.write("\r\033[K" + self.line(now))
        self.stream.flush()
        self._drawn, self._shown, self._pending = True, now, False

    def _log(self, now: float) -> None:
        log.info(self.line(now))
        self._shown, self._pending = now, False

    def _erase(self) -> None:
        if self.tty and self._drawn:
            self.stream.write("\r\033[K")
            self.stream.flush()
            self._drawn = False

    def _ensure_heartbeat(self) -> None:
        if self._thread is None and not self._stop.is_set():
            self._thread = threading.Thread(target=self._beat, name="progress", daemon=True)
            self._thread.start()

    def _beat(self) -> None:
        """Shows the step again when the work has been silent: every second at a terminal (the
        clock moves), every `log_every_s` in a log."""
        period = 1.0 if self.tty else self.log_every_s
        while not self._stop.wait(min(period, 1.0)):
            with self._lock:
                now = self.clock()
                if self._message and now - self._shown >= period:
                    self._show(now)


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
