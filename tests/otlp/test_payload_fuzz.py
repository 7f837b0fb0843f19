"""Whatever bytes arrive, decoding ends in records, rejects or a PayloadError — never a crash."""

from __future__ import annotations

import contextlib
import json

from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from audit.telemetry import schema as s
from ingest.otlp.decode import records_from_logs, records_from_traces
from ingest.otlp.payload import JSON, PROTOBUF, PayloadError, parse
from tests.otlp.payloads import span, traces

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=12), children, max_size=3),
    max_leaves=12,
)
otlp_keys = st.sampled_from(
    ["resourceSpans", "scopeSpans", "spans", "traceId", "spanId", "name", "attributes", "key", "value",
     "stringValue", "intValue", "startTimeUnixNano", "kind", "resourceLogs", "scopeLogs", "logRecords"]
)
otlp_like = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=6) | st.sampled_from(["00", "0a0b", "zz", "1" * 40]),
    lambda children: st.lists(children, max_size=2) | st.dictionaries(otlp_keys, children, max_size=3),
    max_leaves=15,
)


def _decode(body: bytes, media: str) -> None:
    # a PayloadError is the receiver's 400; anything else escaping here would be a 500
    with contextlib.suppress(PayloadError):
        records_from_traces(parse(body, media, ExportTraceServiceRequest))
    with contextlib.suppress(PayloadError):
        records_from_logs(parse(body, media, ExportLogsServiceRequest))


@settings(max_examples=150, deadline=None)
@given(st.binary(max_size=200))
def test_random_bytes_as_protobuf(body: bytes) -> None:
    _decode(body, PROTOBUF)


@settings(max_examples=150, deadline=None)
@given(json_values | otlp_like)
def test_random_json_documents(doc: object) -> None:
    _decode(json.dumps(doc).encode(), JSON)


@settings(max_examples=60, deadline=None)
@given(json_values)
def test_random_record_attribute_values_are_rejected_not_crashed(value: object) -> None:
    decoded = records_from_traces(traces(span(s.ROOT_SPAN, {s.RECORD: json.dumps(value)})))
    assert len(decoded.rejected) == 1 and decoded.records == []


def test_deeply_nested_record_json_is_rejected_not_crashed() -> None:
    deep = "[" * 100_000 + "]" * 100_000
    decoded = records_from_traces(traces(span(s.ROOT_SPAN, {s.RECORD: deep})))
    assert len(decoded.rejected) == 1


def test_deeply_nested_json_payload_is_a_payload_error() -> None:
    for body in (b"[" * 100_000 + b"]" * 100_000, b'{"resourceSpans":' * 5000 + b"1" + b"}" * 5000):
        try:
            parse(body, JSON, ExportTraceServiceRequest)
        except PayloadError as exc:
            assert str(exc).startswith("ExportTraceServiceRequest: ")
        else:
            raise AssertionError("a deeply nested body was accepted")


def test_json_int_out_of_range_is_a_payload_error() -> None:
    body = json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [{"startTimeUnixNano": "9" * 30}]}]}]}).encode()
    try:
        parse(body, JSON, ExportTraceServiceRequest)
    except PayloadError as exc:
        assert "startTimeUnixNano" in str(exc)
    else:
        raise AssertionError("an out-of-range integer was accepted")
