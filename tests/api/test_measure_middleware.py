"""Every request is counted by route template and status, a defect below the handlers included.

The app is served by a real uvicorn on loopback (in a thread, so that a route that fails on
purpose can be added); the counts are read back from ``/metrics``.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from audit.api.app import create_app
from audit.api.auth import AuthConfig
from audit.api.deps import Settings
from audit.store.queries import AuditStore
from tests.otlp.loopback import serve


@pytest.fixture
def base(store: AuditStore) -> Iterator[str]:
    app = create_app(store, Settings(auth=AuthConfig(insecure_local=True)))

    @app.get("/v1/defect")
    def defect() -> None:
        raise RuntimeError("a defect below the handlers")

    with serve(app, lifespan="on") as base:
        yield base


def _count(base: str, method: str, route: str, status: int) -> int:
    prefix = f'claimtrail_http_requests_total{{method="{method}",route="{route}",status="{status}"}} '
    text = httpx.get(f"{base}/metrics", timeout=30).text
    return next((int(float(line.split()[-1])) for line in text.splitlines() if line.startswith(prefix)), 0)


@pytest.mark.parametrize(
    ("path", "route", "status"),
    [
        ("/healthz", "/healthz", 200),
        ("/v1/decisions/no-such-decision", "/v1/decisions/{decision}", 404),
        ("/v1/decisions?bogus=1", "/v1/decisions", 400),
        ("/no/such/path", "(unmatched)", 404),
        ("/v1/defect", "/v1/defect", 500),
    ],
    ids=["ok", "not-found", "bad-parameter", "unmatched", "defect"],
)
def test_each_request_is_counted_under_its_route_template_and_status(base: str, path: str, route: str,
                                                                      status: int) -> None:
    before = _count(base, "GET", route, status)
    answer = httpx.get(f"{base}{path}", timeout=30)
    assert answer.status_code == status
    assert _count(base, "GET", route, status) == before + 1


def test_a_defect_below_the_handlers_answers_problem_json(base: str) -> None:
    answer = httpx.get(f"{base}/v1/defect", timeout=30)
    assert answer.status_code == 500
    assert answer.headers["content-type"].startswith("application/problem+json")
    body = answer.json()
    assert body["detail"] == "an internal error occurred; it has been logged"
    assert "a defect below the handlers" not in answer.text
