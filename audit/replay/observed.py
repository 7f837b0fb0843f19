"""Observed decisions: does our allocator pick the devices the real scheduler picked on that node?

A decision observed on a real cluster names its node (taken from the binding; upstream samples
nodes, so the node is an input rather than ClaimTrail's own node choice). Its inputs are the world just before the
claims' allocation was written: replay finds, in the event log up to the record's seq, the last
upsert that gave each of the pod's claims its ``status.allocation``, rebuilds the world at the seq
before the latest of them (every other allocation counts as in use, the pod's own claims are not
allocated yet), runs the exact per-node allocator on the node and compares, per claim, the
(request, device) pairs. The record's own seq is not used for this: watchers of different kinds
race, so by then the claim may already be deleted. Fields upstream randomises or stamps at run
time — ``shareID`` and ``allocationTimestamp`` (resource.k8s.io/v1 ``DeviceRequestAllocationResult``
and ``AllocationResult``) — are blanked by
comparing only request and device identity. Agreement is ``match``; the share that agree over a
batch is the "policy correctness" metric.
"""

from __future__ import annotations

from typing import Any

from audit.allocator import AllocatedState, Allocator, Quirks, Status
from audit.events import EventType
from audit.records import DecisionRecord
from audit.replay.checkpoints import DEFAULT_INTERVAL
from audit.replay.diff import structural_diff
from audit.replay.result import Cause, ReplayResult
from audit.replay.source import ReplaySource
from audit.scheduler import engine
from audit.scheduler.nodealloc import node_inventory, typed
from audit.world import World

Pair = tuple[str, str]  # (request, "driver/pool/device")
# how far before an observed record its claims' allocation events are looked for
LOOKBACK = DEFAULT_INTERVAL


def allocation_versions(source: ReplaySource, cluster: str,
                        records: list[DecisionRecord]) -> dict[str, Any]:
    """Per decision id: (seq to rebuild the world at, allocated claim payloads), or a finished
    ``ReplayResult`` when there is nothing to re-run or the allocation is not in the log."""
    checkable = [r for r in records if r.node and r.devices and r.claims]
    out: dict[str, Any] = {}
    for r in records:
        if r not in checkable:
            out[r.decision_id] = ReplayResult(r.decision_id, engine.ENGINE_VERSION, r.policy_digest, True,
                                              diff=["not re-run: no devices were allocated"])
    if not checkable:
        return out
    lo = max(-1, min(r.seq for r in checkable) - LOOKBACK)
    hi = max(r.seq for r in checkable)
    wanted = {f"{r.namespace}/{c}" for r in checkable for c in r.claims}
    seen: dict[str, list[tuple[int, dict[str, Any]]]] = {}
    for ev in source.events(cluster, lo, hi):
        key = f"{ev.namespace}/{ev.name}"
        if (ev.object_kind == "ResourceClaim" and ev.type == EventType.UPSERT.value and key in wanted
                and (ev.payload.get("status") or {}).get("allocation")):
            seen.setdefault(key, []).append((ev.seq, ev.payload))
    for r in checkable:
        found: list[tuple[int, dict[str, Any]]] = []
        for c in r.claims:
            versions = [v for v in seen.get(f"{r.namespace}/{c}", []) if v[0] <= r.seq]
            if not versions:
                out[r.decision_id] = ReplayResult(
                    r.decision_id, engine.ENGINE_VERSION, r.policy_digest, False, Cause.INPUT_MISMATCH.value,
                    [f"ResourceClaim {r.namespace}/{c}: no allocation in events {lo + 1}..{r.seq}"], observed=True)
                break
            found.append(versions[-1])
        else:
            out[r.decision_id] = (max(seq for seq, _ in found) - 1, [payload for _, payload in found])
    return out


def _pairs(results: list[dict[str, Any]]) -> list[Pair]:
    return [(str(x.get("request", "")), f"{x.get('driver', '')}/{x.get('pool', '')}/{x.get('device', '')}")
            for x in results]


def _results(claim: dict[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = (((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}).get(
        "results") or []
    return out


def allocator_choice(world: World, node: str, claims: list[dict[str, Any]]) -> tuple[dict[str, list[Pair]], str]:
    """What our allocator picks on ``node`` for the claims (given allocated, as observed), and a
    message when it cannot run or picks nothing."""
    own = {dev for c in claims for _, dev in _pairs(_results(c))}
    in_use = [dict(zip(("driver", "pool", "device"), dev_id.split("/", 2), strict=True))
              for dev_id in world.node_devices.get(node, []) if dev_id in world.allocated_by and dev_id not in own]
    node_obj = world.get("Node", "", node)
    if node_obj is None:
        return {}, f"Node {node}: not in the world at seq {world.seq}"
    allocator = Allocator(node_inventory(world, node), AllocatedState.from_results(in_use), quirks=Quirks(),
                          health=lambda taint: world.policy.is_unhealthy_taint(taint.key))
    unallocated = [{k: v for k, v in c.items() if k != "status"} for c in claims]
    outcome = allocator.allocate(typed(world, node_obj), [typed(world, c) for c in unallocated])
    if outcome.status != Status.SUCCESS:
        return {}, f"allocator outcome {outcome.status.value}: {outcome.message or outcome.error_code}"
    return {alloc.claim: _pairs(alloc.results) for alloc in outcome.allocations}, ""


def check_observed(world: World, record: DecisionRecord, claims: list[dict[str, Any]]) -> ReplayResult:
    observed = {str(c["metadata"]["name"]): _pairs(_results(c)) for c in claims}
    expected, problem = allocator_choice(world, record.node, claims)
    diff = [problem] if problem else structural_diff({k: [list(p) for p in v] for k, v in observed.items()},
                                                     {k: [list(p) for p in v] for k, v in expected.items()})
    return ReplayResult(record.decision_id, engine.ENGINE_VERSION, record.policy_digest, not diff,
                        Cause.OUTPUT_MISMATCH.value if diff else "", diff, observed=True)
