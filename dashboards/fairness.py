"""Fairness figures derived from a handful of per-tenant numbers the API already aggregated.

Jain's index J(x) = (Σx_i)² / (n·Σx_i²) ∈ [1/n, 1] (Jain, Chiu, Hawe, DEC-TR-301, 1984), taken
over normalised shares x_i = share_i / entitlement_i (weighted fairness), so a tenant
entitled to twice as much that uses twice as much counts as fair.
"""

from __future__ import annotations

from collections.abc import Sequence


def jain_index(shares_and_entitlements: Sequence[tuple[float, float]]) -> float | None:
    """Jain's index over tenants with a positive entitlement; None when there is none to judge."""
    xs = [share / entitlement for share, entitlement in shares_and_entitlements if entitlement > 0]
    if not xs:
        return None
    squares = sum(x * x for x in xs)
    if squares == 0:
        # Nobody used anything: every tenant got the same (zero) normalised share.
        return 1.0
    return sum(xs) ** 2 / (len(xs) * squares)
