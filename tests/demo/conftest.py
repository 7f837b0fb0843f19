"""A running ``claimtrail demo`` on loopback: the product exactly as a newcomer starts it.

``start_demo`` runs the real command (API, simulation over HTTP, dashboard, replay) on free
ports and a temporary data directory, and returns once it prints "Serving until Ctrl-C.";
the URLs are read from its own output, as a user reads them.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SERVING = "Serving until Ctrl-C."


@dataclass
class Demo:
    proc: subprocess.Popen[str]
    data_dir: Path
    api: str = ""
    dashboard: str = ""
    output: list[str] = field(default_factory=list)

    def stop(self, signum: int = signal.SIGTERM, timeout_s: float = 90.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signum)
        try:
            return self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.kill_group()
            raise

    def kill_group(self) -> None:
        """Whatever the demo left behind (its own process group: the servers too)."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()


def start_demo(data_dir: Path, hours: float = 2.0, timeout_s: float = 300.0) -> Demo:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)}
    env.pop("CLAIMTRAIL_API", None)
    env.pop("CLAIMTRAIL_TOKEN", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "audit.cli.main", "demo", "--hours", str(hours), "--data-dir", str(data_dir),
         "--api-port", "0", "--dashboard-port", "0"],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1,
        start_new_session=True)  # a group of its own, so a failed test can still clean up every server
    demo = Demo(proc=proc, data_dir=data_dir)
    ready = threading.Event()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            demo.output.append(line)
            if m := re.match(r"API\s+(http://127\.0\.0\.1:\d+)/docs", line):
                demo.api = m.group(1)
            if m := re.match(r"Dashboard\s+(http://127\.0\.0\.1:\d+)", line):
                demo.dashboard = m.group(1)
            if line.strip() == SERVING:
                ready.set()
        ready.set()

    threading.Thread(target=read, daemon=True).start()
    if not ready.wait(timeout_s) or proc.poll() is not None or not (demo.api and demo.dashboard):
        demo.kill_group()
        raise RuntimeError("the demo did not start:\n" + "".join(demo.output)[-4000:])
    return demo


@pytest.fixture(scope="session")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Demo]:
    """One running demo for the tests that only read from it."""
    running = start_demo(tmp_path_factory.mktemp("demo") / "data")
    try:
        yield running
    finally:
        try:
            running.stop()
        finally:
            running.kill_group()
