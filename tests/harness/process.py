"""The `recommender` command in a child process: a command run to its end, and `recommender
serve` on a free loopback port with its log in a file."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from tests.helpers import access_lines

START_TIMEOUT_S = 60.0
"""A server that has not printed its listening line by then has failed to start."""

STOP_TIMEOUT_S = 30.0
"""SIGTERM to exit: the server's grace period is 10 s."""


def run_cli(*args: str, cwd: Path, env: dict[str, str] | None = None
            ) -> subprocess.CompletedProcess[str]:
    """`python -m recommender ARGS` to its end (at most 60 s), its output captured."""
    return subprocess.run([sys.executable, "-m", "recommender", *args], cwd=cwd, text=True,
                          capture_output=True, timeout=60,
                          env={**os.environ, "NO_COLOR": "1", **(env or {})})


def serve_in_child(cwd: Path, *args: str) -> tuple[subprocess.Popen[str], int]:
    """`recommender serve --port 0 ARGS` in `cwd`, its output piped (the caller reads or
    stops it soon): the process and the port it listens on."""
    proc = subprocess.Popen([sys.executable, "-m", "recommender", "serve", "--port", "0", *args],
                            cwd=cwd, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    match = re.search(r"listening on .*:(\d+)", line)
    assert match, f"no listening line: {line!r} {proc.stderr.read() if proc.stderr else ''}"
    return proc, int(match.group(1))


@dataclass
class Server:
    proc: subprocess.Popen[bytes]
    port: int
    log: Path

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")

    def access_codes(self) -> Counter[tuple[str, str]]:
        """(method, status code) of every access-log line."""
        out: Counter[tuple[str, str]] = Counter()
        for entry in access_lines(self.log_text()):
            out[(entry["method"], entry["code"])] += 1
        return out

    def stop(self) -> int:
        """SIGTERM, then the exit status (SIGKILL and a failure if it does not exit)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
            raise AssertionError(f"server ignored SIGTERM for {STOP_TIMEOUT_S:.0f} s") from None

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=10)


def start_server(database_url: str, workdir: Path, name: str = "server") -> Server:
    """`recommender serve` on a free loopback port; its output goes to files (a pipe nobody
    reads would fill up with access-log lines and block the server)."""
    out_path, log_path = workdir / f"{name}.out", workdir / f"{name}.log"
    with out_path.open("wb") as out, log_path.open("wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "recommender", "serve", "--host", "127.0.0.1", "--port", "0",
             "--database-url", database_url, "--metrics-host", "127.0.0.1", "--metrics-port", "0"],
            cwd=workdir, stdin=subprocess.DEVNULL, stdout=out, stderr=err)
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        match = re.search(r"listening on .*:(\d+)", out_path.read_text(errors="replace"))
        if match:
            return Server(proc, int(match.group(1)), log_path)
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    if proc.poll() is None:
        proc.kill()
    proc.wait(timeout=10)
    raise AssertionError(f"server did not start (exit {proc.returncode}): "
                         f"{log_path.read_text(errors='replace')[-3000:]}")
