"""Replay runs for the API: synchronous for a few decisions, a background job for many.

Each replayed decision's result is written to the store's ``replay_runs`` table (which the
``/metrics`` replay counters and the dashboards read). A job's state lives in the store too
(``replay_jobs``) and its runs carry its id, so every API server behind the service can report
on a job, not only the one running it, and a job's results outlive a restart. ``updated`` moves
with every chunk of decisions replayed; a job whose server stopped mid-run stays ``running`` with
the runs it stored and an ``updated`` that no longer moves (replaying the rest starts a new job).
A job is visible to the tenant that started it, and to admins.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import uuid
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from audit.replay import replay_decisions
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


def replay_and_store(store: Any, ids: list[str], job_id: str = "") -> list[dict[str, Any]]:
    """Replay ``ids`` against the store's history and record every result in ``replay_runs``."""
    runs = replay_decisions(store, ids)
    now = _now()
    store.write_replay_runs([
        ReplayRun(decision_id=r["decision_id"], engine_version=str(r.get("engine_version", "")),
                  policy_digest=str(r.get("policy_digest", "")), match=bool(r.get("match")), cause=str(r.get("cause", "")),
                  time=now, job_id=job_id, observed=bool(r.get("observed")), diff_lines=tuple(r.get("diff", [])))
        for r in runs])
    return runs


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
                 runner: Callable[[Any, list[str], str], list[dict[str, Any]]] = replay_and_store) -> None:
        self._store = store
        self.chunk = chunk  # decisions per replay call, and the most a request replays synchronously
        self._runner = runner

    def start(self, ids: list[str], tenant: str | None) -> dict[str, Any]:
        """Record the job, start it on a thread of this server; returns its first view."""
        now = _now()
        job = ReplayJob(job_id=str(uuid.uuid4()), revision=0, tenant=tenant or "", total=len(ids), state="running",
                        started=now, updated=now)
        self._store.write_replay_job(job)
        threading.Thread(target=self._run, args=(job, ids), name=f"replay-{job.job_id[:8]}", daemon=True).start()
        return job_view(job, [])

    def view(self, job_id: str, scope: str | None) -> dict[str, Any] | None:
        """The job's view if the caller may see it: admins see every job, a tenant only its own."""
        job = self._store.replay_job(job_id)
        if job is None or (scope is not None and job.tenant != scope):
            return None
        return job_view(job, [run_view(r) for r in self._store.replay_job_runs(job_id)])

    def _run(self, job: ReplayJob, ids: list[str]) -> None:
        try:
            for start in range(0, len(ids), self.chunk):
                self._runner(self._store, ids[start:start + self.chunk], job.job_id)
                if start + self.chunk < len(ids):
                    # a new revision per chunk moves ``updated``: a job whose server stopped shows it
                    job = dataclasses.replace(job, revision=job.revision + 1, updated=_now())
                    self._store.write_replay_job(job)
            final = dataclasses.replace(job, revision=job.revision + 1, state="done", updated=_now())
        except Exception as exc:  # noqa: BLE001 - a failed job reports its error instead of dying silently
            log.exception("replay job failed", extra={"job": job.job_id})
            final = dataclasses.replace(job, revision=job.revision + 1, state="failed",
                                        error=f"{type(exc).__name__}: {str(exc)[:300]}", updated=_now())
        try:
            self._store.write_replay_job(final)
        except Exception:  # noqa: BLE001 - the store is gone; the job stays "running" there, and the log says why
            log.exception("replay job state not stored", extra={"job": job.job_id, "state": final.state})
