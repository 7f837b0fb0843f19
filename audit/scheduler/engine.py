"""The cluster decision engine: one pure function per allocation attempt, and its bind-time check.

``decide(world, pod_key, attempt, time_ms, policy)`` reads only the world at its seq (plus the
pod, attempt, time and policy) and returns a ``Decision``: a sealed ``DecisionRecord`` and, when a
node was found, a ``Proposal`` to bind. ``bind(world, decision, time_ms)`` re-checks the proposal
against the world at bind time (node gone -> ``node_lost``, slice generation moved ->
``stale_slice``, device now unhealthy -> ``unhealthy``, device taken -> ``binding_conflict``) and
returns the final record plus the events the decision causes (claim ``status.allocation`` and
pod ``nodeName``). Failed binds retry with capped exponential backoff while the claim is still
satisfiable by the cluster's devices and attempts remain, otherwise they are terminal.

Per pod: policy gates per tier (quota, fallback mode) -> cluster-level node filters -> the exact
per-node allocator -> node choice by the DESIGN.md contract: highest score Σ over firstAvailable
requests of (8 − chosen subrequest index), then node name. Nodes are visited in (score upper
bound descending, name) order using the world's free-device indexes, and the search stops as soon
as no unvisited node can beat the best found — the same choice as running the allocator on every
node (``brute_force_choice`` does exactly that, for tests).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from audit.allocator.outcome import AllocationOutcome, ClaimAllocation, Status
from audit.events import EventType, WorldEvent
from audit.policy import Policy
from audit.records import (
    Blocker,
    DecisionRecord,
    DeviceRef,
    Outcome,
    RetryClass,
    TierBlocker,
    TierSummary,
    Track,
    decision_id,
    digest,
)
from audit.scheduler.augment import augment_claim
from audit.scheduler.evidence import Visit, summarize, tier_request_name
from audit.scheduler.filters import node_filter
from audit.scheduler.nodealloc import allocate_on_node
from audit.scheduler.quota import check_quota
from audit.scheduler.sealing import seal
from audit.scheduler.tiers import (
    RequestTiers,
    SignatureModelMatcher,
    Tier,
    request_tiers,
    resolve_claims,
    template_version,
)
from audit.world import World, device_plugin_gpus, format_time_ms, parse_time_ms

ENGINE_VERSION = "claimtrail-engine/1"
# Upstream DynamicResources Score: Σ over firstAvailable requests of (8 − chosen subrequest index).
MAX_SUBREQUESTS = 8


@dataclass
class NodeTry:
    node: str
    ok: bool
    score: int = 0
    filtered: dict[str, str] | None = None
    outcome: AllocationOutcome | None = None
    chosen: dict[str, int] = field(default_factory=dict)  # "<claim key>/<request>" -> original index
    reject: str = ""
    reject_detail: dict[str, Any] = field(default_factory=dict)
    results: list[tuple[str, dict[str, Any]]] = field(default_factory=list)  # (claim key, result)


@dataclass
class Proposal:
    node: str
    claim_keys: list[str]
    allocations: list[ClaimAllocation]
    device_ids: list[str]
    generations: dict[str, tuple[str, int]]
    tier: int
    dp_gpus: int = 0


@dataclass
class Decision:
    pod_key: str
    attempt: int
    record: DecisionRecord
    proposal: Proposal | None = None
    events: list[WorldEvent] = field(default_factory=list)
    satisfiable: bool = True

    @property
    def retry_class(self) -> str:
        return self.record.retry_class


class _Context:
    """Everything one attempt derives from its inputs (kept together so helpers stay small)."""

    def __init__(self, world: World, pod_key: str, attempt: int, time_ms: int, policy: Policy) -> None:
        self.world, self.pod_key, self.attempt, self.time_ms, self.policy = world, pod_key, attempt, time_ms, policy
        ns, _, name = pod_key.partition("/")
        pod = world.get("Pod", ns, name)
        if pod is None:
            raise KeyError(f"Pod {pod_key}: not in the world at seq {world.seq}")
        self.pod = pod
        self.namespace, self.name = ns, name
        self.uid = str(pod["metadata"].get("uid", ""))
        self.tenant = policy.tenant_for(ns)
        created = world.pending.get(pod_key)
        if created is None:
            created = parse_time_ms(pod["metadata"].get("creationTimestamp") or world.time or format_time_ms(time_ms))
        self.wait_ms = max(0, time_ms - created)
        self.time = format_time_ms(time_ms)


_MATCHERS: dict[int, tuple[World, SignatureModelMatcher]] = {}


def _matcher(world: World) -> SignatureModelMatcher:
    hit = _MATCHERS.get(id(world))
    if hit is None or hit[0] is not world:
        if len(_MATCHERS) > 64:
            _MATCHERS.clear()
        hit = (world, SignatureModelMatcher(world))
        _MATCHERS[id(world)] = hit
    return hit[1]


def decide(world: World, pod_key: str, attempt: int, time_ms: int, policy: Policy | None = None) -> Decision:
    ctx = _Context(world, pod_key, attempt, time_ms, policy or world.policy)
    pc = resolve_claims(world, ctx.pod)
    if not pc.claims and not pc.missing and not pc.allocated and device_plugin_gpus(ctx.pod) > 0:
        return _decide_device_plugin(ctx)
    if pc.missing or not pc.claims:
        msg = (f'pod "{pod_key}": ResourceClaim not created yet' if pc.missing
               else f'pod "{pod_key}": no unallocated claims to allocate')
        rec = _record(ctx, pc.claims, [], Outcome.UNSCHEDULABLE if pc.missing else Outcome.ERROR)
        rec.retry_class = RetryClass.UNSCHEDULABLE.value if pc.missing else RetryClass.TERMINAL.value
        rec.message = msg
        return Decision(pod_key, attempt, seal(rec), satisfiable=bool(pc.missing))
    rts = request_tiers(pc.claims, _matcher(world))
    return _decide_dra(ctx, pc.claims, rts)


def _policy_gates(ctx: _Context, rts: list[RequestTiers]) -> tuple[
        dict[tuple[str, str], tuple[Tier, ...]], dict[tuple[str, str, int], str], list[TierBlocker], bool]:
    """Tiers the policy leaves open per request (fallback mode, quota), and why others are closed."""
    world, policy = ctx.world, ctx.policy
    closed: dict[tuple[str, str, int], str] = {}
    blockers: list[TierBlocker] = []
    allowed: dict[tuple[str, str], tuple[Tier, ...]] = {}
    holding = policy.fallback_mode == "strict" or (
        policy.fallback_mode == "wait-for-preferred" and ctx.wait_ms < policy.fallback_wait_ms)
    for rt in rts:
        keep: list[Tier] = []
        for t in rt.tiers:
            if rt.first_available and t.index > 0 and holding:
                closed[(t.claim, t.request, t.index)] = "not_reached"
                continue
            checks = [check_quota(world, policy, ctx.tenant, m, t.count) for m in t.models]
            if checks and not any(c.fits for c in checks):
                closed[(t.claim, t.request, t.index)] = "quota_exhausted"
                blockers.append(TierBlocker(Blocker.QUOTA_EXHAUSTED.value, t.index, checks[0].detail()))
                continue
            keep.append(t)
        allowed[(rt.claim, rt.request)] = tuple(keep)
    return allowed, closed, blockers, holding


def _augmented(ctx: _Context, claims: list[dict[str, Any]], rts: list[RequestTiers],
               allowed: dict[tuple[str, str], tuple[Tier, ...]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for c in claims:
        ckey = _claim_key(c)
        per_req = {rt.request: tuple(t.index for t in allowed[(rt.claim, rt.request)])
                   for rt in rts if rt.claim == ckey and rt.first_available}
        key = (id(c), tuple(sorted(per_req.items())), ctx.policy.digest)
        hit = _AUGMENTED.get(key)
        if hit is None or hit[0] is not c:
            aug = augment_claim(c, per_req, ctx.policy)
            assert aug is not None  # callers only augment when every request keeps a tier
            if len(_AUGMENTED) > 50_000:
                _AUGMENTED.clear()
            # the same augmented object on every attempt lets the typed-object cache hit on retries
            hit = _AUGMENTED[key] = (c, aug)
        out.append(hit[1])
    return out


_AUGMENTED: dict[tuple[Any, ...], tuple[dict[str, Any], dict[str, Any]]] = {}


def _decide_dra(ctx: _Context, claims: list[dict[str, Any]], rts: list[RequestTiers]) -> Decision:
    world = ctx.world
    allowed, closed, blockers, holding = _policy_gates(ctx, rts)
    multi_claim = len(claims) > 1
    if any(not tiers for tiers in allowed.values()):
        rec = _record(ctx, claims, rts, Outcome.DEFERRED)
        rec.blockers = blockers
        rec.retry_class = RetryClass.QUOTA.value
        rec.tiers = summarize(world, rts, closed, [], multi_claim)
        rec.message = f"tenant {ctx.tenant} has no quota left for any allowed tier"
        return Decision(ctx.pod_key, ctx.attempt, seal(rec), satisfiable=True)
    aug_claims = _augmented(ctx, claims, rts, allowed)
    best, visits, steps = _search(ctx, claims, aug_claims, rts, allowed)
    summaries = summarize(world, rts, closed, visits, multi_claim)
    if best is None:
        return _no_node(ctx, claims, rts, allowed, blockers, summaries, steps, holding)
    return _proposal(ctx, claims, rts, best, blockers, summaries, steps)


def _claim_key(claim: dict[str, Any]) -> str:
    return f"{claim['metadata'].get('namespace', '')}/{claim['metadata']['name']}"


def max_score(rts: list[RequestTiers], allowed: dict[tuple[str, str], tuple[Tier, ...]]) -> int:
    return sum(MAX_SUBREQUESTS - allowed[(rt.claim, rt.request)][0].index for rt in rts if rt.first_available)


def _search(ctx: _Context, claims: list[dict[str, Any]], aug_claims: list[dict[str, Any]], rts: list[RequestTiers],
            allowed: dict[tuple[str, str], tuple[Tier, ...]]) -> tuple[NodeTry | None, list[Visit], int]:
    best: NodeTry | None = None
    visits: list[Visit] = []
    steps = 0
    top = max_score(rts, allowed)
    for ub, node in candidate_order(ctx.world, rts, allowed):
        if best is not None and (ub < best.score or (ub == best.score and node > best.node)):
            break  # bounds only fall and names only rise from here on
        nt = evaluate_node(ctx, node, claims, aug_claims, rts)
        if nt.outcome is not None:
            steps += nt.outcome.steps
        visits.append(Visit(node, nt.filtered, _evidence_index(nt.outcome)))
        if nt.ok and (best is None or nt.score > best.score or (nt.score == best.score and node < best.node)):
            best = nt
            if best.score == top:
                break
    return best, visits, steps


def _evidence_index(outcome: AllocationOutcome | None) -> dict[tuple[str, str], list[Any]]:
    if outcome is None:
        return {}
    return {(ev.claim, ev.request): ev.verdicts for ev in outcome.evidence}


def candidate_nodes(world: World, t: Tier) -> list[str]:
    """Nodes that could hold tier ``t`` (a superset of those where it succeeds), sorted by name."""
    if world.has_shared_slices:
        return sorted(world.nodes)
    if t.tolerates or t.all_devices:
        names: set[str] = set()
        for m in t.models:
            names.update(world.nodes_with_model(m))
        return sorted(n for n in names if n in world.nodes)
    if len(t.models) == 1:
        return [n for n in world.nodes_with_free(t.models[0], t.count) if n in world.nodes]
    # Several models: nodes where one model alone has enough, plus nodes carrying several models
    # whose free devices together may be enough.
    names = set()
    for m in t.models:
        names.update(world.nodes_with_free(m, t.count))
    for n in world.multi_model_nodes:
        if sum(world.free_healthy(n, m) for m in t.models) >= t.count:
            names.add(n)
    return sorted(n for n in names if n in world.nodes)


def _iter_candidates(world: World, t: Tier) -> Iterator[str]:
    """``candidate_nodes`` lazily for the common single-model tier (the search usually stops early)."""
    if world.has_shared_slices or t.tolerates or t.all_devices or len(t.models) != 1:
        yield from candidate_nodes(world, t)
        return
    nodes = world.nodes
    for n in world.nodes_with_free(t.models[0], t.count):
        if n in nodes:
            yield n


def candidate_order(world: World, rts: list[RequestTiers],
                    allowed: dict[tuple[str, str], tuple[Tier, ...]]) -> Iterator[tuple[int, str]]:
    """(score upper bound, node) in bound-descending, name-ascending order."""
    if len(rts) == 1:
        rt = rts[0]
        seen: set[str] = set()
        for t in allowed[(rt.claim, rt.request)]:
            ub = MAX_SUBREQUESTS - t.index if rt.first_available else 0
            for node in _iter_candidates(world, t):
                if node not in seen:
                    seen.add(node)
                    yield ub, node
        return
    best_index: list[dict[str, int]] = []
    for rt in rts:
        per: dict[str, int] = {}
        for t in allowed[(rt.claim, rt.request)]:
            for node in candidate_nodes(world, t):
                per.setdefault(node, t.index)
        best_index.append(per)
    common = set(best_index[0])
    for per in best_index[1:]:
        common &= set(per)
    bounds = []
    for node in common:
        ub = sum(MAX_SUBREQUESTS - per[node] for rt, per in zip(rts, best_index, strict=True) if rt.first_available)
        bounds.append((-ub, node))
    for neg, node in sorted(bounds):
        yield -neg, node


def evaluate_node(ctx: _Context, node: str, claims: list[dict[str, Any]], aug_claims: list[dict[str, Any]],
                  rts: list[RequestTiers]) -> NodeTry:
    """The allocator on one node plus the policy's post-checks; what brute force runs everywhere."""
    f = node_filter(ctx.world, node, ctx.pod)
    if f is not None:
        return NodeTry(node, False, filtered=f)
    outcome = allocate_on_node(ctx.world, node, aug_claims, ctx.policy)
    if outcome.status != Status.SUCCESS:
        return NodeTry(node, False, outcome=outcome, reject=outcome.status.value,
                       reject_detail={"code": outcome.error_code, "message": outcome.message})
    index_of = _subrequest_indexes(claims)
    chosen: dict[str, int] = {}
    results: list[tuple[str, dict[str, Any]]] = []
    ns = ctx.namespace
    for alloc in outcome.allocations:
        ckey = f"{ns}/{alloc.claim}"
        for r in alloc.results:
            req, _, sub = str(r.get("request", "")).partition("/")
            if sub:
                chosen[f"{ckey}/{req}"] = index_of[(ckey, req, sub)]
            results.append((ckey, r))
    score = sum(MAX_SUBREQUESTS - chosen.get(f"{rt.claim}/{rt.request}", 0) for rt in rts if rt.first_available)
    nt = NodeTry(node, True, score=score, outcome=outcome, chosen=chosen, results=results)
    models: dict[str, int] = {}
    for _, r in results:
        dev = ctx.world.devices.get(f"{r['driver']}/{r['pool']}/{r['device']}")
        m = dev.model if dev is not None else "unknown"
        models[m] = models.get(m, 0) + 1
    for m, n in sorted(models.items()):
        q = check_quota(ctx.world, ctx.policy, ctx.tenant, m, n)
        if not q.fits:
            nt.ok, nt.reject, nt.reject_detail = False, "quota_exhausted", q.detail()
            return nt
    if not ctx.policy.mixed_models and len(models) > 1:
        nt.ok, nt.reject, nt.reject_detail = False, "mixed_models", {"models": ",".join(sorted(models))}
    return nt


