"""A usual decision written as OTLP protobuf in one pass from its record, without its trace shape.

``audit.telemetry.shape`` lays a decision's trace out as objects (spans, attribute mappings,
verdicts, log records) that ``audit.telemetry.otlpwire`` then writes; for the decisions an engine
exports by the thousand, building those objects costs as much as writing the bytes. ``encode``
writes the same bytes straight from the record for the usual case: no redaction, no labels, no
engine verdicts besides the record's exemplars, no blockers, verdicts as log records only, and
no more exemplars than the bound. Anything else returns None and goes the general way, before
any state (the retry links) has changed. That both ways give identical bytes is a tested property.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence

from audit.allocator.outcome import TierEvidence
from audit.records import DecisionRecord, Outcome
from audit.telemetry import otlpwire
from audit.telemetry import schema as s
from audit.telemetry.attributes import (
    RootAttributes,
    TierAttributes,
    Verdict,
    VerdictAttributes,
    VerdictSelection,
    tier_results,
    tier_status_message,
)
from audit.telemetry.ids import decision_id_bytes, wait_span_id_for
from audit.telemetry.shape import (
    NOMINAL_TIER_US,
    AttemptLinks,
    LinkShape,
    ShapeOptions,
    decision_shape,
    why_url,
)
from audit.telemetry.timefmt import time_ns

_ERROR = Outcome.ERROR.value
_SPAN_ATTR, _LOG_ATTR = b"\x4a", b"\x32"
_TIMES = struct.Struct("<BQBQ").pack  # start_time_unix_nano (fixed64 field 7), end (field 8)
_FIXED64 = struct.Struct("<Q").pack
_SPAN_FLAGS = b"\x85\x01" + struct.pack("<I", 0x100)  # parent is local, as otlpwire writes it
_UNSET_TAIL = b"\x7a\x00" + _SPAN_FLAGS
_ERROR_CODE = b"\x18\x02"  # Status.code ERROR
_LOG_HEAD = b"\x10\x09\x1a\x04INFO"  # severity_number INFO (9), severity_text "INFO"
_LOG_TRACE = b"\x45" + struct.pack("<I", 1) + b"\x4a\x10"  # flags (sampled), trace_id's tag and length
_LOG_TAIL = b"\x62" + otlpwire.varint(len(s.VERDICT_EVENT)) + s.VERDICT_EVENT.encode()
_ROOT_NAME = b"\x2a" + otlpwire.varint(len(s.ROOT_SPAN)) + s.ROOT_SPAN.encode() + b"\x30\x01"
_WAIT_NAME = b"\x2a" + otlpwire.varint(len(s.WAIT_SPAN)) + s.WAIT_SPAN.encode() + b"\x30\x01"
_ld, _varint = otlpwire._ld, otlpwire.varint
_TIER_NAMES: dict[str, bytes] = {}


def fields(record: DecisionRecord, verdicts: Sequence[TierEvidence], labels: Mapping[str, str] | None,
           options: ShapeOptions, links: AttemptLinks | None, spans: bool = True,
           logs: bool = True) -> tuple[list[bytes], list[bytes], DecisionRecord]:
    """A decision's encoded spans and verdict log records, and the record as sent (redacted when
    the options say so): written by ``encode`` when it can, else through its trace shape."""
    if not verdicts and not labels:
        written = encode(record, options, links, spans, logs)
        if written is not None:
            return written[0], written[1], record
    shape = decision_shape(record, verdicts, labels, options, links)
    decision_spans, decision_logs = otlpwire.decision(shape, spans, logs)
    return decision_spans, decision_logs, shape.record  # a tier span's name field and kind, by the tier's label


def _tier_name(tier_label: str) -> bytes:
    name = _TIER_NAMES.get(tier_label)
    if name is None:
        if len(_TIER_NAMES) >= 1024:
            _TIER_NAMES.clear()
        text = f"{s.TIER_SPAN} {tier_label}".encode()
        name = _TIER_NAMES[tier_label] = b"\x2a" + _ld(text) + b"\x30\x01"
    return name


def _field(tag: bytes, body: bytes) -> bytes:
    n = len(body)
    return tag + (otlpwire._SMALL[n] if n < 16384 else _varint(n)) + body


def encode(record: DecisionRecord, options: ShapeOptions, links: AttemptLinks | None,
           spans: bool = True, logs: bool = True) -> tuple[list[bytes], list[bytes]] | None:
    """The decision's spans and verdict log records as ``otlpwire.decision`` writes them for
    ``decision_shape(record, (), None, options, links)``, or None when this one needs that way."""
    if record.blockers or options.redaction.active or options.verdict_events:
        return None
    duration_us, wait_ms = record.duration_us, record.wait_ms
    if duration_us < 0 or wait_ms < 0:
        return None  # the general way names the field in its error
    tiers = record.tiers
    exemplars = 0
    for tier in tiers:
        exemplars += len(tier.exemplars)
    if exemplars > options.max_verdicts:
        return None
    t = time_ns(record)
    decision_id = record.decision_id
    salt = options.id_salt
    trace, root_id, tier_ids = decision_id_bytes(decision_id, len(tiers), salt)

    results = tier_results(record)
    tried = len(results) - results.count(s.TIER_NOT_TRIED)
    if duration_us:
        slot = duration_us * 1000 // max(tried, 1)
        decided = t + duration_us * 1000
    else:
        slot = NOMINAL_TIER_US * 1000
        decided = t + tried * slot

    verdicts: list[Verdict] = []
    if exemplars:
        for position, tier in enumerate(tiers):
            for ex in tier.exemplars:
                verdicts.append(Verdict(position, tier.index, ex.device, ex.node, ex.reason, "exemplar", ex.detail))
    # the retry links change state: everything that can send a decision the general way is above
    previous = (links.previous(record, int.from_bytes(trace, "big"), int.from_bytes(root_id, "big"))
                if links is not None else None)
    out_spans: list[bytes] = []
    if spans:
        head = (b"\x0a\x10", trace, b"\x12\x08")
        parent = (b"\x22\x08", root_id)
        for position, tier in enumerate(tiers):
            result = results[position]
            start = t + position * slot
            parts = [*head, tier_ids[position], *parent, _tier_name(tier.model or tier.request or str(tier.index)),
                     _TIMES(0x39, start, 0x41, start if result == s.TIER_NOT_TRIED else start + slot)]
            otlpwire._tier_into(parts, _SPAN_ATTR, TierAttributes(record, tier, 0, result))
            if result == s.TIER_EXHAUSTED:
                parts += (b"\x7a", _ld(_field(b"\x12", tier_status_message(record, tier).encode()) + _ERROR_CODE),
                          _SPAN_FLAGS)
            else:
                parts.append(_UNSET_TAIL)
            out_spans.append(_field(b"\x12", b"".join(parts)))

        root_start = t - wait_ms * 1_000_000
        if wait_ms:
            wait_id = wait_span_id_for(decision_id, salt).to_bytes(8, "big")
            out_spans.append(_field(b"\x12", b"".join((
                *head, wait_id, *parent, _WAIT_NAME, _TIMES(0x39, root_start, 0x41, t),
                _SPAN_ATTR, otlpwire._recent(s.DECISION_ID, decision_id), _SPAN_ATTR, otlpwire._recent(s.WAIT_MS, wait_ms),
                _UNSET_TAIL))))

        parts = [*head, root_id, _ROOT_NAME, _TIMES(0x39, root_start, 0x41, decided)]
        otlpwire._root_into(parts, _SPAN_ATTR, RootAttributes(record, {}, [], VerdictSelection(verdicts, {}),
                                                              why_url(options.api_url, record)))
        if previous is not None:
            parts.append(otlpwire._link(LinkShape(previous.trace_id, previous.span_id,
                                                  {s.LINK_KIND: s.PREVIOUS_ATTEMPT, s.LINK_ATTEMPT: previous.attempt})))
        if record.outcome == _ERROR:
            message = (record.message or "allocation error").encode()
            parts += (b"\x7a", _ld(_field(b"\x12", message) + _ERROR_CODE), _SPAN_FLAGS)
        else:
            parts.append(_UNSET_TAIL)
        out_spans.append(_field(b"\x12", b"".join(parts)))

    out_logs: list[bytes] = []
    if verdicts and logs and options.verdict_logs:
        for verdict in verdicts:
            on_tier = verdict.position
            assert on_tier is not None  # every exemplar belongs to its tier
            at = _FIXED64(t + on_tier * slot)
            where = f" on {verdict.node}" if verdict.node else ""
            text = f"tier {verdict.tier_index}: {verdict.device}{where}: {verdict.reason}".encode()
            parts = [b"\x09", at, _LOG_HEAD, _field(b"\x2a", _field(b"\x0a", text))]
            otlpwire._verdict_into(parts, _LOG_ATTR, VerdictAttributes(decision_id, verdict))
            parts += (_LOG_TRACE, trace, b"\x52\x08", tier_ids[on_tier], b"\x59", at, _LOG_TAIL)
            out_logs.append(_field(b"\x12", b"".join(parts)))
    return out_spans, out_logs
