"""The store's percentile expression is nearest rank, evaluated by ClickHouse itself."""

from __future__ import annotations

import pytest

from audit.store.queries import AuditStore
from audit.store.rank_sql import nearest_rank_sql

PERCENTS = (1, 50, 95, 99, 100)


def ceil_rank(sorted_values: list[int], percent: int) -> int:
    """The ⌈percent·n / 100⌉-th smallest (at least the first), worked out here on integers."""
    rank = max(1, -(-percent * len(sorted_values) // 100))
    return sorted_values[rank - 1]


@pytest.mark.parametrize(("values", "expected"), [
    # n = 4: p50 is the 2nd (a 0-based ⌊q·n⌋ index would take the 3rd); p95 the 4th
    pytest.param([40, 10, 30, 20], {1: 10, 50: 20, 95: 40, 99: 40, 100: 40}, id="four"),
    # n = 20: 0.95 × 20 is 19.000000000000004 in floating point; the rank is 19, not 20
    pytest.param(list(range(1, 21)), {1: 1, 50: 10, 95: 19, 99: 20, 100: 20}, id="twenty"),
    pytest.param([7], {p: 7 for p in PERCENTS}, id="one"),
    pytest.param([], {p: None for p in PERCENTS}, id="none-is-null-not-zero"),
])
def test_nearest_rank_sql_takes_the_ceil_rank_smallest(store: AuditStore, values: list[int],
                                                        expected: dict[int, int | None]) -> None:
    cells = ", ".join(nearest_rank_sql("w", "length(w)", p) for p in PERCENTS)
    array = f"arraySort(CAST([{', '.join(map(str, values))}] AS Array(UInt64)))"
    (row,) = store.client.query(f"SELECT {cells} FROM (SELECT {array} AS w)").result_rows
    assert dict(zip(PERCENTS, row, strict=True)) == expected
    if values:
        assert expected == {p: ceil_rank(sorted(values), p) for p in PERCENTS}


@pytest.mark.parametrize("percent", [0, 101, 0.95], ids=["zero", "over-100", "a-fraction"])
def test_nearest_rank_sql_refuses_a_percent_that_is_not_a_rank_over_100(percent: int) -> None:
    with pytest.raises(ValueError, match="percent"):
        nearest_rank_sql("w", "n", percent)
