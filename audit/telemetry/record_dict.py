"""A fast plain-dict form of a DecisionRecord, equal to ``DecisionRecord.to_dict()``.

``dataclasses.asdict`` deep-copies every leaf, which made it the largest single cost of
exporting a decision; records hold only str/int/bool/float leaves, lists, str-keyed dicts and
nested record dataclasses, so a direct walk (exact-type checks first, one ``attrgetter`` call per
dataclass) gives the same dict at a fraction of the cost. The record's JSON text is not made from
it: ``audit.records.record_value_bytes`` writes that without building a dict at all.
Equality with ``to_dict()`` is a tested property.
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Callable
from typing import Any

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
