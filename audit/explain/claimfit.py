"""The whole claim around one tier: does the rest of the claim go with a device of that tier?

A device can pass every per-device check and still be useless to the pod: the claim's other
requests must be allocated on the same node, and its ``matchAttribute`` / ``distinctAttribute``
constraints (resource.k8s.io/v1 ``DeviceConstraint``; upstream incubating ``constraint.go``)
must hold across all of them. The probe therefore also allocates the whole claim, with the
tier's request moved first and reduced to one device of that tier, so the allocator tries the
tier's devices one by one and allocates the rest of the claim around each. Requests and
constraints are otherwise the claim's own; a constraint naming a subrequest that the reduced
claim no longer has keeps only the names that remain (it is dropped when none remain).

This module builds those claims (with all, none or one of the claim's constraints, to tell which
constraint rules a device out) and renders the detail of a ``constraint_unsatisfied`` verdict:
the constraint, its attribute, the requests it spans and the device's own value of it.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from audit.explain.tiers import Tier


def _reduced(tier: Tier) -> dict[str, Any]:
    body = {k: v for k, v in tier.spec.items() if k not in ("count", "allocationMode", "name")}
    body["allocationMode"] = "ExactCount"
    body["count"] = 1
    if tier.subrequest:
        return {"name": tier.request, "firstAvailable": [{"name": tier.subrequest, **body}]}
    return {"name": tier.request, "exactly": body}


def _names(requests: Sequence[Mapping[str, Any]]) -> set[str]:
    names = set()
    for r in requests:
        names.add(str(r.get("name", "")))
        for s in r.get("firstAvailable") or []:
            names.add(f"{r.get('name', '')}/{s.get('name', '')}")
    return names


def claim_constraints(claim: Mapping[str, Any]) -> list[dict[str, Any]]:
    return list(((claim.get("spec") or {}).get("devices") or {}).get("constraints") or [])


def has_other_requests(claim: Mapping[str, Any], tier: Tier) -> bool:
    """Whether the claim asks for more than the tier's request (then the rest must fit too)."""
    requests = ((claim.get("spec") or {}).get("devices") or {}).get("requests") or []
    return any(str(r.get("name", "")) != tier.request for r in requests)


def whole_claim(claim: Mapping[str, Any], tier: Tier, keep: Sequence[int] | None = None) -> dict[str, Any]:
    """The claim with the tier's request first and reduced to one device of the tier.

    ``keep`` lists which of the claim's constraints stay (all when None). Status is dropped: the
    claim is to be allocated.
    """
    devices = (claim.get("spec") or {}).get("devices") or {}
    others = [copy.deepcopy(r) for r in devices.get("requests") or [] if str(r.get("name", "")) != tier.request]
    requests = [_reduced(tier), *others]
    present = _names(requests)
    constraints = []
    for i, c in enumerate(devices.get("constraints") or []):
        if keep is not None and i not in keep:
            continue
        refs = list(c.get("requests") or [])
        kept = [r for r in refs if r in present]
        if refs and not kept:
            continue
        constraints.append({**copy.deepcopy(c), **({"requests": kept} if refs else {})})
    out = {k: copy.deepcopy(v) for k, v in claim.items() if k != "status"}
    out["spec"] = {"devices": {"requests": requests, **({"constraints": constraints} if constraints else {})}}
    return out


def covers(constraint: Mapping[str, Any], tier: Tier) -> bool:
    """Whether a constraint applies to the tier's devices (empty ``requests``: every request)."""
    refs = constraint.get("requests") or []
    return not refs or tier.request in refs or (bool(tier.subrequest) and tier.label in refs)


def attribute_text(device: Mapping[str, Any], driver: str, name: str) -> str:
    """The device's value of a constraint attribute as text, looked up as upstream does (the
    qualified name, then the bare name when the domain is the device's driver); "" when absent."""
    attrs = device.get("attributes") or {}
    found = attrs.get(name)
    domain, sep, ident = name.partition("/")
    if found is None and sep and domain == driver:
        found = attrs.get(ident)
    if not isinstance(found, Mapping) or not found:
        return ""
    value = next(iter(found.values()))
    if isinstance(value, list):
        return ",".join(str(v).lower() if isinstance(v, bool) else str(v) for v in value)
    return str(value).lower() if isinstance(value, bool) else str(value)


def constraint_detail(constraint: Mapping[str, Any], device: Mapping[str, Any], driver: str) -> dict[str, str]:
    kind = "matchAttribute" if constraint.get("matchAttribute") else "distinctAttribute"
    attribute = str(constraint.get(kind) or "")
    value = attribute_text(device, driver, attribute)
    refs = constraint.get("requests") or []
    return {"constraint": kind, "attribute": attribute, "value": value or "(none)",
            "requests": ",".join(str(r) for r in refs) if refs else "(all)"}
