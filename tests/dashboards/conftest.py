"""A real audit API process on loopback, with an embedded store seeded from the test factory.

One server for the whole session (starting chDB costs seconds); tests only read from it, so
sharing is safe. The seeding goes through ``POST /v1/ingest/records`` exactly as a producer would.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.dashboards import factory

REPO = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_until_up(url: str, proc: subprocess.Popen[bytes], log: Path, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args!r} exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            if httpx.get(url, timeout=2.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.05)  # a refused connection costs nothing: poll often, start sooner
    raise RuntimeError(f"nothing answered at {url} within {timeout_s:.0f} s:\n{log.read_text()[-3000:]}")


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def start_api(data_dir: Path, log: Path, auth: tuple[str, ...] = ("--insecure-local",)) -> tuple[str, subprocess.Popen[bytes]]:
    """``claimtrail serve`` on a free loopback port; ``auth`` is ``--insecure-local`` or ``--tokens FILE``."""
    port = free_port()
    cmd = [sys.executable, "-m", "audit.cli.main", "serve", "--create", "--dsn", f"chdb://{data_dir}/db",
           "--host", "127.0.0.1", "--port", str(port), *auth]
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=log.open("wb"), stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until_up(f"{base}/readyz", proc, log)
    except Exception:
        stop(proc)
        raise
    return base, proc


def post_jsonl(base: str, kind: str, lines: list[dict], token: str = "") -> None:
    body = "".join(json.dumps(line, sort_keys=True) + "\n" for line in lines).encode()
    headers = {"Content-Type": "application/x-ndjson", **({"Authorization": f"Bearer {token}"} if token else {})}
    r = httpx.post(f"{base}/v1/ingest/{kind}", content=body, headers=headers, timeout=60)
    assert r.status_code < 300, r.text
    assert r.json().get("quarantined", 0) == 0, r.text


def seed(base: str, token: str = "") -> None:
    post_jsonl(base, "events", [e.to_dict() for e in factory.world_events()], token)
    post_jsonl(base, "records", [r.to_dict() for r in factory.records()], token)


@pytest.fixture(scope="session")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Base URL of a running, seeded API server."""
    pytest.importorskip("audit.cli.cmd_serve", reason="`claimtrail serve` is not in this tree yet")
    root = tmp_path_factory.mktemp("api")
    base, proc = start_api(root, root / "serve.log")
    try:
        seed(base)
        yield base
    finally:
        stop(proc)


@pytest.fixture
def api_env(api: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """Point the dashboards at the seeded server for one test."""
    monkeypatch.setenv("CLAIMTRAIL_API", api)
    monkeypatch.delenv("CLAIMTRAIL_TOKEN", raising=False)
    return api


os.environ.setdefault("STREAMLIT_BROWSER_GATHER_USAGE_STATS", "false")
