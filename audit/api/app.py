"""The FastAPI application: routes, auth, problem documents, request metrics, health.

``create_app(store, settings, receiver)`` wires an opened store into the routers. A receiver (the
OTLP/HTTP one from ``ingest.otlp``, handed in by ``claimtrail serve`` so that the API never imports
ingest) is mounted behind the same admin check as the other ingest paths.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Annotated, Any

from fastapi import APIRouter, Depends, FastAPI, Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import PlainTextResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from audit.api import routes_decisions, routes_events, routes_ingest, routes_replay, routes_stats, storeport
from audit.api.answers import AnswerCache
from audit.api.auth import Principal
from audit.api.deps import Settings, principal
from audit.api.docs import install_docs
from audit.api.limits import Admission, LimitMiddleware, header
from audit.api.metrics import RequestMetrics, process_memory, render_collector, render_gauges, render_process
from audit.api.pages import PageCache
from audit.api.problems import Problem, install_handlers, problem_response
from audit.api.replay_jobs import JobBoard

log = logging.getLogger("claimtrail.api")


def _query_names(dependant: Any) -> set[str]:
    """Query parameters a route declares, its dependencies' included."""
    names = {p.alias for p in dependant.query_params}
    for sub in dependant.dependencies:
        names |= _query_names(sub)
    return names


# per route's dependant (by identity, which it keeps for the app's life): the query names it accepts,
# walked once rather than on every request
_ACCEPTED: dict[int, tuple[Any, frozenset[str]]] = {}


def _accepted(dependant: Any) -> frozenset[str]:
    entry = _ACCEPTED.get(id(dependant))
    if entry is None or entry[0] is not dependant:
        entry = _ACCEPTED[id(dependant)] = (dependant, frozenset(_query_names(dependant)))
    return entry[1]


async def _known_query_parameters(request: Request) -> None:
    """Refuse query parameters the route does not declare: a misspelt filter silently ignored would
    answer for everything instead of the subset asked for."""
    if not request.scope.get("query_string"):
        return
    dependant = getattr(request.scope.get("route"), "dependant", None)
    if dependant is None:
        return
    accepted = _accepted(dependant)
    unknown = sorted(set(request.query_params) - accepted)
    if unknown:
        raise Problem("invalid-parameter", f"{unknown[0][:80]!r}: unknown query parameter for "
                      f"{request.url.path} (accepted: {', '.join(sorted(accepted)) or 'none'})")


async def _require_admin(who: Annotated[Principal, Depends(principal)]) -> Principal:
    if not who.admin:
        raise Problem("forbidden", "ingest writes data of every tenant and needs an admin token")
    return who


# Builds a receiver's routes around the sink it stores into, refusing bodies over the given size;
# returns them with an object whose public attributes are the receiver's counters (on /metrics).
ReceiverFactory = Callable[[Any, int], tuple[APIRouter, Any]]


@asynccontextmanager
async def _replay_jobs_lifespan(app: FastAPI) -> AsyncIterator[None]:
    """Jobs left running by a server that died are marked interrupted at start; this server's own
    jobs are stopped and marked so at shutdown (SIGTERM), before the store closes."""
    board: JobBoard = app.state.replay_jobs
    try:
        marked = await run_in_threadpool(board.recover)
        if marked:
            log.warning("replay jobs interrupted by a previous stop", extra={"jobs": marked})
    except Exception:  # noqa: BLE001 - a store that does not answer yet must not stop the server; readyz says so
        log.exception("interrupted replay jobs not checked")
    try:
        yield
    finally:
        await run_in_threadpool(board.stop)


class MeasureMiddleware:
    """Counts and times every request by route template and status, and answers problem+json for a
    defect below the handlers. Plain ASGI rather than ``@app.middleware("http")``: that wrapper runs
    each request through a task group and memory streams, a large share of the event loop's time
    per read when many readers are served at once."""

    def __init__(self, app: ASGIApp, requests: RequestMetrics) -> None:
        self.app = app
        self.requests = requests

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 0

        async def measured_send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, measured_send)
        except Exception:
            path = str(scope.get("path", ""))
            log.exception("unhandled error", extra={"path": path})
            if status:  # the answer has begun: nothing else can be sent on this request
                raise
            response = problem_response("internal", "an internal error occurred; it has been logged", path)
            status = response.status_code
            await response(scope, receive, send)
        template = getattr(scope.get("route"), "path", "(unmatched)")
        self.requests.observe(str(scope.get("method", "")), template, status, time.perf_counter() - started)


