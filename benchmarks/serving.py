"""Starting a ``claimtrail serve`` for a benchmark and waiting for it: the one place that does both.

A benchmark that starts the real server in a process of its own must not time anything before the
server answers, and must say why when it never does: its log's tail, not a connection error. The
server ends with the benchmark's process however that ends (``benchmarks.lifetime``).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import httpx

from benchmarks.lifetime import ending_with_this_process

REPO = Path(__file__).resolve().parents[1]


def start_serve(args: Sequence[str], log: Path | None, code: Path = REPO) -> subprocess.Popen[bytes]:
    """``claimtrail serve`` with ``args``, run from the checkout ``code``, its output in ``log`` (none
    when None). It is not ready yet: ``wait_ready`` waits for it."""
    with (log if log is not None else Path(os.devnull)).open("wb") as out:  # the child keeps its own copy
        return subprocess.Popen([sys.executable, "-m", "audit.cli.main", "serve", *args], cwd=code,
                                env={**os.environ, "PYTHONPATH": str(code)}, stdout=out, stderr=subprocess.STDOUT,
                                preexec_fn=ending_with_this_process())


def wait_ready(proc: subprocess.Popen[bytes], base: str, log: Path, timeout_s: float) -> None:
    """Return once ``base``/readyz answers 200 and the server's index of records by id holds its
    store (``wait_id_index``); raise with the log's tail if the server exits or ``timeout_s``
    passes first."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if httpx.get(f"{base}/readyz", timeout=5).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"serve did not start: {log.read_text()[-2000:]}")
        time.sleep(0.5)
    wait_id_index(proc, base, log, 1800)


def wait_id_index(proc: subprocess.Popen[bytes], base: str, log: Path, timeout_s: float) -> None:
    """Return once the server has copied its store into its index of records by id
    (``audit.store.id_index``), or has no such index. The copy is made once per store, in the
    background; a benchmark times the server as it runs afterwards, not beside the copy."""
    deadline = time.monotonic() + timeout_s
    while True:
        state = metric(base, 'claimtrail_store{counter="id_index_backfilled"}')
        if state is None or state == 1.0:
            return
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"serve did not fill its id index: {log.read_text()[-2000:]}")
        time.sleep(1.0)


def metric(base: str, series: str) -> float | None:
    """The value of one series of the server's /metrics, None when it has none of that name."""
    prefix = f"{series} "
    text = httpx.get(f"{base}/metrics", timeout=60).text
    return next((float(x[len(prefix):]) for x in text.splitlines() if x.startswith(prefix)), None)
