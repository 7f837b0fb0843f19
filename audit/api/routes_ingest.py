"""Ingest of records and world events as JSON lines (optionally gzip), for producers.

The body is read with a hard cap (413 beyond it) and decompressed once, while it streams in, with
the same cap, so a small gzip bomb cannot exhaust memory; gzip data where JSON lines should be
(gzip inside gzip, or gzip without its Content-Encoding) is refused with 415, and so is a form
upload (``multipart/…``), whose boundaries and part headers would be quarantined as lines while
its file went in. Ingest writes the store for every tenant, so it needs an admin token. Bad lines
are quarantined by the store and counted in the answer, never dropped. A producer that restarts
asks for the last event seq stored for its cluster and goes on from there, and a watcher that
resumes the cluster's world (read from ``GET /v1/events``) asks which decisions are stored about
the pods it still sees, so it does not derive them again.
"""

from __future__ import annotations

import zlib
from dataclasses import asdict
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.concurrency import run_in_threadpool
from pydantic import BaseModel, ConfigDict, Field

from audit.api import params, storeport
from audit.api.auth import Principal
from audit.api.deps import Settings, principal, settings, store
from audit.api.problems import Problem
from audit.store.ingest import GZIP_MAGIC
from audit.store.ports import DecisionReads

router = APIRouter(prefix="/v1/ingest", tags=["ingest"])

MAX_POD_UIDS = 20_000  # pod uids asked about in one request (about 800 KB of JSON)


async def read_body(request: Request, cap: int, gzip: bool = False) -> bytes:
    """The request body, decompressed as it arrives when ``gzip``, never more than ``cap`` bytes
    either way: a small gzip bomb stops at the cap instead of expanding in memory first."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > cap:
        raise Problem("payload-too-large", f"request body of {declared} bytes exceeds the limit of {cap} bytes")
    inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS) if gzip else None
    chunks: list[bytes] = []
    received = size = 0
    async for chunk in request.stream():
        received += len(chunk)
        if received > cap:
            raise Problem("payload-too-large", f"request body exceeds the limit of {cap} bytes")
        if inflater is not None:
            if inflater.eof and chunk:
                raise Problem("malformed-body", "Content-Encoding gzip: data after the end of the gzip stream")
            try:
                chunk = inflater.decompress(chunk, cap + 1 - size)
            except zlib.error as exc:
                raise Problem("malformed-body", f"Content-Encoding gzip: body is not valid gzip ({exc})") from None
            if inflater.unconsumed_tail:  # more output waits than the cap leaves room for
                raise Problem("payload-too-large", f"decompressed body exceeds the limit of {cap} bytes")
        size += len(chunk)
        if size > cap:
            raise Problem("payload-too-large", f"decompressed body exceeds the limit of {cap} bytes")
        chunks.append(chunk)
    if inflater is not None and not inflater.eof:
        raise Problem("malformed-body", "Content-Encoding gzip: body is truncated")
    return b"".join(chunks)


async def _ingest(kind: str, request: Request, who: Principal, db: Any, cfg: Settings) -> dict[str, Any]:
    if not who.admin:
        raise Problem("forbidden", "ingest writes data of every tenant and needs an admin token")
    media = (request.headers.get("content-type") or "").split(";")[0].strip().lower()
    if media.startswith("multipart/"):  # a form upload (curl -F): its part headers and boundaries are no JSON lines
        raise Problem("unsupported-media-type", f"Content-Type {media[:40]}: send the JSON lines themselves as the "
                      "request body (curl --data-binary @FILE), not as a form upload")
    encoding = (request.headers.get("content-encoding") or "identity").strip().lower()
    if encoding not in ("identity", "gzip"):
        raise Problem("unsupported-media-type", f"Content-Encoding {encoding[:40]!r}: only gzip or none is accepted")
    body = await read_body(request, cfg.max_body_bytes, gzip=encoding == "gzip")
    if body[:2] == GZIP_MAGIC:  # decompressed once only: a second layer is refused, not opened
        said = "inside a gzip body" if encoding == "gzip" else "without Content-Encoding: gzip"
        raise Problem("unsupported-media-type", f"request body: gzip data {said}; compress JSON lines once and "
                      "send Content-Encoding: gzip")
    result = await run_in_threadpool(storeport.call, db.ingest_jsonl, body, kind, "api", False)
    return _as_dict(result)


def _as_dict(result: Any) -> dict[str, Any]:
    if isinstance(result, dict):
        return result
    if hasattr(result, "to_dict"):
        out: dict[str, Any] = result.to_dict()
        return out
    return {k: v for k, v in vars(result).items() if not k.startswith("_")}


@router.post("/records", summary="Ingest decision records (JSON lines, gzip allowed)")
async def ingest_records(request: Request, who: Annotated[Principal, Depends(principal)],
                         db: Annotated[Any, Depends(store)], cfg: Annotated[Settings, Depends(settings)]) -> dict[str, Any]:
    return await _ingest("records", request, who, db, cfg)


@router.post("/events", summary="Ingest world events (JSON lines, gzip allowed)")
async def ingest_events(request: Request, who: Annotated[Principal, Depends(principal)],
                        db: Annotated[Any, Depends(store)], cfg: Annotated[Settings, Depends(settings)]) -> dict[str, Any]:
    return await _ingest("events", request, who, db, cfg)


@router.get("/events/last-seq", summary="The highest world-event seq stored for a cluster (null: none yet)")
async def last_event_seq(who: Annotated[Principal, Depends(principal)], db: Annotated[Any, Depends(store)],
                         cluster: Annotated[str, Query(description="the producer's cluster name")]) -> dict[str, Any]:
    if not who.admin:
        raise Problem("forbidden", "event sequence numbers are for producers, which hold an admin token")
    name = params.cluster(cluster)
    if name is None:
        raise Problem("invalid-parameter", "cluster: required")
    seq = await run_in_threadpool(storeport.call, db.max_seq, name)
    return {"cluster": name, "last_seq": seq}


class PodDecisionsRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    cluster: str
    pod_uids: list[str] = Field(max_length=MAX_POD_UIDS)


@router.post("/pod-decisions", summary="The decisions stored about these pods of a cluster (admin token)")
async def pod_decisions(body: PodDecisionsRequest, who: Annotated[Principal, Depends(principal)],
                        db: Annotated[DecisionReads, Depends(store)]) -> dict[str, Any]:
    if not who.admin:
        raise Problem("forbidden", "decisions about every tenant's pods are for producers, which hold an admin token")
    name = params.cluster(body.cluster)
    if name is None:
        raise Problem("invalid-parameter", "cluster: required")
    found = await run_in_threadpool(storeport.call, db.pod_decisions, name, body.pod_uids)
    return {"cluster": name, "items": [asdict(d) for d in found]}
