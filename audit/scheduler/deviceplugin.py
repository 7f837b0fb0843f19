"""Legacy device-plugin pods (``nvidia.com/gpu`` limits), decided as the device plugin would.

The device plugin only counts GPUs per node: the first node by name with enough free
``nvidia.com/gpu`` that passes the node filters and the tenant's quota wins. The record is on
the ``device-plugin`` track with no device identities (the kubelet picks them later). When some
node the pod admits has the GPUs free and only the tenant's quota of its model stands in the way,
the pod is deferred on quota, as a DRA pod whose tiers the quota closes: its record says so (a
``quota_exhausted`` blocker with the tenant's usage and limits, retry class ``quota``) and the
cluster loop waits for quota to come back instead of for free GPUs. The one tier's
``quota_exhausted`` figure counts the free GPUs of every node the quota turned the pod away from;
when those nodes hold several models whose quotas are full, the record names each: one blocker per
model, in the order the nodes came, each with ``over_quota``, that model's part of the figure (a lone
blocker's is the whole figure, so it carries none): ``audit.scheduler.quota.closed_details``, which
gives a DRA tier of several models that the quota closed its blockers alike.
"""

from __future__ import annotations

from audit.records import (
    ANY_MODEL,
    Blocker,
    Outcome,
    RetryClass,
    TierBlocker,
    TierSummary,
    Track,
    decision_id,
)
from audit.scheduler.attempt import AttemptContext, Decision, Proposal, new_record
from audit.scheduler.filters import node_filter
from audit.scheduler.quota import QuotaCheck, check_quota, closed_details
from audit.world import DEVICE_PLUGIN_RESOURCE, device_plugin_gpus


def node_blocker(ctx: AttemptContext, node: str, gpus: int) -> str | QuotaCheck | None:
    """What keeps the pod's ``gpus`` off ``node``: ``no_room``, ``node_filtered``, the tenant's
    failed quota check of the node's model, or None when the node takes it. The one rule both the
    decision and ``engine.may_place`` (whether a wake is worth an attempt) read."""
    world = ctx.world
    if world.dp_capacity[node] - world.dp_used.get(node, 0) < gpus:
        return "no_room"
    if node_filter(world, node, ctx.pod) is not None:
        return "node_filtered"
    q = check_quota(world, ctx.policy, ctx.tenant, world.dp_model.get(node, "unknown"), gpus)
    return None if q.fits else q


def decide_device_plugin(ctx: AttemptContext) -> Decision:
    world = ctx.world
    gpus = device_plugin_gpus(ctx.pod)
    rec = new_record(ctx, [], [], Outcome.UNSCHEDULABLE, Track.DEVICE_PLUGIN)
    rec.decision_id = decision_id(world.cluster, ctx.uid, ctx.attempt)
    rec.preference = [DEVICE_PLUGIN_RESOURCE]
    rec.preferred_model = ""
    capacity = sum(world.dp_capacity.values())
    used = sum(max(0, world.dp_used.get(n, 0)) for n in world.dp_capacity)
    reasons: dict[str, int] = {}
    # model -> its quota's check and the free GPUs of its nodes with room that the pod admits, in
    # the order the nodes came
    closed: dict[str, tuple[QuotaCheck, int]] = {}
    chosen = ""
    for node in sorted(world.dp_capacity):
        free = world.dp_capacity[node] - world.dp_used.get(node, 0)
        blocked = node_blocker(ctx, node, gpus)
        if blocked is None:
            chosen = node
            break
        if blocked == "node_filtered":
            reasons["node_filtered"] = reasons.get("node_filtered", 0) + free
        elif isinstance(blocked, QuotaCheck):
            seen = closed.get(blocked.model)
            closed[blocked.model] = (blocked, free + (seen[1] if seen else 0))
    if used:
        reasons["in_use"] = used
    quota_blocked = sum(free for _, free in closed.values())
    if quota_blocked:
        reasons["quota_exhausted"] = quota_blocked
    if chosen:
        reasons["selected"] = gpus
    rest = capacity - sum(reasons.values())
    if rest > 0:
        reasons["not_reached"] = rest
    rec.tiers = [TierSummary(index=0, request="nvidia.com/gpu", model=ANY_MODEL, considered=capacity,
                             reasons=dict(sorted(reasons.items())), nodes_evaluated=0)]
    if not chosen and closed:
        rec.outcome = Outcome.DEFERRED.value
        rec.retry_class = RetryClass.QUOTA.value
        rec.blockers, rec.message = _quota_deferral(ctx.tenant, gpus, list(closed.values()))
        return Decision(ctx.pod_key, ctx.attempt, rec.seal(), satisfiable=True)
    if not chosen:
        rec.retry_class = RetryClass.UNSCHEDULABLE.value if any(c >= gpus for c in world.dp_capacity.values()) \
            else RetryClass.TERMINAL.value
        rec.message = f"no device-plugin node has {gpus} free nvidia.com/gpu"
        return Decision(ctx.pod_key, ctx.attempt, rec.seal(), satisfiable=rec.retry_class != RetryClass.TERMINAL.value)
    model = world.dp_model.get(chosen, "unknown")
    rec.outcome = Outcome.ALLOCATED.value
    rec.node = chosen
    rec.tier_index = 0
    rec.allocated_model = model
    rec.message = f"{gpus} x nvidia.com/gpu on {chosen} (device plugin: count only)"
    proposal = Proposal(chosen, [], [], [], {}, 0, dp_gpus=gpus)
    return Decision(ctx.pod_key, ctx.attempt, rec.seal(), proposal=proposal)


def _quota_deferral(tenant: str, gpus: int, closed: list[tuple[QuotaCheck, int]]) -> tuple[list[TierBlocker], str]:
    """The blockers and message of a pod deferred on quota: ``closed`` holds each model whose
    quota turned it away, with the free GPUs of that model's nodes it passed over for it."""
    def said(q: QuotaCheck) -> str:
        limit = "no borrowing limit" if q.limit is None else f"limit {q.limit}"
        return f"{q.used} in use, nominal {q.nominal}, {limit}, {q.lendable} lendable by other tenants"

    first = closed[0][0]
    text = f"tenant {tenant} has no {first.model} quota left for {gpus} nvidia.com/gpu ({said(first)})"
    blockers = [TierBlocker(Blocker.QUOTA_EXHAUSTED.value, 0, d) for d in closed_details(closed)]
    if len(closed) == 1:
        return blockers, f"{text}; a device-plugin node has them free"
    others = "".join(f", nor {q.model} quota ({said(q)})" for q, _ in closed[1:])
    free = ", ".join(f"{n} {q.model}" for q, n in closed)
    return blockers, f"{text}{others}; device-plugin nodes have them free ({free})"
