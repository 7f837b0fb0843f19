"""OTLP protobuf written directly from a decision's trace shape, without building messages.

Building ``opentelemetry-proto`` messages for one decision (some 80 attributes over its spans and
verdicts) costs about 60 µs in Python, and the SDK's OTLP encoders several times that; writing the
protobuf wire format (the encoding rules of protobuf's "Encoding" guide) for the few messages a
decision uses costs a fraction: the attribute keys are fixed, so each attribute is a cached
prefix plus its value, and values that repeat across decisions (cluster, models, reason counts,
policy, a device with its node) are cached whole. What Python pays is per operation, not per
byte, so a string or int value is written as a few ready pieces (the varint lengths around it
come from tables indexed by its length) and each span's pieces are joined once. The envelope
(resource and instrumentation scope) is built once with the real ``opentelemetry-proto`` messages. Field numbers are those of
``opentelemetry/proto/trace/v1/trace.proto``, ``logs/v1/logs.proto`` and ``common/v1/common.proto``
(OTLP 1.x); tests decode every byte with those messages and compare with the SDK's encoders.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry.proto.common.v1.common_pb2 import AnyValue, ArrayValue, InstrumentationScope, KeyValue
from opentelemetry.proto.resource.v1.resource_pb2 import Resource

from audit.records import record_value_bytes
from audit.telemetry import schema as s
from audit.telemetry.attributes import (
    INT64_MAX,
    INT64_MIN,
    ROOT_FIELDS,
    ROOT_STABLE,
    RootAttributes,
    TierAttributes,
    VerdictAttributes,
    root_field_values,
    tier_blocker_attributes,
)
from audit.telemetry.shape import DecisionShape, EventShape, LinkShape, LogShape, SpanShape

_FIXED64 = struct.Struct("<Q").pack
_FIXED32 = struct.Struct("<I").pack
_DOUBLE = struct.Struct("<d").pack
_SMALL = tuple(bytes([n]) if n < 0x80 else bytes([(n & 0x7F) | 0x80, n >> 7]) for n in range(1 << 14))


def varint(n: int) -> bytes:
    if 0 <= n < 16384:
        return _SMALL[n]
    if not INT64_MIN <= n <= INT64_MAX:  # masked, it would arrive as another number
        raise ValueError(f"{n} does not fit a 64-bit protobuf integer")
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
_CACHE_LIMIT = 16_384  # combinations kept per cache
_KEYS: dict[str, bytes] = {}


def any_value(value: Any) -> bytes:
    """The body of an ``AnyValue`` holding ``value`` (str, bool, int, float, or a sequence of them)."""
    cls = value.__class__
    if cls is str:
        return _ANY_STRING + _ld(value.encode())
    if cls is bool:
        return b"\x10\x01" if value else b"\x10\x00"
    if cls is int:
        if INT64_MIN <= value <= INT64_MAX:
            return _ANY_INT + varint(value)
        return _ANY_STRING + _ld(str(value).encode())  # as otlp_int sends it
    if cls is float:
        return _ANY_DOUBLE + _DOUBLE(value)
    if isinstance(value, str):
        return _ANY_STRING + _ld(str(value).encode())
    if isinstance(value, bool):
        return b"\x10\x01" if value else b"\x10\x00"
    if isinstance(value, int):
        return any_value(int(value))
    if isinstance(value, float):
        return _ANY_DOUBLE + _DOUBLE(float(value))
    if isinstance(value, list | tuple):
        return _ANY_ARRAY + _ld(b"".join(b"\x0a" + _ld(any_value(v)) for v in value))
    raise TypeError(f"attribute value of type {cls.__name__} cannot be sent over OTLP")


def _key_prefix(key: str) -> bytes:
    """A ``KeyValue``'s key field (tag, length, key), the same for every value of the key."""
    prefix = _KEYS.get(key)
    if prefix is None:
        prefix = _KEYS[key] = b"\x0a" + _ld(key.encode())
    return prefix


# What follows a KeyValue's key for a string value of n UTF-8 bytes: the value field's tag and
# length, then AnyValue's string_value tag and length. Kept for every length below _HEADS, so a
# string attribute is written as four ready pieces and the text itself, with no arithmetic on
# varint sizes and no intermediate concatenation.
def _str_head(n: int) -> bytes:
    inner = 1 + len(varint(n)) + n
    return b"\x12" + varint(inner) + b"\x0a" + varint(n)


