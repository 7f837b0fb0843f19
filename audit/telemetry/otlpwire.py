"""OTLP protobuf written directly from a decision's trace shape, without building messages.

Building ``opentelemetry-proto`` messages for one decision (some 80 attributes over its spans and
verdicts) costs about 60 µs in Python, and the SDK's OTLP encoders several times that; writing the
protobuf wire format (the encoding rules of protobuf's "Encoding" guide) for the few messages a
decision uses costs a fraction: the attribute keys are fixed, so each attribute is a cached
prefix plus its value, and values that repeat across decisions (cluster, models, reason counts,
policy) are cached whole. The envelope (resource and instrumentation scope) is built once with
the real ``opentelemetry-proto`` messages. Field numbers are those of
``opentelemetry/proto/trace/v1/trace.proto``, ``logs/v1/logs.proto`` and ``common/v1/common.proto``
(OTLP 1.x); tests decode every byte with those messages and compare with the SDK's encoders.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry.proto.common.v1.common_pb2 import AnyValue, ArrayValue, InstrumentationScope, KeyValue
from opentelemetry.proto.resource.v1.resource_pb2 import Resource

from audit.telemetry import schema as s
from audit.telemetry.attributes import (
    ROOT_FIELDS,
    ROOT_STABLE,
    RootAttributes,
    TierAttributes,
    VerdictAttributes,
    root_field_values,
)
from audit.telemetry.record_dict import record_text
from audit.telemetry.shape import DecisionShape, EventShape, LinkShape, LogShape, SpanShape

_FIXED64 = struct.Struct("<Q").pack
_FIXED32 = struct.Struct("<I").pack
_DOUBLE = struct.Struct("<d").pack
_SMALL = tuple(bytes([n]) if n < 0x80 else bytes([(n & 0x7F) | 0x80, n >> 7]) for n in range(1 << 14))


def varint(n: int) -> bytes:
    if 0 <= n < 16384:
        return _SMALL[n]
    n &= 0xFFFFFFFFFFFFFFFF  # negative int64 values are written as their 64-bit two's complement
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _ld(payload: bytes) -> bytes:
    """A length prefix and the payload (the value part of a length-delimited field)."""
    n = len(payload)
    return (_SMALL[n] if n < 16384 else varint(n)) + payload


# tags: (field number << 3) | wire type (0 varint, 1 fixed64, 2 length-delimited, 5 fixed32)
_ANY_STRING, _ANY_BOOL, _ANY_INT, _ANY_DOUBLE, _ANY_ARRAY = b"\x0a", b"\x10", b"\x18", b"\x21", b"\x2a"
_SPAN_ATTR, _EVENT_ATTR, _LINK_ATTR, _LOG_ATTR = b"\x4a", b"\x1a", b"\x22", b"\x32"
_SPAN_FLAGS = b"\x85\x01" + _FIXED32(0x100)  # SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK: parent is local
_LINK_FLAGS = b"\x35" + _FIXED32(0x100)
_KIND_INTERNAL = b"\x30\x01"
_LOG_FIXED = b"\x10\x09\x1a\x04INFO"  # severity_number INFO (9), severity_text "INFO"
_LOG_FLAGS = b"\x45" + _FIXED32(1)  # trace flags: sampled
_VERDICT_EVENT = b"\x62" + _ld(s.VERDICT_EVENT.encode())

# Values of these keys differ per decision: caching them would only churn the cache.
_UNCACHED = frozenset({
    s.RECORD, s.DECISION_ID, s.K8S_POD_NAME, s.K8S_POD_UID, s.SEQ, s.INPUT_DIGEST, s.OUTPUT_DIGEST,
    s.MESSAGE, s.CLAIMS, s.CLAIM_UIDS, s.WHY_URL, s.WAIT_MS, s.DURATION_US, s.DEVICES,
})
_CACHE_LIMIT = 16_384  # values kept per key (a large cluster has thousands of devices)
_KEYS: dict[str, bytes] = {}
# per key: value -> (its class, the encoded KeyValue); the class tells True from 1, which are equal
_VALUES: dict[str, dict[Any, tuple[type, bytes]]] = {}


def any_value(value: Any) -> bytes:
    """The body of an ``AnyValue`` holding ``value`` (str, bool, int, float, or a sequence of them)."""
    cls = value.__class__
    if cls is str:
        return _ANY_STRING + _ld(value.encode())
    if cls is bool:
        return b"\x10\x01" if value else b"\x10\x00"
    if cls is int:
        return _ANY_INT + varint(value)
    if cls is float:
        return _ANY_DOUBLE + _DOUBLE(value)
    if isinstance(value, str):
        return _ANY_STRING + _ld(str(value).encode())
    if isinstance(value, bool):
        return b"\x10\x01" if value else b"\x10\x00"
    if isinstance(value, int):
        return _ANY_INT + varint(int(value))
    if isinstance(value, float):
        return _ANY_DOUBLE + _DOUBLE(float(value))
    if isinstance(value, list | tuple):
        return _ANY_ARRAY + _ld(b"".join(b"\x0a" + _ld(any_value(v)) for v in value))
    raise TypeError(f"attribute value of type {cls.__name__} cannot be sent over OTLP")


def _key_prefix(key: str) -> bytes:
    prefix = _KEYS.get(key)
    if prefix is None:
        prefix = _KEYS[key] = b"\x0a" + _ld(key.encode())
    return prefix


# per uncached key: its last value and encoding; a decision repeats its id on every span and log
_LAST: dict[str, tuple[Any, type, bytes]] = {}


def _recent(key: str, value: Any) -> bytes:
    last = _LAST.get(key)
    if last is not None and last[0] == value and last[1] is value.__class__:
        return last[2]
    encoded = _key_value(key, value)
    _LAST[key] = (value, value.__class__, encoded)
    return encoded


def _key_value(key: str, value: Any) -> bytes:
    """A ``KeyValue`` as length prefix + body, ready to follow any parent's attribute tag."""
    if value.__class__ is str:
        # the common case, inlined: KeyValue{key, value: AnyValue{string_value}}
        text = value.encode()
        n = len(text)
        inner = (_SMALL[n] if n < 16384 else varint(n)) + text
        n = len(inner) + 1
        body = _key_prefix(key) + b"\x12" + (_SMALL[n] if n < 16384 else varint(n)) + b"\x0a" + inner
    else:
        body = _key_prefix(key) + b"\x12" + _ld(any_value(value))
    n = len(body)
    return (_SMALL[n] if n < 16384 else varint(n)) + body


