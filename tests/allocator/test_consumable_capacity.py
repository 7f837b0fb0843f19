"""Consumable capacity: request policies, shares of multi-allocatable devices, shareID."""

from __future__ import annotations

import pytest

from audit.allocator import AllocatedState, Allocator, Quirks, Status
from audit.dra.model import ResourceClaim
from tests.allocator.helpers import (
    NODE_1,
    allocated,
    build,
    claim,
    device,
    device_class,
    node,
    picks,
    request,
    resource_slice,
    result,
    run,
)

CLASS_A = device_class("class-a")


def nic(name: str = "nic-1", bandwidth: object = "10G", multi: bool = True) -> dict:
    cap = {"bandwidth": bandwidth if isinstance(bandwidth, dict) else {"value": bandwidth}}
    return device(name, capacity=cap, allowMultipleAllocations=multi)


def nic_slice(*devices: dict) -> dict:
    return resource_slice("slice-1", NODE_1, "pool-1", devices=list(devices) or [nic()])


def bw_claim(name: str, amount: str | None) -> dict:
    return claim(name, request("req-0", "class-a", capacity=None if amount is None else {"bandwidth": amount}))


def test_multi_allocatable_device_is_shared_with_consumed_capacity_and_share_ids() -> None:
    outcome = run([CLASS_A, nic_slice(), bw_claim("claim-0", "4G"), bw_claim("claim-1", "4G")])
    results = [a.results[0] for a in outcome.allocations]
    assert [r["device"] for r in results] == ["nic-1", "nic-1"]
    assert [r["consumedCapacity"] for r in results] == [{"bandwidth": "4G"}, {"bandwidth": "4G"}]
    assert results[0]["shareID"] != results[1]["shareID"]
    assert all(len(r["shareID"]) == 36 for r in results)


def test_share_ids_are_deterministic_and_injectable() -> None:
    objs = [CLASS_A, nic_slice(), bw_claim("claim-0", "4G")]
    first = run(objs).allocations[0].results[0]["shareID"]
    assert run(objs).allocations[0].results[0]["shareID"] == first
    inventory, pending, _ = build(objs)

    def fixed(claim: ResourceClaim, request: str, device_id: str, index: int) -> str:
        return f"{claim.name}-{request}-{index}"

    outcome = Allocator(inventory, AllocatedState(), share_ids=fixed).allocate(node(), pending)
    assert outcome.allocations[0].results[0]["shareID"] == "claim-0-req-0-0"


def test_capacity_exhausted_by_earlier_claims_in_the_same_call() -> None:
    outcome = run([CLASS_A, nic_slice(), bw_claim("claim-0", "4G"), bw_claim("claim-1", "4G"), bw_claim("claim-2", "4G")])
    assert outcome.status is Status.UNSATISFIABLE


def test_capacity_already_allocated_counts() -> None:
    busy = allocated(bw_claim("busy", "8G"), result("req-0", "driver-a", "pool-1", "nic-1", shareID="s-1", consumedCapacity={"bandwidth": "8G"}))
    assert run([CLASS_A, nic_slice(), busy, bw_claim("claim-0", "4G")]).status is Status.UNSATISFIABLE
    assert picks(run([CLASS_A, nic_slice(), busy, bw_claim("claim-0", "2G")])) == [("claim-0", "req-0", "pool-1/nic-1")]


POLICY_CASES = [
    pytest.param({"value": "10Gi", "requestPolicy": {"validRange": {"min": "1Gi", "step": "1Gi"}}}, "1536Mi", "2Gi",
                 id="valid-range-step-rounds-up"),
    pytest.param({"value": "10Gi", "requestPolicy": {"validRange": {"min": "2Gi"}}}, "1Gi", "2Gi", id="valid-range-below-min-takes-min"),
    pytest.param({"value": "10Gi", "requestPolicy": {"validValues": ["1Gi", "4Gi", "8Gi"]}}, "2Gi", "4Gi",
                 id="valid-values-round-up"),
    pytest.param({"value": "10Gi", "requestPolicy": {"default": "3Gi", "validValues": ["3Gi"]}}, None, "3Gi", id="default-when-not-requested"),
    pytest.param({"value": "10Gi"}, None, "10Gi", id="whole-capacity-when-not-requested"),
]


@pytest.mark.parametrize(("capacity", "requested", "consumed"), POLICY_CASES)
def test_request_policy_rounding(capacity: dict, requested: str | None, consumed: str) -> None:
    outcome = run([CLASS_A, nic_slice(nic(bandwidth=capacity)), bw_claim("claim-0", requested)])
    assert outcome.allocations[0].results[0]["consumedCapacity"] == {"bandwidth": consumed}


@pytest.mark.parametrize(("capacity", "requested"), [
    pytest.param({"value": "10Gi", "requestPolicy": {"validRange": {"min": "1Gi", "max": "4Gi"}}}, "5Gi", id="above-range-max"),
    pytest.param({"value": "10Gi", "requestPolicy": {"validValues": ["1Gi", "4Gi"]}}, "5Gi", id="above-every-valid-value"),
    pytest.param({"value": "10Gi"}, "11Gi", id="more-than-the-capacity"),
])
def test_request_policy_violation_rejects_device(capacity: dict, requested: str) -> None:
    outcome = run([CLASS_A, nic_slice(nic(bandwidth=capacity)), bw_claim("claim-0", requested)], explain=True)
    assert outcome.status is Status.UNSATISFIABLE
    assert outcome.evidence[0].verdicts[0].reason == "capacity_insufficient"


