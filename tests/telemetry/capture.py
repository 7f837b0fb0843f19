"""Export decisions through ClaimTrail's OTLP/HTTP exporter to a loopback receiver and decode
what was put on the wire."""

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
from audit.telemetry import DecisionExporter, ExportReport
from audit.telemetry import schema as s
from ingest.otlp.decode import attributes
from tests.otlp.loopback import ReceiverApp, running_receiver, set_otel_env


@dataclass
class Wire:
    spans: list[Span]
    logs: list[LogRecord]
    rx: ReceiverApp
    report: ExportReport

    def root(self) -> Span:
        (root,) = [sp for sp in self.spans if not sp.parent_span_id]
        return root

    def tiers(self) -> list[Span]:
        return [sp for sp in self.spans if sp.name.startswith(s.TIER_SPAN)]

    def wait(self) -> Span:
        (wait,) = [sp for sp in self.spans if sp.name == s.WAIT_SPAN]
        return wait

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
        set_otel_env(monkeypatch, {"OTEL_EXPORTER_OTLP_ENDPOINT": rx.url, **(env or {})})
        with DecisionExporter() as exporter:
            for record in records:
                exporter.export(record, verdicts, labels)
            report = exporter.flush()
    spans: list[Span] = []
    for body in rx.capture.bodies("/v1/traces"):
        request = ExportTraceServiceRequest.FromString(body.plain())
        spans += [sp for rs in request.resource_spans for ss in rs.scope_spans for sp in ss.spans]
    logs: list[LogRecord] = []
    for body in rx.capture.bodies("/v1/logs"):
        request_logs = ExportLogsServiceRequest.FromString(body.plain())
        logs += [lr for rl in request_logs.resource_logs for sl in rl.scope_logs for lr in sl.log_records]
    return Wire(spans, logs, rx, report)
