"""Turning records and events into the exact JSON text and the column values ClickHouse stores.

The stored JSON of a record is its canonical JSON (``audit.records.canonical_json`` of
``to_dict()``): the same bytes a digest is taken over, and what ``get_decision`` parses back.
It is built here without ``dataclasses.asdict`` (which deep-copies and dominates ingest cost),
with dict keys laid out in sorted order so the encoder need not sort them.
"""

from __future__ import annotations

import dataclasses
import json
import typing
from collections.abc import Sequence
from datetime import UTC, datetime
from functools import cache
from typing import Any

from audit.events import WorldEvent
from audit.records import DecisionRecord

_ENCODE = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode
_ENCODE_SORTED = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False, sort_keys=True).encode


class RowError(ValueError):
    """A value the store cannot hold (e.g. a time that is not ISO 8601); ``path`` names the field."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path


@cache
def _sorted_fields(cls: type) -> tuple[str, ...]:
    return tuple(sorted(f.name for f in dataclasses.fields(cls)))


_SCALARS = (str, int, bool, float, type(None))


def plain(value: Any) -> Any:
    """``dataclasses.asdict`` without the deep copy, keys in sorted order."""
    kind = type(value)
    if kind in _SCALARS:
        return value
    if kind is list or kind is tuple:
        return [v if type(v) in _SCALARS else plain(v) for v in value]
    if kind is dict:
        return {k: (value[k] if type(value[k]) in _SCALARS else plain(value[k])) for k in sorted(value)}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out = {}
        for name in _sorted_fields(kind):
            v = getattr(value, name)
            out[name] = v if type(v) in _SCALARS else plain(v)
        return out
    return value


def _encoder_source(cls: type, names: dict[type, str]) -> str:
    """Source of a function turning one ``cls`` instance into a dict with sorted keys.

    Generated from the dataclass's type hints so it follows the record contract as fields are
    added; it is several times faster than walking values with isinstance checks."""
    hints = typing.get_type_hints(cls)
    parts = []
    for name in _sorted_fields(cls):
        hint = hints[name]
        origin, args = typing.get_origin(hint), typing.get_args(hint)
        value = f"o.{name}"
        if origin is list and args and dataclasses.is_dataclass(args[0]):
            value = f"[{names[args[0]]}(x) for x in o.{name}]"
        elif origin is list:
            value = f"[plain(x) for x in o.{name}]" if args and args[0] is typing.Any else f"list(o.{name})"
        elif origin is dict:
            inner = "plain(v)" if args and args[1] is typing.Any else "v"
            value = f"{{k: {inner} for k, v in sorted(o.{name}.items())}}"
        elif dataclasses.is_dataclass(hint):
            value = f"{names[hint]}(o.{name})"  # type: ignore[index]
        parts.append(f"{name!r}: {value}")
    return f"def {names[cls]}(o):\n    return {{{', '.join(parts)}}}\n"


def _build_encoder(root: type) -> Any:
    classes: list[type] = []

    def visit(cls: type) -> None:
        if cls in classes:
            return
        classes.append(cls)
        for hint in typing.get_type_hints(cls).values():
            for candidate in (hint, *typing.get_args(hint)):
                if dataclasses.is_dataclass(candidate) and isinstance(candidate, type):
                    visit(candidate)

    visit(root)
    names = {cls: f"_enc_{cls.__name__}" for cls in classes}
    namespace: dict[str, Any] = {"plain": plain}
    exec("".join(_encoder_source(cls, names) for cls in classes), namespace)  # noqa: S102 - our own source
    return namespace[names[root]]


_RECORD_TO_DICT = _build_encoder(DecisionRecord)


def record_json(record: DecisionRecord) -> str:
    """The record's canonical JSON (byte-identical to ``canonical_json(record.to_dict())``)."""
    text: str = _ENCODE(_RECORD_TO_DICT(record))
    return text


def event_json(event: WorldEvent) -> str:
    text: str = _ENCODE_SORTED(dataclasses.asdict(event))
    return text


