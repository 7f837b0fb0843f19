"""Jobs a stopped server left ``running`` are reported and stored as interrupted, with their progress."""

from __future__ import annotations

from audit.api.replay_jobs import STALE_AFTER_S, JobBoard
from audit.store.queries import AuditStore, ReplayJob, ReplayRun

NOW = "2026-05-01T12:00:00.000Z"


def _job(store: AuditStore, job_id: str, state: str, updated: str, runs: int) -> None:
    store.write_replay_job(ReplayJob(job_id, 3, "team-a", 5, state, "", "2026-05-01T11:00:00.000Z", updated))
    store.write_replay_runs([ReplayRun(f"decision-{n}", "e", "p", True, "", time=updated, job_id=job_id)
                             for n in range(runs)])


def test_a_job_left_running_is_marked_interrupted_with_its_progress_on_start(store: AuditStore) -> None:
    _job(store, "left-running", "running", NOW, runs=2)
    _job(store, "finished", "done", NOW, runs=5)
    board = JobBoard(store, chunk=2)
    # an embedded store has one server: whatever is still running was left by a dead one
    assert board.recover() == ["left-running"]
    view = board.view("left-running", "team-a")
    assert view is not None
    assert (view["state"], view["done"], view["total"]) == ("interrupted", 2, 5)
    assert view["error"] == ("interrupted: the server running it stopped after 2 of 5 decisions; their runs are "
                             "kept, replay the rest in a new job")
    assert store.running_replay_jobs() == []
    assert board.view("finished", None)["state"] == "done"  # type: ignore[index]
    assert board.recover() == []  # nothing left to mark


def test_a_job_without_progress_for_too_long_is_reported_interrupted(store: AuditStore) -> None:
    _job(store, "stale", "running", "2020-01-01T00:00:00.000Z", runs=1)
    view = JobBoard(store, chunk=2).view("stale", None)
    assert view is not None
    assert (view["state"], view["done"]) == ("interrupted", 1)
    assert view["error"] == (f"interrupted: no progress since 2020-01-01T00:00:00.000Z (over {STALE_AFTER_S} s); "
                             "the server running it stopped; its runs are kept, replay the rest in a new job")


def test_stopping_marks_a_job_whose_step_outlasts_the_wait_and_only_this_servers_jobs(store: AuditStore) -> None:
    import threading
    from typing import Any

    from audit.api.replay_jobs import replay_and_store

    release = threading.Event()

    def slow(db: Any, ids: list[str], job_id: str) -> list[dict[str, Any]]:
        release.wait(60)
        return replay_and_store(db, ids, job_id)

    _job(store, "another-servers", "running", "2099-01-01T00:00:00.000Z", runs=0)
    board = JobBoard(store, chunk=1, runner=slow)
    mine = board.start(["decision-a", "decision-b"], None)["job"]
    board.stop(wait_s=0.2)
    view = board.view(mine, None)
    assert view is not None
    assert (view["state"], view["done"]) == ("interrupted", 0)
    assert view["error"] == ("interrupted: the server was shut down after 0 of 2 decisions; their runs are kept, "
                             "replay the rest in a new job")
    assert board.view("another-servers", None)["state"] == "running"  # type: ignore[index]
    release.set()
    board._threads[mine].join(60)
