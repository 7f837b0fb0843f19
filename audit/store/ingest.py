"""Parsing an ingest body (JSON lines, gzip allowed) into valid items and quarantine rows.

Every line is parsed and admitted (``admit_record`` / ``admit_event``: validated strictly and
checked against the columns it will go into; the offline import of files admits its items the
same way, and the OTLP receiver its decisions, so an item is refused with the same message
either way); a line failing any step becomes a quarantine row carrying
the error, the field path and the raw line, and the first errors are returned to the caller.
Nothing is dropped: each non-blank line is either an item or a quarantine row.

The work per body is bounded: it is decompressed once (``compressed`` says whether it is gzip;
a gzip stream inside the decompressed text is refused, not opened again), it may hold at most
``MAX_LINES`` lines, and a line longer than ``MAX_LINE_BYTES`` or nested too deeply for the
parser is quarantined like any other line that is not JSON. Fields of a record that the record schema does not know are reported
back (``unknown_fields`` and the first ``warnings``): the record is stored without them.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import typing
import zlib
from dataclasses import dataclass, field
from typing import Any, Literal

from audit.errors import LimitError, UserError
from audit.events import EventError, WorldEvent, validate_event
from audit.records import DecisionRecord, RecordError, check_output_digest, validate_record
from audit.store import quarantine as q
from audit.store.rows import RowError, check_event, check_record

MAX_BODY_BYTES = 256 * 2**20  # decompressed ingest body; larger bodies are refused, not truncated
MAX_REPORTED_ERRORS = 20
# Lines per body: each line costs a parse and possibly a quarantine row, so a body of millions of
# tiny lines ("[]", or nothing at all) would cost minutes and gigabytes while its bytes stay small.
MAX_LINES = 100_000
# Bytes per line: parsing expands text into objects many times its size (a line of "[0,0,…]" takes
# about 8 bytes per 2 bytes of text as a list), so a longer line is quarantined unparsed. The
# largest real lines, world events carrying a ResourceSlice, stay far below it.
MAX_LINE_BYTES = 8 * 2**20
GZIP_MAGIC = b"\x1f\x8b"


@dataclass
class IngestResult:
    accepted: int = 0
    quarantined: int = 0
    errors: list[dict[str, Any]] = field(default_factory=list)  # first errors: line, path, error
    delivered: bool = True  # False: accepted into the durable spool, the store takes it on a retry
    absorbed: int = 0  # identical re-sends of what the store already holds (not written again)
    unknown_fields: int = 0  # fields the record schema does not know, ignored (see ``warnings``)
    warnings: list[dict[str, Any]] = field(default_factory=list)  # first ones: line, path, warning

    def to_dict(self) -> dict[str, Any]:
        return {"accepted": self.accepted, "quarantined": self.quarantined, "errors": self.errors,
                "delivered": self.delivered, "absorbed": self.absorbed, "unknown_fields": self.unknown_fields,
                "warnings": self.warnings}


@dataclass
class ParsedBody:
    records: list[DecisionRecord] = field(default_factory=list)
    events: list[WorldEvent] = field(default_factory=list)
    bad: list[q.QuarantineRow] = field(default_factory=list)
    record_lines: list[int] = field(default_factory=list)  # the body line of each record, for messages
    event_lines: list[int] = field(default_factory=list)
    result: IngestResult = field(default_factory=IngestResult)


# What admission raises: each names the field at fault in ``path``.
AdmissionError = (RecordError, EventError, RowError)


def admit_record(data: Any, text: bytes | None = None) -> DecisionRecord:
    """The record ``data`` (parsed from ``text``) holds, once strictly valid (``validate_record``)
    and admitted (``admit_valid_record``); else one of ``AdmissionError``.

    The API's ingest and the offline import of files (``ingest.files``: replay and migration
    report read history from files) both take records in through here: a value the store would
    refuse is refused offline too, by the same message, instead of surfacing later as a
    traceback or as a replay that cannot match."""
    return admit_valid_record(validate_record(data, text))


def admit_valid_record(record: DecisionRecord, redacted: bool = False) -> DecisionRecord:
    """``record`` (already strictly valid) once it fits the store's columns (``check_record``)
    and, when sealed, still hashes to its own ``output_digest`` (``check_output_digest``; an
    unsealed record is taken as it is); else one of ``AdmissionError``.

    ``admit_record`` ends here, and so does the OTLP receiver, which rebuilds a record from span
    attributes before it can judge it: a record the store would refuse is refused to its sender
    when it arrives, not quarantined later by the writer. ``redacted``: the sender redacted the
    record, which keeps the digest of the decision as made (``audit.telemetry.redaction``), so
    its content is not expected to hash to it."""
    check_record(record)
    if not redacted:
        check_output_digest(record)  # last: a value out of range is named before the digest it breaks
    return record


def admit_event(data: Any) -> WorldEvent:
    """The event ``data`` holds, as ``admit_record`` takes a record in."""
    event = validate_event(data)
    check_event(event)
    return event


def parse_jsonl(body: bytes, kind: Literal["records", "events"], source: str,
                compressed: bool | None = None) -> ParsedBody:
    """``compressed``: True for gzip, False for plain JSON lines, None to tell by the gzip magic."""
    if kind not in ("records", "events"):
        raise UserError(f"ingest kind {kind!r}: must be 'records' or 'events'")
    text = decompress(body, compressed)
    # as a JSON-lines reader counts them: a final newline ends the last line, it starts no other
    lines = text.count(b"\n") + (0 if text.endswith(b"\n") or not text else 1)
    if lines > MAX_LINES:
        raise LimitError(f"ingest body: {lines} lines exceed the limit of {MAX_LINES} per request; "
                         "send them in smaller bodies")
    parsed = ParsedBody()
    for number, line in enumerate(text.split(b"\n"), start=1):
        if not line.strip():
            continue
        path, error = "", ""
        try:
            if len(line) > MAX_LINE_BYTES:
                raise _LineTooLong(f"line {number}: {len(line)} bytes exceed the limit of {MAX_LINE_BYTES} per "
                                   "line; not parsed")
            data = json.loads(line)
            if kind == "records":
                record = admit_record(data, line)
                _report_unknown(parsed.result, number, data)
                parsed.records.append(record)
                parsed.record_lines.append(number)
            else:
                event = admit_event(data)
                parsed.events.append(event)
                parsed.event_lines.append(number)
            continue
        except AdmissionError as exc:
            path, error = exc.path, str(exc)
        except _LineTooLong as exc:
            error = str(exc)
        except (ValueError, UnicodeDecodeError) as exc:  # not JSON at all
            error = f"line {number}: invalid JSON: {exc}"
        except RecursionError:  # nested deeper than the parser can follow: bad input, not a server fault
            error = f"line {number}: invalid JSON: nested too deeply to parse"
        parsed.bad.append(q.quarantine_row(source, kind[:-1], error, path, line))
        if len(parsed.result.errors) < MAX_REPORTED_ERRORS:
            parsed.result.errors.append({"line": number, "path": path, "error": error})
    parsed.result.accepted = len(parsed.records) + len(parsed.events)
    parsed.result.quarantined = len(parsed.bad)
    return parsed


class _LineTooLong(Exception):
    pass


def decompress(body: bytes, compressed: bool | None = None) -> bytes:
    """The JSON lines of ``body``, decompressed once at most; a gzip stream found inside is refused."""
    if compressed is None:
        compressed = body[:2] == GZIP_MAGIC
    if not compressed:
        if len(body) > MAX_BODY_BYTES:
            raise LimitError(f"ingest body: {len(body)} bytes exceeds the limit of {MAX_BODY_BYTES}")
        out = body
    else:
        inflater = zlib.decompressobj(wbits=31)
        try:
            out = inflater.decompress(body, MAX_BODY_BYTES + 1)
        except zlib.error as exc:
            raise UserError(f"ingest body: not valid gzip ({exc})") from None
        if len(out) > MAX_BODY_BYTES:
            raise LimitError(f"ingest body: more than {MAX_BODY_BYTES} bytes once decompressed")
    if out[:2] == GZIP_MAGIC:
        raise UserError("ingest body: gzip data where JSON lines were expected (compressed twice, or gzip sent "
                        "without Content-Encoding: gzip); compress once and say so in Content-Encoding")
    return out


def _report_unknown(result: IngestResult, line: int, data: dict[str, Any]) -> None:
    for path in sorted(unknown_fields(DecisionRecord, data)):
        result.unknown_fields += 1
        if len(result.warnings) < MAX_REPORTED_ERRORS:
            result.warnings.append({"line": line, "path": path, "warning": "unknown field, ignored"})


def unknown_fields(cls: type, data: Any, prefix: str = "") -> list[str]:
    """Paths of keys in ``data`` that the dataclass ``cls`` (and its nested dataclasses) lacks."""
    if not isinstance(data, dict):
        return []
    fields = _fields(cls)
    out: list[str] = []
    for key, value in data.items():
        if key not in fields:
            out.append(f"{prefix}{key}")
            continue
        inner = fields[key]
        if inner is not None and isinstance(value, list):
            for i, item in enumerate(value):
                out += unknown_fields(inner, item, f"{prefix}{key}.{i}.")
    return out


@functools.cache
def _fields(cls: type) -> dict[str, type | None]:
    """Each field of ``cls`` and the dataclass its list holds (None for any other type). Resolving
    the annotations took half of parsing a body of records when done per key; the record classes
    never change."""
    return {name: _dataclass_in(hint) for name, hint in typing.get_type_hints(cls).items()}


def _dataclass_in(hint: Any) -> type | None:
    """The dataclass a ``list[...]`` field holds, if any."""
    args = typing.get_args(hint)
    if typing.get_origin(hint) is list and args and dataclasses.is_dataclass(args[0]):
        return args[0] if isinstance(args[0], type) else None
    return None
