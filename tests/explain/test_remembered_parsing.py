"""Objects parsed once and inventories shared between explanations never change an answer."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from audit.dra.model import ModelError, Node
from audit.explain import ClusterView, explain
from audit.explain.inventories import InventoryMemo
from audit.explain.parsed import ParseMemo
from tests.explain.builders import gpu, node, slice_
from tests.explain.test_reason_invariant import _build, node_st


def _node_with_zone(zone: Any) -> dict[str, Any]:
    out = node("n1")
    out["metadata"]["labels"]["zone"] = zone
    return out


def test_equal_content_is_parsed_once() -> None:
    memo = ParseMemo(capacity=10)
    first = memo.parse(node("n1"))
    assert memo.parse(copy.deepcopy(node("n1"))) is first
    assert memo.parse(node("n2")) is not first


@pytest.mark.parametrize(("remembered", "asked"), [
    pytest.param("1", 1, id="number-after-equal-text"),
    pytest.param("true", True, id="boolean-after-equal-text"),
])
def test_a_remembered_object_never_hides_a_parse_error_of_similar_text(remembered: Any, asked: Any) -> None:
    memo = ParseMemo(capacity=10)
    parsed = memo.parse(_node_with_zone(remembered))
    assert isinstance(parsed, Node) and parsed.labels["zone"] == remembered
    for _ in range(2):  # errors are raised again each time, never remembered
        with pytest.raises(ModelError, match=r"Node n1: metadata.labels.zone"):
            memo.parse(_node_with_zone(asked))


def test_objects_showing_an_address_are_not_remembered() -> None:
    memo = ParseMemo(capacity=10)
    raw = node("n1")
    raw["metadata"]["annotations"] = {"note": "kept at 0x10 by the operator"}
    first = memo.parse(raw)
    assert memo.parse(copy.deepcopy(raw)) is not first
    assert memo.parse(copy.deepcopy(raw)) == first


def test_a_full_memo_starts_over_and_still_answers() -> None:
    memo = ParseMemo(capacity=2)
    parsed = [memo.parse(node(f"n{i}")) for i in range(5)]
    assert [p.name for p in parsed] == [f"n{i}" for i in range(5)]
    assert memo.parse(node("n4")) is parsed[4]
    assert memo.parse(node("n0")) is not parsed[0]


def test_an_inventory_is_shared_only_over_the_very_same_objects() -> None:
    memo = InventoryMemo(capacity=4)
    raw = slice_("n1", [gpu("gpu-0")])
    one, other = ParseMemo(capacity=4).parse(raw), ParseMemo(capacity=4).parse(copy.deepcopy(raw))
    assert one == other and one is not other
    first = memo.inventory([one], [], [])
    assert memo.inventory([one], [], []) is first
    assert memo.inventory([other], [], []) is not first  # equal content, another object
    assert memo.inventory([one, one], [], []) is not first


@settings(max_examples=12, deadline=None)
@given(st.lists(node_st, min_size=1, max_size=3), st.lists(node_st, min_size=1, max_size=3))
def test_an_explanation_after_another_cluster_equals_a_first_explanation(
        before: list[tuple[str, list[tuple[str, str]]]], after: list[tuple[str, list[tuple[str, str]]]]) -> None:
    """Clusters that share objects (same nodes and slices, other holders) are answered as if alone."""
    objects_before, _ = _build(before)
    objects_after, _ = _build(after)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("audit.explain.probe.PARSED", ParseMemo(capacity=1000))
        patch.setattr("audit.explain.probe.INVENTORIES", InventoryMemo(capacity=4))
        alone = explain(ClusterView.from_objects(objects_after), "team-a/train", "H100", detail=True).to_dict()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("audit.explain.probe.PARSED", ParseMemo(capacity=1000))
        patch.setattr("audit.explain.probe.INVENTORIES", InventoryMemo(capacity=4))
        explain(ClusterView.from_objects(objects_before), "team-a/train", "H100", detail=True)
        for _ in range(2):
            answer = explain(ClusterView.from_objects(copy.deepcopy(objects_after)), "team-a/train", "H100",
                             detail=True)
            assert answer.to_dict() == alone
