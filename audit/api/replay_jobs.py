"""Replay runs for the API: synchronous for a few decisions, a background job for many.

Each replayed decision's result is written to the store's ``replay_runs`` table (which the
``/metrics`` replay counters and the dashboards read). A job's state lives in the store too
(``replay_jobs``) and its runs carry its id, so every API server behind the service can report
on a job, not only the one running it, and a job's results outlive a restart. A job reads its
decisions in batches, puts them in history order and replays them with one pass over each stretch
of history (``audit.replay.batch``), storing the runs and a new revision (``updated``) after every
step. A job never stays ``running`` once its server is gone: on SIGTERM the server stops its jobs
between steps and marks them ``interrupted``; after a crash (SIGKILL) the next start of a server on
the same embedded store marks them so (on a shared ClickHouse a starting server marks only jobs
whose ``updated`` is older than ``STALE_AFTER_S``, since other servers may be running theirs, and
every server reports such a stale job as interrupted); the runs stored so far stay, and ``done``
counts them.
A job is visible to the tenant that started it, and to admins.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

from audit.replay import StoreHistory
from audit.replay.service import verify_ids, verify_in_steps
from audit.store.queries import ReplayJob, ReplayRun
from audit.timestamps import format_utc

log = logging.getLogger("claimtrail.api")


def _now() -> str:
    # to the millisecond, as the store keeps it: a job's first view and its stored state agree
    return format_utc(datetime.now(UTC))


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    causes = Counter(str(r.get("cause", "")) for r in runs if not r.get("match"))
    matches = sum(1 for r in runs if r.get("match"))
    return {"decisions": len(runs), "matches": matches, "mismatches": len(runs) - matches,
            "mismatch_causes": dict(sorted(causes.items()))}


STALE_AFTER_S = 300  # a running job not updated for this long has lost its server
STOP_WAIT_S = 20.0  # how long a stopping server waits for its jobs to finish their current step


def _ms(iso: str) -> int:
    from audit.timestamps import parse_time_ms

    return parse_time_ms(iso)


def replay_and_store(store: Any, ids: list[str], job_id: str = "") -> list[dict[str, Any]]:
    """Replay ``ids`` against the store's history and record every result in ``replay_runs``."""
    results = verify_ids(StoreHistory(store), ids)
    now = _now()
    store.write_replay_runs([ReplayRun.of(r, now, job_id) for r in results])
    return [r.to_dict() for r in results]


def run_view(run: ReplayRun) -> dict[str, Any]:
    """A stored run as the synchronous replay answer shows it."""
    return {"decision_id": run.decision_id, "engine_version": run.engine_version, "policy_digest": run.policy_digest,
            "match": run.match, "cause": run.cause, "diff": list(run.diff_lines), "observed": run.observed}


