"""Turns one decision into one trace: a ``dra.allocate`` root span, a child span per tier, and
per-device verdicts as log records linked to the tier span.

Times come from the record (``time`` is the start, ``duration_us`` the length) and ids from the
decision id, so exporting the same decision twice yields the same trace. Redaction runs before
anything is handed to the SDK, so redacted values never reach a processor or an exporter. The
spans and log records go straight to the SDK's processors (see ``audit.telemetry.spans``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from opentelemetry.context import Context
from opentelemetry.sdk._logs import LogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor
from opentelemetry.trace import SpanContext, Status, StatusCode

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
from audit.telemetry.ids import root_span_id_for, tier_span_id_for, trace_id_for
from audit.telemetry.redaction import Redaction, Scrubber, redact
from audit.telemetry.spans import UNSET, DecisionSpanFactory, linked, span_context
from audit.timestamps import parse_rfc3339


@dataclass(frozen=True)
class ExportedTrace:
    trace_id: int
    root_span_id: int
    tier_span_ids: dict[int, int]  # by position in record.tiers
    verdicts_exported: int
    verdicts_dropped: int
    record: DecisionRecord  # what was sent (after redaction)


def parsed_time(record: DecisionRecord) -> datetime:
    """The record's ``time`` parsed; the only way ``time_ns`` can fail, at a tenth of its cost."""
    try:
        return parse_rfc3339(record.time)
    except ValueError:
        raise TelemetryError(
            f"DecisionRecord {record.decision_id}: time: {record.time!r} is not an ISO 8601 timestamp"
        ) from None


def time_ns(record: DecisionRecord) -> int:
    """The record's ``time`` as Unix nanoseconds; a time without offset is read as UTC."""
    parsed = parsed_time(record)
    whole = int(parsed.replace(microsecond=0).timestamp())
    return whole * 1_000_000_000 + parsed.microsecond * 1000


class DecisionTracer:
    """Hands each decision's spans to a span processor and its verdicts to a log processor.

    The processors are the SDK's own (batch processors in production); the spans and log records
    are built directly (``audit.telemetry.spans``) rather than through a ``Tracer``, since ids and
    times come from the record.
    """

    def __init__(
        self,
        span_processor: SpanProcessor,
        log_processor: LogRecordProcessor,
        resource: Resource,
        *,
        redaction: Redaction = Redaction(),
        max_verdicts: int = DEFAULT_MAX_VERDICTS,
    ) -> None:
        self._spans = span_processor
        self._logs = log_processor
        self._factory = DecisionSpanFactory(resource)
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
        make = self._factory

        trace_id = trace_id_for(record.decision_id)
        root_id = root_span_id_for(record.decision_id)
        root_ctx = span_context(trace_id, root_id)
        root_attrs = root_attributes(sent, redacted.labels, redacted.paths, selection)
        status = (
            Status(StatusCode.ERROR, sent.message or "allocation error")
            if sent.outcome == Outcome.ERROR.value
            else UNSET
        )

        # the order the Tracer path ended them in: tier spans, verdict logs, then the root
        tier_ids: dict[int, int] = {}
        tier_ctx: dict[int | None, SpanContext] = {}
        for position, tier in enumerate(sent.tiers):
            span_id = tier_span_id_for(record.decision_id, position)
            ctx = span_context(trace_id, span_id)
            attrs = tier_attributes(sent, tier, selection.dropped_by_position.get(position, 0))
            self._spans.on_end(make.span(s.TIER_SPAN, ctx, root_ctx, attrs, start, end))
            tier_ids[position] = span_id
            tier_ctx[position] = ctx

        links: dict[int, Context] = {}  # by span id: one context per span the verdicts link to
        for verdict in kept:
            # a verdict whose tier has no span (extra evidence only) still belongs to the decision
            parent = tier_ctx.get(verdict.position, root_ctx)
            link = links.get(parent.span_id)
            if link is None:
                link = links[parent.span_id] = linked(parent)
            body, attrs = verdict_body(verdict), verdict_attributes(sent.decision_id, verdict)
            self._logs.on_emit(make.log(link, start, body, attrs, s.VERDICT_EVENT))
        self._spans.on_end(make.span(s.ROOT_SPAN, root_ctx, None, root_attrs, start, end, status))
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
