"""A usual decision written as OTLP protobuf in one pass from its record, without its trace shape.

``audit.telemetry.shape`` lays a decision's trace out as objects (spans, attribute mappings,
verdicts, log records) that ``audit.telemetry.otlpwire`` then writes; for the decisions an engine
exports by the thousand, building those objects costs as much as writing the bytes. ``encode``
writes the same bytes straight from the record for the usual case: no redaction, no labels, no
engine verdicts besides the record's exemplars, verdicts as log records only, and no more
exemplars than the bound (blockers, rare but common enough in a busy cluster, are written here
too). Anything else returns None and goes the general way, before
any state (the retry links) has changed. That both ways give identical bytes is a tested property.

The attributes are written from the groups the general writer caches (a root's stable fields, a
tier's index and model, a verdict's device and node, ...), and a group seen for the first time
is written by the general writer, which keeps it. Each attribute whose key is known here has its
head (tag, lengths, key) ready for every short text length and every varint size, so a string
or count is two pieces for the final ``join``, with no arithmetic and no call.
"""

from __future__ import annotations

import operator
import struct
from collections.abc import Mapping, Sequence
from typing import Any

from audit.allocator.outcome import TierEvidence
from audit.records import DecisionRecord, Outcome, record_value_bytes
from audit.telemetry import otlpwire
from audit.telemetry import schema as s
from audit.telemetry.attributes import (
    ROOT_FIELDS,
    ROOT_STABLE,
    RootAttributes,
    TierAttributes,
    Verdict,
    VerdictAttributes,
    VerdictSelection,
    declared_field_reader,
    field_reader,
    tier_blocker_attributes,
    tier_results,
    tier_status_message,
)
from audit.telemetry.ids import decision_id_bytes
from audit.telemetry.shape import (
    NOMINAL_TIER_US,
    AttemptLinks,
    LinkShape,
    ShapeOptions,
    decision_shape,
    drawn_us,
    pod_created_ns,
    tier_starts,
    why_url,
)
from audit.telemetry.timefmt import time_ns

_ERROR = Outcome.ERROR.value
_NOT_TRIED, _EXHAUSTED = s.TIER_NOT_TRIED, s.TIER_EXHAUSTED
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
_SMALL, _ld, _varint, _key_prefix = otlpwire._SMALL, otlpwire._ld, otlpwire.varint, otlpwire._key_prefix
_SHORT = 128  # texts shorter than this have their attribute's head ready-made
# a span's or log record's field in its scope (tag 2 and the length) for a body of n < _ITEMS
# bytes: the item is one concatenation of ready pieces (most spans are a few hundred bytes, a root
# with its record a few thousand)
_ITEMS = 8192
_ITEM_HEADS = tuple(b"\x12" + _SMALL[n] for n in range(_ITEMS))


def _string_heads(tag: bytes, key: str) -> tuple[bytes, ...]:
    """Everything before the text of a ``key`` attribute holding a string of n < _SHORT bytes, by n:
    the parent's tag, the KeyValue's length, its key and the value's head (as ``otlpwire._str_field``)."""
    return tuple(b"".join(otlpwire._str_field(tag, _key_prefix(key), b"\x00" * n)[:4]) for n in range(_SHORT))


def _int_heads(tag: bytes, key: str) -> tuple[bytes, ...]:
    """Everything before the varint of a ``key`` attribute holding an int, by the varint's size."""
    prefix = _key_prefix(key)
    return (b"",) + tuple(tag + _SMALL[len(prefix) + 3 + size] + prefix + b"\x12" + _SMALL[1 + size] + b"\x18"
                          for size in range(1, 11))


_POD, _UID, _NODE, _IN, _OUT, _MESSAGE, _WHY = (_string_heads(_SPAN_ATTR, key) for key in (
    s.K8S_POD_NAME, s.K8S_POD_UID, s.K8S_NODE, s.INPUT_DIGEST, s.OUTPUT_DIGEST, s.MESSAGE, s.WHY_URL))
