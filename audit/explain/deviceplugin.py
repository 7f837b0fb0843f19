"""A device-plugin pod (``nvidia.com/gpu`` limits) asked about against a cluster view.

Its GPUs are a count the kubelet hands out, so there is no device to judge one by one. What it
would get if scheduled now is the decision engine's own device-plugin decision
(``audit.scheduler.deviceplugin``: the first node by name with the GPUs free that the pod admits
and its tenant's quota takes) on a world folded from the view's objects, and a pending pod's
explanation is that decision's record read as ``audit.explain.record`` reads a stored one, so
an answer from a cluster dump and the API's answer from the recorded decision count alike. The
pod is not placed yet, so what that decision would select reads ``available``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from audit.events import WorldEvent
from audit.explain.nextstep import pending_outcome
from audit.explain.record import counted_as, device_reason_counts, model_tier, record_blockers
from audit.explain.result import Explanation
from audit.explain.summary import render_summary
from audit.explain.view import ClusterView, obj_name, obj_namespace
from audit.policy import Policy, default_policy, policy_document
from audit.records import Blocker, DecisionRecord, Outcome
from audit.scheduler.engine import decide
from audit.scheduler.filters import node_filter
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


def world_of(view: ClusterView, policy: Policy | None) -> World:
    """The view's objects folded into a decision engine's world under ``policy``."""
    world = World("view")
    at = format_time_ms(_latest_creation_ms(view))
    seq = 0
    if policy is not None:
        world.apply(WorldEvent("view", seq, at, "upsert", "Policy", "", policy.name, policy_document(policy)))
    for kind, table in _KINDS:
        objects: Mapping[Any, dict[str, Any]] = getattr(view, table)
        for key in sorted(objects):
            obj = objects[key]
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
             ) -> tuple[DecisionRecord, dict[str, Any]]:
    """The engine's decision for the pending pod on the view now, and what it would get."""
    world = world_of(view, policy)
    key = f"{pod[0]}/{pod[1]}"
    record = decide(world, key, 1, world.time_ms, policy).record
    return record, _next_step(world, record, key, gpus)


def device_plugin_would_get(view: ClusterView, pod: tuple[str, str], pod_obj: Mapping[str, Any],
                            policy: Policy | None, gpus: int) -> dict[str, Any]:
    """What the device-plugin pod holds (bound: its node and the node's model) or would get now."""
    node = str((pod_obj.get("spec") or {}).get("nodeName") or "")
    if node:
        model = device_plugin_model(policy or default_policy(), view.nodes.get(node) or {})
        return {"result": "allocated", "model": model, "devices": [], "node": node, "tier": 0, "retry_class": ""}
    return _decided(view, pod, policy, gpus)[1]


def explain_pending_device_plugin(view: ClusterView, pod: tuple[str, str], model: str, policy: Policy | None,
                                  gpus: int) -> Explanation:
    """Why the pending device-plugin pod would (not) get ``model`` if scheduled now."""
    record, would_get = _decided(view, pod, policy, gpus)
    tier = model_tier(record, model)
    reasons = device_reason_counts(tier, False) if tier is not None else {}
    blockers = record_blockers(record, tier, model)
    skipped = not (would_get["result"] == "allocated" and would_get["model"] == model)
    version = policy.version if policy is not None else ""
    pending = pending_outcome()
    summary = render_summary(model, skipped, reasons, blockers, pending, version, would_get=would_get,
                             counted=counted_as(record, tier, model))
    return Explanation(pod=f"{pod[0]}/{pod[1]}", decision_id="", model=model, skipped=skipped, outcome=pending,
                       reasons=reasons, blockers=blockers, summary=summary, policy_version=version,
                       would_get=would_get)
