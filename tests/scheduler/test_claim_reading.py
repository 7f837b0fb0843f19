"""Pods and claims read one way: the engine's tiers and the explanation's tiers list the same requests."""

from __future__ import annotations

from typing import Any

import pytest

from audit.explain.tiers import pod_tiers
from audit.scheduler.claimspec import (
    cel_expressions,
    claim_key,
    claim_requests,
    device_count,
    pod_claim_names,
    result_device_id,
)
from audit.scheduler.tiers import claim_tiers

H100 = {"cel": {"expression": "device.attributes['gpu.nvidia.com'].productName.startsWith('NVIDIA H100')"}}
CLAIM: dict[str, Any] = {
    "kind": "ResourceClaim", "metadata": {"name": "train-gpu", "namespace": "alpha"},
    "spec": {"devices": {"requests": [
        {"name": "gpu", "firstAvailable": [
            {"name": "h100", "deviceClassName": "gpu.nvidia.com", "count": 2, "selectors": [H100]},
            {"name": "any", "deviceClassName": "gpu.nvidia.com", "count": 4}]},
        {"name": "nic", "exactly": {"deviceClassName": "nic.example.com", "allocationMode": "All"}},
        {"name": "legacy", "deviceClassName": "gpu.nvidia.com", "count": 3},
    ]}},
}


@pytest.mark.parametrize(
    ("pod", "expected"),
    [
        pytest.param({"spec": {"resourceClaims": [{"name": "gpu", "resourceClaimName": "shared"}]}},
                     [("gpu", "shared")], id="named-claim"),
        pytest.param({"spec": {"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "t"}]},
                      "status": {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "p-gpu-x1"}]}},
                     [("gpu", "p-gpu-x1")], id="template-claim-from-status"),
        pytest.param({"spec": {"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "t"}]}},
                     [("gpu", "")], id="template-claim-not-created-yet"),
        pytest.param({"spec": {}}, [], id="no-claims"),
    ],
)
def test_pod_claim_names(pod, expected):
    assert pod_claim_names(pod) == expected


def test_claim_requests_in_preference_order():
    requests = claim_requests(CLAIM)
    assert [(name, first, [sub for sub, _ in alts]) for name, first, alts in requests] == [
        ("gpu", True, ["h100", "any"]), ("nic", False, [""]), ("legacy", False, [""])]
    assert requests[2][2][0][1]["count"] == 3  # the flat request shape reads as exactly


@pytest.mark.parametrize(
    ("request_body", "count"),
    [
        pytest.param({}, 1, id="default-one"),
        pytest.param({"count": 4}, 4, id="explicit-count"),
        pytest.param({"allocationMode": "All"}, 1, id="all-mode-needs-one-for-feasibility"),
    ],
)
def test_device_count(request_body, count):
    assert device_count(request_body) == count


def test_small_readers():
    assert claim_key(CLAIM) == "alpha/train-gpu"
    assert cel_expressions([H100, {"cel": {}}]) == (H100["cel"]["expression"], "")
    assert cel_expressions(None) == ()
    assert result_device_id({"request": "gpu", "driver": "gpu.nvidia.com", "pool": "n1", "device": "gpu-0"}) == (
        "gpu.nvidia.com/n1/gpu-0")


def test_engine_and_explanation_see_the_same_tiers():
    engine = [(t.claim, t.request, t.subrequest, t.index, t.count)
              for rt in claim_tiers(CLAIM, lambda _cls, _sel: ()) for t in rt.tiers]
    explained = [(t.claim, t.request, t.subrequest, t.sub_index, t.count) for t in pod_tiers([CLAIM])]
    assert engine == explained == [
        ("alpha/train-gpu", "gpu", "h100", 0, 2), ("alpha/train-gpu", "gpu", "any", 1, 4),
        ("alpha/train-gpu", "nic", "", 0, 1), ("alpha/train-gpu", "legacy", "", 0, 3)]


def test_tiers_read_once_per_spec_are_each_claims_own():
    """Claims of one template and size share their spec: ``spec_tiers`` reads it once, gives each
    claim the tiers ``claim_tiers`` would (under its own key), and keeps nothing per claim."""
    from audit.scheduler.attempt import model_matcher
    from tests.scheduler.worlds import cluster, submit

    sim = cluster()
    for name in ("one", "two"):
        submit(sim, name, size=2)
    claims = sorted(sim.world.objects["ResourceClaim"].values(), key=claim_key)
    assert len(claims) == 2 and claims[0]["spec"] is claims[1]["spec"]
    matcher = model_matcher(sim.world)
    kept = dict(matcher._tiers)
    got = [matcher.spec_tiers(c) for c in claims]
    assert got == [claim_tiers(c, matcher) for c in claims]
    assert [rt.tiers[0].claim for rts in got for rt in rts] == [claim_key(c) for c in claims]
    assert [t.models for t in got[0][0].tiers] == [("H100",), ("A100",), ("A100", "H100", "L40S")]
    assert matcher._tiers == kept
