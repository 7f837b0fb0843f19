"""The trace one decision becomes, as plain data: spans, their times, ids, events and links.

Both encoders read this one layout: ``audit.telemetry.otlpwire`` writes it as OTLP protobuf
directly, and ``audit.telemetry.traces`` hands it to the OpenTelemetry SDK (the reference the
direct encoding is tested against). Nothing here talks to a network or reads a clock.

Times: the root span ``dra.allocate`` runs from the pod's creation (the record's ``time`` minus
``wait_ms``) to the end of the decision, and a ``dra.wait`` child covers the wait. The decision
itself lasts the engine's measured ``duration_us`` (a clock reading, outside the output digest)
shared evenly by the tiers it tried, in preference order; a record without a measured duration
(simulated ones) draws each tried tier as ``NOMINAL_TIER_US``, and says so by its
``claimtrail.duration_us`` of 0. A tier never tried is a zero-length mark where the tiers tried
before it ended, so every tier span lies within the root.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from urllib.parse import quote

from audit.allocator.outcome import TierEvidence
from audit.records import DecisionRecord, Outcome, RetryClass
from audit.telemetry import schema as s
from audit.telemetry.attributes import (
    DEFAULT_MAX_VERDICTS,
    AttributeValue,
    RootAttributes,
    TierAttributes,
    Verdict,
    VerdictAttributes,
    otlp_int,
    select_verdicts,
    tier_results,
    tier_status_message,
    verdict_body,
)
from audit.telemetry.errors import TelemetryError
from audit.telemetry.ids import decision_span_ids
from audit.telemetry.redaction import Redaction, Scrubber, redact
from audit.telemetry.timefmt import time_ns

NOMINAL_TIER_US = 1000
STATUS_UNSET = 0
STATUS_ERROR = 2
# enum members' values read once: an enum attribute lookup costs more than the comparison
_ERROR, _ALLOCATED, _TERMINAL = Outcome.ERROR.value, Outcome.ALLOCATED.value, RetryClass.TERMINAL.value
_NO_SCRUB = Scrubber()


@dataclass(frozen=True)
class ShapeOptions:
    """What a decision's trace carries beyond the record: verdict routes, id salt, the API."""

    max_verdicts: int = DEFAULT_MAX_VERDICTS
    redaction: Redaction = field(default_factory=Redaction)
    verdict_logs: bool = True
    verdict_events: bool = False
    id_salt: str = ""
    api_url: str = ""  # base URL of the audit API, for claimtrail.why_url


@dataclass(slots=True)
class EventShape:
    name: str
    time: int
    attributes: Mapping[str, AttributeValue]


@dataclass(slots=True)
class LinkShape:
    trace_id: int
    span_id: int
    attributes: dict[str, AttributeValue]


@dataclass(slots=True)
class SpanShape:
    name: str
    span_id: int
    parent_id: int  # 0: the root
    start: int
    end: int
    attributes: Mapping[str, AttributeValue]
    status_code: int = STATUS_UNSET
    status_message: str = ""
    # most spans have neither: an empty tuple is shared, a list is made for the spans that have some
    events: Sequence[EventShape] = ()
    links: Sequence[LinkShape] = ()


@dataclass(slots=True)
class LogShape:
    span_id: int
    time: int
    body: str
    attributes: Mapping[str, AttributeValue]


@dataclass
class DecisionShape:
    trace_id: int
    root_span_id: int
    spans: list[SpanShape]  # tier spans, the wait span, then the root: the order they end in
    logs: list[LogShape]
    tier_span_ids: dict[int, int]  # by position in record.tiers
    verdicts_exported: int
    verdicts_dropped: int
    record: DecisionRecord  # what was sent (after redaction)


@dataclass(frozen=True)
class PreviousAttempt:
    attempt: int
    trace_id: int
    span_id: int


class _PodAttempts:
    """One pod's exported attempts by number, and the highest of them."""

    __slots__ = ("by_number", "highest")

    def __init__(self, attempt: int, ids: tuple[int, int]) -> None:
        self.by_number = {attempt: ids}
        self.highest = attempt


