"""A pod's preference tiers and which device models each tier asks for.

A tier is one request (``exactly``) or one ``firstAvailable`` subrequest of one of the pod's
claims, in the scheduler's order. Which model a tier asks for is read off its selectors: the
tier's DeviceClass and request CEL selectors are evaluated on one device of each distinct
device shape (driver, attributes other than identity, capacity), so a cluster of thousands of
identical GPUs costs a handful of evaluations.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from audit.dra.cel import CelCompileError, CelEnvironment, CelRuntimeError, device_context
from audit.explain.view import ClusterView, Device, obj_name, obj_namespace

# Per-device identity attributes: they never decide a model, and would defeat de-duplication.
_IDENTITY_ATTRIBUTES = {"uuid", "pciBusID", "resource.kubernetes.io/pciBusID", "resource.kubernetes.io/pcieRoot",
                        "pcieBusID", "index", "minor"}


@dataclass(frozen=True)
class Tier:
    index: int  # position in the pod's preference order
    claim: str  # "<namespace>/<name>"
    request: str
    subrequest: str  # "" for an ``exactly`` request
    sub_index: int
    spec: Mapping[str, Any]  # the ExactDeviceRequest or DeviceSubRequest body

    @property
    def label(self) -> str:
        return f"{self.request}/{self.subrequest}" if self.subrequest else self.request

    @property
    def count(self) -> int:
        if self.spec.get("allocationMode") == "All":
            return 1
        return int(self.spec.get("count", 1) or 1)


def pod_tiers(claims: Sequence[Mapping[str, Any]]) -> list[Tier]:
    tiers: list[Tier] = []
    for claim in claims:
        key = f"{obj_namespace(claim)}/{obj_name(claim)}"
        for req in ((claim.get("spec") or {}).get("devices") or {}).get("requests") or []:
            name = str(req.get("name", ""))
            if req.get("firstAvailable"):
                for si, sub in enumerate(req["firstAvailable"]):
                    tiers.append(Tier(len(tiers), key, name, str(sub.get("name", "")), si, sub))
            else:
                tiers.append(Tier(len(tiers), key, name, "", 0, req.get("exactly") or {}))
    return tiers


def _expressions(view: ClusterView, tier: Tier) -> list[str]:
    cls = view.classes.get(str(tier.spec.get("deviceClassName", ""))) or {}
    selectors = [*((cls.get("spec") or {}).get("selectors") or []), *(tier.spec.get("selectors") or [])]
    return [str((s.get("cel") or {}).get("expression", "")) for s in selectors]


def _shapes(devices: Sequence[Device]) -> dict[str, list[tuple[str, dict[str, Any], dict[str, Any], bool]]]:
    """model → distinct (driver, attributes, capacity, allowMultipleAllocations) device shapes."""
    seen: dict[str, dict[str, tuple[str, dict[str, Any], dict[str, Any], bool]]] = {}
    for dev in devices:
        if not dev.model:
            continue
        attrs = dev.raw.get("attributes") or {}
        capacity = dev.raw.get("capacity") or {}
        multi = bool(dev.raw.get("allowMultipleAllocations"))
        shape_attrs = {k: v for k, v in attrs.items() if k not in _IDENTITY_ATTRIBUTES}
        key = json.dumps([dev.driver, shape_attrs, capacity, multi], sort_keys=True)
        seen.setdefault(dev.model, {}).setdefault(key, (dev.driver, attrs, capacity, multi))
    return {m: [shapes[k] for k in sorted(shapes)] for m, shapes in seen.items()}


def tier_models(view: ClusterView, tiers: Sequence[Tier], devices: Sequence[Device]) -> dict[int, list[str]]:
    """Tier index → the models (sorted) of which at least one device shape passes all its selectors."""
    env = CelEnvironment()
    shapes = _shapes(devices)
    out: dict[int, list[str]] = {}
    for tier in tiers:
        try:
            selectors = [env.compile(e) for e in _expressions(view, tier)]
        except CelCompileError:  # an uncompilable selector selects nothing
            out[tier.index] = []
            continue
        models = []
        for model in sorted(shapes):
            for driver, attrs, capacity, multi in shapes[model]:
                try:
                    ctx = device_context(driver, attrs, capacity, multi)
                    if all(sel.evaluate(ctx) for sel in selectors):
                        models.append(model)
                        break
                except CelRuntimeError:  # a runtime error means this shape is not selected
                    continue
        out[tier.index] = models
    return out
