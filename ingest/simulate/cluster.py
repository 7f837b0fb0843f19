"""Synthetic GPU nodes as the Kubernetes objects a real cluster would show.

A node pool (model, node count, GPUs per node, driver version) becomes Nodes and one
ResourceSlice per node as NVIDIA's DRA driver publishes them (NVIDIA/k8s-dra-driver-gpu,
``deviceinfo.go``):
driver ``gpu.nvidia.com``, pool = node name, devices ``gpu-<i>`` with ``type``, ``uuid``,
``productName``, ``brand``, ``architecture``, ``cudaComputeCapability``/``driverVersion``/
``cudaDriverVersion`` (versions), ``resource.kubernetes.io/pciBusID`` and ``pcieRoot``, and
capacity ``memory``. Device-plugin nodes instead carry ``nvidia.com/gpu`` allocatable and the GPU
feature discovery product label. Identity values (uuid) come from the seeded generator only.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

DRIVER = "gpu.nvidia.com"
GPU_CLASS = "gpu.nvidia.com"

# Attributes NVIDIA's driver publishes for these products (productName strings as in the driver's
# NVML output; memory as the driver reports it, from NVML's total memory of each product).
PRODUCTS: dict[str, dict[str, str]] = {
    "H100": {"productName": "NVIDIA H100 80GB HBM3", "architecture": "Hopper", "cc": "9.0.0", "memory": "81559Mi"},
    "A100": {"productName": "NVIDIA A100-SXM4-80GB", "architecture": "Ampere", "cc": "8.0.0", "memory": "80Gi"},
    "L40S": {"productName": "NVIDIA L40S", "architecture": "Ada Lovelace", "cc": "8.9.0", "memory": "46068Mi"},
    "L4": {"productName": "NVIDIA L4", "architecture": "Ada Lovelace", "cc": "8.9.0", "memory": "23034Mi"},
}
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"  # set by GPU feature discovery on device-plugin nodes
CUDA_FOR_DRIVER = {"535": "12.2.0", "550": "12.4.0", "570": "12.8.0", "580": "13.0.0"}


@dataclass(frozen=True)
class NodePool:
    model: str  # a PRODUCTS key, or any trace model name (used verbatim as productName)
    nodes: int
    gpus_per_node: int
    driver_version: str = "580.105.8"
    prefix: str = ""
    device_plugin: bool = False
    labels: tuple[tuple[str, str], ...] = ()

    def node_prefix(self) -> str:
        return self.prefix or f"{self.model.lower().replace(' ', '-')}{'-dp' if self.device_plugin else ''}"


def device_class() -> dict[str, Any]:
    """NVIDIA's class for whole GPUs (``type == 'gpu'``)."""
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": GPU_CLASS},
            "spec": {"selectors": [{"cel": {"expression":
                                            "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"}}]}}


def product(model: str) -> dict[str, str]:
    return PRODUCTS.get(model, {"productName": model, "architecture": "unknown", "cc": "7.0.0", "memory": "32Gi"})


def gpu_product_label(model: str) -> str:
    """The value NVIDIA GPU feature discovery puts in a node's ``nvidia.com/gpu.product`` label."""
    return product(model)["productName"].replace(" ", "-")


def node_object(name: str, pool: NodePool) -> dict[str, Any]:
    labels = {"kubernetes.io/hostname": name, "claimtrail.io/gpu-model": pool.model, **dict(pool.labels)}
    node: dict[str, Any] = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}, "spec": {}}
    if pool.device_plugin:
        labels[GPU_PRODUCT_LABEL] = gpu_product_label(pool.model)
        node["status"] = {"allocatable": {"nvidia.com/gpu": str(pool.gpus_per_node)}}
    return node


def slice_object(name: str, pool: NodePool, rng: random.Random, generation: int = 1,
                 driver_version: str | None = None, uuids: list[str] | None = None) -> dict[str, Any]:
    p = product(pool.model)
    version = driver_version or pool.driver_version
    cuda = CUDA_FOR_DRIVER.get(version.split(".", 1)[0], "12.8.0")
    devices = []
    for i in range(pool.gpus_per_node):
        bus = 0x18 + i * 0x10
        uuid = uuids[i] if uuids else "GPU-" + f"{rng.getrandbits(32):08x}-{rng.getrandbits(16):04x}-{rng.getrandbits(16):04x}-{rng.getrandbits(16):04x}-{rng.getrandbits(48):012x}"
        devices.append({
            "name": f"gpu-{i}",
            "attributes": {
                "type": {"string": "gpu"},
                "uuid": {"string": uuid},
                "productName": {"string": p["productName"]},
                "brand": {"string": "Nvidia"},
                "architecture": {"string": p["architecture"]},
                "cudaComputeCapability": {"version": p["cc"]},
                "driverVersion": {"version": version},
                "cudaDriverVersion": {"version": cuda},
                "resource.kubernetes.io/pciBusID": {"string": f"0000:{bus:02x}:00.0"},
                "resource.kubernetes.io/pcieRoot": {"string": f"pci0000:{(i // 2) * 0x20 + 0x10:02x}"},
            },
            "capacity": {"memory": {"value": p["memory"]}},
        })
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"{name}-{DRIVER}"},
            "spec": {"driver": DRIVER, "nodeName": name, "pool": {"name": name, "generation": generation,
                                                                  "resourceSliceCount": 1},
                     "devices": devices}}


def slice_uuids(slice_obj: dict[str, Any]) -> list[str]:
    return [d["attributes"]["uuid"]["string"] for d in slice_obj["spec"]["devices"]]


def build_nodes(pools: list[NodePool], rng: random.Random) -> list[tuple[dict[str, Any], dict[str, Any] | None]]:
    """(Node, ResourceSlice or None for device-plugin nodes) for every node of every pool, in order."""
    out: list[tuple[dict[str, Any], dict[str, Any] | None]] = []
    for pool in pools:
        for i in range(pool.nodes):
            name = f"{pool.node_prefix()}-{i:03d}"
            out.append((node_object(name, pool), None if pool.device_plugin else slice_object(name, pool, rng)))
    return out