_SEQ, _WAIT, _STEPS, _DURATION, _EXPORTED = (_int_heads(_SPAN_ATTR, key) for key in (
    s.SEQ, s.WAIT_MS, s.STEPS, s.DURATION_US, s.VERDICTS_EXPORTED))
# a decision id attribute (a KeyValue after its parent's tag) before its text, by the text's length
_DECISION = tuple(b"".join(otlpwire._str_field(b"", _key_prefix(s.DECISION_ID), b"\x00" * n)[1:4]) for n in range(_SHORT))
_NONE_DROPPED = otlpwire._tagged(_SPAN_ATTR, s.VERDICTS_DROPPED, 0)
_CLAIMS, _CLAIM_UIDS, _DEVICES, _RECORD = (_key_prefix(key) for key in (s.CLAIMS, s.CLAIM_UIDS, s.DEVICES, s.RECORD))


def _one_string_heads(prefix: bytes) -> tuple[bytes, ...]:
    """Everything before the text of a list attribute holding one string of n < _SHORT bytes, by
    n, as ``otlpwire._strings_field`` writes it (most pods have one claim and one device)."""
    return tuple(written[:len(written) - n] for n in range(_SHORT)
                 for written in (otlpwire._strings_field(_SPAN_ATTR, prefix, ["\x00" * n]),))


_ONE_CLAIM, _ONE_CLAIM_UID, _ONE_DEVICE = (_one_string_heads(prefix) for prefix in (_CLAIMS, _CLAIM_UIDS, _DEVICES))
_stable_values = declared_field_reader([name for _, name in ROOT_FIELDS[:ROOT_STABLE]])
_varying_values = field_reader(("pod", "pod_uid", "node", "input_digest", "output_digest", "message",
                                "seq", "wait_ms", "steps", "duration_us", "claims", "claim_uids", "preference"))
# a tier's reason codes sorted, each with its attributes by count, by the codes in the tier's order
_REASON_ORDER: dict[tuple[str, ...], tuple[tuple[str, dict[int, bytes] | None], ...]] = {}
# a reason count's attribute by its code and count; a code's heads (see _int_heads) by the code
_REASON_COUNTS: dict[str, dict[int, bytes]] = {}
_REASON_HEADS: dict[str, tuple[bytes, ...]] = {}
_COUNTS_PER_REASON = 4096
_STABLE: dict[tuple[Any, ...], bytes] = {}  # the root's stable attributes, by values of their declared classes
_TIER_SPANS: dict[tuple[int, str, str, int, int, str], tuple[bytes, bytes]] = {}  # see _tier_groups
_DETAILS: dict[tuple[str, str], bytes] = {}  # a verdict's detail of one text, by its key and text
_VERDICTS: dict[tuple[Any, ...], tuple[bytes, bytes]] = {}  # see _verdict
_TIER_NAMES: dict[str, bytes] = {}  # a tier span's name field and kind, by the tier's label
_DEVICE_LISTS: dict[tuple[str, ...], bytes] = {}  # see _device_list
_device_name = operator.attrgetter("device")


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
    return decision_spans, decision_logs, shape.record


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
    return tag + (_SMALL[n] if n < 16384 else _varint(n)) + body


def _verdict(key: tuple[Any, ...], index: Any, device: Any, node: Any, reason: Any, position: int,
             decision_id: str) -> tuple[bytes, bytes]:
    """A verdict log record's body field, and its attributes after the decision id but for the
    detail, as ``otlpwire.log_record`` writes them; kept by the verdict's tier, device, node and reason."""
    on = f" on {node}" if node else ""
    body = _field(b"\x2a", _field(b"\x0a", f"tier {index}: {device}{on}: {reason}".encode()))
    parts: list[bytes] = []
    otlpwire._verdict_into(parts, _LOG_ATTR, VerdictAttributes(
        decision_id, Verdict(position, index, device, node, reason, "exemplar", {})))
    written = body, b"".join(parts[2:])  # after the tag and the decision id
    if len(_VERDICTS) >= otlpwire._CACHE_LIMIT:
        _VERDICTS.clear()
    _VERDICTS[key] = written
    return written


