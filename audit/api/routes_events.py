"""The world's event log of a cluster, page by page in seq order, for readers that fold it themselves.

``claimtrail migration report --server`` reads it to know what each device-plugin pod asked for
and when pods released their devices, as ``/v1/stats/migration`` does from the store. World events
carry every tenant's pods, so the log needs an admin token.
"""

from __future__ import annotations

from itertools import islice
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query
from fastapi.concurrency import run_in_threadpool

from audit.api import params, storeport
from audit.api.auth import Principal
from audit.api.bodies import JSONResponse
from audit.api.deps import principal, store
from audit.api.problems import Problem
from audit.store.ports import HistoryReads

router = APIRouter(prefix="/v1", tags=["events"])

MAX_LIMIT = 10_000


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
    if not who.admin:
        raise Problem("forbidden", "world events carry the pods of every tenant and need an admin token")
    name = params.cluster(cluster)
    if name is None:
        raise Problem("invalid-parameter", "cluster: required")
    items, more = await run_in_threadpool(storeport.call, _page, db, name, after_seq, limit)
    following = items[-1]["seq"] if more else None
    return JSONResponse({"cluster": name, "items": items, "next_after_seq": following})
