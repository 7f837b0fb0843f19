"""Per-device evidence: one verdict per device per tier, with structured detail (closed vocabulary)."""

from __future__ import annotations

from audit.allocator import Status
from audit.records import Reason
from tests.allocator.helpers import (
    NODE_1,
    allocated,
    claim,
    device,
    device_class,
    first_available,
    request,
    resource_slice,
    result,
    run,
    sub,
    verdicts,
)

H100 = "device.attributes['driver-a'].model == 'h100'"
CLASS_GPU = device_class("gpu", selectors=["device.attributes['driver-a'].type == 'gpu'"])
DEVICES = [
    device("nic-0", {"type": "nic", "model": "cx7"}),
    device("gpu-0", {"type": "gpu", "model": "h100"}, taints=[{"key": "gpu.nvidia.com/unhealthy", "effect": "NoExecute"}]),
    device("gpu-1", {"type": "gpu", "model": "h100"}),
    device("gpu-2", {"type": "gpu", "model": "a100"}),
    device("gpu-3", {"type": "gpu", "model": "a100"}),
]
SLICE = resource_slice("slice-1", NODE_1, "pool-1", devices=DEVICES)
BUSY = allocated(claim("busy", request("r", "gpu")), result("r", "driver-a", "pool-1", "gpu-1"))
FALLBACK = claim("claim-0", first_available("gpu", sub("h100", "gpu", selectors=[H100]), sub("any", "gpu")))


def test_why_was_h100_skipped() -> None:
    outcome = run([CLASS_GPU, SLICE, BUSY, FALLBACK], explain=True)
    assert outcome.status is Status.SUCCESS
    assert verdicts(outcome, "gpu/h100") == {
        "nic-0": "class_selector_mismatch", "gpu-0": "unhealthy", "gpu-1": "in_use",
        "gpu-2": "request_selector_mismatch", "gpu-3": "request_selector_mismatch"}
    assert verdicts(outcome, "gpu/any") == {
        "nic-0": "class_selector_mismatch", "gpu-0": "unhealthy", "gpu-1": "in_use", "gpu-2": "selected", "gpu-3": "not_reached"}


def test_verdict_details_name_selector_and_taint() -> None:
    outcome = run([CLASS_GPU, SLICE, BUSY, FALLBACK], explain=True)
    tier = {v.device.rsplit("/", 1)[1]: v.detail_dict() for v in outcome.evidence[0].verdicts}
    assert tier["nic-0"] == {"selector": "1", "expression": "device.attributes['driver-a'].type == 'gpu'"}
    assert tier["gpu-2"] == {"selector": "0", "expression": H100}
    assert tier["gpu-0"] == {"key": "gpu.nvidia.com/unhealthy", "value": "", "effect": "NoExecute"}
    assert tier["gpu-1"] == {"by": "allocated"}


def test_every_tier_lists_every_candidate_once_in_candidate_order() -> None:
    extra = resource_slice("slice-0", NODE_1, "pool-0", devices=[device("gpu-9", {"type": "gpu", "model": "h100"})])
    outcome = run([CLASS_GPU, SLICE, extra, BUSY, FALLBACK], explain=True)
    assert [(t.claim, t.request, t.subrequest_index) for t in outcome.evidence] == [
        ("default/claim-0", "gpu/h100", 0), ("default/claim-0", "gpu/any", 1)]
    for tier in outcome.evidence:
        assert [v.device for v in tier.verdicts] == ["driver-a/pool-0/gpu-9"] + [f"driver-a/pool-1/{d['name']}" for d in DEVICES]
        assert all(v.reason in set(Reason) for v in tier.verdicts)


def test_cel_error_is_recorded_before_the_node_fails() -> None:
    broken = claim("claim-0", request("gpu", "gpu", selectors=["device.attributes['driver-a'].missing == 1"]))
    outcome = run([CLASS_GPU, SLICE, broken], explain=True)
    assert outcome.status is Status.ERROR
    tier = verdicts(outcome, "gpu")
    assert tier["gpu-0"] == "cel_error"
    assert tier["nic-0"] == "class_selector_mismatch"
    assert tier["gpu-1"] == "not_reached"


def test_unsatisfiable_outcome_keeps_all_reasons() -> None:
    outcome = run([CLASS_GPU, SLICE, BUSY, claim("claim-0", request("gpu", "gpu", 3, selectors=[H100]))], explain=True)
    assert outcome.status is Status.UNSATISFIABLE
    assert verdicts(outcome, "gpu") == {
        "nic-0": "class_selector_mismatch", "gpu-0": "unhealthy", "gpu-1": "in_use",
        "gpu-2": "request_selector_mismatch", "gpu-3": "request_selector_mismatch"}


def test_second_claim_tier_sees_devices_taken_in_the_same_call() -> None:
    objs = [CLASS_GPU, SLICE, claim("claim-0", request("gpu", "gpu")), claim("claim-1", request("gpu", "gpu"))]
    outcome = run(objs, explain=True)
    assert verdicts(outcome, "gpu", claim="default/claim-1")["gpu-1"] == "in_use"
    held = next(v for v in outcome.evidence[1].verdicts if v.device.endswith("/gpu-1"))
    assert held.detail_dict() == {"by": "default/claim-0"}
    assert verdicts(outcome, "gpu", claim="default/claim-1")["gpu-2"] == "selected"


def test_explain_off_costs_no_evidence() -> None:
    outcome = run([CLASS_GPU, SLICE, FALLBACK])
    assert outcome.evidence == []
    assert outcome.steps == 5
