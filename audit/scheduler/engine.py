"""The cluster decision engine: one pure function per allocation attempt, and its bind-time check.

``decide(world, pod_key, attempt, time_ms, policy)`` reads only the world at its seq (plus the
pod, attempt, time and policy) and returns a ``Decision``: a sealed ``DecisionRecord`` and, when a
node was found, a ``Proposal`` to bind. ``bind(world, decision, time_ms)`` re-checks the proposal
against the world at bind time (node gone -> ``node_lost``, slice generation moved ->
``stale_slice``, device now unhealthy -> ``unhealthy``, device taken -> ``binding_conflict``) and
returns the final record plus the events the decision causes (claim ``status.allocation`` and
pod ``nodeName``). Failed binds retry with capped exponential backoff while the claim is still
satisfiable by the cluster's devices and the retry budget (bind failures, not passes) is not
spent, otherwise they are terminal.

Per pod: policy gates per tier (quota, fallback mode — under ``adaptive`` the expected time until
the first choice fits, ``audit.scheduler.adaptive``; fair-share deferral when the policy asks for
it) -> cluster-level node filters -> the exact
per-node allocator -> node choice by ClaimTrail's written tie-break (upstream picks among
equal nodes at random): highest score Σ over firstAvailable
requests of (8 − chosen subrequest index), then node name. Nodes are visited in (score upper
bound descending, name) order using the world's free-device indexes, and the search stops as soon
as no unvisited node can beat the best found — the same choice as running the allocator on every
node (``brute_force_choice`` does exactly that, for tests). Devices a reservation holds for
another pending pod are in use to the allocator; a pod that finds no node after waiting the
policy's ``reserveAfter`` may make a reservation (``audit.scheduler.reservations``, whose
evidence every decision under such a policy carries).
"""

from __future__ import annotations

import bisect
import dataclasses
import heapq
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from audit.allocator.outcome import AllocationOutcome, Status
from audit.policy import Policy
from audit.records import Blocker, DeviceRef, Outcome, Reason, RetryClass, TierBlocker, TierSummary
from audit.scheduler import reclaim, reservations
from audit.scheduler.adaptive import (
    AdaptiveHold,
    adaptive_hold,
    estimate_phrase,
    evidence,
    hold_threshold,
)
from audit.scheduler.attempt import (
    ENGINE_VERSION,
    AttemptContext,
    Decision,
    Proposal,
    model_matcher,
    new_record,
    still_satisfiable,
)
from audit.scheduler.augment import augment_claim
from audit.scheduler.binding import bind, bind_check, bind_failures_before
from audit.scheduler.claimspec import claim_key, pod_claim_names, result_device_id
from audit.scheduler.deviceplugin import decide_device_plugin, node_blocker
from audit.scheduler.evidence import Visit, summarize, tier_request_name
from audit.scheduler.fairshare import fair_share_blocker
from audit.scheduler.filters import node_filter
from audit.scheduler.nodealloc import allocate_on_node, augmented_claims
from audit.scheduler.placement import placement_refusal
from audit.scheduler.quota import QuotaCheck, check_quota, closed_details, tier_quota
from audit.scheduler.tiers import (
    RequestTiers,
    Tier,
    request_tiers,
    resolve_claims,
)
from audit.world import World, device_plugin_gpus, obj_key

__all__ = ["ENGINE_VERSION", "Decision", "Proposal", "bind", "bind_check", "bind_failures_before", "brute_force_choice", "candidate_nodes",
           "candidate_order", "decide", "evaluate_node", "holding_below", "holding_for_preferred", "may_place", "may_reclaim", "queue_skip", "still_satisfiable"]

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


def decide(world: World, pod_key: str, attempt: int, time_ms: int, policy: Policy | None = None) -> Decision:
    ctx = AttemptContext(world, pod_key, attempt, time_ms, policy or world.policy)
    pc = resolve_claims(world, ctx.pod)
    if not pc.claims and not pc.missing and not pc.allocated and device_plugin_gpus(ctx.pod) > 0:
        return decide_device_plugin(ctx)
    if pc.missing or not pc.claims:
        msg = (f'pod "{pod_key}": ResourceClaim not created yet' if pc.missing
               else f'pod "{pod_key}": no unallocated claims to allocate')
        rec = new_record(ctx, pc.claims, [], Outcome.UNSCHEDULABLE if pc.missing else Outcome.ERROR)
        rec.retry_class = RetryClass.UNSCHEDULABLE.value if pc.missing else RetryClass.TERMINAL.value
        rec.message = msg
        return Decision(pod_key, attempt, rec.seal(), satisfiable=bool(pc.missing))
    rts = request_tiers(pc.claims, model_matcher(world))
    return _decide_dra(ctx, pc.claims, rts)


