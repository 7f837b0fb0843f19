"""Every H100 the pod could have used gets exactly one primary reason, the first failing check."""

from __future__ import annotations

from typing import Any

import pytest

from audit.explain import ClusterView, explain
from audit.policy import parse_policy
from tests.explain.builders import claim, gpu, node, pod, scenario, slice_, sub

UNHEALTHY = {"key": "gpu.nvidia.com/unhealthy", "value": "xid-79", "effect": "NoSchedule"}
MAINTENANCE = {"key": "example.com/maintenance", "effect": "NoExecute"}
DRIVER_550 = "device.attributes['gpu.nvidia.com'].driverVersion.compareTo(semver('550.0.0')) >= 0"


def _explain(objects: list[dict[str, Any]], model: str = "H100", **kw: Any) -> Any:
    return explain(ClusterView.from_objects(objects), "team-a/train", model, detail=True, **kw)


def _counters_scenario() -> list[dict[str, Any]]:
    # One H100 partitioned by shared counters: the whole GPU and a MIG-like half share 80Gi of
    # memory; another claim holds the half, so the whole GPU's counters are used up.
    counters = slice_("", [], name="n1-counters", pool="n1", count=2,
                      sharedCounters=[{"name": "gpu-0-cs", "counters": {"memory": {"value": "80Gi"}}}])
    devices = slice_("n1", [
        gpu("gpu-0", consumesCounters=[{"counterSet": "gpu-0-cs", "counters": {"memory": {"value": "80Gi"}}}]),
        gpu("gpu-0-half", consumesCounters=[{"counterSet": "gpu-0-cs", "counters": {"memory": {"value": "40Gi"}}}]),
    ], name="n1-devices", count=2)
    return scenario(node("n1"), counters, devices, claim("other", "team-b", allocated=[("n1", "gpu-0-half")]))


CASES: list[tuple[str, list[dict[str, Any]], dict[str, int]]] = [
    ("available", scenario(node("n1"), slice_("n1", [gpu("gpu-0"), gpu("gpu-1")])), {"available": 2}),
    ("in_use", scenario(node("n1"), slice_("n1", [gpu("gpu-0"), gpu("gpu-1")]),
                        claim("other", "team-b", allocated=[("n1", "gpu-0")])), {"in_use": 1, "available": 1}),
    ("class_selector_mismatch", scenario(node("n1"), slice_("n1", [gpu("gpu-0", kind="vgpu"), gpu("gpu-1")])),
     {"class_selector_mismatch": 1, "available": 1}),
    ("request_selector_mismatch",
     scenario(node("n1"), slice_("n1", [gpu("gpu-0", driver_version="535.104.5"), gpu("gpu-1")]),
              pod_claim=claim("train-gpu", subs=[sub("h100", "H100", DRIVER_550)])),
     {"request_selector_mismatch": 1, "available": 1}),
    ("cel_error",  # a missing attribute is a runtime error that aborts the node (upstream)
     scenario(node("n1"), slice_("n1", [gpu("gpu-0", driver_version=None), gpu("gpu-1")]),
              pod_claim=claim("train-gpu", subs=[sub("h100", "H100", DRIVER_550)])),
     {"cel_error": 2}),
    ("node_mismatch",
     scenario(node("n1"), slice_("", [gpu("gpu-0", nodeName="n1"),
                                      gpu("gpu-1", nodeSelector={"nodeSelectorTerms": [{"matchExpressions": [
                                          {"key": "rack", "operator": "In", "values": ["r9"]}]}]})],
                                 name="rack-slice", pool="rack", perDeviceNodeSelection=True)),
     {"node_mismatch": 1, "available": 1}),
    ("capacity_insufficient",
     scenario(node("n1"), slice_("n1", [gpu("gpu-0", memory="40Gi"), gpu("gpu-1")]),
              pod_claim=claim("train-gpu", subs=[sub("h100", "H100", capacity={"requests": {"memory": "60Gi"}})])),
     {"capacity_insufficient": 1, "available": 1}),
    ("counters_exhausted", _counters_scenario(), {"in_use": 1, "counters_exhausted": 1}),
    ("unhealthy", scenario(node("n1"), slice_("n1", [gpu("gpu-0", taints=[UNHEALTHY]), gpu("gpu-1")])),
     {"unhealthy": 1, "available": 1}),
    ("taint_not_tolerated", scenario(node("n1"), slice_("n1", [gpu("gpu-0", taints=[MAINTENANCE]), gpu("gpu-1")])),
     {"taint_not_tolerated": 1, "available": 1}),
    ("constraint_unsatisfied",
     scenario(node("n1"), slice_("n1", [gpu("gpu-0"), gpu("gpu-1", attributes={
         **gpu("gpu-1")["attributes"], "nvlinkDomain": {"string": "nvl-1"}})]),
              pod_claim=claim("train-gpu", constraints=[{"requests": ["gpu"],
                                                         "matchAttribute": "gpu.nvidia.com/nvlinkDomain"}])),
     {"constraint_unsatisfied": 1, "available": 1}),
    ("pool_incomplete", scenario(node("n1"), slice_("n1", [gpu("gpu-0"), gpu("gpu-1")], count=2)),
     {"pool_incomplete": 2}),
    ("pool_invalid",  # a device consuming a counter set the pool does not have invalidates the pool
     scenario(node("n1"), slice_("n1", [gpu("gpu-0", consumesCounters=[
         {"counterSet": "missing", "counters": {"memory": {"value": "1Gi"}}}]), gpu("gpu-1")])),
     {"pool_invalid": 2}),
    ("node_filtered", scenario(node("n1", zone="b"), node("n2"), slice_("n1", [gpu("gpu-0")]),
                               slice_("n2", [gpu("gpu-0")]), pod_spec={"nodeSelector": {"zone": "a"}}),
     {"node_filtered": 1, "available": 1}),
]


