"""Reclaim: a tenant within what it is owed takes devices back from tenants holding beyond theirs.

Under ``spec.preemption: {enabled: true, minRuntime: 10m}`` a decision that finds no node for a
pod may preempt running pods instead. What a tenant is owed is its nominal quota by default
(``basis: quota``), modelled on Kueue's ``reclaimWithinCohort`` (Kueue docs, "Cluster Queue",
preemption): quota a tenant lends while it does not use it comes back when it needs it. With
``basis: fairShare`` it is its DRF entitlement instead (below). The contract, deterministic and
read from the world at the decision's seq alone, for the quota basis:

* **Who may preempt.** A pending pod of tenant T whose devices come from ResourceClaims making one
  request, for which no node has an allowed tier that fits now. Only tiers the policy leaves open
  (quota, fallback hold) are considered, and of those only tiers every model of which T has a
  nominal quota for with T's usage of the model plus the tier's count within that *nominal*
  (borrowing never preempts). A fallback tier that fits comes first, as with Kueue's default
  ``flavorFungibility.whenCanPreempt: TryNextFlavor``.
* **Who may be preempted.** Running pods whose devices all come from ResourceClaims, of another
  tenant V that has a nominal quota for a model of the tier, uses more than that nominal
  (borrows) and holds devices of it in the pod; running (since its claims were allocated) for at
  least ``minRuntime``.
* **Where.** All victims run on ONE node that passes the pod's node filters and holds no
  reservation for another pod (``audit.scheduler.reservations``: freed devices there would go to
  the reservation); on that node the exact allocator must place the pod with the victims'
  devices free, on a qualifying tier.
* **Never below nominal.** Evicting the victims leaves every victim tenant at or above its
  nominal quota of every model it has a quota for.
* **Least damage.** Among all sets meeting the above on any node: the fewest victims, then the
  least device-time lost (Σ devices × runtime so far), then the youngest (runtimes compared in
  ascending order), then the victims' ``namespace/name`` in order. Only sets of the smallest size
  that works are searched.

**The fair-share basis** (``spec.preemption.basis: fairShare``, with ``spec.fairness.mode: drf``)
puts a tenant's entitlement where the quota basis has its nominal quota: its weighted share of the
cluster's H100-equivalent capacity among the active tenants (``audit.scheduler.fairshare``), and
what it holds is its H100-equivalents in use (the charges of its allocations). A tier qualifies
when the tenant's holding plus the tier's count times the largest H100-equivalent of its models
stays within its entitlement; a victim's tenant holds more than its entitlement and the pod holds
a device of a model of the tier; and evicting the victims leaves every victim tenant holding at
least its entitlement. Everything else is as above. This is Kueue's fair sharing preemption
(Kueue docs, "Fair Sharing") with its ``LessThanOrEqualToFinalShare`` rule made strict on both
sides: the preemptor ends at or below its share, every victim tenant at or above its own, so no
victim tenant can preempt back while the entitlements stay as they are (they move only when
capacity or the set of active tenants changes). Quotas still gate every tier as always; reclaim
on this basis needs no nominal quota.

The decision is a record of its own, outcome ``preempted`` (``audit.records.Outcome``): a
``reclaim`` blocker for the preemptor's quota (on the fair-share basis, ``basis: fair_share`` with
its holding, the tier's ask and its entitlement in H100-equivalents) and one ``reclaim_victim``
blocker per victim (its pod, tenant, node, devices, runtime and the victim tenant's usage against
nominal, or its holding against its entitlement). The cluster
loop then evicts the victims through the events a cluster writes (the pod gets a
``DisruptionTarget`` condition with reason ``PreemptionByScheduler`` and phase ``Failed``, then
it and its claims are deleted, deallocating their devices) and tries the preemptor again at
once. A pod that waits is considered again whenever the queues wake (a release, an arrival of
capacity, a policy change); a victim merely growing older than ``minRuntime`` wakes nothing.
Pure: no I/O, no clock.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

from audit.allocator.outcome import Status
from audit.policy import Policy
from audit.records import Blocker, TierBlocker
from audit.scheduler import reservations
from audit.scheduler.augment import augment_claim
from audit.scheduler.claimspec import claim_requests, result_device_id
from audit.scheduler.fairshare import entitlements
from audit.scheduler.filters import node_filter
from audit.scheduler.nodealloc import allocate_on_node
from audit.scheduler.tiers import RequestTiers, Tier
from audit.world import World

# Pod condition a preempted pod gets, as kube-scheduler writes it (k8s.io/api core/v1
# ``DisruptionTarget`` and ``PodReasonPreemptionByScheduler``).
DISRUPTION_CONDITION = "DisruptionTarget"
DISRUPTION_REASON = "PreemptionByScheduler"
# the most running pods on one node considered as victims: subsets are enumerated by size
MAX_CANDIDATES_PER_NODE = 16
FAIR_SHARE = "fairShare"  # spec.preemption.basis


@dataclass(frozen=True)
class Candidate:
    """A running pod that may be preempted: its devices (all on ``node``) per model, and runtime."""

    pod: str
    tenant: str
    node: str
    devices: tuple[str, ...]
    models: tuple[tuple[str, int], ...]
    runtime_ms: int
    eq: float = 0.0  # the H100-equivalents its allocations charged its tenant

    @property
    def device_ms(self) -> int:
        return len(self.devices) * self.runtime_ms


@dataclass(frozen=True)
class Plan:
    """The victims chosen on ``node`` and the tier the pod fits on once they are gone."""

    node: str
    victims: tuple[Candidate, ...]
    tier: Tier

    @property
    def damage(self) -> tuple[int, int, tuple[int, ...], tuple[str, ...]]:
        return damage(self.victims)


def damage(victims: tuple[Candidate, ...]) -> tuple[int, int, tuple[int, ...], tuple[str, ...]]:
    """The least-damage order: fewest victims, least device-time, youngest, then names."""
    return (len(victims), sum(v.device_ms for v in victims), tuple(sorted(v.runtime_ms for v in victims)),
            tuple(sorted(v.pod for v in victims)))


def fair_share(policy: Policy) -> bool:
    return policy.preemption_basis == FAIR_SHARE


def tier_eq(policy: Policy, tier: Tier) -> float:
    """What a tier may charge: its count at the largest H100-equivalent among its models."""
    return tier.count * max(policy.h100_equivalent(m) for m in tier.models)


def held_eq(world: World, tenant: str) -> float:
    return world.tenant_usage(tenant).in_use_eq


def qualifying(world: World, policy: Policy, tenant: str, tiers: tuple[Tier, ...]) -> list[Tier]:
    """Open tiers within the tenant's nominal quota for every model they may take (on the
    fair-share basis: within its entitlement whatever model of the tier it gets)."""
    if fair_share(policy):
        held, entitled = held_eq(world, tenant), entitlements(world, policy, tenant)[tenant]
        return [t for t in tiers if t.models and not t.all_devices and held + tier_eq(policy, t) <= entitled]
    out = []
    for t in tiers:
        if not t.models or t.all_devices:
            continue
        quotas = [policy.quota(tenant, m) for m in t.models]
        if all(q is not None and world.model_in_use(tenant, m) + t.count <= q.nominal
               for m, q in zip(t.models, quotas, strict=True)):
            out.append(t)
    return out


def borrowed(world: World, policy: Policy, tenant: str, model: str) -> bool:
    """Whether a tenant other than ``tenant`` uses more than its nominal quota of ``model`` (on the
    fair-share basis: holds some of ``model`` and more than its entitlement)."""
    if fair_share(policy):
        entitled = entitlements(world, policy, tenant)
        return any(other != tenant and world.model_in_use(other, model) > 0 and held_eq(world, other) > e
                   for other, e in entitled.items())
    for other in policy.tenants:
        q = other.quotas.get(model)
        if other.name != tenant and q is not None and world.model_in_use(other.name, model) > q.nominal:
            return True
    return False


def running_pods(world: World, policy: Policy, node: str, time_ms: int) -> list[Candidate]:
    """Running DRA pods on ``node`` with their devices and runtime, by pod key."""
    by_pod: dict[str, list[str]] = {}
    for dev_id in world.node_devices.get(node, []):
        ckey = world.allocated_by.get(dev_id)
        if ckey is not None:
            by_pod.setdefault(ckey, []).append(dev_id)
    pods: dict[str, set[str]] = {}
    for ckey in by_pod:
        ns, _, name = ckey.partition("/")
        claim = world.get("ResourceClaim", ns, name) or {}
        for ref in (claim.get("status") or {}).get("reservedFor") or []:
            if ref.get("resource") == "pods" and ref.get("name"):
                pods.setdefault(f"{ns}/{ref['name']}", set()).add(ckey)
    out = []
    for pod_key, claims in sorted(pods.items()):
        ns, _, name = pod_key.partition("/")
        pod = world.get("Pod", ns, name)
        if pod is None or (pod.get("spec") or {}).get("nodeName") != node:
            continue
        own = [str(s.get("resourceClaimName", "")) for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []]
        keys = {f"{ns}/{c}" for c in own if c}
        if not keys or not claims <= keys or any(k not in world.claim_devices for k in keys):
            continue  # claims not all allocated here: not a pod this loop placed whole
        devices = tuple(d for k in sorted(keys) for d in world.claim_devices[k])
        if any(world.devices.get(d) is None or world.devices[d].node != node for d in devices):
            continue
        models: dict[str, int] = {}
        for d in devices:
            models[world.devices[d].model] = models.get(world.devices[d].model, 0) + 1
        start = min(world.alloc_start.get(k, time_ms) for k in keys)
        charge = world.charges.get(sorted(keys)[0])
        tenant = charge.tenant if charge is not None else policy.tenant_for(ns)
        eq = 0.0
        for k in sorted(keys):
            c = world.charges.get(k)
            eq += c.eq if c is not None else 0.0
        out.append(Candidate(pod_key, tenant, node, devices, tuple(sorted(models.items())), max(0, time_ms - start),
                             eq))
    return out


def victims_allowed(world: World, policy: Policy, preemptor: str, models: frozenset[str],
                    c: Candidate) -> bool:
    """May ``c`` be preempted for a tier of ``models`` at all (before the set-wide checks)?"""
    if c.tenant == preemptor or c.runtime_ms < policy.preemption_min_runtime_ms:
        return False
    if fair_share(policy):
        # (implied by keeps_entitlement for a victim that holds anything; checked here to leave
        # such tenants out before any set is formed)
        entitled = entitlements(world, policy, preemptor).get(c.tenant)
        return (entitled is not None and held_eq(world, c.tenant) > entitled
                and any(m in models for m, _ in c.models))
    for m, _ in c.models:
        q = policy.quota(c.tenant, m)
        if m in models and q is not None and world.model_in_use(c.tenant, m) > q.nominal:
            return True
    return False


def keeps_nominal(world: World, policy: Policy, victims: tuple[Candidate, ...]) -> bool:
    """Evicting ``victims`` leaves each victim tenant at or above nominal for every model it has quota for."""
    taken: dict[tuple[str, str], int] = {}
    for v in victims:
        for m, n in v.models:
            taken[(v.tenant, m)] = taken.get((v.tenant, m), 0) + n
    for (tenant, m), n in taken.items():
        q = policy.quota(tenant, m)
        if q is not None and world.model_in_use(tenant, m) - n < q.nominal:
            return False
    return True


def keeps_entitlement(world: World, policy: Policy, preemptor: str, victims: tuple[Candidate, ...]) -> bool:
    """Evicting ``victims`` leaves each victim tenant holding at least its entitlement."""
    lost: dict[str, float] = {}
    for v in victims:
        lost[v.tenant] = lost.get(v.tenant, 0.0) + v.eq
    entitled = entitlements(world, policy, preemptor)
    return all(t in entitled and held_eq(world, t) - x >= entitled[t] for t, x in lost.items())


def keeps_owed(world: World, policy: Policy, preemptor: str, victims: tuple[Candidate, ...]) -> bool:
    """``keeps_entitlement`` on the fair-share basis, else ``keeps_nominal``."""
    if fair_share(policy):
        return keeps_entitlement(world, policy, preemptor, victims)
    return keeps_nominal(world, policy, victims)


def plan(world: World, policy: Policy, pod_key: str, pod: dict[str, Any], tenant: str,
         claims: list[dict[str, Any]], rts: list[RequestTiers],
         allowed: dict[tuple[str, str], tuple[Tier, ...]], time_ms: int) -> Plan | None:
    """The least-damage reclaim for a pod no node can take now, or None (see the module docstring)."""
    if not policy.preemption or len(rts) != 1 or len(claims) != 1:
        return None
    rt = rts[0]
    tiers = qualifying(world, policy, tenant, allowed[(rt.claim, rt.request)])
    if not tiers:
        return None
    models = frozenset(m for t in tiers for m in t.models)
    options: list[tuple[tuple[int, int, tuple[int, ...], tuple[str, ...]], str, tuple[Candidate, ...]]] = []
    nodes = sorted({n for m in models for n in world.nodes_with_model(m) if n in world.nodes})
    per_node: dict[str, list[Candidate]] = {}
    for node in nodes:
        hold = reservations.hold_on(world, policy, node)
        if (hold is not None and hold.pod != pod_key) or node_filter(world, node, pod) is not None:
            continue
        cands = [c for c in running_pods(world, policy, node, time_ms)
                 if victims_allowed(world, policy, tenant, models, c)]
        if cands:
            per_node[node] = sorted(cands, key=lambda c: damage((c,)))[:MAX_CANDIDATES_PER_NODE]
    for size in range(1, 1 + max((len(c) for c in per_node.values()), default=0)):
        options.clear()
        for node, cands in per_node.items():
            for combo in itertools.combinations(cands, size):
                if _enough(world, node, tiers, combo) and keeps_owed(world, policy, tenant, combo):
                    options.append((damage(combo), node, combo))
        for _, node, combo in sorted(options):
            tier = _fits(world, policy, claims[0], rt, tiers, node, combo, pod_key)
            if tier is not None:
                return Plan(node, combo, tier)
    return None


def _enough(world: World, node: str, tiers: list[Tier], victims: tuple[Candidate, ...]) -> bool:
    """A count bound: some tier's models have ``count`` free or freed healthy devices on the node."""
    freed: dict[str, int] = {}
    for v in victims:
        for d in v.devices:
            dev = world.devices[d]
            if not dev.unhealthy:
                freed[dev.model] = freed.get(dev.model, 0) + 1
    return any(sum(world.free_healthy(node, m) + freed.get(m, 0) for m in t.models) >= t.count for t in tiers)


