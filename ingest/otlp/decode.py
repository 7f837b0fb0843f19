"""Spans and log records that follow ClaimTrail's attribute schema become DecisionRecords.

A decision is a ``dra.allocate`` span (or a ``claimtrail.decision`` log record) carrying
``claimtrail.record``: the record's JSON, validated strictly. Key attributes that are also
present as flat attributes must agree with the record, and the record's ``output_digest`` must
match its content unless the sender lists redacted paths (a redacted record keeps the digest of
the decision as made). Tier spans, wait spans and verdict log records are recognised parts of a decision;
everything else is ignored and counted. An item that claims to be a decision but fails these
checks is rejected with a message naming the attribute and field.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

from audit.records import DecisionRecord, RecordError, validate_record
from audit.telemetry import schema as s


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
                if span.name == s.ROOT_SPAN and _is_claimtrail(attrs):
                    _take(result, "span", f"span {span.name!r}", attrs, span.SerializeToString)
                elif s.DECISION_ID in attrs and (span.name.startswith(s.TIER_SPAN) or span.name == s.WAIT_SPAN):
                    result.parts += 1
                else:
                    result.ignored += 1
    return result


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
        result.records.append(record_from_attributes(attrs))
    except RecordError as exc:
        result.rejected.append(Rejected(kind, f"{where}: {exc}", raw()))


def record_from_attributes(attrs: dict[str, Any]) -> DecisionRecord:
    """Rebuild and check one record; RecordError names the attribute or record field at fault."""
    text = attrs.get(s.RECORD)
    if text is None:
        raise RecordError("", f"attribute {s.RECORD} is required (the record's JSON)")
    if not isinstance(text, str):
        raise RecordError("", f"attribute {s.RECORD} must be a string, got {type(text).__name__}")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise RecordError("", f"attribute {s.RECORD} is not JSON ({exc})") from None
    except RecursionError:
        raise RecordError("", f"attribute {s.RECORD} nests too deeply") from None
    record = validate_record(data)
    for key, field_name in s.CROSS_CHECKED.items():
        if key in attrs and attrs[key] != getattr(record, field_name):
            raise RecordError(
                field_name,
                f"attribute {key}={attrs[key]!r} disagrees with the record's {getattr(record, field_name)!r}",
            )
    computed = record.compute_output_digest()
    if not record.output_digest:
        record.output_digest = computed
    elif record.output_digest != computed and not attrs.get(s.REDACTED):
        raise RecordError(
            "output_digest",
            f"declared {record.output_digest} but the record's content digests to {computed}",
        )
    return record