def _subrequest_indexes(claims: list[dict[str, Any]]) -> dict[tuple[str, str, str], int]:
    out: dict[tuple[str, str, str], int] = {}
    for c in claims:
        ckey = _claim_key(c)
        for req in ((c.get("spec") or {}).get("devices") or {}).get("requests", []) or []:
            for i, s in enumerate(req.get("firstAvailable") or []):
                out[(ckey, req["name"], s.get("name", ""))] = i
    return out


def brute_force_choice(world: World, pod_key: str, time_ms: int, policy: Policy | None = None) -> tuple[str, int] | None:
    """(node, score) from running the allocator on every node; the reference the search must match."""
    ctx = _Context(world, pod_key, 1, time_ms, policy or world.policy)
    pc = resolve_claims(world, ctx.pod)
    rts = request_tiers(pc.claims, _matcher(world))
    allowed = _policy_gates(ctx, rts)[0]
    if any(not tiers for tiers in allowed.values()):
        return None
    aug = _augmented(ctx, pc.claims, rts, allowed)
    best: tuple[int, str] | None = None
    for node in sorted(world.nodes):
        nt = evaluate_node(ctx, node, pc.claims, aug, rts)
        if nt.ok and (best is None or (-nt.score, node) < best):
            best = (-nt.score, node)
    return None if best is None else (best[1], -best[0])


