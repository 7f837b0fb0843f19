"""A world event log written step by step, as a cluster would produce it: nodes and slices (NVIDIA's
driver shape, from the simulator's builders), pods with their claims, binds, releases, failures
and health taints. Tests state a history in a few lines and fold it with ``audit.metrics``."""

from __future__ import annotations

import random
from typing import Any

from audit.events import WorldEvent
from audit.timestamps import format_time_ms, parse_time_ms
from ingest.simulate.cluster import DRIVER, NodePool, device_class, node_object, slice_object

T0 = parse_time_ms("2026-11-02T00:00:00Z")
MIN = 60_000
PRODUCT_PREFIX = {"H100": "NVIDIA H100", "A100": "NVIDIA A100", "L40S": "NVIDIA L40S", "L4": "NVIDIA L4"}


def policy_doc(version: str = "1", weights: dict[str, float] | None = None,
               quotas: dict[str, dict[str, int]] | None = None, **spec: Any) -> dict[str, Any]:
    tenants = [{"name": t, "namespaces": [t], "weight": w,
                "quotas": {m: {"nominal": n, "borrowingLimit": 0} for m, n in (quotas or {}).get(t, {}).items()}}
               for t, w in sorted((weights or {}).items())]
    return {"apiVersion": "claimtrail.io/v1alpha1", "kind": "Policy", "metadata": {"name": "p"},
            "spec": {"version": version, "tenants": tenants, **spec}}


