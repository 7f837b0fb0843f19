"""A decision's spans and verdict log records built directly as the SDK's finished objects.

A decision's ids and times are fixed by its record, so nothing the SDK's ``Tracer`` does per span
(current context, sampling, id generation, per-attribute validation and copying, span locks)
changes what gets exported. Building ``ReadableSpan`` and ``ReadWriteLogRecord`` objects here and
handing them to the batch processors (``on_end`` / ``on_emit``) puts the same OTLP bytes on the
wire at a fraction of the CPU. What is the same for every decision (resource, instrumentation
scope, trace flags, log limits) is made once per exporter.

No SDK attribute limits apply to decision spans (the Tracer path was given limits that lifted
them): the record attribute must never be cut, whatever ``OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT``
says, or the receiver could not rebuild the record. Log records keep the SDK's log limits.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from opentelemetry._logs import LogRecord, SeverityNumber
from opentelemetry.context import Context
from opentelemetry.sdk._logs import LogRecordLimits, ReadWriteLogRecord
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import (
    Link,
    NonRecordingSpan,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    TraceFlags,
    set_span_in_context,
)

from audit.telemetry import schema as s
from audit.telemetry.attributes import AttributeValue

# Decision ids are hashed, not random, so only the sampled bit is set (the SDK adds
# RANDOM_TRACE_ID only when its id generator says the ids are random).
SAMPLED = TraceFlags(TraceFlags.SAMPLED)
UNSET = Status(StatusCode.UNSET)


class HashedOnceResource(Resource):
    """A Resource whose hash is computed once.

    The OTLP encoders group every span and log record by resource, and ``Resource.__hash__``
    JSON-encodes all resource attributes on each call: several microseconds per item, for a value
    that never changes (a Resource is immutable). Equal to, and hashing like, the resource it wraps.
    """

    def __init__(self, resource: Resource) -> None:
        super().__init__(resource.attributes, resource.schema_url)
        self._hash = super().__hash__()

    def __hash__(self) -> int:
        return self._hash


def span_context(trace_id: int, span_id: int) -> SpanContext:
    return SpanContext(trace_id, span_id, is_remote=False, trace_flags=SAMPLED)


class DecisionSpanFactory:
    """Makes finished spans and log records on one resource under ClaimTrail's instrumentation scope."""

    def __init__(self, resource: Resource) -> None:
        self.resource = resource if isinstance(resource, HashedOnceResource) else HashedOnceResource(resource)
        self.scope = InstrumentationScope(s.INSTRUMENTATION_SCOPE)
        # read once: LogRecordLimits() parses the OTEL_ATTRIBUTE_* variables each time it is built
        self.log_limits = LogRecordLimits()

    def span(
        self,
        name: str,
        context: SpanContext,
        parent: SpanContext | None,
        attributes: Mapping[str, AttributeValue],
        start: int,
        end: int,
        status: Status = UNSET,
        events: Sequence[Event] = (),
        links: Sequence[Link] = (),
    ) -> ReadableSpan:
        return ReadableSpan(
            name,
            context=context,
            parent=parent,
            resource=self.resource,
            attributes=attributes,  # list values encode exactly like the SDK's tuples
            events=events,
            links=links,
            kind=SpanKind.INTERNAL,
            status=status,
            start_time=start,
            end_time=end,
            instrumentation_scope=self.scope,
        )

    def log(
        self,
        span: Context,
        timestamp: int,
        body: str,
        attributes: Mapping[str, AttributeValue],
        event_name: str,
    ) -> ReadWriteLogRecord:
        """A log record linked to the span that ``span`` (see ``linked``) carries."""
        record = LogRecord(
            timestamp=timestamp,
            observed_timestamp=timestamp,
            context=span,
            severity_text="INFO",
            severity_number=SeverityNumber.INFO,
            body=body,
            attributes=attributes,
            event_name=event_name,
        )
        return ReadWriteLogRecord(record, self.resource, self.scope, self.log_limits)


def linked(context: SpanContext) -> Context:
    """A context holding ``context`` as its span: what a log record takes its trace and span id from."""
    return set_span_in_context(NonRecordingSpan(context), Context())
