"""RFC 9457 problem details: the one error shape the API returns.

Each kind of failure has a stable ``type`` URI clients can switch on; ``title`` is fixed per
type and ``detail`` names the object and field at fault. Handlers turn request-validation
errors and unexpected exceptions into the same shape so no response ever carries a traceback.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

PROBLEM_BASE = "https://claimtrail.io/problems/"
PROBLEM_MEDIA_TYPE = "application/problem+json"

# type slug -> (status, title); the slugs are part of the API contract.
PROBLEM_KINDS: dict[str, tuple[int, str]] = {
    "bad-request": (400, "Bad request"),
    "invalid-parameter": (400, "Invalid query parameter"),
    "malformed-body": (400, "Malformed request body"),
    "unauthorized": (401, "Authentication required"),
    "forbidden": (403, "Not allowed for this caller"),
    "not-found": (404, "Not found"),
    "method-not-allowed": (405, "Method not allowed"),
    "payload-too-large": (413, "Request body too large"),
    "unsupported-media-type": (415, "Unsupported content encoding"),
    "uri-too-long": (414, "URI too long"),
    "too-many-requests": (429, "Too many requests"),
    "unknown-model": (422, "Unknown device model"),
    "unexplainable": (422, "The recorded world cannot answer this question"),
    "not-implemented": (501, "Not implemented"),
    "unavailable": (503, "Service unavailable"),
    "internal": (500, "Internal error"),
}

log = logging.getLogger("claimtrail.api")


class Problem(Exception):
    """Raised anywhere in a request to answer with a problem document of a known kind."""

    def __init__(self, kind: str, detail: str, headers: dict[str, str] | None = None, **extra: Any) -> None:
        if kind not in PROBLEM_KINDS:
            raise ValueError(f"unknown problem kind {kind!r}")
        super().__init__(detail)
        self.kind = kind
        self.detail = detail
        self.headers = dict(headers or {})
        self.extra = extra

    @property
    def status(self) -> int:
        return PROBLEM_KINDS[self.kind][0]


def problem_body(kind: str, detail: str, instance: str = "", **extra: Any) -> dict[str, Any]:
    status, title = PROBLEM_KINDS[kind]
    body: dict[str, Any] = {"type": PROBLEM_BASE + kind, "title": title, "status": status, "detail": detail}
    if instance:
        body["instance"] = instance
    body.update(extra)
    return body


# A temporary condition tells the client when to come back (RFC 9110 §10.2.3): without it a
# client cannot tell "retry shortly" from "give up", and a 503 without it reads like an outage.
RETRY_AFTER_SECONDS = {"unavailable": 1, "too-many-requests": 1}


def problem_response(kind: str, detail: str, instance: str = "", headers: dict[str, str] | None = None,
                     **extra: Any) -> JSONResponse:
    body = problem_body(kind, detail, instance, **extra)
    headers = dict(headers or {})
    if kind in RETRY_AFTER_SECONDS and not any(k.lower() == "retry-after" for k in headers):
        headers["Retry-After"] = str(RETRY_AFTER_SECONDS[kind])
    return JSONResponse(body, status_code=body["status"], media_type=PROBLEM_MEDIA_TYPE, headers=headers)


_STATUS_KIND = {400: "bad-request", 401: "unauthorized", 403: "forbidden", 404: "not-found",
                405: "method-not-allowed", 413: "payload-too-large", 414: "uri-too-long", 415: "unsupported-media-type",
                429: "too-many-requests", 501: "not-implemented", 503: "unavailable"}


def _describe_validation(exc: RequestValidationError) -> str:
    parts = []
    for err in exc.errors()[:5]:
        loc = [str(p) for p in err.get("loc", ())]
        where = f"{loc[0]} parameter {'.'.join(loc[1:])!r}" if len(loc) > 1 else ".".join(loc)
        parts.append(f"{where}: {err.get('msg', 'invalid')}")
    return "; ".join(parts) or "invalid request"


def install_handlers(app: FastAPI) -> None:
    """Route every error path through problem+json."""

    @app.exception_handler(Problem)
    async def _problem(request: Request, exc: Problem) -> JSONResponse:
        headers = {"WWW-Authenticate": "Bearer"} if exc.kind == "unauthorized" else {}
        return problem_response(exc.kind, exc.detail, request.url.path, headers={**headers, **exc.headers},
                                **exc.extra)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        in_body = any((err.get("loc") or ("",))[0] == "body" for err in exc.errors())
        return problem_response("malformed-body" if in_body else "invalid-parameter", _describe_validation(exc),
                                request.url.path)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        kind = _STATUS_KIND.get(exc.status_code, "bad-request" if exc.status_code < 500 else "internal")
        # the router's 405 names the allowed methods in Allow (RFC 9110 §15.5.6): keep its headers
        return problem_response(kind, str(exc.detail), request.url.path, headers=dict(exc.headers or {}))

    @app.exception_handler(Exception)
    async def _bug(request: Request, exc: Exception) -> JSONResponse:
        # Only true defects reach this point: user mistakes are Problems raised on purpose.
        log.exception("unhandled error", extra={"path": request.url.path})
        return problem_response("internal", "an internal error occurred; it has been logged", request.url.path)
