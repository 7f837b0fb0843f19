"""Does a node satisfy a slice's or device's node selection (upstream ``nodeMatches``)?

Node selectors follow core/v1 node affinity: terms are ORed, requirements inside a term are
ANDed, an empty term matches nothing, ``matchExpressions`` look at labels and ``matchFields``
only support ``metadata.name``.
"""

from __future__ import annotations

from collections.abc import Mapping

from audit.dra.model import Node, NodeSelector, NodeSelectorRequirement


def node_matches(node: Node, node_name: str | None, all_nodes: bool, selector: NodeSelector | None) -> bool:
    """The upstream precedence: nodeName, then allNodes, then nodeSelector; nothing set = no."""
    if node_name:
        return node_name == node.name
    if all_nodes:
        return True
    if selector is not None:
        return selector_matches(selector, node)
    return False


def selector_matches(selector: NodeSelector, node: Node) -> bool:
    for term in selector.terms:
        if not term.match_expressions and not term.match_fields:
            continue
        if all(_label_matches(req, node.labels) for req in term.match_expressions) and all(
            _field_matches(req, node) for req in term.match_fields
        ):
            return True
    return False


def _label_matches(req: NodeSelectorRequirement, labels: Mapping[str, str]) -> bool:
    present = req.key in labels
    value = labels.get(req.key, "")
    op = req.operator
    if op == "In":
        return present and value in req.values
    if op == "NotIn":
        return not present or value not in req.values
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    if op in ("Gt", "Lt"):
        if not present or len(req.values) != 1:
            return False
        try:
            have, want = int(value), int(req.values[0])
        except ValueError:
            return False
        return have > want if op == "Gt" else have < want
    return False


def _field_matches(req: NodeSelectorRequirement, node: Node) -> bool:
    if req.key != "metadata.name":
        return False
    if req.operator == "In":
        return node.name in req.values
    if req.operator == "NotIn":
        return node.name not in req.values
    return False
