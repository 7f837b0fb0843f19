"""The order pending work is attempted in: fairness first, then age, then name.

With fairness mode ``drf`` a tenant's share is its H100-equivalent usage — half what it holds now,
half its exponentially decayed history (half-life from the policy, as Kueue's admission fair
sharing) — divided by its weight (one resource dimension, so the weighted dominant share is this
share). Waiting earns aging: ``waitAgingPerHour`` is subtracted per hour the pod has waited, so a
low-share tenant cannot be overtaken forever and an old pod of a busy tenant is not starved.
With mode ``off`` the order is plain FIFO by creation time. Ties: creation time, then pod key.
Everything is read from the world at the current seq (usage comes from allocation events).
"""

from __future__ import annotations

from audit.policy import Policy
from audit.world import World

HOUR_MS = 3_600_000


def tenant_share(world: World, policy: Policy, tenant: str, now_ms: int) -> float:
    usage = world.tenant_usage(tenant)
    decayed = usage.rate(now_ms, policy.usage_half_life_ms)
    return (0.5 * usage.in_use_eq + 0.5 * decayed) / policy.weight(tenant)


def order_key(world: World, policy: Policy, pod_key: str, now_ms: int) -> tuple[float, int, str]:
    created = world.pending.get(pod_key, now_ms)
    if policy.fairness_mode == "off":
        return (0.0, created, pod_key)
    namespace = pod_key.split("/", 1)[0]
    share = tenant_share(world, policy, policy.tenant_for(namespace), now_ms)
    aging = policy.wait_aging_per_hour * max(0, now_ms - created) / HOUR_MS
    return (share - aging, created, pod_key)


def fairness_order(world: World, policy: Policy, pod_keys: list[str], now_ms: int) -> list[str]:
    return sorted(pod_keys, key=lambda k: order_key(world, policy, k, now_ms))