def epoch_ms(text: str, path: str = "time") -> int:
    """Milliseconds since the epoch of an ISO 8601 time; a time without zone is taken as UTC."""
    if not isinstance(text, str) or not text:
        raise RowError(path, "must be an ISO 8601 time, e.g. 2026-11-01T00:00:00Z")
    try:
        t = datetime.fromisoformat(text)
    except ValueError:
        raise RowError(path, f"{text[:40]!r} is not an ISO 8601 time") from None
    if t.tzinfo is None:
        t = t.replace(tzinfo=UTC)
    ms = int(t.timestamp() * 1000)
    if not 0 <= ms < 2**42:  # DateTime64(3) holds 1970..2299; refuse rather than wrap
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

_UINT_LIMITS = {"attempt": 2**16, "seq": 2**64, "backoff_ms": 2**32, "wait_ms": 2**64, "steps": 2**32,
                "duration_us": 2**32, "schema_version": 2**16}


def check_record(record: DecisionRecord) -> int:
    """Store-level checks beyond ``validate_record``: values must fit their columns. Returns time (ms)."""
    for name, limit in _UINT_LIMITS.items():
        value = getattr(record, name)
        if not 0 <= value < limit:
            raise RowError(name, f"{value} is outside 0..{limit - 1}")
    if not record.decision_id:
        raise RowError("decision_id", "must not be empty")
    if not -1 <= record.tier_index < 2**15:
        raise RowError("tier_index", f"{record.tier_index} is outside -1..32767")
    for i, tier in enumerate(record.tiers):
        if not 0 <= tier.index < 256:
            raise RowError(f"tiers.{i}.index", f"{tier.index} is outside 0..255")
        for key, count in tier.reasons.items():
            if not 0 <= count < 2**32:
                raise RowError(f"tiers.{i}.reasons.{key}", f"{count} is outside 0..{2**32 - 1}")
    return epoch_ms(record.time)


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
    """Columns for records already checked with ``check_record`` (``times`` = its results)."""
    d: dict[str, list[Any]] = {c: [] for c in DECISION_COLUMNS}
    t: dict[str, list[Any]] = {c: [] for c in TIER_COLUMNS}
    for i, r in enumerate(records):
        ms = times[i] if times is not None else epoch_ms(r.time)
        d["time"].append(ms)
        d["decision_id"].append(r.decision_id)
        d["cluster"].append(r.cluster)
        d["seq"].append(r.seq)
        d["attempt"].append(r.attempt)
        d["tenant"].append(r.tenant)
        d["namespace"].append(r.namespace)
        d["pod"].append(r.pod)
        d["pod_uid"].append(r.pod_uid)
        d["policy_version"].append(r.policy_version)
        d["policy_digest"].append(r.policy_digest)
        d["outcome"].append(r.outcome)
        d["node"].append(r.node)
        d["n_devices"].append(len(r.devices))
        d["tier_index"].append(r.tier_index)
        d["preferred_model"].append(r.preferred_model)
        d["allocated_model"].append(r.allocated_model)
        d["fallback"].append(r.fallback)
        d["retry_class"].append(r.retry_class)
        d["backoff_ms"].append(r.backoff_ms)
        d["wait_ms"].append(r.wait_ms)
        d["steps"].append(r.steps)
        d["duration_us"].append(r.duration_us)
        d["track"].append(r.track)
        d["template_version"].append(r.template_version)
        d["engine_version"].append(r.engine_version)
        d["schema_version"].append(r.schema_version)
        d["record"].append(texts[i] if texts is not None else record_json(r))
        for tier in r.tiers:
            t["time"].append(ms)
            t["tenant"].append(r.tenant)
            t["decision_id"].append(r.decision_id)
            t["tier"].append(tier.index)
            t["request"].append(tier.request)
            t["model"].append(tier.model)
            t["considered"].append(tier.considered)
            t["nodes_evaluated"].append(tier.nodes_evaluated)
            t["reasons"].append(tier.reasons)
    return DecisionBatch(d, t)


def check_event(event: WorldEvent) -> int:
    if event.seq >= 2**64:
        raise RowError("seq", f"{event.seq} is outside 0..{2**64 - 1}")
    return epoch_ms(event.time)


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
