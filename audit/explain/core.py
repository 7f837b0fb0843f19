"""``explain``: why a pod did not get model M, device by device, against a cluster view.

Order of work: the pod's claims and tiers; which tier asks for M (the first whose selectors
select some M device; none → ``not_requested`` and M's devices are judged against the first
tier); node filters for the pod; exact allocator verdicts on every remaining node holding M
devices, with the whole claim (its other requests and its constraints) allocated around each
device that passes them; one primary reason per device; tier blockers; the outcome (the record's
if given, else the pod's current allocation); for a pod holding nothing, what it would get if
scheduled now (``audit.explain.nextstep``), or every tier's blocker; the holder of each in-use
device (``audit.explain.holders``), devices a reservation holds for another pod read as in use
(``audit.explain.reserved``); one sentence.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from audit.dra.model import ResourceClaim
from audit.explain.claimfit import has_other_requests
from audit.explain.deviceplugin import (
    device_plugin_would_get,
    explain_pending_device_plugin,
    explain_recorded_device_plugin,
)
from audit.explain.holders import device_holders, holder_detail
from audit.explain.models import ModelTable
from audit.explain.nextstep import allocation_summary, best_allocation, pending_outcome
from audit.explain.nodes import node_exclusion
from audit.explain.probe import NodeProber, Verdict, parse_as, probe_claim
from audit.explain.reasons import AVAILABLE, RANK, ordered_codes
from audit.explain.record import model_tier, record_blockers, record_outcome
from audit.explain.reserved import mark_reserved, reserved_for_others
from audit.explain.result import DeviceReason, Explanation
from audit.explain.summary import render_summary
from audit.explain.tiers import Tier, TierMatcher, pod_tiers
from audit.explain.verdicts import close_tier, closing_code, mark_selected
from audit.explain.view import ClusterView, Device, ViewError, obj_name, obj_namespace
from audit.policy import UNKNOWN_MODEL, Policy, default_policy
from audit.records import Blocker, DecisionRecord, Reason, Track
from audit.scheduler.claimspec import claim_key, result_device_id
from audit.scheduler.quota import QuotaAsk, QuotaCheck, closed_details, quota_rule, tier_quota
from audit.world import (
    DEVICE_PLUGIN_RESOURCE,
    device_plugin_capacity,
    device_plugin_gpus,
    device_plugin_model,
)


def _pod_key(pod: str | tuple[str, str]) -> tuple[str, str]:
    if isinstance(pod, tuple):
        return pod
    ns, sep, name = pod.partition("/")
    if not sep or not ns or not name:
        raise ViewError(f"pod {pod!r}: expected NAMESPACE/NAME")
    return ns, name


def _current_outcome(pod: Mapping[str, Any], claims: Sequence[Mapping[str, Any]], tiers: Sequence[Tier],
                     by_id: Mapping[str, Device]) -> dict[str, Any]:
    """The allocation the pod holds now (all claims allocated), or pending."""
    allocations = [(c, (c.get("status") or {}).get("allocation")) for c in claims]
    if not claims or not all(a for _, a in allocations):
        return pending_outcome()
    results = [(claim_key(c), res) for c, a in allocations for res in ((a or {}).get("devices") or {}).get("results") or []]
    return allocation_summary(results, tiers, by_id, str((pod.get("spec") or {}).get("nodeName") or ""))


def _judge(view: ClusterView, pod: Mapping[str, Any], claim: Mapping[str, Any], tier: Tier,
           devices: Sequence[Device], exclude: Sequence[tuple[str, str]],
           binding_counts: bool, policy: Policy | None) -> dict[str, tuple[str, Verdict]]:
    """Device id → (node judged on, primary verdict) for every device given."""
    out: dict[str, tuple[str, Verdict]] = {}
    shared = [d for d in devices if not d.node]
    by_node: dict[str, list[Device]] = {}
    for d in devices:
        if d.node:
            by_node.setdefault(d.node, []).append(d)
    nodes = sorted(set(by_node) | (set(view.nodes) if shared else set()))
    exclusions = {node: node_exclusion(pod, node, view.nodes.get(node), binding_counts) for node in nodes}
    usable = [node for node in nodes if not exclusions[node][0]]
    prober = NodeProber(view, exclude, usable, policy) if usable else None
    request = parse_as(probe_claim(claim, tier), ResourceClaim)
    whole = has_other_requests(claim, tier)
    for node in nodes:
        here = by_node.get(node, []) + shared
        cause, detail = exclusions[node]
        if cause:
            verdicts: dict[str, Verdict] = {d.id: (Reason.NODE_FILTERED.value, {"cause": cause, "detail": detail})
                                            for d in here}
        else:
            assert prober is not None  # built because this node is usable
            verdicts = prober.probe(node, request, {d.id for d in here})
            if whole:
                prober.refine(node, claim, tier, verdicts)
        for d in here:
            verdict = verdicts[d.id]
            best = out.get(d.id)
            if best is None or RANK.get(verdict[0], -1) > RANK.get(best[1][0], -1):
                out[d.id] = (node, verdict)
    return out


def _insufficient(tier: Tier, judged: Mapping[str, tuple[str, Verdict]], devices: Sequence[Device],
                  model: str) -> dict[str, Any] | None:
    per_node: Counter[str] = Counter()
    for d in devices:
        node, (reason, _) = judged[d.id]
        if reason == AVAILABLE:
            per_node[node] += 1
    if not per_node or max(per_node.values()) >= tier.count:
        return None
    best_node, best = sorted(per_node.items(), key=lambda kv: (-kv[1], kv[0]))[0]
    return {"code": Blocker.INSUFFICIENT_ON_NODE.value, "tier": tier.index, "model": model, "count": tier.count,
            "best": best, "best_node": best_node}


def _in_use(view: ClusterView, policy: Policy, model: str, by_id: Mapping[str, Device],
            own: Sequence[tuple[str, str]]) -> Counter[str]:
    """Tenant -> devices of ``model`` it holds in the view, as the world charges them: allocated
    claims (admin access occupies nothing) and the GPUs of bound device-plugin pods, the pod's own
    claims left out (a decision is taken before they are allocated)."""
    used: Counter[str] = Counter()
    for claim in view.allocated_claims(own):
        for res in ((claim.get("status") or {}).get("allocation") or {}).get("devices", {}).get("results") or []:
            dev = by_id.get(result_device_id(res))
            if dev is not None and dev.model == model and not res.get("adminAccess"):
                used[policy.tenant_for(obj_namespace(claim))] += 1
    for (ns, _), pod in view.pods.items():
        node = view.nodes.get(str((pod.get("spec") or {}).get("nodeName") or ""))
        if node is None or (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        gpus = _device_plugin_gpus(pod)
        if gpus and device_plugin_model(policy, node) == model:
            used[policy.tenant_for(ns)] += gpus
    return used


def _tenant_quota(view: ClusterView, policy: Policy | None, namespace: str, by_id: Mapping[str, Device],
                  own: Sequence[tuple[str, str]]) -> tuple[str, QuotaAsk | None]:
    """The namespace's tenant and its quota as the decision engine asks it
    (``audit.scheduler.quota``: nominal, borrowing limit, what other tenants leave to lend), over
    what the view holds in use, each model's use counted once; no quota without a policy."""
    if policy is None:
        return "", None
    tenant = policy.tenant_for(namespace)
    used: dict[str, Counter[str]] = {}

    def ask(model: str, count: int) -> QuotaCheck:
        if model not in used:
            used[model] = _in_use(view, policy, model, by_id, own)
        return quota_rule(policy, tenant, model, count, used[model].__getitem__)

    return tenant, ask


