"""Stored event texts: parsed exactly as ``json.loads`` would, and hashed as stored.

An event's ``body`` column is its canonical JSON, so the sha256 of those bytes is its event
digest; ``AuditStore.digested_events`` hands both to replay. The parser takes orjson's path only
where it yields the same Python value as ``json.loads``; these tests pin that on generated JSON
values and on each kind of text orjson refuses or misreads.
"""

from __future__ import annotations

import json
import sys

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from audit.events import WorldEvent, loads_json, stored_event
from audit.store import rows
from audit.store.queries import AuditStore
from audit.world import event_digest
from tests.replay.runs import busy

# ints well past 64 bits on both sides, so some land on each side of orjson's range
_INTS = st.integers(min_value=-(2**70), max_value=2**70) | st.integers()
_SCALARS = (st.none() | st.booleans() | _INTS
            | st.floats(allow_nan=False, allow_infinity=False) | st.text())
JSON_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


def _same(a: object, b: object) -> bool:
    """Equal values of the same types in the same order (``1 == 1.0 == True`` does not count)."""
    return type(a) is type(b) and repr(a) == repr(b)


@settings(max_examples=300, deadline=None)
@given(JSON_VALUES, st.booleans())
def test_any_json_value_parses_to_what_json_loads_gives(value, ascii_only):
    raw = json.dumps(value, ensure_ascii=ascii_only).encode()
    assert _same(loads_json(raw), json.loads(raw))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["a", "b", "é", "c"]), JSON_VALUES), min_size=1, max_size=6))
def test_an_object_with_repeated_keys_keeps_the_last_value_as_json_loads_does(members):
    raw = ("{" + ",".join(f"{json.dumps(k)}:{json.dumps(v)}" for k, v in members) + "}").encode()
    assert _same(loads_json(raw), json.loads(raw))


@settings(max_examples=300, deadline=None)
@given(st.from_regex(r"\A-?(0|[1-9][0-9]{0,17})(\.[0-9]{1,18})?([eE][+-]?[0-9]{1,3})?\Z"))
def test_any_number_literal_reads_as_the_same_int_or_float(literal):
    raw = literal.encode()
    assert _same(loads_json(raw), json.loads(raw))


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet='{}[]",:-+.0123456789eEtrufalsn\\u \t\n\r\x0c\x00\xe9', max_size=24))
def test_any_text_is_refused_or_read_exactly_as_json_loads_does(text):
    raw = text.encode()
    try:
        expected = json.loads(raw)
    except ValueError:
        with pytest.raises(ValueError):
            loads_json(raw)
        return
    assert _same(loads_json(raw), expected)


@pytest.mark.parametrize("text", [
    "18446744073709551616",  # 2**64: orjson reads it as a float
    "-9223372036854775809",  # -(2**63) - 1: likewise
    '{"count":123456789012345678901234567890}',
    "NaN",
    "-Infinity",
    '"\\ud800"',
    "\ufeff{}",
    "[" * 1100 + "]" * 1100,
], ids=["int-2**64", "int-below-int64", "int-in-object-beyond-64-bits", "nan", "minus-infinity",
        "lone-surrogate", "byte-order-mark", "nesting-deeper-than-orjson"])
def test_text_orjson_refuses_or_misreads_is_read_by_json(text):
    raw = text.encode()
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 20_000))  # json reads deep nesting recursively
    try:
        try:
            orjson_value = orjson.loads(raw)
        except orjson.JSONDecodeError:
            pass  # refused
        else:
            assert not _same(orjson_value, json.loads(raw))  # misread: the case is real
        assert _same(loads_json(raw), json.loads(raw))
    finally:
        sys.setrecursionlimit(limit)


@pytest.mark.parametrize("text", ["{", '{"a":1,}', "", "[1 2]"], ids=["unclosed", "trailing-comma", "empty", "no-comma"])
def test_malformed_text_raises_the_error_json_raises(text):
    with pytest.raises(json.JSONDecodeError) as expected:
        json.loads(text.encode())
    with pytest.raises(json.JSONDecodeError) as got:
        loads_json(text.encode())
    assert str(got.value) == str(expected.value)


def test_a_stored_text_hashes_to_the_event_digest_of_what_it_holds():
    events = busy(2.0).events[:300]
    for ev in events:
        text = rows.event_json(ev).encode()
        parsed, digest = stored_event(text)
        assert parsed == ev
        assert digest == event_digest(ev) == ev.digest()


def test_non_ascii_and_big_integers_in_a_payload_survive_the_store_byte_for_byte(store: AuditStore):
    ev = WorldEvent("c", 0, "2026-11-01T00:00:00Z", "upsert", "Node", "", "n1",
                    {"metadata": {"labels": {"site": "Zürich"}}, "big": 2**70, "ratio": 0.1})
    writer = store.writer(background=False)
    writer.write_events([ev])
    assert writer.flush()
    writer.close()
    assert list(store.event_texts("c", -1, 0)) == [(0, rows.event_json(ev).encode())]
    assert list(store.digested_events("c", -1, 0)) == [(ev, event_digest(ev))]
    assert list(store.events("c", -1, 0)) == [ev]


def test_the_store_hands_every_event_with_the_digest_of_its_content(store: AuditStore):
    events = busy(2.0).events[:1200]
    writer = store.writer(background=False)
    writer.write_events(events)
    assert writer.flush()
    writer.close()
    got = list(store.digested_events(events[0].cluster, 99, 1100, page=400))  # three pages
    assert [ev for ev, _ in got] == events[100:1101]
    assert [d for _, d in got] == [event_digest(ev) for ev in events[100:1101]]


_NAMES = st.text(min_size=1, max_size=12)


@st.composite
def _world_events(draw: st.DrawFn) -> WorldEvent:
    return WorldEvent(cluster=draw(_NAMES), seq=draw(st.integers(min_value=0, max_value=2**64 - 1)),
                      time=draw(st.sampled_from(["2026-01-01T00:00:00Z", "2026-03-04T05:06:07.891+02:00"])),
                      type=draw(st.sampled_from(["add", "update", "delete"])),
                      object_kind=draw(st.sampled_from(["Node", "Pod", "ResourceSlice"])),
                      namespace=draw(st.text(max_size=8)), name=draw(_NAMES),
                      payload=draw(st.dictionaries(st.text(max_size=8), JSON_VALUES, max_size=3)),
                      resource_version=draw(st.text(max_size=6)))


@settings(max_examples=200, deadline=None)
@given(st.lists(_world_events(), max_size=5))
def test_the_columns_of_delivered_event_lines_are_those_of_the_events(events):
    """The writer fills the ``events`` columns from the spooled lines alone, without keeping the
    parsed events: the same columns, value for value, as from the events themselves."""
    lines = [rows.event_json(e) for e in events]
    got, want = rows.event_line_columns(lines), rows.event_columns(events, lines)
    assert list(got) == list(want)
    for name in want:
        assert [repr(v) for v in got[name]] == [repr(v) for v in want[name]], name