def _detail(detail: Mapping[str, object]) -> bytes:
    """A verdict's detail attributes as ``otlpwire._verdict_into`` writes them; a detail of one
    text (who holds a device in use, say) is kept whole, as such details repeat."""
    if len(detail) == 1:
        for key, value in detail.items():
            if value.__class__ is str:
                entry = (key, value)
                written = _DETAILS.get(entry)
                if written is None:
                    if len(_DETAILS) >= otlpwire._CACHE_LIMIT:
                        _DETAILS.clear()
                    written = _DETAILS[entry] = otlpwire.attributes(_LOG_ATTR, {s.VERDICT_DETAIL_PREFIX + key: value})
                return written
    return otlpwire.attributes(_LOG_ATTR, {s.VERDICT_DETAIL_PREFIX + k: detail[k] for k in sorted(detail)})


def _root_attributes(parts: list[bytes], record: DecisionRecord, decision: bytes, exported: int, why: str) -> bool:
    """The root span's attributes as ``otlpwire._root_into`` writes them for a record without
    labels or redaction, and with no verdict dropped; False (and nothing written) when a
    field holds a value of another class than the record's own, which the general way handles."""
    stable = _stable_values(record)
    if stable is None:
        return False  # a value of another class than its field's: the general way keys by class too
    cached = _STABLE.get(stable)
    if cached is None:
        if len(_STABLE) >= otlpwire._CACHE_LIMIT:
            _STABLE.clear()
        cached = _STABLE[stable] = otlpwire.stable_root_attributes(_SPAN_ATTR, stable)
    pod, uid, node, digest_in, digest_out, message, seq, wait, steps, duration, claims, uids, preference = (
        _varying_values(record))
    if not (pod.__class__ is uid.__class__ is node.__class__ is digest_in.__class__ is digest_out.__class__
            is message.__class__ is str and seq.__class__ is wait.__class__ is steps.__class__ is duration.__class__
            is int and claims.__class__ is uids.__class__ is preference.__class__ is list):
        return False
    if (seq | wait | steps | duration) >> 63:  # one is negative, or past int64 (written as text)
        return False
    listed = otlpwire._LISTS.get((s.PREFERENCE, tuple(preference))) if preference else b""
    if listed is None:
        return False
    # nothing sends the decision the general way from here on: written straight into the span
    parts.append(cached)
    if pod:
        text = pod.encode()
        n = len(text)
        parts += (_POD[n] if n < _SHORT else _long_head(s.K8S_POD_NAME, text), text)
    if uid:
        text = uid.encode()
        n = len(text)
        parts += (_UID[n] if n < _SHORT else _long_head(s.K8S_POD_UID, text), text)
    if node:
        text = node.encode()
        n = len(text)
        parts += (_NODE[n] if n < _SHORT else _long_head(s.K8S_NODE, text), text)
    vb = _SMALL[seq] if 0 <= seq < 16384 else _varint(seq)
    parts += (_SPAN_ATTR, decision, _SEQ[len(vb)], vb)
    if digest_in:
        text = digest_in.encode()
        n = len(text)
        parts += (_IN[n] if n < _SHORT else _long_head(s.INPUT_DIGEST, text), text)
    if digest_out:
        text = digest_out.encode()
        n = len(text)
        parts += (_OUT[n] if n < _SHORT else _long_head(s.OUTPUT_DIGEST, text), text)
    vb = _SMALL[wait] if 0 <= wait < 16384 else _varint(wait)
    vb2 = _SMALL[steps] if 0 <= steps < 16384 else _varint(steps)
    vb3 = _SMALL[duration] if 0 <= duration < 16384 else _varint(duration)
    parts += (_WAIT[len(vb)], vb, _STEPS[len(vb2)], vb2, _DURATION[len(vb3)], vb3)
    if message:
        text = message.encode()
        n = len(text)
        parts += (_MESSAGE[n] if n < _SHORT else _long_head(s.MESSAGE, text), text)
    if claims:
        parts += _list_pieces(_ONE_CLAIM, _CLAIMS, claims)
    if uids:
        parts += _list_pieces(_ONE_CLAIM_UID, _CLAIM_UIDS, uids)
    if preference:
        parts += (_SPAN_ATTR, listed)
    devices = record.devices
    if devices:
        if len(devices) == 1:
            parts += _list_pieces(_ONE_DEVICE, _DEVICES, (devices[0].device,))
        else:
            parts.append(_device_list(tuple(map(_device_name, devices))))
    if record.blockers:
        parts += (_SPAN_ATTR, otlpwire._strings(s.BLOCKERS, [f"{b.code}@{b.tier}" for b in record.blockers]))
    vb = _SMALL[exported] if exported < 16384 else _varint(exported)
    parts += (_EXPORTED[len(vb)], vb, _NONE_DROPPED)
    if why:
        text = why.encode()
        n = len(text)
        parts += (_WHY[n] if n < _SHORT else _long_head(s.WHY_URL, text), text)
    parts += otlpwire._str_field(_SPAN_ATTR, _RECORD, record_value_bytes(record))
    return True