def _quota_blocker(tenant: str, tier: Tier, detail: Mapping[str, Any]) -> dict[str, Any]:
    """A ``quota_exhausted`` blocker of ``tier``: the tenant, and the detail of one model's quota
    as the decision engine records it."""
    return {"code": Blocker.QUOTA_EXHAUSTED.value, "tier": tier.index, "tenant": tenant, **detail}


def _closed_tier_blockers(tenant: str, tier: Tier, checks: Sequence[QuotaCheck],
                          indexed: Mapping[str, int]) -> list[dict[str, Any]]:
    """A tier the tenant's quota closes (no model of it fits): the decision engine's blockers,
    one per model, each with its part of what the tier counts (``closed_details``: the model's
    devices the engine's world indexes, ``indexed``), with the tenant and the tier's request."""
    return [{**_quota_blocker(tenant, tier, detail), "request": tier.label}
            for detail in closed_details([(c, indexed.get(c.model, 0)) for c in checks])]


def _indexed_models(view: ClusterView, everything: Sequence[Device]) -> Counter[str]:
    """Devices per model as the decision engine's world counts them (``World.model_totals``, all of
    which a tier the quota closes counts): those of slices that name their node."""
    return Counter(d.model for d in everything
                   if ((view.slices.get(d.slice_name) or {}).get("spec") or {}).get("nodeName"))


