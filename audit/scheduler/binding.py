"""The bind-time re-check: what changed between filter and bind, and what happens next.

Checked in order against the world at bind time: the node is gone (``node_lost``), a device's
slice moved to another generation (``stale_slice``), a device now carries a taint the policy
calls unhealthy (``unhealthy``), a device was taken by another claim (``binding_conflict``).
A failed bind is retried with the policy's capped exponential backoff when its class is
retryable, the retry budget is not spent and the cluster still has devices that could satisfy
the claims; otherwise it is terminal. The budget (``spec.retry.maxAttempts``) counts bind
failures only: passes that left the pod waiting in its queue are not failed attempts. The k-th
bind failure of a pod backs off min(cap, base·2^(k−1)) and its record says "bind failure k of
N" (and carries k in the failure's evidence, where replay reads it back). A successful bind returns the events the decision writes: each
claim's ``status.allocation`` (+ ``reservedFor``) and the pod's ``nodeName``.
"""

from __future__ import annotations

from typing import Any

from audit.events import EventType, WorldEvent
from audit.policy import Policy
from audit.records import Blocker, DecisionRecord, Outcome, RetryClass, TierBlocker
from audit.scheduler.attempt import Decision, Proposal, model_matcher, still_satisfiable
from audit.scheduler.tiers import request_tiers, resolve_claims
from audit.timestamps import format_time_ms
from audit.world import World

# an enum member's ``.value`` is a property call: read once, for the events of every bind
_UPSERT = EventType.UPSERT.value


def bind_check(world: World, proposal: Proposal) -> tuple[RetryClass, dict[str, Any]] | None:
    """What changed between filter and bind that makes the proposal invalid, if anything."""
    if proposal.node not in world.nodes:
        return RetryClass.NODE_LOST, {"node": proposal.node}
    if proposal.dp_gpus:
        free = world.dp_capacity.get(proposal.node, 0) - world.dp_used.get(proposal.node, 0)
        if free < proposal.dp_gpus:
            return RetryClass.BINDING_CONFLICT, {"node": proposal.node, "free": free}
        return None
    for dev_id in proposal.device_ids:
        dev = world.devices.get(dev_id)
        if dev is None or (dev.slice, dev.generation) != proposal.generations[dev_id]:
            return RetryClass.STALE_SLICE, {"device": dev_id, "node": proposal.node,
                                            "generation": str(dev.generation if dev else "gone")}
        if dev.unhealthy:
            keys = [k for k, _, e in dev.taints if world.policy.is_unhealthy_taint(k)]
            return RetryClass.UNHEALTHY, {"device": dev_id, "node": proposal.node, "taint": ",".join(keys)}
        owner = world.allocated_by.get(dev_id)
        if owner is not None and owner not in proposal.claim_keys:
            return RetryClass.BINDING_CONFLICT, {"device": dev_id, "node": proposal.node, "holder": owner}
    return None


def bind_failures_before(record: DecisionRecord) -> int:
    """How many bind failures the pod had before the one ``record`` reports (0 if none)."""
    for b in reversed(record.blockers):
        k = b.detail.get("bind_failure")
        if isinstance(k, int) and "bind_seq" in b.detail:
            return max(0, k - 1)
    return 0


def bind(world: World, decision: Decision, time_ms: int, policy: Policy | None = None,
         failures_before: int = 0) -> Decision:
    """Re-check at bind time; on success return the events the allocation writes.

    ``failures_before``: the pod's bind failures so far (what the retry budget counts)."""
    policy = policy or world.policy
    p = decision.proposal
    if p is None:
        return decision
    failure = bind_check(world, p)
    ns, _, name = decision.pod_key.partition("/")
    pod = world.get("Pod", ns, name)
    if failure is None and pod is not None:
        # A shallow copy with its events set, made as ``copy.copy`` makes it (a new instance given
        # the same attribute dict) without the trip through the pickle protocol that ``copy.copy``
        # takes for a dataclass, nor the field list and constructor of ``dataclasses.replace``.
        bound = Decision.__new__(Decision)
        bound.__dict__.update(decision.__dict__)
        bound.events = _bind_events(world, pod, p, time_ms)
        return bound
    cls, detail = failure if failure is not None else (RetryClass.TERMINAL, {"pod": decision.pod_key})
    rec = DecisionRecord.from_dict(decision.record.to_dict())
    satisfiable = pod is not None and cls != RetryClass.TERMINAL and _satisfiable_after(world, pod, decision)
    k = failures_before + 1
    retryable = satisfiable and policy.is_retryable(cls.value) and k < policy.max_attempts
    rec.outcome = Outcome.ERROR.value
    rec.node, rec.devices, rec.allocated_model, rec.fallback = "", [], "", False
    # The reservation the proposal would have used: still held after a retryable failure, ended
    # with the pod after a terminal one.
    kept = [b for b in rec.blockers if b.code != Blocker.RESERVATION_RELEASED.value]
    if not retryable:
        kept += [TierBlocker(b.code, b.tier, {**b.detail, "on_reserved_node": False, "cause": "failed"})
                 for b in rec.blockers if b.code == Blocker.RESERVATION_RELEASED.value]
    rec.blockers = [*kept, TierBlocker(cls.value, p.tier, {
        **detail, "bind_seq": world.seq, "bind_failure": k, "max_bind_failures": policy.max_attempts})]
    budget = f"bind failure {k} of {policy.max_attempts}"
    if retryable:
        rec.retry_class = cls.value
        rec.backoff_ms = policy.backoff_ms(k)
        rec.message = f"bind-time re-check failed ({cls.value}); {budget}; retrying in {rec.backoff_ms} ms"
    else:
        rec.retry_class = RetryClass.TERMINAL.value
        why = ("pod deleted before bind" if pod is None else
               budget if satisfiable else
               "no node in the cluster can satisfy the claims any more")
        rec.message = f"bind-time re-check failed ({cls.value}); terminal: {why}"
    return Decision(decision.pod_key, decision.attempt, rec.seal(), satisfiable=satisfiable)


def _satisfiable_after(world: World, pod: dict[str, Any], decision: Decision) -> bool:
    if decision.proposal is not None and decision.proposal.dp_gpus:
        return any(c >= decision.proposal.dp_gpus for n, c in world.dp_capacity.items() if n in world.nodes)
    pc = resolve_claims(world, pod)
    return still_satisfiable(world, request_tiers(pc.claims, model_matcher(world)))


def _bind_events(world: World, pod: dict[str, Any], p: Proposal, time_ms: int) -> list[WorldEvent]:
    time = format_time_ms(time_ms)
    seq = world.seq
    events: list[WorldEvent] = []
    ns = pod["metadata"].get("namespace", "")
    reserved = [{"resource": "pods", "name": pod["metadata"]["name"], "uid": pod["metadata"].get("uid", "")}]
    for alloc in p.allocations:
        claim = world.get("ResourceClaim", ns, alloc.claim)
        if claim is None:
            continue
        seq += 1
        status = {**(claim.get("status") or {}), "allocation": {
            "devices": {"results": alloc.results, "config": alloc.config}, "nodeSelector": alloc.node_selector},
            "reservedFor": reserved}
        events.append(WorldEvent(world.cluster, seq, time, _UPSERT, "ResourceClaim", ns, alloc.claim,
                                 {**claim, "status": status}))
    seq += 1
    events.append(WorldEvent(world.cluster, seq, time, _UPSERT, "Pod", ns, pod["metadata"]["name"],
                             {**pod, "spec": {**pod["spec"], "nodeName": p.node}}))
    return events
