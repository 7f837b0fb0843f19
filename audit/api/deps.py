"""Per-request context: the store, the caller, and server settings held on ``app.state``.

The dependencies are ``async def`` although they never wait: FastAPI runs a plain ``def``
dependency in its thread pool, one hand-off per dependency and request, which under many
concurrent readers cost the event loop more than the answers themselves. These only look up
``app.state`` and a token digest, so they run on the loop.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fastapi import Request

from audit.api.auth import AuthConfig, Principal
from audit.api.limits import CallerLimits
from audit.api.problems import Problem
from audit.migration import Thresholds

DEFAULT_MAX_BODY = 64 * 1024 * 1024


@dataclass(frozen=True)
class Settings:
    auth: AuthConfig
    max_body_bytes: int = DEFAULT_MAX_BODY
    replay_sync_limit: int = 200  # decisions replayed within a request; more start a job
    replay_job_step: int = 1000  # decisions a job replays between two stored progress updates
    migration_thresholds: Thresholds | None = None  # None: the shipped deploy/migration/thresholds.yaml
    limits: CallerLimits = CallerLimits()  # per caller: rate, requests in flight, body and URL sizes


async def principal(request: Request) -> Principal:
    """FastAPI dependency: the authenticated caller, or a 401 problem."""
    settings: Settings = request.app.state.settings
    who = settings.auth.authenticate(request.headers.get("authorization"))
    if who is None:
        raise Problem("unauthorized", "a valid bearer token is required (Authorization: Bearer <token>)")
    return who


async def store(request: Request) -> Any:
    return request.app.state.store


async def settings(request: Request) -> Settings:
    s: Settings = request.app.state.settings
    return s


def tenant_filter(who: Principal, requested: str | None) -> str | None:
    """The tenant a query is restricted to. A tenant naming another tenant learns nothing: 404."""
    if who.admin:
        return requested
    if requested is not None and requested != who.tenant:
        raise Problem("not-found", f"tenant {requested!r} not found")
    return who.tenant
