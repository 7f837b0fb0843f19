"""Per-node allocation cost of the exact allocator on two cluster shapes.

(a) The scheduler_perf shape ``SchedulingWithResourceClaimTemplate/5000pods_500nodes``: 500 nodes
with 10 devices each (driver ``test-driver.cdi.k8s.io``, class ``test-class``), one-device
claims, 5000 pods filling the cluster one after the other. (b) An NVIDIA-like cluster of 1,000
nodes × 8 GPUs (H100/A100/L40S with ``gpu.nvidia.com`` attribute names) and a firstAvailable
claim H100 → A100 → L40S with memory and driverVersion selectors. Both measure one
``Allocator.allocate`` call on one node with evidence on, the way the decision engine calls it.
"""

from __future__ import annotations

import functools
import statistics
import time
from typing import Any

from audit.allocator import AllocatedState, Allocator, Features, Inventory, Status
from audit.dra.model import DeviceClass, Node, ResourceClaim, ResourceSlice, parse_object
from benchmarks.interleaved import nearest_rank_of, of_samples, of_work, paced

BENCH_RUNS = 3  # short latencies and tails: make bench reports the median of three runs
PERF_DRIVER = "test-driver.cdi.k8s.io"
GPU_DRIVER = "gpu.nvidia.com"
NODE_ROUNDS = 10  # the nodes (pods) of a pass are visited in this many rounds, each between two calibration passes

PRODUCTS = [
    ("NVIDIA H100 80GB HBM3", "Hopper", "9.0.0", "81559Mi"),
    ("NVIDIA A100-SXM4-80GB", "Ampere", "8.0.0", "80Gi"),
    ("NVIDIA L40S", "Ada Lovelace", "8.9.0", "46068Mi"),
]


