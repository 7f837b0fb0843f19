"""The Tracer-built export path, kept as the reference the directly built spans are checked against.

This is how decisions were exported before spans were built directly: the SDK's ``Tracer`` makes
every span (with an id generator that hands out the decision's derived ids) and the SDK's
``Logger`` emits every verdict. Both paths must put the same bytes on the wire.
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
from audit.records import DecisionRecord, Outcome
from audit.telemetry import schema as s
from audit.telemetry.attributes import (
    root_attributes,
    select_verdicts,
    tier_attributes,
    verdict_attributes,
    verdict_body,
)
from audit.telemetry.ids import root_span_id_for, tier_span_id_for, trace_id_for
from audit.telemetry.redaction import Redaction, redact
from audit.telemetry.traces import _scrub_verdict, time_ns

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


class TracerBuiltExport:
    def __init__(
        self,
        spans: SpanExporter,
        logs: LogRecordExporter,
        resource: Resource,
        *,
        redaction: Redaction = Redaction(),
        max_verdicts: int = 64,
    ) -> None:
        self._ids = QueuedIds()
        self.tracer_provider = TracerProvider(resource=resource, id_generator=self._ids, span_limits=SPAN_LIMITS)
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
        self.logger_provider = LoggerProvider(resource=resource)
        self.logger_provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
        self._tracer = self.tracer_provider.get_tracer(s.INSTRUMENTATION_SCOPE)
        self._logger = self.logger_provider.get_logger(s.INSTRUMENTATION_SCOPE)
        self.redaction = redaction
        self.max_verdicts = max_verdicts

    def export(
        self, record: DecisionRecord, verdicts: Sequence[TierEvidence] = (), labels: Mapping[str, str] | None = None
    ) -> None:
        start = time_ns(record)
        end = start + record.duration_us * 1000
        redacted = redact(record, labels or {}, self.redaction)
        sent = redacted.record
        selection = select_verdicts(sent, verdicts, self.max_verdicts)
        kept = [_scrub_verdict(v, redacted.scrubber) for v in selection.kept]
        self._ids.queue(trace_id_for(record.decision_id), root_span_id_for(record.decision_id))
        root = self._tracer.start_span(
            s.ROOT_SPAN,
            context=Context(),
            kind=SpanKind.INTERNAL,
            attributes=root_attributes(sent, redacted.labels, redacted.paths, selection),
            start_time=start,
        )
        if sent.outcome == Outcome.ERROR.value:
            root.set_status(Status(StatusCode.ERROR, sent.message or "allocation error"))
        root_ctx = trace.set_span_in_context(root, Context())
        tier_ctx: dict[int | None, Context] = {}
        for position, tier in enumerate(sent.tiers):
            self._ids.queue(None, tier_span_id_for(record.decision_id, position))
            span = self._tracer.start_span(
                s.TIER_SPAN,
                context=root_ctx,
                kind=SpanKind.INTERNAL,
                attributes=tier_attributes(sent, tier, selection.dropped_by_position.get(position, 0)),
                start_time=start,
            )
            tier_ctx[position] = trace.set_span_in_context(span, Context())
            span.end(end_time=end)
        for verdict in kept:
            self._logger.emit(
                timestamp=start,
                observed_timestamp=start,
                context=tier_ctx.get(verdict.position, root_ctx),
                severity_number=SeverityNumber.INFO,
                severity_text="INFO",
                body=verdict_body(verdict),
                attributes=verdict_attributes(sent.decision_id, verdict),
                event_name=s.VERDICT_EVENT,
            )
        root.end(end_time=end)

    def shutdown(self) -> None:
        self.tracer_provider.shutdown()
        self.logger_provider.shutdown()
