"""Reservations: devices set aside for a pod that has waited too long, so large pods are not starved.

With best-effort queueing a pod that needs many devices on one node can wait for ever while
smaller pods take every device that frees up. A policy with ``spec.queueing.reserveAfter`` lets
a pod that has been pending at least that long reserve a node — the idea of Volcano's ``sla``
plugin, which locks resources for a job past its waiting time (volcano docs/design/sla-plugin.md).
The rules, each deterministic and read from the world alone:

* **Who.** A decision that finds no node for a pod pending at least ``reserveAfter`` makes a
  reservation for it, if it holds none, its tenant holds fewer than ``maxReservationsPerTenant``
  (default 1), is below its entitlement (with fairness on: share < 1 in the queue order's
  unit, ``audit.scheduler.queue`` — a tenant holding its fair share or more is not starved, and
  its holds would keep devices from tenants that are; aging counts on the same side of 1), and
  some node qualifies. At most one reservation per node, so at most
  min(nodes, tenants × maxReservationsPerTenant) in a cluster. Only pods whose devices come from
  ResourceClaims (not the device plugin) are reserved for.
* **For what and where.** One tier of the pod's first request — its models and device count —
  on one node. Candidates are the tiers the policy leaves open for that request (only the
  preferred one while a fallback mode holds out for it; tiers that take all devices never) on
  nodes that pass the pod's node filters (taints, affinity, selectors), carry at least ``count``
  healthy devices of the tier's models and hold no reservation. The choice is the fewest devices
  missing (``count`` − free healthy devices of those models), then the lower tier index (the more
  preferred model), then the node name. The world has no running times of jobs, so "fits
  soonest" is judged by what is missing now.
* **What is held.** On the reserved node, the free healthy devices of the reserved models, in
  slice order, up to ``count``: every other pod sees them as in use (the simple rule: others may
  never use held devices, whether or not they would finish in time). Devices beyond ``count``
  stay free for everyone; the reserved pod itself may use every device, and may still be placed
  on any other node or tier that fits first.
* **Until when.** A reservation holds while its pod is pending and the active policy has
  ``reserveAfter``; it is released (its object deleted) when the pod binds, fails or is deleted.

A reservation is a ``Reservation`` world object (namespace and name of its pod), written by the
cluster loop from the decision that made it, so a replayed decision sees exactly the holds its
original saw. Evidence: ``reservation_made`` on the decision that made one;
``reservation_waiting`` while the pod waits on it; ``reservation_released`` on the decision that
placed it (``cause: bound``) or whose bind failed for good (``cause: failed``) — a pod deleted
while waiting has no decision, its Reservation's deletion is in the event log;
``reservation_held`` on a decision of another pod for each node it visited and did not get where
devices were held; ``reservation_unavailable`` when an eligible pod got none, with the cause.
Pure: no I/O, no clock.
"""

from __future__ import annotations

from typing import Any

from audit.policy import Policy
from audit.records import Blocker, DecisionRecord, TierBlocker
from audit.scheduler.filters import node_filter
from audit.scheduler.queue import tenant_share
from audit.scheduler.tiers import Tier
from audit.timestamps import format_time_ms
from audit.world import Hold, World

API_VERSION = "claimtrail.io/v1alpha1"
KIND = "Reservation"


def honoured(world: World, policy: Policy, hold: Hold) -> bool:
    """A hold counts while its pod is pending under a policy that reserves."""
    return policy.reserve_after_ms is not None and hold.pod in world.pending


def hold_on(world: World, policy: Policy, node: str) -> Hold | None:
    hold = world.reservations.get(node)
    return hold if hold is not None and honoured(world, policy, hold) else None


def own_hold(world: World, policy: Policy, pod_key: str) -> Hold | None:
    node = world.reserved_node.get(pod_key)
    hold = None if node is None else hold_on(world, policy, node)
    return hold if hold is not None and hold.pod == pod_key else None


