"""Can the pod run on this node at all? The cluster-level filter that precedes device checks.

Mirrors the kube-scheduler filter plugins that make a node infeasible before DRA is asked, in
the default profile's order: the node is gone, NodeUnschedulable (``spec.unschedulable``),
NodeName (the pod is bound elsewhere), TaintToleration (NoSchedule/NoExecute node taints the pod
does not tolerate), NodeAffinity (``nodeSelector``, then required node affinity: terms ORed,
expressions ANDed, ``matchFields`` on ``metadata.name``). Cause names are the decision engine's
(``audit.scheduler.filters``), so a recorded and an explained filter read the same.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

# Why a node was excluded; rendered into the summary sentence.
NODE_CAUSE_TEXT = {
    "node_lost": "on nodes that no longer exist",
    "unschedulable": "on cordoned nodes",
    "bound_elsewhere": "on other nodes than the one the pod is bound to",
    "taint": "on nodes with taints the pod does not tolerate",
    "node_selector": "on nodes excluded by the pod's nodeSelector",
    "node_affinity": "on nodes excluded by node affinity",
}


def _expression_matches(expr: Mapping[str, Any], value: str | None) -> bool:
    op = expr.get("operator")
    values = [str(v) for v in expr.get("values") or []]
    if op == "In":
        return value is not None and value in values
    if op == "NotIn":
        return value is None or value not in values
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    if op in ("Gt", "Lt") and value is not None and len(values) == 1:
        try:
            left, right = int(value), int(values[0])
        except ValueError:
            return False
        return left > right if op == "Gt" else left < right
    return False


def _term_matches(term: Mapping[str, Any], node_name: str, labels: Mapping[str, str]) -> bool:
    exprs = term.get("matchExpressions") or []
    fields = term.get("matchFields") or []
    if not exprs and not fields:
        return False  # an empty term matches nothing (upstream nodeaffinity semantics)
    for e in exprs:
        if not _expression_matches(e, labels.get(str(e.get("key")))):
            return False
    for f in fields:
        value = node_name if f.get("key") == "metadata.name" else None
        if not _expression_matches(f, value):
            return False
    return True


def _tolerates(tolerations: Sequence[Mapping[str, Any]], taint: Mapping[str, Any]) -> bool:
    for t in tolerations:
        if t.get("effect") and t.get("effect") != taint.get("effect"):
            continue
        if t.get("key") and t.get("key") != taint.get("key"):
            continue
        if not t.get("key") and t.get("operator") != "Exists":
            continue
        if t.get("operator") == "Exists" or t.get("value", "") == taint.get("value", ""):
            return True
    return False


def node_exclusion(pod: Mapping[str, Any], node_name: str, node: Mapping[str, Any] | None,
                   binding_counts: bool = True) -> tuple[str, str]:
    """``("", "")`` when the pod may run on the node, else (cause, detail).

    ``binding_counts=False`` judges the pod as it was before it was bound: an allocation is
    decided before the binding, so explaining it must not exclude every other node.
    """
    spec = pod.get("spec") or {}
    if node is None:
        return "node_lost", f"node {node_name} is not in the cluster"
    node_spec = node.get("spec") or {}
    tolerations = spec.get("tolerations") or []
    if node_spec.get("unschedulable") and not _tolerates(
            tolerations, {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}):
        return "unschedulable", f"node {node_name} is cordoned"
    bound = spec.get("nodeName")
    if binding_counts and bound and bound != node_name:
        return "bound_elsewhere", f"pod is bound to node {bound}"
    for taint in node_spec.get("taints") or []:
        if taint.get("effect") in ("NoSchedule", "NoExecute") and not _tolerates(tolerations, taint):
            return "taint", f"taint {taint.get('key')}={taint.get('value', '')}:{taint.get('effect')}"
    labels = {str(k): str(v) for k, v in ((node.get("metadata") or {}).get("labels") or {}).items()}
    for key, value in (spec.get("nodeSelector") or {}).items():
        if labels.get(str(key)) != str(value):
            return "node_selector", f"nodeSelector {key}={value}"
    required = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution") or {})
    terms = required.get("nodeSelectorTerms")
    if terms is not None and not any(_term_matches(t, node_name, labels) for t in terms):
        return "node_affinity", "required node affinity"
    return "", ""