def create_app(store: Any, settings: Settings, receiver: ReceiverFactory | None = None) -> FastAPI:
    app = FastAPI(title="ClaimTrail audit API", version="1", dependencies=[Depends(_known_query_parameters)],
                  lifespan=_replay_jobs_lifespan,
                  docs_url=None, redoc_url=None,  # /docs is served from local assets (audit.api.docs)
                  description="Decision records, explanations and statistics for DRA accelerator allocation. "
                              "Every call except health and metrics needs `Authorization: Bearer <token>`.")
    app.state.store = store
    app.state.settings = settings
    app.state.replay_jobs = JobBoard(store, chunk=settings.replay_sync_limit, step=settings.replay_job_step)
    app.state.answers = AnswerCache()
    app.state.pages = PageCache()
    requests = RequestMetrics()
    install_handlers(app)
    install_docs(app)

    def caller(scope: Any) -> str:
        """Whom a request counts against: its tenant, the admins, or its address when unauthenticated."""
        current: Settings = app.state.settings  # read per request: the tokens may be reloaded
        who = current.auth.authenticate(header(scope, b"authorization") or None)
        if who is None:
            return f"address:{(scope.get('client') or ('?',))[0]}"
        return "admin" if who.admin else f"tenant:{who.tenant}"

    app.add_middleware(LimitMiddleware, admission=Admission(settings.limits), caller=caller)

    app.add_middleware(MeasureMiddleware, requests=requests)

    for module in (routes_decisions, routes_stats, routes_events, routes_ingest, routes_replay):
        app.include_router(module.router)
    otlp_counters = None
    if receiver is not None:
        router, otlp_counters = receiver(storeport.OtlpSink(store), settings.max_body_bytes)
        app.include_router(router, dependencies=[Depends(_require_admin)])

    @app.get("/healthz", tags=["health"], summary="The process is alive")
    def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/readyz", tags=["health"], summary="The store answers")
    async def readyz() -> Response:
        try:
            await run_in_threadpool(storeport.ready, store)
        except Exception as exc:  # noqa: BLE001 - any store failure means not ready
            return problem_response("unavailable", f"the store does not answer: {type(exc).__name__}", "/readyz")
        return Response('{"status":"ready"}', media_type="application/json")

    @app.get("/metrics", tags=["health"], summary="Prometheus metrics", response_class=PlainTextResponse)
    async def metrics() -> PlainTextResponse:
        lines = requests.render() + render_process(process_memory()) + render_collector()
        try:
            store_counters = await run_in_threadpool(storeport.counters, store)
        except Exception:  # noqa: BLE001 - a scrape must not fail because the store is down
            log.warning("store counters unavailable for /metrics")
            store_counters = {}
        lines += render_gauges("claimtrail_store", "Store writer counters (writer_received, writer_written, "
                               "writer_quarantined, ...), replay_decisions / replay_mismatches, reads by id "
                               "(id_lookups: asked of the engine), the id index's id_index_hits / misses / "
                               "skipped / errors and id_index_backfilled (1 once it holds the store), and the "
                               "world checkpoints the server wrote itself (checkpoints_written) and the rounds "
                               "that failed (checkpoint_errors, logged).",
                               store_counters, "counter")
        cache: AnswerCache = app.state.answers
        lines += render_gauges("claimtrail_answer_cache", "Decisions and summary explanations served from the "
                               "cache of immutable answers (hits) or looked up (misses).",
                               {"hits": cache.hits, "misses": cache.misses}, "counter")
        pages: PageCache = app.state.pages
        lines += render_gauges("claimtrail_page_cache", "Listing pages served from the cache while the stored "
                               "decisions kept their version (hits) or read from the store (misses).",
                               {"hits": pages.hits, "misses": pages.misses}, "counter")
        if otlp_counters is not None:
            lines += render_gauges("claimtrail_otlp_items", "OTLP receiver counters: requests answered, records "
                                   "kept, parts, ignored and rejected items, requests refused as malformed or "
                                   "too_large (413), sink_errors.", otlp_counters.snapshot(), "counter")
        return PlainTextResponse("\n".join(lines) + "\n", media_type="text/plain; version=0.0.4")

    return app