# ---- records --------------------------------------------------------------------------------------


def _record(ctx: _Context, claims: list[dict[str, Any]], rts: list[RequestTiers], outcome: Outcome,
            track: Track = Track.DRA) -> DecisionRecord:
    claim_uids = [str(c["metadata"].get("uid", "")) for c in claims]
    primary = rts[0].tiers if rts else ()
    preference = [t.label for t in primary]
    input_digest = digest({
        "world": ctx.world.chain_digest, "seq": ctx.world.seq,
        "pod": {"key": ctx.pod_key, "uid": ctx.uid},
        "claims": [{"name": c["metadata"]["name"], "uid": c["metadata"].get("uid", ""), "spec": c.get("spec")} for c in claims],
        "policy": ctx.policy.digest, "attempt": ctx.attempt, "time": ctx.time,
    })
    return DecisionRecord(
        decision_id=decision_id(ctx.world.cluster, claim_uids[0] if claim_uids else ctx.uid, ctx.attempt),
        cluster=ctx.world.cluster, seq=ctx.world.seq, time=ctx.time, attempt=ctx.attempt, tenant=ctx.tenant,
        namespace=ctx.namespace, pod=ctx.name, pod_uid=ctx.uid, claims=[c["metadata"]["name"] for c in claims],
        claim_uids=claim_uids, preference=preference, policy_version=ctx.policy.version,
        policy_digest=ctx.policy.digest, outcome=outcome.value, preferred_model=preference[0] if preference else "",
        wait_ms=ctx.wait_ms, track=track.value, template_version=template_version(claims),
        engine_version=ENGINE_VERSION, input_digest=input_digest,
    )


