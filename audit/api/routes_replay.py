"""Replay of decisions by id or by window: re-execute and compare digests (``audit.replay``).

Up to ``--replay-sync-limit`` decisions (default 200) are replayed inside the request (``{"runs": [...], "summary"}``);
more start a job (202 with a job id; ``GET /v1/replay/{job}``, on any API server, reports progress
and, when done, the runs). A tenant replays only its own decisions and sees only its own jobs. With
``counterfactual_policy`` the window is decided again under that policy version (admins only:
it re-decides every tenant's pods); see ``audit.api.counterfactual``.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from audit.api import params, storeport
from audit.api.auth import Principal
from audit.api.counterfactual import counterfactual_window
from audit.api.deps import principal, store, tenant_filter
from audit.api.problems import Problem
from audit.api.replay_jobs import JobBoard, replay_and_store, summarize

router = APIRouter(prefix="/v1/replay", tags=["replay"])

MAX_WINDOW = 100_000


class ReplayRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    decision_ids: list[str] = Field(default_factory=list, max_length=MAX_WINDOW)
    cluster: str | None = None
    since: str | None = None
    until: str | None = None
    tenant: str | None = None
    model: str | None = None
    policy_version: str | None = None
    limit: int = Field(default=10_000, ge=1, le=MAX_WINDOW)  # decisions taken from a window
    counterfactual_policy: str | None = None  # replay the window under another policy version


def _counterfactual(db: Any, who: Principal, req: ReplayRequest) -> dict[str, Any]:
    if not who.admin:
        raise Problem("forbidden", "a counterfactual run re-decides every tenant's pods and needs an admin token")
    version = params.label(req.counterfactual_policy, "counterfactual_policy")
    cluster = params.label(req.cluster, "cluster")
    since, until = params.timestamp(req.since, "since"), params.timestamp(req.until, "until")
    if not (version and cluster and since and until) or req.decision_ids:
        raise Problem("invalid-parameter", "a counterfactual run takes a window (cluster, since, until), not decision_ids")
    try:
        return counterfactual_window(db, cluster, since, until, version)
    except storeport.STORE_ERRORS as exc:
        raise storeport.unavailable(exc) from None


def _ids(db: Any, who: Principal, req: ReplayRequest) -> list[str]:
    """The decisions to replay, every one visible to the caller (others are "not found")."""
    if req.decision_ids:
        given = [params.decision_id(i) for i in req.decision_ids]
        for decision in given:
            if storeport.call(db.get_decision, decision, who.scope) is None:
                raise Problem("not-found", f"decision {decision} not found")
        return given
    if not (req.cluster and req.since and req.until):
        raise Problem("invalid-parameter", "give decision_ids, or a window: cluster, since and until")
    f = storeport.decision_filter(
        cluster=params.label(req.cluster, "cluster"), since=params.timestamp(req.since, "since"),
        until=params.timestamp(req.until, "until"), tenant=tenant_filter(who, params.label(req.tenant, "tenant")),
        model=params.model(req.model), policy_version=params.label(req.policy_version, "policy_version"))
    ids: list[str] = []
    cursor = None
    while len(ids) < req.limit:
        page, cursor = storeport.call(db.list_decisions, f, cursor, min(1000, req.limit - len(ids)))
        ids += [r.decision_id for r in page]
        if cursor is None:
            break
    return ids


def _board(request: Request) -> JobBoard:
    board: JobBoard = request.app.state.replay_jobs
    return board


@router.post("", summary="Replay decisions and compare digests")
async def replay(req: ReplayRequest, who: Annotated[Principal, Depends(principal)],
                 db: Annotated[Any, Depends(store)], board: Annotated[JobBoard, Depends(_board)]) -> JSONResponse:
    if req.counterfactual_policy is not None:
        return JSONResponse(await run_in_threadpool(_counterfactual, db, who, req))
    ids = await run_in_threadpool(_ids, db, who, req)
    if len(ids) > board.chunk:
        view = await run_in_threadpool(storeport.call, board.start, ids, who.scope)
        return JSONResponse(view, status_code=202)
    runs = await run_in_threadpool(storeport.call, replay_and_store, db, ids)
    return JSONResponse({"runs": runs, "summary": summarize(runs)})


@router.get("/{job}", summary="Progress and results of a replay job")
def replay_job(job: str, who: Annotated[Principal, Depends(principal)],
               board: Annotated[JobBoard, Depends(_board)]) -> JSONResponse:
    found = storeport.call(board.view, params.decision_id(job), who.scope)
    if found is None:
        raise Problem("not-found", f"replay job {job} not found")
    return JSONResponse(found)
