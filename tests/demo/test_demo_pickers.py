"""On the demo's own data, every model the Decision explorer offers is one the API explains."""

from __future__ import annotations

import httpx

from audit.records import Track, validate_record
from dashboards.explorer import why_models
from tests.demo.conftest import Demo


def test_every_offered_model_gets_an_answer_not_a_400(demo: Demo) -> None:
    items = httpx.get(f"{demo.api}/v1/decisions", params={"limit": 40}, timeout=60).json()["items"]
    records = [validate_record(item) for item in items]
    assert any("|" in t.model for r in records for t in r.tiers), "the demo should have a multi-model tier"
    # the ten newest decisions, and ten of DRA pods (a device-plugin pod's offers only the model of
    # the GPUs it got, or none)
    dra = [r for r in records if r.track != Track.DEVICE_PLUGIN][:10]
    assert len(dra) == 10
    asked = 0
    for record in {r.decision_id: r for r in records[:10] + dra}.values():
        for model in why_models(record):
            answer = httpx.get(f"{demo.api}/v1/decisions/{record.decision_id}/why", params={"model": model}, timeout=60)
            assert answer.status_code == 200, (model, answer.text)
            asked += 1
    assert asked >= 30  # H100, A100 and L40S (or L4) for each of the ten DRA decisions
