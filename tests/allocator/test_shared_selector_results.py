"""Selector results kept per parsed device by an evaluator that several inventories share.

The engine rebuilds a node's inventory whenever the node's taints change and hands the new one
the same evaluator; devices parsed from the same slice object keep their CEL results across the
rebuild, while a slice republished with other attributes (a new parsed object, same device names)
is evaluated afresh.
"""

from __future__ import annotations

from typing import Any

import pytest

from audit.allocator import Allocator, Features, Inventory, Status
from audit.dra.model import parse_object
from tests.allocator.helpers import NODE_1, claim, device, device_class, node, request, resource_slice

_CLASS = parse_object(device_class("class-a"))
_CLAIM = parse_object(claim("claim-0", request("req-0", "class-a", selectors=["device.attributes['driver-a'].model == 'a100'"])))


def _slice(model: str) -> Any:
    return parse_object(resource_slice("slice-1", NODE_1, "pool-1", devices=[device("device-1", {"model": model})]))


def _allocate(parsed_slice: Any, evaluator: Any = None) -> tuple[Inventory, Status]:
    inventory = Inventory(slices=[parsed_slice], classes=[_CLASS], taint_rules=[], features=Features())
    if evaluator is not None:
        inventory.selector_evaluator = evaluator
    return inventory, Allocator(inventory).allocate(node(), [_CLAIM]).status


def _entry(inventory: Inventory) -> Any:
    return inventory.view(node()).candidates[0][0]


@pytest.mark.parametrize("second, status, shared", [
    ("same parsed slice", Status.SUCCESS, True),
    ("republished, model l40s", Status.UNSATISFIABLE, False),
    ("republished, model a100", Status.SUCCESS, False),
], ids=["rebuilt-over-the-same-device", "other-attributes-under-the-same-name", "equal-content-new-object"])
def test_a_rebuilt_inventory_reuses_results_only_for_the_same_parsed_device(second: str, status: Status,
                                                                            shared: bool) -> None:
    first_slice = _slice("a100")
    first, first_status = _allocate(first_slice)
    assert first_status is Status.SUCCESS
    evaluator = first.selector_evaluator
    later_slice = first_slice if second == "same parsed slice" else _slice(second.rsplit(" ", 1)[1])
    later, later_status = _allocate(later_slice, evaluator)
    assert later_status is status
    assert (_entry(later).cel_results is _entry(first).cel_results) is shared


@pytest.mark.parametrize("model, status", [("a100", Status.SUCCESS), ("l40s", Status.UNSATISFIABLE)])
def test_a_device_judged_for_one_claim_is_judged_again_for_another_claims_selectors(model: str, status: Status) -> None:
    inventory, first_status = _allocate(_slice("a100"))
    assert first_status is Status.SUCCESS
    other = parse_object(claim("claim-1", request("req-0", "class-a", selectors=[f"device.attributes['driver-a'].model == '{model}'"])))
    assert Allocator(inventory).allocate(node(), [other]).status is status
