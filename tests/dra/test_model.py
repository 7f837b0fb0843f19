"""Parsing raw objects into the typed model: defaulting and wrong-type messages with field paths."""

from __future__ import annotations

import pytest

from audit.dra.model import (
    DeviceTaintRule,
    ModelError,
    Node,
    Pod,
    ResourceClaim,
    ResourceClaimTemplate,
    ResourceSlice,
    parse_object,
)


def claim_with(request: dict) -> dict:
    return {"kind": "ResourceClaim", "metadata": {"name": "c", "namespace": "ns"}, "spec": {"devices": {"requests": [request]}}}


def test_request_defaults() -> None:
    claim = parse_object(claim_with({"name": "r", "exactly": {"deviceClassName": "gpu", "tolerations": [{"key": "k"}]}}))
    assert isinstance(claim, ResourceClaim)
    spec = claim.spec.requests[0].exactly
    assert spec is not None
    assert (spec.allocation_mode, spec.count, spec.admin_access) == ("ExactCount", 1, None)
    assert spec.tolerations[0].operator == "Equal"
    assert claim.key == "ns/c"


def test_all_mode_has_no_default_count() -> None:
    claim = parse_object(claim_with({"name": "r", "exactly": {"deviceClassName": "gpu", "allocationMode": "All"}}))
    assert isinstance(claim, ResourceClaim)
    assert claim.spec.requests[0].exactly is not None and claim.spec.requests[0].exactly.count == 0


def test_namespace_defaults_to_default() -> None:
    claim = parse_object({"kind": "ResourceClaim", "metadata": {"name": "c"}, "spec": {}})
    assert isinstance(claim, ResourceClaim) and claim.key == "default/c"


SLICE = {"kind": "ResourceSlice", "metadata": {"name": "node-1"}, "spec": {"driver": "d", "pool": {"name": "p"}}}


@pytest.mark.parametrize(("raw", "message"), [
    pytest.param({**SLICE, "spec": {**SLICE["spec"], "devices": [{"name": "a"}, {"name": "b"}, {"name": "c", "attributes": {"memory": "80Gi"}}]}},
                 "ResourceSlice node-1: spec.devices[2].attributes.memory: expected one of int/bool/string/version",
                 id="attribute-not-typed"),
    pytest.param({**SLICE, "spec": {**SLICE["spec"], "devices": [{"name": "a", "attributes": {"m": {"int": "5"}}}]}},
                 "ResourceSlice node-1: spec.devices[0].attributes.m.int: expected an integer, got string", id="int-attribute-wrong-type"),
    pytest.param({**SLICE, "spec": {**SLICE["spec"], "devices": [{"name": "a", "attributes": {"m": {"int": 1, "string": "x"}}}]}},
                 "ResourceSlice node-1: spec.devices[0].attributes.m: expected one of int/bool/string/version", id="two-values"),
    pytest.param({**SLICE, "spec": {**SLICE["spec"], "devices": [{"name": "a", "capacity": {"memory": {"value": [1]}}}]}},
                 "ResourceSlice node-1: spec.devices[0].capacity.memory.value: expected a quantity (string or number), got list",
                 id="capacity-not-a-quantity"),
    pytest.param({**SLICE, "spec": {**SLICE["spec"], "devices": {"name": "a"}}},
                 "ResourceSlice node-1: spec.devices: expected a list, got object", id="devices-not-a-list"),
    pytest.param({**SLICE, "spec": {**SLICE["spec"], "pool": {"name": "p", "generation": "1"}}},
                 "ResourceSlice node-1: spec.pool.generation: expected an integer, got string", id="generation-not-an-int"),
    pytest.param(claim_with({"name": "r", "exactly": {"deviceClassName": "gpu", "count": True}}),
                 "ResourceClaim ns/c: spec.devices.requests[0].exactly.count: expected an integer, got boolean", id="count-bool"),
    pytest.param(claim_with({"name": "r", "firstAvailable": [{"name": "s", "deviceClassName": 3}]}),
                 "ResourceClaim ns/c: spec.devices.requests[0].firstAvailable[0].deviceClassName: expected a string, got integer",
                 id="subrequest-class-not-a-string"),
    pytest.param({"kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{"resources": {"limits": {"nvidia.com/gpu": "1.5"}}}]}},
                 "Pod default/p: spec.containers[0].resources.limits.nvidia.com/gpu: expected a whole number of GPUs, got '1.5'",
                 id="fractional-gpu-limit"),
    pytest.param({"kind": "Widget", "metadata": {"name": "w"}}, "Widget w: kind: unsupported kind 'Widget'", id="unknown-kind"),
])
def test_wrong_types_name_object_and_field(raw: dict, message: str) -> None:
    with pytest.raises(ModelError) as err:
        parse_object(raw)
    assert str(err.value).startswith(message)


def test_slice_fields() -> None:
    raw = {**SLICE, "spec": {**SLICE["spec"], "nodeName": "node-1", "pool": {"name": "p", "generation": 3, "resourceSliceCount": 2},
                            "devices": [{"name": "gpu-0", "attributes": {"v": {"version": "1.2.3"}, "l": {"strings": ["a"]}},
                                         "capacity": {"memory": {"value": 1024}}, "taints": [{"key": "k", "effect": "NoSchedule"}]}]}}
    sl = parse_object(raw)
    assert isinstance(sl, ResourceSlice)
    assert (sl.pool_generation, sl.resource_slice_count, sl.node_name) == (3, 2, "node-1")
    dev = sl.devices[0]
    assert dev.attributes["v"].kind == "version" and dev.attributes["l"].value == ("a",)
    assert dev.capacity["memory"].value == "1024"
    assert dev.raw_attributes == {"v": {"version": "1.2.3"}, "l": {"strings": ["a"]}}
    assert dev.taints[0].effect == "NoSchedule"


def test_pod_fields() -> None:
    raw = {"kind": "Pod", "metadata": {"name": "p", "namespace": "ns", "uid": "u1", "creationTimestamp": "2026-01-01T00:00:00Z"},
           "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "t"}], "nodeName": "n",
                    "nodeSelector": {"zone": "a"}, "tolerations": [{"key": "x", "operator": "Exists"}],
                    "containers": [{"resources": {"limits": {"nvidia.com/gpu": 2}}}, {"resources": {"limits": {"nvidia.com/gpu": "1"}}}]},
           "status": {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "p-gpu-abc"}]}}
    pod = parse_object(raw)
    assert isinstance(pod, Pod)
    assert (pod.key, pod.uid, pod.gpu_limit, pod.node_name) == ("ns/p", "u1", 3, "n")
    assert pod.resource_claims[0].resource_claim_template_name == "t"
    assert pod.resource_claim_statuses == {"gpu": "p-gpu-abc"}
    assert pod.raw_tolerations == ({"key": "x", "operator": "Exists"},)
    assert pod.creation_timestamp == "2026-01-01T00:00:00Z"