def _model_quota_blocker(ask: QuotaAsk | None, tenant: str, model: str, tier: Tier) -> dict[str, Any] | None:
    """The tenant's quota cannot take the tier's count of ``model``: no node would give the tier
    that model (the engine checks what a node gives model by model), whether or not another
    model keeps the tier open."""
    if ask is None:
        return None
    check = ask(model, tier.count)
    return None if check.fits else _quota_blocker(tenant, tier, check.detail())


def _tally(judged: Mapping[str, tuple[str, Verdict]]) -> tuple[dict[str, int], Counter[str], dict[str, str]]:
    """Reason counts (in primary order), node-filter causes, and the commonest taint key per taint
    reason (and the commonest constraint for ``constraint_unsatisfied``)."""
    counts: Counter[str] = Counter(reason for _, (reason, _) in judged.values())
    reasons = {code: counts[code] for code in ordered_codes(set(counts))}
    node_causes: Counter[str] = Counter(detail.get("cause", "") for _, (reason, detail) in judged.values()
                                        if reason == Reason.NODE_FILTERED.value)
    taint_keys: dict[str, str] = {}
    for code in (Reason.UNHEALTHY.value, Reason.TAINT_NOT_TOLERATED.value):
        keys = Counter(detail.get("key", "") for _, (reason, detail) in judged.values() if reason == code)
        keys.pop("", None)
        if keys:
            taint_keys[code] = sorted(keys.items(), key=lambda kv: (-kv[1], kv[0]))[0][0]
    constraints = Counter(f"{detail.get('constraint', '')} {detail.get('attribute', '')}"
                          for _, (reason, detail) in judged.values()
                          if reason == Reason.CONSTRAINT_UNSATISFIED.value and detail.get("constraint"))
    if constraints:
        taint_keys[Reason.CONSTRAINT_UNSATISFIED.value] = sorted(constraints.items(), key=lambda kv: (-kv[1], kv[0]))[0][0]
    return reasons, node_causes, taint_keys


def _tier_blocker(view: ClusterView, pod: Mapping[str, Any], claims: Sequence[Mapping[str, Any]], tier: Tier,
                  models: Sequence[str], everything: Sequence[Device], own: Sequence[tuple[str, str]],
                  policy: Policy | None, matcher: TierMatcher, ask: QuotaAsk | None) -> dict[str, Any]:
    """Why a tier cannot be allocated now: the devices it asks for, judged as ``explain`` judges them.

    A tier asking for no device model (a NIC, say) is judged on the devices without a model that
    its selectors select; a tier of several models on the devices of all of them, those of a
    model the tenant's quota cannot take the tier's count of reading ``quota_exhausted`` rather
    than available (the engine passes over a node giving them). ``best`` is the most usable
    devices on one node.
    """
    claim = next(c for c in claims if claim_key(c) == tier.claim)
    devices = [d for d in everything if (d.model in models if models else not d.model and matcher.asks_for(tier, d))]
    judged = _judge(view, pod, claim, tier, devices, own, True, policy)
    if ask is not None:
        over = {m for m in models if not ask(m, tier.count).fits}
        for d in devices:
            node, (reason, detail) = judged[d.id]
            if d.model in over and reason == AVAILABLE:
                judged[d.id] = (node, (Reason.QUOTA_EXHAUSTED.value, {"verdict": reason, **detail}))
    reasons, node_causes, _ = _tally(judged)
    per_node = Counter(node for node, (reason, _) in judged.values() if reason == AVAILABLE)
    best_node, best = sorted(per_node.items(), key=lambda kv: (-kv[1], kv[0]))[0] if per_node else ("", 0)
    return {"code": Blocker.INSUFFICIENT_ON_NODE.value, "tier": tier.index, "request": tier.label,
            "model": "|".join(models), "count": tier.count, "best": best, "best_node": best_node, "reasons": reasons,
            **({"node_causes": dict(sorted(node_causes.items()))} if node_causes else {})}