def _fits(world: World, policy: Policy, claim: dict[str, Any], rt: RequestTiers, tiers: list[Tier], node: str,
          victims: tuple[Candidate, ...], pod_key: str) -> Tier | None:
    """The tier the exact allocator places the pod on at ``node`` with the victims' devices free."""
    freed = frozenset(d for v in victims for d in v.devices)
    per_req = {rt.request: tuple(t.index for t in tiers)} if rt.first_available else {}
    aug = augment_claim(claim, per_req, policy)
    if aug is None:
        return None
    held = reservations.held_devices(world, policy, node, pod_key) if world.reservations else ()
    outcome = allocate_on_node(world, node, [aug], policy, explain=False, held=held, freed=freed)
    if outcome.status != Status.SUCCESS:
        return None
    by_index = {t.index: t for t in tiers}
    chosen = tiers[0]
    used: set[str] = set()
    for alloc in outcome.allocations:
        for r in alloc.results:
            req, _, sub = str(r.get("request", "")).partition("/")
            if sub and rt.first_available:
                index = next((i for i, (name, _) in enumerate(_subrequests(claim, req)) if name == sub), -1)
                chosen = by_index.get(index, chosen)
            dev = world.devices.get(result_device_id(r))
            used.add(dev.model if dev is not None else "unknown")
    if not used <= set(chosen.models) or (not policy.mixed_models and len(used) > 1):
        return None
    return chosen