def may_place(world: World, pod_key: str, time_ms: int, policy: Policy | None = None, hold: bool = True) -> bool:
    """A cheap necessary condition for ``decide`` to place the pod now.

    False only when some request has no tier the policy leaves open (quota, fallback mode) with a
    node that has enough free healthy devices of models the tenant's quota still admits (less
    those a reservation holds there for another pod, ``audit.scheduler.reservations``); a
    device-plugin pod when no node it admits has enough free GPUs within the tenant's quota. True
    says nothing: only ``decide`` knows. The cluster loop asks this before trying a pod again that
    already failed, so a change that cannot help it costs no attempt. ``hold`` False leaves an
    adaptive hold out (every tier open): the answer then holds whatever the wait.
    """
    # A request none of whose tiers has room anywhere answers before the fallback hold (an
    # adaptive estimate) and the quota are worked out: nothing they say can make it fit. A pod
    # asked about again with its objects unchanged (a parked pod, on every release) has its tiers
    # known already.
    known = _known_tiers(world, pod_key)
    if known is not None and not _some_room(world, known):
        return False
    ctx = AttemptContext(world, pod_key, 0, time_ms, policy or world.policy)
    pc = resolve_claims(world, ctx.pod)
    if not pc.claims and not pc.missing and not pc.allocated and device_plugin_gpus(ctx.pod) > 0:
        gpus = device_plugin_gpus(ctx.pod)
        # the decision's own rule: room on a node its nodeSelector and affinity admit (a pod pinned
        # to H100 is not woken by a free L4) whose model the tenant's quota still admits
        return any(node_blocker(ctx, n, gpus) is None for n in world.dp_capacity)
    if pc.missing or not pc.claims:
        return True
    rts = request_tiers(pc.claims, model_matcher(world))
    if not pc.allocated:
        _remember_tiers(world, pod_key, ctx.pod, pc.claims, rts)
    if not _some_room(world, rts):
        return False
    # The tiers ``_policy_gates`` leaves open, gated one at a time: the first that may fit answers
    # for its request, and the gates of the tiers after it are never needed.
    holding = _holding(ctx, rts, hold)
    asked: dict[tuple[str, int], QuotaCheck] = {}
    for rt in rts:
        for t in rt.tiers:
            if not _tier_has_room(world, t):
                continue  # no gate can make it fit: its quota need not be asked
            shut, checks = _tier_gate(ctx, rt, t, holding, asked)
            if shut is None and _tier_may_fit(ctx, t, checks):
                break
        else:
            return False
    return True


def _some_room(world: World, rts: list[RequestTiers]) -> bool:
    """Every request has a tier with room on some node (``_tier_has_room``)."""
    # (loops, not generators: asked for every parked group on every release)
    for rt in rts:
        for t in rt.tiers:
            if _tier_has_room(world, t):
                break
        else:
            return False
    return True


# world.derived key: pod key -> (pod object, (claim key, claim object) per claim, tier versions,
# the pod's request tiers), for pods whose claims all exist unallocated
_POD_TIERS = "pod_tiers"


def _remember_tiers(world: World, pod_key: str, pod: dict[str, Any], claims: list[dict[str, Any]],
                    rts: list[RequestTiers]) -> None:
    memo = world.derived.get(_POD_TIERS)
    if memo is None or len(memo) > 50_000:
        memo = world.derived[_POD_TIERS] = {}
    # the keys ``resolve_claims`` read the claims under (all found, none allocated: in order)
    ns = pod["metadata"].get("namespace", "")
    keys = [obj_key(ns, name) for _, name in pod_claim_names(pod)]
    memo[pod_key] = (pod, tuple(zip(keys, claims, strict=True)),
                     (world.signature_version, world.inventory_version), rts)


def _known_tiers(world: World, pod_key: str) -> list[RequestTiers] | None:
    """The tiers ``may_place`` found for this pod, if the world still holds the very same pod and
    claim objects (objects are replaced, never changed, by events) and the tiers' inputs are
    unchanged: ``resolve_claims`` and ``request_tiers`` would find the same again."""
    memo = world.derived.get(_POD_TIERS)
    hit = memo.get(pod_key) if memo is not None else None
    if hit is None:
        return None
    pod, claims, versions, rts = hit
    ns, _, name = pod_key.partition("/")
    if world.get("Pod", ns, name) is not pod or versions != (world.signature_version, world.inventory_version):
        return None
    bucket = world.objects.get("ResourceClaim", {})
    if any(bucket.get(key) is not claim for key, claim in claims):
        return None
    known: list[RequestTiers] = rts
    return known


