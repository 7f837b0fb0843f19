"""Running the exact per-node allocator against the world, with caches that never change answers.

The allocator's ``Inventory`` (slices, classes, taint rules) is rebuilt only when the world's
inventory version moves, from typed objects parsed once per payload. The allocated state handed
to the allocator holds the devices in use on that node (pools here are per node, so devices of
other nodes cannot matter), or — when the cluster has shared slices — every allocated result,
plus the devices a reservation holds for another pod (``audit.scheduler.reservations``), which
the allocator then treats as in use, less those a reclaim would free.
"""

from __future__ import annotations

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
        self.claim_specs: dict[bytes, Any] = {}  # canonical claim spec -> parsed spec (parse_object's memo)
        # id(claim) -> (claim, {(tiers left per request, policy digest): claim with tiers applied})
        self.augmented: dict[int, tuple[dict[str, Any], dict[tuple[Any, ...], dict[str, Any]]]] = {}
        self.per_node: dict[str, tuple[tuple[int, int], Any]] = {}  # node -> (versions, Inventory)
        # compiled selectors are the same for every node: one evaluator serves all per-node inventories
        self.evaluator: Any = None
        self.evaluator_version = -1


# world.derived key of the world's _WorldCache: kept on the world (it holds nothing that refers
# back to it), so it lives and dies with it, and finding it costs one dict lookup where a weak
# dictionary made a weak reference on every call
CACHE_KEY = "allocator_inputs"
# every upstream behaviour reproduced; frozen, so one value serves every call
_UPSTREAM_QUIRKS = Quirks()


def _cache(world: World) -> _WorldCache:
    c: _WorldCache | None = world.derived.get(CACHE_KEY)
    if c is None:
        c = world.derived[CACHE_KEY] = _WorldCache()
    return c


def typed(world: World, payload: dict[str, Any]) -> Any:
    """``parse_object`` once per payload object (payloads are never mutated after an event)."""
    c = _cache(world)
    hit = c.parsed.get(id(payload))
    if hit is not None and hit[0] is payload:
        return hit[1]
    obj = parse_object(payload, c.claim_specs)
    if len(c.parsed) > 200_000:
        c.parsed.clear()
    c.parsed[id(payload)] = (payload, obj)
    return obj


def augmented_claims(world: World) -> dict[int, tuple[dict[str, Any], dict[tuple[Any, ...], dict[str, Any]]]]:
    """The engine's claims with policy tiers applied, kept for as long as ``world`` lives: a retry
    gets the same object back, so ``typed`` hits. Kept per world rather than per process, so a
    finished simulation or replay leaves none of its claims behind."""
    return _cache(world).augmented


def forget_claims(world: World, claims: list[dict[str, Any]]) -> None:
    """Drop what the caches keep for claim objects that left the world (their pod is gone).

    The memos are bounded by size alone, so without this they keep tens of thousands of deleted
    claims alive over a simulated day, each with its parsed and augmented copies: several KB per
    claim that no later decision reads. Dropping an entry never changes an answer."""
    c: _WorldCache | None = world.derived.get(CACHE_KEY)
    if c is None:
        return
    for claim in claims:
        hit = c.augmented.get(id(claim))
        if hit is not None and hit[0] is claim:
            del c.augmented[id(claim)]
            for aug in hit[1].values():
                _forget_payload(c, aug)
        _forget_payload(c, claim)
    matcher = world.derived.get("model_matcher")
    if matcher is not None:
        matcher.forget(claims)


def _forget_payload(c: _WorldCache, payload: dict[str, Any]) -> None:
    hit = c.parsed.get(id(payload))
    if hit is not None and hit[0] is payload:
        del c.parsed[id(payload)]


