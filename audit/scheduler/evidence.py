"""Tier summaries for a decision: devices considered, counts per reason code, a few exemplars.

Nodes the engine visited contribute the allocator's own per-device verdicts. Every other device of
the tier's models is classified from the world's indexes without running anything: allocated ->
``in_use``, unhealthy -> ``unhealthy``, free and healthy -> ``not_reached`` (the search ended
before it). A tier the policy closed counts all its devices under the closing reason
(``quota_exhausted``; ``not_reached`` for tiers a fallback mode did not open). Exemplars (at
most three) come from visited nodes in visit order: the selected device first, then the first
device of each other reason. Deterministic: visit order and slice order only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from audit.records import Exemplar, Reason, TierSummary
from audit.scheduler.tiers import RequestTiers, Tier
from audit.world import World

MAX_EXEMPLARS = 3


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
    stats = {v.node: _node_stats(world, v.node) for v in visits}
    out: list[TierSummary] = []
    for rt in rts:
        for t in rt.tiers:
            out.append(_summary(world, t, closed.get((t.claim, t.request, t.index)), visits, stats, multi_claim))
    return out


def _summary(world: World, t: Tier, closed: str | None, visits: list[Visit],
             stats: Mapping[str, Mapping[str, list[int]]], multi_claim: bool) -> TierSummary:
    name = tier_request_name(t)
    request = f"{t.claim.split('/', 1)[1]}/{name}" if multi_claim else name
    considered = sum(world.model_totals.get(m, 0) for m in t.models)
    reasons: dict[str, int] = {}
    if closed is not None:
        if considered:
            reasons[closed] = considered
        return TierSummary(index=t.index, request=request, model=t.label, considered=considered, reasons=reasons)
    in_use = sum(max(0, world.model_allocated.get(m, 0)) for m in t.models)
    free = sum(max(0, world.model_free.get(m, 0)) for m in t.models)
    exemplars: list[Exemplar] = []
    seen_reasons: set[str] = set()
    evaluated = 0
    for v in visits:
        per = stats[v.node]
        node_total = node_alloc = node_free = 0
        for m in t.models:
            c = per.get(m)
            if c is not None:
                node_total, node_alloc, node_free = node_total + c[0], node_alloc + c[1], node_free + c[2]
        in_use -= node_alloc
        free -= node_free
        considered -= node_total
        verdicts = None if v.filtered else v.evidence.get((t.claim, name))
        if v.filtered:
            considered += node_total
            if node_total:
                _add(reasons, Reason.NODE_FILTERED.value, node_total)
            continue
        evaluated += 1
        if verdicts is None:
            considered += node_total
            if node_total:
                _add(reasons, Reason.NOT_REACHED.value, node_total)
            continue
        considered += len(verdicts)
        for vd in verdicts:
            _add(reasons, vd.reason, 1)
        _pick_exemplars(exemplars, seen_reasons, v.node, verdicts)
    unhealthy = max(0, considered - in_use - free - sum(reasons.values()))
    if in_use > 0:
        _add(reasons, Reason.IN_USE.value, in_use)
    if unhealthy > 0:
        _add(reasons, Reason.UNHEALTHY.value, unhealthy)
    if free > 0:
        _add(reasons, Reason.NOT_REACHED.value, free)
    return TierSummary(index=t.index, request=request, model=t.label, considered=considered,
                       reasons=dict(sorted(reasons.items())), exemplars=exemplars, nodes_evaluated=evaluated)


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
    """The selected device first, then the first device of each other reason (never not_reached)."""
    if len(out) >= MAX_EXEMPLARS:
        return
    selected = Reason.SELECTED.value
    if selected not in seen:
        for vd in verdicts:
            if vd.reason == selected:
                out.append(Exemplar(device=vd.device, node=node, reason=selected, detail=vd.detail_dict()))
                seen.add(selected)
                break
    for vd in verdicts:
        if len(out) >= MAX_EXEMPLARS:
            return
        reason = vd.reason
        if reason in seen or reason == Reason.NOT_REACHED.value:
            continue
        seen.add(reason)
        out.append(Exemplar(device=vd.device, node=node, reason=reason, detail=vd.detail_dict()))


def _add(counts: dict[str, int], reason: str, n: int) -> None:
    counts[reason] = counts.get(reason, 0) + n