# world.derived key: (world seq, {(models, count, tolerates, all devices): room}) — what
# ``_tier_has_room`` found at the world's current seq
_ROOM = "tier_room"


def _tier_has_room(world: World, t: Tier) -> bool:
    """``_tier_may_fit`` with every gate open and no reservation: some node has enough free healthy
    devices of the tier's models. False means the tier cannot fit whatever quota says; the world's
    free-count index answers it without a quota check, which a pod waiting for a change (asked on
    every release) mostly fails.

    Kept per world seq: a release wakes every parked group, and the groups of one pod size in
    different tenants ask about tiers of the same shape; only a folded event changes the answer."""
    key = (t.models, t.count, t.tolerates, t.all_devices)
    answers: dict[tuple[tuple[str, ...], int, bool, bool], bool] = world.derived_at(_ROOM, world.seq)
    found = answers.get(key)
    if found is None:
        found = answers[key] = _room_for(world, t)
    return found


def _room_for(world: World, t: Tier) -> bool:
    if world.has_shared_slices or t.tolerates or t.all_devices:
        return True
    for m in t.models:
        if world.nodes_with_free(m, t.count):
            return True
    return len(t.models) != 1 and any(sum(world.free_healthy(n, m) for m in t.models) >= t.count
                                      for n in world.multi_model_nodes)


def _tier_may_fit(ctx: AttemptContext, t: Tier, checks: list[QuotaCheck]) -> bool:
    """Some node has enough free healthy devices of the tier's models that quota leaves open: all
    of one model within its quota for the whole count, or a mix on a node carrying several models
    each of which could take at least one more device (``evaluate_node`` checks quota per model).
    ``checks``: the quota check of each of the tier's models for the tier's count."""
    world = ctx.world
    if world.has_shared_slices or t.tolerates or t.all_devices:
        return bool(candidate_nodes(world, t))
    policy, key = ctx.policy, ctx.pod_key
    held = bool(world.reservations)  # (no call per node when nothing is reserved)
    whole = [m for m, q in zip(t.models, checks, strict=True) if q.fits]
    if any(n in world.nodes and (not held or reservations.may_fit(world, policy, key, n, (m,), t.count))
           for m in whole for n in world.nodes_with_free(m, t.count)):
        return True
    if len(t.models) == 1:
        return False
    some = [m for m in t.models if check_quota(world, policy, ctx.tenant, m, 1).fits]
    return any(n in world.nodes and sum(world.free_healthy(n, m) for m in some) >= t.count
               and (not held or reservations.may_fit(world, policy, key, n, tuple(some), t.count))
               for n in world.multi_model_nodes)


def _policy_gates(ctx: AttemptContext, rts: list[RequestTiers], adaptive: bool = True) -> tuple[
        dict[tuple[str, str], tuple[Tier, ...]], dict[tuple[str, str, int], str], list[TierBlocker], bool]:
    """Tiers the policy leaves open per request (fallback mode, quota), and why others are closed:
    a tier the tenant's quota closes gets a ``quota_exhausted`` blocker per model of it
    (``closed_details``: a tier of several models is closed only when none of them fits)."""
    closed: dict[tuple[str, str, int], str] = {}
    blockers: list[TierBlocker] = []
    allowed: dict[tuple[str, str], tuple[Tier, ...]] = {}
    holding = _holding(ctx, rts, adaptive)
    asked: dict[tuple[str, int], QuotaCheck] = {}
    for rt in rts:
        keep: list[Tier] = []
        for t in rt.tiers:
            shut, checks = _tier_gate(ctx, rt, t, holding, asked)
            if shut is not None:
                closed[(t.claim, t.request, t.index)] = shut
                if shut == "quota_exhausted":
                    # every model's quota closed it: the tier counts each model's devices under
                    # quota_exhausted (audit.scheduler.evidence), and each blocker says its part
                    totals = ctx.world.model_totals
                    blockers += [TierBlocker(Blocker.QUOTA_EXHAUSTED.value, t.index, detail)
                                 for detail in closed_details([(q, totals.get(q.model, 0)) for q in checks])]
                continue
            keep.append(t)
        allowed[(rt.claim, rt.request)] = tuple(keep)
    return allowed, closed, blockers, holding


