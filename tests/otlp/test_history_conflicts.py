"""A decision sent over OTLP whose id is already taken by a different record (in the store, or
earlier in the same request) is not kept: the sender gets it back as a rejected span naming the
decision, which copy was kept (the stored one, or the earlier one of the request) and the
``output_digest`` of both, as the ingest endpoints report it, and the receiver counts it as
rejected. An identical re-send, or the same decision measured again, is absorbed silently.

Real ``claimtrail serve`` on loopback with an embedded chDB store; the requests are OTLP protobuf
built with the ``opentelemetry-proto`` messages."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

import httpx
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from audit.records import DecisionRecord, record_text
from audit.telemetry import schema as s
from tests.api.conftest import Server, own_server
from tests.otlp.payloads import span, traces
from tests.telemetry.records_factory import make_record

PB = {"content-type": "application/x-protobuf"}


server = own_server("otlp-history")


def _record(name: str, **changes: object) -> DecisionRecord:
    """A decision of its own cluster (so cases never share ids), changed and sealed again: each
    version is valid on its own, only history tells them apart."""
    record = dataclasses.replace(make_record(cluster=f"otlp-history-{name}"), **changes)
    record.output_digest = record.compute_output_digest()
    return record


STORED, EARLIER = "the stored one", "an earlier one in this request"


def _conflict(sent: DecisionRecord, kept: DecisionRecord, where: str) -> str:
    kept_as = "stored" if where == STORED else "earlier"
    return (f"span 'dra.allocate': decision {sent.decision_id}: conflicts with {where} ({kept_as} output_digest "
            f"{kept.output_digest}, sent output_digest {sent.output_digest}); history is append-only, the "
            f"{kept_as} one is kept")


@dataclass(frozen=True)
class Case:
    before: list[DecisionRecord]  # sent (and kept) in an earlier request
    sent: list[DecisionRecord]  # the request under test, in span order
    refused: list[tuple[DecisionRecord, DecisionRecord, str]]  # (the copy refused, the copy kept, where that is)
    kept: list[DecisionRecord]  # what the API serves afterwards


A, A_CHANGED = _record("a"), _record("a", message="edited after the fact")
B, B_CHANGED = _record("b"), _record("b", message="a second version")
C = _record("c")
D, D_REMEASURED = _record("d"), _record("d", duration_us=999)
E = _record("e")
F, F_CHANGED, G = _record("f"), _record("f", wait_ms=7), _record("g")
H, H_CHANGED, H_AGAIN = _record("h"), _record("h", node="node-elsewhere"), _record("h", wait_ms=9)
K, K_CHANGED = _record("k"), _record("k", message="changed in the request")

CASES = {
    "changed-stored-decision": Case([A], [A_CHANGED], [(A_CHANGED, A, STORED)], [A]),
    "two-versions-in-one-request": Case([], [B, B_CHANGED], [(B_CHANGED, B, EARLIER)], [B]),
    "identical-resend": Case([C], [C], [], [C]),
    "same-decision-measured-again": Case([D], [D_REMEASURED], [], [D]),
    "identical-twice-in-one-request": Case([], [E, E], [], [E]),
    "conflict-beside-a-new-decision": Case([F], [F_CHANGED, G], [(F_CHANGED, F, STORED)], [F, G]),
    "three-versions-in-one-request": Case([], [H, H_CHANGED, H_AGAIN], [(H_CHANGED, H, EARLIER),
                                                                         (H_AGAIN, H, EARLIER)], [H]),
    "stored-then-changed-twice": Case([K], [K_CHANGED, K_CHANGED], [(K_CHANGED, K, STORED),
                                                                    (K_CHANGED, K, STORED)], [K]),
}


def _export(server: Server, records: list[DecisionRecord]) -> httpx.Response:
    request = traces(*(span(s.ROOT_SPAN, {s.RECORD: record_text(r)}, span_id=i + 1) for i, r in enumerate(records)))
    return server.post("/v1/traces", content=request.SerializeToString(), headers=PB)


def _counter(server: Server, family: str, name: str) -> float:
    text = server.get("/metrics").text
    found = re.search(rf'^{family}{{counter="{name}"}} (\S+)$', text, re.M)
    assert found is not None, f"{family} {name} not in /metrics"
    return float(found.group(1))


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_a_decision_conflicting_with_history_is_a_rejected_span(server: Server, case: Case) -> None:
    if case.before:
        first = _export(server, case.before)
        assert (first.status_code, ExportTraceServiceResponse.FromString(first.content).HasField("partial_success")) \
            == (200, False)
    rejected = _counter(server, "claimtrail_otlp_items", "rejected")
    quarantined = _counter(server, "claimtrail_store", "writer_quarantined")

    response = _export(server, case.sent)

    assert response.status_code == 200
    partial = ExportTraceServiceResponse.FromString(response.content).partial_success
    expected = [_conflict(sent, kept, where) for sent, kept, where in case.refused]
    more = f" (and {len(expected) - 1} more rejected)" if len(expected) > 1 else ""
    assert (partial.rejected_spans, partial.error_message) == (len(expected), expected[0] + more if expected else "")
    assert _counter(server, "claimtrail_otlp_items", "rejected") - rejected == len(case.refused)
    assert _counter(server, "claimtrail_store", "writer_quarantined") - quarantined == len(case.refused)
    for kept in case.kept:
        served = server.get(f"/v1/decisions/{kept.decision_id}").json()
        assert (served["output_digest"], served["message"], served["duration_us"]) == (
            kept.output_digest, kept.message, kept.duration_us)


@pytest.mark.slow
def test_a_redacted_copy_declaring_the_stored_digest_is_refused_naming_that_digest_once(server: Server) -> None:
    # a redacted record keeps the digest of the decision as made, so both copies declare one digest
    original = _record("redacted")
    redacted = dataclasses.replace(original, message="pod sha256:0123456789abcdef waited")
    assert _export(server, [original]).status_code == 200
    request = traces(span(s.ROOT_SPAN, {s.RECORD: record_text(redacted), s.REDACTED: ["/message"]}))

    response = server.post("/v1/traces", content=request.SerializeToString(), headers=PB)

    partial = ExportTraceServiceResponse.FromString(response.content).partial_success
    assert (response.status_code, partial.rejected_spans, partial.error_message) == (200, 1, (
        f"span 'dra.allocate': decision {original.decision_id}: conflicts with the stored one (stored and sent "
        f"output_digest both {original.output_digest}, the content differs); history is append-only, the stored "
        "one is kept"))
    assert server.get(f"/v1/decisions/{original.decision_id}").json()["message"] == original.message