class Log:
    def __init__(self, policy: dict[str, Any] | None = None, cluster: str = "c1") -> None:
        self.cluster = cluster
        self.events: list[WorldEvent] = []
        self.now = T0
        self.rng = random.Random(7)
        self.objects: dict[tuple[str, str, str], dict[str, Any]] = {}
        self.emit("Policy", "", "p", policy or policy_doc())
        self.emit("DeviceClass", "", "gpu.nvidia.com", device_class())

    def at(self, minutes: float) -> Log:
        self.now = T0 + int(minutes * MIN)
        return self

    def emit(self, kind: str, ns: str, name: str, payload: dict[str, Any] | None) -> None:
        kind_type = "delete" if payload is None else "upsert"
        self.events.append(WorldEvent(self.cluster, len(self.events), format_time_ms(self.now), kind_type, kind, ns,
                                      name, payload or {}))
        if payload is None:
            self.objects.pop((kind, ns, name), None)
        else:
            self.objects[(kind, ns, name)] = payload

    # ---- inventory ----------------------------------------------------------------------------------

    def nodes(self, model: str, count: int, gpus: int, prefix: str = "") -> Log:
        pool = NodePool(model, count, gpus, prefix=prefix)
        for i in range(count):
            name = f"{pool.node_prefix()}-{i}"
            self.emit("Node", "", name, node_object(name, pool))
            sl = slice_object(name, pool, self.rng)
            self.emit("ResourceSlice", "", sl["metadata"]["name"], sl)
        return self

    def second_pool(self, node: str, model: str, gpus: int) -> Log:
        """Another pool of ``model`` devices on an existing node (pool ``<node>-<model>``)."""
        sl = slice_object(node, NodePool(model, 1, gpus), self.rng)
        pool = f"{node}-{model.lower()}"
        sl["metadata"]["name"] = f"{pool}-{DRIVER}"
        sl["spec"]["pool"]["name"] = pool
        self.emit("ResourceSlice", "", sl["metadata"]["name"], sl)
        return self

    def dp_nodes(self, model: str, count: int, gpus: int) -> Log:
        pool = NodePool(model, count, gpus, device_plugin=True)
        for i in range(count):
            name = f"{pool.node_prefix()}-{i}"
            self.emit("Node", "", name, node_object(name, pool))
        return self

    def taint(self, rule: str, node: str, device: str) -> Log:
        self.emit("DeviceTaintRule", "", rule, {
            "apiVersion": "resource.k8s.io/v1alpha3", "kind": "DeviceTaintRule", "metadata": {"name": rule},
            "spec": {"deviceSelector": {"driver": DRIVER, "pool": node, "device": device},
                     "taint": {"key": "gpu.nvidia.com/unhealthy", "value": "xid-79", "effect": "NoSchedule"}}})
        return self

    def untaint(self, rule: str) -> Log:
        self.emit("DeviceTaintRule", "", rule, None)
        return self

    # ---- pods ---------------------------------------------------------------------------------------

    def pod(self, ref: str, *requests: tuple[str, list[str], int]) -> Log:
        """A pod whose one claim has the given requests: (name, models in preference order, count)."""
        ns, name = ref.split("/")
        reqs = []
        for rname, models, count in requests:
            subs = [{"name": m.lower(), "deviceClassName": "gpu.nvidia.com", "count": count,
                     "selectors": [{"cel": {"expression":
                                            f"device.attributes['gpu.nvidia.com'].productName.startsWith('{PRODUCT_PREFIX[m]}')"}}]}
                    for m in models]
            if len(subs) == 1:
                body = {k: v for k, v in subs[0].items() if k != "name"}
                reqs.append({"name": rname, "exactly": body})
            else:
                reqs.append({"name": rname, "firstAvailable": subs})
        claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                 "metadata": {"name": f"{name}-gpu", "namespace": ns, "uid": f"uid-claim-{ns}-{name}"},
                 "spec": {"devices": {"requests": reqs}}}
        self.emit("ResourceClaim", ns, f"{name}-gpu", claim)
        self.emit("Pod", ns, name, {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": ns, "uid": f"uid-{ns}-{name}",
                         "creationTimestamp": format_time_ms(self.now)},
            "spec": {"containers": [{"name": "main", "image": "trainer"}],
                     "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "t"}]},
            "status": {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": f"{name}-gpu"}]}})
        return self

    def dp_pod(self, ref: str, gpus: int, **constraints: Any) -> Log:
        """A device-plugin pod; ``constraints`` go in its spec as given (nodeSelector, affinity)."""
        ns, name = ref.split("/")
        self.emit("Pod", ns, name, {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": ns, "uid": f"uid-{ns}-{name}",
                         "creationTimestamp": format_time_ms(self.now)},
            "spec": {"containers": [{"name": "main", "image": "trainer",
                                     "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}], **constraints}})
        return self

    def bind(self, ref: str, node: str, picks: dict[str, tuple[Any, ...]] | None = None) -> Log:
        """Allocate the claim (request -> (subrequest or "", device indexes[, pool: default the node's]))
        and bind the pod to ``node``."""
        ns, name = ref.split("/")
        if picks is not None:
            results = [{"request": f"{req}/{pick[0]}" if pick[0] else req, "driver": DRIVER,
                        "pool": pick[2] if len(pick) > 2 else node, "device": f"gpu-{i}"}
                       for req, pick in picks.items() for i in pick[1]]
            claim = self.objects[("ResourceClaim", ns, f"{name}-gpu")]
            self.emit("ResourceClaim", ns, f"{name}-gpu", {**claim, "status": {"allocation": {
                "devices": {"results": results, "config": []}, "nodeSelector": None}}})
        pod = self.objects[("Pod", ns, name)]
        self.emit("Pod", ns, name, {**pod, "spec": {**pod["spec"], "nodeName": node}})
        return self

    def finish(self, ref: str) -> Log:
        ns, name = ref.split("/")
        self.emit("Pod", ns, name, None)
        if ("ResourceClaim", ns, f"{name}-gpu") in self.objects:
            self.emit("ResourceClaim", ns, f"{name}-gpu", None)
        return self

    def fail(self, ref: str) -> Log:
        ns, name = ref.split("/")
        pod = self.objects[("Pod", ns, name)]
        self.emit("Pod", ns, name, {**pod, "status": {**pod.get("status", {}), "phase": "Failed"}})
        return self.finish(ref)

    def tick(self, minutes: float) -> Log:
        """An unrelated event at that time (ends the instant before it, as any later event would)."""
        self.at(minutes)
        self.emit("Node", "", "clock", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "clock"}})
        return self