def _strings(key: str, values: list[str]) -> bytes:
    """A ``KeyValue`` holding an array of strings, as length prefix + body."""
    entries = []
    for value in values:
        text = value.encode()
        n = len(text)
        inner = b"\x0a" + (_SMALL[n] if n < 16384 else varint(n)) + text  # AnyValue{string_value}
        entries.append(b"\x0a" + _ld(inner))  # ArrayValue.values
    return _ld(_key_prefix(key) + b"\x12" + _ld(_ANY_ARRAY + _ld(b"".join(entries))))


_STABLE: dict[tuple[Any, ...], bytes] = {}  # the first ROOT_STABLE root attributes, by their values
_LISTS: dict[tuple[str, tuple[str, ...]], bytes] = {}  # list attributes that repeat (preference)


def root_attributes(tag: bytes, root: RootAttributes) -> bytes:
    """The root span's attributes written from the record through ``ROOT_FIELDS``, in the order
    and with the values ``audit.telemetry.attributes.root_attributes`` gives (tested equal)."""
    values = root_field_values(root.record)
    stable_values = values[:ROOT_STABLE]
    # the class of each value is part of the key: True and 1 are equal but encode differently
    stable_key = (tag, *stable_values, *map(type, stable_values))
    stable = _STABLE.get(stable_key)
    if stable is None:
        if len(_STABLE) >= _CACHE_LIMIT:
            _STABLE.clear()
        stable = _STABLE[stable_key] = b"".join(
            tag + _key_value(key, value)
            for (key, _), value in zip(ROOT_FIELDS[:ROOT_STABLE], stable_values, strict=True) if value != "")
    parts = [stable]
    append = parts.append
    for (key, _), value in zip(ROOT_FIELDS[ROOT_STABLE:], values[ROOT_STABLE:], strict=True):
        cls = value.__class__
        if cls is list:
            if not value:
                continue
            if key in _UNCACHED:
                append(tag + _strings(key, value))
                continue
            list_key = (key, tuple(value))
            encoded = _LISTS.get(list_key)
            if encoded is None:
                if len(_LISTS) >= _CACHE_LIMIT:
                    _LISTS.clear()
                encoded = _LISTS[list_key] = _strings(key, value)
            append(tag + encoded)
        elif value == "":
            continue
        elif key is s.DECISION_ID:
            append(tag + _recent(key, value))
        else:
            # these identify the decision: a cache would only hold values never seen again
            append(tag + _key_value(key, value))
    # then what ``root_extras`` lists, in its order
    record = root.record
    if record.devices:
        append(tag + _strings(s.DEVICES, [d.device for d in record.devices]))
    if record.blockers:
        append(tag + _strings(s.BLOCKERS, [f"{b.code}@{b.tier}" for b in record.blockers]))
    append(tag + _cached(s.VERDICTS_EXPORTED, len(root.selection.kept)))
    append(tag + _cached(s.VERDICTS_DROPPED, root.selection.dropped))
    if root.why_url:
        append(tag + _key_value(s.WHY_URL, root.why_url))
    append(tag + _key_value(s.RECORD, record_text(record)))
    if root.paths or root.labels:
        extras: dict[str, Any] = {s.REDACTED: list(root.paths)} if root.paths else {}
        for label in sorted(root.labels):
            extras[s.K8S_POD_LABEL_PREFIX + label] = root.labels[label]
        append(attributes(tag, extras))
    return b"".join(parts)


