"""``equality_key`` tells JSON values apart exactly as their canonical encodings do."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from audit.canonical import canonical_json, equality_key


class _Name(str):
    pass


@pytest.mark.parametrize(("a", "b", "equal"), [
    pytest.param({"a": 1, "b": [2, "x"]}, {"b": [2, "x"], "a": 1}, True, id="key-order-does-not-matter"),
    pytest.param({"a": 1e-05}, {"a": 0.00001}, True, id="one-float-two-spellings"),
    pytest.param({"a": _Name("x")}, {"a": "x"}, True, id="a-str-subclass-is-its-text"),
    pytest.param({"a": 1}, {"a": 1.0}, False, id="int-and-float"),
    pytest.param({"a": True}, {"a": 1}, False, id="bool-and-int"),
    pytest.param({"a": None}, {"a": "null"}, False, id="null-and-its-text"),
    pytest.param({"a": 2**70}, {"a": str(2**70)}, False, id="a-number-beyond-64-bits-and-its-text"),
    pytest.param({"a": None, "b": 1}, {"a": None, "b": 1}, True, id="equal-values-with-null"),
])
def test_equal_keys_exactly_for_equal_values(a: Any, b: Any, equal: bool) -> None:
    assert (equality_key(a) == equality_key(b)) is equal
    assert (canonical_json(a) == canonical_json(b)) is equal


def test_nan_has_no_key_as_it_has_no_canonical_form() -> None:
    with pytest.raises(ValueError):
        equality_key({"a": math.nan})


_json = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-2**70, max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=12)


@given(_json, _json)
def test_keys_compare_as_canonical_encodings_do(a: Any, b: Any) -> None:
    assert (equality_key(a) == equality_key(b)) == (canonical_json(a) == canonical_json(b))
    assert equality_key(a) == equality_key(a)
