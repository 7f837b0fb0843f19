"""Per-caller limits: request sizes on every endpoint, a request rate and a share of the server.

Each caller (a tenant, the admins, or an unauthenticated address) has a token bucket of
``rate`` requests per second holding at most ``burst``, and may have at most ``in_flight``
requests running at once; beyond either it gets 429 with Retry-After. The in-flight bound is the
fair share: the server's worker threads can never all be held by one tenant's slow queries, so
another tenant's lookup still finds one free. Bodies are bounded on every route (``body_bytes``;
the ingest and OTLP routes, which take bulk data, apply their own larger limit) by Content-Length
and while they stream in (413), and so are URLs (414). Health and metrics endpoints are exempt,
so probes and scrapes never compete with callers.

This is plain ASGI middleware: it sees a request before any route runs and counts it as in
flight until its response has been sent.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any

from starlette.exceptions import HTTPException

from audit.api.problems import problem_response

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

EXEMPT = ("/healthz", "/readyz", "/metrics")
BULK_PREFIXES = ("/v1/ingest/", "/v1/traces", "/v1/logs")  # limited by the server's --max-body-mb instead
# routes that read their body themselves up to a limit of their own, answering 413 with what it is
# (POST /v1/replay: a bounded number of decision ids and a policy document, audit.api.routes_replay)
SELF_BOUNDED = frozenset({"/v1/replay"})


@dataclass(frozen=True)
class CallerLimits:
    rate: float = 1000.0  # requests per second per caller, sustained
    burst: int = 2000  # requests a caller may make at once after a quiet spell
    in_flight: int = 16  # requests per caller running at the same time
    body_bytes: int = 1 << 20  # request body on routes other than ingest and OTLP
    url_bytes: int = 8192  # path and query string


class _Bucket:
    __slots__ = ("tokens", "stamp", "running")

    def __init__(self, burst: int, now: float) -> None:
        self.tokens = float(burst)
        self.stamp = now
        self.running = 0


MAX_CALLERS = 10_000  # buckets kept; idle, full ones are dropped beyond it (they hold nothing)


class Admission:
    """Buckets and in-flight counts per caller; ``clock`` is injectable for the tests of the arithmetic."""

    def __init__(self, limits: CallerLimits, clock: Callable[[], float] = time.monotonic) -> None:
        self.limits = limits
        self._clock = clock
        self._lock = threading.Lock()
        self._buckets: dict[str, _Bucket] = {}

    def enter(self, caller: str) -> tuple[bool, int, str]:
        """(admitted, seconds to wait before retrying, why not)."""
        lim = self.limits
        with self._lock:
            now = self._clock()
            bucket = self._buckets.get(caller)
            if bucket is None:
                if len(self._buckets) >= MAX_CALLERS:
                    self._forget_idle(now)
                bucket = self._buckets[caller] = _Bucket(lim.burst, now)
            bucket.tokens = min(float(lim.burst), bucket.tokens + (now - bucket.stamp) * lim.rate)
            bucket.stamp = now
            if bucket.running >= lim.in_flight:
                return False, 1, f"{lim.in_flight} requests of this caller are already running"
            if bucket.tokens < 1.0:
                wait = max(1, math.ceil((1.0 - bucket.tokens) / lim.rate))
                return False, wait, f"more than {lim.rate:g} requests per second (burst {lim.burst}) from this caller"
            bucket.tokens -= 1.0
            bucket.running += 1
            return True, 0, ""

    def _forget_idle(self, now: float) -> None:
        """Drop buckets with nothing running that have refilled: a new bucket would be the same."""
        lim = self.limits
        for name in [n for n, b in self._buckets.items()
                     if b.running == 0 and b.tokens + (now - b.stamp) * lim.rate >= lim.burst]:
            del self._buckets[name]

    def leave(self, caller: str) -> None:
        with self._lock:
            bucket = self._buckets.get(caller)
            if bucket is not None:
                bucket.running = max(0, bucket.running - 1)


class LimitMiddleware:
    """``caller(scope) -> str`` names who is asking (tenant, admin, or the client address)."""

    def __init__(self, app: ASGIApp, admission: Admission, caller: Callable[[Scope], str]) -> None:
        self.app = app
        self.admission = admission
        self.caller = caller

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in EXEMPT:
            await self.app(scope, receive, send)
            return
        lim = self.admission.limits
        path = scope["path"]
        if len(path.encode()) + len(scope.get("query_string", b"")) > lim.url_bytes:
            await _answer(scope, send, "uri-too-long", f"the URL exceeds the limit of {lim.url_bytes} bytes")
            return
        cap = None if path.startswith(BULK_PREFIXES) or path in SELF_BOUNDED else lim.body_bytes
        if cap is not None:
            declared = header(scope, b"content-length")
            if declared.isdigit() and int(declared) > cap:
                await _answer(scope, send, "payload-too-large",
                              f"request body of {declared} bytes exceeds the limit of {cap} bytes for {path}")
                return
        who = self.caller(scope)
        admitted, wait, why = self.admission.enter(who)
        if not admitted:
            await _answer(scope, send, "too-many-requests", f"{why}; retry after {wait} s",
                          {"Retry-After": str(wait)})
            return
        try:
            await self.app(scope, _capped(receive, cap, path) if cap is not None else receive, send)
        finally:
            self.admission.leave(who)


def _capped(receive: Receive, cap: int, path: str) -> Receive:
    """``receive`` that stops a body without Content-Length at ``cap``: the route's body parsing
    passes an HTTPException through, and the problem handlers answer it as 413."""
    received = 0

    async def wrapped() -> Message:
        nonlocal received
        message = await receive()
        received += len(message.get("body", b""))
        if received > cap:
            raise HTTPException(413, f"request body exceeds the limit of {cap} bytes for {path}")
        return message

    return wrapped


def header(scope: Scope, name: bytes) -> str:
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            return bytes(value).decode("latin-1").strip()
    return ""


async def _answer(scope: Scope, send: Send, kind: str, detail: str, headers: dict[str, str] | None = None) -> None:
    response = problem_response(kind, detail, scope.get("path", ""), headers=headers)
    await response({"type": "http"}, _no_body, send)


async def _no_body() -> Message:
    return {"type": "http.disconnect"}