def held_devices(world: World, policy: Policy, node: str, pod_key: str) -> tuple[str, ...]:
    """Devices on ``node`` that ``pod_key`` may not use because another pod reserved them."""
    if not world.reservations:
        return ()
    hold = hold_on(world, policy, node)
    if hold is None or hold.pod == pod_key:
        return ()
    return _held(world, hold)


def _held(world: World, hold: Hold) -> tuple[str, ...]:
    out: list[str] = []
    devices, allocated_by = world.devices, world.allocated_by
    for dev_id in world.node_devices.get(hold.node, ()):
        dev = devices[dev_id]
        if dev.model in hold.models and not dev.unhealthy and dev_id not in allocated_by:
            out.append(dev_id)
            if len(out) == hold.count:
                break
    return tuple(out)


def may_fit(world: World, policy: Policy, pod_key: str, node: str, models: tuple[str, ...], count: int) -> bool:
    """Whether ``count`` devices of ``models`` on ``node`` are free for ``pod_key`` once holds are
    taken out (a necessary condition only, like the free-device indexes it refines)."""
    held = held_devices(world, policy, node, pod_key)
    if not held:
        return True
    devices = world.devices
    free = sum(world.free_healthy(node, m) for m in models)
    return free - sum(1 for d in held if devices[d].model in models) >= count


def tenant_holds(world: World, policy: Policy, tenant: str) -> int:
    return sum(1 for h in world.reservations.values()
               if honoured(world, policy, h) and policy.tenant_for(h.pod.split("/", 1)[0]) == tenant)


def eligible(policy: Policy, wait_ms: int) -> bool:
    return policy.reserve_after_ms is not None and wait_ms >= policy.reserve_after_ms


def tenant_cause(world: World, policy: Policy, tenant: str, time_ms: int) -> str:
    """Why the tenant may not make another reservation now ("" when it may)."""
    if tenant_holds(world, policy, tenant) >= policy.max_reservations_per_tenant:
        return "tenant_limit"
    if policy.fairness_mode != "off" and tenant_share(world, policy, tenant, time_ms) >= 1.0:
        return "at_fair_share"
    return ""


def plan(world: World, policy: Policy, pod_key: str, pod: dict[str, Any], tenant: str, tiers: tuple[Tier, ...],
         time_ms: int) -> tuple[TierBlocker, dict[str, Any] | None]:
    """For an eligible pod without a hold that found no node: the evidence, and the Reservation
    object to write when one is made (see the module docstring for the rule). ``tiers``: those
    the policy leaves open for the pod's first request, in preference order."""
    limit = policy.max_reservations_per_tenant
    holds = tenant_holds(world, policy, tenant)
    countable = [t for t in tiers if not t.all_devices and t.models]
    if not countable:
        return _unavailable(tiers[0].index, "not_countable", holds, limit), None
    cause = tenant_cause(world, policy, tenant, time_ms)
    if cause:
        return _unavailable(countable[0].index, cause, holds, limit), None
    best: tuple[int, int, str] | None = None
    chosen: dict[int, Tier] = {t.index: t for t in countable}
    filtered: dict[str, bool] = {}
    for tier in countable:
        nodes: set[str] = set()
        for m in tier.models:
            nodes.update(world.nodes_with_model(m))
        for node in sorted(nodes):
            if node not in world.nodes or hold_on(world, policy, node) is not None:
                continue
            healthy = free = 0
            for dev_id in world.node_devices.get(node, ()):
                dev = world.devices[dev_id]
                if dev.model in tier.models and not dev.unhealthy:
                    healthy += 1
                    free += dev_id not in world.allocated_by
            if healthy < tier.count:
                continue
            key = (max(0, tier.count - free), tier.index, node)
            if best is not None and key >= best:
                continue
            if node not in filtered:
                filtered[node] = node_filter(world, node, pod) is not None
            if not filtered[node]:
                best = key
    if best is None:
        return _unavailable(countable[0].index, "no_node", holds, limit), None
    missing, index, node = best
    tier = chosen[index]
    ns, _, name = pod_key.partition("/")
    obj = {"apiVersion": API_VERSION, "kind": KIND, "metadata": {"namespace": ns, "name": name},
           "spec": {"pod": pod_key, "node": node, "models": list(tier.models), "count": tier.count,
                    "tier": tier.index, "since": format_time_ms(time_ms)}}
    return TierBlocker(Blocker.RESERVATION_MADE.value, tier.index, {
        "node": node, "model": tier.label, "count": tier.count, "missing": missing}), obj


