"""Property: a device ``why`` calls ``available`` is one the allocator gives the pod on its node.

For random small dumps — H100s and A100s on PCIe roots and NUMA nodes, NICs, devices held by
another pod, a pending claim asking for a GPU (H100 first, then A100) with or without a NIC and
``matchAttribute`` / ``distinctAttribute`` constraints across them — every H100 ``why`` judges is
checked by allocating the pod's claim on its node with every other H100 removed from the
dump: the claim gets that H100 exactly when ``why`` called it ``available``.
"""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from audit.allocator import AllocatedState, Allocator, Inventory, Status
from audit.dra.model import DeviceClass, Node, ResourceClaim, ResourceSlice, parse_object
from audit.explain import ClusterView, explain
from tests.explain.builders import DRIVER, GPU_CLASS, claim, gpu, node, pod, slice_

NIC_DRIVER = "rdma.example.com"
NIC_CLASS = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": NIC_DRIVER},
             "spec": {"selectors": [{"cel": {"expression": f"device.driver == '{NIC_DRIVER}'"}}]}}
ROOT = "resource.kubernetes.io/pcieRoot"
NUMA = "topology.example.com/numa"

CONSTRAINTS = {
    "match_root": {"requests": ["gpu", "nic"], "matchAttribute": ROOT},
    "match_root_h100_only": {"requests": ["gpu/h100", "nic"], "matchAttribute": ROOT},
    "distinct_numa": {"requests": ["gpu", "nic"], "distinctAttribute": NUMA},
    "match_numa_everywhere": {"matchAttribute": NUMA},
}

device_st = st.tuples(st.sampled_from(["H100", "A100"]), st.integers(0, 2), st.integers(0, 1), st.booleans())
nic_st = st.tuples(st.integers(0, 2), st.integers(0, 1), st.booleans())
node_st = st.tuples(st.lists(device_st, min_size=1, max_size=4), st.lists(nic_st, max_size=2))
case_st = st.tuples(st.lists(node_st, min_size=1, max_size=2), st.booleans(),
                    st.lists(st.sampled_from(sorted(CONSTRAINTS)), max_size=2, unique=True))


def _attrs(root: int, numa: int) -> dict[str, Any]:
    return {ROOT: {"string": f"pci0000:{root:02x}"}, NUMA: {"int": numa}}


def _build(nodes: list[tuple[list[Any], list[Any]]], nic: bool, constraints: list[str]) -> list[dict[str, Any]]:
    objects: list[dict[str, Any]] = [copy.deepcopy(GPU_CLASS), copy.deepcopy(NIC_CLASS)]
    held: list[dict[str, str]] = []
    for i, (gpus, nics) in enumerate(nodes):
        name = f"node-{i}"
        objects.append(node(name))
        devices = []
        for j, (model, root, numa, busy) in enumerate(gpus):
            dev = gpu(f"gpu-{j}", model)
            dev["attributes"].update(_attrs(root, numa))
            devices.append(dev)
            if busy:
                held.append({"request": "gpu", "driver": DRIVER, "pool": name, "device": f"gpu-{j}"})
        objects.append(slice_(name, devices))
        if nics:
            nic_devices = [{"name": f"nic-{j}", "attributes": _attrs(root, numa)} for j, (root, numa, _) in enumerate(nics)]
            objects.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                            "metadata": {"name": f"{name}-nic"},
                            "spec": {"driver": NIC_DRIVER, "nodeName": name, "devices": nic_devices,
                                     "pool": {"name": f"{name}-nic", "generation": 1, "resourceSliceCount": 1}}})
            held += [{"request": "nic", "driver": NIC_DRIVER, "pool": f"{name}-nic", "device": f"nic-{j}"}
                     for j, (_, _, busy) in enumerate(nics) if busy]
    other = claim("other", "team-b")
    other["spec"]["devices"]["requests"] = [{"name": "gpu", "exactly": {"deviceClassName": DRIVER}},
                                            {"name": "nic", "exactly": {"deviceClassName": NIC_DRIVER}}]
    other["status"] = {"allocation": {"devices": {"results": held}}}
    asking = claim("train-gpu", constraints=[CONSTRAINTS[c] for c in constraints] or None)
    if nic:
        asking["spec"]["devices"]["requests"].append({"name": "nic", "exactly": {"deviceClassName": NIC_DRIVER}})
    objects += [other, asking, pod("train", "train-gpu")]
    return objects


def _gets_it(objects: list[dict[str, Any]], device: str, node_name: str) -> bool:
    """Whether the pod's claim gets ``device`` for its H100 on the node once every other H100 is gone."""
    trimmed = copy.deepcopy(objects)
    for obj in trimmed:
        spec = obj.get("spec") or {}
        if obj["kind"] == "ResourceSlice" and spec.get("driver") == DRIVER:
            spec["devices"] = [d for d in spec["devices"]
                               if f"{DRIVER}/{spec['pool']['name']}/{d['name']}" == device
                               or "H100" not in d["attributes"]["productName"]["string"]]
    parsed = [parse_object(o) for o in trimmed if o["kind"] != "Pod"]
    slices = [o for o in parsed if isinstance(o, ResourceSlice)]
    classes = [o for o in parsed if isinstance(o, DeviceClass)]
    claims = {o.name: o for o in parsed if isinstance(o, ResourceClaim)}
    the_node = next(o for o in parsed if isinstance(o, Node) and o.name == node_name)
    state = AllocatedState.from_claims([claims["other"]])
    outcome = Allocator(Inventory(slices=slices, classes=classes), state).allocate(the_node, [claims["train-gpu"]])
    if outcome.status is not Status.SUCCESS:
        return False
    return any(r["request"] == "gpu/h100" and f"{r['driver']}/{r['pool']}/{r['device']}" == device
               for r in outcome.allocations[0].results)


@settings(max_examples=60, deadline=None)
@given(case_st)
def test_available_h100_is_allocated_alone_and_nothing_else_is(case: tuple[Any, bool, list[str]]) -> None:
    nodes, nic, constraints = case
    objects = _build(nodes, nic, constraints)
    answer = explain(ClusterView.from_objects(objects), "team-a/train", "H100", detail=True)
    assert answer.devices is not None
    for row in answer.devices:
        assert _gets_it(objects, row.device, row.node) is (row.reason == "available"), (row, constraints, nic)


def test_the_property_sees_a_constraint_rule_out_a_free_h100() -> None:
    """The generator reaches the case the property exists for: a free H100 whose root has no free NIC."""
    objects = _build([([("H100", 0, 0, False), ("H100", 1, 0, False)], [(1, 0, False)])], True, ["match_root"])
    answer = explain(ClusterView.from_objects(objects), "team-a/train", "H100", detail=True)
    assert answer.devices is not None
    assert [(d.device, d.reason) for d in answer.devices] == [
        (f"{DRIVER}/node-0/gpu-0", "constraint_unsatisfied"), (f"{DRIVER}/node-0/gpu-1", "available")]
    assert not _gets_it(objects, f"{DRIVER}/node-0/gpu-0", "node-0")
    assert _gets_it(objects, f"{DRIVER}/node-0/gpu-1", "node-0")
