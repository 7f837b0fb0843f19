"""A decision sent over OTLP that the store would refuse (a time without an offset, a number
outside its column, an empty decision id) is refused when it arrives, as the ingest endpoints
refuse it: a rejected item in ``partial_success`` naming the decision and the field, counted as
rejected and quarantined once, while the rest of the request is kept.

Real ``claimtrail serve`` on loopback with an embedded chDB store; the requests are OTLP protobuf
built with the ``opentelemetry-proto`` messages."""

from __future__ import annotations

import dataclasses
import re

import pytest
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from audit.records import DecisionRecord, record_text
from audit.telemetry import schema as s
from tests.api.conftest import Server, own_server
from tests.otlp.payloads import log, logs, span, traces
from tests.telemetry.records_factory import make_record

PB = {"content-type": "application/x-protobuf"}

server = own_server("otlp-admission")


def _record(name: str, n: int = 0, **changes: object) -> DecisionRecord:
    """A decision of its own cluster, changed and sealed again: its digest is right, so only the
    changed value can be what refuses it."""
    record = dataclasses.replace(make_record(n, cluster=f"otlp-admission-{name}"), **changes)
    record.output_digest = record.compute_output_digest()
    return record


def _counter(server: Server, family: str, name: str) -> float:
    found = re.search(rf'^{family}{{counter="{name}"}} (\S+)$', server.get("/metrics").text, re.M)
    assert found is not None, f"{family} {name} not in /metrics"
    return float(found.group(1))


# case: (changes to a valid record, the error after "span 'dra.allocate': decision <id>: ")
REFUSED = {
    "time-without-offset": ({"time": "2026-03-14T09:26:53"},
                            "time: '2026-03-14T09:26:53': the time needs a zone (Z or +hh:mm)"),
    "time-not-a-time": ({"time": "yesterday"}, "time: 'yesterday' is not an ISO 8601 time like 2026-11-01T08:00:00.000Z"),
    "seq-past-uint64": ({"seq": 2**64}, "seq: 18446744073709551616 is outside 0..18446744073709551615"),
    "seq-negative": ({"seq": -1}, "seq: -1 is outside 0..18446744073709551615"),
    "wait-ms-past-uint64": ({"wait_ms": 2**64}, "wait_ms: 18446744073709551616 is outside 0..18446744073709551615"),
    "attempt-past-uint16": ({"attempt": 2**16}, "attempt: 65536 is outside 0..65535"),
}


@pytest.mark.slow
@pytest.mark.parametrize(("changes", "error"), REFUSED.values(), ids=REFUSED.keys())
def test_a_decision_the_store_would_refuse_is_a_rejected_span(
    server: Server, request: pytest.FixtureRequest, changes: dict[str, object], error: str
) -> None:
    case = request.node.callspec.id
    good, bad = _record(case, 0), _record(case, 1, **changes)
    before = {name: _counter(server, "claimtrail_otlp_items", name) for name in ("records", "rejected")}
    quarantined = _counter(server, "claimtrail_store", "writer_quarantined")

    body = traces(span(s.ROOT_SPAN, {s.RECORD: record_text(good)}, span_id=1),
                  span(s.ROOT_SPAN, {s.RECORD: record_text(bad)}, span_id=2))
    response = server.post("/v1/traces", content=body.SerializeToString(), headers=PB)

    assert response.status_code == 200
    partial = ExportTraceServiceResponse.FromString(response.content).partial_success
    assert (partial.rejected_spans, partial.error_message) == (
        1, f"span 'dra.allocate': decision {bad.decision_id}: {error}")
    after = {name: _counter(server, "claimtrail_otlp_items", name) for name in ("records", "rejected")}
    assert {name: after[name] - before[name] for name in after} == {"records": 1, "rejected": 1}
    assert _counter(server, "claimtrail_store", "writer_quarantined") - quarantined == 1
    assert {r.decision_id: server.get(f"/v1/decisions/{r.decision_id}").status_code for r in (good, bad)} == {
        good.decision_id: 200, bad.decision_id: 404}


@pytest.mark.slow
def test_a_decision_without_a_decision_id_is_a_rejected_span_naming_the_field(server: Server) -> None:
    anonymous = _record("no-id", decision_id="")
    rejected = _counter(server, "claimtrail_otlp_items", "rejected")

    body = traces(span(s.ROOT_SPAN, {s.RECORD: record_text(anonymous)}))
    response = server.post("/v1/traces", content=body.SerializeToString(), headers=PB)

    partial = ExportTraceServiceResponse.FromString(response.content).partial_success
    assert (response.status_code, partial.rejected_spans, partial.error_message) == (
        200, 1, "span 'dra.allocate': decision_id: must not be empty")
    assert _counter(server, "claimtrail_otlp_items", "rejected") - rejected == 1


@pytest.mark.slow
def test_a_decision_log_record_the_store_would_refuse_is_rejected_the_same_way(server: Server) -> None:
    bad = _record("log", seq=-1)
    rejected = _counter(server, "claimtrail_otlp_items", "rejected")

    body = logs(log(s.DECISION_EVENT, {s.RECORD: record_text(bad)}))
    response = server.post("/v1/logs", content=body.SerializeToString(), headers=PB)

    partial = ExportLogsServiceResponse.FromString(response.content).partial_success
    assert (response.status_code, partial.rejected_log_records, partial.error_message) == (
        200, 1, f"log record: decision {bad.decision_id}: seq: -1 is outside 0..18446744073709551615")
    assert _counter(server, "claimtrail_otlp_items", "rejected") - rejected == 1
    assert server.get(f"/v1/decisions/{bad.decision_id}").status_code == 404
