"""The OTLP requests ``DecisionExporter`` puts on the wire for a fixed set of decisions are pinned
byte for byte: a change to the encoder, its caches or its batching that moves a single byte of a
span or log record fails here, whatever the receiver would make of it.

The decisions are engine records kept verbatim (``tests/fixtures/telemetry/engine-decisions.jsonl``:
allocations of one to eight devices, errors with the retries that link to them, blockers, waits,
verdict details), the one-pass writer's table of unusual decisions, and decisions with engine
verdicts and pod labels, which go the general way. Each configuration exports them all over HTTP
on loopback, in small batches so requests are cut mid-decision and at flush; metrics carry the
wall clock and are left out. The resource is fixed, so an SDK upgrade does not move the pin.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from opentelemetry.sdk.resources import Resource

from audit.records import DecisionRecord
from audit.telemetry import DecisionExporter
from tests.otlp.loopback import running_receiver
from tests.telemetry.records_factory import make_record
from tests.telemetry.test_decision_wire import WRITTEN_IN_ONE_PASS
from tests.telemetry.test_direct_spans import _evidence

ENGINE_DECISIONS = Path(__file__).resolve().parents[1] / "fixtures" / "telemetry" / "engine-decisions.jsonl"
RESOURCE = Resource({"service.name": "claimtrail-pinned", "deployment.environment": "test"})
BATCHES = {"OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "37", "OTEL_BLRP_MAX_EXPORT_BATCH_SIZE": "23",
           "OTEL_BSP_SCHEDULE_DELAY": "600000", "OTEL_BLRP_SCHEDULE_DELAY": "600000",
           "OTEL_METRIC_EXPORT_INTERVAL": "3600000"}
CONFIGURATIONS = {
    "defaults": {},
    "events-both-salted-redacted-with-why-urls": {
        "CLAIMTRAIL_OTEL_VERDICTS": "both", "CLAIMTRAIL_OTEL_ID_SALT": "re-export-2",
        "CLAIMTRAIL_OTEL_REDACT": "hash_pod_names,drop_labels", "CLAIMTRAIL_OTEL_REDACT_SALT": "pinned-salt",
        "CLAIMTRAIL_API": "http://claimtrail.audit:8080", "CLAIMTRAIL_OTEL_MAX_VERDICTS": "1"},
}
# sha256 of every traces request body, then every logs request body, in the order sent; requests sent
PINNED = {
    "defaults": ("6f1b2032500e2975345110a5dcbae3e726ab3c0e500ff25cb2a184e3ca92b060",
                 "10f8e63fb3810d7689a120cc4eea435ab62dafcefdf07aad05d1247981aa790c", (7, 6)),
    "events-both-salted-redacted-with-why-urls": ("bdc5d13c8287e8fbb09501c2696b890083e7a01203cf1e4b8a04a778fe56859a",
                                                  "ae0e12721c138779ec2b399647ea3eed8abb8b345902c7fa39d3cda509053332",
                                                  (7, 3)),
}


def _decisions() -> list[tuple[DecisionRecord, list[object], dict[str, str] | None]]:
    engine = [DecisionRecord.from_dict(json.loads(line)) for line in ENGINE_DECISIONS.read_text().splitlines()]
    table = [record for records in WRITTEN_IN_ONE_PASS.values() for record in records]
    decisions: list[tuple[DecisionRecord, list[object], dict[str, str] | None]] = [(r, [], None) for r in engine + table]
    decisions += [(make_record(90), list(_evidence()), None),
                  (make_record(91), [], {"team": "vision", "app.kubernetes.io/name": "trainer"})]
    return decisions


@pytest.mark.parametrize("configuration", list(CONFIGURATIONS))
def test_exported_request_bytes_of_fixed_decisions_do_not_move(configuration: str) -> None:
    with running_receiver() as rx:
        environ = {"OTEL_EXPORTER_OTLP_ENDPOINT": rx.url, **BATCHES, **CONFIGURATIONS[configuration]}
        with DecisionExporter(environ, resource=RESOURCE) as exporter:
            for record, verdicts, labels in _decisions():
                exporter.export(record, verdicts, labels)  # type: ignore[arg-type]
            report = exporter.flush()
        traces = [body.plain() for body in rx.capture.bodies("/v1/traces")]
        logs = [body.plain() for body in rx.capture.bodies("/v1/logs")]
    assert report.errors == ()
    digests = (hashlib.sha256(b"".join(traces)).hexdigest(), hashlib.sha256(b"".join(logs)).hexdigest(),
               (len(traces), len(logs)))
    assert digests == PINNED[configuration]