@pytest.mark.parametrize(("objects", "expected"), [(c[1], c[2]) for c in CASES], ids=[c[0] for c in CASES])
def test_each_device_gets_its_first_failing_check(objects: list[dict[str, Any]], expected: dict[str, int]) -> None:
    answer = _explain(objects)
    assert answer.reasons == expected
    assert answer.visible == len(answer.devices) == sum(expected.values())
    assert sorted(d.device for d in answer.devices) == sorted({d.device for d in answer.devices})


def test_every_primary_reason_code_is_covered_by_a_case() -> None:
    from audit.explain.reasons import PRIMARY_ORDER

    covered = {code for _, _, expected in CASES for code in expected}
    assert covered == set(PRIMARY_ORDER)


def test_details_name_the_taint_the_selector_and_the_node_filter() -> None:
    answer = _explain(scenario(node("n1"), node("n2", taints=[{"key": "dedicated", "value": "b", "effect": "NoSchedule"}]),
                               slice_("n1", [gpu("gpu-0", taints=[UNHEALTHY]), gpu("gpu-1", driver_version="1.0.0")]),
                               slice_("n2", [gpu("gpu-0")]),
                               pod_claim=claim("train-gpu", subs=[sub("h100", "H100", DRIVER_550)])))
    by_device = {d.device: d for d in answer.devices}
    assert by_device["gpu.nvidia.com/n1/gpu-0"].detail["key"] == "gpu.nvidia.com/unhealthy"
    assert by_device["gpu.nvidia.com/n1/gpu-1"].detail["expression"] == DRIVER_550
    assert by_device["gpu.nvidia.com/n2/gpu-0"].detail == {"cause": "taint", "detail": "taint dedicated=b:NoSchedule"}
    assert answer.summary == ("H100 skipped: of 3 H100, 1 on nodes with taints the pod does not tolerate, "
                              "1 not matching the request's selectors, 1 unhealthy (taint gpu.nvidia.com/unhealthy). "
                              "Pod not allocated (pending). If scheduled now: nothing fits (tier 0 H100: 1 on nodes "
                              "with taints the pod does not tolerate, 1 not matching the request's selectors, "
                              "1 unhealthy).")


