"""Export decisions through the real OTLP/HTTP exporter to a loopback receiver and decode what
was put on the wire."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from audit.allocator.outcome import TierEvidence
from audit.records import DecisionRecord
from ingest.otlp.decode import attributes
from tests.otlp.loopback import ReceiverApp, running_receiver, telemetry_from_env


@dataclass
class Wire:
    spans: list[Span]
    logs: list[LogRecord]
    rx: ReceiverApp

    def root(self) -> Span:
        (root,) = [s for s in self.spans if not s.parent_span_id]
        return root

    def tiers(self) -> list[Span]:
        return [s for s in self.spans if s.parent_span_id]

    def raw_bytes(self) -> list[bytes]:
        """Every request body as received, decompressed when it was gzip."""
        return [c.plain() for c in self.rx.capture.bodies()]


def attrs(item: Any) -> dict[str, Any]:
    return attributes(item.attributes)


def export_over_http(
    monkeypatch: Any,
    records: Sequence[DecisionRecord],
    *,
    verdicts: Sequence[TierEvidence] = (),
    labels: Mapping[str, str] | None = None,
    env: Mapping[str, str] | None = None,
) -> Wire:
    with running_receiver() as rx:
        telemetry = telemetry_from_env(monkeypatch, {"OTEL_EXPORTER_OTLP_ENDPOINT": rx.url, **(env or {})})
        for record in records:
            telemetry.export(record, verdicts, labels)
        telemetry.shutdown()
    spans: list[Span] = []
    for body in rx.capture.bodies("/v1/traces"):
        request = ExportTraceServiceRequest.FromString(body.plain())
        spans += [sp for rs in request.resource_spans for ss in rs.scope_spans for sp in ss.spans]
    logs: list[LogRecord] = []
    for body in rx.capture.bodies("/v1/logs"):
        request_logs = ExportLogsServiceRequest.FromString(body.plain())
        logs += [lr for rl in request_logs.resource_logs for sl in rl.scope_logs for lr in sl.log_records]
    return Wire(spans, logs, rx)