_HEADS = 4096
_STR_HEAD = tuple(_str_head(n) for n in range(_HEADS))
# the same for an ArrayValue entry: values' tag and length, then AnyValue's string_value tag and length
def _entry_head(n: int) -> bytes:
    return b"\x0a" + varint(1 + len(varint(n)) + n) + b"\x0a" + varint(n)


_ENTRY_HEAD = tuple(_entry_head(n) for n in range(_HEADS))


def _str_field(tag: bytes, prefix: bytes, text: bytes) -> tuple[bytes, bytes, bytes, bytes, bytes]:
    """An attribute holding a string (already UTF-8) as pieces for a ``join``: the parent's
    attribute tag, the KeyValue's length, its key field, the value's head, the text."""
    n = len(text)
    head = _STR_HEAD[n] if n < _HEADS else _str_head(n)
    m = len(prefix) + len(head) + n
    return tag, _SMALL[m] if m < 16384 else varint(m), prefix, head, text


# What follows a KeyValue's key for an int value: the value field's tag and length, then
# AnyValue's int_value tag and the varint; kept for the small values most counts and times take.
def _int_head(value: int) -> bytes:
    number = varint(value)
    return b"\x12" + _SMALL[1 + len(number)] + b"\x18" + number


_INT_HEAD = tuple(_int_head(v) for v in range(_HEADS))


def _int_field(tag: bytes, prefix: bytes, value: int) -> tuple[bytes, ...]:
    """An attribute holding an int (of class int, not bool) as pieces for a ``join``; one outside
    int64 holds its decimal text, as ``otlp_int`` sends it."""
    if 0 <= value < _HEADS:
        head = _INT_HEAD[value]
    elif INT64_MIN <= value <= INT64_MAX:
        head = _int_head(value)
    else:
        return _str_field(tag, prefix, str(value).encode())
    return tag, _SMALL[len(prefix) + len(head)], prefix, head


def _strings_field(tag: bytes, prefix: bytes, values: list[str]) -> bytes:
    """An attribute holding a list of strings: tag, then the ``KeyValue`` as ``_strings`` writes it."""
    if len(values) == 1 and values[0].__class__ is str:  # most pods have one claim and one device
        return _string_list_field(tag, prefix, values[0].encode())
    return tag + _strings_value(prefix, values)


def _string_list_field(tag: bytes, prefix: bytes, text: bytes) -> bytes:
    """``_strings_field`` for a list of one string (already UTF-8)."""
    n = len(text)
    m = len(prefix) + n
    if m < 120:  # every length below fits in one byte
        return b"".join((tag, _SMALL[m + 8], prefix, b"\x12", _SMALL[n + 6], b"\x2a",
                         _SMALL[n + 4], b"\x0a", _SMALL[n + 2], b"\x0a", _SMALL[n], text))
    return tag + _strings_value(prefix, [text.decode()])


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
        return b"".join(_str_field(b"", _key_prefix(key), value.encode()))
    body = _key_prefix(key) + b"\x12" + _ld(any_value(value))
    n = len(body)
    return (_SMALL[n] if n < 16384 else varint(n)) + body


def _strings(key: str, values: list[str]) -> bytes:
    """A ``KeyValue`` holding an array of strings, as length prefix + body."""
    return _strings_value(_key_prefix(key), values)


def _strings_value(prefix: bytes, values: list[str]) -> bytes:
    entries: list[bytes] = []
    append = entries.append
    for value in values:
        text = value.encode()
        n = len(text)
        append(_ENTRY_HEAD[n] if n < _HEADS else _entry_head(n))
        append(text)
    return _ld(prefix + b"\x12" + _ld(_ANY_ARRAY + _ld(b"".join(entries))))


# Encoded attributes of values that repeat across decisions (models, policy, reason counts,
# nodes), tag included, by (tag, key, value, class of value): the class tells True from 1, which
# are equal but encode differently.
_TAGGED: dict[tuple[bytes, str, Any, type], bytes] = {}
_TAGGED_LIMIT = 65_536  # a large cluster has thousands of devices and nodes


def _tagged(tag: bytes, key: str, value: Any) -> bytes:
    entry = (tag, key, value, value.__class__)
    hit = _TAGGED.get(entry)
    if hit is None:
        if len(_TAGGED) >= _TAGGED_LIMIT:
            _TAGGED.clear()
        hit = _TAGGED[entry] = tag + _key_value(key, value)
    return hit