def _holding(ctx: AttemptContext, rts: list[RequestTiers], adaptive: bool) -> bool:
    """Whether the fallback mode keeps the pod's later tiers shut now."""
    policy = ctx.policy
    holding = policy.fallback_mode == "strict" or (
        policy.fallback_mode == "wait-for-preferred" and ctx.wait_ms < policy.fallback_wait_ms)
    # (a pod that has waited maxWait holds for no estimate: none is made for the gates)
    if policy.fallback_mode == "adaptive" and adaptive and ctx.wait_ms < policy.fallback_max_wait_ms:
        hold = _adaptive(ctx, rts)
        holding = hold is not None and hold.holding
    return holding


def _tier_gate(ctx: AttemptContext, rt: RequestTiers, t: Tier, holding: bool,
               asked: dict[tuple[str, int], QuotaCheck]) -> tuple[str | None, list[QuotaCheck]]:
    """Why the policy shuts tier ``t`` (``not_reached`` while holding out for the first choice,
    ``quota_exhausted`` when no model of it fits the quota), None when open; with the quota check
    of each of its models for its count. ``asked`` keeps the checks of one attempt: tiers repeat
    models (a last "any compatible" tier names the first ones again)."""
    if rt.first_available and t.index > 0 and holding:
        return "not_reached", []

    def ask(model: str, count: int) -> QuotaCheck:
        q = asked.get((model, count))
        if q is None:
            q = asked[(model, count)] = check_quota(ctx.world, ctx.policy, ctx.tenant, model, count)
        return q

    shut, checks = tier_quota(t.models, t.count, ask)
    return ("quota_exhausted" if shut else None), checks


def _adaptive(ctx: AttemptContext, rts: list[RequestTiers]) -> AdaptiveHold | None:
    return adaptive_hold(ctx.world, ctx.policy, ctx.tenant, rts, ctx.wait_ms, ctx.time_ms, ctx.pod_key)


def hold_deadline_ms(policy: Policy, created_ms: int) -> int | None:
    """When the policy stops holding a pod pending since ``created_ms`` for its preferred model,
    release or not: the end of a ``wait-for-preferred`` wait, an adaptive ``maxWait``; None when
    nothing holds it (immediate fallback) or nothing ends the hold (strict fallback)."""
    if policy.fallback_mode == "wait-for-preferred":
        return created_ms + policy.fallback_wait_ms
    if policy.fallback_mode == "adaptive":
        return created_ms + policy.fallback_max_wait_ms
    return None


def holding_for_preferred(world: World, pod_key: str, time_ms: int, policy: Policy | None = None) -> bool:
    """Whether the policy keeps the pod's later tiers shut now (strict, wait-for-preferred within
    its wait, adaptive while the first choice is expected in time): what the cluster loop groups
    pods by, besides their shape."""
    policy = policy or world.policy
    mode = policy.fallback_mode
    if mode == "strict":
        return True
    if mode not in ("wait-for-preferred", "adaptive"):
        return False
    wait_ms = time_ms - world.pending.get(pod_key, time_ms)
    if mode == "wait-for-preferred":
        return wait_ms < policy.fallback_wait_ms
    if wait_ms >= policy.fallback_max_wait_ms:  # no estimate leaves a wait this long holding
        return False
    # a pod that could place nothing even with every tier open is told apart by nothing else:
    # its estimate would change no answer
    if pod_key in world.pending and not may_place(world, pod_key, time_ms, policy, hold=False):
        return False
    return wait_ms < holding_below(world, pod_key, time_ms, policy)


def holding_below(world: World, pod_key: str, time_ms: int, policy: Policy) -> int:
    """Under adaptive fallback, the wait below which this pending pod holds out for its first
    choice now (0: it does not): ``maxWait`` less the expected time until it fits, the pods ahead
    of it served first (``audit.scheduler.adaptive.hold_threshold``)."""
    return hold_threshold(world, policy, pod_key, time_ms)


