"""The order pending work is attempted in: fairness first, then age, then name.

With fairness mode ``drf`` a tenant's share is its H100-equivalent usage — half what it holds now,
half its exponentially decayed history (half-life from the policy, as Kueue's admission fair
sharing) — as a fraction of its entitlement: its weighted share of the cluster's H100-equivalent
capacity among the active tenants (``fairshare.entitlements``, the water level of weighted DRF
with one resource). 1.0 is exactly its fair share. Waiting earns aging in the same unit:
``waitAgingPerHour`` entitlements per hour the pod has waited, so at the default 0.5 a pod
waiting 30 minutes overtakes a tenant a quarter of an entitlement below its own — aging acts
within minutes whatever the cluster's size. Aging counts only while the tenant is below its
entitlement: it orders the tenants that are owed capacity (an old pod of a tenant just under its
share is not starved by a fresh one of a tenant far under), and never lets a tenant that already
holds its share overtake one that does not, which would undo fair sharing under a flood. With
mode ``off`` the order is plain FIFO by creation time. Ties: creation time, then pod key.
Everything is read from the world at the current seq (usage comes from allocation events).
"""

from __future__ import annotations

from audit.policy import Policy
from audit.scheduler.fairshare import entitlements
from audit.world import World

HOUR_MS = 3_600_000


def tenant_share(world: World, policy: Policy, tenant: str, now_ms: int) -> float:
    """Blended H100-equivalent usage as a fraction of the tenant's entitlement."""
    usage = world.tenant_usage(tenant)
    decayed = usage.rate(now_ms, policy.usage_half_life_ms)
    entitled = entitlements(world, policy, tenant)[tenant]
    return (0.5 * usage.in_use_eq + 0.5 * decayed) / entitled if entitled > 0 else 0.0


def order_key(world: World, policy: Policy, pod_key: str, now_ms: int,
              share: float | None = None) -> tuple[float, int, str]:
    """``share``: the pod's tenant's ``tenant_share`` when the caller has it already."""
    created = world.pending.get(pod_key, now_ms)
    if policy.fairness_mode == "off":
        return (0.0, created, pod_key)
    if share is None:
        share = tenant_share(world, policy, policy.tenant_for(pod_key.split("/", 1)[0]), now_ms)
    aging = policy.wait_aging_per_hour * max(0, now_ms - created) / HOUR_MS if share < 1.0 else 0.0
    return (share - aging, created, pod_key)
