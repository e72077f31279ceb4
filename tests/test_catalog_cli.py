"""`recommender catalog` and `recommender catalog check FILE`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from recommender.cli import main


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "RECOMMENDER_CATALOG_OVERRIDE"}
    return subprocess.run([sys.executable, "-m", "recommender", *args], cwd=cwd, text=True,
                          capture_output=True, timeout=60, env=env)


def test_catalog_lists_models_and_profiles(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["catalog"]) == 0
    out = capsys.readouterr().out
    for model_id in ("A800-80GB", "H800-94GB", "H20-96GB", "RTX-PRO-5000-48GB", "GB200-186GB"):
        assert f"\n{model_id}: " in f"\n{out}"
    assert "NVIDIA GH200 144G HBM3e" in out
    row = next(line for line in out.splitlines() if line.split()[:2] == ["3g.40gb", "3g.39gb"])
    assert "40,192" in row and "{0,4}:4" in row


def test_catalog_json_is_the_catalog(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["catalog", "--json"]) == 0
    models = {m["id"]: m for m in json.loads(capsys.readouterr().out)}
    pro = models["RTX-PRO-5000-48GB"]
    assert pro["placements_known"] and pro["placement_units"] == 6
    one = next(p for p in pro["profiles"] if p["name"] == "1g.24gb")
    assert one["placements"] == {"starts": [0, 3], "size": 3} and one["memory_estimated"]
    gb200 = {p["name"]: p for p in models["GB200-186GB"]["profiles"]}
    assert (gb200["1g.23gb"]["memory_mib"], gb200["1g.23gb"]["aliases"]) == (22528, ["1g.24gb"])
    assert all(m["sources"] for m in models.values())


def test_catalog_model_filter_and_override(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "o.json"
    path.write_text(json.dumps({"gpus": [{"id": "H100-80GB", "profiles": [
        {"name": "7g.80gb", "aliases": ["7g.79gb"], "memory_mib": 81000}]}]}))
    assert main(["catalog", "--json", "--model", "NVIDIA H100 80GB HBM3",
                 "--catalog-override", str(path)]) == 0
    (model,) = json.loads(capsys.readouterr().out)
    seven = next(p for p in model["profiles"] if p["name"] == "7g.80gb")
    assert model["overridden"] and seven["aliases"] == ["7g.79gb"]
    assert (seven["memory_mib"], seven["memory_estimated"]) == (81000, False)
    assert main(["catalog", "--model", "NVIDIA L40S"]) == 2
    assert "unknown GPU model 'NVIDIA L40S'" in capsys.readouterr().err


def test_check_accepts_a_good_override(tmp_path: Path) -> None:
    path = tmp_path / "o.json"
    path.write_text(json.dumps({"gpus": [
        {"id": "A100-80GB", "profiles": [{"name": "4g.40gb", "aliases": ["4g.39gb"]}]},
        {"id": "X1-16GB", "compute_slices": 1, "memory_slices": 1, "placement_units": 1,
         "profiles": [{"name": "1g.16gb", "compute_slices": 1, "memory_slices": 1,
                       "memory_mib": 15872, "max_count": 1,
                       "placements": {"starts": [0], "size": 1}}]}]}))
    out = run("catalog", "check", str(path), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"{path}: ok; adds X1-16GB; changes A100-80GB"


@pytest.mark.parametrize("content", [
    '{"gpus": [{"id": "A100-80GB", "profiles": [{"name": "3g.40gb", "aliases": ["4g.40gb"]}]}]}',
    "{not json",
])
def test_check_refuses_a_bad_override_with_the_servers_message(
    tmp_path: Path, content: str
) -> None:
    path = tmp_path / "o.json"
    path.write_text(content)
    checked = run("catalog", "check", str(path), cwd=tmp_path)
    served = run("serve", "--log-format", "text", "--port", "0", "--catalog-override", str(path),
                 cwd=tmp_path)  # the same words; by default serve says them in a JSON object
    assert (checked.returncode, served.returncode) == (2, 2)
    assert checked.stderr == served.stderr
    assert checked.stderr.startswith(f"catalog error: {path}")
    assert not (tmp_path / "recommender.db").exists()


def test_check_a_missing_file(tmp_path: Path) -> None:
    out = run("catalog", "check", str(tmp_path / "nope.json"), cwd=tmp_path)
    assert out.returncode == 2 and "cannot read the catalog override" in out.stderr
