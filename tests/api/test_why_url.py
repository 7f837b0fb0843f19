"""The why URL a decision trace carries is answered by the audit API for that decision."""

from __future__ import annotations

import httpx

from audit.telemetry.shape import why_url
from tests.api import factory
from tests.api.conftest import Server, auth


def test_a_traces_why_url_is_the_apis_answer_for_its_decision(server: Server) -> None:
    record = factory.FALLBACK
    url = why_url(server.base + "/", record)
    assert url == f"{server.base}/v1/decisions/{record.decision_id}/why?model={record.preferred_model}"
    answer = httpx.get(url, headers=auth("admin"), timeout=60)
    assert answer.status_code == 200
    assert answer.json() == server.get(f"/v1/decisions/{record.decision_id}/why", model=record.preferred_model).json()
