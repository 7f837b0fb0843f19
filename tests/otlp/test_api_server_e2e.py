"""End to end: our exporter sends to a real ``claimtrail serve`` (embedded chDB store), whose
mounted OTLP receiver stores the decisions; the API then returns them with the same digest."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.otlp.loopback import telemetry_from_env
from tests.telemetry.records_factory import make_record

pytest.importorskip("audit.store.queries", reason="the store is not in this tree yet")
from tests.api.conftest import TOKENS, start_server, stop  # noqa: E402


@pytest.mark.slow
def test_decisions_exported_over_otlp_are_served_by_the_api(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    server, proc = start_server(tmp_path)
    try:
        originals = [make_record(i, cluster="otlp-e2e") for i in range(3)]
        telemetry = telemetry_from_env(
            monkeypatch,
            {
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": server.base + "/v1/traces",
                "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT": server.base + "/v1/logs",
                "OTEL_EXPORTER_OTLP_COMPRESSION": "gzip",
                # header values are percent-encoded in OTEL_EXPORTER_OTLP_HEADERS
                "OTEL_EXPORTER_OTLP_HEADERS": f"Authorization=Bearer%20{TOKENS['admin']}",
            },
        )
        telemetry.meter_provider.shutdown()  # the API serves no OTLP metrics endpoint
        for record in originals:
            telemetry.export(record)
        telemetry.tracer_provider.shutdown()
        telemetry.logger_provider.shutdown()
        auth = {"Authorization": f"Bearer {TOKENS['admin']}"}
        served = [
            httpx.get(f"{server.base}/v1/decisions/{r.decision_id}", headers=auth, timeout=60) for r in originals
        ]
        unauthorized = httpx.post(server.base + "/v1/traces", content=b"", timeout=60,
                                  headers={"content-type": "application/x-protobuf"})
    finally:
        stop(proc)
    assert [r.status_code for r in served] == [200, 200, 200]
    assert [r.json()["output_digest"] for r in served] == [r.output_digest for r in originals]
    assert unauthorized.status_code == 401
