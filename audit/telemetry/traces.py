"""Hands one decision's trace (``audit.telemetry.shape``) to the OpenTelemetry SDK's processors.

This is the SDK route: finished ``ReadableSpan`` and log record objects built directly (see
``audit.telemetry.spans``) and given to span and log processors, which encode them with the SDK's
OTLP exporters. ClaimTrail's own exporter (``audit.telemetry.direct``) writes the same trace as
OTLP protobuf itself; this route stays for embedding into an SDK pipeline and as the reference
the direct encoding is tested against. Redaction runs before anything is handed to the SDK.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from opentelemetry.context import Context
from opentelemetry.sdk._logs import LogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, SpanProcessor
from opentelemetry.trace import Link, Status, StatusCode

from audit.allocator.outcome import TierEvidence
from audit.records import DecisionRecord
from audit.telemetry import schema as s
from audit.telemetry.shape import STATUS_ERROR, AttemptLinks, ShapeOptions, SpanShape, decision_shape
from audit.telemetry.spans import UNSET, DecisionSpanFactory, linked, span_context
from audit.telemetry.timefmt import parsed_time, time_ns

__all__ = ["DecisionTracer", "ExportedTrace", "parsed_time", "time_ns"]


@dataclass(frozen=True)
class ExportedTrace:
    trace_id: int
    root_span_id: int
    tier_span_ids: dict[int, int]  # by position in record.tiers
    verdicts_exported: int
    verdicts_dropped: int
    record: DecisionRecord  # what was sent (after redaction)


class DecisionTracer:
    """Hands each decision's spans to a span processor and its verdict logs to a log processor."""

    def __init__(
        self,
        span_processor: SpanProcessor | None,
        log_processor: LogRecordProcessor | None,
        resource: Resource,
        *,
        options: ShapeOptions = ShapeOptions(),
    ) -> None:
        self._spans = span_processor
        self._logs = log_processor
        self._factory = DecisionSpanFactory(resource)
        self.options = options
        self.links = AttemptLinks()

    def export(
        self,
        record: DecisionRecord,
        verdicts: Sequence[TierEvidence] = (),
        labels: Mapping[str, str] | None = None,
    ) -> ExportedTrace:
        shape = decision_shape(record, verdicts, labels, self.options, self.links)
        make = self._factory
        contexts = {span.span_id: span_context(shape.trace_id, span.span_id) for span in shape.spans}
        if self._spans is not None:
            for span in shape.spans:
                parent = contexts[span.parent_id] if span.parent_id else None
                self._spans.on_end(make.span(span.name, contexts[span.span_id], parent, span.attributes,
                                             span.start, span.end, _status(span), _events(span), _links(span)))
        if self._logs is not None:
            carriers: dict[int, Context] = {}  # one context per span the verdicts link to
            for log in shape.logs:
                carrier = carriers.get(log.span_id)
                if carrier is None:
                    carrier = carriers[log.span_id] = linked(contexts[log.span_id])
                self._logs.on_emit(make.log(carrier, log.time, log.body, log.attributes, s.VERDICT_EVENT))
        return ExportedTrace(shape.trace_id, shape.root_span_id, shape.tier_span_ids, shape.verdicts_exported,
                             shape.verdicts_dropped, shape.record)


def _status(span: SpanShape) -> Status:
    return Status(StatusCode.ERROR, span.status_message) if span.status_code == STATUS_ERROR else UNSET


def _events(span: SpanShape) -> list[Event]:
    return [Event(e.name, e.attributes, e.time) for e in span.events]


def _links(span: SpanShape) -> list[Link]:
    return [Link(span_context(link.trace_id, link.span_id), link.attributes) for link in span.links]
