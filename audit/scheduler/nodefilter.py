"""Can a pod run on a node at all? The cluster-level node filter, on plain API objects.

One pure function for the decision engine (which reads nodes from the world) and the
explanation (which reads them from a cluster view): both must exclude the same nodes for the
same reasons. It follows the kube-scheduler filter plugins that make a node infeasible before
DRA is asked, in the default profile's order: the node is gone, NodeUnschedulable
(``spec.unschedulable``, unless the ``node.kubernetes.io/unschedulable`` taint is tolerated),
NodeName (the pod is bound to another node; only when asked), TaintToleration (NoSchedule and
NoExecute node taints the pod does not tolerate), NodeAffinity (``nodeSelector``, then required
node affinity: terms ORed, expressions ANDed, an empty term matches nothing, ``matchFields``
only on ``metadata.name``). The first failing filter is the cause.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"
NODE_FIELD_NAME = "metadata.name"  # the only field matchFields may name (upstream validation)
_BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")


@dataclass(frozen=True)
class NodeExclusion:
    """Why a node is infeasible for a pod: the filter's cause and what it tripped on."""

    cause: str  # node_lost | unschedulable | bound_elsewhere | taint | node_selector | node_affinity
    key: str = ""  # the untolerated taint's key, or the unmatched nodeSelector key
    value: str = ""  # the taint's value, the nodeSelector's wanted value, or the node the pod is bound to
    effect: str = ""  # the taint's effect


def node_exclusion(pod: Mapping[str, Any], node_name: str, node: Mapping[str, Any] | None,
                   binding_counts: bool = False) -> NodeExclusion | None:
    """``None`` when the pod may run on the node (``node`` is ``None`` when it is gone).

    ``binding_counts`` adds the NodeName filter: a pod bound to another node cannot run here.
    """
    if node is None:
        return NodeExclusion("node_lost")
    spec = pod.get("spec") or {}
    node_spec = node.get("spec") or {}
    tolerations = spec.get("tolerations") or []
    if node_spec.get("unschedulable") and not tolerated(
            {"key": UNSCHEDULABLE_TAINT, "effect": "NoSchedule"}, tolerations):
        return NodeExclusion("unschedulable")
    bound = spec.get("nodeName")
    if binding_counts and bound and bound != node_name:
        return NodeExclusion("bound_elsewhere", value=str(bound))
    for taint in node_spec.get("taints") or []:
        if taint.get("effect") in _BLOCKING_EFFECTS and not tolerated(taint, tolerations):
            return NodeExclusion("taint", key=str(taint.get("key", "")), value=str(taint.get("value", "") or ""),
                                 effect=str(taint.get("effect", "")))
    labels = (node.get("metadata") or {}).get("labels") or {}
    for key, want in (spec.get("nodeSelector") or {}).items():
        have = labels.get(key)
        if have is None or str(have) != str(want):
            return NodeExclusion("node_selector", key=str(key), value=str(want))
    required = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution") or {})
    terms = required.get("nodeSelectorTerms")
    # No terms at all match nothing (upstream NodeSelector.Match); the API server rejects such pods.
    if terms is not None and not any(_term_matches(t, labels, node_name) for t in terms):
        return NodeExclusion("node_affinity")
    return None


def tolerated(taint: Mapping[str, Any], tolerations: Sequence[Mapping[str, Any]]) -> bool:
    """Upstream ``Toleration.ToleratesTaint``: effect (if set) equal; ``Exists`` with no key
    tolerates every taint; ``Equal`` (the default operator) needs the same key and value."""
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


def _term_matches(term: Mapping[str, Any], labels: Mapping[str, Any], node_name: str) -> bool:
    exprs = term.get("matchExpressions") or []
    fields = term.get("matchFields") or []
    if not exprs and not fields:
        return False  # an empty term matches no objects (upstream NodeSelectorTerm semantics)
    for e in exprs:
        value = labels.get(e.get("key", ""))
        if not _requirement_matches(e, None if value is None else str(value)):
            return False
    return all(f.get("key") == NODE_FIELD_NAME and _requirement_matches(f, node_name) for f in fields)


def _requirement_matches(req: Mapping[str, Any], value: str | None) -> bool:
    """One NodeSelectorRequirement against a label's (or field's) value, ``None`` when absent."""
    op = req.get("operator")
    values = [str(v) for v in req.get("values") or []]
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
            have, want = int(value), int(values[0])
        except ValueError:
            return False
        return have > want if op == "Gt" else have < want
    return False
