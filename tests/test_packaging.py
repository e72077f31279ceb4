"""Packaging: what a running server needs, and what git must never pick up."""

from __future__ import annotations

import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]


def names(requirements: list[str]) -> set[str]:
    return {Requirement(r).name.lower().replace("_", "-") for r in requirements}


def test_grpcio_tools_builds_but_never_runs() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "grpcio-tools" in names(project["build-system"]["requires"])
    runtime = names(project["project"]["dependencies"])
    assert "grpcio-tools" not in runtime
    assert {"grpcio", "protobuf", "prometheus-client", "opentelemetry-sdk"} <= runtime


@pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(),
                    reason="not a git checkout")
def test_sqlite_side_files_are_ignored() -> None:
    paths = ["recommender.db", "recommender.db-wal", "recommender.db-shm",
             "recommender.db-journal", "sub/dir/other.db-wal"]
    out = subprocess.run(["git", "check-ignore", "--no-index", *paths], cwd=ROOT,
                         capture_output=True, text=True, check=False)
    assert sorted(out.stdout.split()) == sorted(paths)
