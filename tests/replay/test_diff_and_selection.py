"""Structural diffs name the path of every difference; selection samples and shards stably."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from audit.replay.diff import record_diff, structural_diff
from audit.replay.selection import Selection, Shard, sampled
from tests.replay.runs import busy


@pytest.mark.parametrize(("recorded", "replayed", "lines"), [
    ({"a": 1}, {"a": 1}, []),
    ({"tiers": [{"reasons": {"in_use": 5}}]}, {"tiers": [{"reasons": {"in_use": 6}}]},
     ["tiers[0].reasons.in_use: recorded 5, replayed 6"]),
    ({"devices": [{"device": "d/p/gpu-1"}]}, {"devices": [{"device": "d/p/gpu-2"}]},
     ["devices[0].device: recorded d/p/gpu-1, replayed d/p/gpu-2"]),
    ({"devices": [1, 2]}, {"devices": [1]}, ["devices: recorded 2 items, replayed 1", "devices[1]: recorded 2, replayed (absent)"]),
    ({"reasons": {"in_use": 1}}, {"reasons": {"in_use": 1, "selected": 1}},
     ["reasons.selected: recorded (absent), replayed 1"]),
    ({"node": ""}, {"node": "n1"}, ['node: recorded "", replayed n1']),
    ({"fallback": False}, {"fallback": 0}, ["fallback: recorded false, replayed 0"]),
], ids=["equal", "reason-count", "device", "shorter-list", "new-reason", "empty-string", "bool-vs-int"])
def test_structural_diff_lines(recorded, replayed, lines):
    assert structural_diff(recorded, replayed) == lines


def test_record_diff_ignores_clock_fields_and_digests():
    r = busy(2.0).records[0].to_dict()
    other = {**r, "duration_us": r["duration_us"] + 7, "output_digest": "x", "input_digest": "y"}
    assert record_diff(r, other) == []


json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner,
                                                                                       max_size=3), max_leaves=10)


@settings(max_examples=60, deadline=None)
@given(a=json_values, b=json_values)
def test_diff_is_empty_exactly_when_equal(a, b):
    same = a == b and _types(a) == _types(b)
    assert (structural_diff(a, b) == []) == same


def _types(v):
    if isinstance(v, dict):
        return {k: _types(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_types(x) for x in v]
    return type(v).__name__


@settings(max_examples=40, deadline=None)
@given(seq=st.integers(min_value=0, max_value=10**9), n=st.integers(min_value=1, max_value=16),
       segment=st.integers(min_value=1, max_value=50_000))
def test_every_seq_belongs_to_exactly_one_shard(seq, n, segment):
    assert sum(Shard(i, n).owns(seq, segment) for i in range(n)) == 1


def test_sampling_is_stable_and_close_to_the_fraction():
    ids = [r.decision_id for r in busy(2.0).records]
    picked = [i for i in ids if sampled(i, 0.25)]
    assert picked == [i for i in ids if sampled(i, 0.25)]
    assert 0.2 * len(ids) < len(picked) < 0.3 * len(ids)
    assert set(picked) <= {i for i in ids if sampled(i, 0.5)}


def test_window_bounds_are_inclusive_then_exclusive():
    records = busy(2.0).records
    t = records[100].time
    kept = Selection(since=t, until=t).apply(records)
    assert kept == []
    assert records[100] in Selection(since=t).apply(records)
    assert records[100] not in Selection(until=t).apply(records)