def _proposal(ctx: _Context, claims: list[dict[str, Any]], rts: list[RequestTiers], best: NodeTry,
              blockers: list[TierBlocker], summaries: list[TierSummary], steps: int) -> Decision:
    world = ctx.world
    rec = _record(ctx, claims, rts, Outcome.ALLOCATED)
    primary = rts[0]
    tier = best.chosen.get(f"{primary.claim}/{primary.request}", 0)
    devices: list[DeviceRef] = []
    generations: dict[str, tuple[str, int]] = {}
    for _, r in best.results:
        dev_id = f"{r['driver']}/{r['pool']}/{r['device']}"
        dev = world.devices.get(dev_id)
        devices.append(DeviceRef(device=dev_id, node=best.node, model=dev.model if dev else "unknown",
                                 request=str(r.get("request", ""))))
        generations[dev_id] = (dev.slice, dev.generation) if dev else ("", -1)
    models = sorted({d.model for d in devices})
    rec.node = best.node
    rec.devices = devices
    rec.tier_index = tier
    rec.allocated_model = "|".join(models)
    rec.fallback = any(i > 0 for i in best.chosen.values())
    rec.tiers = summaries
    rec.blockers = blockers
    rec.steps = steps
    rec.message = f"allocated {len(devices)} device(s) on {best.node}" + (
        f" from tier {tier} ({rec.allocated_model})" if primary.first_available else "")
    assert best.outcome is not None
    proposal = Proposal(best.node, [_claim_key(c) for c in claims], list(best.outcome.allocations),
                        [d.device for d in devices], generations, tier)
    return Decision(ctx.pod_key, ctx.attempt, seal(rec), proposal=proposal)