class AttemptLinks:
    """Remembers the attempts exported for each pod, so a retry's trace links to the attempt
    before it. Attempts are keyed by number, so exporting a decision again links it the same
    way; a pod's entries go when it is allocated or its attempts end."""

    def __init__(self) -> None:
        self._pods: dict[tuple[str, str], _PodAttempts] = {}

    def previous(self, record: DecisionRecord, trace_id: int, span_id: int) -> PreviousAttempt | None:
        key = (record.cluster, record.pod_uid or f"{record.namespace}/{record.pod}")
        attempt = record.attempt
        seen = self._pods.get(key)
        found = None
        if seen is not None:
            # attempts usually arrive in order: then the one before is the highest so far, found
            # without a pass over all of them (a pod left unschedulable retries for hours)
            if attempt > seen.highest:
                earlier: int | None = seen.highest
            else:
                earlier = max((a for a in seen.by_number if a < attempt), default=None)
            if earlier is not None:
                found = PreviousAttempt(earlier, *seen.by_number[earlier])
        if record.outcome == _ALLOCATED or record.retry_class == _TERMINAL:
            self._pods.pop(key, None)
        elif seen is None:
            self._pods[key] = _PodAttempts(attempt, (trace_id, span_id))
        else:
            seen.by_number[attempt] = (trace_id, span_id)
            if attempt > seen.highest:
                seen.highest = attempt
        return found


def why_url(api_url: str, record: DecisionRecord) -> str:
    if not api_url:
        return ""
    url = f"{api_url.rstrip('/')}/v1/decisions/{_quoted(record.decision_id)}/why"
    return f"{url}?model={_quoted(record.preferred_model)}" if record.preferred_model else url


_PLAIN = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~")


def _quoted(text: str) -> str:
    # decision ids and model names are nearly always URL-safe already; quote() costs a microsecond
    return text if _PLAIN.issuperset(text) else quote(text, safe="")


def decision_shape(
    record: DecisionRecord,
    verdicts: Sequence[TierEvidence] = (),
    labels: Mapping[str, str] | None = None,
    options: ShapeOptions = ShapeOptions(),
    links: AttemptLinks | None = None,
) -> DecisionShape:
    t = time_ns(record)
    if record.duration_us < 0:
        raise TelemetryError(f"DecisionRecord {record.decision_id}: duration_us: must be >= 0, got {record.duration_us}")
    if record.wait_ms < 0:
        raise TelemetryError(f"DecisionRecord {record.decision_id}: wait_ms: must be >= 0, got {record.wait_ms}")
    if options.redaction.active:
        redacted = redact(record, labels or {}, options.redaction)
        sent, sent_labels, paths, scrubber = redacted.record, redacted.labels, redacted.paths, redacted.scrubber
    else:  # the usual case: what redact() would give, without building its result
        sent, sent_labels, paths, scrubber = record, dict(labels) if labels else {}, [], _NO_SCRUB
    selection = select_verdicts(sent, verdicts, options.max_verdicts)
    kept = [_scrub_verdict(v, scrubber) for v in selection.kept] if scrubber.secret else selection.kept
    salt = options.id_salt
    decision_id = record.decision_id
    tiers = sent.tiers
    trace_id, root_id, wait_id, tier_ids_in_order = decision_span_ids(decision_id, len(tiers), salt)

    results = tier_results(sent)
    tried = len(results) - results.count(s.TIER_NOT_TRIED)
    if record.duration_us:
        drawn = drawn_us(t, record.duration_us)
        slot = drawn * 1000 // max(tried, 1)
        decided = t + drawn * 1000
    else:
        slot = NOMINAL_TIER_US * 1000
        decided = t + tried * slot

    dropped = selection.dropped_by_position
    spans: list[SpanShape] = []
    append = spans.append
    tier_ids: dict[int, int] = {}
    starts = tier_starts(t, results, slot)
    for position, (tier, result, span_id) in enumerate(zip(tiers, results, tier_ids_in_order, strict=True)):
        start = starts[position]
        attrs = TierAttributes(sent, tier, dropped.get(position, 0) if dropped else 0, result)
        if result == s.TIER_NOT_TRIED:
            append(SpanShape(_tier_name(tier.model or tier.request or str(tier.index)), span_id, root_id, start, start,
                             attrs))
        elif result == s.TIER_EXHAUSTED:
            append(SpanShape(_tier_name(tier.model or tier.request or str(tier.index)), span_id, root_id, start,
                             start + slot, attrs, STATUS_ERROR, tier_status_message(sent, tier)))
        else:
            append(SpanShape(_tier_name(tier.model or tier.request or str(tier.index)), span_id, root_id, start,
                             start + slot, attrs))
        tier_ids[position] = span_id

    root_start = pod_created_ns(t, record.wait_ms)
    if record.wait_ms:
        wait_attrs: dict[str, AttributeValue] = {s.DECISION_ID: sent.decision_id, s.WAIT_MS: otlp_int(sent.wait_ms)}
        append(SpanShape(s.WAIT_SPAN, wait_id, root_id, root_start, t, wait_attrs))

    root_attrs = RootAttributes(sent, sent_labels, paths, selection, why_url(options.api_url, sent))
    if sent.outcome == _ERROR:
        root = SpanShape(s.ROOT_SPAN, root_id, 0, root_start, decided, root_attrs, STATUS_ERROR,
                         sent.message or "allocation error")
    else:
        root = SpanShape(s.ROOT_SPAN, root_id, 0, root_start, decided, root_attrs)
    previous = links.previous(record, trace_id, root_id) if links is not None else None
    if previous is not None:
        root.links = [LinkShape(previous.trace_id, previous.span_id,
                                {s.LINK_KIND: s.PREVIOUS_ATTEMPT, s.LINK_ATTEMPT: otlp_int(previous.attempt)})]

    logs: list[LogShape] = []
    if kept:
        verdict_logs, verdict_events = options.verdict_logs, options.verdict_events
        events: dict[int, list[EventShape]] = {}  # by span id
        decision = sent.decision_id
        for verdict in kept:
            # a verdict whose tier has no span (extra evidence only) still belongs to the decision
            where = verdict.position
            if where is not None and where in tier_ids:
                verdict_span, at = tier_ids[where], starts[where]
            else:
                verdict_span, at = root_id, t
            verdict_attrs = VerdictAttributes(decision, verdict)
            if verdict_logs:
                logs.append(LogShape(verdict_span, at, verdict_body(verdict), verdict_attrs))
            if verdict_events:
                events.setdefault(verdict_span, []).append(EventShape(s.VERDICT_EVENT, at, verdict_attrs))
        if events:
            by_id = {span.span_id: span for span in spans}
            for span_id, span_events in events.items():
                (by_id.get(span_id) or root).events = span_events
    append(root)
    return DecisionShape(trace_id, root_id, spans, logs, tier_ids, len(kept), selection.dropped, sent)