def _would_get(view: ClusterView, pod: Mapping[str, Any], claims: Sequence[Mapping[str, Any]], tiers: Sequence[Tier],
               matcher: TierMatcher, everything: Sequence[Device], own: Sequence[tuple[str, str]],
               policy: Policy | None, reserved: Mapping[str, str], tenant: str,
               ask: QuotaAsk | None) -> dict[str, Any]:
    """The allocation the scheduler would make now, or ``unschedulable`` with every tier's blocker;
    ``reserved``: devices held for other pods, which the scheduler would not give this one;
    ``ask``: the pod's tenant's quota (``_tenant_quota``).

    The tenant's quota is the engine's, by the engine's rules (``audit.scheduler.quota``): a tier
    is closed when no model it asks for fits its count, and a node is passed over when the
    devices it would give do not fit, model by model."""
    by_id = {d.id: d for d in everything}
    closed: dict[int, list[dict[str, Any]]] = {}
    models = {t.index: [m for m in matcher.models() if matcher.selects(t, m)] for t in tiers}
    mode = policy.fallback_mode if policy is not None else "immediate"
    indexed: Counter[str] | None = None
    for t in tiers:
        if mode == "strict" and t.sub_index > 0:
            closed[t.index] = [{"code": Blocker.INSUFFICIENT_ON_NODE.value, "tier": t.index, "request": t.label,
                                "model": "|".join(models[t.index]), "count": t.count, "fallback_mode": mode}]
            continue
        if ask is not None:
            shut, checks = tier_quota(models[t.index], t.count, ask)
            if shut:
                indexed = _indexed_models(view, everything) if indexed is None else indexed
                closed[t.index] = _closed_tier_blockers(tenant, t, checks, indexed)
    # Fallbacks that open after a wait are taken as open: the pod's wait is not known here.
    note = {"fallback_mode": mode} if mode in ("wait-for-preferred", "adaptive") else {}
    found = best_allocation(view, pod, claims, tiers, closed, own, policy, held=sorted(reserved), by_id=by_id,
                            quota=ask)
    if found is not None:
        return {**allocation_summary(found[1], tiers, by_id, found[0]), **note}
    blockers = [b for t in tiers for b in closed.get(t.index) or [
        _tier_blocker(view, pod, claims, t, models[t.index], everything, own, policy, matcher, ask)]]
    return {"result": "unschedulable", "model": "", "devices": [], "node": "", "tier": -1, "blockers": blockers,
            **note}


def _device_plugin_gpus(pod: dict[str, Any]) -> int:
    """The pod's device-plugin GPUs; 0 for a limit that is not a plain count (the view does not
    validate containers, and a malformed limit is not this question's error)."""
    try:
        return device_plugin_gpus(pod)
    except (ValueError, TypeError, AttributeError):
        return 0


