"""Replay of decisions by id or window: re-execute and compare digests (``audit.replay``).

Until a replay engine is installed the endpoint answers 501 with a stable problem type, after
the same auth and tenant checks as the working endpoint (so it never reveals other tenants'
decisions either way).
"""

from __future__ import annotations

import importlib
from typing import Annotated, Any

from fastapi import APIRouter, Depends
from fastapi.concurrency import run_in_threadpool
from pydantic import BaseModel, ConfigDict, Field

from audit.api import params, storeport
from audit.api.auth import Principal
from audit.api.deps import principal, store
from audit.api.problems import Problem

router = APIRouter(prefix="/v1/replay", tags=["replay"])


class ReplayRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    decision_ids: list[str] = Field(default_factory=list, max_length=100_000)
    cluster: str | None = None
    since: str | None = None
    until: str | None = None
    tenant: str | None = None
    model: str | None = None
    policy_version: str | None = None
    counterfactual_policy: str | None = None  # replay the window under another policy version


def replay_engine() -> Any | None:
    """``audit.replay.replay_decisions(store, ids)`` when the replay package provides it."""
    try:
        module = importlib.import_module("audit.replay")
    except ImportError:
        return None
    return getattr(module, "replay_decisions", None)


def _check(db: Any, who: Principal, req: ReplayRequest) -> list[str]:
    ids = [params.decision_id(i) for i in req.decision_ids]
    if not ids and not (req.cluster and req.since and req.until):
        raise Problem("invalid-parameter", "give decision_ids, or a window: cluster, since and until")
    params.label(req.cluster, "cluster")
    params.model(req.model)
    params.label(req.policy_version, "policy_version")
    params.label(req.counterfactual_policy, "counterfactual_policy")
    if req.tenant is not None and not who.admin and req.tenant != who.tenant:
        raise Problem("not-found", f"tenant {req.tenant!r} not found")
    params.timestamp(req.since, "since")
    params.timestamp(req.until, "until")
    for decision in ids:
        if storeport.call(db.get_decision, decision, who.scope) is None:
            raise Problem("not-found", f"decision {decision} not found")
    return ids


@router.post("", summary="Replay decisions and compare digests")
async def replay(req: ReplayRequest, who: Annotated[Principal, Depends(principal)],
                 db: Annotated[Any, Depends(store)]) -> dict[str, Any]:
    ids = await run_in_threadpool(_check, db, who, req)
    engine = replay_engine()
    if engine is None:
        raise Problem("not-implemented", "replay is not available in this build of the server")
    result = await run_in_threadpool(storeport.call, engine, db, ids)
    return {"runs": result}


@router.get("/{job}", summary="State of a replay job")
async def replay_job(job: str, who: Annotated[Principal, Depends(principal)]) -> dict[str, Any]:
    params.decision_id(job)
    raise Problem("not-found", f"replay job {job} not found")