def test_node_and_taint_rule_and_template() -> None:
    node = parse_object({"kind": "Node", "metadata": {"name": "n", "labels": {"a": "b"}}, "spec": {"taints": [{"key": "k", "effect": "NoSchedule"}]}})
    assert isinstance(node, Node) and node.labels == {"a": "b"} and node.taints[0].key == "k"
    assert node.with_labels({"a": "c", "d": "e"}).labels == {"a": "c", "d": "e"}
    rule = parse_object({"apiVersion": "resource.k8s.io/v1alpha3", "kind": "DeviceTaintRule", "metadata": {"name": "r"},
                         "spec": {"deviceSelector": {"driver": "d", "pool": "p"}, "taint": {"key": "k", "effect": "NoExecute"}}})
    assert isinstance(rule, DeviceTaintRule) and (rule.driver, rule.pool, rule.device, rule.taint.effect) == ("d", "p", "", "NoExecute")
    tmpl = parse_object({"kind": "ResourceClaimTemplate", "metadata": {"name": "t", "namespace": "ns"},
                         "spec": {"spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "g"}}]}}}})
    assert isinstance(tmpl, ResourceClaimTemplate)
    claim = tmpl.instantiate("p-r-1", uid="u", annotations={"resource.kubernetes.io/pod-claim-name": "r"})
    assert claim.key == "ns/p-r-1" and claim.spec is tmpl.spec
    assert claim.metadata.annotations == {"resource.kubernetes.io/pod-claim-name": "r"}


def test_unquoted_timestamps_become_strings() -> None:
    import yaml
    raw = yaml.safe_load("kind: Pod\nmetadata: {name: p, creationTimestamp: 2026-01-01T00:00:00Z}\n")
    pod = parse_object(raw)
    assert isinstance(pod, Pod) and pod.creation_timestamp == "2026-01-01T00:00:00Z"
