"""The node filters before any device is judged, in kube-scheduler's plugin order."""

from __future__ import annotations

from typing import Any

import pytest

from audit.explain.nodes import node_exclusion
from tests.explain.builders import node

TAINTED = node("n1", taints=[{"key": "dedicated", "value": "b", "effect": "NoSchedule"}])
CORDONED = {**node("n1"), "spec": {"unschedulable": True}}


def _affinity(*exprs: dict[str, Any], fields: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    term: dict[str, Any] = {"matchExpressions": list(exprs)}
    if fields:
        term["matchFields"] = fields
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}


@pytest.mark.parametrize(("pod_spec", "node_obj", "cause"), [
    ({}, node("n1"), ""),
    ({}, None, "node_lost"),
    ({}, CORDONED, "unschedulable"),
    ({"tolerations": [{"key": "node.kubernetes.io/unschedulable", "operator": "Exists"}]}, CORDONED, ""),
    ({"nodeName": "n2"}, node("n1"), "bound_elsewhere"),
    ({}, TAINTED, "taint"),
    ({"tolerations": [{"key": "dedicated", "operator": "Equal", "value": "b", "effect": "NoSchedule"}]}, TAINTED, ""),
    ({"tolerations": [{"key": "dedicated", "operator": "Equal", "value": "c"}]}, TAINTED, "taint"),
    ({"tolerations": [{"operator": "Exists"}]}, TAINTED, ""),
    ({"nodeSelector": {"zone": "b"}}, node("n1"), "node_selector"),
    ({"affinity": _affinity({"key": "zone", "operator": "In", "values": ["b", "c"]})}, node("n1"), "node_affinity"),
    ({"affinity": _affinity({"key": "zone", "operator": "NotIn", "values": ["b"]})}, node("n1"), ""),
    ({"affinity": _affinity({"key": "gpu", "operator": "Exists"})}, node("n1"), "node_affinity"),
    ({"affinity": _affinity({"key": "gpu", "operator": "DoesNotExist"})}, node("n1"), ""),
    ({"affinity": _affinity(fields=[{"key": "metadata.name", "operator": "In", "values": ["n1"]}])}, node("n1"), ""),
    ({"affinity": _affinity(fields=[{"key": "metadata.name", "operator": "In", "values": ["n9"]}])}, node("n1"),
     "node_affinity"),
    # TaintToleration runs before NodeAffinity, so a tainted node outside the zone reads "taint".
    ({"nodeSelector": {"zone": "b"}}, TAINTED, "taint"),
], ids=["passes", "node-lost", "cordoned", "cordon-tolerated", "bound-elsewhere", "tainted", "taint-tolerated",
        "taint-other-value", "tolerate-everything", "node-selector", "affinity-in", "affinity-notin",
        "affinity-exists", "affinity-does-not-exist", "match-fields", "match-fields-other", "taint-before-affinity"])
def test_first_failing_node_filter_is_the_cause(pod_spec: dict[str, Any], node_obj: dict[str, Any] | None,
                                                cause: str) -> None:
    pod = {"metadata": {"name": "p", "namespace": "team-a"}, "spec": pod_spec}
    assert node_exclusion(pod, "n1", node_obj)[0] == cause


def test_an_allocated_pod_is_judged_as_before_its_binding() -> None:
    pod = {"metadata": {"name": "p"}, "spec": {"nodeName": "n2"}}
    assert node_exclusion(pod, "n1", node("n1"), binding_counts=False) == ("", "")
