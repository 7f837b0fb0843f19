"""Which devices a node sees and in which order: pools, slices, devices."""

from __future__ import annotations

import pytest

from audit.allocator import Status
from tests.allocator.helpers import (
    DRIVER_A,
    DRIVER_B,
    NODE_1,
    NODE_2,
    claim,
    device,
    device_class,
    devices_of,
    request,
    resource_slice,
    run,
)

CLASS_ANY = device_class("class-a", driver=None)


def one_device_claim(count: int = 1) -> dict:
    return claim("claim-0", request("req-0", "class-a", count))


CASES = [
    pytest.param(
        [resource_slice("slice-2", NODE_1, "pool-2", devices=[device("device-2")]),
         resource_slice("slice-1", NODE_1, "pool-1", devices=[device("device-1")])],
        {}, ["driver-a/pool-1/device-1"], id="pools-given-in-reverse-lowest-pool-first",
    ),
    pytest.param(
        [resource_slice("slice-1", NODE_1, "pool-1", driver=DRIVER_B, devices=[device("device-1")]),
         resource_slice("slice-2", NODE_1, "pool-9", driver=DRIVER_A, devices=[device("device-2")])],
        {}, ["driver-a/pool-9/device-2"], id="driver-sorts-before-pool-name",
    ),
    pytest.param(
        [resource_slice("slice-b", NODE_1, "pool-1", count=2, devices=[device("device-b")]),
         resource_slice("slice-a", NODE_1, "pool-1", count=2, devices=[device("device-a")])],
        {}, ["driver-a/pool-1/device-a"], id="slices-given-in-reverse-lowest-slice-name-first",
    ),
    pytest.param(
        [resource_slice("slice-1", NODE_1, "pool-1", devices=[device("gpu-1"), device("gpu-0")])],
        {}, ["driver-a/pool-1/gpu-1"], id="device-order-inside-a-slice-is-kept",
    ),
    pytest.param(
        [resource_slice("slice-1", NODE_1, "pool-1", devices=[device("device-1", bindingConditions=["ready"])]),
         resource_slice("slice-2", NODE_1, "pool-2", devices=[device("device-2")])],
        {}, ["driver-a/pool-2/device-2"], id="binding-condition-pool-tried-last",
    ),
    pytest.param(
        [resource_slice("Slice-b", NODE_1, "Pool-B", devices=[device("device-b")]),
         resource_slice("slice-a", NODE_1, "pool-a", devices=[device("device-a")])],
        {}, ["driver-a/Pool-B/device-b"], id="byte-wise-order-uppercase-first",
    ),
    pytest.param(
        [resource_slice("slice-old", NODE_1, "pool-1", generation=1, devices=[device("device-old")]),
         resource_slice("slice-new", NODE_1, "pool-1", generation=2, devices=[device("device-new")])],
        {}, ["driver-a/pool-1/device-new"], id="obsolete-slice-lower-generation-ignored",
    ),
    pytest.param(
        [resource_slice("slice-1", NODE_2, "pool-1", devices=[device("device-1")]),
         resource_slice("slice-2", NODE_1, "pool-2", devices=[device("device-2")])],
        {}, ["driver-a/pool-2/device-2"], id="other-node-slice-ignored",
    ),
    pytest.param(
        [resource_slice("slice-1", None, "pool-1", allNodes=True, devices=[device("device-1")])],
        {}, ["driver-a/pool-1/device-1"], id="all-nodes-slice-is-relevant",
    ),
    pytest.param(
        [resource_slice("slice-1", None, "pool-1", devices=[device("device-1")], nodeSelector={"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "region", "operator": "In", "values": ["east"]}]}]}),
         resource_slice("slice-2", None, "pool-2", devices=[device("device-2")], nodeSelector={"nodeSelectorTerms": [
             {"matchExpressions": [{"key": "region", "operator": "In", "values": ["west"]}]}]})],
        {"region": "west"}, ["driver-a/pool-2/device-2"], id="node-selector-slice-matches-node-labels",
    ),
    pytest.param(
        [resource_slice("slice-1", None, "pool-1", devices=[device("device-1")], nodeSelector={"nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [NODE_2]}]}]}),
         resource_slice("slice-2", None, "pool-2", devices=[device("device-2")], nodeSelector={"nodeSelectorTerms": [
             {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [NODE_1]}]}]})],
        {}, ["driver-a/pool-2/device-2"], id="node-selector-match-fields-metadata-name",
    ),
    pytest.param(
        [resource_slice("slice-1", NODE_1, "pool-1", count=2, devices=[device("device-1")]),
         resource_slice("slice-2", NODE_1, "pool-2", devices=[device("device-2")])],
        {}, ["driver-a/pool-2/device-2"], id="incomplete-pool-never-used",
    ),
    pytest.param(
        [resource_slice("slice-1", NODE_1, "pool-1", count=2, devices=[device("device-1")]),
         resource_slice("slice-1b", NODE_2, "pool-1", count=2, devices=[device("device-9")])],
        {}, ["driver-a/pool-1/device-1"], id="pool-complete-across-nodes",
    ),
    pytest.param(
        [resource_slice("slice-1", NODE_1, "pool-1", count=2, generation=1, devices=[device("device-1")]),
         resource_slice("slice-1b", NODE_2, "pool-1", count=1, generation=2, devices=[device("device-9")]),
         resource_slice("slice-2", NODE_1, "pool-2", devices=[device("device-2")])],
        {}, ["driver-a/pool-2/device-2"], id="pool-obsolete-when-newer-generation-elsewhere",
    ),
]


@pytest.mark.parametrize(("slices", "labels", "expected"), CASES)
def test_first_device_follows_upstream_order(slices: list, labels: dict, expected: list[str]) -> None:
    outcome = run([CLASS_ANY, *slices, one_device_claim()], labels=labels)
    assert outcome.status is Status.SUCCESS, outcome.message
    assert devices_of(outcome) == expected


def test_unknown_node_selection_field_makes_slice_irrelevant() -> None:
    outcome = run([CLASS_ANY, resource_slice("slice-1", None, "pool-1", devices=[device("device-1")]), one_device_claim()])
    assert outcome.status is Status.UNSATISFIABLE
    assert outcome.message == "cannot allocate all claims"


@pytest.mark.parametrize("gates", ["", "DRAPartitionableDevices=false"], ids=["gate-on", "gate-off"])
def test_per_device_node_selection_needs_partitionable_gate(gates: str) -> None:
    sl = resource_slice("slice-1", None, "pool-1", perDeviceNodeSelection=True,
                        devices=[device("device-1", nodeName=NODE_2), device("device-2", nodeName=NODE_1)])
    outcome = run([CLASS_ANY, sl, one_device_claim()], gates=gates, explain=True)
    if gates:
        assert outcome.status is Status.UNSATISFIABLE
    else:
        assert devices_of(outcome) == ["driver-a/pool-1/device-2"]
        verdicts = {v.device: v.reason for v in outcome.evidence[0].verdicts}
        assert verdicts == {"driver-a/pool-1/device-1": "node_mismatch", "driver-a/pool-1/device-2": "selected"}


def test_lexicographical_not_numeric_pool_order() -> None:
    slices = [resource_slice(f"slice-{n}", NODE_1, f"pool-{n}", devices=[device(f"device-{n}")]) for n in (2, 10, 1)]
    outcome = run([CLASS_ANY, *slices, one_device_claim(3)])
    assert devices_of(outcome) == ["driver-a/pool-1/device-1", "driver-a/pool-10/device-10", "driver-a/pool-2/device-2"]


def test_index_named_slices_keep_the_driver_order() -> None:
    # resourceslice controller >= 1.36 names slices <index as >=5 hex digits>-<driver>-...
    slices = [resource_slice(f"{i:05x}-driver-a-node-1-x", NODE_1, "pool-1", count=3, devices=[device(f"device-{i}")]) for i in (2, 0, 1)]
    outcome = run([CLASS_ANY, *slices, one_device_claim(3)])
    assert devices_of(outcome) == ["driver-a/pool-1/device-0", "driver-a/pool-1/device-1", "driver-a/pool-1/device-2"]
