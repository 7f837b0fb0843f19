"""Integers the store keeps past OTLP's int64 (seq and wait_ms are UInt64 columns, up to
2^64 - 1) leave both exporters as their decimal text, as OpenTelemetry's attribute type mapping
says, and come back from the receiver exactly, through real OTLP protobuf over HTTP; a flat
attribute outside its column, or not an integer as the exporter writes one, is refused naming it."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from audit.records import DecisionRecord, record_text
from audit.telemetry import DecisionExporter
from audit.telemetry import schema as s
from audit.telemetry.timefmt import time_ns
from tests.otlp.loopback import ReceiverApp, running_receiver, set_otel_env
from tests.otlp.payloads import exported, span, traces
from tests.telemetry.records_factory import make_record

INT64_MAX, UINT32_MAX, UINT64_MAX = 2**63 - 1, 2**32 - 1, 2**64 - 1
EDGES = (0, 2**53 + 1, 2**63 - 1, 2**63, 2**64 - 1)

# (field, value): what the store holds round-trips; duration_us is a UInt32 column, so past it the
# exporters still send the exact value and the receiver refuses it as the store would
ROUND_TRIPS = [(f, v) for f in ("seq", "wait_ms") for v in EDGES] + [("duration_us", 0), ("duration_us", UINT32_MAX)]
PAST_THE_COLUMN = [("duration_us", v) for v in (2**32, *EDGES[1:])]


@pytest.fixture(scope="module")
def rx() -> Iterator[ReceiverApp]:
    with running_receiver() as app:
        yield app


def _record(field: str, value: int) -> DecisionRecord:
    record = make_record(0, **{field: value})
    record = dataclasses.replace(record, decision_id=f"wide-{field}-{value}", output_digest="")
    return record.seal()


def _root(request: ExportTraceServiceRequest, decision_id: str) -> Span:
    (root,) = [sp for rs in request.resource_spans for ss in rs.scope_spans for sp in ss.spans
               if sp.name == s.ROOT_SPAN and _attr(sp, s.DECISION_ID) == ("string_value", decision_id)]
    return root


def _attr(sp: Span, key: str) -> tuple[str, Any] | None:
    for kv in sp.attributes:
        if kv.key == key:
            kind = kv.value.WhichOneof("value")
            return kind, getattr(kv.value, kind)
    return None


def _wire(value: int) -> tuple[str, Any]:
    return ("int_value", value) if value <= INT64_MAX else ("string_value", str(value))


def _direct(rx: ReceiverApp, record: DecisionRecord, monkeypatch: pytest.MonkeyPatch) -> tuple[Span, list[str]]:
    """The decision sent by DecisionExporter: its root span as the receiver got it, and the errors reported."""
    set_otel_env(monkeypatch, {"OTEL_EXPORTER_OTLP_ENDPOINT": rx.url, "OTEL_LOGS_EXPORTER": "none",
                               "OTEL_METRICS_EXPORTER": "none"})
    with DecisionExporter() as exporter:
        exporter.export(record)
        report = exporter.flush()
    assert report.errors == ()  # every value was encoded
    sent = [ExportTraceServiceRequest.FromString(c.plain()) for c in rx.capture.bodies("/v1/traces")]
    (root,) = [_root(r, record.decision_id) for r in sent if _has(r, record.decision_id)]
    return root, report.traces.errors


def _has(request: ExportTraceServiceRequest, decision_id: str) -> bool:
    return any(_attr(sp, s.DECISION_ID) == ("string_value", decision_id)
               for rs in request.resource_spans for ss in rs.scope_spans for sp in ss.spans)


def _post(rx: ReceiverApp, request: ExportTraceServiceRequest) -> ExportTraceServiceResponse:
    answer = httpx.post(rx.url + "/v1/traces", content=request.SerializeToString(),
                        headers={"content-type": "application/x-protobuf"}, timeout=10)
    assert answer.status_code == 200
    return ExportTraceServiceResponse.FromString(answer.content)


@pytest.mark.parametrize(("field", "value"), ROUND_TRIPS, ids=[f"{f}={v}" for f, v in ROUND_TRIPS])
def test_values_the_store_holds_leave_both_exporters_exactly_and_come_back(
    rx: ReceiverApp, monkeypatch: pytest.MonkeyPatch, field: str, value: int
) -> None:
    record = _record(field, value)
    key = s.PREFIX + field
    root, errors = _direct(rx, record, monkeypatch)
    assert errors == []
    assert _attr(root, key) == _wire(value)
    if field == "wait_ms":  # the wait reaches back to 1970's first nanosecond: OTLP times are unsigned
        assert root.start_time_unix_nano == max(time_ns(record) - value * 10**6, 1)
    sdk_request, _ = exported([record])  # the SDK route, with the SDK's own OTLP encoder
    assert list(_root(sdk_request, record.decision_id).attributes) == list(root.attributes)
    assert not _post(rx, sdk_request).HasField("partial_success")
    back = [r for r in rx.sink.records if r.decision_id == record.decision_id]
    assert [r.to_dict() for r in back] == [record.to_dict()] * 2  # one by each exporter
    assert {getattr(r, field) for r in back} == {value}


@pytest.mark.parametrize(("field", "value"), PAST_THE_COLUMN, ids=[f"{f}={v}" for f, v in PAST_THE_COLUMN])
def test_values_past_the_stores_column_leave_exactly_and_are_refused_naming_the_field(
    rx: ReceiverApp, monkeypatch: pytest.MonkeyPatch, field: str, value: int
) -> None:
    record = _record(field, value)
    root, errors = _direct(rx, record, monkeypatch)
    assert _attr(root, s.PREFIX + field) == _wire(value)
    sent = _wire(value)[1]
    assert errors == [f"{rx.url}/v1/traces refused 1 items: span 'dra.allocate': decision {record.decision_id}: "
                      f"DecisionRecord: {field}: attribute claimtrail.{field}={sent!r} is outside 0..{UINT32_MAX}"]
    assert [r for r in rx.sink.records if r.decision_id == record.decision_id] == []


GOOD = make_record(0)  # seq 1042, wait_ms 1500, duration_us 420
REFUSED_ATTRIBUTES: dict[str, tuple[dict[str, Any], str]] = {
    "seq-2^64-as-text": ({s.SEQ: str(2**64)},
                         f"seq: attribute claimtrail.seq='{2**64}' is outside 0..{UINT64_MAX}"),
    "seq-negative": ({s.SEQ: -1}, f"seq: attribute claimtrail.seq=-1 is outside 0..{UINT64_MAX}"),
    "wait_ms-2^64-as-text": ({s.WAIT_MS: str(2**64)},
                             f"wait_ms: attribute claimtrail.wait_ms='{2**64}' is outside 0..{UINT64_MAX}"),
    "duration_us-past-uint32": ({s.DURATION_US: 2**32},
                                f"duration_us: attribute claimtrail.duration_us={2**32} is outside 0..{UINT32_MAX}"),
    "seq-within-int64-as-text": ({s.SEQ: "1042"}, "seq: attribute claimtrail.seq='1042' is text, but an integer "
                                                  "within int64 travels as int_value"),
    "seq-not-decimal": ({s.SEQ: "9.3e18"}, "seq: attribute claimtrail.seq='9.3e18' is not an integer (an integer "
                                           "outside int64 travels as its decimal text)"),
    "seq-a-bool": ({s.SEQ: True}, "seq: attribute claimtrail.seq=True is a bool, not an integer"),
    "seq-past-int64-disagreeing": ({s.SEQ: str(2**63)},
                                   f"seq: attribute claimtrail.seq='{2**63}' disagrees with the record's 1042"),
    "wait_ms-disagreeing": ({s.WAIT_MS: 1501}, "wait_ms: attribute claimtrail.wait_ms=1501 disagrees with the "
                                               "record's 1500"),
}


@pytest.mark.parametrize(("attributes", "error"), REFUSED_ATTRIBUTES.values(), ids=REFUSED_ATTRIBUTES)
def test_an_unsigned_attribute_outside_its_column_or_not_as_written_is_refused_naming_it(
    rx: ReceiverApp, attributes: dict[str, Any], error: str
) -> None:
    sent = span(s.ROOT_SPAN, {s.RECORD: record_text(GOOD), **attributes}, span_id=9)
    response = _post(rx, traces(sent))
    expected = f"span 'dra.allocate': decision {GOOD.decision_id}: DecisionRecord: {error}"
    assert (response.partial_success.rejected_spans, response.partial_success.error_message) == (1, expected)
    assert rx.sink.quarantined[-1].error == expected


def test_a_record_past_the_column_is_refused_as_the_store_refuses_it(rx: ReceiverApp) -> None:
    text = record_text(GOOD).replace('"seq":1042', f'"seq":{2**64}')
    response = _post(rx, traces(span(s.ROOT_SPAN, {s.RECORD: text}, span_id=9)))
    assert response.partial_success.error_message == (
        f"span 'dra.allocate': decision {GOOD.decision_id}: seq: {2**64} is outside 0..{UINT64_MAX}")
