"""OTLP export requests for receiver tests: decisions built by our exporter (through the SDK's
own OTLP encoders) and hand-made spans/logs for what other senders might put on the wire."""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import Message
from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, ArrayValue, KeyValue
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord, ResourceLogs, ScopeLogs
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from audit.records import DecisionRecord
from audit.telemetry import DecisionTelemetry, Redaction, TelemetrySettings


def exported(
    records: Sequence[DecisionRecord], redaction: Redaction = Redaction()
) -> tuple[ExportTraceServiceRequest, ExportLogsServiceRequest]:
    spans, logs = InMemorySpanExporter(), InMemoryLogRecordExporter()
    telemetry = DecisionTelemetry(spans, logs, None, settings=TelemetrySettings(redaction=redaction), batch=False)
    for record in records:
        telemetry.export(record)
    telemetry.shutdown()
    return encode_spans(spans.get_finished_spans()), encode_logs(logs.get_finished_logs())


def value(v: Any) -> AnyValue:
    if isinstance(v, bool):
        return AnyValue(bool_value=v)
    if isinstance(v, int):
        return AnyValue(int_value=v)
    if isinstance(v, float):
        return AnyValue(double_value=v)
    if isinstance(v, list):
        return AnyValue(array_value=ArrayValue(values=[value(x) for x in v]))
    return AnyValue(string_value=v)


def kvs(attributes: dict[str, Any]) -> list[KeyValue]:
    return [KeyValue(key=k, value=value(v)) for k, v in attributes.items()]


def span(name: str, attributes: dict[str, Any], span_id: int = 1) -> Span:
    return Span(
        trace_id=(7).to_bytes(16, "big"),
        span_id=span_id.to_bytes(8, "big"),
        name=name,
        start_time_unix_nano=1,
        end_time_unix_nano=2,
        attributes=kvs(attributes),
    )


def traces(*spans: Span) -> ExportTraceServiceRequest:
    return ExportTraceServiceRequest(resource_spans=[ResourceSpans(scope_spans=[ScopeSpans(spans=list(spans))])])


def logs(*records: LogRecord) -> ExportLogsServiceRequest:
    return ExportLogsServiceRequest(resource_logs=[ResourceLogs(scope_logs=[ScopeLogs(log_records=list(records))])])


def log(event_name: str, attributes: dict[str, Any]) -> LogRecord:
    return LogRecord(time_unix_nano=1, event_name=event_name, attributes=kvs(attributes))


def otlp_json(message: Message) -> bytes:
    """The OTLP JSON encoding: protobuf JSON with trace/span ids as hex instead of base64."""
    data = json_format.MessageToDict(message)

    def hexify(node: Any) -> Any:
        if isinstance(node, dict):
            return {
                k: base64.b64decode(v).hex() if k in ("traceId", "spanId", "parentSpanId") else hexify(v)
                for k, v in node.items()
            }
        if isinstance(node, list):
            return [hexify(x) for x in node]
        return node

    return json.dumps(hexify(data)).encode()
