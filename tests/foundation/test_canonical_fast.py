"""The canonical encoder's orjson path writes exactly the bytes ``json.dumps`` writes, or defers.

``audit.canonical`` takes orjson's output only when it holds no ``null`` and no float in a form
json writes otherwise; these tests hold the result byte-equal to the json encoder's on generated
values, on floats of every decade, and on each kind of value orjson writes differently or refuses
(and show that each such case is real).
"""

from __future__ import annotations

import enum
import json
import sys

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from audit.canonical import (
    _any_float,
    _catches_every_difference,
    _differing_form,
    _float_check,
    _float_probes,
    canonical_json,
    canonical_text,
    fast_canonical_json,
)


def _reference(value: object) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def _same_as_json(value: object) -> None:
    try:
        expected = _reference(value)
    except (TypeError, ValueError, RecursionError) as exc:
        with pytest.raises(type(exc)):
            canonical_text(value)
        with pytest.raises(type(exc)):
            canonical_json(value)
        return
    assert canonical_text(value) == expected
    try:
        expected_bytes = expected.encode()
    except UnicodeEncodeError:  # a lone surrogate: text, but no UTF-8
        with pytest.raises(UnicodeEncodeError):
            canonical_json(value)
        return
    assert canonical_json(value) == expected_bytes


_INTS = st.integers(min_value=-(2**70), max_value=2**70) | st.integers()
# every code point class: control characters, quotes, backslashes, non-BMP, surrogates
_TEXT = st.text(st.characters(min_codepoint=0, max_codepoint=0x10FFFF, exclude_categories=()), max_size=12)
_KEYS = st.text(st.characters(min_codepoint=0, max_codepoint=0x10FFFF, exclude_categories=("Cs",)), max_size=6)
_SCALARS = st.none() | st.booleans() | _INTS | st.floats() | _TEXT
JSON_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.tuples(inner, inner)
    | st.dictionaries(_KEYS, inner, max_size=5) | st.dictionaries(st.integers(-3, 3), inner, max_size=2),
    max_leaves=25,
)


@settings(max_examples=500, deadline=None)
@given(JSON_VALUES)
def test_any_value_encodes_as_json_dumps_does(value: object) -> None:
    _same_as_json(value)


@settings(max_examples=2000, deadline=None)
@given(st.lists(st.floats(allow_nan=False, allow_infinity=False)
                | st.floats(min_value=-1e-3, max_value=1e-3, allow_subnormal=False), min_size=1, max_size=4))
def test_any_float_encodes_as_json_dumps_does(values: list[float]) -> None:
    _same_as_json(values)
    _same_as_json({"x": values[0], "rest": values})


# each decade's bounds (1 and 9.999999999999999 times its power of ten) and two 16-17 digit values inside it
_DECADE_FLOATS = [float(f"{m}e{e}") for e in range(-323, 309)
                  for m in ("1", "9.999999999999999", "4.940656458412465", "2.2250738585072014")]


def test_floats_of_every_decade_encode_as_json_dumps_does() -> None:
    for x in _DECADE_FLOATS:
        for value in ([x], {"v": -x}, [x, 1]):
            _same_as_json(value)


def test_the_installed_orjson_writes_floats_as_the_narrow_check_expects() -> None:
    # Otherwise every float would take json's path: the same bytes, several times slower.
    assert _float_check is _differing_form


@pytest.mark.parametrize("check, sound", [
    (_differing_form, True),
    (_any_float, True),
    (lambda out: b"0.0000" in out, False),          # misses 1e-06 .. 1e-09, written e-6 .. e-9
    (lambda out: False, False),
], ids=["differing-form", "any-float", "fraction-only", "none"])
def test_the_probe_accepts_only_checks_that_flag_every_float_written_otherwise(check: object, sound: bool) -> None:
    assert _catches_every_difference(check, _float_probes()) is sound  # type: ignore[arg-type]


@pytest.mark.parametrize("value", [{"share": 0.5}, [0.0001, 0.00015, 1e16, -2.5, 1e300], {"ratio": 1.7976931348623157e308}],
                         ids=["fraction", "edges-of-the-regime", "largest"])
def test_floats_orjson_writes_as_json_take_orjson_path(value: object) -> None:
    assert fast_canonical_json(value) == _reference(value).encode()


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(_KEYS, st.integers(0, 9), min_size=2, max_size=8))
def test_keys_sort_by_code_point_as_json_sorts_them(value: dict[str, int]) -> None:
    _same_as_json(value)
    _same_as_json({"outer": value, "list": [value]})


class _Plain(str):
    pass


class _Colour(enum.StrEnum):
    RED = "red"


class _Size(enum.IntEnum):
    BIG = 3


@pytest.mark.parametrize("value", [
    1e-05, 1e16, 1.5e-7, 5e-324, -0.0, {"share": 0.00001}, [1e22, 2.5],   # float formatting differs
    [1e-07, 1], {"tiny": 1e-08}, [[1e-300]],                              # negative exponents, no fraction
    float("nan"), {"a": [float("inf")]}, float("-inf"),                 # orjson writes null
    2**64, -(2**63) - 1, {"n": 2**70},                                    # beyond 64 bits: orjson refuses
    {1: "a", 2: "b"}, {"1": 0, 2: 1},                                     # keys that are not strings
    "\ud800", {"k": "\udfff"},                                            # lone surrogates
    _Plain("x"), {"k": _Plain("v")}, _Colour.RED, {"c": _Colour.RED}, _Size.BIG,  # subclasses
    {"t": (1, "2", None)},
], ids=lambda v: repr(v)[:30])
def test_values_orjson_writes_otherwise_or_refuses_encode_as_json_dumps_does(value: object) -> None:
    _same_as_json(value)


@pytest.mark.parametrize("value", [1e-05, {"share": 0.00001}, float("nan")])
def test_orjson_really_writes_those_floats_otherwise(value: object) -> None:
    try:
        reference = _reference(value).encode()
    except ValueError:
        reference = None
    assert orjson.dumps(value) != reference  # the case the float check exists for is real
    assert fast_canonical_json(value) is None


@pytest.mark.parametrize("value", [
    {"time": "2026-11-02T00:00:00.123Z", "name": "node-001", "version": "570.133.20"},
    {"text": "a:1.5,b", "exp": "x:1e-5]"},   # float-like text: the json path, same bytes
    {"nested": [{"k": [1, 2, {"z": True, "a": False}]}]},
], ids=["times-and-versions", "float-like-text", "nested"])
def test_strings_that_look_like_numbers_keep_the_canonical_bytes(value: object) -> None:
    _same_as_json(value)


def test_orjson_path_is_taken_for_ordinary_objects() -> None:
    value = {"metadata": {"name": "job-1", "creationTimestamp": "2026-11-02T00:00:00.000Z"},
             "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"count": 2}}]}}}
    assert fast_canonical_json(value) == _reference(value).encode()


def test_nesting_deeper_than_orjson_allows_encodes_as_json_does() -> None:
    value: object = 1
    for _ in range(300):
        value = [value]
    assert sys.getrecursionlimit() > 400
    assert fast_canonical_json(value) is None
    _same_as_json(value)