# OTLP times are unsigned 64-bit nanoseconds since 1970 (fixed64): from 1970 to 2554. The store
# keeps a wait_ms up to 2^64 - 1, which reaches back past 1970; a span is drawn within those
# bounds, and the attributes (claimtrail.wait_ms, claimtrail.duration_us) keep the exact values.
# The earliest start is 1970's first nanosecond, not 0: a time of 0 is protobuf's default, which
# encoders leave out and readers take for a time never set.
_FIRST_NS, _LAST_NS = 1, 2**64 - 1


def pod_created_ns(t: int, wait_ms: int) -> int:
    """Where the root span starts: the decision's time ``t`` (ns) less the wait, or 1970 at the earliest."""
    return max(t - wait_ms * 1_000_000, _FIRST_NS)


def drawn_us(t: int, duration_us: int) -> int:
    """How long a decision at ``t`` (ns) is drawn: its measured duration, up to OTLP's last instant."""
    return min(duration_us, (_LAST_NS - t) // 1000)


def tier_starts(t: int, results: Sequence[str], slot: int) -> list[int]:
    """Each tier's start: the tried tiers one after another from ``t`` in preference order (explorers
    sort siblings by start), each ``slot`` long, and a tier not tried where the tried ones before
    it ended. Placing by position instead would draw tiers after the last tried one past the
    decision's end, outside their parent span."""
    starts = []
    at = t
    for result in results:
        starts.append(at)
        if result != s.TIER_NOT_TRIED:
            at += slot
    return starts


_TIER_NAMES: dict[str, str] = {}


def _tier_name(label: str) -> str:
    name = _TIER_NAMES.get(label)
    if name is None:
        if len(_TIER_NAMES) >= 1024:
            _TIER_NAMES.clear()
        name = _TIER_NAMES[label] = f"{s.TIER_SPAN} {label}"
    return name


def _scrub_verdict(verdict: Verdict, scrubber: Scrubber) -> Verdict:
    return Verdict(
        verdict.position,
        verdict.tier_index,
        verdict.device,
        verdict.node,
        verdict.reason,
        verdict.source,
        scrubber.detail(verdict.detail),
    )
