"""World events: the ordered log of everything the allocator can see, per cluster.

Every change to allocator inputs is one event with a per-cluster sequence number ``seq``:
an upsert or delete of a Kubernetes object (ResourceSlice, DeviceClass, DeviceTaintRule, Node,
ResourceClaim with or without ``status.allocation``, Pod), the activation of a policy
(``object_kind == "Policy"``, payload = the policy document), or a scheduler's Reservation of
devices for a long-pending pod (``audit.scheduler.reservations``). A decision at ``seq`` sees exactly
the events with a smaller or equal ``seq``. Events are deduplicated by ``(cluster, seq)``; sources
that observe objects (the Kubernetes watcher) also carry ``resource_version`` so the same
observed change never gets two sequence numbers.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from enum import StrEnum
from operator import itemgetter
from typing import Any

import orjson

from audit.canonical import digest, shown_text
from audit.records import cluster_name_problem


class EventType(StrEnum):
    UPSERT = "upsert"
    DELETE = "delete"


OBJECT_KINDS = (
    "DeviceClass",
    "ResourceSlice",
    "DeviceTaintRule",
    "Node",
    "ResourceClaim",
    "Pod",
    "Policy",
    "Reservation",
)


# slots: a simulated day's event log holds hundreds of thousands of events, and a per-instance
# dict would add a few hundred bytes to each
@dataclass(slots=True)
class WorldEvent:
    cluster: str
    seq: int
    time: str
    type: str
    object_kind: str
    namespace: str
    name: str
    payload: dict[str, Any] = field(default_factory=dict)
    resource_version: str = ""

    def to_dict(self) -> dict[str, Any]:
        """The event's fields, its payload the event's own dict: ``dataclasses.asdict`` deep-copies
        the payload, which costs several times what reading the event back from its text does (a
        page of ``GET /v1/events`` spent nine tenths of its time there). Readers only read it."""
        return {name: getattr(self, name) for name in _EVENT_FIELDS}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> WorldEvent:
        """``cls(**data)``. A dict holding exactly the fields is passed positionally: the names of
        a parsed text's keys are not the interned ones of the code, so CPython matches each keyword
        by comparing it with every parameter name in turn, which costs more than the call."""
        if len(data) == len(_EVENT_FIELDS):
            try:
                return cls(*_FIELD_VALUES(data))
            except KeyError:
                pass
        return cls(**data)

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.object_kind, self.namespace, self.name)

    def digest(self) -> str:
        return digest(self.to_dict())


_EVENT_FIELDS = tuple(f.name for f in dataclasses.fields(WorldEvent))
_FIELD_VALUES = itemgetter(*_EVENT_FIELDS)  # a dict's values of the fields, in field order


class EventError(ValueError):
    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"WorldEvent: {path}: {message}")
        self.path = path
        self.reason = message


def event_problem(event: WorldEvent, error: EventError) -> str:
    """``error`` of ``event`` as one line naming the event (its cluster and seq, the object it is
    about) and the field."""
    obj = f"{event.namespace}/{event.name}" if event.namespace else event.name
    return shown_text(f"event {event.cluster}/{event.seq} ({event.object_kind} {obj}): field {error.path}: "
                      f"{error.reason}")


_FIELD_TYPES: dict[str, type] = {
    "cluster": str,
    "seq": int,
    "time": str,
    "type": str,
    "object_kind": str,
    "namespace": str,
    "name": str,
    "payload": dict,
    "resource_version": str,
}


def validate_event(data: Any) -> WorldEvent:
    """Strictly parse an untrusted event; the error names the failing field."""
    if not isinstance(data, dict):
        raise EventError("", f"expected a JSON object, got {type(data).__name__}")
    unknown = sorted(set(data) - set(_FIELD_TYPES))
    if unknown:
        raise EventError(unknown[0], "unknown field")
    for name, typ in _FIELD_TYPES.items():
        if name not in data:
            if name == "resource_version" or name == "payload":
                continue
            raise EventError(name, "required field missing")
        value = data[name]
        if typ is int and (isinstance(value, bool) or not isinstance(value, int)):
            raise EventError(name, f"expected an integer, got {type(value).__name__}")
        if not isinstance(value, typ):
            raise EventError(name, f"expected {typ.__name__}, got {type(value).__name__}")
    if data["type"] not in {t.value for t in EventType}:
        raise EventError("type", f"unknown event type {data['type']!r}")
    if data["object_kind"] not in OBJECT_KINDS:
        raise EventError("object_kind", f"unknown object kind {data['object_kind']!r}")
    problem = cluster_name_problem(data["cluster"])
    if problem:
        raise EventError("cluster", problem)
    if data["seq"] < 0:
        raise EventError("seq", "must be >= 0")
    if data["object_kind"] == "Reservation" and data["type"] == EventType.UPSERT.value:
        _check_reservation(data.get("payload") or {})
    return WorldEvent.from_dict(data)


# What the world reads of a Reservation (audit/scheduler/reservations.py writes them).
_RESERVATION_SPEC: dict[str, type] = {"pod": str, "node": str, "models": list, "count": int, "tier": int, "since": str}


def _check_reservation(payload: dict[str, Any]) -> None:
    spec = payload.get("spec")
    if not isinstance(spec, dict):
        raise EventError("payload.spec", "a Reservation needs a spec object")
    for name, typ in _RESERVATION_SPEC.items():
        value = spec.get(name)
        if not isinstance(value, typ) or isinstance(value, bool):
            raise EventError(f"payload.spec.{name}", f"expected {typ.__name__}, got {type(value).__name__}")
    if not all(isinstance(m, str) for m in spec["models"]):
        raise EventError("payload.spec.models", "expected a list of model names")


def loads_json(raw: bytes) -> Any:
    """Exactly ``json.loads(raw)`` for a stored text's bytes, through orjson where that gives the
    same value.

    Parsing is most of what reading an event back costs, and orjson, about twice as fast, parses
    JSON into the same Python values as ``json.loads`` — the same dicts (a repeated key keeps its
    last value), lists, strings, ints and floats (both round correctly) — which
    ``tests/store/test_event_text.py`` checks property-wise. Two kinds of text go to ``json``:
    what orjson refuses (``NaN``/``Infinity``, lone surrogates, nesting deeper than its limit, a
    byte-order mark, text not in UTF-8, malformed text — whose error is then ``json``'s own), and
    any text holding 19 digits in a row: orjson reads an integer beyond 64 bits (every such
    integer has at least 19 digits) as a float instead of refusing it.
    """
    # (find, not ``in``: ``bytes.__contains__`` first tries its argument as an integer, and pays
    # for the TypeError it formats and drops)
    if raw.translate(_DIGITS_AS_ZERO).find(_DIGIT_RUN) >= 0:
        return json.loads(raw)
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return json.loads(raw)


# every ASCII digit as "0", every other byte as ".": a run of 19 digits becomes _DIGIT_RUN
_DIGITS_AS_ZERO = bytes(0x30 if 0x30 <= b <= 0x39 else 0x2E for b in range(256))
_DIGIT_RUN = b"0" * 19


def stored_event(raw: bytes) -> tuple[WorldEvent, str]:
    """An event read back from its stored text (``audit.store.rows.event_json``: the canonical JSON
    of its fields), with the sha256 of those bytes — its ``event_digest`` while the text is
    canonical, which a replay checks through the chain digest the decision recorded."""
    return WorldEvent.from_dict(loads_json(raw)), hashlib.sha256(raw).hexdigest()
