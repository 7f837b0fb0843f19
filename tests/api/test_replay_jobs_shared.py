"""A replay job is reported by every API server over the store, not only by the one running it.

The API runs as several replicas behind one service, so a job's progress poll rarely reaches the
replica that started it. Two boards over one store stand for two replicas: each has only the
store in common.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from audit.api.replay_jobs import JobBoard, replay_and_store
from audit.store import migrations
from audit.store.queries import AuditStore

IDS = ["decision-c", "decision-a", "decision-b"]


def _until(check: Any, what: str) -> Any:
    deadline = time.monotonic() + 60  # a wait for the job's thread, not a speed check
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.02)
    raise AssertionError(f"still waiting for {what}")


def test_a_job_started_on_one_server_is_reported_by_another(store: AuditStore) -> None:
    started = JobBoard(store, chunk=2).start(IDS, "team-a")
    assert (started["state"], started["total"], started["done"]) == ("running", 3, 0)
    other = JobBoard(store, chunk=2)
    done = _until(lambda: (v := other.view(started["job"], None)) and v["state"] == "done" and v, "the job to finish")
    # none of these decisions is in the store: each run says so, line by line
    assert done["runs"] == [
        {"decision_id": d, "engine_version": "", "policy_digest": "", "match": False, "cause": "missing_events",
         "diff": [f"decision {d}: not found"], "observed": False}
        for d in sorted(IDS)
    ]
    assert done["summary"] == {"decisions": 3, "matches": 0, "mismatches": 3, "mismatch_causes": {"missing_events": 3}}
    assert (done["total"], done["done"], done["started"]) == (3, 3, started["started"])
    assert other.view(started["job"], "team-a") is not None
    assert other.view(started["job"], "team-b") is None
    assert other.view("no-such-job", None) is None


def test_progress_is_visible_while_the_job_runs(store: AuditStore) -> None:
    release = threading.Event()

    def runner(db: Any, ids: list[str], job_id: str) -> list[dict[str, Any]]:
        if ids != IDS[:2]:
            release.wait(60)
        return replay_and_store(db, ids, job_id)

    job = JobBoard(store, chunk=2, runner=runner).start(IDS, None)["job"]
    other = JobBoard(store, chunk=2)
    halfway = _until(lambda: (v := other.view(job, None)) and v["done"] == 2 and v, "the first chunk")
    assert halfway["state"] == "running" and "runs" not in halfway
    # one chunk done: the job's state moved once, and no further while the next chunk is held
    _until(lambda: store.replay_job(job).revision == 1, "the first chunk's new revision")  # type: ignore[union-attr]
    assert other.view(job, "team-a") is None  # an admin's job: admins only
    release.set()
    assert _until(lambda: (v := other.view(job, None)) and v["state"] == "done" and v, "the job")["done"] == 3
    assert store.replay_job(job).revision == 2  # type: ignore[union-attr]


def test_a_failed_job_reports_its_error_everywhere(store: AuditStore) -> None:
    def runner(db: Any, ids: list[str], job_id: str) -> list[dict[str, Any]]:
        raise RuntimeError("the history of cluster gpu-east has a gap at seq 1042")

    job = JobBoard(store, chunk=2, runner=runner).start(IDS, None)["job"]
    failed = _until(lambda: (v := JobBoard(store, chunk=2).view(job, None)) and v["state"] == "failed" and v, "failure")
    assert failed["error"] == "RuntimeError: the history of cluster gpu-east has a gap at seq 1042"
    assert failed["done"] == 0 and "runs" not in failed


def test_replay_runs_of_an_older_store_gain_the_job_columns_and_keep_their_rows(tmp_path: Path) -> None:
    with AuditStore.open(f"chdb://{tmp_path}/db") as store:
        # a store from before version 7: its replay_runs had none of the new columns
        store.client.command("DELETE FROM schema_migrations WHERE version >= 7")
        store.client.command("DROP TABLE replay_jobs")
        store.client.command("ALTER TABLE replay_runs DROP INDEX idx_job_id")
        store.client.command("ALTER TABLE replay_runs DROP COLUMN job_id, DROP COLUMN observed, DROP COLUMN diff_lines")
        store.client.insert("replay_runs", [[0, "old-run", "engine/1", "pd", True, "", ""]],
                            column_names=["time", "decision_id", "engine_version", "policy_digest", "match", "cause", "diff"])
        assert migrations.applied_version(store.client, store.target.database) == 6
    with AuditStore.open(f"chdb://{tmp_path}/db") as store:
        rows = store.client.query("SELECT decision_id, job_id, observed, diff_lines FROM replay_runs").result_rows
        assert rows == [("old-run", "", False, [])]
        indexes = store.client.query("SELECT name FROM system.data_skipping_indices WHERE table = 'replay_runs'")
        assert [r[0] for r in indexes.result_rows] == ["idx_job_id"]
        assert store.replay_job("anything") is None
