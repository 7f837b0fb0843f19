"""The policy's checks on what one node would give a pod, after the allocator found it there.

The allocator places a pod's claims on a node; the policy then judges the placement as a whole:
the tenant's quota, model by model (``audit.scheduler.quota.placement_quota``), and, when the
policy forbids mixed models, that the devices are of one model (the per-claim constraint
``audit.scheduler.augment`` adds cannot see across a pod's claims, and is not added when the
model table names no attribute). The decision engine passes over a node this refuses, and
``why``'s "if scheduled now" does the same through this one rule.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from audit.policy import Policy
from audit.scheduler.quota import QuotaAsk, placement_quota


def placement_refusal(policy: Policy, counts: Mapping[str, int], ask: QuotaAsk) -> tuple[str, dict[str, Any]] | None:
    """(reason code, detail) of the first check the placement fails (``counts``: its devices per
    model; ``ask``: the tenant's quota), or None when the policy takes it."""
    q = placement_quota(counts, ask)
    if q is not None:
        return "quota_exhausted", q.detail()
    if not policy.mixed_models and len(counts) > 1:
        return "mixed_models", {"models": ",".join(sorted(counts))}
    return None