def _no_node(ctx: _Context, claims: list[dict[str, Any]], rts: list[RequestTiers],
             allowed: dict[tuple[str, str], tuple[Tier, ...]], blockers: list[TierBlocker],
             summaries: list[TierSummary], steps: int, holding: bool) -> Decision:
    world = ctx.world
    satisfiable = still_satisfiable(world, rts)
    deferred_for_preferred = holding and ctx.policy.fallback_mode == "wait-for-preferred"
    outcome = Outcome.DEFERRED if deferred_for_preferred else Outcome.UNSCHEDULABLE
    rec = _record(ctx, claims, rts, outcome)
    for rt in rts:
        for t in allowed[(rt.claim, rt.request)]:
            blockers.append(TierBlocker(Blocker.INSUFFICIENT_ON_NODE.value, t.index, {
                "request": tier_request_name(t), "model": t.label, "count": t.count,
                "nodes_with_capacity": len(candidate_nodes(world, t)),
            }))
    if deferred_for_preferred:
        blockers.append(TierBlocker(Blocker.INSUFFICIENT_ON_NODE.value, 0, {
            "fallback_mode": ctx.policy.fallback_mode, "fallback_after_ms": ctx.policy.fallback_wait_ms - ctx.wait_ms}))
    rec.blockers = blockers
    rec.tiers = summaries
    rec.steps = steps
    rec.retry_class = RetryClass.UNSCHEDULABLE.value if satisfiable else RetryClass.TERMINAL.value
    if satisfiable:
        rec.message = "no node can hold the claims now; waiting for capacity"
        if deferred_for_preferred:
            rec.message = (f"waiting for {rts[0].tiers[0].label} (fallback allowed after "
                           f"{ctx.policy.fallback_wait_ms // 1000}s of waiting)")
        elif holding:
            rec.message = f"strict fallback mode: only {rts[0].tiers[0].label} is acceptable and none is free"
    else:
        rec.message = "unsatisfiable: no node in the cluster has enough matching devices for any allowed tier"
    return Decision(ctx.pod_key, ctx.attempt, seal(rec), satisfiable=satisfiable)