# causes that lift by themselves as the tenant's pods end or its share decays: the pod is asked again
TENANT_CAUSES = frozenset({"tenant_limit", "at_fair_share"})


def settled(record: DecisionRecord, policy: Policy) -> bool:
    """Whether the decision (made under ``policy``) answered the pod's reservation for now: it was
    made once the pod was eligible, so it made or kept one, found none to be had, or did not need
    one (the pod was placed, or held back by something a reservation does not help, its quota
    say) — unless it found that its tenant may not reserve yet (``TENANT_CAUSES``), which lifts
    as the tenant's pods end or its share decays."""
    if not eligible(policy, record.wait_ms):
        return False
    return not any(b.code == Blocker.RESERVATION_UNAVAILABLE.value and b.detail.get("cause") in TENANT_CAUSES
                   for b in record.blockers)


def _unavailable(tier: int, cause: str, holds: int, limit: int) -> TierBlocker:
    return TierBlocker(Blocker.RESERVATION_UNAVAILABLE.value, tier,
                       {"cause": cause, "reservations": holds, "limit": limit})


def waiting(world: World, hold: Hold, time_ms: int) -> TierBlocker:
    """Evidence on a decision of the reserved pod that is still not placed."""
    free = sum(1 for d in _held(world, hold))
    return TierBlocker(Blocker.RESERVATION_WAITING.value, hold.tier, {
        "node": hold.node, "model": "|".join(hold.models), "count": hold.count, "held": free,
        "missing": max(0, hold.count - free), "reserved_ms": max(0, time_ms - hold.since_ms)})


def released(hold: Hold, node: str, time_ms: int) -> TierBlocker:
    """Evidence on the decision that placed the reserved pod (its hold ends with the bind)."""
    return TierBlocker(Blocker.RESERVATION_RELEASED.value, hold.tier, {
        "node": hold.node, "on_reserved_node": node == hold.node, "reserved_ms": max(0, time_ms - hold.since_ms),
        "cause": "bound"})


def kept_off(world: World, policy: Policy, pod_key: str, nodes: list[str], placed_on: str) -> list[TierBlocker]:
    """``reservation_held`` for each visited node (in visit order) other than ``placed_on`` where
    devices were held for another pod."""
    out: list[TierBlocker] = []
    if not world.reservations:
        return out
    for node in nodes:
        if node == placed_on:
            continue
        held = held_devices(world, policy, node, pod_key)
        if held:
            hold = world.reservations[node]
            out.append(TierBlocker(Blocker.RESERVATION_HELD.value, -1, {
                "node": node, "pod": hold.pod, "model": "|".join(hold.models), "held": len(held)}))
    return out


def message(blockers: list[TierBlocker]) -> str:
    """A clause for the record's message about the reservation evidence, or ""."""
    parts: list[str] = []
    for b in blockers:
        d = b.detail
        if b.code == Blocker.RESERVATION_MADE.value:
            parts.append(f"reserved {d['node']} for {d['count']} {d['model']} ({d['missing']} still in use)")
        elif b.code == Blocker.RESERVATION_WAITING.value:
            parts.append(f"holding {d['held']} of {d['count']} {d['model']} on {d['node']}")
        elif b.code == Blocker.RESERVATION_UNAVAILABLE.value:
            parts.append(f"no reservation ({d['cause']})")
        elif b.code == Blocker.RESERVATION_RELEASED.value:
            parts.append(f"reservation on {d['node']} released")
    held = [b for b in blockers if b.code == Blocker.RESERVATION_HELD.value]
    if held:
        parts.append(f"{sum(int(b.detail['held']) for b in held)} device(s) on "
                     f"{', '.join(str(b.detail['node']) for b in held)} reserved for "
                     f"{', '.join(str(b.detail['pod']) for b in held)}")
    return "; ".join(parts)
