"""Small API-shaped objects for explain scenarios: NVIDIA-like H100/A100 GPUs on a few nodes."""

from __future__ import annotations

import copy
from typing import Any

DRIVER = "gpu.nvidia.com"
PRODUCT = {"H100": "NVIDIA H100 80GB HBM3", "A100": "NVIDIA A100-SXM4-80GB", "L40S": "NVIDIA L40S"}
GPU_CLASS = {
    "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu.nvidia.com"},
    "spec": {"selectors": [{"cel": {"expression":
                                    "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"}}]},
}


def node(name: str, zone: str = "a", taints: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"apiVersion": "v1", "kind": "Node",
                           "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "zone": zone}}}
    if taints:
        out["spec"] = {"taints": taints}
    return out


def gpu(name: str, model: str = "H100", *, kind: str = "gpu", driver_version: str | None = "580.105.8",
        memory: str = "80Gi", taints: list[dict[str, Any]] | None = None, **extra: Any) -> dict[str, Any]:
    attrs: dict[str, Any] = {"type": {"string": kind}, "productName": {"string": PRODUCT[model]},
                             "uuid": {"string": f"GPU-{model}-{name}"}}
    if driver_version is not None:
        attrs["driverVersion"] = {"version": driver_version}
    out: dict[str, Any] = {"name": name, "attributes": attrs, "capacity": {"memory": {"value": memory}}}
    if taints:
        out["taints"] = taints
    out.update(extra)
    return out


def slice_(node_name: str, devices: list[dict[str, Any]], *, name: str = "", pool: str = "", count: int = 1,
           **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"driver": DRIVER, "pool": {"name": pool or node_name, "generation": 1,
                                                       "resourceSliceCount": count}}
    if node_name:
        body["nodeName"] = node_name
    if devices:
        body["devices"] = devices
    body.update(spec)
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": name or f"{node_name or pool}-slice"}, "spec": body}


def sub(name: str, model: str, *selectors: str, **fields: Any) -> dict[str, Any]:
    exprs = [f"device.attributes['gpu.nvidia.com'].productName.startsWith('{PRODUCT[model]}')", *selectors]
    return {"name": name, "deviceClassName": "gpu.nvidia.com", "selectors": [{"cel": {"expression": e}} for e in exprs],
            **fields}


def claim(name: str, namespace: str = "team-a", *, subs: list[dict[str, Any]] | None = None,
          constraints: list[dict[str, Any]] | None = None,
          allocated: list[tuple[str, str]] | None = None) -> dict[str, Any]:
    """A claim with one request ``gpu`` (firstAvailable of ``subs``, default H100 then A100)."""
    devices: dict[str, Any] = {"requests": [{"name": "gpu", "firstAvailable": subs or [sub("h100", "H100"),
                                                                                       sub("a100", "A100")]}]}
    if constraints:
        devices["constraints"] = constraints
    out: dict[str, Any] = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                           "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{namespace}-{name}"},
                           "spec": {"devices": devices}}
    if allocated:
        out["status"] = {"allocation": {"devices": {"results": [
            {"request": "gpu/h100", "driver": DRIVER, "pool": pool, "device": dev} for pool, dev in allocated]}}}
    return out


def pod(name: str, claim_name: str, namespace: str = "team-a", **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}"},
            "spec": {"containers": [{"name": "main", "image": "img"}],
                     "resourceClaims": [{"name": "gpu", "resourceClaimName": claim_name}], **spec}}


def scenario(*objects: dict[str, Any], pod_spec: dict[str, Any] | None = None,
             pod_claim: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The objects plus the device class, the asking claim ``train-gpu`` and pod ``team-a/train``."""
    return [copy.deepcopy(GPU_CLASS), *objects, pod_claim or claim("train-gpu"),
            pod("train", "train-gpu", **(pod_spec or {}))]
