"""A record's text is the canonical JSON, byte for byte, whatever the field values hold.

``audit.records.record_bytes`` (and ``record_text``, the same as text: what the store keeps and
``claimtrail.record`` carries) has orjson write the record with its dataclasses opened by a
generated function, or the generic encoder where that path would not write what json writes;
``canonical_json(to_dict())`` is the definition both must match (digests and ``get_decision``
depend on it).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from audit.canonical import canonical_json
from audit.records import (
    DecisionRecord,
    DeviceRef,
    Exemplar,
    Outcome,
    RecordError,
    TierBlocker,
    TierSummary,
    escaped_record_text,
    record_bytes,
    record_text,
)
from tests.store.factory import make_record

text = st.text(max_size=12)  # every code point but lone surrogates: quotes, backslashes, controls, non-ASCII
ints = st.integers(min_value=-(2**70), max_value=2**70)
json_values = st.recursive(
    st.none() | st.booleans() | ints | st.floats(allow_nan=False, allow_infinity=False) | text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3),
    max_leaves=8,
)

exemplars = st.builds(Exemplar, device=text, node=text, reason=text,
                      detail=st.dictionaries(text, text, max_size=3))
tiers = st.builds(TierSummary, index=ints, request=text, model=text, considered=ints,
                  reasons=st.dictionaries(text, ints, max_size=4), exemplars=st.lists(exemplars, max_size=2),
                  nodes_evaluated=ints)
records = st.builds(
    DecisionRecord,
    decision_id=text, cluster=text, seq=ints, time=text, attempt=ints, tenant=text, namespace=text, pod=text,
    pod_uid=text, claims=st.lists(text, max_size=3), claim_uids=st.lists(text, max_size=3),
    preference=st.lists(text, max_size=3), policy_version=text, policy_digest=text, outcome=text, node=text,
    devices=st.lists(st.builds(DeviceRef, device=text, node=text, model=text, request=text), max_size=3),
    tier_index=ints, preferred_model=text, allocated_model=text, fallback=st.booleans(),
    tiers=st.lists(tiers, max_size=3),
    blockers=st.lists(st.builds(TierBlocker, code=text, tier=ints,
                                detail=st.dictionaries(text, json_values, max_size=3)), max_size=2),
    retry_class=text, backoff_ms=ints, wait_ms=ints, steps=ints, duration_us=ints, track=text,
    template_version=text, message=text, engine_version=text, input_digest=text, output_digest=text,
    schema_version=ints,
)


@settings(max_examples=150, deadline=None)
@given(records)
def test_record_text_is_the_canonical_json_for_any_well_typed_record(record: DecisionRecord) -> None:
    _assert_canonical(record)


def _assert_canonical(record: DecisionRecord) -> None:
    try:
        expected = canonical_json(record.to_dict())
    except ValueError as exc:  # a value JSON has no form for (NaN): refused the same way
        for encode in (record_bytes, record_text):
            with pytest.raises(type(exc)):
                encode(record)
        return
    assert record_bytes(record) == expected
    assert record_text(record).encode() == expected


def _with_tier(**changes: Any) -> DecisionRecord:
    record = make_record(1)
    return replace(record, tiers=[replace(record.tiers[0], **changes), *record.tiers[1:]])


def _with_blocker(detail: dict[str, Any]) -> DecisionRecord:
    return replace(make_record(1), blockers=[TierBlocker("quota_exhausted", 0, detail)])


@dataclass(slots=True)
class _DeviceSubclass(DeviceRef):
    pass


class _Name(str):
    pass


# Values that do not have their declared type still come out exactly as json.dumps renders them.
ODD_VALUES = {
    "int in a str field": replace(make_record(1), node=7),
    "str in an int field": replace(make_record(1), seq="10"),
    "bool in an int field": replace(make_record(1), attempt=True),
    "int in a bool field": replace(make_record(1), fallback=1),
    "str enum in a str field": replace(make_record(1), outcome=Outcome.DEFERRED),
    "tuple for a list of strings": replace(make_record(1), claims=("a", "b")),
    "int inside a list of strings": replace(make_record(1), preference=["H100", 3]),
    "None for a list": replace(make_record(1), devices=None),
    "dict instead of a dataclass in a list": replace(make_record(1), devices=[{"device": "d", "node": "n"}]),
    "bool count in reasons": _with_tier(reasons={"in_use": True}),
    "non-string key in reasons": _with_tier(reasons={1: 2}),
    "float count in reasons": _with_tier(reasons={"in_use": 1.5}),
    "tuple of tiers": replace(make_record(1), tiers=tuple(make_record(1).tiers)),
    "null in a blocker's detail": _with_blocker({"limit": None}),
    "float json writes otherwise in a blocker's detail": _with_blocker({"share": 1e-05}),
    "float both write alike in a blocker's detail": _with_blocker({"share": 0.25}),
    "NaN in a blocker's detail": _with_blocker({"share": float("nan")}),
    "integer beyond 64 bits": replace(make_record(1), seq=2**64),
    "record dataclass inside a blocker's detail": _with_blocker({"device": DeviceRef("d", "n", "H100", "gpu")}),
    "subclass of a record dataclass in a list": replace(make_record(1), devices=[_DeviceSubclass("d", "n", "m", "r")]),
    "str subclass for a key in reasons": _with_tier(reasons={_Name("in_use"): 2}),
}


@pytest.mark.parametrize("record", ODD_VALUES.values(), ids=ODD_VALUES.keys())
def test_record_text_matches_json_dumps_for_values_of_another_type(record: DecisionRecord) -> None:
    _assert_canonical(record)


def _with_exemplar_detail(detail: dict[str, Any]) -> DecisionRecord:
    record = make_record(1)
    tier = record.tiers[0]
    return replace(record, tiers=[replace(tier, exemplars=[Exemplar("d", "n", "in_use", detail)]), *record.tiers[1:]])


# A text UTF-8 cannot hold: the path and reason each way of writing the record refuses it with.
LONE_SURROGATES = {
    "in the message": (replace(make_record(1), message="lost\ud800"), "message",
                       "not valid UTF-8 text (lone surrogate U+D800 at character 4)"),
    "in a list of strings": (replace(make_record(1), claims=["ok", "\udfff"]), "claims.1",
                             "not valid UTF-8 text (lone surrogate U+DFFF at character 0)"),
    "in an exemplar's detail": (_with_exemplar_detail({"claim": "ns/\udc80x"}), "tiers.0.exemplars.0.detail.claim",
                                "not valid UTF-8 text (lone surrogate U+DC80 at character 3)"),
    "in a key of the reasons": (_with_tier(reasons={"in\ud800use": 1}), "tiers.0.reasons",
                                "key in\\ud800use: not valid UTF-8 text (lone surrogate U+D800 at character 2)"),
    "nested in a blocker's detail": (_with_blocker({"victims": [{"pod": "a/\ud801"}]}), "blockers.0.detail.victims.0.pod",
                                     "not valid UTF-8 text (lone surrogate U+D801 at character 2)"),
}


@pytest.mark.parametrize(("record", "path", "reason"), LONE_SURROGATES.values(), ids=LONE_SURROGATES.keys())
def test_a_text_utf8_cannot_hold_is_refused_naming_its_field(record: DecisionRecord, path: str, reason: str) -> None:
    for encode in (record_bytes, record_text):
        with pytest.raises(RecordError) as refused:
            encode(record)
        assert (refused.value.path, refused.value.reason) == (path, reason)
    # kept whole as JSON with the surrogate escaped: valid UTF-8 that reads back as the same record
    text = escaped_record_text(record)
    text.encode()
    assert json.loads(text) == record.to_dict()