_STABLE: dict[tuple[Any, ...], bytes] = {}  # the first ROOT_STABLE root attributes, by their values
_LISTS: dict[tuple[str, tuple[str, ...]], bytes] = {}  # list attributes that repeat (preference)
# the root fields after the stable ones: key, key field, whether its values repeat across decisions
_ROOT_VARYING = tuple((key, _key_prefix(key), key not in _UNCACHED) for key, _ in ROOT_FIELDS[ROOT_STABLE:])
_DEVICES_PREFIX, _WHY_PREFIX, _RECORD_PREFIX = _key_prefix(s.DEVICES), _key_prefix(s.WHY_URL), _key_prefix(s.RECORD)


def root_attributes(tag: bytes, root: RootAttributes) -> bytes:
    """The root span's attributes written from the record through ``ROOT_FIELDS``, in the order
    and with the values ``audit.telemetry.attributes.root_attributes`` gives (tested equal)."""
    parts: list[bytes] = []
    _root_into(parts, tag, root)
    return b"".join(parts)


def stable_root_attributes(tag: bytes, values: Sequence[Any]) -> bytes:
    """The root's first ROOT_STABLE attributes, for those fields' ``values`` (empty texts left out)."""
    return b"".join(tag + _key_value(key, value)
                    for (key, _), value in zip(ROOT_FIELDS[:ROOT_STABLE], values, strict=True) if value != "")


def _root_into(parts: list[bytes], tag: bytes, root: RootAttributes) -> None:
    record = root.record
    values = root_field_values(record)
    stable_values = values[:ROOT_STABLE]
    # the class of each value is part of the key: True and 1 are equal but encode differently
    stable_key = (tag, *stable_values, *map(type, stable_values))
    stable = _STABLE.get(stable_key)
    if stable is None:
        if len(_STABLE) >= _CACHE_LIMIT:
            _STABLE.clear()
        stable = _STABLE[stable_key] = stable_root_attributes(tag, stable_values)
    parts.append(stable)
    append, extend = parts.append, parts.extend
    for (key, prefix, repeats), value in zip(_ROOT_VARYING, values[ROOT_STABLE:], strict=True):
        cls = value.__class__
        if cls is str:
            if not value:
                continue
            if key is s.DECISION_ID:
                append(tag)
                append(_recent(key, value))
            else:  # pod, uid, digests, message: values a cache would rarely see again
                extend(_str_field(tag, prefix, value.encode()))
        elif cls is list:
            if not value:
                continue
            if not repeats:
                append(_strings_field(tag, prefix, value))
                continue
            list_key = (key, tuple(value))
            encoded = _LISTS.get(list_key)
            if encoded is None:
                if len(_LISTS) >= _CACHE_LIMIT:
                    _LISTS.clear()
                encoded = _LISTS[list_key] = _strings(key, value)
            append(tag)
            append(encoded)
        elif cls is int and not repeats:
            extend(_int_field(tag, prefix, value))
        elif value == "":
            continue
        elif repeats:
            append(_tagged(tag, key, value))
        else:
            append(tag)
            append(_key_value(key, value))
    # then what ``root_extras`` lists, in its order
    if record.devices:
        append(_strings_field(tag, _DEVICES_PREFIX, [d.device for d in record.devices]))
    if record.blockers:
        append(tag)
        append(_strings(s.BLOCKERS, [f"{b.code}@{b.tier}" for b in record.blockers]))
    selection = root.selection
    append(_tagged(tag, s.VERDICTS_EXPORTED, len(selection.kept)))
    append(_tagged(tag, s.VERDICTS_DROPPED, selection.dropped))
    if root.why_url:
        extend(_str_field(tag, _WHY_PREFIX, root.why_url.encode()))
    extend(_str_field(tag, _RECORD_PREFIX, record_value_bytes(record)))
    if root.paths or root.labels:
        extras: dict[str, Any] = {s.REDACTED: list(root.paths)} if root.paths else {}
        for label in sorted(root.labels):
            extras[s.K8S_POD_LABEL_PREFIX + label] = root.labels[label]
        append(attributes(tag, extras))


_REASON_KEYS: dict[str, str] = {}
# a tier's index, request and model, and its nodes evaluated, verdicts dropped and result, each
# group encoded once per combination of values (tag and classes of the numbers in the key)
_TIER_GROUPS: dict[tuple[Any, ...], bytes] = {}


def tier_attributes(tag: bytes, attrs: TierAttributes) -> bytes:
    """A tier span's attributes in the order ``audit.telemetry.attributes.tier_attributes`` gives."""
    parts: list[bytes] = []
    _tier_into(parts, tag, attrs)
    return b"".join(parts)


