"""The Tracer-built export path, kept as the reference the directly built spans are checked against.

The SDK's ``Tracer`` makes every span of a decision's shape (with an id generator that hands out
the decision's derived ids) and the SDK's ``Logger`` emits every verdict. The SDK objects built
directly, and the OTLP protobuf ClaimTrail writes itself, must put the same bytes on the wire.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence

from opentelemetry import trace
from opentelemetry._logs import SeverityNumber
from opentelemetry.context import Context
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import LogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter
from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.trace import SpanKind, Status, StatusCode

from audit.allocator.outcome import TierEvidence
from audit.records import DecisionRecord
from audit.telemetry import schema as s
from audit.telemetry.shape import STATUS_ERROR, AttemptLinks, ShapeOptions, decision_shape
from audit.telemetry.spans import span_context

# what the Tracer path used: the record attribute is never cut, pod labels may exceed 128 keys
SPAN_LIMITS = SpanLimits(max_span_attributes=1024, max_span_attribute_length=SpanLimits.UNSET)


class QueuedIds(IdGenerator):
    """Hands out the id queued for the next span (this thread)."""

    def __init__(self) -> None:
        self._local = threading.local()

    def queue(self, trace_id: int | None, span_id: int) -> None:
        self._local.trace_id, self._local.span_id = trace_id, span_id

    def generate_trace_id(self) -> int:
        value: int = self._local.trace_id
        return value

    def generate_span_id(self) -> int:
        value: int = self._local.span_id
        return value


def _carrying(trace_id: int, span_id: int) -> Context:
    return trace.set_span_in_context(trace.NonRecordingSpan(span_context(trace_id, span_id)), Context())


class TracerBuiltExport:
    """Each span of a decision's shape made by the SDK's Tracer, each verdict log by its Logger."""

    def __init__(
        self,
        spans: SpanExporter,
        logs: LogRecordExporter,
        resource: Resource,
        *,
        options: ShapeOptions = ShapeOptions(),
    ) -> None:
        self._ids = QueuedIds()
        self.tracer_provider = TracerProvider(resource=resource, id_generator=self._ids, span_limits=SPAN_LIMITS)
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
        self.logger_provider = LoggerProvider(resource=resource)
        self.logger_provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
        self._tracer = self.tracer_provider.get_tracer(s.INSTRUMENTATION_SCOPE)
        self._logger = self.logger_provider.get_logger(s.INSTRUMENTATION_SCOPE)
        self.options = options
        self.links = AttemptLinks()

    def export(
        self, record: DecisionRecord, verdicts: Sequence[TierEvidence] = (), labels: Mapping[str, str] | None = None
    ) -> None:
        shape = decision_shape(record, verdicts, labels, self.options, self.links)
        for sp in shape.spans:
            self._ids.queue(shape.trace_id, sp.span_id)
            span = self._tracer.start_span(
                sp.name,
                context=_carrying(shape.trace_id, sp.parent_id) if sp.parent_id else Context(),
                kind=SpanKind.INTERNAL,
                attributes=dict(sp.attributes),
                links=[trace.Link(span_context(link.trace_id, link.span_id), link.attributes) for link in sp.links],
                start_time=sp.start,
            )
            for event in sp.events:
                span.add_event(event.name, event.attributes, event.time)
            if sp.status_code == STATUS_ERROR:
                span.set_status(Status(StatusCode.ERROR, sp.status_message))
            span.end(end_time=sp.end)
        for log in shape.logs:
            self._logger.emit(
                timestamp=log.time,
                observed_timestamp=log.time,
                context=_carrying(shape.trace_id, log.span_id),
                severity_number=SeverityNumber.INFO,
                severity_text="INFO",
                body=log.body,
                attributes=log.attributes,
                event_name=s.VERDICT_EVENT,
            )

    def shutdown(self) -> None:
        self.tracer_provider.shutdown()
        self.logger_provider.shutdown()
