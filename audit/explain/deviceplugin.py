"""A device-plugin pod (``nvidia.com/gpu`` limits) asked about against a cluster view.

Its GPUs are a count the kubelet hands out, so there is no device to judge one by one. What it
would get if scheduled now is the decision engine's own device-plugin decision
(``audit.scheduler.deviceplugin``: the first node by name with the GPUs free that the pod admits
and its tenant's quota takes) on a world folded from the view's objects, and a pending pod's
explanation is that decision's record read as ``audit.explain.record`` reads a stored one, so
an answer from a cluster dump and the API's answer from the recorded decision count alike. The
pod is not placed yet, so what that decision would select reads ``available``.

The pod names no model: it takes GPUs of whatever model a node it may use holds. A model the
decision neither gave it nor turned it down for (what a record answers for) is answered from the
world instead (a dump now, or the world a recorded decision saw): that model's GPUs on the
device-plugin nodes, read as ``audit.explain.core`` reads a DRA model's devices. Every GPU of a
node the pod cannot use is ``node_filtered`` with the engine's node filter's cause (taint,
nodeSelector, affinity …); the others are ``in_use`` or ``available``; when the tenant's quota
cannot take the pod's count of the model, the engine passes over every node of it
(``audit.scheduler.deviceplugin.node_blocker``), so all of them read ``quota_exhausted`` with
what they were doing beside it (``audit.explain.verdicts``). Blockers: the quota's, and
``insufficient_on_node`` when no usable node had the count free; ``no_model_choice`` when no
device-plugin node holds the model, or when nothing about the model stood in the way.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from audit.events import WorldEvent
from audit.explain.nextstep import pending_outcome
from audit.explain.reasons import AVAILABLE, ordered_codes
from audit.explain.record import (
    counted_as,
    device_reason_counts,
    explain_record,
    model_tier,
    names_model,
    no_model_choice,
    record_blockers,
    record_outcome,
)
from audit.explain.result import Explanation
from audit.explain.summary import render_summary
from audit.explain.view import ClusterView, obj_name, obj_namespace
from audit.policy import Policy, default_policy, policy_document
from audit.records import Blocker, DecisionRecord, Outcome, Reason
from audit.scheduler.engine import decide
from audit.scheduler.filters import node_filter
from audit.scheduler.quota import check_quota
from audit.timestamps import format_time_ms, parse_time_ms
from audit.world import DEVICE_PLUGIN_RESOURCE, World, device_plugin_model

# Kinds in the order a world takes them: what a pod refers to before the pod.
_KINDS = (("DeviceClass", "classes"), ("DeviceTaintRule", "taint_rules"), ("Node", "nodes"),
          ("ResourceSlice", "slices"), ("ResourceClaim", "claims"), ("Pod", "pods"))


def _latest_creation_ms(view: ClusterView) -> int:
    """The world's clock: the newest ``creationTimestamp`` in the view (0 when none is given), so
    that no pod was created after the moment the decision is taken."""
    latest = 0
    for _, table in _KINDS:
        for obj in getattr(view, table).values():
            created = str((obj.get("metadata") or {}).get("creationTimestamp") or "")
            if created:
                try:
                    latest = max(latest, parse_time_ms(created))
                except ValueError:
                    continue  # a malformed time is not this question's error
    return latest


def world_of(view: ClusterView, policy: Policy | None, unbound: tuple[str, str] | None = None) -> World:
    """The view's objects folded into a decision engine's world under ``policy``. ``unbound``: a
    pod taken as its decision saw it, before its binding (its ``nodeName`` left out, so its GPUs
    are not in use and no node is "another than its own")."""
    world = World("view")
    at = format_time_ms(_latest_creation_ms(view))
    seq = 0
    if policy is not None:
        world.apply(WorldEvent("view", seq, at, "upsert", "Policy", "", policy.name, policy_document(policy)))
    for kind, table in _KINDS:
        objects: Mapping[Any, dict[str, Any]] = getattr(view, table)
        for key in sorted(objects):
            obj = objects[key]
            if kind == "Pod" and (obj_namespace(obj), obj_name(obj)) == unbound:
                obj = {**obj, "spec": {k: v for k, v in (obj.get("spec") or {}).items() if k != "nodeName"}}
            seq += 1
            world.apply(WorldEvent("view", seq, at, "upsert", kind, obj_namespace(obj), obj_name(obj),
                                   {**obj, "kind": kind}))
    return world


def _blockers(world: World, record: DecisionRecord, pod_key: str, gpus: int) -> list[dict[str, Any]]:
    """The decision's blockers for the pod's one tier, or, when nothing but room stood in the way,
    that tier's GPU counts with the most GPUs free on one node the pod admits."""
    if record.blockers:
        return [{"code": b.code, "tier": b.tier, "request": DEVICE_PLUGIN_RESOURCE, **b.detail}
                for b in record.blockers]
    ns, _, name = pod_key.partition("/")
    pod = world.get("Pod", ns, name) or {}
    free = {n: world.dp_capacity[n] - world.dp_used.get(n, 0) for n in sorted(world.dp_capacity)
            if node_filter(world, n, pod) is None}
    best_node, best = sorted(free.items(), key=lambda kv: (-kv[1], kv[0]))[0] if free else ("", 0)
    return [{"code": Blocker.INSUFFICIENT_ON_NODE.value, "tier": 0, "request": DEVICE_PLUGIN_RESOURCE, "model": "",
             "count": gpus, "best": max(best, 0), "best_node": best_node if best > 0 else "",
             "reasons": device_reason_counts(record.tiers[0], False) if record.tiers else {}}]