def still_satisfiable(world: World, rts: list[RequestTiers]) -> bool:
    """Could the claims be met on an empty cluster as it is now (devices exist on a live node)?"""
    for rt in rts:
        if not any(
            any(sum(world.node_model.get(n, {}).get(m, [0, 0])[0] for m in t.models) >= t.count for n in world.nodes)
            for t in rt.tiers
        ):
            return False
    return True


# ---- device plugin track ---------------------------------------------------------------------------


def _decide_device_plugin(ctx: _Context) -> Decision:
    """Legacy ``nvidia.com/gpu`` pods: count only, as the device plugin; first fitting node by name."""
    world = ctx.world
    gpus = device_plugin_gpus(ctx.pod)
    rec = _record(ctx, [], [], Outcome.UNSCHEDULABLE, Track.DEVICE_PLUGIN)
    rec.decision_id = decision_id(world.cluster, ctx.uid, ctx.attempt)
    rec.preference = ["nvidia.com/gpu"]
    rec.preferred_model = ""
    capacity = sum(world.dp_capacity.values())
    used = sum(max(0, world.dp_used.get(n, 0)) for n in world.dp_capacity)
    reasons: dict[str, int] = {}
    quota_blocked = 0
    chosen = ""
    for node in sorted(world.dp_capacity):
        free = world.dp_capacity[node] - world.dp_used.get(node, 0)
        if free < gpus:
            continue
        if node_filter(world, node, ctx.pod) is not None:
            reasons["node_filtered"] = reasons.get("node_filtered", 0) + free
            continue
        if not check_quota(world, ctx.policy, ctx.tenant, world.dp_model.get(node, "unknown"), gpus).fits:
            quota_blocked += free
            continue
        chosen = node
        break
    if used:
        reasons["in_use"] = used
    if quota_blocked:
        reasons["quota_exhausted"] = quota_blocked
    if chosen:
        reasons["selected"] = gpus
    rest = capacity - sum(reasons.values())
    if rest > 0:
        reasons["not_reached"] = rest
    rec.tiers = [TierSummary(index=0, request="nvidia.com/gpu", model="any", considered=capacity,
                             reasons=dict(sorted(reasons.items())), nodes_evaluated=0)]
    if not chosen:
        rec.retry_class = RetryClass.UNSCHEDULABLE.value if any(c >= gpus for c in world.dp_capacity.values()) \
            else RetryClass.TERMINAL.value
        rec.message = f"no device-plugin node has {gpus} free nvidia.com/gpu"
        return Decision(ctx.pod_key, ctx.attempt, seal(rec), satisfiable=rec.retry_class != RetryClass.TERMINAL.value)
    model = world.dp_model.get(chosen, "unknown")
    rec.outcome = Outcome.ALLOCATED.value
    rec.node = chosen
    rec.tier_index = 0
    rec.allocated_model = model
    rec.message = f"{gpus} x nvidia.com/gpu on {chosen} (device plugin: count only)"
    proposal = Proposal(chosen, [], [], [], {}, 0, dp_gpus=gpus)
    return Decision(ctx.pod_key, ctx.attempt, seal(rec), proposal=proposal)


