"""docs/otlp.md stays true: its example is accepted, and every schema key is documented."""

from __future__ import annotations

import re
from pathlib import Path

import httpx

from audit.telemetry import schema as s
from tests.otlp.loopback import running_receiver

DOC = (Path(__file__).resolve().parents[2] / "docs" / "otlp.md").read_text()


def test_documented_example_becomes_a_record() -> None:
    example = re.search(r"```json\n(.*?)```", DOC, re.S)
    assert example is not None
    with running_receiver() as rx:
        response = httpx.post(
            rx.url + "/v1/traces", content=example.group(1).encode(), headers={"content-type": "application/json"}
        )
    assert response.status_code == 200
    assert response.json() == {}
    (record,) = rx.sink.records
    assert (record.pod, record.allocated_model, record.fallback) == ("trainer-0", "A100", True)
    assert record.output_digest == record.compute_output_digest()


def test_every_schema_name_is_documented() -> None:
    names = {
        value
        for key, value in vars(s).items()
        if key.isupper() and isinstance(value, str) and key not in {"PREFIX", "INSTRUMENTATION_SCOPE"}
    }
    # prefixes are documented with their placeholder (e.g. claimtrail.tier.reason.<code>)
    missing = sorted(n for n in names if n not in DOC and f"{n}<" not in DOC)
    assert missing == []