def _next_step(world: World, record: DecisionRecord, pod_key: str, gpus: int) -> dict[str, Any]:
    if record.outcome == Outcome.ALLOCATED.value:
        return {"result": "allocated", "model": record.allocated_model, "devices": [], "node": record.node,
                "tier": 0, "retry_class": ""}
    return {**pending_outcome(), "result": "unschedulable", "retry_class": record.retry_class,
            "blockers": _blockers(world, record, pod_key, gpus)}


def _decided(view: ClusterView, pod: tuple[str, str], policy: Policy | None, gpus: int
             ) -> tuple[World, DecisionRecord, dict[str, Any]]:
    """The world of the view, the engine's decision for the pending pod on it now, and what the
    pod would get."""
    world = world_of(view, policy)
    key = f"{pod[0]}/{pod[1]}"
    record = decide(world, key, 1, world.time_ms, policy).record
    return world, record, _next_step(world, record, key, gpus)


def _model_gpus(world: World, pod: tuple[str, str], model: str, gpus: int
                ) -> tuple[dict[str, int], dict[str, int], dict[str, int], list[dict[str, Any]]]:
    """Reason counts, node-filter causes, what a tier the quota closed found beneath it, and the
    blockers of ``model``'s device-plugin GPUs for the pod (see the module docstring)."""
    spec = world.get("Pod", *pod) or {}
    counts: Counter[str] = Counter()
    causes: Counter[str] = Counter()
    free: dict[str, int] = {}
    nodes = sorted(n for n in world.dp_capacity if world.dp_model.get(n) == model)
    for node in nodes:
        capacity = world.dp_capacity[node]
        used = min(max(world.dp_used.get(node, 0), 0), capacity)
        excluded = node_filter(world, node, spec)
        if excluded is not None:
            counts[Reason.NODE_FILTERED.value] += capacity
            causes[excluded["filter"]] += capacity
            continue
        counts[Reason.IN_USE.value] += used
        counts[AVAILABLE] += capacity - used
        if capacity > used:
            free[node] = capacity - used
    reasons = {code: counts[code] for code in ordered_codes({c for c, n in counts.items() if n})}
    verdicts: dict[str, int] = {}
    blockers: list[dict[str, Any]] = []
    tenant = world.policy.tenant_for(pod[0])
    quota = check_quota(world, world.policy, tenant, model, gpus)
    if not quota.fits:
        blockers.append({"code": Blocker.QUOTA_EXHAUSTED.value, "tier": 0, "request": DEVICE_PLUGIN_RESOURCE,
                         "tenant": tenant, **quota.detail()})
        if reasons:
            verdicts, reasons = reasons, {Reason.QUOTA_EXHAUSTED.value: sum(reasons.values())}
    best_node, best = sorted(free.items(), key=lambda kv: (-kv[1], kv[0]))[0] if free else ("", 0)
    if 0 < best < gpus:
        blockers.append({"code": Blocker.INSUFFICIENT_ON_NODE.value, "tier": 0, "request": DEVICE_PLUGIN_RESOURCE,
                         "model": model, "count": gpus, "best": best, "best_node": best_node})
    if not nodes or (quota.fits and best >= gpus):
        blockers.append(no_model_choice(len(nodes)))
    return reasons, dict(sorted(causes.items())), verdicts, blockers


