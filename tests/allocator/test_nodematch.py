"""Node selection of slices and devices: core/v1 node-affinity semantics (nodeMatches)."""

from __future__ import annotations

import pytest

from audit.allocator.nodematch import node_matches, selector_matches
from audit.dra.model import Node, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm

NODE = Node(name="node-1", labels={"zone": "a", "gpus": "8", "flag": ""})


def term(*exprs: tuple[str, str, tuple[str, ...]], fields: tuple[tuple[str, str, tuple[str, ...]], ...] = ()) -> NodeSelectorTerm:
    return NodeSelectorTerm(match_expressions=tuple(NodeSelectorRequirement(k, op, v) for k, op, v in exprs),
                            match_fields=tuple(NodeSelectorRequirement(k, op, v) for k, op, v in fields))


@pytest.mark.parametrize(("terms", "expected"), [
    pytest.param([term(("zone", "In", ("a", "b")))], True, id="in"),
    pytest.param([term(("zone", "In", ("b",)))], False, id="in-other-value"),
    pytest.param([term(("zone", "NotIn", ("b",)))], True, id="not-in"),
    pytest.param([term(("rack", "NotIn", ("b",)))], True, id="not-in-missing-label"),
    pytest.param([term(("flag", "Exists", ()))], True, id="exists-empty-value"),
    pytest.param([term(("rack", "DoesNotExist", ()))], True, id="does-not-exist"),
    pytest.param([term(("gpus", "Gt", ("4",)))], True, id="gt"),
    pytest.param([term(("gpus", "Lt", ("4",)))], False, id="lt"),
    pytest.param([term(("zone", "Gt", ("4",)))], False, id="gt-non-integer-label"),
    pytest.param([term(("zone", "Near", ("a",)))], False, id="unknown-operator"),
    pytest.param([term(("zone", "In", ("a",)), ("gpus", "In", ("4",)))], False, id="requirements-are-anded"),
    pytest.param([term(("zone", "In", ("b",))), term(("gpus", "In", ("8",)))], True, id="terms-are-ored"),
    pytest.param([term()], False, id="empty-term-matches-nothing"),
    pytest.param([term(fields=(("metadata.name", "In", ("node-1",)),))], True, id="match-fields-name"),
    pytest.param([term(fields=(("metadata.name", "NotIn", ("node-1",)),))], False, id="match-fields-not-in"),
    pytest.param([term(fields=(("metadata.uid", "In", ("node-1",)),))], False, id="match-fields-only-name"),
])
def test_selector_matches(terms: list[NodeSelectorTerm], expected: bool) -> None:
    assert selector_matches(NodeSelector(tuple(terms)), NODE) is expected


@pytest.mark.parametrize(("node_name", "all_nodes", "selector", "expected"), [
    pytest.param("node-1", False, None, True, id="node-name"),
    pytest.param("node-2", True, None, False, id="node-name-wins-over-all-nodes"),
    pytest.param(None, True, None, True, id="all-nodes"),
    pytest.param(None, False, NodeSelector((term(("zone", "In", ("a",))),)), True, id="selector"),
    pytest.param(None, False, None, False, id="nothing-set"),
])
def test_node_matches_precedence(node_name: str | None, all_nodes: bool, selector: NodeSelector | None, expected: bool) -> None:
    assert node_matches(NODE, node_name, all_nodes, selector) is expected
