"""Replay of decisions by id or by window: re-execute and compare digests (``audit.replay``).

A selection field the request would not use (a window's with ``decision_ids``, sample, shard, tenant … with a
counterfactual) is refused, not ignored. Up to ``--replay-sync-limit`` decisions (default 200) are replayed inside the request (``{"runs": [...], "summary"}``);
more start one job (202 with a job id; ``GET /v1/replay/{job}``, on any API server, reports progress
and, when done, the runs). An id given more than once is replayed once. A tenant replays only its
own decisions and sees only its own jobs. The body is bounded (``MAX_BODY_BYTES``, ``MAX_IDS`` ids;
more is a 413 problem) and ids are looked up in batches, never one query each. With
``counterfactual_policy`` (a policy version of the cluster's history) or ``counterfactual_policy_document`` (a Policy
document sent along) the window is decided again under that policy (admins only: it re-decides
every tenant's pods); see ``audit.api.counterfactual``.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, NamedTuple

from fastapi import APIRouter, Depends, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from audit.api import params, storeport
from audit.api.auth import Principal
from audit.api.counterfactual import counterfactual_window
from audit.api.deps import principal, store, tenant_filter
from audit.api.problems import Problem
from audit.api.replay_jobs import JobBoard, replay_and_store, summarize
from audit.replay.checkpoints import DEFAULT_INTERVAL
from audit.replay.selection import Selection, SelectionError, Shard
from audit.store.ports import StoreReads

router = APIRouter(prefix="/v1/replay", tags=["replay"])

MAX_WINDOW = 100_000
MAX_IDS = 20_000  # decision ids in one request: a job of this size takes minutes, not hours
MAX_SCAN = 2_000_000  # decisions of one window a selection may look at
MAX_BODY_BYTES = 2 * 1024 * 1024  # MAX_IDS ids of ~40 bytes each, and a policy document, fit


# what selects decisions from a window: ignored by a replay of ids or a counterfactual, so refused there
WINDOW_SELECTION = ("tenant", "model", "policy_version", "limit", "offset", "all", "sample", "shard", "segment")


def _refuse_unused(req: ReplayRequest, fields: tuple[str, ...], what: str) -> None:
    """A field given a value by a request that does not use it is refused, never ignored."""
    defaults = ReplayRequest.model_fields
    given = [name for name in fields if name in req.model_fields_set
             and getattr(req, name) != defaults[name].get_default(call_default_factory=True)]
    if given:
        raise Problem("invalid-parameter", f"{', '.join(given)}: {what}")


class ReplayRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    decision_ids: list[str] = Field(default_factory=list, max_length=MAX_IDS)
    cluster: str | None = None
    since: str | None = None
    until: str | None = None
    tenant: str | None = None
    model: str | None = None
    policy_version: str | None = None
    limit: int = Field(default=10_000, ge=1, le=MAX_WINDOW)  # decisions taken from a window, earliest first
    offset: int = Field(default=0, ge=0)  # skip this many of the window's decisions first (the next part of it)
    all: bool = False  # the window is the caller's whole history (no cluster, since or until needed)
    sample: float = Field(default=1.0, gt=0.0, le=1.0)  # a stable fraction of the window, by id hash
    shard: str | None = None  # "i/N": the window's decisions in shard i of N (segments of `segment` seqs)
    segment: int = Field(default=DEFAULT_INTERVAL, ge=1)
    counterfactual_policy: str | None = None  # replay the window under another policy version
    counterfactual_policy_document: dict[str, Any] | None = None  # ... or under this Policy document


def _counterfactual(db: StoreReads, who: Principal, req: ReplayRequest) -> dict[str, Any]:
    if not who.admin:
        raise Problem("forbidden", "a counterfactual run re-decides every tenant's pods and needs an admin token")
    if req.counterfactual_policy is not None and req.counterfactual_policy_document is not None:
        raise Problem("invalid-parameter", "counterfactual_policy and counterfactual_policy_document: give one")
    document = _policy_document(req.counterfactual_policy_document)
    version = params.policy_version(req.counterfactual_policy, "counterfactual_policy")
    cluster = params.cluster(req.cluster)
    since, until = params.timestamp(req.since, "since"), params.timestamp(req.until, "until")
    if not (version or document):
        raise Problem("invalid-parameter", "counterfactual_policy: give a stored policy version (or, as an admin, "
                      "counterfactual_policy_document)")
    if req.decision_ids:
        raise Problem("invalid-parameter", "a counterfactual run takes a window (cluster, since, until), not decision_ids")
    _refuse_unused(req, tuple(f for f in WINDOW_SELECTION if f != "all"),
                   "a counterfactual run decides the whole window (cluster, since, until) again; give none of these")
    if req.all or not (cluster and since and until):
        missing = [name for name, value in (("cluster", cluster), ("since", since), ("until", until)) if not value]
        raise Problem("invalid-parameter", "a counterfactual run takes a window: cluster, since and until"
                      + (f" (missing: {', '.join(missing)})" if missing else " (not all: it re-decides one cluster's "
                                                                             "window)"))
    try:
        return counterfactual_window(db, cluster, since, until, version or "", document)
    except storeport.STORE_ERRORS as exc:
        raise storeport.unavailable(exc) from None


def _policy_document(document: dict[str, Any] | None) -> dict[str, Any] | None:
    if document is None:
        return None
    from audit.policy import PolicyError, parse_policy

    if document.get("kind") != "Policy":
        raise Problem("invalid-parameter", "counterfactual_policy_document: kind: expected Policy")
    try:
        parse_policy(document)
    except PolicyError as exc:
        raise Problem("invalid-parameter", f"counterfactual_policy_document: {exc}") from None
    return document


def _ids(db: StoreReads, who: Principal, req: ReplayRequest) -> list[str]:
    """The decisions to replay, each once, every one visible to the caller (others are "not found")."""
    if req.decision_ids:
        _refuse_unused(req, ("cluster", "since", "until", *WINDOW_SELECTION),
                       "selects from a window; decision_ids replays exactly those decisions: give one or the other")
        given = list(dict.fromkeys(params.decision_id(i) for i in req.decision_ids))
        known = storeport.call(db.known_decision_ids, given, who.scope)
        missing = [d for d in given if d not in known]
        if missing:
            more = f" (and {len(missing) - 1:,} more of the {len(given):,} given)" if len(missing) > 1 else ""
            raise Problem("not-found", f"decision {missing[0]} not found{more}")
        return given
    if not (req.all or req.cluster or req.since or req.until):
        raise Problem("invalid-parameter", "give decision_ids, or a window: cluster, since and/or until (or all: true)")
    f = storeport.decision_filter(
        cluster=params.cluster(req.cluster), since=params.timestamp(req.since, "since"),
        until=params.timestamp(req.until, "until"), tenant=tenant_filter(who, params.tenant(req.tenant)),
        model=params.model(req.model), policy_version=params.policy_version(req.policy_version))
    try:
        selection = Selection(sample=req.sample, shard=Shard.parse(req.shard) if req.shard else None,
                              segment=req.segment)
    except SelectionError as exc:
        raise Problem("invalid-parameter", str(exc).removeprefix("--")) from None
    keys = storeport.call(db.decision_keys, f, MAX_SCAN + 1)
    if len(keys) > MAX_SCAN:
        raise _too_large(f"the window holds more than {MAX_SCAN:,} decisions; narrow it (since, until, cluster) "
                         "or replay it in shards")
    chosen = [k for k in keys if selection.keeps(_Key(*k))]  # type: ignore[arg-type]
    # the earliest `limit` decisions in history order, so a limited window is a prefix of the full one
    chosen.sort(key=lambda k: (k[2], k[3], k[0]))
    return [k[0] for k in chosen[req.offset:req.offset + req.limit]]


class _Key(NamedTuple):
    """What a selection reads of a decision."""

    decision_id: str
    time: str
    cluster: str
    seq: int


async def _board(request: Request) -> JobBoard:
    board: JobBoard = request.app.state.replay_jobs
    return board


def _too_large(detail: str) -> Problem:
    return Problem("payload-too-large", detail, max_bytes=MAX_BODY_BYTES, max_ids=MAX_IDS)


async def _read(request: Request) -> ReplayRequest:
    """The request body, read up to ``MAX_BODY_BYTES`` and at most ``MAX_IDS`` ids, then validated."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        raise _too_large(f"request body of {int(declared):,} bytes: at most {MAX_BODY_BYTES:,} bytes; "
                         f"send at most {MAX_IDS:,} decision_ids per request, or a window")
    body = bytearray()
    async for part in request.stream():
        body += part
        if len(body) > MAX_BODY_BYTES:
            raise _too_large(f"request body over {MAX_BODY_BYTES:,} bytes; send at most {MAX_IDS:,} decision_ids "
                             "per request, or a window")
    try:
        data = json.loads(bytes(body) or b"{}")
    except (ValueError, RecursionError):
        raise Problem("malformed-body", "the body is not a JSON object") from None
    ids = data.get("decision_ids") if isinstance(data, dict) else None
    if isinstance(ids, list) and len(ids) > MAX_IDS:
        raise _too_large(f"decision_ids: {len(ids):,} ids, at most {MAX_IDS:,} per request; split them, "
                         "or replay a window")
    try:
        return ReplayRequest.model_validate(data)
    except ValidationError as exc:
        raise RequestValidationError([{**e, "loc": ("body", *e.get("loc", ()))} for e in exc.errors()]) from None


@router.post("", summary="Replay decisions and compare digests",
             openapi_extra={"requestBody": {"required": True, "content": {"application/json": {
                 "schema": ReplayRequest.model_json_schema(ref_template="#/components/schemas/{model}")}}}})
async def replay(request: Request, who: Annotated[Principal, Depends(principal)],
                 db: Annotated[Any, Depends(store)], board: Annotated[JobBoard, Depends(_board)]) -> JSONResponse:
    req = await _read(request)
    if req.counterfactual_policy is not None or req.counterfactual_policy_document is not None:
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
