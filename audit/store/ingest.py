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
from audit.policy import PolicyError, parse_policy
from audit.records import DecisionRecord, RecordError, check_output_digest, validate_record
from audit.store import quarantine as q
from audit.store.rows import RowError, check_event, check_record
from audit.timestamps import NOT_A_TIME, is_rfc3339

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
    """The event ``data`` holds, as ``admit_record`` takes a record in: its payload must also
    have the shape the world reads of its kind (``check_payload``)."""
    event = validate_event(data)
    check_event(event)
    check_payload(event)
    return event


# What the world (``audit.world``) reads of each kind of object, by field path ("*": each item of
# a list, each value of a mapping), and the type it must have where present. A payload it could
# not read would be stored and then stop every later fold of its cluster (replay, why, stats)
# with a traceback; refused here, it is quarantined naming the field.
_COMMON_SHAPE: tuple[tuple[str, type | tuple[type, ...]], ...] = (
    ("metadata", dict), ("metadata.name", str), ("metadata.namespace", str), ("metadata.labels", dict),
    ("metadata.labels.*", str), ("metadata.creationTimestamp", str), ("spec", dict), ("status", dict),
)
_TAINT = ("key", "value", "effect")
_PAYLOAD_SHAPES: dict[str, tuple[tuple[str, type | tuple[type, ...]], ...]] = {
    "Pod": (("spec.nodeName", str), ("spec.containers", list), ("spec.containers.*", dict),
            ("spec.containers.*.resources", dict), ("spec.containers.*.resources.limits", dict),
            ("status.phase", str)),
    "ResourceSlice": (("spec.nodeName", str), ("spec.driver", str), ("spec.pool", dict), ("spec.pool.name", str),
                      ("spec.pool.generation", int), ("spec.devices", list), ("spec.devices.*", dict),
                      ("spec.devices.*.name", str), ("spec.devices.*.attributes", dict),
                      ("spec.devices.*.attributes.*", dict), ("spec.devices.*.capacity", dict),
                      ("spec.devices.*.taints", list), ("spec.devices.*.taints.*", dict),
                      *((f"spec.devices.*.taints.*.{k}", str) for k in _TAINT)),
    "ResourceClaim": (("status.allocation", dict), ("status.allocation.devices", dict),
                      ("status.allocation.devices.results", list), ("status.allocation.devices.results.*", dict),
                      *((f"status.allocation.devices.results.*.{k}", str) for k in ("driver", "pool", "device"))),
    "Node": (("status.allocatable", dict),),
    "DeviceTaintRule": (("spec.deviceSelector", dict), ("spec.taint", dict),
                        *((f"spec.deviceSelector.{k}", str) for k in ("driver", "pool", "device")),
                        *((f"spec.taint.{k}", str) for k in _TAINT)),
}
# where a device-plugin GPU count (``nvidia.com/gpu``) is read, as a whole number
_GPU_COUNTS = {"Pod": "spec.containers.*.resources.limits", "Node": "status.allocatable"}
_GPU = "nvidia.com/gpu"
# each kind's paths split once, the common ones first: admission runs for every event ingested
_SPLIT_SHAPES = {kind: tuple((path.split("."), typ) for path, typ in (*_COMMON_SHAPE, *shape))
                 for kind, shape in _PAYLOAD_SHAPES.items()}


def check_payload(event: WorldEvent) -> None:
    """EventError naming the field (``payload.spec.devices.0.taints``) when the payload of an
    upsert has a field the world reads in a form it cannot read (``_PAYLOAD_SHAPES``), a Pod has
    no ``metadata``, a GPU count is not a whole number, or a Policy is not a valid policy."""
    if event.type != "upsert":
        return
    payload, kind = event.payload, event.object_kind
    if kind == "Policy":
        try:
            parse_policy(payload)
        except PolicyError as exc:
            raise EventError(f"payload.{exc.path}" if exc.path else "payload", exc.message) from None
        return
    if kind not in _PAYLOAD_SHAPES:
        return
    if kind == "Pod" and payload.get("metadata") is None:
        raise EventError("payload.metadata", "a Pod needs its metadata (the world reads its creationTimestamp)")
    for names, typ in _SPLIT_SHAPES[kind]:
        if names[0] not in payload:
            continue
        for where, value in _found(payload, names, "payload"):
            if not isinstance(value, typ) or (typ is int and isinstance(value, bool)):
                raise EventError(where, f"expected {_TYPE_NAMES.get(typ, 'a value')}, got {_json_type(value)}")
    created = (payload.get("metadata") or {}).get("creationTimestamp")
    if created is not None and not is_rfc3339(created, offset_required=False):
        raise EventError("payload.metadata.creationTimestamp", f"{created[:40]!r}: {NOT_A_TIME}")
    if kind == "ResourceSlice" and (payload.get("spec") or {}).get("nodeName") and payload["spec"].get("pool") is None:
        raise EventError("payload.spec.pool", "a ResourceSlice of a node needs its pool")
    if kind in _GPU_COUNTS:
        for where, limits in _found(payload, _GPU_COUNTS[kind].split("."), "payload"):
            count = limits.get(_GPU)
            if count is not None and (isinstance(count, bool) or not str(count).isdigit()):
                raise EventError(f"{where}.{_GPU}", f"{str(count)[:40]!r} is not a whole number of GPUs")


# JSON's names for the Python types a payload decodes to
_TYPE_NAMES: dict[Any, str] = {dict: "an object", list: "a list", str: "a string", bool: "a boolean",
                               int: "an integer", float: "a number", type(None): "null"}


def _json_type(value: Any) -> str:
    return _TYPE_NAMES.get(type(value), type(value).__name__)


def _found(value: Any, names: list[str], where: str) -> typing.Iterator[tuple[str, Any]]:
    """(path, value) of each value at ``names`` under ``value`` (absent fields are skipped, as is a
    step into a value of the wrong type: its own path is checked and named on its own)."""
    if not names:
        yield where, value
        return
    name, rest = names[0], names[1:]
    if name == "*":
        items = enumerate(value) if isinstance(value, list) else value.items() if isinstance(value, dict) else ()
        for key, item in items:
            yield from _found(item, rest, f"{where}.{key}")
    elif isinstance(value, dict) and name in value and value[name] is not None:
        yield from _found(value[name], rest, f"{where}.{name}")


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
