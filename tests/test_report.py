"""The HTML report: built from a real history, self-contained, and drawn by headless Chromium."""

from __future__ import annotations

import math
import os
import re
import shutil
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from recommender._proto.intelliscale.recommender.v1 import recommender_pb2 as pb
from recommender.cli import main as cli_main
from recommender.core.domain import ModelVersion, Outcome
from recommender.report import render_report
from recommender.report.charts import sample
from recommender.report.items import Item
from recommender.report.page import _poisson_at_least, collect
from recommender.report.ticks import nice_ticks, time_ticks
from recommender.store import SqlStore
from tests.harness.live import Live
from tests.harness.page import check_page
from tests.helpers import pool, record, request

NOW = datetime(2026, 11, 2, 12, 0, tzinfo=UTC)
EVIL = '<script>alert("x")</script>&co'


def build_history(live: Live) -> dict[str, int]:
    """Three actions; fitted executions, an OOM recorded by the runner, one walked up the
    ladder with NextAfterOom, one without an outcome; and two model versions."""
    rec = live.recommender
    n = 0
    for i in range(6):
        r = rec.Recommend(request("resize", declared=7500, execution=f"r{i}"))
        rec.RecordExecution(record(f"r{i}", "resize", peak=5000 + 300 * i,
                                   recommendation=r.recommendation_id))
        n += 1
    boom = rec.Recommend(request("train", pool("h100", "H100-80GB"), declared=9000,
                                 execution="t1"))
    rung = rec.NextAfterOom(pb.NextAfterOomRequest(recommendation_id=boom.recommendation_id,
                                                   observed_peak_memory_mib=9800))
    rec.RecordExecution(record("t1", "train", model="H100-80GB", profile=rung.profile.name,
                               peak=15000, recommendation=rung.recommendation_id))
    died = rec.Recommend(request("train", pool("h100", "H100-80GB"), declared=9000,
                                 execution="t2"))
    rec.RecordExecution(record("t2", "train", model="H100-80GB", profile=died.profile.name,
                               peak=9000, outcome=pb.OUTCOME_OOM,
                               recommendation=died.recommendation_id))
    rec.Recommend(request(EVIL, declared=2000))
    n += 4
    live.store.save_model_version(ModelVersion(
        version="mem-1", created_at=NOW - timedelta(days=3), kind="memory", promoted=True,
        serving=True, metrics={"test_oom_rate": 0.02}, reason="beats VPA",
        training_window_start=NOW - timedelta(days=10),
        training_window_end=NOW - timedelta(days=3)))
    live.store.save_model_version(ModelVersion(
        version="mem-2", created_at=NOW - timedelta(days=1), kind="memory", promoted=False,
        serving=False, metrics={"test_oom_rate": 0.05}, reason="worse than mem-1",
        training_window_start=NOW - timedelta(days=8),
        training_window_end=NOW - timedelta(days=1)))
    return {"recommendations": n}


def test_report_from_a_real_history(live: Live) -> None:
    counts = build_history(live)
    page = render_report(live.store, now=NOW)
    check_page(page)
    text = re.sub(r"<[^>]+>", " ", page)
    text = re.sub(r"\s+", " ", text)
    assert f"Recommendations {counts['recommendations']} 3 actions · 1 rung after an OOM" in text
    # First attempts with an outcome: 6 resize + 2 train; 2 of them ran out of memory.
    assert "OOM rate 25.0% 2 of 8 first attempts ran out of memory" in text
    slack = sorted((9856 - (5000 + 300 * i)) / 9856 for i in range(6))
    assert f"Median slack {(slack[2] + slack[3]) / 2 * 100:.0f}%" in text
    assert "Serving model mem-1" in text
    # The chances of an OOM the first attempts with an outcome stated, against what happened.
    items, _ = collect(live.store)
    stated = [i for i in items if i.attempt == 1 and i.outcome is not None and i.oom_chance > 0]
    assert len(stated) >= 4  # resize's runs after its first are sized from a distribution
    seen = sum(i.outcome is Outcome.OOM for i in stated)
    assert (f"Stated OOM risk {sum(i.oom_chance for i in stated):,.1f} OOMs expected from the "
            f"chances stated on {len(stated)} first attempts; {seen} seen") in text
    assert "generated 2026-11-02 12:00 UTC" in text
    # Overall, then one section per action.
    assert page.count('class="action"') == 3
    assert "Peak memory used against the recommended slice" in page
    assert "MiB per worker" in page and "time (UTC)" in page
    assert "relative slack = (slice" in page and "median" in page
    overall = re.search(r'<svg[^>]*aria-label="Peak memory used[^"]*".*?</svg>', page, re.S)
    assert overall
    crosses = overall.group(0).count('stroke="#d12a2a" stroke-width="2.2"')
    assert crosses == 2 + 1  # both OOMs, and the legend's
    for label in ("a100", "h100", "A100-40GB", "H100-80GB", "mem-1", "mem-2", "beats VPA"):
        assert label in page
    assert "serving</span>" in page
    sources = re.search(r'<svg[^>]*aria-label="Recommendations over time[^"]*".*?</svg>',
                        page, re.S)
    assert sources
    per_source = re.findall(r"UTC: (\d+) (\w+)</title>", sources.group(0))
    assert sum(int(n) for n, _ in per_source) == counts["recommendations"]
    assert {s for _, s in per_source} == {"prior", "history", "ladder"}
    assert "1g.10gb \u00d7 1" in page  # the most used slices, with their count
    # The user's strings are escaped wherever they appear.
    assert EVIL not in page and "<script>alert" not in page
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&amp;co" in page
    assert "This report covers" not in page  # nothing was left out


