"""Reading pods and ResourceClaims as API objects, the same way for the engine and the explanation.

A claim's key is ``<namespace>/<name>``. A pod names its claims in ``spec.resourceClaims``, each
either directly (``resourceClaimName``) or through a template whose generated claim's name is in
``status.resourceClaimStatuses``. A claim request is either ``exactly`` one device request or a
``firstAvailable`` list of subrequests tried in order; the older flat request shape (fields on
the request itself) reads as ``exactly``. ``allocationMode: All`` counts as one device for
feasibility. A device allocated to a request is named ``<driver>/<pool>/<device>``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


def claim_key(claim: Mapping[str, Any]) -> str:
    meta = claim.get("metadata") or {}
    return f"{meta.get('namespace', '') or ''}/{meta.get('name', '')}"


def pod_claim_names(pod: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(entry name, ResourceClaim name or "" while not created yet), in ``spec.resourceClaims`` order."""
    statuses = {s.get("name"): s.get("resourceClaimName")
                for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []}
    return [(str(ref.get("name", "")), str(ref.get("resourceClaimName") or statuses.get(ref.get("name")) or ""))
            for ref in (pod.get("spec") or {}).get("resourceClaims") or []]


Alternative = tuple[str, Mapping[str, Any]]  # (subrequest name, "" for exactly; the device request body)


def claim_requests(claim: Mapping[str, Any]) -> list[tuple[str, bool, list[Alternative]]]:
    """Per request in order: (name, has firstAvailable, its alternatives in preference order)."""
    out: list[tuple[str, bool, list[Alternative]]] = []
    for req in ((claim.get("spec") or {}).get("devices") or {}).get("requests") or []:
        name = str(req.get("name", ""))
        subs = req.get("firstAvailable")
        if subs:
            out.append((name, True, [(str(s.get("name", "")), s) for s in subs]))
        else:
            out.append((name, False, [("", req.get("exactly") or req)]))
    return out


def device_count(request: Mapping[str, Any]) -> int:
    """Devices a request needs on one node: ``count`` (default 1), or 1 for ``allocationMode: All``."""
    if request.get("allocationMode") == "All":
        return 1
    return int(request.get("count", 1) or 1)


def cel_expressions(selectors: Iterable[Mapping[str, Any]] | None) -> tuple[str, ...]:
    """The CEL expressions of a class's or request's ``selectors``."""
    return tuple(str((s.get("cel") or {}).get("expression", "")) for s in selectors or [])


def result_device_id(result: Mapping[str, Any]) -> str:
    """The device an allocation result names (``status.allocation.devices.results[*]``)."""
    return f"{result.get('driver')}/{result.get('pool')}/{result.get('device')}"