def _cached(key: str, value: Any) -> bytes:
    """A ``KeyValue`` of a value that repeats across decisions, from the per-key cache."""
    per_key = _VALUES.get(key)
    if per_key is None:
        per_key = _VALUES[key] = {}
    hit = per_key.get(value)
    if hit is None or hit[0] is not value.__class__:
        if len(per_key) >= _CACHE_LIMIT:
            per_key.clear()
        hit = per_key[value] = (value.__class__, _key_value(key, value))
    return hit[1]


_REASON_KEYS: dict[str, str] = {}


def tier_attributes(tag: bytes, attrs: TierAttributes) -> bytes:
    """A tier span's attributes in the order ``audit.telemetry.attributes.tier_attributes`` gives."""
    tier = attrs.tier
    parts = [
        tag + _recent(s.DECISION_ID, attrs.record.decision_id),
        tag + _cached(s.TIER_INDEX, tier.index),
        tag + _cached(s.TIER_REQUEST, tier.request),
        tag + _cached(s.TIER_MODEL, tier.model),
        tag + _key_value(s.TIER_CONSIDERED, tier.considered),
        tag + _cached(s.TIER_NODES_EVALUATED, tier.nodes_evaluated),
        tag + _cached(s.TIER_VERDICTS_DROPPED, attrs.dropped),
    ]
    if attrs.result:
        parts.append(tag + _cached(s.TIER_RESULT, attrs.result))
    reasons = tier.reasons
    for code in sorted(reasons):
        key = _REASON_KEYS.get(code)
        if key is None:
            key = _REASON_KEYS[code] = s.TIER_REASON_PREFIX + code
        parts.append(tag + _key_value(key, reasons[code]))  # counts vary from decision to decision
    if any(b.tier == tier.index for b in attrs.record.blockers):
        # blockers are rare: take them from the full mapping, after the fields above
        built = dict(attrs)
        parts.append(attributes(tag, {k: built[k] for k in list(built)[len(parts):]}))
    return b"".join(parts)


def verdict_attributes(tag: bytes, attrs: VerdictAttributes) -> bytes:
    """A verdict's attributes in the order ``audit.telemetry.attributes.verdict_attributes`` gives."""
    verdict = attrs.verdict
    parts = [
        tag + _recent(s.DECISION_ID, attrs.decision_id),
        tag + _cached(s.TIER_INDEX, verdict.tier_index),
        tag + _key_value(s.VERDICT_DEVICE, verdict.device),  # thousands of devices: not worth keeping
        tag + _key_value(s.VERDICT_NODE, verdict.node),
        tag + _cached(s.VERDICT_REASON, verdict.reason),
        tag + _cached(s.VERDICT_SOURCE, verdict.source),
    ]
    detail = verdict.detail
    if detail:
        parts.append(attributes(tag, {s.VERDICT_DETAIL_PREFIX + k: detail[k] for k in sorted(detail)}))
    return b"".join(parts)


def attributes(tag: bytes, attrs: Mapping[str, Any]) -> bytes:
    cls = attrs.__class__
    if cls is TierAttributes:
        return tier_attributes(tag, attrs)  # type: ignore[arg-type]
    if cls is VerdictAttributes:
        return verdict_attributes(tag, attrs)  # type: ignore[arg-type]
    if cls is RootAttributes:
        return root_attributes(tag, attrs)  # type: ignore[arg-type]
    parts: list[bytes] = []
    append = parts.append
    values = _VALUES
    for key, value in attrs.items():
        cls = value.__class__
        if cls is list:
            append(tag + (_strings(key, value) if all(v.__class__ is str for v in value) else _key_value(key, value)))
            continue
        if key in _UNCACHED:
            append(tag + _recent(key, value))
            continue
        per_key = values.get(key)
        if per_key is None:
            per_key = values[key] = {}
        hit = per_key.get(value)
        if hit is None or hit[0] is not cls:
            if len(per_key) >= _CACHE_LIMIT:
                per_key.clear()
            hit = per_key[value] = (cls, _key_value(key, value))
        append(tag + hit[1])
    return b"".join(parts)


