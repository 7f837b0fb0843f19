"""The world's digests are the records' canonical digests, byte for byte.

The world folds each event's digest into its chain and checkpoints carry a content digest; both
are stored and named by records, so the world's cheaper encoders must produce exactly
``audit.canonical.canonical_json``/``digest`` for every value, at every streaming depth, and those
are the canonical form as the standard library's encoder writes it with the canonical settings.
"""

from __future__ import annotations

import hashlib
import json
from enum import StrEnum

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from audit.canonical import canonical_digest, canonical_json, digest
from audit.events import WorldEvent
from audit.world import event_digest

# JSON values with the awkward parts: non-ASCII and control characters, line separators, floats
# whose shortest form uses an exponent, negative zero, bools next to ints, empty containers.
_TEXT = st.text(alphabet=st.characters(codec="utf-8"), max_size=8)
_LEAVES = (st.none() | st.booleans() | st.integers(min_value=-2**70, max_value=2**70)
           | st.floats(allow_nan=False, allow_infinity=False) | st.sampled_from([1e16, 1e-7, -0.0, 1.5e300])
           | _TEXT)
_JSON = st.recursive(_LEAVES, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_TEXT, inner, max_size=4),
                     max_leaves=20)


@settings(max_examples=150, deadline=None)
@given(value=_JSON, depth=st.integers(min_value=0, max_value=4))
def test_streamed_and_reused_encodings_equal_the_canonical_ones(value, depth):
    reference = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                           allow_nan=False).encode()
    assert canonical_json(value) == reference
    assert canonical_digest(value, depth) == digest(value) == hashlib.sha256(reference).hexdigest()


@pytest.mark.parametrize("value", [
    {1: "int key"},
    {"a": {2: "nested int key"}},
    {"a": (1, "tuple")},
], ids=["int-key", "nested-int-key", "tuple"])
def test_values_json_converts_are_digested_as_json_converts_them(value):
    for depth in range(3):
        assert canonical_digest(value, depth) == digest(value)


@pytest.mark.parametrize("value", [{"a": float("nan")}, {"a": {"b": object()}}], ids=["nan", "not-json"])
def test_values_canonical_json_refuses_are_refused(value):
    for depth in range(3):
        with pytest.raises((ValueError, TypeError)):
            canonical_digest(value, depth)


class _Kind(StrEnum):
    POD = "Pod"


@settings(max_examples=60, deadline=None)
@given(payload=st.dictionaries(_TEXT, _JSON, max_size=4), name=_TEXT, seq=st.integers(min_value=0, max_value=2**40))
def test_event_digest_equals_the_event_s_own_digest(payload, name, seq):
    ev = WorldEvent(cluster="c-é", seq=seq, time="2026-11-01T00:00:00Z", type="upsert", object_kind="Pod",
                    namespace="ns\n", name=name, payload=payload, resource_version="7")
    assert event_digest(ev) == ev.digest()


@pytest.mark.parametrize("fields", [
    {"object_kind": _Kind.POD},
    {"seq": True},
    {"resource_version": 7},
], ids=["str-enum-kind", "bool-seq", "int-resource-version"])
def test_event_fields_of_unexpected_types_still_digest_canonically(fields):
    ev = WorldEvent(**{"cluster": "c", "seq": 3, "time": "", "type": "delete", "object_kind": "Pod",
                       "namespace": "", "name": "n", "payload": {}, "resource_version": "", **fields})
    assert event_digest(ev) == ev.digest()
