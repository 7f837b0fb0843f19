"""OTLP/HTTP receiver on a real loopback server: encodings, ignored items, rejects, bad payloads."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator

import httpx
import pytest
from google.rpc import status_pb2
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from audit.records import DecisionRecord, record_text
from audit.telemetry import schema as s
from tests.otlp.loopback import ReceiverApp, running_receiver, serve
from tests.otlp.payloads import exported, log, logs, otlp_json, span, traces
from tests.telemetry.records_factory import make_record

PB = {"content-type": "application/x-protobuf"}
JS = {"content-type": "application/json"}


@pytest.fixture
def rx() -> Iterator[ReceiverApp]:
    with running_receiver() as app:
        yield app


def _post(rx: ReceiverApp, path: str, body: bytes, headers: dict[str, str]) -> httpx.Response:
    return httpx.post(rx.url + path, content=body, headers=headers, timeout=10)


@pytest.mark.parametrize(
    ("encoding", "gzipped"),
    [("protobuf", False), ("protobuf", True), ("json", False), ("json", True)],
    ids=["protobuf", "protobuf-gzip", "json", "json-gzip"],
)
def test_decision_spans_become_records_in_every_encoding(rx: ReceiverApp, encoding: str, gzipped: bool) -> None:
    original = make_record()
    request, _ = exported([original])
    body = request.SerializeToString() if encoding == "protobuf" else otlp_json(request)
    headers = dict(PB if encoding == "protobuf" else JS)
    if gzipped:
        body, headers["content-encoding"] = gzip.compress(body), "gzip"
    response = _post(rx, "/v1/traces", body, headers)
    assert response.status_code == 200
    assert response.headers["content-type"] == headers["content-type"]
    if encoding == "protobuf":
        assert not ExportTraceServiceResponse.FromString(response.content).HasField("partial_success")
    else:
        assert response.json() == {}
    assert [r.to_dict() for r in rx.sink.records] == [original.to_dict()]
    assert rx.counters.snapshot()["parts"] == 3  # two tier spans and the wait span


def test_spans_outside_the_schema_are_ignored_and_counted(rx: ReceiverApp) -> None:
    request = traces(
        span("GET /healthz", {"http.route": "/healthz"}),
        span(s.ROOT_SPAN, {"k8s.pod.name": "someone-elses"}, span_id=2),  # same name, no claimtrail.* attribute
        span(s.TIER_SPAN, {"note": "no decision id"}, span_id=3),
    )
    response = _post(rx, "/v1/traces", request.SerializeToString(), PB)
    assert response.status_code == 200
    assert rx.sink.records == [] and rx.sink.quarantined == []
    assert rx.counters.snapshot()["ignored"] == 3


BAD_GZIP = b"definitely not gzip"
TRUNCATED_GZIP = gzip.compress(b"x" * 100)[:-12]


@pytest.mark.parametrize(
    ("body", "headers", "status", "error"),
    [
        (b"\xff\xff\xff", PB, 400, "ExportTraceServiceRequest: invalid protobuf"),
        (b"{not json", JS, 400, "ExportTraceServiceRequest: invalid JSON"),
        (b"[1, 2]", JS, 400, "ExportTraceServiceRequest: expected a JSON object, got list"),
        (b'{"resourceSpans": "nope"}', JS, 400, "ExportTraceServiceRequest: Failed to parse resourceSpans"),
        (
            b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "zz", "spanId": "01"}]}]}]}',
            JS,
            400,
            "ExportTraceServiceRequest.resourceSpans[0].scopeSpans[0].spans[0].traceId: 'zz' is not a hex id",
        ),
        (BAD_GZIP, {**PB, "content-encoding": "gzip"}, 400, "body: invalid gzip data"),
        (TRUNCATED_GZIP, {**PB, "content-encoding": "gzip"}, 400, "body: truncated gzip data"),
        (b"x", {**PB, "content-encoding": "br"}, 415, "Content-Encoding: 'br' is not supported"),
        (b"hello", {"content-type": "text/plain"}, 415, "Content-Type: 'text/plain' is not"),
    ],
    ids=["bad-protobuf", "bad-json", "json-not-object", "json-wrong-shape", "json-bad-hex-id", "bad-gzip", "truncated-gzip",
         "unknown-encoding", "unknown-media-type"],
)
def test_malformed_payload_is_refused_and_quarantined_as_received(
    rx: ReceiverApp, body: bytes, headers: dict[str, str], status: int, error: str
) -> None:
    response = _post(rx, "/v1/traces", body, headers)
    assert response.status_code == status
    if response.headers["content-type"] == "application/x-protobuf":
        message = status_pb2.Status.FromString(response.content).message
    else:
        message = response.json()["message"]
    assert message.startswith(error)
    (q,) = rx.sink.quarantined
    assert (q.source, q.kind, q.raw) == ("otlp/http", "traces", body)
    assert q.error.startswith(error)
    assert rx.counters.snapshot()["malformed"] == 1
    assert rx.sink.records == []


def _decision_attrs(record: DecisionRecord, **extra: object) -> dict[str, object]:
    return {s.DECISION_ID: record.decision_id, s.RECORD: record_text(record), **extra}


def _with(record: DecisionRecord, **changes: object) -> str:
    data = record.to_dict()
    data.update(changes)
    return json.dumps(data)


GOOD = make_record(0)


@pytest.mark.parametrize(
    ("attributes", "error"),
    [
        ({s.DECISION_ID: GOOD.decision_id}, "DecisionRecord: attribute claimtrail.record is required"),
        ({s.RECORD: 42}, "DecisionRecord: attribute claimtrail.record must be a string, got int"),
        ({s.RECORD: "{oops"}, "DecisionRecord: attribute claimtrail.record is not JSON"),
        ({s.RECORD: _with(GOOD, seq="5")}, "DecisionRecord: seq: Input should be a valid integer"),
        ({s.RECORD: _with(GOOD, outcome="maybe")}, "DecisionRecord: outcome: unknown outcome 'maybe'"),
        # a record valid on its own: the message names its decision
        (_decision_attrs(GOOD, **{s.OUTCOME: "error"}),
         f"decision {GOOD.decision_id}: DecisionRecord: outcome: attribute claimtrail.outcome='error' disagrees"),
        ({s.RECORD: _with(GOOD, wait_ms=99)},
         f"decision {GOOD.decision_id}: DecisionRecord: output_digest: declared {GOOD.output_digest} but"),
    ],
    ids=["record-missing", "record-not-string", "record-not-json", "field-wrong-type", "unknown-outcome",
         "attribute-disagrees", "digest-mismatch"],
)
def test_invalid_decision_span_is_quarantined_while_the_rest_of_the_batch_is_kept(
    rx: ReceiverApp, attributes: dict[str, object], error: str
) -> None:
    good_request, _ = exported([make_record(1)])
    bad = span(s.ROOT_SPAN, attributes, span_id=9)
    good_request.resource_spans[0].scope_spans[0].spans.append(bad)
    response = _post(rx, "/v1/traces", good_request.SerializeToString(), PB)
    assert response.status_code == 200
    partial = ExportTraceServiceResponse.FromString(response.content).partial_success
    assert partial.rejected_spans == 1
    assert partial.error_message.startswith(f"span 'dra.allocate': {error}")
    (q,) = rx.sink.quarantined
    assert (q.source, q.kind) == ("otlp/http", "span")
    assert Span.FromString(q.raw) == bad
    assert [r.attempt for r in rx.sink.records] == [1]


def test_record_without_output_digest_is_sealed_on_receipt(rx: ReceiverApp) -> None:
    unsealed = make_record()
    unsealed.output_digest = ""  # a plugin may leave the digest to the receiver
    request = traces(span(s.ROOT_SPAN, {s.RECORD: record_text(unsealed)}))
    assert _post(rx, "/v1/traces", request.SerializeToString(), PB).status_code == 200
    assert rx.sink.records[0].output_digest == make_record().output_digest


def test_logs_carry_decisions_and_verdicts(rx: ReceiverApp) -> None:
    _, verdict_logs = exported([make_record()])
    verdict_logs.resource_logs[0].scope_logs[0].log_records.extend(
        [
            log(s.DECISION_EVENT, {s.RECORD: record_text(make_record(4))}),
            log("app.start", {"service": "x"}),
        ]
    )
    response = _post(rx, "/v1/logs", verdict_logs.SerializeToString(), PB)
    assert response.status_code == 200
    assert not ExportLogsServiceResponse.FromString(response.content).HasField("partial_success")
    assert [r.to_dict() for r in rx.sink.records] == [make_record(4).to_dict()]
    counts = rx.counters.snapshot()
    assert (counts["records"], counts["parts"], counts["ignored"]) == (1, 3, 1)


def test_invalid_decision_log_is_rejected_in_partial_success(rx: ReceiverApp) -> None:
    request = logs(log(s.DECISION_EVENT, {s.DECISION_ID: "x"}))
    response = _post(rx, "/v1/logs", request.SerializeToString(), PB)
    partial = ExportLogsServiceResponse.FromString(response.content).partial_success
    assert (response.status_code, partial.rejected_log_records) == (200, 1)
    assert rx.sink.quarantined[0].kind == "log_record"


class FailingSink:
    def __init__(self) -> None:
        self.quarantined: list[tuple[str, str, str, bytes]] = []

    def write_records(self, records: list[DecisionRecord]) -> None:
        raise ConnectionError("chdb directory locked")

    def quarantine(self, source: str, kind: str, error: str, raw: bytes) -> None:
        self.quarantined.append((source, kind, error, raw))


def test_store_failure_answers_503_so_the_sender_retries() -> None:
    from fastapi import FastAPI

    from ingest.otlp import ReceiverCounters, make_router

    sink, counters = FailingSink(), ReceiverCounters()
    app = FastAPI()
    app.include_router(make_router(sink, counters))
    request, _ = exported([make_record()])
    with serve(app) as url:
        response = httpx.post(url + "/v1/traces", content=request.SerializeToString(), headers=PB, timeout=10)
    assert response.status_code == 503
    assert status_pb2.Status.FromString(response.content).message == (
        "decision store unavailable: ConnectionError: chdb directory locked"
    )
    assert sink.quarantined == []
    assert counters.snapshot()["sink_errors"] == 1


def test_counters_are_public_attributes_matching_the_snapshot(rx: ReceiverApp) -> None:
    request, _ = exported([make_record()])
    _post(rx, "/v1/traces", request.SerializeToString(), PB)
    public = {k: v for k, v in vars(rx.counters).items() if not k.startswith("_")}
    assert public == rx.counters.snapshot()
    assert (public["requests"], public["records"], public["parts"]) == (1, 1, 3)


HUGE_INT = "1" + "0" * 5000  # past the digits Python turns into an int by default (4300)


@pytest.mark.parametrize(
    ("body", "error"),
    [
        (f'{{"resourceSpans": [{{"scopeSpans": [{{"spans": [{{"startTimeUnixNano": {HUGE_INT}}}]}}]}}]}}'.encode(),
         "ExportTraceServiceRequest: invalid JSON (Exceeds the limit (4300 digits)"),
        (f'{{"partialSuccess": {HUGE_INT}}}'.encode(), "ExportTraceServiceRequest: invalid JSON (Exceeds the limit"),
    ],
    ids=["span-time", "top-level-field"],
)
def test_json_number_too_long_to_read_is_a_400_and_quarantined(rx: ReceiverApp, body: bytes, error: str) -> None:
    response = _post(rx, "/v1/traces", body, JS)
    assert response.status_code == 400
    assert response.json()["message"].startswith(error)
    (q,) = rx.sink.quarantined
    assert (q.kind, q.raw) == ("traces", body) and q.error.startswith(error)
    assert rx.counters.snapshot()["malformed"] == 1


def _two_members(second: bytes) -> bytes:
    first, _ = exported([make_record(0)])
    return gzip.compress(first.SerializeToString()) + second


SECOND, _ = exported([make_record(1)])


@pytest.mark.parametrize(
    ("body", "status", "kept", "error"),
    [
        # OTLP protobuf concatenates: two members hold the spans of both decisions
        (_two_members(gzip.compress(SECOND.SerializeToString())), 200, [0, 1], ""),
        (_two_members(b"trailing bytes"), 400, [], "body: invalid gzip data"),
        (_two_members(gzip.compress(SECOND.SerializeToString())[:-12]), 400, [], "body: truncated gzip data"),
    ],
    ids=["second-member", "trailing-garbage", "truncated-second-member"],
)
def test_every_gzip_member_of_a_body_is_read(
    rx: ReceiverApp, body: bytes, status: int, kept: list[int], error: str
) -> None:
    response = _post(rx, "/v1/traces", body, {**PB, "content-encoding": "gzip"})
    assert response.status_code == status
    assert [r.attempt for r in rx.sink.records] == kept
    if error:
        assert status_pb2.Status.FromString(response.content).message.startswith(error)
        (q,) = rx.sink.quarantined
        assert (q.raw, q.error.startswith(error)) == (body, True)
    else:
        assert not ExportTraceServiceResponse.FromString(response.content).HasField("partial_success")


_SPANS, _LOGS = exported([make_record()])


@pytest.mark.parametrize(
    ("path", "body", "headers"),
    [
        ("/v1/traces", _SPANS.SerializeToString(), PB),
        ("/v1/traces", otlp_json(_SPANS), JS),
        ("/v1/logs", logs(log(s.DECISION_EVENT, {s.RECORD: record_text(make_record())})).SerializeToString(), PB),
    ],
    ids=["traces-protobuf", "traces-json", "logs-protobuf"],
)
def test_store_failure_503_says_when_to_retry(path: str, body: bytes, headers: dict[str, str]) -> None:
    from fastapi import FastAPI

    from ingest.otlp import ReceiverCounters, make_router

    app = FastAPI()
    app.include_router(make_router(FailingSink(), ReceiverCounters()))
    with serve(app) as url:
        response = httpx.post(url + path, content=body, headers=headers, timeout=10)
    assert (response.status_code, response.headers.get("retry-after")) == (503, "1")
    assert response.headers["content-type"] == headers["content-type"]
