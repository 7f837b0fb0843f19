"""Turning records and events into the exact JSON text and the column values ClickHouse stores.

The stored JSON of a record is its canonical JSON (``audit.records.record_text``): the same bytes
a digest is taken over, and what ``get_decision`` parses back. Events are stored as their sorted
JSON (``event_json``).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from typing import Any

from audit.canonical import escaped_text, lone_surrogate, utf8_encodable
from audit.events import EventError, WorldEvent
from audit.records import DecisionRecord, record_text
from audit.timestamps import NOT_A_TIME, datetime_ms, parse_rfc3339, rfc3339_form_problem

_ENCODE_SORTED = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False, sort_keys=True).encode


class RowError(ValueError):
    """A value the store cannot hold (e.g. a time that is not ISO 8601); ``path`` names the field."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path


def event_json(event: WorldEvent) -> str:
    """The event's stored text: its fields as sorted JSON. EventError naming the field when a text
    in it has no UTF-8 form (a lone surrogate): such an event has no text the store can hold
    (``escaped_event_text`` gives it in a form that can be kept)."""
    text: str = _ENCODE_SORTED(event.to_dict())
    if not text.isascii() and not utf8_encodable(text):
        # none found: no text of the event's own, a value of another type wrote the surrogate
        raise EventError(*(lone_surrogate(event) or ("", "not valid UTF-8 text")))
    return text


def escaped_event_text(event: WorldEvent) -> str:
    """``event_json``, also for an event that has none: each lone surrogate written as its JSON
    escape, for keeping an event that cannot be stored (quarantine) or letting the receiving end
    refuse it."""
    return escaped_text(_ENCODE_SORTED(event.to_dict()))


_YEAR_2300_MS = 10_413_792_000_000


def epoch_ms(text: str, path: str = "time", *, naive_is_utc: bool = True) -> int:
    """Milliseconds since the epoch (truncated) of an RFC 3339 time (``audit.timestamps.is_rfc3339``).
    A time without its offset is UTC when ``naive_is_utc``, else refused: the times of records and
    events must carry it (``check_record``, ``check_event``), while rows already stored or spooled
    before that was required, and window bounds typed by hand, are still read."""
    problem = (rfc3339_form_problem(text, offset_required=not naive_is_utc) if isinstance(text, str)
               else NOT_A_TIME)
    if problem is not None:
        shown = text[:40] if isinstance(text, str) else text
        if problem == NOT_A_TIME:
            raise RowError(path, f"{shown!r} is not an ISO 8601 time like 2026-11-01T08:00:00.000Z")
        raise RowError(path, f"{shown!r}: {problem}")
    try:
        ms = datetime_ms(parse_rfc3339(text))
    except ValueError as exc:
        raise RowError(path, f"{text!r} is not a valid time: {exc}") from None
    if not 0 <= ms < _YEAR_2300_MS:  # the store keeps 1970..2299 (DateTime64 range); refuse rather than wrap
        raise RowError(path, f"{text[:40]!r} is outside 1970..2299")
    return ms


DECISION_COLUMNS = (
    "time", "decision_id", "cluster", "seq", "attempt", "tenant", "namespace", "pod", "pod_uid",
    "policy_version", "policy_digest", "outcome", "node", "n_devices", "tier_index", "preferred_model",
    "allocated_model", "fallback", "retry_class", "backoff_ms", "wait_ms", "steps", "duration_us", "track",
    "template_version", "engine_version", "schema_version", "record",
)
TIER_COLUMNS = ("time", "tenant", "decision_id", "tier", "request", "model", "considered", "nodes_evaluated", "reasons")
EVENT_COLUMNS = ("cluster", "seq", "time", "type", "object_kind", "namespace", "name", "resource_version", "body")

_U16, _U32, _U64 = 2**16, 2**32, 2**64
# the record's unsigned columns: each value must lie in 0..limit - 1
UINT_LIMITS = {"attempt": 2**16, "seq": 2**64, "backoff_ms": 2**32, "wait_ms": 2**64, "steps": 2**32,
                "duration_us": 2**32, "schema_version": 2**16}