def test_model_not_in_the_preference_is_not_requested() -> None:
    objects = scenario(node("n1"), slice_("n1", [gpu("gpu-0"), gpu("gpu-1", "L40S")]))
    answer = _explain(objects, "L40S")
    # No A100 exists, so the second tier is named by its request.
    assert answer.blockers == [{"code": "not_requested", "preference": ["H100", "gpu/a100"]}]
    assert answer.reasons == {"request_selector_mismatch": 1}  # judged against the preferred tier
    assert answer.summary.startswith("L40S skipped: of 1 L40S, 1 not matching the request's selectors; "
                                     "L40S is not in the pod's preference list (H100, gpu/a100).")


def test_usable_devices_spread_over_nodes_are_insufficient_on_node() -> None:
    objects = scenario(node("n1"), node("n2"), slice_("n1", [gpu("gpu-0")]), slice_("n2", [gpu("gpu-0")]),
                       pod_claim=claim("train-gpu", subs=[sub("h100", "H100", count=2)]))
    answer = _explain(objects)
    assert answer.reasons == {"available": 2}
    assert answer.blockers == [{"code": "insufficient_on_node", "tier": 0, "model": "H100", "count": 2, "best": 1,
                                "best_node": "n1"}]
    assert "no node had 2 usable H100 together (at most 1 on node n1)" in answer.summary


def test_tenant_quota_used_up_is_quota_exhausted() -> None:
    policy = parse_policy({"apiVersion": "claimtrail.io/v1alpha1", "kind": "Policy", "metadata": {"name": "p"},
                           "spec": {"version": "v7", "tenants": [
                               {"name": "team-a", "namespaces": ["team-a"],
                                "quotas": {"H100": {"nominal": 1, "borrowingLimit": 0}}}]}})
    objects = scenario(node("n1"), slice_("n1", [gpu("gpu-0"), gpu("gpu-1")]),
                       claim("older", "team-a", allocated=[("n1", "gpu-0")]))
    answer = _explain(objects, policy=policy)
    assert answer.blockers == [{"code": "quota_exhausted", "tier": 0, "tenant": "team-a", "model": "H100", "used": 1,
                                "requested": 1, "nominal": 1, "limit": 1, "lendable": 0}]
    # the quota closes the tier: every device says so, what its own checks found beside it
    assert answer.reasons == {"quota_exhausted": 2}
    assert answer.summary == ("H100 skipped: of 2 H100, 2 over the tenant's quota (1 in use, 1 available); tenant "
                              "quota 1/1 H100 used. Pod not allocated (pending) under policy v7. If scheduled now: nothing "
                              "fits (tier 0 H100: tenant quota 1/1 H100 used; tier 1 gpu/a100: no device it asks for).")


def test_allocated_pod_is_explained_for_the_allocation_it_got() -> None:
    objects = scenario(node("n1"), node("n2"), slice_("n1", [gpu("gpu-0", taints=[UNHEALTHY])]),
                       slice_("n2", [gpu("gpu-0", "A100")]),
                       pod_claim=claim("train-gpu"), pod_spec={"nodeName": "n2"})
    objects[-2]["status"] = {"allocation": {"devices": {"results": [
        {"request": "gpu/a100", "driver": "gpu.nvidia.com", "pool": "n2", "device": "gpu-0"}]}}}
    answer = _explain(objects)
    assert answer.reasons == {"unhealthy": 1}  # the binding to n2 came after the decision
    assert answer.outcome["result"] == "allocated" and answer.outcome["tier"] == 1
    assert answer.summary.endswith("Allocated A100 gpu-0 on node n2 (tier 1).")
    chosen = _explain(objects, "A100")
    assert chosen.skipped is False and chosen.reasons == {"selected": 1}  # the pod's own device


def test_pod_missing_from_the_view_is_a_clear_error() -> None:
    from audit.explain import ViewError

    with pytest.raises(ViewError, match="Pod team-a/ghost: not found"):
        explain(ClusterView.from_objects(scenario(node("n1"))), "team-a/ghost", "H100")


def test_claim_not_created_yet_is_named() -> None:
    from audit.explain import ViewError

    objects = [o for o in scenario(node("n1")) if o["kind"] != "ResourceClaim"]
    objects[-1] = pod("train", "", resourceClaims=[{"name": "gpu", "resourceClaimTemplateName": "t"}])
    with pytest.raises(ViewError, match=r"spec.resourceClaims\[0\]: ResourceClaim not created yet"):
        explain(ClusterView.from_objects(objects), "team-a/train", "H100")


