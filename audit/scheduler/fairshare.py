"""Deferral of tenants above their fair share while a tenant below its share is waiting.

Opt-in (``spec.fairness.deferAboveShare`` with mode ``drf``). A tenant's entitlement is its
weighted share of the cluster's H100-equivalent capacity among the active tenants (holding devices
or with pods pending), the water level of weighted DRF with one resource. A pod of a tenant that
already holds at least its entitlement is deferred (``fair_share_deferred``) while another active
tenant holds less than its own entitlement and has pods pending, so freed capacity goes to the
tenant below its share instead of to whoever asks first. Read from the world only (current
allocations and pending pods); the queue order (``queue.py``) does the rest of fairness.
"""

from __future__ import annotations

from audit.policy import Policy
from audit.records import Blocker, TierBlocker
from audit.world import World


def entitlements(world: World, policy: Policy, include: str) -> dict[str, float]:
    """H100-equivalent entitlement per active tenant (``include`` is always active).

    Kept per cluster capacity (``World.capacity_version``), policy and set of active tenants: the
    queue order asks it for every tenant with pending pods on every pick, and the answer reads
    nothing else, so it holds across the allocations and releases in between. Callers only read
    the answer."""
    active = {t for t, u in world.usage.items() if u.in_use_eq > 0}
    active |= {t for t, n in world.pending_by_tenant.items() if n > 0}
    active.add(include)
    answers: dict[frozenset[str], dict[str, float]] = world.derived_at("entitlements",
                                                                     (world.capacity_version, policy.digest))
    key = frozenset(active)
    found = answers.get(key)
    if found is None:
        found = answers[key] = _weighted_shares(world, policy, active)
    return found


def _weighted_shares(world: World, policy: Policy, active: set[str]) -> dict[str, float]:
    capacity = sum(n * policy.h100_equivalent(m) for m, n in world.model_totals.items() if n > 0)
    capacity += sum(c * policy.h100_equivalent(world.dp_model.get(node, "unknown"))
                    for node, c in world.dp_capacity.items())
    total_weight = sum(policy.weight(t) for t in active)
    return {t: capacity * policy.weight(t) / total_weight for t in sorted(active)}


def fair_share_blocker(world: World, policy: Policy, tenant: str) -> TierBlocker | None:
    if policy.fairness_mode != "drf" or not policy.defer_above_share:
        return None
    ent = entitlements(world, policy, tenant)
    mine = world.tenant_usage(tenant).in_use_eq
    if mine < ent[tenant]:
        return None
    for other, entitled in ent.items():
        if other == tenant or world.pending_by_tenant.get(other, 0) <= 0:
            continue
        held = world.tenant_usage(other).in_use_eq
        if held < entitled:
            return TierBlocker(Blocker.FAIR_SHARE_DEFERRED.value, 0, {
                "tenant": tenant, "held_eq": round(mine, 3), "entitlement_eq": round(ent[tenant], 3),
                "waiting_tenant": other, "waiting_held_eq": round(held, 3), "waiting_entitlement_eq": round(entitled, 3),
            })
    return None
