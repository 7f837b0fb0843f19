"""What a pod that is not allocated would get if it were scheduled now.

The pod's claims are allocated together by the allocator on every node the pod may run on (the
node filters of ``audit.explain.nodes``, the pod judged unbound), against everything allocated
to other pods; subrequests of tiers the policy closes (a tenant quota the tier cannot fit in, a
fallback the ``strict`` fallback mode forbids) are taken out of the claims first, so the
allocator falls through to the next alternative as the decision engine's tiers do, and the
policy's topology and mixed-model constraints are added as the engine adds them
(``audit.scheduler.augment``). A node whose allocation the policy refuses as a whole (the
tenant's quota, model by model; several models where the policy forbids mixing them) is passed
over as the engine passes it over (``audit.scheduler.placement``): a tier of several models stays
open while one of them fits, and the allocator may pick another.
How long the pod has waited is not known here, so under ``wait-for-preferred`` and ``adaptive``
fallbacks are open, and the answer says so. Among the nodes where every claim fits, the scheduler's
tie-break picks one (as ``audit.scheduler.engine`` orders nodes: score Σ over firstAvailable requests of 8 − chosen subrequest
index, highest first, then node name). The answer describes the devices as a held allocation
does (``allocation_summary``); when no node fits, the caller names the blocker of every tier.
"""

from __future__ import annotations

import copy
from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from audit.allocator import AllocatedState, Allocator, Status
from audit.dra.model import DeviceClass, DeviceTaintRule, Node, ResourceClaim, ResourceSlice
from audit.explain.inventories import INVENTORIES
from audit.explain.nodes import node_exclusion
from audit.explain.probe import parse_as
from audit.explain.tiers import Tier
from audit.explain.view import ClusterView, Device
from audit.policy import Policy
from audit.scheduler.augment import augment_claim
from audit.scheduler.claimspec import claim_key, result_device_id
from audit.scheduler.engine import MAX_SUBREQUESTS
from audit.scheduler.placement import placement_refusal
from audit.scheduler.quota import QuotaAsk


def pending_outcome() -> dict[str, Any]:
    """The outcome of a pod that holds no allocation (a fresh dict: callers add to it)."""
    return {"result": "pending", "model": "", "devices": [], "node": "", "tier": -1, "retry_class": ""}


def allocation_summary(results: Sequence[tuple[str, Mapping[str, Any]]], tiers: Sequence[Tier],
                       by_id: Mapping[str, Device], node: str) -> dict[str, Any]:
    """``{"result": "allocated", model, devices, node, tier, retry_class}`` for (claim key, result) pairs.

    The tier is the first of the pod's tiers a result was allocated for; the model is the one
    model of the devices, or their models joined by "+".
    """
    devices: list[str] = []
    models: list[str] = []
    tier_index = -1
    for key, res in results:
        dev_id = result_device_id(res)
        devices.append(dev_id)
        if dev_id in by_id and by_id[dev_id].model:
            models.append(by_id[dev_id].model)
        req, _, sub = str(res.get("request", "")).partition("/")
        for t in tiers:
            if t.claim == key and t.request == req and t.subrequest == sub and tier_index < 0:
                tier_index = t.index
    model = models[0] if models and all(m == models[0] for m in models) else "+".join(sorted(set(models)))
    return {"result": "allocated", "model": model, "devices": devices, "node": node, "tier": tier_index,
            "retry_class": ""}