def _subrequests(claim: dict[str, Any], request: str) -> list[tuple[str, Any]]:
    for name, _, alternatives in claim_requests(claim):
        if name == request:
            return list(alternatives)
    return []


def evidence(world: World, policy: Policy, tenant: str, p: Plan) -> list[TierBlocker]:
    """The preemptor's quota (``reclaim``) and one ``reclaim_victim`` per victim, in name order."""
    model = p.tier.models[0] if len(p.tier.models) == 1 else p.tier.label
    if fair_share(policy):
        return _fair_share_evidence(world, policy, tenant, p, model)
    q = policy.quota(tenant, p.tier.models[0])
    out = [TierBlocker(Blocker.RECLAIM.value, p.tier.index, {
        "model": model, "node": p.node, "used": world.model_in_use(tenant, p.tier.models[0]),
        "requested": p.tier.count, "nominal": q.nominal if q is not None else None,
        "min_runtime_ms": policy.preemption_min_runtime_ms, "victims": len(p.victims),
        "device_ms": sum(v.device_ms for v in p.victims)})]
    for v in sorted(p.victims, key=lambda v: v.pod):
        vm = next((m for m, _ in v.models if m in p.tier.models), v.models[0][0])
        vq = policy.quota(v.tenant, vm)
        out.append(TierBlocker(Blocker.RECLAIM_VICTIM.value, -1, {
            "pod": v.pod, "tenant": v.tenant, "node": v.node, "model": vm, "count": len(v.devices),
            "runtime_ms": v.runtime_ms, "device_ms": v.device_ms, "used": world.model_in_use(v.tenant, vm),
            "nominal": vq.nominal if vq is not None else None, "cause": "borrowing_above_nominal"}))
    return out


