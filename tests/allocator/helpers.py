"""Builders for API-shaped objects (the dicts a user would write in YAML) and a runner.

Names follow upstream's allocator test table: driver-a/driver-b, pool-1, node-1, class-a,
claim-0, req-0, device-1 ... so cases read like the table they are modelled on.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from audit.allocator import AllocatedState, AllocationOutcome, Allocator, Features, Inventory, Quirks
from audit.dra.model import DeviceClass, DeviceTaintRule, Node, ResourceClaim, ResourceSlice, parse_object

DRIVER_A = "driver-a"
DRIVER_B = "driver-b"
NODE_1 = "node-1"
NODE_2 = "node-2"


def device(name: str, attrs: dict[str, Any] | None = None, capacity: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name}
    if attrs:
        out["attributes"] = {k: _attr(v) for k, v in attrs.items()}
    if capacity:
        out["capacity"] = {k: (v if isinstance(v, dict) else {"value": v}) for k, v in capacity.items()}
    out.update(extra)
    return out


def _attr(value: Any) -> dict[str, Any]:
    if isinstance(value, dict):
        return value
    if isinstance(value, bool):
        return {"bool": value}
    if isinstance(value, int):
        return {"int": value}
    return {"string": value}


def resource_slice(name: str, node: str | None, pool: str, driver: str = DRIVER_A, devices: Sequence[dict[str, Any]] = (),
                   generation: int = 1, count: int = 1, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"driver": driver, "pool": {"name": pool, "generation": generation, "resourceSliceCount": count}}
    if node is not None:
        body["nodeName"] = node
    if devices:
        body["devices"] = list(devices)
    body.update(spec)
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": name}, "spec": body}


def device_class(name: str, driver: str | None = DRIVER_A, selectors: Sequence[str] = (), config: Sequence[dict[str, Any]] = ()) -> dict[str, Any]:
    exprs = ([f"device.driver == '{driver}'"] if driver else []) + list(selectors)
    spec: dict[str, Any] = {}
    if exprs:
        spec["selectors"] = [{"cel": {"expression": e}} for e in exprs]
    if config:
        spec["config"] = list(config)
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name}, "spec": spec}


def exact(cls: str, count: int | None = None, mode: str | None = None, selectors: Sequence[str] = (),
          admin: bool | None = None, tolerations: Sequence[dict[str, Any]] = (), capacity: dict[str, Any] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"deviceClassName": cls}
    if count is not None:
        out["count"] = count
    if mode is not None:
        out["allocationMode"] = mode
    if selectors:
        out["selectors"] = [{"cel": {"expression": e}} for e in selectors]
    if admin is not None:
        out["adminAccess"] = admin
    if tolerations:
        out["tolerations"] = list(tolerations)
    if capacity is not None:
        out["capacity"] = {"requests": capacity}
    return out


def request(name: str, cls: str, count: int | None = None, **kw: Any) -> dict[str, Any]:
    return {"name": name, "exactly": exact(cls, count, **kw)}


def sub(name: str, cls: str, count: int | None = None, **kw: Any) -> dict[str, Any]:
    return {"name": name, **exact(cls, count, **kw)}


def first_available(name: str, *subs: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "firstAvailable": list(subs)}


def claim(name: str, *requests: dict[str, Any], constraints: Sequence[dict[str, Any]] = (),
          config: Sequence[dict[str, Any]] = (), namespace: str = "default", uid: str = "") -> dict[str, Any]:
    devices: dict[str, Any] = {"requests": list(requests)}
    if constraints:
        devices["constraints"] = list(constraints)
    if config:
        devices["config"] = list(config)
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if uid:
        meta["uid"] = uid
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": meta, "spec": {"devices": devices}}


def allocated(raw_claim: dict[str, Any], *results: dict[str, Any]) -> dict[str, Any]:
    out = dict(raw_claim)
    out["status"] = {"allocation": {"devices": {"results": list(results)}}}
    return out


def result(req: str, driver: str, pool: str, dev: str, **extra: Any) -> dict[str, Any]:
    return {"request": req, "driver": driver, "pool": pool, "device": dev, **extra}


def opaque(driver: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"opaque": {"driver": driver, "parameters": params}}


def taint_rule(name: str, taint: dict[str, Any], driver: str = "", pool: str = "", dev: str = "") -> dict[str, Any]:
    selector = {k: v for k, v in (("driver", driver), ("pool", pool), ("device", dev)) if v}
    return {"apiVersion": "resource.k8s.io/v1alpha3", "kind": "DeviceTaintRule", "metadata": {"name": name},
            "spec": {"deviceSelector": selector, "taint": taint}}


def build(objects: Iterable[dict[str, Any]], features: Features | None = None) -> tuple[Inventory, list[ResourceClaim], list[ResourceClaim]]:
    parsed = [parse_object(o) for o in objects]
    inventory = Inventory(
        slices=[o for o in parsed if isinstance(o, ResourceSlice)],
        classes=[o for o in parsed if isinstance(o, DeviceClass)],
        taint_rules=[o for o in parsed if isinstance(o, DeviceTaintRule)],
        features=features or Features(),
    )
    claims = [o for o in parsed if isinstance(o, ResourceClaim)]
    return inventory, [c for c in claims if c.allocation is None], [c for c in claims if c.allocation is not None]


def run(objects: Iterable[dict[str, Any]], node: str = NODE_1, labels: dict[str, str] | None = None, gates: str = "",
        quirks: Quirks | None = None, explain: bool = False, max_steps: int | None = None) -> AllocationOutcome:
    inventory, pending, done = build(objects, Features.from_gates(gates))
    allocator = Allocator(inventory, AllocatedState.from_claims(done), quirks=quirks)
    return allocator.allocate(Node(name=node, labels=labels or {}), pending, explain=explain, max_steps=max_steps)


def picks(outcome: AllocationOutcome) -> list[tuple[str, str, str]]:
    """(claim, request, pool/device) per result, in result order."""
    return [(a.claim, r["request"], f"{r['pool']}/{r['device']}") for a in outcome.allocations for r in a.results]


def devices_of(outcome: AllocationOutcome) -> list[str]:
    return [f"{r['driver']}/{r['pool']}/{r['device']}" for a in outcome.allocations for r in a.results]


def verdicts(outcome: AllocationOutcome, request: str, claim: str = "default/claim-0") -> dict[str, str]:
    for tier in outcome.evidence:
        if tier.claim == claim and tier.request == request:
            return {v.device.rsplit("/", 1)[1]: v.reason for v in tier.verdicts}
    raise AssertionError(f"no tier {claim} {request}")


def node(name: str = NODE_1, labels: dict[str, str] | None = None) -> Node:
    return Node(name=name, labels=labels or {})