def _model_answer(world: World, pod: tuple[str, str], model: str, gpus: int, outcome: dict[str, Any],
                  policy_version: str, decision_id: str = "", would_get: dict[str, Any] | None = None) -> Explanation:
    """Why the pod did not get ``model``, from that model's GPUs on ``world`` (``_model_gpus``)."""
    reasons, causes, verdicts, blockers = _model_gpus(world, pod, model, gpus)
    summary = render_summary(model, True, reasons, blockers, outcome, policy_version, node_causes=causes,
                             would_get=would_get, verdicts=verdicts, absent="")
    return Explanation(pod=f"{pod[0]}/{pod[1]}", decision_id=decision_id, model=model, skipped=True, outcome=outcome,
                       reasons=reasons, blockers=blockers, summary=summary, policy_version=policy_version,
                       would_get=would_get)


def device_plugin_would_get(view: ClusterView, pod: tuple[str, str], pod_obj: Mapping[str, Any],
                            policy: Policy | None, gpus: int) -> dict[str, Any]:
    """What the device-plugin pod holds (bound: its node and the node's model) or would get now."""
    node = str((pod_obj.get("spec") or {}).get("nodeName") or "")
    if node:
        model = device_plugin_model(policy or default_policy(), view.nodes.get(node) or {})
        return {"result": "allocated", "model": model, "devices": [], "node": node, "tier": 0, "retry_class": ""}
    return _decided(view, pod, policy, gpus)[2]


def explain_recorded_device_plugin(view: ClusterView, pod: tuple[str, str], model: str, policy: Policy | None,
                                   record: DecisionRecord, gpus: int) -> Explanation:
    """Why the device-plugin pod of ``record`` did (not) get ``model``; ``view`` is the world the
    decision saw (at its ``seq``). The record answers for the model it names; any other model is
    answered from its GPUs on that world, the pod taken as the decision saw it, unbound."""
    if names_model(record, model):
        return explain_record(record, model)
    world = world_of(view, policy, unbound=pod)
    return _model_answer(world, pod, model, gpus, record_outcome(record), record.policy_version, record.decision_id)


def explain_pending_device_plugin(view: ClusterView, pod: tuple[str, str], model: str, policy: Policy | None,
                                  gpus: int) -> Explanation:
    """Why the pending device-plugin pod would (not) get ``model`` if scheduled now."""
    world, record, would_get = _decided(view, pod, policy, gpus)
    version = policy.version if policy is not None else ""
    if not names_model(record, model):
        return _model_answer(world, pod, model, gpus, pending_outcome(), version, would_get=would_get)
    tier = model_tier(record, model)
    reasons = device_reason_counts(tier, False) if tier is not None else {}
    blockers = record_blockers(record, tier, model)
    skipped = not (would_get["result"] == "allocated" and would_get["model"] == model)
    pending = pending_outcome()
    summary = render_summary(model, skipped, reasons, blockers, pending, version, would_get=would_get,
                             counted=counted_as(record, tier, model))
    return Explanation(pod=f"{pod[0]}/{pod[1]}", decision_id="", model=model, skipped=skipped, outcome=pending,
                       reasons=reasons, blockers=blockers, summary=summary, policy_version=version,
                       would_get=would_get)