def job_view(job: ReplayJob, runs: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {"job": job.job_id, "state": job.state, "total": job.total, "done": len(runs),
                           "summary": summarize(runs), "started": job.started, "updated": job.updated}
    if job.state == "done":
        out["runs"] = runs
    if job.error:
        out["error"] = job.error
    return out


class JobBoard:
    """Starts background replay jobs on this server, and reports on any job in the store."""

    def __init__(self, store: Any, chunk: int,
                 runner: Callable[[Any, list[str], str], list[dict[str, Any]]] | None = None,
                 step: int | None = None) -> None:
        self._store = store
        self.chunk = chunk  # the most a request replays synchronously
        self.step = step or chunk  # decisions replayed between two progress updates
        self._runner = runner  # tests: replay each step of ids with this instead
        self._stop = threading.Event()
        self._threads: dict[str, threading.Thread] = {}  # this server's jobs, by id

    def start(self, ids: list[str], tenant: str | None) -> dict[str, Any]:
        """Record the job, start it on a thread of this server; returns its first view."""
        now = _now()
        job = ReplayJob(job_id=str(uuid.uuid4()), revision=0, tenant=tenant or "", total=len(ids), state="running",
                        started=now, updated=now)
        self._store.write_replay_job(job)
        thread = threading.Thread(target=self._run, args=(job, ids), name=f"replay-{job.job_id[:8]}", daemon=True)
        self._threads = {k: t for k, t in self._threads.items() if t.is_alive()}
        self._threads[job.job_id] = thread
        thread.start()
        return job_view(job, [])

    def view(self, job_id: str, scope: str | None) -> dict[str, Any] | None:
        """The job's view if the caller may see it: admins see every job, a tenant only its own."""
        job = self._store.replay_job(job_id)
        if job is None or (scope is not None and job.tenant != scope):
            return None
        if job.state == "running" and _ms(_now()) - _ms(job.updated) > STALE_AFTER_S * 1000:
            # its server stopped without saying so and none has started since: say what is known
            job = dataclasses.replace(job, state="interrupted", error=(
                f"interrupted: no progress since {job.updated} (over {STALE_AFTER_S} s); the server running it "
                "stopped; its runs are kept, replay the rest in a new job"))
        return job_view(job, [run_view(r) for r in self._store.replay_job_runs(job_id)])

    # ---- surviving restarts ------------------------------------------------------------------

    def recover(self, now_ms: int | None = None) -> list[str]:
        """Mark jobs whose server is gone as interrupted; returns their ids. On an embedded store
        this process is the only server, so every job still ``running`` was left by a dead one."""
        embedded = getattr(getattr(self._store, "target", None), "embedded_path", None) is not None
        now_ms = _ms(_now()) if now_ms is None else now_ms
        marked = []
        for job in self._store.running_replay_jobs():
            if embedded or now_ms - _ms(job.updated) > STALE_AFTER_S * 1000:
                self._interrupt(job, "the server running it stopped")
                marked.append(job.job_id)
        return marked

    def stop(self, wait_s: float = STOP_WAIT_S) -> None:
        """Stop this server's jobs after their current step; each marks itself interrupted."""
        self._stop.set()
        deadline = time.monotonic() + wait_s
        for thread in self._threads.values():
            thread.join(max(0.0, deadline - time.monotonic()))
        for job_id, thread in self._threads.items():
            job = self._store.replay_job(job_id) if thread.is_alive() else None
            if job is not None and job.state == "running":
                # a step outlasted the wait: mark the job here, before the store closes
                self._interrupt(job, "the server was shut down")

    def _interrupt(self, job: ReplayJob, why: str) -> None:
        done = self._store.replay_job_done(job.job_id)
        self._store.write_replay_job(dataclasses.replace(
            job, revision=job.revision + 1, state="interrupted", updated=_now(),
            error=f"interrupted: {why} after {done:,} of {job.total:,} decisions; their runs are kept, "
                  "replay the rest in a new job"))

    # ---- running -----------------------------------------------------------------------------

    def _steps(self, ids: list[str], job_id: str) -> Iterator[int]:
        """Replay and store one step at a time, in history order (decisions not found last);
        yields how many decisions each step replayed."""
        if self._runner is not None:
            for start in range(0, len(ids), self.step):
                yield len(self._runner(self._store, ids[start:start + self.step], job_id))
            return
        for results in verify_in_steps(StoreHistory(self._store), ids, self.step):
            now = _now()
            self._store.write_replay_runs([ReplayRun.of(r, now, job_id) for r in results])
            yield len(results)

    def _run(self, job: ReplayJob, ids: list[str]) -> None:
        done = 0
        try:
            for replayed in self._steps(ids, job.job_id):
                done += replayed
                if self._stop.is_set() and done < len(ids):
                    self._interrupt(job, "the server was shut down")
                    return
                if done < len(ids):
                    # a new revision per step moves ``updated``: the job's server is alive
                    job = dataclasses.replace(job, revision=job.revision + 1, updated=_now())
                    self._store.write_replay_job(job)
            final = dataclasses.replace(job, revision=job.revision + 1, state="done", updated=_now())
        except Exception as exc:  # noqa: BLE001 - a failed job reports its error instead of dying silently
            log.exception("replay job failed", extra={"job": job.job_id})
            final = dataclasses.replace(job, revision=job.revision + 1, state="failed",
                                        error=f"{type(exc).__name__}: {str(exc)[:300]}", updated=_now())
        try:
            self._store.write_replay_job(final)
        except Exception:  # noqa: BLE001 - the store is gone; the next start marks the job interrupted
            log.exception("replay job state not stored", extra={"job": job.job_id, "state": final.state})
