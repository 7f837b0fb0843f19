"""The paths of record fields the contract does not know, at every depth of nested lists."""

from __future__ import annotations

from typing import Any

import pytest

from audit.records import DecisionRecord
from audit.store.ingest import unknown_fields

TIER = {"index": 0, "request": "gpu", "model": "H100", "considered": 1}
EXEMPLAR = {"device": "gpu-0", "node": "n1", "reason": "taint"}

CASES: list[tuple[str, dict[str, Any], list[str]]] = [
    ("nothing unknown", {"tenant": "a", "tiers": [TIER]}, []),
    ("a top-level field", {"tenant": "a", "colour": "blue"}, ["colour"]),
    ("a field of the second tier", {"tiers": [TIER, {**TIER, "shade": 1}]}, ["tiers.1.shade"]),
    ("a field of an exemplar within a tier",
     {"tiers": [{**TIER, "exemplars": [EXEMPLAR, {**EXEMPLAR, "why": "x"}]}]}, ["tiers.0.exemplars.1.why"]),
    ("keys of a mapping field are values, not fields", {"tiers": [{**TIER, "reasons": {"anything": 2}}]}, []),
    ("an item that is not an object is left to validation", {"tiers": ["not an object"]}, []),
    ("several, in the order of the input", {"b2": 1, "tiers": [{**TIER, "z": 0}], "a1": 2},
     ["b2", "tiers.0.z", "a1"]),
]


@pytest.mark.parametrize(("data", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_unknown_fields_are_named_by_their_path(data: dict[str, Any], expected: list[str]) -> None:
    assert unknown_fields(DecisionRecord, data) == expected