# ---- bind ------------------------------------------------------------------------------------------


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


def bind(world: World, decision: Decision, time_ms: int, policy: Policy | None = None) -> Decision:
    """Re-check at bind time; on success return the events the allocation writes."""
    policy = policy or world.policy
    p = decision.proposal
    if p is None:
        return decision
    failure = bind_check(world, p)
    ns, _, name = decision.pod_key.partition("/")
    pod = world.get("Pod", ns, name)
    if failure is None and pod is not None:
        return dataclasses.replace(decision, events=_bind_events(world, pod, p, time_ms))
    cls, detail = failure if failure is not None else (RetryClass.TERMINAL, {"pod": decision.pod_key})
    rec = DecisionRecord.from_dict(decision.record.to_dict())
    satisfiable = pod is not None and cls != RetryClass.TERMINAL and _satisfiable_after(world, pod, decision)
    retryable = satisfiable and policy.is_retryable(cls.value) and decision.attempt < policy.max_attempts
    rec.outcome = Outcome.ERROR.value
    rec.node, rec.devices, rec.allocated_model, rec.fallback = "", [], "", False
    rec.blockers = [*rec.blockers, TierBlocker(cls.value, p.tier, {**detail, "bind_seq": world.seq})]
    if retryable:
        rec.retry_class = cls.value
        rec.backoff_ms = policy.backoff_ms(decision.attempt)
        rec.message = f"bind-time re-check failed ({cls.value}); retrying in {rec.backoff_ms} ms"
    else:
        rec.retry_class = RetryClass.TERMINAL.value
        why = ("pod deleted before bind" if pod is None else
               f"attempt {decision.attempt} of {policy.max_attempts}" if satisfiable else
               "no node in the cluster can satisfy the claims any more")
        rec.message = f"bind-time re-check failed ({cls.value}); terminal: {why}"
    return Decision(decision.pod_key, decision.attempt, seal(rec), satisfiable=satisfiable)


def _satisfiable_after(world: World, pod: dict[str, Any], decision: Decision) -> bool:
    if decision.proposal is not None and decision.proposal.dp_gpus:
        return any(c >= decision.proposal.dp_gpus for n, c in world.dp_capacity.items() if n in world.nodes)
    pc = resolve_claims(world, pod)
    return still_satisfiable(world, request_tiers(pc.claims, _matcher(world)))


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
        events.append(WorldEvent(world.cluster, seq, time, EventType.UPSERT.value, "ResourceClaim", ns, alloc.claim,
                                 {**claim, "status": status}))
    seq += 1
    events.append(WorldEvent(world.cluster, seq, time, EventType.UPSERT.value, "Pod", ns, pod["metadata"]["name"],
                             {**pod, "spec": {**pod["spec"], "nodeName": p.node}}))
    return events