def tier_head(tag: bytes, index: Any, request: Any, model: Any) -> bytes:
    """A tier's index, request and model attributes, kept per combination of values."""
    head_key = (tag, index, index.__class__, request, request.__class__, model, model.__class__)
    head = _TIER_GROUPS.get(head_key)
    if head is None:
        if len(_TIER_GROUPS) >= _CACHE_LIMIT:
            _TIER_GROUPS.clear()
        head = _TIER_GROUPS[head_key] = b"".join((tag + _key_value(s.TIER_INDEX, index),
                                                  tag + _key_value(s.TIER_REQUEST, request),
                                                  tag + _key_value(s.TIER_MODEL, model)))
    return head


def tier_tail(tag: bytes, nodes: Any, dropped: Any, result: str) -> bytes:
    """A tier's nodes evaluated, verdicts dropped and result attributes, kept likewise."""
    tail_key = (tag, nodes, nodes.__class__, dropped, dropped.__class__, result)
    tail = _TIER_GROUPS.get(tail_key)
    if tail is None:
        if len(_TIER_GROUPS) >= _CACHE_LIMIT:
            _TIER_GROUPS.clear()
        tail = _TIER_GROUPS[tail_key] = b"".join((
            tag + _key_value(s.TIER_NODES_EVALUATED, nodes), tag + _key_value(s.TIER_VERDICTS_DROPPED, dropped),
            tag + _key_value(s.TIER_RESULT, result) if result else b""))
    return tail


def _tier_into(parts: list[bytes], tag: bytes, attrs: TierAttributes) -> None:
    tier, record = attrs.tier, attrs.record
    index, result = tier.index, attrs.result
    head = tier_head(tag, index, tier.request, tier.model)
    tail = tier_tail(tag, tier.nodes_evaluated, attrs.dropped, result)
    parts += (tag, _recent(s.DECISION_ID, record.decision_id), head,
              _tagged(tag, s.TIER_CONSIDERED, tier.considered), tail)
    reasons = tier.reasons
    append = parts.append
    for code in sorted(reasons):
        key = _REASON_KEYS.get(code)
        if key is None:
            key = _REASON_KEYS[code] = s.TIER_REASON_PREFIX + code
        append(_tagged(tag, key, reasons[code]))  # counts vary, but within a narrow range
    if record.blockers:
        blocked = tier_blocker_attributes(record, index)
        if blocked:
            append(attributes(tag, blocked))


def verdict_attributes(tag: bytes, attrs: VerdictAttributes) -> bytes:
    """A verdict's attributes in the order ``audit.telemetry.attributes.verdict_attributes`` gives."""
    parts: list[bytes] = []
    _verdict_into(parts, tag, attrs)
    return b"".join(parts)


# a verdict's tier index, device and node, and its reason and source, each group encoded once per
# combination of values (a device keeps its node; reasons and sources are a closed vocabulary)
_VERDICT_GROUPS: dict[tuple[Any, ...], bytes] = {}


def _verdict_into(parts: list[bytes], tag: bytes, attrs: VerdictAttributes) -> None:
    verdict = attrs.verdict
    index, device, node, reason, source = verdict.tier_index, verdict.device, verdict.node, verdict.reason, verdict.source
    where_key = (tag, index, index.__class__, device, device.__class__, node, node.__class__)
    where = _VERDICT_GROUPS.get(where_key)
    if where is None:
        if len(_VERDICT_GROUPS) >= _TAGGED_LIMIT:
            _VERDICT_GROUPS.clear()
        where = _VERDICT_GROUPS[where_key] = b"".join((
            tag + _key_value(s.TIER_INDEX, index), tag + _key_value(s.VERDICT_DEVICE, device),
            tag + _key_value(s.VERDICT_NODE, node)))
    why_key = (tag, reason, reason.__class__, source, source.__class__)
    why = _VERDICT_GROUPS.get(why_key)
    if why is None:
        if len(_VERDICT_GROUPS) >= _TAGGED_LIMIT:
            _VERDICT_GROUPS.clear()
        why = _VERDICT_GROUPS[why_key] = (tag + _key_value(s.VERDICT_REASON, reason)
                                          + tag + _key_value(s.VERDICT_SOURCE, source))
    parts += (tag, _recent(s.DECISION_ID, attrs.decision_id), where, why)
    detail = verdict.detail
    if detail:
        parts.append(attributes(tag, {s.VERDICT_DETAIL_PREFIX + k: detail[k] for k in sorted(detail)}))