def _device_list(names: tuple[str, ...]) -> bytes:
    """The root's devices attribute for several devices, kept by the names: a pod of several
    devices takes them from one node, so the same sets come back (a node's eight GPUs, say)."""
    written = _DEVICE_LISTS.get(names)
    if written is None:
        if len(_DEVICE_LISTS) >= otlpwire._CACHE_LIMIT:
            _DEVICE_LISTS.clear()
        written = otlpwire._strings_field(_SPAN_ATTR, _DEVICES, list(names))
        # names are kept only when all are str: another class equal to a str could encode otherwise
        if all(name.__class__ is str for name in names):
            _DEVICE_LISTS[names] = written
    return written


def _long_head(key: str, text: bytes) -> bytes:
    """What ``_string_heads`` holds, for a text of _SHORT bytes or more."""
    return b"".join(otlpwire._str_field(_SPAN_ATTR, _key_prefix(key), text)[:4])


def _list_pieces(heads: tuple[bytes, ...], prefix: bytes, values: Sequence[str]) -> tuple[bytes, ...]:
    """A list attribute as pieces for the span's ``join``: of one short string, its ready head
    (``heads``, by the text's length) and the text; else the attribute whole."""
    if len(values) == 1:
        value = values[0]
        if value.__class__ is str:
            text = value.encode()
            n = len(text)
            if n < _SHORT:
                return heads[n], text
    return (otlpwire._strings_field(_SPAN_ATTR, prefix, list(values)),)


def _tier_groups(key: tuple[int, str, str, int, int, str]) -> tuple[bytes, bytes]:
    """A tier span's name field, and its attributes from the index to the result as
    ``otlpwire._tier_into`` writes them (none dropped here), kept by those values: a tier considers
    its pool, so the devices considered repeat with the rest (a few dozen keys in a cluster-day)."""
    index, request, model, nodes, considered, result = key
    if len(_TIER_SPANS) >= otlpwire._CACHE_LIMIT:
        _TIER_SPANS.clear()
    groups = _TIER_SPANS[key] = (_tier_name(model or request or str(index)), b"".join((
        otlpwire.tier_head(_SPAN_ATTR, index, request, model), otlpwire._tagged(_SPAN_ATTR, s.TIER_CONSIDERED, considered),
        otlpwire.tier_tail(_SPAN_ATTR, nodes, 0, result))))
    return groups


def _reason_order(codes: tuple[str, ...]) -> tuple[tuple[str, dict[int, bytes] | None], ...]:
    """The codes a tier lists, sorted as ``otlpwire._tier_into`` writes them, each with its
    attributes by count (None for a code that is not a str, which the general writer handles);
    kept by the codes in the tier's order, a handful of sets."""
    if len(_REASON_ORDER) >= 1024:
        _REASON_ORDER.clear()
    order = _REASON_ORDER[codes] = tuple(
        (code, _reason_counts(code) if code.__class__ is str else None) for code in sorted(codes))
    return order


def _reason_counts(code: str) -> dict[int, bytes]:
    known = _REASON_COUNTS.get(code)
    if known is None:
        if len(_REASON_COUNTS) >= 1024:  # reason codes are a closed vocabulary; a record may not keep to it
            _REASON_COUNTS.clear()
            _REASON_HEADS.clear()
        known = _REASON_COUNTS[code] = {}
    return known


