"""Parsing an ingest body (JSON lines, gzip allowed) into valid items and quarantine rows.

Every line is parsed, validated strictly (``validate_record`` / ``validate_event``) and checked
against the columns it will go into; a line failing any step becomes a quarantine row carrying
the error, the field path and the raw line, and the first errors are returned to the caller.
Nothing is dropped: each non-blank line is either an item or a quarantine row.
"""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass, field
from typing import Any, Literal

from audit.errors import UserError
from audit.events import EventError, WorldEvent, validate_event
from audit.records import DecisionRecord, RecordError, validate_record
from audit.store import quarantine as q
from audit.store.rows import RowError, check_event, check_record

MAX_BODY_BYTES = 256 * 2**20  # decompressed ingest body; larger bodies are refused, not truncated
MAX_REPORTED_ERRORS = 20


@dataclass
class IngestResult:
    accepted: int = 0
    quarantined: int = 0
    errors: list[dict[str, Any]] = field(default_factory=list)  # first errors: line, path, error
    delivered: bool = True  # False: accepted into the durable spool, the store takes it on a retry

    def to_dict(self) -> dict[str, Any]:
        return {"accepted": self.accepted, "quarantined": self.quarantined, "errors": self.errors,
                "delivered": self.delivered}


@dataclass
class ParsedBody:
    records: list[DecisionRecord] = field(default_factory=list)
    events: list[WorldEvent] = field(default_factory=list)
    bad: list[q.QuarantineRow] = field(default_factory=list)
    result: IngestResult = field(default_factory=IngestResult)


def parse_jsonl(body: bytes, kind: Literal["records", "events"], source: str) -> ParsedBody:
    if kind not in ("records", "events"):
        raise UserError(f"ingest kind {kind!r}: must be 'records' or 'events'")
    parsed = ParsedBody()
    for number, line in enumerate(decompress(body).split(b"\n"), start=1):
        if not line.strip():
            continue
        path, error = "", ""
        try:
            data = json.loads(line)
            if kind == "records":
                record = validate_record(data)
                check_record(record)  # values must also fit their columns
                parsed.records.append(record)
            else:
                event = validate_event(data)
                check_event(event)
                parsed.events.append(event)
            continue
        except (RecordError, EventError, RowError) as exc:
            path, error = exc.path, str(exc)
        except (ValueError, UnicodeDecodeError) as exc:  # not JSON at all
            error = f"line {number}: invalid JSON: {exc}"
        parsed.bad.append(q.quarantine_row(source, kind[:-1], error, path, line))
        if len(parsed.result.errors) < MAX_REPORTED_ERRORS:
            parsed.result.errors.append({"line": number, "path": path, "error": error})
    parsed.result.accepted = len(parsed.records) + len(parsed.events)
    parsed.result.quarantined = len(parsed.bad)
    return parsed


def decompress(body: bytes) -> bytes:
    if body[:2] != b"\x1f\x8b":
        if len(body) > MAX_BODY_BYTES:
            raise UserError(f"ingest body: {len(body)} bytes exceeds the limit of {MAX_BODY_BYTES}")
        return body
    inflater = zlib.decompressobj(wbits=31)
    try:
        out = inflater.decompress(body, MAX_BODY_BYTES + 1)
    except zlib.error as exc:
        raise UserError(f"ingest body: not valid gzip ({exc})") from None
    if len(out) > MAX_BODY_BYTES:
        raise UserError(f"ingest body: more than {MAX_BODY_BYTES} bytes once decompressed")
    return out