def _event(event: EventShape) -> bytes:
    return b"\x5a" + _ld(b"\x09" + _FIXED64(event.time) + b"\x12" + _ld(event.name.encode())
                         + attributes(_EVENT_ATTR, event.attributes))


def _link(link: LinkShape) -> bytes:
    return b"\x6a" + _ld(b"\x0a\x10" + link.trace_id.to_bytes(16, "big") + b"\x12\x08" + link.span_id.to_bytes(8, "big")
                         + attributes(_LINK_ATTR, link.attributes) + _LINK_FLAGS)


def span(trace_id: bytes, sp: SpanShape) -> bytes:
    """One ``Span`` as a ``ScopeSpans.spans`` field (tag, length, body)."""
    status = b"\x7a\x00"
    if sp.status_code:
        message = sp.status_message.encode()
        status = b"\x7a" + _ld((b"\x12" + _ld(message) if message else b"") + b"\x18" + varint(sp.status_code))
    body = b"".join((
        b"\x0a\x10", trace_id, b"\x12\x08", sp.span_id.to_bytes(8, "big"),
        b"\x22\x08" + sp.parent_id.to_bytes(8, "big") if sp.parent_id else b"",
        b"\x2a", _ld(sp.name.encode()), _KIND_INTERNAL,
        b"\x39", _FIXED64(sp.start), b"\x41", _FIXED64(sp.end),
        attributes(_SPAN_ATTR, sp.attributes),
        b"".join(map(_event, sp.events)) if sp.events else b"",
        b"".join(map(_link, sp.links)) if sp.links else b"",
        status, _SPAN_FLAGS,
    ))
    return b"\x12" + _ld(body)


def log_record(trace_id: bytes, log: LogShape) -> bytes:
    """One verdict ``LogRecord`` as a ``ScopeLogs.log_records`` field."""
    time = _FIXED64(log.time)
    body = b"".join((
        b"\x09", time, _LOG_FIXED, b"\x2a", _ld(b"\x0a" + _ld(log.body.encode())),
        attributes(_LOG_ATTR, log.attributes), _LOG_FLAGS,
        b"\x4a\x10", trace_id, b"\x52\x08", log.span_id.to_bytes(8, "big"),
        b"\x59", time, _VERDICT_EVENT,
    ))
    return b"\x12" + _ld(body)


def decision(shape: DecisionShape, spans: bool = True, logs: bool = True) -> tuple[list[bytes], list[bytes]]:
    """A decision's spans and verdict log records as encoded fields, for ``Envelope`` to wrap."""
    trace_id = shape.trace_id.to_bytes(16, "big")
    return ([span(trace_id, sp) for sp in shape.spans] if spans else [],
            [log_record(trace_id, lg) for lg in shape.logs] if logs else [])


def resource(attrs: Mapping[str, Any]) -> Resource:
    """The resource of every export request (spans, logs and metrics alike)."""
    return Resource(attributes=[KeyValue(key=k, value=_proto_value(v)) for k, v in attrs.items()])


def _proto_value(value: Any) -> AnyValue:
    if isinstance(value, bool):
        return AnyValue(bool_value=value)
    if isinstance(value, int):
        return AnyValue(int_value=value)
    if isinstance(value, float):
        return AnyValue(double_value=value)
    if isinstance(value, str):
        return AnyValue(string_value=value)
    return AnyValue(array_value=ArrayValue(values=[_proto_value(v) for v in value]))


class Envelope:
    """Wraps encoded spans or log records into one export request under a fixed resource and
    instrumentation scope (``ExportTraceServiceRequest`` / ``ExportLogsServiceRequest``: both
    nest resource -> scope -> items with the same field numbers)."""

    def __init__(self, resource_attributes: Mapping[str, Any], scope_name: str = s.INSTRUMENTATION_SCOPE,
                 schema_url: str = "") -> None:
        self._resource = b"\x0a" + _ld(resource(resource_attributes).SerializeToString())
        self._scope = b"\x0a" + _ld(InstrumentationScope(name=scope_name).SerializeToString())
        self._schema_url = b"\x1a" + _ld(schema_url.encode()) if schema_url else b""

    def request(self, items: Sequence[bytes]) -> bytes:
        # the lengths are summed first so the request is written in one copy (it runs to megabytes)
        scoped = len(self._scope) + sum(map(len, items))
        scoped_len = varint(scoped)
        outer = len(self._resource) + 1 + len(scoped_len) + scoped + len(self._schema_url)
        head = b"\x0a" + varint(outer) + self._resource + b"\x12" + scoped_len + self._scope
        return b"".join([head, *items, self._schema_url])
