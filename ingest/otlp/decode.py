"""Spans and log records that follow ClaimTrail's attribute schema become DecisionRecords.

A decision is a ``dra.allocate`` span (or a ``claimtrail.decision`` log record) carrying
``claimtrail.record``: the record's JSON, validated strictly. Key attributes that are also
present as flat attributes must agree with the record (the unsigned fields' read as the exporter
writes them, ``audit.telemetry.attributes.otlp_int``, and within their columns), and the record
must pass the store's admission (``audit.store.ingest.admit_valid_record``, as on the ingest
endpoints): its values fit the store's columns and its ``output_digest`` matches its content
unless the sender lists redacted paths (a redacted record keeps the digest of the decision as
made). Tier spans, wait spans and verdict log records are recognised parts of a decision;
everything else is ignored and counted. An item that claims to be a decision but fails these
checks is rejected with a message naming the attribute and field (and the decision, once its
record is valid); so is a decision span or a part whose ids OTLP calls invalid (a trace_id of
other than 16 bytes, a span_id of other than 8, either all zero, a parent_span_id neither empty
nor 8 bytes), however the request was encoded.
A log record's ids are optional, and OTLP has receivers treat invalid ones as absent, so they are
not checked.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from audit.records import DecisionRecord, RecordError, validate_record
from audit.store.ingest import AdmissionError, admit_valid_record
from audit.store.rows import UINT_LIMITS
from audit.telemetry import schema as s
from audit.telemetry.attributes import int_from_otlp


@dataclass(frozen=True)
class Rejected:
    kind: str  # "span" or "log_record"
    error: str
    raw: bytes  # the serialized item, kept for quarantine


@dataclass
class DecodeResult:
    records: list[DecisionRecord] = field(default_factory=list)
    rejected: list[Rejected] = field(default_factory=list)
    ignored: int = 0
    parts: int = 0  # tier spans and verdict log records of decisions


def any_value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return [any_value(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: any_value(kv.value) for kv in value.kvlist_value.values}
    return getattr(value, kind)


def attributes(kvs: Iterable[KeyValue]) -> dict[str, Any]:
    return {kv.key: any_value(kv.value) for kv in kvs}


def records_from_traces(request: ExportTraceServiceRequest) -> DecodeResult:
    result = DecodeResult()
    for resource_spans in request.resource_spans:
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                attrs = attributes(span.attributes)
                decision = span.name == s.ROOT_SPAN and _is_claimtrail(attrs)
                part = not decision and s.DECISION_ID in attrs and (
                    span.name.startswith(s.TIER_SPAN) or span.name == s.WAIT_SPAN)
                if not (decision or part):
                    result.ignored += 1
                    continue
                invalid = span_id_error(span)
                if invalid:
                    result.rejected.append(Rejected("span", f"span {span.name!r}: {invalid}", span.SerializeToString()))
                elif decision:
                    _take(result, "span", f"span {span.name!r}", attrs, span.SerializeToString)
                else:
                    result.parts += 1
    return result


_ZERO_TRACE, _ZERO_SPAN = bytes(16), bytes(8)


def span_id_error(span: Span) -> str:
    """What makes the span's ids invalid in OTLP (naming the field), or "" when they are valid."""
    trace_id, span_id, parent = span.trace_id, span.span_id, span.parent_span_id
    if len(trace_id) != 16:
        return f"trace_id: {len(trace_id)} bytes, an OTLP trace_id is 16"
    if trace_id == _ZERO_TRACE:
        return "trace_id: all zero, which OTLP defines as invalid"
    if len(span_id) != 8:
        return f"span_id: {len(span_id)} bytes, an OTLP span_id is 8"
    if span_id == _ZERO_SPAN:
        return "span_id: all zero, which OTLP defines as invalid"
    if parent and len(parent) != 8:
        return f"parent_span_id: {len(parent)} bytes, an OTLP parent_span_id is 8 (or empty for a root span)"
    return ""


