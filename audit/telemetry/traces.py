"""Turns one decision into one trace: a ``dra.allocate`` root span, a child span per tier, and
per-device verdicts as log records linked to the tier span.

Times come from the record (``time`` is the start, ``duration_us`` the length) and ids from the
decision id, so exporting the same decision twice yields the same trace. Redaction runs before
anything is handed to the SDK, so redacted values never reach a processor or an exporter.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from opentelemetry import trace
from opentelemetry._logs import SeverityNumber
from opentelemetry.context import Context
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk.trace import SpanLimits, TracerProvider
from opentelemetry.trace import SpanKind, Status, StatusCode

from audit.allocator.outcome import TierEvidence
from audit.records import DecisionRecord, Outcome
from audit.telemetry import schema as s
from audit.telemetry.attributes import (
    DEFAULT_MAX_VERDICTS,
    Verdict,
    root_attributes,
    select_verdicts,
    tier_attributes,
    verdict_attributes,
    verdict_body,
)
from audit.telemetry.errors import TelemetryError
from audit.telemetry.ids import QueuedIdGenerator, root_span_id_for, tier_span_id_for, trace_id_for
from audit.telemetry.redaction import Redaction, Scrubber, redact

# The record JSON attribute must never be cut (the receiver rebuilds the record from it), whatever
# OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT says; pod labels may push a root span past the 128 default.
DECISION_SPAN_LIMITS = SpanLimits(max_span_attributes=1024, max_span_attribute_length=SpanLimits.UNSET)


@dataclass(frozen=True)
class ExportedTrace:
    trace_id: int
    root_span_id: int
    tier_span_ids: dict[int, int]  # by position in record.tiers
    verdicts_exported: int
    verdicts_dropped: int
    record: DecisionRecord  # what was sent (after redaction)


def time_ns(record: DecisionRecord) -> int:
    """The record's ``time`` as Unix nanoseconds; a time without offset is read as UTC."""
    try:
        parsed = datetime.fromisoformat(record.time)
    except ValueError:
        raise TelemetryError(
            f"DecisionRecord {record.decision_id}: time: {record.time!r} is not an ISO 8601 timestamp"
        ) from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    whole = int(parsed.replace(microsecond=0).timestamp())
    return whole * 1_000_000_000 + parsed.microsecond * 1000


class DecisionTracer:
    """Emits decisions on a tracer provider (with our id generator) and a logger provider."""

    def __init__(
        self,
        tracer_provider: TracerProvider,
        id_generator: QueuedIdGenerator,
        logger_provider: LoggerProvider,
        *,
        redaction: Redaction = Redaction(),
        max_verdicts: int = DEFAULT_MAX_VERDICTS,
    ) -> None:
        if tracer_provider.id_generator is not id_generator:
            raise TelemetryError("DecisionTracer: tracer_provider must be built with the given id_generator")
        self._ids = id_generator
        self._tracer = tracer_provider.get_tracer(s.INSTRUMENTATION_SCOPE)
        self._logger = logger_provider.get_logger(s.INSTRUMENTATION_SCOPE)
        self.redaction = redaction
        self.max_verdicts = max_verdicts

    def export(
        self,
        record: DecisionRecord,
        verdicts: Sequence[TierEvidence] = (),
        labels: Mapping[str, str] | None = None,
    ) -> ExportedTrace:
        start = time_ns(record)
        if record.duration_us < 0:
            raise TelemetryError(f"DecisionRecord {record.decision_id}: duration_us: must be >= 0, got {record.duration_us}")
        end = start + record.duration_us * 1000
        redacted = redact(record, labels or {}, self.redaction)
        sent = redacted.record
        selection = select_verdicts(sent, verdicts, self.max_verdicts)
        kept = [_scrub_verdict(v, redacted.scrubber) for v in selection.kept]

        trace_id = trace_id_for(record.decision_id)
        root_id = root_span_id_for(record.decision_id)
        self._ids.queue(trace_id, root_id)
        root = self._tracer.start_span(
            s.ROOT_SPAN,
            context=Context(),
            kind=SpanKind.INTERNAL,
            attributes=root_attributes(sent, redacted.data, redacted.labels, redacted.paths, selection),
            start_time=start,
        )
        if sent.outcome == Outcome.ERROR.value:
            root.set_status(Status(StatusCode.ERROR, sent.message or "allocation error"))
        root_ctx = trace.set_span_in_context(root, Context())

        tier_ids: dict[int, int] = {}
        tier_ctx: dict[int | None, Context] = {}
        for position, tier in enumerate(sent.tiers):
            span_id = tier_span_id_for(record.decision_id, position)
            self._ids.queue(None, span_id)
            span = self._tracer.start_span(
                s.TIER_SPAN,
                context=root_ctx,
                kind=SpanKind.INTERNAL,
                attributes=tier_attributes(sent, tier, selection.dropped_by_position.get(position, 0)),
                start_time=start,
            )
            tier_ids[position] = span_id
            tier_ctx[position] = trace.set_span_in_context(span, Context())
            span.end(end_time=end)

        for verdict in kept:
            self._logger.emit(
                timestamp=start,
                observed_timestamp=start,
                # a verdict whose tier has no span (extra evidence only) still belongs to the decision
                context=tier_ctx.get(verdict.position, root_ctx),
                severity_number=SeverityNumber.INFO,
                severity_text="INFO",
                body=verdict_body(verdict),
                attributes=verdict_attributes(sent.decision_id, verdict),
                event_name=s.VERDICT_EVENT,
            )
        root.end(end_time=end)
        return ExportedTrace(trace_id, root_id, tier_ids, len(kept), selection.dropped, sent)


def _scrub_verdict(verdict: Verdict, scrubber: Scrubber) -> Verdict:
    return Verdict(
        verdict.position,
        verdict.tier_index,
        scrubber.text(verdict.device),
        scrubber.text(verdict.node),
        verdict.reason,
        verdict.source,
        scrubber.deep(verdict.detail),
    )
