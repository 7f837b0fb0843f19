"""Every dependency of every route runs on the event loop: a plain ``def`` dependency would be
handed to the thread pool and back on each request, which under many concurrent readers cost the
loop more than the answers."""

from __future__ import annotations

import inspect
from typing import Any

from fastapi.routing import APIRoute

from audit.api.app import create_app
from audit.api.auth import AuthConfig
from audit.api.deps import Settings
from audit.cli.cmd_serve import _otlp_receiver as otlp_routes
from audit.store.queries import AuditStore


def _dependencies(dependant: Any) -> list[Any]:
    out = []
    for sub in dependant.dependencies:
        out.append(sub.call)
        out += _dependencies(sub)
    return out


def _routes(app: Any) -> list[Any]:
    """The app's routes with their dependants, included routers' routes too (each with the
    dependencies of the app and of its router, as requests see them)."""
    out = []
    for route in app.routes:
        if isinstance(route, APIRoute):
            out.append(route)
        elif hasattr(route, "effective_route_contexts"):
            out += list(route.effective_route_contexts())
    return out


def test_every_route_dependency_is_a_coroutine_function(store: AuditStore) -> None:
    app = create_app(store, Settings(auth=AuthConfig(insecure_local=True)), receiver=otlp_routes)
    routes = _routes(app)
    paths = {r.path for r in routes}
    assert {"/v1/decisions/{decision}", "/v1/decisions", "/v1/ingest/records", "/v1/traces"} <= paths
    calls = {(r.path, call) for r in routes for call in _dependencies(r.dependant)}
    assert len({call for _, call in calls}) >= 6  # the caller, store, settings, parameter check, ...
    plain = sorted(f"{path}: {getattr(call, '__name__', call)}" for path, call in calls
                   if not inspect.iscoroutinefunction(call))
    assert plain == []
