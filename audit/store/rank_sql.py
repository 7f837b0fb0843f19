"""``audit.metrics.ranks``' nearest-rank percentile as a ClickHouse expression.

Every percentile the store computes is rendered here, so SQL cannot take another method than the
reference does: ClickHouse's ``quantile*`` family interpolates or (``quantilesExact``) takes the
element at ⌊q·n⌋, neither of which is the ⌈q·n⌉-th smallest.
"""

from __future__ import annotations


def nearest_rank_sql(values: str, n: str, percent: int) -> str:
    """The ``percent``-th nearest-rank percentile of ``values``, an ascending array expression of
    length ``n``: its ⌈percent·n / 100⌉-th element, NULL when ``n`` is 0.

    ``percent`` is an integer so the rank is integer arithmetic (⌈a / 100⌉ = ⌊(a + 99) / 100⌋): a
    float q·n can land just above a whole number (0.95 × 20) and its ceiling one rank too high. The
    NULL is explicit because indexing an empty array gives the element type's default, 0."""
    if not isinstance(percent, int) or not 0 < percent <= 100:
        raise ValueError(f"percent {percent!r}: must be an integer in 1..100")
    return f"if({n} = 0, NULL, {values}[greatest(1, intDiv({percent} * {n} + 99, 100))])"
