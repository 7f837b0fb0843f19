"""A stored record's answer straight from the JSON text the store keeps, without building the record.

The store keeps each decision as its canonical JSON (``audit.records.record_text``: every field
of the record dataclasses, keys sorted, nothing else). What the API shows an admin is
``record_dict(DecisionRecord.from_dict(...))`` of that text, which is the same JSON value, unless the
text lacks fields (a record written before they existed, which ``from_dict`` fills with their
defaults) or holds what ``from_dict`` refuses. So a text whose every object has exactly the fields of
its dataclass is shown as it is, and any other text goes the long way and answers (or fails) as it
did before. Parsing a text to check it costs about a tenth of building the record and encoding it
again, which was most of the API's own work on a page of 50 records. Keys come in the stored
(sorted) order rather than the dataclasses' order; JSON objects are unordered (RFC 8259, section 4).
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import orjson

from audit.api.bodies import json_bytes
from audit.records import DecisionRecord, DeviceRef, Exemplar, TierBlocker, TierSummary, record_dict


def _names(cls: type) -> frozenset[str]:
    return frozenset(f.name for f in dataclasses.fields(cls))


_RECORD, _DEVICE, _TIER, _EXEMPLAR, _BLOCKER = map(_names, (DecisionRecord, DeviceRef, TierSummary, Exemplar,
                                                          TierBlocker))


def _all(parts: Any, names: frozenset[str]) -> bool:
    """``parts`` is a list of objects with exactly the fields ``names``."""
    return parts.__class__ is list and all(p.__class__ is dict and p.keys() == names for p in parts)


def complete(data: Any) -> bool:
    """``data`` (a parsed record text) has exactly the fields of the record dataclasses at every level,
    so ``from_dict`` would fill nothing in and refuse nothing: ``record_dict(from_dict(data)) == data``."""
    if data.__class__ is not dict or data.keys() != _RECORD:
        return False
    tiers = data["tiers"]
    return (_all(data["devices"], _DEVICE) and _all(data["blockers"], _BLOCKER) and _all(tiers, _TIER)
            and all(_all(t["exemplars"], _EXEMPLAR) for t in tiers))


def _parsed(text: str) -> Any:
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:  # beyond orjson (an integer over 64 bits, say): the long way decides
        return None


def record_of(text: str) -> DecisionRecord:
    """The record a stored text holds, built (and checked) as the store's own reads build it."""
    return DecisionRecord.from_dict(json.loads(text))


def record_data(text: str) -> dict[str, Any]:
    """The record of a stored text as ``record_dict`` gives it (a new dict the caller may change)."""
    data = _parsed(text)
    if complete(data):
        found: dict[str, Any] = data
        return found
    return record_dict(record_of(text))


def admin_body(text: str) -> bytes:
    """The JSON an admin is shown for a stored record text."""
    if complete(_parsed(text)):
        return text.encode()
    return json_bytes(record_dict(record_of(text)))
