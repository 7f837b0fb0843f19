"""Cluster-level hard filters a pod must pass on a node before any device is looked at.

Node gone, ``spec.unschedulable``, untolerated NoSchedule/NoExecute node taints, the pod's
``nodeSelector`` and required node affinity (``nodeSelectorTerms`` ORed, expressions ANDed,
operators In/NotIn/Exists/DoesNotExist/Gt/Lt, ``matchFields`` on ``metadata.name``), following
the kube-scheduler NodeUnschedulable, TaintToleration and NodeAffinity plugins. Returns ``None``
when the node passes, otherwise a short structured reason (recorded as ``node_filtered``).
"""

from __future__ import annotations

from typing import Any

from audit.world import World

UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"


def node_filter(world: World, node_name: str, pod: dict[str, Any]) -> dict[str, str] | None:
    node = world.get("Node", "", node_name)
    if node is None or node_name not in world.nodes:
        return {"filter": "node_lost", "node": node_name}
    spec = pod.get("spec") or {}
    nspec = node.get("spec") or {}
    tolerations = spec.get("tolerations") or []
    if nspec.get("unschedulable") and not _tolerated(
            {"key": UNSCHEDULABLE_TAINT, "effect": "NoSchedule"}, tolerations):
        return {"filter": "unschedulable", "node": node_name}
    for taint in nspec.get("taints") or []:
        if taint.get("effect") in ("NoSchedule", "NoExecute") and not _tolerated(taint, tolerations):
            return {"filter": "taint", "node": node_name, "key": str(taint.get("key", ""))}
    labels = (node.get("metadata") or {}).get("labels") or {}
    for k, v in (spec.get("nodeSelector") or {}).items():
        if labels.get(k) != v:
            return {"filter": "node_selector", "node": node_name, "key": str(k)}
    required = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution") or {})
    terms = required.get("nodeSelectorTerms")
    if terms and not any(_term_matches(t, labels, node_name) for t in terms):
        return {"filter": "node_affinity", "node": node_name}
    return None


def has_node_constraints(pod: dict[str, Any]) -> bool:
    spec = pod.get("spec") or {}
    return bool(spec.get("nodeSelector") or (spec.get("affinity") or {}).get("nodeAffinity"))


def _tolerated(taint: dict[str, Any], tolerations: list[dict[str, Any]]) -> bool:
    for t in tolerations:
        if t.get("effect") and t.get("effect") != taint.get("effect"):
            continue
        op = t.get("operator") or "Equal"
        if op == "Exists":
            if not t.get("key") or t.get("key") == taint.get("key"):
                return True
        elif op == "Equal" and t.get("key") == taint.get("key") and (t.get("value") or "") == (taint.get("value") or ""):
            return True
    return False


def _term_matches(term: dict[str, Any], labels: dict[str, str], node_name: str) -> bool:
    exprs = term.get("matchExpressions") or []
    fields = term.get("matchFields") or []
    if not exprs and not fields:
        return False  # an empty term matches no objects (upstream NodeSelectorTerm semantics)
    for e in exprs:
        if not _expr_matches(e, labels.get(e.get("key", "")), e.get("key", "") in labels):
            return False
    return all(f.get("key") == "metadata.name" and _expr_matches(f, node_name, True) for f in fields)


def _expr_matches(e: dict[str, Any], value: str | None, present: bool) -> bool:
    op = e.get("operator")
    values = [str(v) for v in e.get("values") or []]
    if op == "In":
        return present and value in values
    if op == "NotIn":
        return not present or value not in values
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    if op in ("Gt", "Lt") and present and value is not None and len(values) == 1:
        try:
            a, b = int(value), int(values[0])
        except ValueError:
            return False
        return a > b if op == "Gt" else a < b
    return False