def records_from_logs(request: ExportLogsServiceRequest) -> DecodeResult:
    result = DecodeResult()
    for resource_logs in request.resource_logs:
        for scope_logs in resource_logs.scope_logs:
            for log in scope_logs.log_records:
                attrs = attributes(log.attributes)
                if log.event_name == s.DECISION_EVENT or s.RECORD in attrs:
                    _take(result, "log_record", "log record", attrs, log.SerializeToString)
                elif log.event_name == s.VERDICT_EVENT and s.DECISION_ID in attrs:
                    result.parts += 1
                else:
                    result.ignored += 1
    return result


def _is_claimtrail(attrs: dict[str, Any]) -> bool:
    return any(key.startswith(s.PREFIX) for key in attrs)


def _take(result: DecodeResult, kind: str, where: str, attrs: dict[str, Any], raw: Callable[[], bytes]) -> None:
    try:
        record = valid_record(attrs)
        if record.decision_id:  # from here on the sender can be told which decision was refused
            where = f"{where}: decision {record.decision_id}"
        result.records.append(admitted(record, attrs))
    except AdmissionError as exc:
        result.rejected.append(Rejected(kind, f"{where}: {exc}", raw()))


def valid_record(attrs: dict[str, Any]) -> DecisionRecord:
    """The record ``claimtrail.record`` holds, strictly valid; RecordError names the attribute or field."""
    text = attrs.get(s.RECORD)
    if text is None:
        raise RecordError("", f"attribute {s.RECORD} is required (the record's JSON)")
    if not isinstance(text, str):
        raise RecordError("", f"attribute {s.RECORD} must be a string, got {type(text).__name__}")
    try:
        data = json.loads(text)
    except ValueError as exc:  # not JSON, or a number past int's digit limit (4300)
        raise RecordError("", f"attribute {s.RECORD} is not JSON ({exc})") from None
    except RecursionError:
        raise RecordError("", f"attribute {s.RECORD} nests too deeply") from None
    return validate_record(data)


def _redacted(paths: Any) -> bool:
    """Whether the sender redacted the record: ``claimtrail.redacted`` lists the JSON pointers it
    changed. It lifts the output_digest check, so anything but such a list is refused by name
    rather than read as a truth value."""
    if paths is None:
        return False
    if not (isinstance(paths, list) and paths and all(isinstance(p, str) and p.startswith("/") for p in paths)):
        raise RecordError("", f"attribute {s.REDACTED} must list the JSON pointers redaction changed, got "
                              f"{str(paths)[:80]!r}")
    return True


def _check_uint(key: str, field_name: str, sent: Any, recorded: int) -> None:
    """An unsigned column's attribute, read as the exporter writes it (``otlp_int``: past int64 as
    decimal text), must fit the column and agree with the record; else a RecordError naming both."""
    try:
        number = int_from_otlp(sent)
    except ValueError as exc:
        raise RecordError(field_name, f"attribute {key}={sent!r} {exc}") from None
    limit = UINT_LIMITS[field_name]
    if not 0 <= number < limit:
        raise RecordError(field_name, f"attribute {key}={sent!r} is outside 0..{limit - 1}")
    if number != recorded:
        raise RecordError(field_name, f"attribute {key}={sent!r} disagrees with the record's {recorded!r}")


def admitted(record: DecisionRecord, attrs: dict[str, Any]) -> DecisionRecord:
    """``record`` once it agrees with the flat attributes and passes the store's admission, sealed
    if the sender left the digest to the receiver; else an ``AdmissionError`` naming the field."""
    for key, field_name in s.CROSS_CHECKED.items():
        if key in attrs and attrs[key] != getattr(record, field_name):
            raise RecordError(
                field_name,
                f"attribute {key}={attrs[key]!r} disagrees with the record's {getattr(record, field_name)!r}",
            )
    for key, field_name in s.UINT_CHECKED.items():
        if key in attrs:
            _check_uint(key, field_name, attrs[key], getattr(record, field_name))
    # the same admission as the ingest endpoints: what the store's writer would quarantine later
    # is refused now, in partial_success, where the sender learns of it
    admit_valid_record(record, redacted=_redacted(attrs.get(s.REDACTED)))
    if not record.output_digest:
        record.seal()
    return record
