"""A decision span (or a part of one) whose ids OTLP calls invalid is rejected on its own, in
``partial_success`` naming the field, and not stored; the rest of the request is kept. OTLP/JSON
and protobuf agree: the same ids give the same answer. Only a JSON id that is not hex at all
leaves the request undecodable, which is a 400 for the whole request.

Real ``claimtrail serve`` on loopback with an embedded chDB store; the requests are built with the
``opentelemetry-proto`` messages."""

from __future__ import annotations

import json
import re

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from audit.records import DecisionRecord, record_text
from audit.telemetry import schema as s
from ingest.otlp.decode import records_from_traces
from tests.api.conftest import Server, own_server
from tests.otlp.payloads import otlp_json, span, traces
from tests.telemetry.records_factory import make_record

HEADERS = {"protobuf": {"content-type": "application/x-protobuf"}, "json": {"content-type": "application/json"}}


server = own_server("otlp-ids")


def _counter(server: Server, name: str) -> float:
    found = re.search(rf'^claimtrail_otlp_items{{counter="{name}"}} (\S+)$', server.get("/metrics").text, re.M)
    assert found is not None
    return float(found.group(1))


ROOT, TIER = s.ROOT_SPAN, f"{s.TIER_SPAN} H100"
NOT_HEX = b"not hex"  # written into the JSON as the id "zz"
# (encoding, the name of the span given bad ids, its ids, status, the error reported)
INVALID = {
    "protobuf-trace-id-of-3-bytes": ("protobuf", ROOT, {"trace_id": b"\x01\x02\x03"}, 200,
                                     "span 'dra.allocate': trace_id: 3 bytes, an OTLP trace_id is 16"),
    "protobuf-empty-trace-id": ("protobuf", ROOT, {"trace_id": b""}, 200,
                                "span 'dra.allocate': trace_id: 0 bytes, an OTLP trace_id is 16"),
    "protobuf-all-zero-trace-id": ("protobuf", ROOT, {"trace_id": bytes(16)}, 200,
                                   "span 'dra.allocate': trace_id: all zero, which OTLP defines as invalid"),
    "protobuf-empty-span-id": ("protobuf", ROOT, {"span_id": b""}, 200,
                               "span 'dra.allocate': span_id: 0 bytes, an OTLP span_id is 8"),
    "protobuf-all-zero-span-id": ("protobuf", ROOT, {"span_id": bytes(8)}, 200,
                                  "span 'dra.allocate': span_id: all zero, which OTLP defines as invalid"),
    "protobuf-parent-of-5-bytes": ("protobuf", ROOT, {"parent_span_id": b"\x01" * 5}, 200,
                                   "span 'dra.allocate': parent_span_id: 5 bytes, an OTLP parent_span_id is 8 "
                                   "(or empty for a root span)"),
    "protobuf-tier-span-of-a-kept-decision": ("protobuf", TIER, {"span_id": bytes(8)}, 200,
                                              "span 'dra.allocate.tier H100': span_id: all zero, which OTLP "
                                              "defines as invalid"),
    "json-trace-id-of-3-bytes": ("json", ROOT, {"trace_id": b"\x01\x02\x03"}, 200,
                                 "span 'dra.allocate': trace_id: 3 bytes, an OTLP trace_id is 16"),
    "json-empty-span-id": ("json", ROOT, {"span_id": b""}, 200,
                           "span 'dra.allocate': span_id: 0 bytes, an OTLP span_id is 8"),
    "json-all-zero-trace-id": ("json", ROOT, {"trace_id": bytes(16)}, 200,
                               "span 'dra.allocate': trace_id: all zero, which OTLP defines as invalid"),
    "json-id-that-is-not-hex": ("json", ROOT, {"trace_id": NOT_HEX}, 400,
                                "ExportTraceServiceRequest.resourceSpans[0].scopeSpans[0].spans[1].traceId: "
                                "'zz' is not a hex id"),
}


def _body(encoding: str, good: DecisionRecord, bad: DecisionRecord, name: str, ids: dict[str, bytes]) -> bytes:
    """A valid decision span, then the span given the bad ids: a second decision, or the first
    decision's tier span."""
    attrs = {s.DECISION_ID: good.decision_id} if name == TIER else {s.RECORD: record_text(bad)}
    broken = span(name, attrs, span_id=2)
    for field, value in ids.items():
        setattr(broken, field, value)
    request = traces(span(ROOT, {s.RECORD: record_text(good)}, span_id=1), broken)
    if encoding == "protobuf":
        return request.SerializeToString()
    data = json.loads(otlp_json(request))
    if ids.get("trace_id") == NOT_HEX:
        data["resourceSpans"][0]["scopeSpans"][0]["spans"][1]["traceId"] = "zz"
    return json.dumps(data).encode()


@pytest.mark.slow
@pytest.mark.parametrize(("encoding", "name", "ids", "status", "error"), INVALID.values(), ids=INVALID.keys())
def test_a_span_with_invalid_ids_is_rejected_alone(
    server: Server, request: pytest.FixtureRequest, encoding: str, name: str, ids: dict[str, bytes], status: int,
    error: str,
) -> None:
    cluster = f"ids-{request.node.callspec.id}"
    good, bad = make_record(0, cluster=cluster), make_record(1, cluster=cluster)
    rejected, malformed = _counter(server, "rejected"), _counter(server, "malformed")

    response = server.post("/v1/traces", content=_body(encoding, good, bad, name, ids), headers=HEADERS[encoding])

    assert response.status_code == status
    if status == 200:
        if encoding == "protobuf":
            partial = ExportTraceServiceResponse.FromString(response.content).partial_success
            answer = (partial.rejected_spans, partial.error_message)
        else:
            body = response.json()["partialSuccess"]
            answer = (int(body["rejectedSpans"]), body["errorMessage"])
        assert answer == (1, error)
        assert (_counter(server, "rejected") - rejected, _counter(server, "malformed") - malformed) == (1, 0)
        stored = {good.decision_id: 200, bad.decision_id: 404}  # (a tier span's case sends no second decision)
    else:  # the request cannot be decoded: nothing in it is kept
        assert response.json()["message"] == error
        assert (_counter(server, "rejected") - rejected, _counter(server, "malformed") - malformed) == (0, 1)
        stored = {good.decision_id: 404, bad.decision_id: 404}
    assert {d: server.get(f"/v1/decisions/{d}").status_code for d in stored} == stored


def test_a_span_of_another_service_is_ignored_whatever_its_ids() -> None:
    """Spans outside the schema are not the receiver's to judge: they are counted as ignored,
    as before, and never rejected (the decode step alone, no server needed)."""
    foreign = span("GET /healthz", {"http.route": "/healthz"})
    foreign.trace_id, foreign.span_id = b"\x01", b""
    result = records_from_traces(traces(foreign))
    assert (result.ignored, result.rejected) == (1, [])