def test_report_for_one_action_and_the_cap(live: Live) -> None:
    build_history(live)
    page = render_report(live.store, action_id="train", now=NOW)
    check_page(page)
    assert "action <code>train</code>" in page and 'class="action"' not in page
    assert "resize" not in page
    capped = render_report(live.store, now=NOW, limit=4)
    check_page(capped)
    assert "covers the 4 most recent recommendations of 10 stored" in capped
    assert re.search(r"Recommendations</div><div class=\"value\">4<", capped)


def test_report_of_an_empty_database(store: SqlStore) -> None:
    page = render_report(store, now=NOW)
    check_page(page)
    assert "No recommendations yet" in page and "No learned model versions yet" in page
    assert "Serving model" in page


def test_ticks_and_sampling() -> None:
    assert nice_ticks(0, 9856) == [0, 2000, 4000, 6000, 8000, 10000]
    assert nice_ticks(0, 1) == [0, 0.2, 0.4, 0.6, 0.8, 1.0]
    t0 = datetime(2026, 1, 1, 10, 7, tzinfo=UTC)
    ticks, fmt = time_ticks(t0, t0 + timedelta(hours=5))
    assert ticks[0] == datetime(2026, 1, 1, 11, tzinfo=UTC) and fmt == "%H:%M"
    ticks, fmt = time_ticks(t0, t0 + timedelta(days=20))
    assert all(t.hour == 0 for t in ticks) and fmt == "%b %d"

    def item(k: int, outcome: Outcome | None) -> Item:
        return Item(t0 + timedelta(minutes=k), "a", "p", "A100-40GB", "1g.10gb", 1, 9856,
                    "history", "", 1, outcome, 100.0, None)

    items = [item(k, Outcome.OOM if k % 100 == 0 else Outcome.SUCCEEDED) for k in range(5000)]
    shown = sample(items, 1000)
    assert len(shown) <= 1000
    assert sum(1 for i in shown if i.outcome is Outcome.OOM) == 50  # every OOM kept
    assert [i.at for i in shown] == sorted(i.at for i in shown)


def test_report_command(live: Live, tmp_path: Path, capsys: pytest.CaptureFixture[str]
                        ) -> None:
    build_history(live)
    live.store.flush()  # the report reads from its own connection; rows are written behind
    url = live.store.engine.url.render_as_string(hide_password=False)
    out = tmp_path / "r.html"
    assert cli_main(["report", "--out", str(out), "--database-url", url,
                     "--action", "resize"]) == 0
    assert "r.html" in capsys.readouterr().out
    page = out.read_text()
    check_page(page)
    assert "action <code>resize</code>" in page
    assert not list(tmp_path.glob("*.tmp"))


def chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        if os.environ.get("RECOMMENDER_REQUIRE_CHROMIUM"):
            pytest.fail("RECOMMENDER_REQUIRE_CHROMIUM is set but chromium is not on PATH")
        pytest.skip("chromium not on PATH (apt-get install chromium); the report is not drawn")
    return exe


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_report_draws_in_headless_chromium(live: Live, tmp_path: Path) -> None:
    exe = chromium()
    build_history(live)
    path = tmp_path / "report.html"
    page = render_report(live.store, now=NOW)
    path.write_text(page, encoding="utf-8")
    charts = page.count('class="chart')
    common = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
              "--no-first-run", "--disable-background-networking", "--disable-component-update",
              "--disable-sync", "--disable-dev-shm-usage", f"--user-data-dir={tmp_path / 'ud'}",
              "--enable-logging=stderr", "--v=0"]

    dom = subprocess.run([*common, "--dump-dom", path.as_uri()], capture_output=True, text=True,
                         timeout=90)
    assert dom.returncode == 0, dom.stderr[-2000:]
    html_tag = re.search(r"<html[^>]*>", dom.stdout)
    assert html_tag, dom.stdout[:500]
    attrs = dict(re.findall(r'([\w-]+)="([^"]*)"', html_tag.group(0)))
    assert attrs.get("data-rendered") == "ok", (html_tag.group(0), dom.stderr[-2000:])
    assert "data-js-error" not in attrs
    # Every chart was laid out with a size and has something in it.
    assert int(attrs["data-svg-count"]) == charts > 10
    assert int(attrs["data-svg-drawn"]) == charts
    assert dom.stdout.count("<svg") == charts
    assert "Uncaught" not in dom.stderr and "Refused to" not in dom.stderr

    png = tmp_path / "report.png"
    shot = subprocess.run([*common, f"--screenshot={png}", "--window-size=1280,2000",
                           path.as_uri()], capture_output=True, text=True, timeout=90)
    assert shot.returncode == 0, shot.stderr[-2000:]
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(data) > 10_000  # a blank page of that size compresses to far less


def test_the_stated_risk_turns_red_only_past_what_chance_allows() -> None:
    assert _poisson_at_least(0, 3.0) == 1.0
    assert _poisson_at_least(1, 3.0) == pytest.approx(1 - math.exp(-3.0))
    assert _poisson_at_least(3, 2.0) == pytest.approx(1 - math.exp(-2.0) * (1 + 2 + 2))
    assert _poisson_at_least(6, 5.0) > 0.01 > _poisson_at_least(13, 5.0)
