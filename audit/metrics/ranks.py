"""The one percentile method of ClaimTrail: nearest rank.

The q-th percentile of n values is the ⌈q·n⌉-th smallest (q in 0..1; the smallest value for
q·n ≤ 1). It is always one of the observed values, so a p95 wait is a wait some pod really had;
interpolating methods (ClickHouse's ``quantile*`` family, numpy's default) are not used.
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def nearest_rank(sorted_values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile of an ascending sequence, ``q`` in 0..1; 0.0 when empty."""
    if len(sorted_values) == 0:
        return 0.0
    # rounded first: 0.95 × 20 is 19.000000000000004 in floating point, whose ceiling would be 20
    rank = max(1, math.ceil(round(q * len(sorted_values), 9)))
    return float(sorted_values[min(rank, len(sorted_values)) - 1])