def _open_claim(claim: Mapping[str, Any], tiers: Sequence[Tier], closed: Collection[int]
                ) -> tuple[dict[str, Any] | None, dict[str, list[int]]]:
    """The claim without its closed subrequests (None when a request has none left), and per
    firstAvailable request the original indexes of the subrequests kept."""
    key = claim_key(claim)
    shut = {(t.request, t.subrequest) for t in tiers if t.claim == key and t.index in closed}
    out = {k: copy.deepcopy(v) for k, v in claim.items() if k != "status"}
    requests = []
    kept: dict[str, list[int]] = {}
    for request in ((claim.get("spec") or {}).get("devices") or {}).get("requests") or []:
        name = str(request.get("name", ""))
        if request.get("firstAvailable"):
            subs = [(i, s) for i, s in enumerate(request["firstAvailable"]) if (name, str(s.get("name", ""))) not in shut]
            if not subs:
                return None, {}
            kept[name] = [i for i, _ in subs]
            requests.append({**copy.deepcopy(request), "firstAvailable": [copy.deepcopy(s) for _, s in subs]})
        elif (name, "") in shut:
            return None, {}
        else:
            requests.append(copy.deepcopy(request))
    out["spec"] = copy.deepcopy(claim.get("spec") or {})
    out["spec"].setdefault("devices", {})["requests"] = requests
    return out, kept


def best_allocation(view: ClusterView, pod: Mapping[str, Any], claims: Sequence[Mapping[str, Any]],
                    tiers: Sequence[Tier], closed: Collection[int], own: Sequence[tuple[str, str]],
                    policy: Policy | None, held: Sequence[str] = (), by_id: Mapping[str, Device] | None = None,
                    quota: QuotaAsk | None = None) -> tuple[str, list[tuple[str, Mapping[str, Any]]]] | None:
    """(node, (claim key, result) pairs) of the allocation the scheduler would make now, or None;
    ``held``: device ids the pod may not use though free (reserved for another pod); ``quota``:
    the tenant's quota, asked of the devices per model (``by_id``) each node would give."""
    opened = [_open_claim(c, tiers, closed) for c in claims]
    if any(c is None for c, _ in opened):
        return None
    # The policy's own claim rules (topology, no mixed models), as the decision engine applies them.
    augmented = [augment_claim(c, {}, policy) if policy is not None else c for c, _ in opened if c is not None]
    parsed = [parse_as(c, ResourceClaim) for c in augmented if c is not None]
    nodes = [n for n in sorted(view.nodes) if not node_exclusion(pod, n, view.nodes[n], True)[0]]
    if not nodes:
        return None
    inventory = INVENTORIES.inventory([parse_as(raw, ResourceSlice) for _, raw in sorted(view.slices.items())],
                                      [parse_as(raw, DeviceClass) for _, raw in sorted(view.classes.items())],
                                      [parse_as(raw, DeviceTaintRule) for _, raw in sorted(view.taint_rules.items())])
    state = AllocatedState.from_claims([parse_as(c, ResourceClaim) for c in view.allocated_claims(own)])
    if held:
        state = state.with_results([dict(zip(("driver", "pool", "device"), d.split("/", 2), strict=True))
                                    for d in held])
    health: Callable[[Any], bool] | None = (lambda taint: policy.is_unhealthy_taint(taint.key)) if policy else None
    allocator = Allocator(inventory, state, health=health)
    kept = {claim_key(c): k for c, (_, k) in zip(claims, opened, strict=True)}
    best: tuple[tuple[int, str], str, list[tuple[str, Mapping[str, Any]]]] | None = None
    for name in nodes:
        outcome = allocator.allocate(parse_as(view.nodes[name], Node), parsed)
        if outcome.status is not Status.SUCCESS:
            continue
        results: list[tuple[str, Mapping[str, Any]]] = [
            (claim_key(c), r) for c, a in zip(claims, outcome.allocations, strict=True) for r in a.results]
        if policy is not None and quota is not None and placement_refusal(
                policy, _models(results, by_id or {}), quota) is not None:
            continue
        score = 0
        for chosen, index in outcome.chosen_subrequests.items():
            ckey, _, request = chosen.rpartition("/")
            score += MAX_SUBREQUESTS - kept[ckey][request][index]
        rank = (-score, name)
        if best is None or rank < best[0]:
            best = (rank, name, results)
    return (best[1], best[2]) if best is not None else None


def _models(results: Sequence[tuple[str, Mapping[str, Any]]], by_id: Mapping[str, Device]) -> Counter[str]:
    """Devices per model of an allocation, as the engine counts them for the quota."""
    found = (by_id.get(result_device_id(r)) for _, r in results)
    return Counter(dev.model if dev is not None else "unknown" for dev in found)
