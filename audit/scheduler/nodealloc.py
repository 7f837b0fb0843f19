"""Running the exact per-node allocator against the world, with caches that never change answers.

The allocator's ``Inventory`` (slices, classes, taint rules) is rebuilt only when the world's
inventory version moves, from typed objects parsed once per payload. The allocated state handed
to the allocator holds the devices in use on that node (pools here are per node, so devices of
other nodes cannot matter), or — when the cluster has shared slices — every allocated result.
"""

from __future__ import annotations

import weakref
from typing import Any

from audit.allocator import AllocatedState, Allocator, Features, Inventory, Quirks
from audit.allocator.outcome import AllocationOutcome
from audit.dra.model import parse_object
from audit.policy import Policy
from audit.world import World


class _WorldCache:
    def __init__(self) -> None:
        self.version = -1
        self.inventory: Any = None
        self.parsed: dict[int, tuple[dict[str, Any], Any]] = {}  # id(payload) -> (payload, typed)


_CACHES: weakref.WeakKeyDictionary[World, _WorldCache] = weakref.WeakKeyDictionary()


def _cache(world: World) -> _WorldCache:
    c = _CACHES.get(world)
    if c is None:
        c = _WorldCache()
        _CACHES[world] = c
    return c


def typed(world: World, payload: dict[str, Any]) -> Any:
    """``parse_object`` once per payload object (payloads are never mutated after an event)."""
    c = _cache(world)
    hit = c.parsed.get(id(payload))
    if hit is not None and hit[0] is payload:
        return hit[1]
    obj = parse_object(payload)
    if len(c.parsed) > 200_000:
        c.parsed.clear()
    c.parsed[id(payload)] = (payload, obj)
    return obj


def inventory(world: World) -> Any:
    c = _cache(world)
    if c.version != world.inventory_version or c.inventory is None:
        c.inventory = Inventory(
            slices=[typed(world, s) for _, s in world.items("ResourceSlice")],
            classes=[typed(world, s) for _, s in world.items("DeviceClass")],
            taint_rules=[typed(world, s) for _, s in world.items("DeviceTaintRule")],
            features=Features(),
        )
        c.version = world.inventory_version
    return c.inventory


def allocated_state(world: World, node: str) -> Any:
    if world.has_shared_slices:
        results: list[dict[str, Any]] = []
        for _, claim in world.items("ResourceClaim"):
            alloc = (claim.get("status") or {}).get("allocation")
            if alloc:
                results.extend((alloc.get("devices") or {}).get("results", []) or [])
        return AllocatedState.from_results(results)
    local: list[dict[str, Any]] = []
    for dev_id in world.node_devices.get(node, []):
        if dev_id in world.allocated_by:
            driver, pool, device = dev_id.split("/", 2)
            local.append({"driver": driver, "pool": pool, "device": device})
    return AllocatedState.from_results(local)


def allocate_on_node(world: World, node: str, claims: list[dict[str, Any]], policy: Policy,
                     explain: bool = True) -> AllocationOutcome:
    node_obj = typed(world, world.get("Node", "", node) or {"apiVersion": "v1", "kind": "Node", "metadata": {"name": node}})
    typed_claims = [typed(world, c) for c in claims]
    allocator = Allocator(inventory(world), allocated_state(world, node), quirks=Quirks(),
                          health=lambda taint: policy.is_unhealthy_taint(taint.key))
    outcome: AllocationOutcome = allocator.allocate(node_obj, typed_claims, explain=explain)
    return outcome