def _pod_inputs(view: ClusterView, pod: str | tuple[str, str], policy: Policy | None,
                model_table: ModelTable | None) -> tuple[dict[str, Any], list[dict[str, Any]], list[Tier], list[Device]]:
    """The pod, its claims, their tiers and every device with its model; the pod must request devices."""
    ns, name = _pod_key(pod)
    pod_obj = view.pod(ns, name)
    claims = view.pod_claims(pod_obj)
    tiers = pod_tiers(claims)
    if not tiers:
        gpus = _device_plugin_gpus(pod_obj)
        if gpus:
            # its GPUs are a count the kubelet hands out: no device to judge, no preference to read
            raise ViewError(f"Pod {ns}/{name}: spec.containers[*].resources.limits.{DEVICE_PLUGIN_RESOURCE}: the "
                            f"pod asks for {gpus} GPU(s) through the device plugin, which names no devices; "
                            "per-device reasons need a DRA claim (its decision record answers without them)")
        raise ViewError(f"Pod {ns}/{name}: spec.resourceClaims: the pod requests no devices")
    table = model_table or ModelTable.of(policy)
    return pod_obj, claims, tiers, view.devices(table.model_of)


def known_models(view: ClusterView, policy: Policy | None = None, model_table: ModelTable | None = None) -> set[str]:
    """Every model the device-model table names, a device of the view is, or the GPUs of a
    device-plugin node of the view are (read from its GPU product label by the same table)."""
    table = model_table or ModelTable.of(policy)
    gpus = {device_plugin_model(table.policy, node) for node in view.nodes.values()
            if device_plugin_capacity(node) is not None}
    return (table.known_models() | {d.model for d in view.devices(table.model_of)} | gpus) - {"", UNKNOWN_MODEL}


def _device_plugin_pod(view: ClusterView, pod: str | tuple[str, str]) -> tuple[dict[str, Any], int] | None:
    """The pod and its device-plugin GPUs when it asks for GPUs through the device plugin only."""
    ns, name = _pod_key(pod)
    pod_obj = view.pod(ns, name)
    if pod_tiers(view.pod_claims(pod_obj)):
        return None
    gpus = _device_plugin_gpus(pod_obj)
    return (pod_obj, gpus) if gpus else None


def would_get_now(view: ClusterView, pod: str | tuple[str, str], policy: Policy | None = None,
                  model_table: ModelTable | None = None) -> dict[str, Any]:
    """What the pod would get if it were scheduled now (its allocation, when it holds one); a
    device-plugin pod's is the decision engine's device-plugin decision (``audit.explain.deviceplugin``)."""
    dp = _device_plugin_pod(view, pod)
    if dp is not None:
        return device_plugin_would_get(view, _pod_key(pod), dp[0], policy, dp[1])
    pod_obj, claims, tiers, everything = _pod_inputs(view, pod, policy, model_table)
    current = _current_outcome(pod_obj, claims, tiers, {d.id: d for d in everything})
    if current["result"] == "allocated":
        return current
    own = [(obj_namespace(c), obj_name(c)) for c in claims]
    reserved = reserved_for_others(view, policy, _pod_key(pod), everything, {})
    tenant, ask = _tenant_quota(view, policy, obj_namespace(pod_obj), {d.id: d for d in everything}, own)
    return _would_get(view, pod_obj, claims, tiers, TierMatcher(view, everything), everything, own, policy, reserved,
                      tenant, ask)