def _slice(node: str, driver: str, devices: list[dict[str, Any]]) -> ResourceSlice:
    obj = parse_object({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"{node}-{driver}"},
                        "spec": {"driver": driver, "nodeName": node, "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                                 "devices": devices}})
    assert isinstance(obj, ResourceSlice)
    return obj


def _class(name: str, expression: str) -> DeviceClass:
    obj = parse_object({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name},
                        "spec": {"selectors": [{"cel": {"expression": expression}}]}})
    assert isinstance(obj, DeviceClass)
    return obj


def _claim(name: str, requests: list[dict[str, Any]]) -> ResourceClaim:
    obj = parse_object({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": name, "namespace": "bench"},
                        "spec": {"devices": {"requests": requests}}})
    assert isinstance(obj, ResourceClaim)
    return obj


def scheduler_perf_shape(nodes: int = 500, per_node: int = 10, pods: int = 5000) -> list[dict[str, Any]]:
    slices = [_slice(f"node-{n}", PERF_DRIVER, [{"name": f"device-{d}"} for d in range(per_node)]) for n in range(nodes)]
    inventory = Inventory(slices=slices, classes=[_class("test-class", f"device.driver == '{PERF_DRIVER}'")], features=Features())
    node_objs = [Node(name=f"node-{n}") for n in range(nodes)]
    state = AllocatedState()

    def fill(first: int, last: int) -> tuple[list[float], list[int], float]:
        samples: list[float] = []
        steps: list[int] = []
        started = time.perf_counter()
        for p in range(first, last):
            claim = _claim(f"pod-{p}-claim", [{"name": "req-0", "exactly": {"deviceClassName": "test-class"}}])
            allocator = Allocator(inventory, state)  # one scheduling cycle per pod, as upstream
            t0 = time.perf_counter()
            outcome = allocator.allocate(node_objs[p % nodes], [claim], explain=True)
            samples.append((time.perf_counter() - t0) * 1e6)
            assert outcome.status is Status.SUCCESS
            steps.append(outcome.steps)
            state.add_results(outcome.allocations[0].results)
        return samples, steps, time.perf_counter() - started

    # the pods fill the cluster in rounds between passes of the cpu workload, each sample normalised
    # by the speed around its round (benchmarks.interleaved): normalised by the run's factor instead,
    # the median moved 39 % between two quiet runs of one allocator (33.5 and 52.9 us measured)
    size = -(-pods // NODE_ROUNDS)
    rounds = paced([functools.partial(fill, k, min(pods, k + size)) for k in range(0, pods, size)])
    samples = [(us, speed) for (times, _, _), speed in rounds for us in times]
    steps = [step for (_, taken, _), _ in rounds for step in taken]
    rate = of_work([(len(times), seconds, speed) for (times, _, seconds), speed in rounds], "pods/s")
    paced_note = f"each pod's time normalised by the speed around its round of {size} pods"
    return [
        {"issue": "#3", "name": "allocator scheduler_perf 500x10 median per-node allocate (evidence on)",
         **of_samples(samples, "us").row("us", 1), "target": "<= 200",
         "note": f"{pods} one-device claims filling {nodes} nodes x {per_node} devices; {paced_note}"},
        {"issue": "#3", "name": "allocator scheduler_perf 500x10 p99 per-node allocate",
         **of_samples(samples, "us", nearest_rank_of(0.99)).row("us", 1), "target": "",
         "note": f"includes the first visit of each node (pool view built, CEL evaluated); {paced_note}"},
        {"issue": "#3", "name": "allocator scheduler_perf 500x10 pods/s (one node per pod)", **rate.row("pods/s", 1),
         "target": "", "note": "incl. claim parsing and state updates, each round's time normalised by the speed "
                               "around it; upstream perf-dash threshold 64 pods/s for whole scheduling"},
        {"issue": "#3", "name": "allocator scheduler_perf 500x10 median steps", "value": statistics.median_low(steps),
         "unit": "allocateOne calls", "target": "4", "note": "request, slot done, claim done, all done"},
    ]


def _gpu(index: int, product: tuple[str, str, str, str]) -> dict[str, Any]:
    name, arch, cc, memory = product
    return {"name": f"gpu-{index}", "attributes": {
        "type": {"string": "gpu"}, "productName": {"string": name}, "architecture": {"string": arch}, "brand": {"string": "Nvidia"},
        "driverVersion": {"version": "580.105.8"}, "cudaComputeCapability": {"version": cc},
        "resource.kubernetes.io/pcieRoot": {"string": f"pci0000:{index // 4}"}},
        "capacity": {"memory": {"value": memory}}}


def nvidia_inventory_and_claim(nodes: int, per_node: int) -> tuple[Inventory, ResourceClaim]:
    """The NVIDIA-like cluster (products in turn per node) and the H100 → A100 → L40S claim."""
    slices = [_slice(f"gpu-node-{n}", GPU_DRIVER, [_gpu(i, PRODUCTS[n % 3]) for i in range(per_node)]) for n in range(nodes)]
    gpu_class = _class("gpu.nvidia.com", "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'")
    inventory = Inventory(slices=slices, classes=[gpu_class], features=Features())
    common = ["device.attributes['gpu.nvidia.com'].driverVersion.compareTo(semver('550.0.0')) >= 0"]

    def tier(name: str, product: str, memory: str) -> dict[str, Any]:
        return {"name": name, "deviceClassName": "gpu.nvidia.com", "selectors": [{"cel": {"expression": e}} for e in [
            f"device.attributes['gpu.nvidia.com'].productName.startsWith('{product}')",
            f"device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('{memory}')) >= 0", *common]]}

    claim = _claim("train", [{"name": "gpu", "firstAvailable": [
        tier("h100", "NVIDIA H100", "79Gi"), tier("a100", "NVIDIA A100", "40Gi"), tier("l40s", "NVIDIA L40S", "40Gi")]}])
    return inventory, claim


def nvidia_shape(nodes: int = 1000, per_node: int = 8) -> list[dict[str, Any]]:
    inventory, claim = nvidia_inventory_and_claim(nodes, per_node)
    node_objs = list(enumerate(Node(name=f"gpu-node-{n}") for n in range(nodes)))
    allocator = Allocator(inventory, AllocatedState())

    def visit(chunk: list[tuple[int, Node]]) -> list[tuple[str, float, int]]:
        visited = []
        for n, node in chunk:
            t0 = time.perf_counter()
            outcome = allocator.allocate(node, [claim], explain=True)
            visited.append((PRODUCTS[n % 3][0], (time.perf_counter() - t0) * 1e6, outcome.steps))
            assert outcome.status is Status.SUCCESS
        return visited

    size = -(-nodes // NODE_ROUNDS)
    rows: list[dict[str, Any]] = []
    for label in ("cold", "warm"):
        # each sample is a fraction of a millisecond: normalised by the speed of the round of nodes it
        # was taken in, between passes of the cpu workload (benchmarks.interleaved)
        per_model: dict[str, list[tuple[float, float]]] = {p[0]: [] for p in PRODUCTS}
        steps: dict[str, list[int]] = {p[0]: [] for p in PRODUCTS}
        rounds = [node_objs[i:i + size] for i in range(0, nodes, size)]
        for visited, speed in paced([functools.partial(visit, chunk) for chunk in rounds]):
            for product, us, step in visited:
                per_model[product].append((us, speed))
                steps[product].append(step)
        all_samples = [s for v in per_model.values() for s in v]
        note = ("first visit of every node: pool view built, selectors evaluated per device (answers shared "
                "by devices that agree on the values a selector reads)" if label == "cold"
                else "selector results cached per device in the inventory")
        rows.append({"issue": "#3", "name": f"allocator nvidia 1000x8 median per-node allocate, {label} (evidence on)",
                     **of_samples(all_samples, "us").row("us", 1), "target": "<= 200",
                     "note": f"{note}; each node's time normalised by the speed around its round of {size} nodes"})
        if label == "cold":
            rows.append({"issue": "#3", "name": "allocator nvidia 1000x8 p90 per-node allocate, cold",
                         **of_samples(all_samples, "us", nearest_rank_of(0.9)).row("us", 1), "target": "",
                         "note": "includes garbage-collector pauses; each node's time normalised as the median's"})
        for product, samples in per_model.items():
            rows.append({"issue": "#3", "name": f"allocator nvidia 1000x8 {label} median on {product} nodes",
                         **of_samples(samples, "us").row("us", 1), "target": "<= 200",
                         "note": f"median steps {statistics.median_low(steps[product])}"})
    return rows


def run() -> list[dict[str, Any]]:
    return scheduler_perf_shape() + nvidia_shape()


if __name__ == "__main__":
    for row in run():
        print(row)
