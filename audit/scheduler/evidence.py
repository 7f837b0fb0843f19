"""Tier summaries for a decision: devices considered, counts per reason code, a few exemplars.

A tier's summary covers exactly the devices of the tier's models in the world's device index:
``considered`` is their number and the reason counts add up to it. Nodes the engine visited
contribute the allocator's own verdicts on those devices (the allocator also judges devices of
other models there; they belong to other tiers' summaries). Every other device of the tier's
models, and every one the allocator did not reach, is classified from the world's indexes
without running anything: allocated -> ``in_use``, unhealthy -> ``unhealthy``, free and healthy
-> ``not_reached`` (the search ended before it, or its node never had enough free devices to be
worth a visit). A tier the policy closed counts all its devices under the closing reason
(``quota_exhausted``, ``fair_share_deferred``); a tier a fallback mode did not open is classified
like unvisited devices. Exemplars (at most three) come from visited nodes in visit order: the
selected device first, then the first device of each other reason. Deterministic: visit order
and slice order only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from audit.records import Exemplar, Reason, TierSummary
from audit.scheduler.tiers import RequestTiers, Tier
from audit.world import World

MAX_EXEMPLARS = 3
# Reason codes as plain strings: an enum member's ``.value`` is a property call, and these are read
# for every verdict of every tier of every decision.
_NOT_REACHED = Reason.NOT_REACHED.value
_SELECTED = Reason.SELECTED.value
_IN_USE = Reason.IN_USE.value
_UNHEALTHY = Reason.UNHEALTHY.value
_NODE_FILTERED = Reason.NODE_FILTERED.value


@dataclass
class Visit:
    """What happened on one visited node (filled by the engine)."""

    node: str
    filtered: dict[str, str] | None
    evidence: Mapping[tuple[str, str], list[Any]]  # (claim key, request path) -> DeviceVerdicts


def tier_request_name(t: Tier) -> str:
    return f"{t.request}/{t.subrequest}" if t.subrequest else t.request


def summarize(world: World, rts: list[RequestTiers], closed: Mapping[tuple[str, str, int], str],
              visits: list[Visit], multi_claim: bool) -> list[TierSummary]:
    stats = {v.node: _node_stats(world, v.node) for v in visits if v.filtered}
    # each visited node's own devices by model, read once for all tiers
    models = {v.node: _device_models(world, v.node) for v in visits if not v.filtered}
    out: list[TierSummary] = []
    for rt in rts:
        for t in rt.tiers:
            out.append(_summary(world, t, closed.get((t.claim, t.request, t.index)), visits, stats, models, multi_claim))
    return out


def _device_models(world: World, node: str) -> dict[str, str]:
    """device id -> model, for the indexed devices living on ``node``."""
    devices = world.devices
    return {dev_id: devices[dev_id].model for dev_id in world.node_devices.get(node, ())}


def _summary(world: World, t: Tier, closed: str | None, visits: list[Visit],
             stats: Mapping[str, Mapping[str, list[int]]], models: Mapping[str, Mapping[str, str]],
             multi_claim: bool) -> TierSummary:
    name = tier_request_name(t)
    request = f"{t.claim.split('/', 1)[1]}/{name}" if multi_claim else name
    models_of_tier = t.models
    totals = world.model_totals
    # (loops, not sums over generators: three per tier of every decision)
    considered = 0
    for m in models_of_tier:
        considered += totals.get(m, 0)
    reasons: dict[str, int] = {}
    # A tier a fallback mode kept shut is simply not reached: its devices are classified like any
    # unjudged device, so those in use or unhealthy say so.
    if closed is not None and closed != _NOT_REACHED:
        if considered:
            reasons[closed] = considered
        return TierSummary(index=t.index, request=request, model=t.label, considered=considered, reasons=reasons)
    # Devices of the tier's models no verdict judged, split by the indexes.
    unvisited = considered
    in_use = free = 0
    model_allocated, model_free = world.model_allocated, world.model_free
    for m in models_of_tier:
        a, f = model_allocated.get(m, 0), model_free.get(m, 0)
        if a > 0:
            in_use += a
        if f > 0:
            free += f
    exemplars: list[Exemplar] = []
    seen_reasons: set[str] = set()
    evaluated = 0
    allocated_by, devices = world.allocated_by, world.devices
    for v in visits:
        if v.filtered:
            per = stats[v.node]
            node_total = 0
            for m in t.models:
                c = per.get(m)
                if c is not None:
                    node_total += c[0]
                    in_use -= c[1]
                    free -= c[2]
            unvisited -= node_total
            if node_total:
                _add(reasons, _NODE_FILTERED, node_total)
            continue
        evaluated += 1
        verdicts = _own_verdicts(t, models[v.node], v.evidence.get((t.claim, name)))
        # Devices the allocator judged leave the index pools. Those it did not reach (or never
        # looked at, the tier not being tried there) stay in them and are classified like
        # unvisited ones: the index knows whether they are in use or unhealthy.
        for vd in verdicts:
            reason = vd.reason
            unvisited -= 1
            if vd.device in allocated_by:
                in_use -= 1
            elif not devices[vd.device].unhealthy:
                free -= 1
            reasons[reason] = reasons.get(reason, 0) + 1
        _pick_exemplars(exemplars, seen_reasons, v.node, verdicts)
    unhealthy = max(0, unvisited - in_use - free)
    if in_use > 0:
        _add(reasons, _IN_USE, in_use)
    if unhealthy > 0:
        _add(reasons, _UNHEALTHY, unhealthy)
    if free > 0:
        _add(reasons, _NOT_REACHED, free)
    return TierSummary(index=t.index, request=request, model=t.label, considered=considered,
                       reasons=dict(sorted(reasons.items())), exemplars=exemplars, nodes_evaluated=evaluated)


def _own_verdicts(t: Tier, on_node: Mapping[str, str], verdicts: list[Any] | None) -> list[Any]:
    """The verdicts on devices of the tier's models that live on the node (``on_node``: its
    devices' models, ``_device_models``), but for ``not_reached`` ones: those count like unjudged
    devices and are never exemplars, and a tier not tried on the node has nothing else.

    The allocator judges every device the node can reach, whatever its model; a tier's evidence
    counts only its own models' devices (each exactly once: devices of slices shared between
    nodes are not in the world's device index, so they are never counted).
    """
    if not verdicts:
        return []
    models = t.models
    return [vd for vd in verdicts if vd.reason != _NOT_REACHED and on_node.get(vd.device) in models]


def _node_stats(world: World, node: str) -> dict[str, list[int]]:
    """model -> [devices, allocated, free and healthy] on one node."""
    out: dict[str, list[int]] = {}
    for model, (total, free) in world.node_model.get(node, {}).items():
        out[model] = [total, 0, free]
    for dev_id in world.node_devices.get(node, []):
        if dev_id in world.allocated_by:
            c = out.get(world.devices[dev_id].model)
            if c is not None:
                c[1] += 1
    return out


def _pick_exemplars(out: list[Exemplar], seen: set[str], node: str, verdicts: list[Any]) -> None:
    """The selected device first, then the first device of each other reason (``verdicts`` hold
    no not_reached ones, ``_own_verdicts``)."""
    if len(out) >= MAX_EXEMPLARS:
        return
    if _SELECTED not in seen:
        for vd in verdicts:
            if vd.reason == _SELECTED:
                out.append(Exemplar(device=vd.device, node=node, reason=_SELECTED, detail=vd.detail_dict()))
                seen.add(_SELECTED)
                break
    for vd in verdicts:
        if len(out) >= MAX_EXEMPLARS:
            return
        reason = vd.reason
        if reason in seen:
            continue
        seen.add(reason)
        out.append(Exemplar(device=vd.device, node=node, reason=reason, detail=vd.detail_dict()))


def _add(counts: dict[str, int], reason: str, n: int) -> None:
    counts[reason] = counts.get(reason, 0) + n
