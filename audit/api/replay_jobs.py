"""Replay runs for the API: synchronous for a few decisions, a background job for many.

Each replayed decision's result is written to the store's ``replay_runs`` table (which the
``/metrics`` replay counters and the dashboards read). Jobs live in this process only (a restart
forgets them; the stored runs remain) and are visible to the tenant that started them.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections import Counter, OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from audit.replay import replay_decisions
from audit.store.queries import ReplayRun

log = logging.getLogger("claimtrail.api")

KEPT_JOBS = 100


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    causes = Counter(str(r.get("cause", "")) for r in runs if not r.get("match"))
    matches = sum(1 for r in runs if r.get("match"))
    return {"decisions": len(runs), "matches": matches, "mismatches": len(runs) - matches,
            "mismatch_causes": dict(sorted(causes.items()))}


def replay_and_store(store: Any, ids: list[str]) -> list[dict[str, Any]]:
    """Replay ``ids`` against the store's history and record every result in ``replay_runs``."""
    runs = replay_decisions(store, ids)
    store.write_replay_runs([ReplayRun(decision_id=r["decision_id"], engine_version=str(r.get("engine_version", "")),
                                       policy_digest=str(r.get("policy_digest", "")), match=bool(r.get("match")),
                                       cause=str(r.get("cause", "")), diff="\n".join(r.get("diff", [])), time=_now())
                             for r in runs])
    return runs


@dataclass
class Job:
    id: str
    tenant: str | None  # who may see it; None: admins only
    total: int
    state: str = "running"
    runs: list[dict[str, Any]] = field(default_factory=list)
    error: str = ""

    def view(self) -> dict[str, Any]:
        out: dict[str, Any] = {"job": self.id, "state": self.state, "total": self.total, "done": len(self.runs),
                               "summary": summarize(self.runs)}
        if self.state == "done":
            out["runs"] = self.runs
        if self.error:
            out["error"] = self.error
        return out


class JobBoard:
    """Background replay jobs of this server process."""

    def __init__(self, store: Any, chunk: int,
                 runner: Callable[[Any, list[str]], list[dict[str, Any]]] = replay_and_store) -> None:
        self._store = store
        self.chunk = chunk  # decisions per replay call, and the most a request replays synchronously
        self._runner = runner
        self._lock = threading.Lock()
        self._jobs: OrderedDict[str, Job] = OrderedDict()

    def start(self, ids: list[str], tenant: str | None) -> Job:
        job = Job(id=str(uuid.uuid4()), tenant=tenant, total=len(ids))
        with self._lock:
            self._jobs[job.id] = job
            while len(self._jobs) > KEPT_JOBS:
                self._jobs.popitem(last=False)
        threading.Thread(target=self._run, args=(job, ids), name=f"replay-{job.id[:8]}", daemon=True).start()
        return job

    def get(self, job_id: str, scope: str | None) -> Job | None:
        """The job if the caller may see it: admins see every job, a tenant only its own."""
        with self._lock:
            job = self._jobs.get(job_id)
        if job is None or (scope is not None and job.tenant != scope):
            return None
        return job

    def _run(self, job: Job, ids: list[str]) -> None:
        try:
            for start in range(0, len(ids), self.chunk):
                runs = self._runner(self._store, ids[start:start + self.chunk])
                with self._lock:
                    job.runs.extend(runs)
            job.state = "done"
        except Exception as exc:  # noqa: BLE001 - a failed job reports its error instead of dying silently
            log.exception("replay job failed", extra={"job": job.id})
            job.state, job.error = "failed", f"{type(exc).__name__}: {str(exc)[:300]}"