def check_record(record: DecisionRecord) -> int:
    """Store-level checks beyond ``validate_record``: values must fit their columns. Returns time (ms).

    Every record of every batch passes through here, so the usual case is one chained comparison;
    only a record that fails it is walked again to name the field."""
    r = record
    if not (0 <= r.attempt < _U16 and 0 <= r.seq < _U64 and 0 <= r.backoff_ms < _U32 and 0 <= r.wait_ms < _U64
            and 0 <= r.steps < _U32 and 0 <= r.duration_us < _U32 and 0 <= r.schema_version < _U16):
        for name, limit in UINT_LIMITS.items():
            value = getattr(r, name)
            if not 0 <= value < limit:
                raise RowError(name, f"{value} is outside 0..{limit - 1}")
    if not r.decision_id:
        raise RowError("decision_id", "must not be empty")
    if not -1 <= r.tier_index < 2**15:
        raise RowError("tier_index", f"{r.tier_index} is outside -1..32767")
    for i, tier in enumerate(r.tiers):
        if not (0 <= tier.index < 256 and 0 <= tier.considered < _U32 and 0 <= tier.nodes_evaluated < _U32):
            if not 0 <= tier.index < 256:
                raise RowError(f"tiers.{i}.index", f"{tier.index} is outside 0..255")
            for name in ("considered", "nodes_evaluated"):
                if not 0 <= getattr(tier, name) < _U32:
                    raise RowError(f"tiers.{i}.{name}", f"{getattr(tier, name)} is outside 0..{_U32 - 1}")
        for key, count in tier.reasons.items():
            if not 0 <= count < _U32:
                raise RowError(f"tiers.{i}.reasons.{key}", f"{count} is outside 0..{_U32 - 1}")
    return epoch_ms(record.time, naive_is_utc=False)


@dataclasses.dataclass
class DecisionBatch:
    """Column lists for ``decisions`` and ``decision_tiers``, plus the record JSON lines."""

    decisions: dict[str, list[Any]]
    tiers: dict[str, list[Any]]

    @property
    def lines(self) -> list[str]:
        lines: list[str] = self.decisions["record"]
        return lines

    def __len__(self) -> int:
        return len(self.decisions["record"])


def decision_batch(records: Sequence[DecisionRecord], texts: Sequence[str] | None = None,
                   times: Sequence[int] | None = None) -> DecisionBatch:
    """Columns for records already checked with ``check_record`` (``times`` = its results).

    Rows are built as tuples and transposed with ``zip``: in CPython that is about twice as fast
    as appending to thirty column lists one value at a time."""
    if texts is None:
        texts = [record_text(r) for r in records]
    if times is None:
        times = [epoch_ms(r.time) for r in records]
    decision_rows = []
    tier_rows = []
    for r, ms, text in zip(records, times, texts, strict=True):
        decision_rows.append((
            ms, r.decision_id, r.cluster, r.seq, r.attempt, r.tenant, r.namespace, r.pod, r.pod_uid,
            r.policy_version, r.policy_digest, r.outcome, r.node, len(r.devices), r.tier_index, r.preferred_model,
            r.allocated_model, r.fallback, r.retry_class, r.backoff_ms, r.wait_ms, r.steps, r.duration_us, r.track,
            r.template_version, r.engine_version, r.schema_version, text,
        ))
        for tier in r.tiers:
            tier_rows.append((ms, r.tenant, r.decision_id, tier.index, tier.request, tier.model, tier.considered,
                              tier.nodes_evaluated, tier.reasons))
    return DecisionBatch(_columns(DECISION_COLUMNS, decision_rows), _columns(TIER_COLUMNS, tier_rows))


def _columns(names: tuple[str, ...], table: list[tuple[Any, ...]]) -> dict[str, list[Any]]:
    if not table:
        return {name: [] for name in names}
    return {name: list(values) for name, values in zip(names, zip(*table, strict=True), strict=True)}


def check_event(event: WorldEvent) -> int:
    if event.seq >= 2**64:
        raise RowError("seq", f"{event.seq} is outside 0..{2**64 - 1}")
    return epoch_ms(event.time, naive_is_utc=False)


def event_columns(events: Sequence[WorldEvent], texts: Sequence[str] | None = None) -> dict[str, list[Any]]:
    cols: dict[str, list[Any]] = {c: [] for c in EVENT_COLUMNS}
    for i, e in enumerate(events):
        cols["cluster"].append(e.cluster)
        cols["seq"].append(e.seq)
        cols["time"].append(epoch_ms(e.time))
        cols["type"].append(e.type)
        cols["object_kind"].append(e.object_kind)
        cols["namespace"].append(e.namespace)
        cols["name"].append(e.name)
        cols["resource_version"].append(e.resource_version)
        cols["body"].append(texts[i] if texts is not None else event_json(e))
    return cols


def event_line_columns(texts: Sequence[str]) -> dict[str, list[Any]]:
    """``event_columns`` of events given only as their lines (``event_json``). Each line's parse is
    let go as soon as its fields are taken: a batch of parsed events kept alive while it is built
    outlives the collector's young generations and brings on a full collection of the heap."""
    cols: dict[str, list[Any]] = {c: [] for c in EVENT_COLUMNS}
    cluster, seq, time, type_, kind, namespace, name, version, body = (cols[c] for c in EVENT_COLUMNS)
    for text in texts:
        e = json.loads(text)
        cluster.append(e["cluster"])
        seq.append(e["seq"])
        time.append(epoch_ms(e["time"]))
        type_.append(e["type"])
        kind.append(e["object_kind"])
        namespace.append(e["namespace"])
        name.append(e["name"])
        version.append(e.get("resource_version", ""))
        body.append(text)
    return cols
