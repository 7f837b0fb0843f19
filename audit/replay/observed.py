"""Observed decisions: does our allocator pick the devices the real scheduler picked on that node?

A decision observed on a real cluster names its node (taken from the binding; upstream samples
nodes, so the node is an input, DESIGN.md invariant 4). Replay rebuilds the world at the record's
seq, treats the pod's own claims as not yet allocated and every other allocation as in use, runs
the exact per-node allocator on that node and compares, per claim, the (request, device) pairs.
Fields upstream randomises or stamps at run time — ``shareID`` and ``allocationTimestamp``
(research/dra-allocator.md §4.9) — are blanked by comparing only request and device identity.
Agreement is ``match``; the agreement rate over a batch is the "policy correctness" metric.
"""

from __future__ import annotations

from typing import Any

from audit.allocator import AllocatedState, Allocator, Quirks, Status
from audit.records import DecisionRecord
from audit.replay.diff import structural_diff
from audit.scheduler import engine
from audit.scheduler.nodealloc import node_inventory, typed
from audit.world import World

Pair = tuple[str, str]  # (request, "driver/pool/device")


def observed_choice(record: DecisionRecord) -> dict[str, list[Pair]]:
    """Per claim name, what the scheduler chose (from the record's devices, in result order)."""
    out: dict[str, list[Pair]] = {name: [] for name in record.claims}
    first = record.claims[0] if record.claims else ""
    for d in record.devices:
        # a record lists devices claim by claim; one-claim pods are by far the common case
        out.setdefault(first, []).append((d.request, d.device))
    if len(record.claims) > 1:
        return {"(pod)": sorted(p for pairs in out.values() for p in pairs)}
    return out


def allocator_choice(world: World, record: DecisionRecord) -> tuple[dict[str, list[Pair]], str]:
    """What our allocator picks on the record's node, and a message when it picks nothing."""
    claims: list[dict[str, Any]] = []
    own: set[str] = set()
    for name in record.claims:
        claim = world.get("ResourceClaim", record.namespace, name)
        if claim is None:
            return {}, f"ResourceClaim {record.namespace}/{name}: not in the world at seq {world.seq}"
        for r in (((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results") or []:
            own.add(f"{r.get('driver', '')}/{r.get('pool', '')}/{r.get('device', '')}")
        claims.append({k: v for k, v in claim.items() if k != "status"})
    in_use = [dict(zip(("driver", "pool", "device"), dev_id.split("/", 2), strict=True))
              for dev_id in world.node_devices.get(record.node, []) if dev_id in world.allocated_by and dev_id not in own]
    node_obj = world.get("Node", "", record.node)
    if node_obj is None:
        return {}, f"Node {record.node}: not in the world at seq {world.seq}"
    allocator = Allocator(node_inventory(world, record.node), AllocatedState.from_results(in_use), quirks=Quirks(),
                          health=lambda taint: world.policy.is_unhealthy_taint(taint.key))
    outcome = allocator.allocate(typed(world, node_obj), [typed(world, c) for c in claims])
    if outcome.status != Status.SUCCESS:
        return {}, f"allocator outcome {outcome.status.value}: {outcome.message or outcome.error_code}"
    out: dict[str, list[Pair]] = {name: [] for name in record.claims}
    for alloc in outcome.allocations:
        out[alloc.claim] = [(str(r.get("request", "")), f"{r['driver']}/{r['pool']}/{r['device']}")
                            for r in alloc.results]
    if len(record.claims) > 1:
        return {"(pod)": sorted(p for pairs in out.values() for p in pairs)}, ""
    return out, ""


def check_observed(world: World, record: DecisionRecord) -> Any:
    from audit.replay.verify import Cause, ReplayResult

    if not record.node or not record.devices:
        return ReplayResult(record.decision_id, engine.ENGINE_VERSION, record.policy_digest, True, observed=True)
    expected, problem = allocator_choice(world, record)
    if problem:
        return ReplayResult(record.decision_id, engine.ENGINE_VERSION, record.policy_digest, False,
                            Cause.OUTPUT_MISMATCH.value, [problem], observed=True)
    observed = observed_choice(record)
    diff = structural_diff({k: [list(p) for p in v] for k, v in observed.items()},
                           {k: [list(p) for p in v] for k, v in expected.items()})
    return ReplayResult(record.decision_id, engine.ENGINE_VERSION, record.policy_digest, not diff,
                        Cause.OUTPUT_MISMATCH.value if diff else "", diff, observed=True)