def explain(view: ClusterView, pod: str | tuple[str, str], model: str, policy: Policy | None = None,
            record: DecisionRecord | None = None, detail: bool = False,
            model_table: ModelTable | None = None, viewer: str | None = None) -> Explanation:
    """Explain why ``pod`` did (not) get ``model``; see the module docstring for the steps.

    Without a record, a pod that holds no allocation also gets ``would_get``: what it would get
    if it were scheduled now. ``viewer`` is the asker's tenant: holders of in-use devices in other
    tenants are not named (None: every holder is named). A device-plugin pod (without ``detail``)
    is answered by ``audit.explain.deviceplugin``: pending, by the decision it would get now; with
    its record (``view`` the world the decision saw), by the record, or for a model the record
    does not name, by that model's GPUs on the view.
    """
    ns, name = _pod_key(pod)
    dp = (_device_plugin_pod(view, pod) if not detail and (record is None or record.track == Track.DEVICE_PLUGIN.value)
          else None)
    if dp is not None and record is not None:
        return explain_recorded_device_plugin(view, (ns, name), model, policy, record, dp[1])
    if dp is not None and not (dp[0].get("spec") or {}).get("nodeName"):
        return explain_pending_device_plugin(view, (ns, name), model, policy, dp[1])
    pod_obj, claims, tiers, everything = _pod_inputs(view, pod, policy, model_table)
    by_id = {d.id: d for d in everything}
    matcher = TierMatcher(view, everything)
    target = next((t for t in tiers if matcher.selects(t, model)), None)
    judged_tier = target or tiers[0]
    claim = next(c for c in claims if claim_key(c) == judged_tier.claim)
    devices = [d for d in everything if d.model == model]
    own = [(obj_namespace(c), obj_name(c)) for c in claims]
    current = _current_outcome(pod_obj, claims, tiers, by_id)
    # A decision is taken before its pod is bound, so a recorded or held allocation is judged unbound.
    unbound = record is not None or current["result"] == "allocated"
    judged = _judge(view, pod_obj, claim, judged_tier, devices, own, not unbound, policy)
    reserved = reserved_for_others(view, policy, (ns, name), everything, judged)
    mark_reserved(judged, reserved, AVAILABLE)

    if record is not None:
        outcome = record_outcome(record)
        rec_tier = model_tier(record, model)
        blockers = record_blockers(record, rec_tier, model) if rec_tier or target is None else []
        policy_version = record.policy_version
        decision_id = record.decision_id
    else:
        outcome = current
        blockers = []
        policy_version = policy.version if policy is not None else ""
        decision_id = ""
    mark_selected(judged, outcome)
    reasons, node_causes, taint_keys = _tally(judged)
    if target is None and not any(b["code"] == Blocker.NOT_REQUESTED.value for b in blockers):
        # A tier whose selectors match no device in the cluster is named by its request instead.
        preference = [matcher.preferred_model(t) for t in tiers]
        blockers.insert(0, {"code": Blocker.NOT_REQUESTED.value, "preference": preference})
    skipped = not (outcome["result"] == "allocated" and outcome["model"] == model)
    tenant, ask = _tenant_quota(view, policy, ns, by_id, own)
    if target is not None and skipped:
        for found in (_model_quota_blocker(ask, tenant, model, target),
                      _insufficient(target, judged, devices, model)):
            if found and not any(b["code"] == found["code"] for b in blockers):
                blockers.append(found)
    would_get = None
    if record is None and current["result"] != "allocated":
        would_get = _would_get(view, pod_obj, claims, tiers, matcher, everything, own, policy, reserved, tenant, ask)
        # Nothing decided against a pending pod that would get the model now: it was not skipped.
        skipped = skipped and not (would_get.get("result") == "allocated" and would_get.get("model") == model)
    closing = closing_code(record, model, blockers, target.index if target is not None and skipped else None)
    verdicts: dict[str, int] = {}
    if closing:
        verdicts, reasons = reasons, close_tier(judged, closing)
    summary = render_summary(model, skipped, reasons, blockers, outcome, policy_version,
                             node_causes=node_causes, taint_keys=taint_keys, would_get=would_get,
                             verdicts=verdicts)
    device_rows = None
    if detail:
        holders = device_holders(view, own)
        tenant_of = (policy or default_policy()).tenant_for
        device_rows = []
        for d in devices:
            node, (reason, found) = judged[d.id]
            if found.get("verdict", reason) == Reason.IN_USE.value and d.id in holders:
                found = {**found, **holder_detail(holders[d.id], viewer, tenant_of)}
            device_rows.append(DeviceReason(device=d.id, node=node, reason=reason,
                                            detail={k: str(v) for k, v in sorted(found.items())}))
    return Explanation(pod=f"{ns}/{name}", decision_id=decision_id, model=model, skipped=skipped, outcome=outcome,
                       reasons=reasons, blockers=blockers, summary=summary, policy_version=policy_version,
                       devices=device_rows, would_get=would_get)
