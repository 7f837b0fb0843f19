"""A replay job never stays "running" once its server is gone: SIGTERM stops it between steps and
marks it interrupted; after SIGKILL the next start on the same store marks it so. Either way the
runs stored so far are kept and counted, and the server replays again after the restart."""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from audit.records import to_jsonl
from tests.api.conftest import Server, start_server, stop
from tests.replay.runs import busy

HOURS = 2.0
DECISIONS = 600
OPTIONS = ("--replay-sync-limit", "1", "--replay-job-step", "10")


def _seeded(root: Path) -> tuple[Server, Any]:
    srv, proc = start_server(root, *OPTIONS)
    result = busy(HOURS)
    events = "".join(json.dumps(e.to_dict()) + "\n" for e in result.events).encode()
    assert srv.post("/v1/ingest/events", content=events).status_code == 200
    assert srv.post("/v1/ingest/records", content=to_jsonl(result.records[:DECISIONS]).encode()).status_code == 200
    return srv, proc


@pytest.fixture
def root(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path


def _start_job(srv: Server) -> dict[str, Any]:
    r = srv.post("/v1/replay", json={"all": True, "limit": DECISIONS})
    assert r.status_code == 202, r.text
    job: dict[str, Any] = r.json()
    assert (job["state"], job["total"]) == ("running", DECISIONS)
    return job


def _wait(check: Any, what: str) -> Any:
    deadline = time.monotonic() + 120  # waits for a job's thread, not a speed check
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError(f"still waiting for {what}")


def _after_restart(root: Path, job_id: str) -> tuple[dict[str, Any], Server, Any]:
    srv, proc = start_server(root, *OPTIONS)
    view = srv.get(f"/v1/replay/{job_id}").json()
    return view, srv, proc


def test_a_job_killed_with_sigkill_is_reported_interrupted_after_restart(root: Path) -> None:
    srv, proc = _seeded(root)
    job = _start_job(srv)
    proc.kill()  # SIGKILL: no shutdown code runs
    proc.wait()
    view, srv, proc = _after_restart(root, job["job"])
    try:
        assert view["state"] == "interrupted", view
        assert view["done"] < DECISIONS and view["total"] == DECISIONS
        assert view["error"] == (f"interrupted: the server running it stopped after {view['done']:,} of "
                                 f"{DECISIONS:,} decisions; their runs are kept, replay the rest in a new job")
        assert "runs" not in view  # only a finished job lists its runs
        # the restarted server replays again
        again = srv.post("/v1/replay", json={"decision_ids": [busy(HOURS).records[0].decision_id]})
        assert again.status_code == 200 and again.json()["summary"]["matches"] == 1
    finally:
        stop(proc)


def test_a_job_stopped_by_sigterm_marks_itself_interrupted_with_its_progress(root: Path) -> None:
    srv, proc = _seeded(root)
    job = _start_job(srv)
    started = _wait(lambda: (v := srv.get(f"/v1/replay/{job['job']}").json())["done"] >= 10 and v, "a first step")
    assert started["state"] == "running"
    proc.send_signal(signal.SIGTERM)
    # uvicorn shuts down gracefully (lifespan included), then exits by the signal it caught
    assert proc.wait(timeout=60) in (0, -signal.SIGTERM)
    view, srv, proc = _after_restart(root, job["job"])
    try:
        assert view["state"] == "interrupted", view
        assert started["done"] <= view["done"] < DECISIONS
        assert view["done"] % 10 == 0  # stopped between steps
        assert view["error"] == (f"interrupted: the server was shut down after {view['done']:,} of "
                                 f"{DECISIONS:,} decisions; their runs are kept, replay the rest in a new job")
        assert view["summary"]["decisions"] == view["done"] and view["summary"]["mismatches"] == 0
    finally:
        stop(proc)
