"""A record as a plain dict has one home, ``audit.records.record_dict``: the JSON value of the
record's canonical text whatever a verdict's open ``detail`` map holds, and the same dict on every
path that takes one (the API's answers, redaction for export, sealing, replay)."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from audit.api.auth import redact_record
from audit.canonical import digest
from audit.records import DeviceRef, Exemplar, Reason, TierBlocker, output_view, record_dict, record_text
from audit.telemetry.redaction import Redaction, redact
from tests.store.factory import make_record


def _with_detail(value: Any) -> Any:
    """Record 1 with ``value`` under ``victims`` (a key tenants see) in a blocker's and an exemplar's detail."""
    record = make_record(1)
    tier = replace(record.tiers[0], exemplars=[Exemplar("gpu-0", "node-1", "in_use", {"victims": value})])
    return replace(record, tiers=[tier, *record.tiers[1:]], blockers=[TierBlocker("reclaim", 0, {"victims": value})])


# a value the record's types allow in an open map but JSON does not have, and the JSON value it is
ODD_VALUES: dict[str, tuple[Any, Any]] = {
    "tuple": (("acme-ml/a", "acme-ml/b"), ["acme-ml/a", "acme-ml/b"]),
    "record dataclass": (DeviceRef("d", "n", "H100", "gpu"), {"device": "d", "model": "H100", "node": "n", "request": "gpu"}),
    "tuple inside a list of maps": ([{"pod": "acme-ml/a", "requested": (1, 2)}],
                                    [{"pod": "acme-ml/a", "requested": [1, 2]}]),
    "str enum member": (Reason.IN_USE, "in_use"),
}


@pytest.mark.parametrize(("value", "expected"), ODD_VALUES.values(), ids=ODD_VALUES.keys())
def test_an_odd_detail_value_is_its_json_value_on_every_path(value: Any, expected: Any) -> None:
    record = _with_detail(value)
    plain = record_dict(record)
    assert plain["blockers"] == [{"code": "reclaim", "tier": 0, "detail": {"victims": expected}}]
    assert plain["tiers"][0]["exemplars"] == [{"device": "gpu-0", "node": "node-1", "reason": "in_use",
                                               "detail": {"victims": expected}}]
    assert plain == json.loads(record_text(record))
    # redaction for export and the API's tenant view start from the same dict
    assert redact(record, {}, Redaction(drop_tenant=True)).data == {**plain, "tenant": ""}
    shown = redact_record(record, Redaction())
    assert (shown["blockers"], shown["tiers"][0]["exemplars"]) == (plain["blockers"], plain["tiers"][0]["exemplars"])
    # sealing digests the value the stored text holds
    assert record.compute_output_digest() == digest(output_view(json.loads(record_text(record))))


def test_the_dict_shares_nothing_with_the_record() -> None:
    record = _with_detail([{"pod": "acme-ml/a"}])
    plain = record_dict(record)
    plain["blockers"][0]["detail"]["victims"][0]["pod"] = "changed"
    plain["tiers"][0]["exemplars"][0]["detail"]["victims"].append("added")
    assert record.blockers[0].detail == {"victims": [{"pod": "acme-ml/a"}]}
    assert record.tiers[0].exemplars[0].detail == {"victims": [{"pod": "acme-ml/a"}]}


def test_a_value_json_has_no_form_for_is_refused_naming_its_type() -> None:
    with pytest.raises(TypeError) as refused:
        record_dict(_with_detail({"acme-ml/a"}))
    assert str(refused.value) == "DecisionRecord: a value of type set has no JSON form"
