"""A fast plain-dict form of a DecisionRecord, equal to ``DecisionRecord.to_dict()``.

``dataclasses.asdict`` deep-copies every leaf, which made it the largest single cost of
exporting a decision; records hold only str/int/bool/float leaves, lists, str-keyed dicts and
nested record dataclasses, so a direct walk (exact-type checks first, one ``attrgetter`` call per
dataclass) gives the same dict at a fraction of the cost. ``record_json`` gives the canonical JSON
text without building that dict at all.
Equality with ``to_dict()`` is a tested property.
"""

from __future__ import annotations

import dataclasses
import json
import operator
from collections.abc import Callable
from typing import Any

import orjson

from audit.records import DecisionRecord

_ATOMIC = frozenset({str, int, float, bool, type(None)})
# per dataclass: its field names and one attrgetter fetching all of them in a single C call
_FIELDS: dict[type, tuple[tuple[str, ...], Callable[[Any], tuple[Any, ...]]]] = {}


def _fields_of(cls: type) -> tuple[tuple[str, ...], Callable[[Any], tuple[Any, ...]]]:
    entry = _FIELDS.get(cls)
    if entry is None:
        names = tuple(f.name for f in dataclasses.fields(cls))
        getter = operator.attrgetter(*names)
        # attrgetter of one name returns the value itself, not a 1-tuple
        entry = _FIELDS[cls] = (names, getter if len(names) > 1 else (lambda obj: (getter(obj),)))
    return entry


def _plain(value: Any) -> Any:
    cls = value.__class__
    if cls in _ATOMIC:
        return value
    if cls is list or cls is tuple:
        return [_plain(v) for v in value]
    if cls is dict:
        return {k: _plain(v) for k, v in value.items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        names, getter = _fields_of(cls)
        return dict(zip(names, map(_plain, getter(value)), strict=True))
    # subclasses of the plain types (a str enum member, say) are kept as they are, like asdict does
    if isinstance(value, str | int | float | bool):
        return value
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    raise TypeError(f"DecisionRecord: unexpected value of type {cls.__name__}")


def record_dict(record: DecisionRecord) -> dict[str, Any]:
    out: dict[str, Any] = _plain(record)
    return out


def _fields_dict(value: Any) -> dict[str, Any]:
    """The JSON encoder's hook for record dataclasses: their fields as a (shallow) dict."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        names, getter = _fields_of(value.__class__)
        return dict(zip(names, getter(value), strict=True))
    raise TypeError(f"DecisionRecord: unexpected value of type {value.__class__.__name__}")


# the settings of audit.records.canonical_json, with dataclasses opened by the hook above
_CANONICAL = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False, default=_fields_dict
)


def record_text(record: DecisionRecord) -> str:
    """The record as JSON for the ``claimtrail.record`` attribute: orjson writes the dataclasses
    natively (fields in declared order, nested maps sorted), a twentieth of ``record_json``'s
    cost and the same JSON value; what orjson refuses (integers beyond 64 bits, keys that are not
    strings) falls back to ``record_json``."""
    return record_bytes(record).decode()


def record_bytes(record: DecisionRecord) -> bytes:
    """``record_text`` as UTF-8, the form the OTLP encoder writes (orjson's own output, with no
    round trip through ``str``)."""
    try:
        return orjson.dumps(record, option=orjson.OPT_SORT_KEYS)
    except TypeError:
        return record_json(record).encode()


def record_json(record: DecisionRecord) -> str:
    """``canonical_json(record.to_dict())`` as text, encoded from the record itself: the C JSON
    encoder walks lists and dicts, and only each dataclass takes a (one-call) detour through
    Python, so no intermediate dict tree is built. Equality is a tested property."""
    return _CANONICAL.encode(record)