def node_inventory(world: World, node: str) -> Any:
    """An inventory of just this node's slices (pools here are per node): rebuilt only when the node
    or the device classes change, so the allocator's per-device caches survive changes elsewhere."""
    if world.has_shared_slices:
        return inventory(world)
    c = _cache(world)
    key = (world.class_version, world.node_versions.get(node, 0))
    hit = c.per_node.get(node)
    if hit is not None and hit[0] == key:
        return hit[1]
    slices = [s for _, s in world.items("ResourceSlice") if s.get("spec", {}).get("nodeName") == node] \
        if node not in world.node_devices else _node_slices(world, node)
    pools = {(s["spec"].get("driver", ""), s["spec"].get("pool", {}).get("name", "")) for s in slices}
    rules = [r for _, r in world.items("DeviceTaintRule") if _rule_may_match(r, pools)]
    inv = Inventory(slices=[typed(world, s) for s in slices],
                    classes=[typed(world, s) for _, s in world.items("DeviceClass")],
                    taint_rules=[typed(world, r) for r in rules], features=Features())
    if c.evaluator is not None and c.evaluator_version == world.class_version and hasattr(inv, "selector_evaluator"):
        inv.selector_evaluator = c.evaluator
    c.per_node[node] = (key, inv)
    return inv


def _node_slices(world: World, node: str) -> list[dict[str, Any]]:
    names: set[str] = set()
    for dev_id in world.node_devices.get(node, []):
        dev = world.devices[dev_id]
        names.update(world.pool_slices.get((dev.driver, dev.pool), ()))
    bucket = world.objects.get("ResourceSlice", {})
    return [bucket[n] for n in sorted(names) if n in bucket]


def _rule_may_match(rule: dict[str, Any], pools: set[tuple[str, str]]) -> bool:
    sel = (rule.get("spec") or {}).get("deviceSelector") or {}
    return not sel.get("pool") or any((not sel.get("driver") or sel["driver"] == d) and sel["pool"] == p
                                      for d, p in pools)


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


def allocated_state(world: World, node: str, held: tuple[str, ...] = (), freed: frozenset[str] = frozenset()) -> Any:
    if not world.has_shared_slices:
        # Every device in use here is taken whole (results of the world's allocations on this
        # node, or held for a reservation): exactly the ids ``from_results`` would add, without
        # writing each as a result and reading it back.
        allocated_by = world.allocated_by
        state = AllocatedState()
        state.allocated_devices = {dev_id for dev_id in world.node_devices.get(node, ())
                                   if dev_id in allocated_by and dev_id not in freed}
        state.allocated_devices.update(held)
        return state
    extra = [dict(zip(("driver", "pool", "device"), dev_id.split("/", 2), strict=True)) for dev_id in held] if held else []
    results: list[dict[str, Any]] = []
    for _, claim in world.items("ResourceClaim"):
        alloc = (claim.get("status") or {}).get("allocation")
        if alloc:
            results.extend(r for r in (alloc.get("devices") or {}).get("results", []) or []
                           if not freed or f"{r.get('driver')}/{r.get('pool')}/{r.get('device')}" not in freed)
    return AllocatedState.from_results(results + extra)


def allocate_on_node(world: World, node: str, claims: list[dict[str, Any]], policy: Policy,
                     explain: bool = True, held: tuple[str, ...] = (),
                     freed: frozenset[str] = frozenset()) -> AllocationOutcome:
    """The allocator on ``node``; ``freed`` devices count as free although allocated (what a
    reclaim would make of them, ``audit.scheduler.reclaim``)."""
    node_obj = typed(world, world.get("Node", "", node) or {"apiVersion": "v1", "kind": "Node", "metadata": {"name": node}})
    typed_claims = [typed(world, c) for c in claims]
    allocator = Allocator(node_inventory(world, node), allocated_state(world, node, held, freed), quirks=_UPSTREAM_QUIRKS,
                          health=lambda taint: policy.is_unhealthy_taint(taint.key))
    outcome: AllocationOutcome = allocator.allocate(node_obj, typed_claims, explain=explain)
    c = _cache(world)
    shared = getattr(allocator.inventory, "selector_evaluator", None)
    if shared is not None and (c.evaluator is None or c.evaluator_version != world.class_version):
        c.evaluator, c.evaluator_version = shared, world.class_version
    return outcome
