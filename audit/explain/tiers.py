"""A pod's preference tiers and which device models each tier asks for.

A tier is one request (``exactly``) or one ``firstAvailable`` subrequest of one of the pod's
claims, in the scheduler's order. Which model a tier asks for is read off its selectors: the
tier's DeviceClass and request CEL selectors are evaluated on one device of each distinct
device shape (driver, attributes other than identity, capacity), stopping at the first match, so
a cluster of thousands of identical GPUs costs a handful of evaluations. Selectors that name an
identity attribute (uuid, PCI address) are evaluated device by device.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from audit.dra.cel import CelCompileError, CelEnvironment, CelRuntimeError, device_context
from audit.explain.view import ClusterView, Device
from audit.scheduler.claimspec import cel_expressions, claim_key, claim_requests, device_count

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
        return device_count(self.spec)


def pod_tiers(claims: Sequence[Mapping[str, Any]]) -> list[Tier]:
    tiers: list[Tier] = []
    for claim in claims:
        key = claim_key(claim)
        for name, _, alternatives in claim_requests(claim):
            for si, (sub, spec) in enumerate(alternatives):
                tiers.append(Tier(len(tiers), key, name, sub, si, spec))
    return tiers


def _expressions(view: ClusterView, tier: Tier) -> list[str]:
    cls = view.classes.get(str(tier.spec.get("deviceClassName", ""))) or {}
    return [*cel_expressions((cls.get("spec") or {}).get("selectors")), *cel_expressions(tier.spec.get("selectors"))]


def _shape_key(dev: Device) -> str:
    attrs = {k: v for k, v in (dev.raw.get("attributes") or {}).items() if k not in _IDENTITY_ATTRIBUTES}
    return json.dumps([dev.driver, attrs, dev.raw.get("capacity") or {}, bool(dev.raw.get("allowMultipleAllocations"))],
                      sort_keys=True)


class TierMatcher:
    """Answers "does this tier select some device of model M?", evaluating as little as it can.

    Devices of M are tried in cluster order, one per distinct shape, stopping at the first that
    passes every selector; answers are cached per (tier, model).
    """

    def __init__(self, view: ClusterView, devices: Sequence[Device]) -> None:
        self._view = view
        self._env = CelEnvironment()
        self._by_model: dict[str, list[Device]] = {}
        for dev in devices:
            if dev.model:
                self._by_model.setdefault(dev.model, []).append(dev)
        self._answers: dict[tuple[int, str], bool] = {}

    def models(self) -> list[str]:
        return sorted(self._by_model)

    def selects(self, tier: Tier, model: str) -> bool:
        key = (tier.index, model)
        if key not in self._answers:
            self._answers[key] = self._evaluate(tier, model)
        return self._answers[key]

    def _evaluate(self, tier: Tier, model: str) -> bool:
        expressions = _expressions(self._view, tier)
        try:
            selectors = [self._env.compile(e) for e in expressions]
        except CelCompileError:  # an uncompilable selector selects nothing
            return False
        # A selector naming an identity attribute (a uuid, a PCI address) tells identical GPUs apart.
        by_shape = not any(name.rpartition("/")[2] in e for e in expressions for name in _IDENTITY_ATTRIBUTES)
        seen: set[str] = set()
        for dev in self._by_model.get(model, []):
            if by_shape:
                shape = _shape_key(dev)
                if shape in seen:
                    continue
                seen.add(shape)
            ctx = device_context(dev.driver, dev.raw.get("attributes") or {}, dev.raw.get("capacity") or {},
                                 bool(dev.raw.get("allowMultipleAllocations")))
            try:
                if all(sel.evaluate(ctx) for sel in selectors):
                    return True
            except CelRuntimeError:  # a runtime error means this shape is not selected
                continue
        return False

    def asks_for(self, tier: Tier, dev: Device) -> bool:
        """Whether the tier's selectors select this one device (evaluated, not cached)."""
        try:
            selectors = [self._env.compile(e) for e in _expressions(self._view, tier)]
            ctx = device_context(dev.driver, dev.raw.get("attributes") or {}, dev.raw.get("capacity") or {},
                                 bool(dev.raw.get("allowMultipleAllocations")))
            return all(sel.evaluate(ctx) for sel in selectors)
        except (CelCompileError, CelRuntimeError):  # as above: an error selects nothing
            return False

    def preferred_model(self, tier: Tier) -> str:
        """The first model (by name) the tier selects, or the tier's request name if none."""
        return next((m for m in self.models() if self.selects(tier, m)), tier.label)