def test_exclusive_device_filtered_by_requested_capacity() -> None:
    devices = [device("gpu-40", capacity={"memory": {"value": "40Gi"}}), device("gpu-80", capacity={"memory": {"value": "80Gi"}})]
    objs = [CLASS_A, resource_slice("slice-1", NODE_1, "pool-1", devices=devices),
            claim("claim-0", request("req-0", "class-a", capacity={"memory": "60Gi"}))]
    outcome = run(objs)
    assert picks(outcome) == [("claim-0", "req-0", "pool-1/gpu-80")]
    assert "consumedCapacity" not in outcome.allocations[0].results[0]
    assert "shareID" not in outcome.allocations[0].results[0]


def test_request_for_capacity_the_device_lacks_skips_it() -> None:
    devices = [device("plain"), device("with-mem", capacity={"memory": {"value": "1Gi"}})]
    objs = [CLASS_A, resource_slice("slice-1", NODE_1, "pool-1", devices=devices),
            claim("claim-0", request("req-0", "class-a", capacity={"memory": "1Gi"}))]
    outcome = run(objs, explain=True)
    assert picks(outcome) == [("claim-0", "req-0", "pool-1/with-mem")]
    assert outcome.evidence[0].verdicts[0].detail_dict() == {"capacity": "memory", "problem": "not defined"}


def test_consumed_capacity_lists_every_capacity_even_zero() -> None:
    dev = device("nic-1", capacity={"bandwidth": {"value": "10G"}, "queues": {"value": "8", "requestPolicy": {"default": "0", "validRange": {"min": "0"}}}},
                 allowMultipleAllocations=True)
    outcome = run([CLASS_A, nic_slice(dev), bw_claim("claim-0", "1G")])
    assert outcome.allocations[0].results[0]["consumedCapacity"] == {"bandwidth": "1G", "queues": "0"}


def test_multi_allocatable_device_never_marked_in_use() -> None:
    objs = [CLASS_A, nic_slice(), claim("claim-0", request("req-0", "class-a", capacity={"bandwidth": "1G"}),
                                       request("req-1", "class-a", capacity={"bandwidth": "1G"}))]
    assert [p[2] for p in picks(run(objs))] == ["pool-1/nic-1", "pool-1/nic-1"]


def test_exclusively_allocated_multi_device_stays_in_use() -> None:
    busy = allocated(bw_claim("busy", None), result("req-0", "driver-a", "pool-1", "nic-1"))
    assert run([CLASS_A, nic_slice(), busy, bw_claim("claim-0", "1G")]).status is Status.UNSATISFIABLE


@pytest.mark.parametrize(("quirks", "expected"), [
    pytest.param(Quirks(), ["pool-1/nic-2"], id="all-mode-uses-remaining-capacity-in-1.36"),
    pytest.param(Quirks(all_mode_remaining_capacity=False), None, id="all-mode-static-capacity-fixed"),
])
def test_all_mode_with_consumable_capacity(quirks: Quirks, expected: list[str] | None) -> None:
    busy = allocated(bw_claim("busy", "8G"), result("req-0", "driver-a", "pool-1", "nic-1", shareID="s-1", consumedCapacity={"bandwidth": "8G"}))
    objs = [CLASS_A, nic_slice(nic("nic-1"), nic("nic-2")), busy,
            claim("claim-0", request("req-0", "class-a", mode="All", capacity={"bandwidth": "4G"}))]
    outcome = run(objs, quirks=quirks)
    if expected is None:
        assert outcome.status is Status.UNSATISFIABLE
    else:
        assert [p[2] for p in picks(outcome)] == expected


def test_with_distinct_constraints_on_shared_devices() -> None:
    devices = [nic("nic-1"), nic("nic-2")]
    for i, d in enumerate(devices):
        d["attributes"] = {"resource.kubernetes.io/pcieRoot": {"string": f"pci-{i}"}}
    objs = [CLASS_A, nic_slice(*devices),
            claim("claim-0", request("req-0", "class-a", capacity={"bandwidth": "1G"}), request("req-1", "class-a", capacity={"bandwidth": "1G"}),
                  constraints=[{"distinctAttribute": "resource.kubernetes.io/pcieRoot"}])]
    assert [p[2] for p in picks(run(objs))] == ["pool-1/nic-1", "pool-1/nic-2"]
    same = run(objs[:2] + [claim("claim-0", request("req-0", "class-a", capacity={"bandwidth": "1G"}),
                                 request("req-1", "class-a", capacity={"bandwidth": "1G"}))])
    assert [p[2] for p in picks(same)] == ["pool-1/nic-1", "pool-1/nic-1"]


def test_multi_allocatable_device_is_exclusive_without_the_gate() -> None:
    shared = device("shared-1", allowMultipleAllocations=True)
    objs = [CLASS_A, nic_slice(shared), claim("claim-0", request("req-0", "class-a")), claim("claim-1", request("req-0", "class-a"))]
    assert [p[2] for p in picks(run(objs))] == ["pool-1/shared-1", "pool-1/shared-1"]
    outcome = run(objs, gates="DRAConsumableCapacity=false")
    assert outcome.status is Status.UNSATISFIABLE
