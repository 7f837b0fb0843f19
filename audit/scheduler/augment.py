"""The claims the allocator actually sees: policy applied to the user's claims, never loosened.

Three policy rules become plain DRA semantics so the exact per-node allocator enforces them:
tiers a policy forbids (quota exhausted, fallback not allowed yet) are removed from a request's
``firstAvailable`` list (result names ``<request>/<subrequest>`` are unchanged, so chosen tiers map
back to their original index by name); "no mixed models" adds a ``matchAttribute`` constraint on the
model table's attribute; topology adds ``matchAttribute`` on each configured attribute (e.g.
``resource.kubernetes.io/pcieRoot``). Constraints are only added when the claim asks for more
than one device, where they can matter.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from audit.policy import Policy


def augment_claim(claim: dict[str, Any], allowed: Mapping[str, tuple[int, ...]], policy: Policy) -> dict[str, Any] | None:
    """``allowed`` maps request name -> allowed subrequest indices; ``None`` if a request keeps none."""
    spec = claim.get("spec") or {}
    devices = spec.get("devices") or {}
    requests = devices.get("requests") or []
    new_requests = []
    total = 0
    changed = False
    for req in requests:
        subs = req.get("firstAvailable")
        if subs:
            keep = allowed.get(req["name"], tuple(range(len(subs))))
            if not keep:
                return None
            if len(keep) != len(subs):
                req = {**req, "firstAvailable": [subs[i] for i in keep]}
                changed = True
            total += max(int(s.get("count", 1) or 1) for s in req["firstAvailable"])
        else:
            total += int((req.get("exactly") or req).get("count", 1) or 1)
        new_requests.append(req)
    attributes = list(policy.topology_match_attributes)
    if not policy.mixed_models and policy.model_attribute():
        attributes.append(policy.model_attribute())
    extra = [{"matchAttribute": a} for a in attributes] if total > 1 else []
    if not changed and not extra:
        return claim
    out = copy.copy(claim)
    out["spec"] = {**spec, "devices": {**devices, "requests": new_requests,
                                       "constraints": list(devices.get("constraints") or []) + extra}}
    return out