def _attributes_into(parts: list[bytes], tag: bytes, attrs: Mapping[str, Any]) -> None:
    cls = attrs.__class__
    if cls is TierAttributes:
        _tier_into(parts, tag, attrs)  # type: ignore[arg-type]
    elif cls is VerdictAttributes:
        _verdict_into(parts, tag, attrs)  # type: ignore[arg-type]
    elif cls is RootAttributes:
        _root_into(parts, tag, attrs)  # type: ignore[arg-type]
    else:
        parts.append(attributes(tag, attrs))


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
    for key, value in attrs.items():
        cls = value.__class__
        if cls is list:
            append(tag + (_strings(key, value) if all(v.__class__ is str for v in value) else _key_value(key, value)))
        elif key in _UNCACHED:
            append(tag + _recent(key, value))
        else:
            append(_tagged(tag, key, value))
    return b"".join(parts)


def _event(event: EventShape) -> bytes:
    return b"\x5a" + _ld(b"\x09" + _FIXED64(event.time) + b"\x12" + _ld(event.name.encode())
                         + attributes(_EVENT_ATTR, event.attributes))


def _link(link: LinkShape) -> bytes:
    return b"\x6a" + _ld(b"\x0a\x10" + link.trace_id.to_bytes(16, "big") + b"\x12\x08" + link.span_id.to_bytes(8, "big")
                         + attributes(_LINK_ATTR, link.attributes) + _LINK_FLAGS)


_SPAN_ID = struct.Struct(">HQ").pack  # a two-byte tag and length, then an 8-byte id, big-endian
_TIMES = struct.Struct("<BQBQ").pack  # start_time_unix_nano (fixed64 field 7), end (field 8)
_UNSET_TAIL = b"\x7a\x00" + _SPAN_FLAGS  # an empty status, then the flags
_SPAN_NAMES: dict[str, bytes] = {}  # a span's name field and its kind, by name


def span(trace_id: bytes, sp: SpanShape) -> bytes:
    """One ``Span`` as a ``ScopeSpans.spans`` field (tag, length, body)."""
    name = _SPAN_NAMES.get(sp.name)
    if name is None:
        if len(_SPAN_NAMES) >= _CACHE_LIMIT:
            _SPAN_NAMES.clear()
        name = _SPAN_NAMES[sp.name] = b"\x2a" + _ld(sp.name.encode()) + _KIND_INTERNAL
    parts = [b"\x0a\x10", trace_id, _SPAN_ID(0x1208, sp.span_id)]
    if sp.parent_id:
        parts.append(_SPAN_ID(0x2208, sp.parent_id))
    parts += (name, _TIMES(0x39, sp.start, 0x41, sp.end))
    _attributes_into(parts, _SPAN_ATTR, sp.attributes)
    if sp.events:
        parts += map(_event, sp.events)
    if sp.links:
        parts += map(_link, sp.links)
    if sp.status_code:
        message = sp.status_message.encode()
        parts += (b"\x7a", _ld((b"\x12" + _ld(message) if message else b"") + b"\x18" + varint(sp.status_code)),
                  _SPAN_FLAGS)
    else:
        parts.append(_UNSET_TAIL)
    body = b"".join(parts)
    n = len(body)
    return b"\x12" + (_SMALL[n] if n < 16384 else varint(n)) + body


_LOG_TRACE_TAIL = _LOG_FLAGS + b"\x4a\x10"  # the flags, then trace_id's tag and length


def log_record(trace_id: bytes, log: LogShape) -> bytes:
    """One verdict ``LogRecord`` as a ``ScopeLogs.log_records`` field."""
    time = _FIXED64(log.time)
    text = log.body.encode()
    n = len(text)
    parts = [b"\x09", time, _LOG_FIXED, b"\x2a", _SMALL[n + 1 + len(_SMALL[n])] if n < 16000 else varint(n + 1 + len(varint(n))),
             b"\x0a", _SMALL[n] if n < 16384 else varint(n), text]
    _attributes_into(parts, _LOG_ATTR, log.attributes)
    parts += (_LOG_TRACE_TAIL, trace_id, _SPAN_ID(0x5208, log.span_id), b"\x59", time, _VERDICT_EVENT)
    body = b"".join(parts)
    n = len(body)
    return b"\x12" + (_SMALL[n] if n < 16384 else varint(n)) + body


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
