"""Quarantine rows: input that failed validation, kept with its error instead of being dropped.

A row names the source, the kind of input, the error, the field path and the raw payload
(capped at ``RAW_CAP`` bytes; ``raw_size`` keeps the original length so truncation is visible).
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import asdict, dataclass
from typing import Any

from audit.events import EventError, WorldEvent, event_problem
from audit.records import DecisionRecord, RecordError, escaped_record_text, record_problem
from audit.store.rows import escaped_event_text

RAW_CAP = 64 * 1024
COLUMNS = ("time", "source", "kind", "error", "path", "raw", "raw_size", "raw_digest")


@dataclass(frozen=True)
class QuarantineRow:
    time_ms: int
    source: str
    kind: str
    error: str
    path: str
    raw: str
    raw_size: int
    raw_digest: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def quarantine_row(source: str, kind: str, error: str, path: str, raw: bytes | str,
                   now_ms: int | None = None) -> QuarantineRow:
    data = raw.encode("utf-8", "surrogateescape") if isinstance(raw, str) else raw
    return QuarantineRow(
        time_ms=int(time.time() * 1000) if now_ms is None else now_ms,
        source=source,
        kind=kind,
        error=error,
        path=path,
        raw=data[:RAW_CAP].decode("utf-8", "replace"),
        raw_size=len(data),
        raw_digest=hashlib.sha256(data).hexdigest(),
    )


def unwritable_record(source: str, record: DecisionRecord, error: RecordError) -> QuarantineRow:
    """The row of a record that has no canonical text (``audit.records.record_bytes`` refused it:
    a text UTF-8 cannot hold): the reason names the decision and the field, and the raw text is the
    record's JSON with what UTF-8 cannot hold escaped, so nothing of it is lost."""
    return quarantine_row(source, "record", record_problem(record, error), error.path, escaped_record_text(record))


def unwritable_event(source: str, event: WorldEvent, error: EventError) -> QuarantineRow:
    """The row of a world event that has no stored text (``audit.store.rows.event_json`` refused
    it), as ``unwritable_record``: the reason names the event and the field, the raw text is its
    JSON with what UTF-8 cannot hold escaped."""
    return quarantine_row(source, "event", event_problem(event, error), error.path, escaped_event_text(event))


def columns(rows: list[QuarantineRow]) -> list[list[Any]]:
    return [
        [r.time_ms for r in rows], [r.source for r in rows], [r.kind for r in rows], [r.error for r in rows],
        [r.path for r in rows], [r.raw for r in rows], [r.raw_size for r in rows], [r.raw_digest for r in rows],
    ]
