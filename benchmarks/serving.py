"""Waiting for a ``claimtrail serve`` that a benchmark started: the one place that polls readiness.

A benchmark that starts the real server in a process of its own must not time anything before the
server answers, and must say why when it never does: its log's tail, not a connection error.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import httpx


def wait_ready(proc: subprocess.Popen[bytes], base: str, log: Path, timeout_s: float) -> None:
    """Return once ``base``/readyz answers 200; raise with the log's tail if the server exits or
    ``timeout_s`` passes first."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if httpx.get(f"{base}/readyz", timeout=5).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"serve did not start: {log.read_text()[-2000:]}")
        time.sleep(0.5)