def _fair_share_evidence(world: World, policy: Policy, tenant: str, p: Plan, model: str) -> list[TierBlocker]:
    entitled = entitlements(world, policy, tenant)
    out = [TierBlocker(Blocker.RECLAIM.value, p.tier.index, {
        "basis": "fair_share", "model": model, "node": p.node, "held_eq": round(held_eq(world, tenant), 3),
        "requested_eq": round(tier_eq(policy, p.tier), 3), "entitlement_eq": round(entitled[tenant], 3),
        "min_runtime_ms": policy.preemption_min_runtime_ms, "victims": len(p.victims),
        "device_ms": sum(v.device_ms for v in p.victims)})]
    for v in sorted(p.victims, key=lambda v: v.pod):
        vm = next((m for m, _ in v.models if m in p.tier.models), v.models[0][0])
        out.append(TierBlocker(Blocker.RECLAIM_VICTIM.value, -1, {
            "pod": v.pod, "tenant": v.tenant, "node": v.node, "model": vm, "count": len(v.devices),
            "runtime_ms": v.runtime_ms, "device_ms": v.device_ms, "released_eq": round(v.eq, 3),
            "held_eq": round(held_eq(world, v.tenant), 3), "entitlement_eq": round(entitled[v.tenant], 3),
            "cause": "above_fair_share"}))
    return out