def _reason_count(known: dict[int, bytes], code: str, count: int) -> bytes:
    """A reason count's attribute, kept in ``known`` (the code's attributes by count)."""
    if count >> 63:  # negative or past int64: the general writer knows how each is sent
        return otlpwire._tagged(_SPAN_ATTR, s.TIER_REASON_PREFIX + code, count)
    heads = _REASON_HEADS.get(code)
    if heads is None:
        heads = _REASON_HEADS[code] = _int_heads(_SPAN_ATTR, s.TIER_REASON_PREFIX + code)
    vb = _varint(count)
    if len(known) >= _COUNTS_PER_REASON:
        known.clear()
    written = known[count] = heads[len(vb)] + vb
    return written


def encode(record: DecisionRecord, options: ShapeOptions, links: AttemptLinks | None,
           spans: bool = True, logs: bool = True) -> tuple[list[bytes], list[bytes]] | None:
    """The decision's spans and verdict log records as ``otlpwire.decision`` writes them for
    ``decision_shape(record, (), None, options, links)``, or None when this one needs that way."""
    if options.redaction.active or options.verdict_events:
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
    trace, span_ids = decision_id_bytes(decision_id, len(tiers), salt)  # 8 bytes each: root, wait, the tiers
    root_id = span_ids[0]
    why = why_url(options.api_url, record) if options.api_url else ""
    # the retry links change state: everything that can send a decision the general way is above
    # (an attribute group not cached yet is handed to the general writer in place, further down)
    previous = (links.previous(record, int.from_bytes(trace, "big"), int.from_bytes(root_id, "big"))
                if links is not None else None)

    results = tier_results(record)
    tried = len(results) - results.count(_NOT_TRIED)
    if duration_us:
        drawn = drawn_us(t, duration_us)
        slot = drawn * 1000 // max(tried, 1)
        decided = t + drawn * 1000
    else:
        slot = NOMINAL_TIER_US * 1000
        decided = t + tried * slot
    starts = tier_starts(t, results, slot)
    # every span and log record carries the decision id
    text = decision_id.encode()
    n = len(text)
    decision = _DECISION[n] + text if n < _SHORT else otlpwire._key_value(s.DECISION_ID, decision_id)

    out_spans: list[bytes] = []
    if spans:
        trace_head, parent, tagged = b"\x0a\x10" + trace + b"\x12\x08", b"\x22\x08" + root_id, _SPAN_ATTR + decision
        blockers = record.blockers
        for position, tier in enumerate(tiers):
            result = results[position]
            start = starts[position]
            times = _TIMES(0x39, start, 0x41, start if result == _NOT_TRIED else start + slot)
            tier_id = span_ids[position + 2]
            index, nodes, considered, request, model = (
                tier.index, tier.nodes_evaluated, tier.considered, tier.request, tier.model)
            if index.__class__ is nodes.__class__ is considered.__class__ is int and request.__class__ is model.__class__ is str:
                key = (index, request, model, nodes, considered, result)
                groups = _TIER_SPANS.get(key)
                if groups is None:
                    groups = _tier_groups(key)
                parts = [trace_head, tier_id, parent, groups[0], times, tagged, groups[1]]
                reasons = tier.reasons
                if reasons:
                    # by code, sorted; each code's attribute kept by its count: counts repeat across
                    # decisions (a pool's size, the devices in use)
                    codes = tuple(reasons)
                    order = _REASON_ORDER.get(codes)
                    if order is None:
                        order = _reason_order(codes)
                    for code, known in order:
                        count = reasons[code]
                        # the class is checked, not only the value: True equals 1 but is written as a bool
                        if known is not None and count.__class__ is int:
                            counted = known.get(count)
                            parts.append(counted if counted is not None else _reason_count(known, code, count))
                        else:
                            parts.append(otlpwire._tagged(_SPAN_ATTR, s.TIER_REASON_PREFIX + code, count))
                if blockers:
                    blocked = tier_blocker_attributes(record, index)
                    if blocked:
                        parts.append(otlpwire.attributes(_SPAN_ATTR, blocked))
            else:  # values of other classes than the record's own, or a count past int64: the general writer's
                parts = [trace_head, tier_id, parent, _tier_name(tier.model or tier.request or str(tier.index)), times]
                otlpwire._tier_into(parts, _SPAN_ATTR, TierAttributes(record, tier, 0, result))
            if result == _EXHAUSTED:
                parts += (b"\x7a", _ld(_field(b"\x12", tier_status_message(record, tier).encode()) + _ERROR_CODE),
                          _SPAN_FLAGS)
            else:
                parts.append(_UNSET_TAIL)
            body = b"".join(parts)
            n = len(body)
            out_spans.append(_ITEM_HEADS[n] + body if n < _ITEMS else _field(b"\x12", body))

        root_start = pod_created_ns(t, wait_ms)
        if wait_ms:
            out_spans.append(_field(b"\x12", b"".join((
                trace_head, span_ids[1], parent, _WAIT_NAME, _TIMES(0x39, root_start, 0x41, t),
                _SPAN_ATTR, decision, _SPAN_ATTR, otlpwire._recent(s.WAIT_MS, wait_ms), _UNSET_TAIL))))

        parts = [trace_head, root_id, _ROOT_NAME, _TIMES(0x39, root_start, 0x41, decided)]
        if not _root_attributes(parts, record, decision, exemplars, why):
            selection = VerdictSelection([Verdict(None, 0, "", "", "", "")] * exemplars, {})  # counted only
            otlpwire._root_into(parts, _SPAN_ATTR, RootAttributes(record, {}, [], selection, why))
        if previous is not None:
            parts.append(otlpwire._link(LinkShape(previous.trace_id, previous.span_id,
                                                  {s.LINK_KIND: s.PREVIOUS_ATTEMPT, s.LINK_ATTEMPT: previous.attempt})))
        if record.outcome == _ERROR:
            message = (record.message or "allocation error").encode()
            parts += (b"\x7a", _ld(_field(b"\x12", message) + _ERROR_CODE), _SPAN_FLAGS)
        else:
            parts.append(_UNSET_TAIL)
        body = b"".join(parts)
        n = len(body)
        out_spans.append(_ITEM_HEADS[n] + body if n < _ITEMS else _field(b"\x12", body))

    out_logs: list[bytes] = []
    if exemplars and logs and options.verdict_logs:
        tagged, trace_tail = _LOG_ATTR + decision, _LOG_TRACE + trace + b"\x52\x08"
        for position, tier in enumerate(tiers):
            if not tier.exemplars:
                continue
            # the time and the tier's span id, the same for the tier's verdicts: a tier has a few
            # (the engine keeps three at most), so each log record is joined from the pieces
            at, tier_id = _FIXED64(starts[position]), span_ids[position + 2]
            index = tier.index
            plain_index = index.__class__ is int
            for ex in tier.exemplars:
                device, node, reason, detail = ex.device, ex.node, ex.reason, ex.detail
                # the class of each value is part of the key unless all are the usual ones
                verdict_key = ((index, device, node, reason) if plain_index and device.__class__ is node.__class__
                               is reason.__class__ is str else (index, index.__class__, device, device.__class__,
                                                                node, node.__class__, reason, reason.__class__))
                written = _VERDICTS.get(verdict_key)
                if written is None:
                    written = _verdict(verdict_key, index, device, node, reason, position, decision_id)
                if detail:
                    body = b"".join((b"\x09", at, _LOG_HEAD, written[0], tagged, written[1], _detail(detail),
                                     trace_tail, tier_id, b"\x59", at, _LOG_TAIL))
                else:
                    body = b"".join((b"\x09", at, _LOG_HEAD, written[0], tagged, written[1],
                                     trace_tail, tier_id, b"\x59", at, _LOG_TAIL))
                n = len(body)
                out_logs.append(_ITEM_HEADS[n] + body if n < _ITEMS else _field(b"\x12", body))
    return out_spans, out_logs
