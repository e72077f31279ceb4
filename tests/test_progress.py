"""The progress display of retrain and evaluate: a redrawn bar at a terminal, throttled log
lines elsewhere, and a heartbeat through steps that cannot report."""

from __future__ import annotations

import io
import logging
import re
import time
from pathlib import Path

import pytest

from recommender.cli.progress import Progress


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_at_a_terminal_one_line_is_redrawn_with_a_bar_and_the_time_left() -> None:
    stream, clock = io.StringIO(), Clock()
    with Progress(stream=stream, tty=True, clock=clock) as show:
        for i in range(1, 1001):
            clock.now = i * 0.01  # 10 s for 1,000
            show(f"IntelliScale: {i:,}/2,000 executions")
    drawn = stream.getvalue()
    frames = drawn.split("\r\033[K")
    assert 50 <= len(frames) <= 200, "redrawn about 10 times a second, not 1,000 times"
    assert "\n" not in drawn
    last = [f for f in frames if f][-1]
    assert "/2,000 executions [##########..........] 50%" in last
    assert "about 10 s left" in last
    assert drawn.endswith("\r\033[K"), "the line is taken off at the end"


def test_notes_stay_above_the_progress_line() -> None:
    stream = io.StringIO()
    with Progress(stream=stream, tty=True) as show:
        show("fitting pooled trees")
        show.note("retrain v1: promoted")
    assert "\r\033[Kretrain v1: promoted\n" in stream.getvalue()


def test_elsewhere_log_lines_are_throttled_and_the_last_count_is_logged(
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="recommender.progress")
    clock = Clock()
    with Progress(stream=io.StringIO(), tty=False, clock=clock, log_every_s=10) as show:
        for i in range(1, 121):
            clock.now = i * 0.5  # 60 s for 120 models
            show(f"fitted {i}/120 action models")
        show("calibrating")
    lines = [r.getMessage() for r in caplog.records]
    assert 6 <= len(lines) <= 9, lines  # every 10 s, not 120 lines
    assert any("fitted 120/120 action models 100%" in x for x in lines)
    assert "calibrating" in lines[-1]
    assert all(not x.startswith("\r") for x in lines)


def test_a_silent_step_gets_a_heartbeat(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="recommender.progress")
    with Progress(stream=io.StringIO(), tty=False, log_every_s=0.05) as show:
        show("fitting pooled trees")
        time.sleep(0.5)  # one scikit-learn fit: no callback
    beats = [r for r in caplog.records if "fitting pooled trees" in r.getMessage()]
    assert len(beats) >= 3
    assert beats[0].getMessage() == "fitting pooled trees"


def test_disabled_is_silent(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    stream = io.StringIO()
    with Progress(False, stream=stream, tty=True) as show:
        show("anything")
        show.note("anything")
    assert stream.getvalue() == "" and not caplog.records


def test_retrain_logs_its_steps_and_counts_the_action_models(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
        capsys: pytest.CaptureFixture[str]) -> None:
    from recommender.cli.main import main
    from recommender.core import config
    from recommender.store import SqlStore, connect, migrate
    from tests.test_learning import record_synthetic

    monkeypatch.setattr(config, "LEARN_TREES", 40)  # fast; the bench runs the real setting
    url = f"sqlite:///{tmp_path / 'r.db'}"
    engine = connect(url)
    migrate(engine)
    record_synthetic(SqlStore(engine), 1500)
    engine.dispose()
    caplog.set_level(logging.INFO, logger="recommender.progress")
    assert main(["retrain", "--database-url", url]) == 0  # stderr is not a terminal here
    lines = [r.getMessage() for r in caplog.records if r.name == "recommender.progress"]
    assert any(x.startswith("read ") for x in lines)
    assert any(x.startswith("fitting pooled ") for x in lines)  # trees or linear
    models = [x for x in lines if "action models" in x]
    assert models and re.fullmatch(r"fitted (\d+)/\1 action models 100%", models[-1])
    assert "version " in capsys.readouterr().out