def _augmented(ctx: AttemptContext, claims: list[dict[str, Any]], rts: list[RequestTiers],
               allowed: dict[tuple[str, str], tuple[Tier, ...]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    memo = augmented_claims(ctx.world)
    for c in claims:
        ckey = claim_key(c)
        per_req = {rt.request: tuple(t.index for t in allowed[(rt.claim, rt.request)])
                   for rt in rts if rt.claim == ckey and rt.first_available}
        # the claim object itself is kept and compared by identity: an id() of a freed claim can be
        # handed to a new one
        hit = memo.get(id(c))
        if hit is None or hit[0] is not c:
            if len(memo) > 50_000:
                memo.clear()
            hit = memo[id(c)] = (c, {})
        key = (tuple(sorted(per_req.items())), ctx.policy.digest)
        aug = hit[1].get(key)
        if aug is None:
            aug = augment_claim(c, per_req, ctx.policy)
            assert aug is not None  # callers only augment when every request keeps a tier
            # the same augmented object on every attempt lets the typed-object cache hit on retries
            hit[1][key] = aug
        out.append(aug)
    return out


def _decide_dra(ctx: AttemptContext, claims: list[dict[str, Any]], rts: list[RequestTiers]) -> Decision:
    world = ctx.world
    allowed, closed, blockers, holding = _policy_gates(ctx, rts)
    multi_claim = len(claims) > 1
    deferral = fair_share_blocker(world, ctx.policy, ctx.tenant)
    if deferral is not None:
        rec = new_record(ctx, claims, rts, Outcome.DEFERRED)
        rec.blockers = [*blockers, deferral]
        rec.retry_class = RetryClass.FAIR_SHARE.value
        shut = {(t.claim, t.request, t.index): closed.get((t.claim, t.request, t.index), "fair_share_deferred")
                for rt in rts for t in rt.tiers}
        rec.tiers = summarize(world, rts, shut, [], multi_claim)
        rec.message = (f"tenant {ctx.tenant} holds {deferral.detail['held_eq']} of its "
                       f"{deferral.detail['entitlement_eq']} H100-equivalents while {deferral.detail['waiting_tenant']} "
                       "is below its share and waiting")
        return Decision(ctx.pod_key, ctx.attempt, rec.seal(), satisfiable=True)
    hold = _adaptive(ctx, rts) if ctx.policy.fallback_mode == "adaptive" else None
    if any(not tiers for tiers in allowed.values()):
        rec = new_record(ctx, claims, rts, Outcome.DEFERRED)
        rec.blockers = blockers
        rec.retry_class = RetryClass.QUOTA.value
        rec.tiers = summarize(world, rts, closed, [], multi_claim)
        rec.message = f"tenant {ctx.tenant} has no quota left for any allowed tier"
        if hold is not None and holding:  # held for a first choice the tenant's own releases reopen
            rec.blockers = [*blockers, evidence(hold)]
            rec.message = estimate_phrase(evidence(hold).detail)
        return Decision(ctx.pod_key, ctx.attempt, rec.seal(), satisfiable=True)
    aug_claims = _augmented(ctx, claims, rts, allowed)
    best, visits, steps = _search(ctx, claims, aug_claims, rts, allowed)
    summaries = summarize(world, rts, closed, visits, multi_claim)
    if best is None:
        d = _no_node(ctx, claims, rts, allowed, blockers, summaries, steps, holding, hold)
        if ctx.policy.preemption and d.satisfiable:
            found = reclaim.plan(world, ctx.policy, ctx.pod_key, ctx.pod, ctx.tenant, claims, rts, allowed, ctx.time_ms)
            if found is not None:
                return _preemption(ctx, d, found)
    else:
        d = _proposal(ctx, claims, rts, allowed, best, blockers, summaries, steps, hold)
    if ctx.policy.reserve_after_ms is None and not world.reservations:
        return d
    return _reservation_evidence(ctx, rts, allowed, d, [v.node for v in visits])


def _preemption(ctx: AttemptContext, d: Decision, found: reclaim.Plan) -> Decision:
    """The no-node decision turned into a reclaim (``audit.scheduler.reclaim``): outcome
    ``preempted``, the victims in its evidence; the loop evicts them and tries the pod again."""
    rec = d.record
    rec.outcome = Outcome.PREEMPTED.value
    rec.retry_class = RetryClass.NONE.value
    rec.node = found.node
    rec.tier_index = found.tier.index
    rec.blockers = [*rec.blockers, *reclaim.evidence(ctx.world, ctx.policy, ctx.tenant, found)]
    rec.message = reclaim.message(ctx.policy, ctx.tenant, found)
    return dataclasses.replace(d, record=rec.seal(), preempts=sorted(v.pod for v in found.victims))


def fair_share_deferred(world: World, pod_key: str, policy: Policy | None = None) -> bool:
    """Whether ``decide`` would defer the pod for fair share now (``audit.scheduler.fairshare``,
    which reads only the tenants' holdings and pending counts). The cluster loop leaves such a pod
    parked: another attempt would only write the same deferral again."""
    policy = policy or world.policy
    ns, name = pod_key.split("/", 1)
    if fair_share_blocker(world, policy, policy.tenant_for(ns)) is None:
        return False
    # the decision's own order: device-plugin pods and pods whose claims are missing are never deferred
    pod = world.get("Pod", ns, name) or {}
    pc = resolve_claims(world, pod)
    return bool(pc.claims) and not pc.missing


def may_reclaim(world: World, pod_key: str, time_ms: int, policy: Policy | None = None) -> bool:
    """A cheap necessary condition for ``decide`` to preempt for the pod: reclaim is on, the pod
    has an open tier within what its tenant is owed (nominal quota, or entitlement on the fair-share
    basis), and another tenant holds one of its models beyond what it is owed
    (``audit.scheduler.reclaim``). The cluster loop asks it of pods ``may_place`` turns down."""
    policy = policy or world.policy
    if not policy.preemption:
        return False
    ctx = AttemptContext(world, pod_key, 0, time_ms, policy)
    pc = resolve_claims(world, ctx.pod)
    if len(pc.claims) != 1 or pc.missing:
        return False
    rts = request_tiers(pc.claims, model_matcher(world))
    if len(rts) != 1:
        return False
    tiers = reclaim.qualifying(world, policy, ctx.tenant, _policy_gates(ctx, rts)[0][(rts[0].claim, rts[0].request)])
    return any(reclaim.borrowed(world, policy, ctx.tenant, m) for t in tiers for m in t.models)


def _reservation_evidence(ctx: AttemptContext, rts: list[RequestTiers],
                          allowed: dict[tuple[str, str], tuple[Tier, ...]], d: Decision, visited: list[str]) -> Decision:
    """The decision with what reservations did to it (``audit.scheduler.reservations``): nodes
    it was kept off, the hold it used, waits on or made."""
    world, policy, rec = ctx.world, ctx.policy, d.record
    added = reservations.kept_off(world, policy, ctx.pod_key, visited, rec.node)
    hold = reservations.own_hold(world, policy, ctx.pod_key)
    reservation = None
    if hold is not None:
        added.insert(0, reservations.released(hold, rec.node, ctx.time_ms) if d.proposal is not None
                     else reservations.waiting(world, hold, ctx.time_ms))
    elif d.proposal is None and d.satisfiable and reservations.eligible(policy, ctx.wait_ms):
        made, reservation = reservations.plan(world, policy, ctx.pod_key, ctx.pod, ctx.tenant,
                                              allowed[(rts[0].claim, rts[0].request)], ctx.time_ms)
        added.insert(0, made)
    if not added:
        return d
    rec.blockers = [*rec.blockers, *added]
    rec.message += f"; {reservations.message(added)}"
    return dataclasses.replace(d, record=rec.seal(), reservation=reservation)


def max_score(rts: list[RequestTiers], allowed: dict[tuple[str, str], tuple[Tier, ...]]) -> int:
    return sum(MAX_SUBREQUESTS - allowed[(rt.claim, rt.request)][0].index for rt in rts if rt.first_available)


def _search(ctx: AttemptContext, claims: list[dict[str, Any]], aug_claims: list[dict[str, Any]], rts: list[RequestTiers],
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
    if len(t.models) == 1 and not (t.tolerates or t.all_devices):
        return [n for n in world.nodes_with_free(t.models[0], t.count) if n in world.nodes]
    return sorted(n for n in _candidate_names(world, t) if n in world.nodes)


def _candidate_count(world: World, t: Tier) -> int:
    """``len(candidate_nodes(world, t))`` without putting the names in order (evidence needs the
    count only, and a tier of several models can name most of the cluster)."""
    if world.has_shared_slices:
        return len(world.nodes)
    if len(t.models) == 1 and not (t.tolerates or t.all_devices):
        return len(world.nodes.intersection(world.nodes_with_free(t.models[0], t.count)))
    return len(world.nodes.intersection(_candidate_names(world, t)))


def _candidate_names(world: World, t: Tier) -> set[str]:
    """``candidate_nodes`` before the live-node filter and the sort, for the tiers the free-count
    index does not answer with one list."""
    names: set[str] = set()
    if t.tolerates or t.all_devices:
        for m in t.models:
            names.update(world.nodes_with_model(m))
        return names
    for names_of in _free_lists(world, t):
        names.update(names_of)
    return names


def _free_lists(world: World, t: Tier) -> list[list[str]]:
    """Name-sorted lists whose union holds the nodes with room for a tier of several models
    (neither tolerating nor taking all devices): nodes where one model alone has enough, plus
    nodes carrying several models whose free devices together may be enough."""
    lists = [world.nodes_with_free(m, t.count) for m in t.models]
    lists.append(sorted(n for n in world.multi_model_nodes if sum(world.free_healthy(n, m) for m in t.models) >= t.count))
    return lists


def _iter_candidates(world: World, t: Tier) -> Iterator[str]:
    """``candidate_nodes`` lazily (the search usually stops early)."""
    if world.has_shared_slices or t.tolerates or t.all_devices:
        yield from candidate_nodes(world, t)
        return
    nodes = world.nodes
    if len(t.models) == 1:
        for n in world.nodes_with_free(t.models[0], t.count):
            if n in nodes:
                yield n
        return
    # The lists merged in name order rather than their union sorted: a tier of several models
    # ("any compatible") can name hundreds of nodes, and the first that fits usually ends the search.
    last = None
    for n in heapq.merge(*_free_lists(world, t)):
        if n != last:
            last = n
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


def evaluate_node(ctx: AttemptContext, node: str, claims: list[dict[str, Any]], aug_claims: list[dict[str, Any]],
                  rts: list[RequestTiers]) -> NodeTry:
    """The allocator on one node plus the policy's post-checks; what brute force runs everywhere."""
    f = node_filter(ctx.world, node, ctx.pod)
    if f is not None:
        return NodeTry(node, False, filtered=f)
    held = reservations.held_devices(ctx.world, ctx.policy, node, ctx.pod_key) if ctx.world.reservations else ()
    outcome = allocate_on_node(ctx.world, node, aug_claims, ctx.policy, held=held)
    if outcome.status != Status.SUCCESS:
        return NodeTry(node, False, outcome=outcome, reject=outcome.status.value,
                       reject_detail={"code": outcome.error_code, "message": outcome.message})
    index_of = _subrequest_indexes(rts)
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
        dev = ctx.world.devices.get(result_device_id(r))
        m = dev.model if dev is not None else "unknown"
        models[m] = models.get(m, 0) + 1
    refused = placement_refusal(ctx.policy, models, lambda m, n: check_quota(ctx.world, ctx.policy, ctx.tenant, m, n))
    if refused is not None:
        nt.ok = False
        nt.reject, nt.reject_detail = refused
    return nt


def _subrequest_indexes(rts: list[RequestTiers]) -> dict[tuple[str, str, str], int]:
    """(claim key, request, subrequest) -> the subrequest's index in the request's firstAvailable
    list: each tier of a firstAvailable request is one subrequest, at its index (read from the
    tiers rather than the claim objects, which a visit would otherwise parse again)."""
    return {(t.claim, t.request, t.subrequest): t.index for rt in rts if rt.first_available for t in rt.tiers}


def brute_force_choice(world: World, pod_key: str, time_ms: int, policy: Policy | None = None) -> tuple[str, int] | None:
    """(node, score) from running the allocator on every node; the reference the search must match."""
    ctx = AttemptContext(world, pod_key, 1, time_ms, policy or world.policy)
    pc = resolve_claims(world, ctx.pod)
    rts = request_tiers(pc.claims, model_matcher(world))
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


def _proposal(ctx: AttemptContext, claims: list[dict[str, Any]], rts: list[RequestTiers],
              allowed: dict[tuple[str, str], tuple[Tier, ...]], best: NodeTry, blockers: list[TierBlocker],
              summaries: list[TierSummary], steps: int, hold: AdaptiveHold | None = None) -> Decision:
    world = ctx.world
    rec = new_record(ctx, claims, rts, Outcome.ALLOCATED)
    primary = rts[0]
    tier = best.chosen.get(f"{primary.claim}/{primary.request}", 0)
    devices: list[DeviceRef] = []
    generations: dict[str, tuple[str, int]] = {}
    for _, r in best.results:
        dev_id = result_device_id(r)
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
    rec.blockers = blockers + _skipped_with_free_devices(world, rts, allowed, best, summaries)
    rec.steps = steps
    rec.message = f"allocated {len(devices)} device(s) on {best.node}" + (
        f" from tier {tier} ({rec.allocated_model})" if primary.first_available else "")
    if hold is not None and rec.fallback:
        said = evidence(hold)
        rec.blockers.append(said)
        rec.message += f"; {estimate_phrase(said.detail)}"
    skip = queue_skip(world, ctx)
    if skip is not None:
        rec.blockers.append(skip)
        rec.message += (f", ahead of {skip.detail['older_pending']} older pending pod(s) of tenant {ctx.tenant} "
                        f"(oldest {skip.detail['oldest']})")
    assert best.outcome is not None
    proposal = Proposal(best.node, [claim_key(c) for c in claims], list(best.outcome.allocations),
                        [d.device for d in devices], generations, tier)
    return Decision(ctx.pod_key, ctx.attempt, rec.seal(), proposal=proposal)


def queue_skip(world: World, ctx: AttemptContext) -> TierBlocker | None:
    """Evidence that a placement overtakes older pending pods of the same tenant (best-effort
    queueing lets a pod that fits pass a head that does not), read from the world's pending pods."""
    order = world.pending_order.get(ctx.tenant)
    if not order or len(order) <= 1:
        return None
    mine = (world.pending.get(ctx.pod_key, ctx.time_ms - ctx.wait_ms), ctx.pod_key)
    older = bisect.bisect_left(order, mine)
    if older == 0:
        return None
    created, key = order[0]
    return TierBlocker(Blocker.QUEUE_SKIP.value, -1, {
        "older_pending": older, "oldest": key, "oldest_wait_ms": max(0, ctx.time_ms - created)})


def _insufficient_blocker(world: World, t: Tier) -> TierBlocker:
    return TierBlocker(Blocker.INSUFFICIENT_ON_NODE.value, t.index, {
        "request": tier_request_name(t), "model": t.label, "count": t.count,
        "nodes_with_capacity": _candidate_count(world, t),
    })


def _skipped_with_free_devices(world: World, rts: list[RequestTiers],
                               allowed: dict[tuple[str, str], tuple[Tier, ...]], best: NodeTry,
                               summaries: list[TierSummary]) -> list[TierBlocker]:
    """``insufficient_on_node`` for each open tier the chosen node skipped while free devices remained.

    Nodes are visited in score-bound order, so every node that could hold a skipped tier was
    visited and failed it: the tier's devices left ``not_reached`` (free and healthy, or given
    back while backtracking) sit on nodes that could not hold the pod with that tier.
    """
    if not any(best.chosen.values()):
        return []  # every request got its first open tier: no tier was skipped
    summary_of = {(t.claim, t.request, t.index): s
                  for (t, s) in zip((t for rt in rts for t in rt.tiers), summaries, strict=True)}
    out: list[TierBlocker] = []
    for rt in rts:
        if not rt.first_available:
            continue
        chosen = best.chosen.get(f"{rt.claim}/{rt.request}", 0)
        for t in allowed[(rt.claim, rt.request)]:
            if t.index < chosen and summary_of[(t.claim, t.request, t.index)].reasons.get(Reason.NOT_REACHED.value):
                out.append(_insufficient_blocker(world, t))
    return out


def _no_node(ctx: AttemptContext, claims: list[dict[str, Any]], rts: list[RequestTiers],
             allowed: dict[tuple[str, str], tuple[Tier, ...]], blockers: list[TierBlocker],
             summaries: list[TierSummary], steps: int, holding: bool,
             hold: AdaptiveHold | None = None) -> Decision:
    world = ctx.world
    satisfiable = still_satisfiable(world, rts)
    deferred_for_preferred = holding and ctx.policy.fallback_mode in ("wait-for-preferred", "adaptive")
    outcome = Outcome.DEFERRED if deferred_for_preferred else Outcome.UNSCHEDULABLE
    rec = new_record(ctx, claims, rts, outcome)
    for rt in rts:
        for t in allowed[(rt.claim, rt.request)]:
            blockers.append(_insufficient_blocker(world, t))
    if deferred_for_preferred and hold is None:
        blockers.append(TierBlocker(Blocker.INSUFFICIENT_ON_NODE.value, 0, {
            "fallback_mode": ctx.policy.fallback_mode, "fallback_after_ms": ctx.policy.fallback_wait_ms - ctx.wait_ms}))
    if hold is not None:
        blockers.append(evidence(hold))
    rec.blockers = blockers
    rec.tiers = summaries
    rec.steps = steps
    rec.retry_class = RetryClass.UNSCHEDULABLE.value if satisfiable else RetryClass.TERMINAL.value
    if satisfiable:
        rec.message = "no node can hold the claims now; waiting for capacity"
        if deferred_for_preferred and hold is not None:
            rec.message = estimate_phrase(evidence(hold).detail)
        elif deferred_for_preferred:
            rec.message = (f"waiting for {rts[0].tiers[0].label} (fallback allowed after "
                           f"{ctx.policy.fallback_wait_ms // 1000}s of waiting)")
        elif hold is not None:
            rec.message += f" ({estimate_phrase(evidence(hold).detail)})"
        elif holding:
            rec.message = f"strict fallback mode: only {rts[0].tiers[0].label} is acceptable and none is free"
    else:
        rec.message = "unsatisfiable: no node in the cluster has enough matching devices for any allowed tier"
    return Decision(ctx.pod_key, ctx.attempt, rec.seal(), satisfiable=satisfiable)