def test_a_tier_selecting_one_gpu_by_uuid_still_targets_its_model() -> None:
    # Identical GPUs but for their uuid: the tier asks for the second one only.
    wanted = "device.attributes['gpu.nvidia.com'].uuid == 'GPU-H100-gpu-1'"
    objects = scenario(node("n1"), slice_("n1", [gpu("gpu-0"), gpu("gpu-1")]),
                       pod_claim=claim("train-gpu", subs=[sub("h100", "H100", wanted)]))
    answer = _explain(objects)
    assert answer.blockers == []
    assert answer.reasons == {"request_selector_mismatch": 1, "available": 1}


def test_the_policy_decides_which_taints_mean_unhealthy() -> None:
    policy = parse_policy({"apiVersion": "claimtrail.io/v1alpha1", "kind": "Policy", "metadata": {"name": "p"},
                           "spec": {"version": "v2", "health": {"unhealthyTaintKeys": ["example.com/maintenance"],
                                                                "unhealthyTaintSuffixes": []}}})
    objects = scenario(node("n1"), slice_("n1", [gpu("gpu-0", taints=[MAINTENANCE]), gpu("gpu-1", taints=[UNHEALTHY])]))
    assert _explain(objects).reasons == {"unhealthy": 1, "taint_not_tolerated": 1}
    assert _explain(objects, policy=policy).reasons == {"unhealthy": 1, "taint_not_tolerated": 1}
    by_device = {d.device: d.reason for d in _explain(objects, policy=policy).devices}
    assert by_device == {"gpu.nvidia.com/n1/gpu-0": "unhealthy", "gpu.nvidia.com/n1/gpu-1": "taint_not_tolerated"}


def test_admin_access_may_use_devices_others_hold_but_not_tainted_ones() -> None:
    admin_claim = claim("train-gpu")
    admin_claim["spec"]["devices"]["requests"] = [{"name": "gpu", "exactly": {
        "deviceClassName": "gpu.nvidia.com", "adminAccess": True,
        "selectors": [{"cel": {"expression": "device.attributes['gpu.nvidia.com'].productName.startsWith('NVIDIA H100')"}}]}}]
    objects = scenario(node("n1"), slice_("n1", [gpu("gpu-0"), gpu("gpu-1", taints=[UNHEALTHY]), gpu("gpu-2")]),
                       claim("other", "team-b", allocated=[("n1", "gpu-0"), ("n1", "gpu-2")]), pod_claim=admin_claim)
    answer = _explain(objects)
    assert {d.device: d.reason for d in answer.devices} == {
        "gpu.nvidia.com/n1/gpu-0": "available", "gpu.nvidia.com/n1/gpu-1": "unhealthy",
        "gpu.nvidia.com/n1/gpu-2": "available"}


def test_borrowing_beyond_what_other_tenants_lend_is_quota_exhausted() -> None:
    """Within its borrowing limit, a tenant borrows only what other tenants leave unused, as the
    decision engine's quota rule says (here: nobody lends)."""
    policy = parse_policy({"apiVersion": "claimtrail.io/v1alpha1", "kind": "Policy", "metadata": {"name": "p"},
                           "spec": {"version": "v7", "tenants": [
                               {"name": "team-a", "namespaces": ["team-a"],
                                "quotas": {"H100": {"nominal": 1, "borrowingLimit": 4}}}]}})
    objects = scenario(node("n1"), slice_("n1", [gpu("gpu-0"), gpu("gpu-1")]),
                       claim("older", "team-a", allocated=[("n1", "gpu-0")]))
    answer = _explain(objects, policy=policy)
    assert answer.blockers == [{"code": "quota_exhausted", "tier": 0, "tenant": "team-a", "model": "H100", "used": 1,
                                "requested": 1, "nominal": 1, "limit": 5, "lendable": 0}]
    assert answer.reasons == {"quota_exhausted": 2}
    assert answer.summary.startswith("H100 skipped: of 2 H100, 2 over the tenant's quota (1 in use, 1 available); "
                                     "tenant quota 1/1 H100 used (borrowing up to 5, 0 lendable by other tenants).")