def message(policy: Policy, tenant: str, p: Plan) -> str:
    names = ", ".join(sorted(v.pod for v in p.victims))
    owners = ", ".join(sorted({v.tenant for v in p.victims}))
    if fair_share(policy):
        return (f"reclaim: tenant {tenant} is within its fair share with {p.tier.count} {p.tier.label}; preempting "
                f"{len(p.victims)} pod(s) of tenant(s) above their fair share {owners} on node {p.node} ({names})")
    return (f"reclaim: tenant {tenant} is within its nominal {p.tier.label} quota; preempting {len(p.victims)} "
            f"pod(s) of borrowing tenant(s) {owners} on node {p.node} ({names})")


def victim_keys(blockers: list[TierBlocker]) -> list[str]:
    """The pods a ``preempted`` record evicts, in name order."""
    return [str(b.detail["pod"]) for b in blockers if b.code == Blocker.RECLAIM_VICTIM.value]


__all__ = ["DISRUPTION_CONDITION", "DISRUPTION_REASON", "FAIR_SHARE", "Candidate", "Plan", "borrowed", "damage",
           "evidence", "fair_share", "held_eq", "keeps_entitlement", "keeps_nominal", "keeps_owed", "message", "plan",
           "qualifying", "running_pods", "tier_eq", "victim_keys", "victims_allowed"]
