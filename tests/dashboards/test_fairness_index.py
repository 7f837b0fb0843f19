"""Jain's index over normalised shares, as the Fairness page computes it from per-tenant rows."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dashboards.fairness import jain_index


@pytest.mark.parametrize(
    ("pairs", "expected"),
    [
        pytest.param([(10, 10), (10, 10)], 1.0, id="equal-shares-equal-entitlements"),
        pytest.param([(20, 20), (10, 10)], 1.0, id="shares-proportional-to-entitlement-are-fair"),
        pytest.param([(10, 10), (0, 10)], 0.5, id="one-of-two-starved-gives-1-over-n"),
        pytest.param([(30, 10), (10, 10)], 0.8, id="three-to-one-normalised"),
        pytest.param([(5, 10), (5, 0)], 1.0, id="tenant-without-entitlement-is-left-out"),
        pytest.param([(0, 10), (0, 10)], 1.0, id="nobody-used-anything"),
        pytest.param([(3, 0)], None, id="no-entitlement-at-all"),
        pytest.param([], None, id="no-tenants"),
    ],
)
def test_jain_index_of_normalised_shares(pairs: list[tuple[float, float]], expected: float | None) -> None:
    got = jain_index(pairs)
    if expected is None:
        assert got is None
    else:
        assert got == pytest.approx(expected)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 1e6), st.floats(0.001, 1e6)), min_size=1, max_size=12))
def test_jain_index_stays_between_one_over_n_and_one(pairs: list[tuple[float, float]]) -> None:
    got = jain_index(pairs)
    assert got is not None
    assert 1 / len(pairs) - 1e-9 <= got <= 1 + 1e-9


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.floats(0.01, 1e4), st.floats(0.01, 1e4)), min_size=1, max_size=8), st.floats(0.1, 100))
def test_jain_index_ignores_the_unit_of_shares(pairs: list[tuple[float, float]], scale: float) -> None:
    scaled = [(s * scale, e) for s, e in pairs]
    assert jain_index(scaled) == pytest.approx(jain_index(pairs))
