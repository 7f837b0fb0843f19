"""Who holds an in-use device: the claim and pod that have it, told only within the asker's tenant.

A device is held by every allocated claim whose ``status.allocation.devices.results`` names it
(several for a device shared by consumable capacity). The pod is the claim's consumer in
``status.reservedFor`` (what kube-scheduler writes), else a pod of the view whose
``spec.resourceClaims`` names the claim. A holder in another tenant than the asker's (tenants by
the policy's namespace mapping) reads as "another tenant", with neither claim nor pod; an asker
of None (an admin, or an offline dump) sees every holder.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from audit.explain.view import ClusterView, obj_name, obj_namespace
from audit.scheduler.claimspec import claim_key, pod_claim_names, result_device_id

OTHER_TENANT = "another tenant"


class Holder(NamedTuple):
    claim: str  # "<namespace>/<name>"
    pod: str  # "<namespace>/<name>", or "" when no pod uses the claim
    namespace: str


def _consumer(claim: Mapping[str, Any], users: Mapping[tuple[str, str], str]) -> str:
    ns = obj_namespace(claim)
    for ref in (claim.get("status") or {}).get("reservedFor") or []:
        if isinstance(ref, Mapping) and ref.get("resource", "pods") == "pods" and ref.get("name"):
            return f"{ns}/{ref['name']}"
    return users.get((ns, obj_name(claim)), "")


def device_holders(view: ClusterView, own: Sequence[tuple[str, str]]) -> dict[str, list[Holder]]:
    """Device id → the claims (and their pods) holding it, the asking pod's own claims left out."""
    users: dict[tuple[str, str], str] = {}
    for (ns, name), pod in sorted(view.pods.items()):
        for _, claim_name in pod_claim_names(pod):
            if claim_name:
                users.setdefault((ns, claim_name), f"{ns}/{name}")
    out: dict[str, list[Holder]] = {}
    for claim in view.allocated_claims(own):
        holder = Holder(claim_key(claim), _consumer(claim, users), obj_namespace(claim))
        for res in (((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results") or []:
            if isinstance(res, Mapping) and not res.get("adminAccess"):
                out.setdefault(result_device_id(res), []).append(holder)
    return out


def holder_detail(holders: Sequence[Holder], viewer: str | None, tenant_of: Callable[[str], str]) -> dict[str, str]:
    """Detail keys naming the holders: ``by`` (one readable line), ``claim`` and ``pod`` (visible ones)."""
    shown: list[Holder] = []
    hidden = 0
    for h in holders:
        if viewer is None or tenant_of(h.namespace) == viewer:
            shown.append(h)
        else:
            hidden += 1
    parts = [f"pod {h.pod} (claim {h.claim})" if h.pod else f"claim {h.claim}" for h in shown]
    if hidden:
        parts.append(OTHER_TENANT)
    detail = {"by": "; ".join(parts)} if parts else {}
    if shown:
        detail["claim"] = ",".join(h.claim for h in shown)
        pods = [h.pod for h in shown if h.pod]
        if pods:
            detail["pod"] = ",".join(pods)
    return detail
