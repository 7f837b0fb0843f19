"""``audit.canonical`` is the one byte form of JSON values: what digests and JSON lines are."""

from __future__ import annotations

import hashlib
import json

import pytest

from audit.canonical import canonical_json, canonical_text, digest, json_lines
from audit.records import to_jsonl
from tests.store.factory import make_record


@pytest.mark.parametrize(("value", "text"), [
    ({"b": 1, "a": [True, None, 1.5]}, '{"a":[true,null,1.5],"b":1}'),
    ({"name": "Grüße ☃"}, '{"name":"Grüße ☃"}'),        # non-ASCII kept, not escaped
    ({"z": {"y": {}, "x": []}}, '{"z":{"x":[],"y":{}}}'),
    ("line\nbreak", '"line\\nbreak"'),
])
def test_canonical_form_by_hand(value: object, text: str) -> None:
    assert canonical_text(value) == text
    assert canonical_json(value) == text.encode()
    assert digest(value) == hashlib.sha256(text.encode()).hexdigest()


@pytest.mark.parametrize("value", [float("nan"), {"a": [float("inf")]}])
def test_values_json_cannot_carry_are_refused(value: object) -> None:
    with pytest.raises(ValueError):
        canonical_json(value)


def test_json_lines_of_records_are_their_canonical_texts() -> None:
    record = make_record(0)
    record.pod = "tränings-pod"
    line = to_jsonl([record])
    assert line == json_lines([record.to_dict()])
    assert line == json.dumps(record.to_dict(), sort_keys=True, separators=(",", ":"), ensure_ascii=False) + "\n"
    assert "tränings-pod" in line
