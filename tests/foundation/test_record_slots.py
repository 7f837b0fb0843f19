"""Record dataclasses are slotted yet answer ``__dict__`` without raising, so orjson writes them
without making and discarding an AttributeError per dataclass, and they still behave as slotted
dataclasses: no instance dict, no attributes besides their fields, copies and pickles equal."""

from __future__ import annotations

import copy
import dataclasses
import json
import pickle
from typing import Any

import orjson
import pytest

from audit.canonical import canonical_json
from audit.records import DecisionRecord, DeviceRef, Exemplar, TierBlocker, TierSummary
from tests.telemetry.records_factory import make_record

RECORD = make_record(2, blockers=[TierBlocker("insufficient_on_node", 0, {"nodes_with_capacity": 0})])
PARTS: list[tuple[str, Any]] = [
    ("DecisionRecord", RECORD),
    ("DeviceRef", RECORD.devices[0]),
    ("TierSummary", RECORD.tiers[0]),
    ("Exemplar", RECORD.tiers[0].exemplars[0]),
    ("TierBlocker", RECORD.blockers[0]),
]


def test_the_record_used_has_every_kind_of_part() -> None:
    assert [type(part) for _, part in PARTS] == [DecisionRecord, DeviceRef, TierSummary, Exemplar, TierBlocker]


@pytest.mark.parametrize(("name", "part"), PARTS, ids=[name for name, _ in PARTS])
def test_a_record_part_answers_dict_with_none_and_keeps_its_slots(name: str, part: Any) -> None:
    assert part.__dict__ is None  # read without an AttributeError
    assert "__slots__" in type(part).__dict__ and not hasattr(type(part), "__weakref__")
    with pytest.raises(AttributeError):
        part.not_a_field = 1
    assert pickle.loads(pickle.dumps(part)) == part == copy.deepcopy(part)
    assert dataclasses.replace(part) == part


def test_orjson_writes_every_field_of_every_part_as_the_canonical_encoding_does() -> None:
    written = orjson.dumps(RECORD, option=orjson.OPT_SORT_KEYS)
    assert json.loads(written) == RECORD.to_dict() == json.loads(canonical_json(RECORD.to_dict()))
    # declared order at each dataclass (no dict to read it from), sorted keys inside plain maps
    assert written.startswith(b'{"decision_id":')
    assert b'"detail":{"nodes_with_capacity":0}' in written
