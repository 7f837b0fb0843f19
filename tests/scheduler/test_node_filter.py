"""The node filter the engine and the explanation share: first failing filter, upstream rules."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from audit.explain import explain
from audit.scheduler.engine import decide
from audit.scheduler.filters import node_filter
from audit.scheduler.nodefilter import NodeExclusion, node_exclusion
from tests.scheduler.worlds import cluster, submit, world_view

LABELS = {"zone": "a", "rank": "5"}


def _node(taints: list[dict[str, str]] | None = None, unschedulable: bool = False) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if taints:
        spec["taints"] = taints
    if unschedulable:
        spec["unschedulable"] = True
    return {"kind": "Node", "metadata": {"name": "n1", "labels": dict(LABELS)}, "spec": spec}


def _required(*terms: dict[str, Any]) -> dict[str, Any]:
    return {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": list(terms)}}}}


DEDICATED = {"key": "dedicated", "value": "b", "effect": "NoSchedule"}


@pytest.mark.parametrize(
    ("pod_spec", "node", "expected"),
    [
        pytest.param({}, _node(), None, id="plain-node-passes"),
        pytest.param({}, None, NodeExclusion("node_lost"), id="gone-node-is-lost"),
        pytest.param({}, _node(unschedulable=True), NodeExclusion("unschedulable"), id="cordoned"),
        pytest.param({"tolerations": [{"key": "node.kubernetes.io/unschedulable", "operator": "Exists"}]},
                     _node(unschedulable=True), None, id="cordon-tolerated"),
        pytest.param({}, _node([DEDICATED]), NodeExclusion("taint", "dedicated", "b", "NoSchedule"), id="taint"),
        pytest.param({}, _node([{**DEDICATED, "effect": "PreferNoSchedule"}]), None, id="soft-taint-ignored"),
        pytest.param({"tolerations": [{"key": "dedicated", "value": "b"}]}, _node([DEDICATED]), None,
                     id="default-operator-is-equal"),
        pytest.param({"tolerations": [{"key": "dedicated", "operator": "Equal", "value": "c"}]}, _node([DEDICATED]),
                     NodeExclusion("taint", "dedicated", "b", "NoSchedule"), id="other-value-not-tolerated"),
        pytest.param({"tolerations": [{"operator": "Exists", "effect": "NoExecute"}]}, _node([DEDICATED]),
                     NodeExclusion("taint", "dedicated", "b", "NoSchedule"), id="other-effect-not-tolerated"),
        pytest.param({"tolerations": [{"operator": "Exists"}]}, _node([DEDICATED]), None, id="exists-tolerates-all"),
        pytest.param({"tolerations": [{"key": "dedicated", "operator": "Sometimes"}]}, _node([DEDICATED]),
                     NodeExclusion("taint", "dedicated", "b", "NoSchedule"), id="unknown-operator-tolerates-nothing"),
        pytest.param({"nodeName": "n2"}, _node(), None, id="binding-ignored-unless-asked"),
        pytest.param({"nodeSelector": {"zone": "b"}}, _node(), NodeExclusion("node_selector", "zone", "b"),
                     id="node-selector-value"),
        pytest.param({"nodeSelector": {"gpu": ""}}, _node(), NodeExclusion("node_selector", "gpu", ""),
                     id="node-selector-missing-label"),
        pytest.param({"nodeSelector": {"zone": "b"}}, _node([DEDICATED]),
                     NodeExclusion("taint", "dedicated", "b", "NoSchedule"), id="taints-before-affinity"),
        pytest.param(_required({"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]},
                               {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}),
                     _node(), None, id="terms-are-ored"),
        pytest.param(_required({"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]},
                                                     {"key": "gpu", "operator": "Exists"}]}),
                     _node(), NodeExclusion("node_affinity"), id="expressions-are-anded"),
        pytest.param(_required({"matchExpressions": [{"key": "gpu", "operator": "DoesNotExist"},
                                                     {"key": "zone", "operator": "NotIn", "values": ["b"]}]}),
                     _node(), None, id="does-not-exist-and-not-in"),
        pytest.param(_required({"matchExpressions": [{"key": "rank", "operator": "Gt", "values": ["4"]}]}),
                     _node(), None, id="gt-compares-integers"),
        pytest.param(_required({"matchExpressions": [{"key": "rank", "operator": "Lt", "values": ["x"]}]}),
                     _node(), NodeExclusion("node_affinity"), id="lt-on-non-integer-fails"),
        pytest.param(_required({"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}),
                     _node(), None, id="match-fields-on-name"),
        pytest.param(_required({"matchFields": [{"key": "spec.podCIDR", "operator": "DoesNotExist"}]}),
                     _node(), NodeExclusion("node_affinity"), id="match-fields-other-field-matches-nothing"),
        pytest.param(_required({}), _node(), NodeExclusion("node_affinity"), id="empty-term-matches-nothing"),
    ],
)
def test_first_failing_filter(pod_spec, node, expected):
    pod = {"metadata": {"name": "p", "namespace": "alpha"}, "spec": pod_spec}
    assert node_exclusion(pod, "n1", node) == expected


def test_binding_counts_when_asked():
    pod = {"metadata": {"name": "p"}, "spec": {"nodeName": "n2"}}
    assert node_exclusion(pod, "n1", _node(), binding_counts=True) == NodeExclusion("bound_elsewhere", value="n2")
    assert node_exclusion(pod, "n2", _node(), binding_counts=True) is None


@pytest.mark.parametrize(
    ("pod_spec", "node_taints", "filtered", "cause_text"),
    [
        pytest.param({"nodeSelector": {"kubernetes.io/hostname": "h100-001"}}, {}, {"key": "kubernetes.io/hostname",
                     "filter": "node_selector"}, "8 on nodes excluded by the pod's nodeSelector", id="node-selector"),
        pytest.param(_required({"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "NotIn",
                                                      "values": ["h100-000"]}]}), {},
                     {"filter": "node_affinity"}, "8 on nodes excluded by node affinity", id="node-affinity"),
        pytest.param({}, {"h100-000": [DEDICATED]}, {"filter": "taint", "key": "dedicated"},
                     "8 on nodes with taints the pod does not tolerate", id="node-taint"),
    ],
)
def test_engine_and_explanation_exclude_the_same_node(pod_spec, node_taints, filtered, cause_text):
    sim = cluster()
    for name, taints in node_taints.items():
        node = copy.deepcopy(sim.world.get("Node", "", name))
        node.setdefault("spec", {})["taints"] = taints
        sim.emit("Node", "", name, node)
    key = submit(sim, "job-1")
    ns, name = key.split("/")
    pod = copy.deepcopy(sim.world.get("Pod", ns, name))
    pod["spec"].update(pod_spec)
    sim.emit("Pod", ns, name, pod)
    record = decide(sim.world, key, 1, sim.now).record
    assert (record.outcome, record.node) == ("allocated", "h100-001")
    assert record.tiers[0].reasons == {"node_filtered": 8, "not_reached": 7, "selected": 1}
    full = explain(world_view(sim.world), key, "H100", sim.world.policy, record=record, detail=True)
    # the device the record names reads as the pod's own, as the record's verdicts say
    assert full.reasons == {"node_filtered": 8, "selected": 1, "available": 7}
    assert cause_text in full.summary
    causes = {(row.node, row.detail["cause"]) for row in full.devices or [] if row.reason == "node_filtered"}
    assert causes == {("h100-000", filtered["filter"])}
    assert node_filter(sim.world, "h100-000", pod) == {"node": "h100-000", **filtered}
