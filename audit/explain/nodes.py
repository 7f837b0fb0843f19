"""Can the pod run on this node at all? The cluster-level filter that precedes device checks.

The rules are the decision engine's own (``audit.scheduler.nodefilter``: node gone,
NodeUnschedulable, NodeName, TaintToleration, NodeAffinity, in kube-scheduler's order), so a
recorded and an explained filter exclude the same nodes for the same cause. This module adds
how each cause reads: a detail for device rows and a phrase for the summary sentence.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from audit.scheduler.nodefilter import node_exclusion as shared_node_exclusion

# Why a node was excluded; rendered into the summary sentence.
NODE_CAUSE_TEXT = {
    "node_lost": "on nodes that no longer exist",
    "unschedulable": "on cordoned nodes",
    "bound_elsewhere": "on other nodes than the one the pod is bound to",
    "taint": "on nodes with taints the pod does not tolerate",
    "node_selector": "on nodes excluded by the pod's nodeSelector",
    "node_affinity": "on nodes excluded by node affinity",
    "claim_unsatisfiable": "on nodes where the rest of the claim cannot be allocated with them",
}


def node_exclusion(pod: Mapping[str, Any], node_name: str, node: Mapping[str, Any] | None,
                   binding_counts: bool = True) -> tuple[str, str]:
    """``("", "")`` when the pod may run on the node, else (cause, detail).

    ``binding_counts=False`` judges the pod as it was before it was bound: an allocation is
    decided before the binding, so explaining it must not exclude every other node.
    """
    excluded = shared_node_exclusion(pod, node_name, node, binding_counts)
    if excluded is None:
        return "", ""
    return excluded.cause, _DETAIL[excluded.cause].format(node=node_name, x=excluded)


# The detail a device row shows for each cause.
_DETAIL = {
    "node_lost": "node {node} is not in the cluster",
    "unschedulable": "node {node} is cordoned",
    "bound_elsewhere": "pod is bound to node {x.value}",
    "taint": "taint {x.key}={x.value}:{x.effect}",
    "node_selector": "nodeSelector {x.key}={x.value}",
    "node_affinity": "required node affinity",
}
