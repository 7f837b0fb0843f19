"""The world's event log of a cluster, page by page in seq order, for readers that fold it themselves.

``claimtrail migration report --server`` reads it to know what each device-plugin pod asked for
and when pods released their devices, as ``/v1/stats/migration`` does from the store. A restarted
watcher reads its cluster's world from the newest checkpoint (``/v1/events/checkpoint``, the body
as stored, so the reader checks its digest over the stored bytes), the events after it, and the
events of the claims whose reservations the checkpoint does not hold (``/v1/events/objects``).
World events carry every tenant's pods, so the log needs an admin token.
"""

from __future__ import annotations

from itertools import islice
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Response
from fastapi.concurrency import run_in_threadpool
from pydantic import BaseModel, ConfigDict, Field

from audit.api import params, storeport
from audit.api.auth import Principal
from audit.api.bodies import JSONResponse
from audit.api.deps import principal, store
from audit.api.problems import Problem
from audit.store.ports import HistoryReads

router = APIRouter(prefix="/v1", tags=["events"])

MAX_LIMIT = 10_000
MAX_NAMES = 1_000  # objects asked about in one request


def _page(db: HistoryReads, cluster: str, after_seq: int, limit: int) -> tuple[list[dict[str, Any]], bool]:
    """Up to ``limit`` events after ``after_seq``, through the highest seq stored now, and whether
    more follow them (one row beyond the page is read to tell, so a last page is said to be last)."""
    upto = db.max_seq(cluster)
    if upto is None or upto <= after_seq:
        return [], False
    # one query of ``limit + 1`` rows: the iterator asks for the next page only when it is read on
    events = [e.to_dict() for e in islice(db.events(cluster, after_seq, upto, limit + 1), limit + 1)]
    return events[:limit], len(events) > limit


@router.get("/events", summary="A cluster's world events in seq order, after a seq (admin token)",
            response_class=JSONResponse)
async def list_events(
    who: Annotated[Principal, Depends(principal)], db: Annotated[HistoryReads, Depends(store)],
    cluster: Annotated[str | None, Query(description="the cluster whose event log to read")] = None,
    after_seq: Annotated[int, Query(ge=-1, description="events with a higher seq (-1: from the first)")] = -1,
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT)] = 1000,
) -> JSONResponse:
    name = _admin_cluster(who, cluster)
    items, more = await run_in_threadpool(storeport.call, _page, db, name, after_seq, limit)
    following = items[-1]["seq"] if more else None
    return JSONResponse({"cluster": name, "items": items, "next_after_seq": following})


def _admin_cluster(who: Principal, cluster: str | None) -> str:
    if not who.admin:
        raise Problem("forbidden", "world events carry the pods of every tenant and need an admin token")
    name = params.cluster(cluster)
    if name is None:
        raise Problem("invalid-parameter", "cluster: required")
    return name


def _latest_checkpoint(db: HistoryReads, cluster: str) -> tuple[int, str] | None:
    upto = db.max_seq(cluster)
    return db.nearest_checkpoint_text(cluster, upto) if upto is not None else None


@router.get("/events/checkpoint", summary="A cluster's newest world checkpoint, as stored (admin token)",
            responses={200: {"content": {"application/json": {}}}})
async def latest_checkpoint(
    who: Annotated[Principal, Depends(principal)], db: Annotated[HistoryReads, Depends(store)],
    cluster: Annotated[str | None, Query(description="the cluster whose checkpoint to read")] = None,
) -> Response:
    """The newest checkpoint at or before the end of the cluster's event log: the world's
    snapshot at its ``seq`` (``objects`` by kind and key, the ``policy`` in force, …) with its
    ``content_digest``, byte for byte as stored; 404 when the store keeps none."""
    name = _admin_cluster(who, cluster)
    found = await run_in_threadpool(storeport.call, _latest_checkpoint, db, name)
    if found is None:
        raise Problem("not-found", f"cluster {name}: no checkpoint of its world is stored")
    return Response(found[1], media_type="application/json")


class ObjectEventsRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    cluster: str
    kind: str = Field(min_length=1, description="the objects' kind, as events name it (ResourceClaim …)")
    names: list[str] = Field(max_length=MAX_NAMES,
                             description="the objects' namespace/name (the name alone for a cluster-scoped kind)")
    after_seq: int = Field(default=-1, ge=-1, description="events with a higher seq (-1: from the first)")
    upto_seq: int | None = Field(default=None, ge=-1, description="and at most this seq (default: the log's end)")
    limit: int = Field(default=1000, ge=1, le=MAX_LIMIT)


def _object_page(db: HistoryReads, cluster: str, ask: ObjectEventsRequest) -> tuple[list[dict[str, Any]], bool]:
    """As ``_page``, of the events about the objects asked for alone."""
    upto = db.max_seq(cluster)
    if ask.upto_seq is not None and upto is not None:
        upto = min(upto, ask.upto_seq)
    if upto is None or upto <= ask.after_seq or not ask.names:
        return [], False
    events = [e.to_dict() for e in islice(db.object_events(cluster, ask.kind, ask.names, ask.after_seq, upto,
                                                           ask.limit + 1), ask.limit + 1)]
    return events[:ask.limit], len(events) > ask.limit


@router.post("/events/objects", summary="The world events about some objects of a cluster, in seq order (admin token)",
             response_class=JSONResponse)
async def object_events(body: ObjectEventsRequest, who: Annotated[Principal, Depends(principal)],
                        db: Annotated[HistoryReads, Depends(store)]) -> JSONResponse:
    """Paged as ``GET /v1/events``: ``next_after_seq`` is the next page's ``after_seq``."""
    name = _admin_cluster(who, body.cluster)
    items, more = await run_in_threadpool(storeport.call, _object_page, db, name, body)
    following = items[-1]["seq"] if more else None
    return JSONResponse({"cluster": name, "items": items, "next_after_seq": following})
