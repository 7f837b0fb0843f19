"""The cluster as the allocator saw it: plain API objects by kind, with the lookups explain needs.

A view is built from what ``kubectl get nodes,pods,deviceclasses,resourceslices,resourceclaims,
devicetaintrules -A -o yaml`` prints, or from the world rebuilt at a decision's ``seq`` (whose
event payloads are the same API objects). Objects stay as API-shaped dicts; the probe parses the
ones the allocator reads, once per distinct content in a process (``audit.explain.parsed``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from audit.scheduler.claimspec import pod_claim_names

KINDS = ("Node", "Pod", "DeviceClass", "ResourceSlice", "ResourceClaim", "DeviceTaintRule")


class ViewError(ValueError):
    """The view lacks something the question needs (names the object and field)."""


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def obj_name(obj: Mapping[str, Any]) -> str:
    return str(_meta(obj).get("name", ""))


def obj_namespace(obj: Mapping[str, Any]) -> str:
    return str(_meta(obj).get("namespace", "") or "")


class Device(NamedTuple):
    """One published device with where it lives and what model it is (a tuple: a cluster holds
    thousands, and every explanation lists them all)."""

    id: str  # "<driver>/<pool>/<device>"
    name: str
    driver: str
    pool: str
    node: str  # the slice's nodeName; "" for devices reachable from many nodes
    model: str
    slice_name: str
    raw: Mapping[str, Any]  # the slice's device entry


@dataclass
class ClusterView:
    nodes: dict[str, dict[str, Any]] = field(default_factory=dict)
    pods: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    classes: dict[str, dict[str, Any]] = field(default_factory=dict)
    slices: dict[str, dict[str, Any]] = field(default_factory=dict)
    claims: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    taint_rules: dict[str, dict[str, Any]] = field(default_factory=dict)
    # a scheduler's Reservation objects by (namespace, pod name) (audit.explain.reserved)
    reservations: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    ignored: list[str] = field(default_factory=list)

    @classmethod
    def from_objects(cls, objects: Iterable[Mapping[str, Any]]) -> ClusterView:
        """Index API objects by kind; other kinds are listed in ``ignored``, never silently lost."""
        view = cls()
        tables: dict[str, dict[Any, dict[str, Any]]] = {
            "Node": view.nodes, "Pod": view.pods, "DeviceClass": view.classes, "ResourceSlice": view.slices,
            "ResourceClaim": view.claims, "DeviceTaintRule": view.taint_rules, "Reservation": view.reservations}
        for obj in objects:
            kind = str(obj.get("kind", ""))
            name = obj_name(obj)
            table = tables.get(kind)
            if table is None:
                view.ignored.append(f"{kind or '<no kind>'} {name}: not a kind the allocator reads")
                continue
            key = (obj_namespace(obj), name) if kind in ("Pod", "ResourceClaim", "Reservation") else name
            if key in table:
                view.ignored.append(f"{kind} {name}: listed twice, the later copy is used")
            table[key] = dict(obj)
        return view

    def pod(self, namespace: str, name: str) -> dict[str, Any]:
        try:
            return self.pods[(namespace, name)]
        except KeyError:
            raise ViewError(f"Pod {namespace}/{name}: not found in the cluster view") from None

    def pod_claims(self, pod: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The pod's ResourceClaims in ``spec.resourceClaims`` order (the scheduler's order)."""
        ns, name = obj_namespace(pod), obj_name(pod)
        out = []
        for i, (_, claim_name) in enumerate(pod_claim_names(pod)):
            if not claim_name:
                raise ViewError(f"Pod {ns}/{name}: spec.resourceClaims[{i}]: ResourceClaim not created yet")
            claim = self.claims.get((ns, claim_name))
            if claim is None:
                raise ViewError(f"Pod {ns}/{name}: spec.resourceClaims[{i}]: ResourceClaim {ns}/{claim_name} "
                                f"not found in the cluster view")
            out.append(claim)
        return out

    def devices(self, model_of: Any) -> list[Device]:
        """Every device in the newest generation of each pool, in (driver, pool, slice, list) order."""
        newest: dict[tuple[str, str], int] = {}
        specs: list[tuple[str, Mapping[str, Any], str, str, int]] = []
        for slice_name in sorted(self.slices):
            spec = self.slices[slice_name].get("spec") or {}
            pool = spec.get("pool") or {}
            key = (str(spec.get("driver", "")), str(pool.get("name", "")))
            generation = int(pool.get("generation", 0) or 0)
            newest[key] = max(newest.get(key, 0), generation)
            specs.append((slice_name, spec, *key, generation))
        out: list[Device] = []
        for slice_name, spec, driver, pool_name, generation in specs:
            if generation < newest[(driver, pool_name)]:
                continue  # obsolete generation: upstream ignores it
            slice_node = str(spec.get("nodeName") or "")
            for dev in spec.get("devices") or []:
                name = str(dev.get("name", ""))
                node = str(dev.get("nodeName") or slice_node)
                out.append(Device(f"{driver}/{pool_name}/{name}", name, driver, pool_name, node,
                                  model_of(driver, dev.get("attributes") or {}), slice_name, dev))
        out.sort(key=lambda d: (d.driver, d.pool, d.slice_name))
        return out

    def allocated_claims(self, exclude: Iterable[tuple[str, str]] = ()) -> list[dict[str, Any]]:
        skip = set(exclude)
        return [c for key, c in sorted(self.claims.items())
                if key not in skip and ((c.get("status") or {}).get("allocation"))]
