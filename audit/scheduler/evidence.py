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
    out: list[TierSummary] = []
    for rt in rts:
        for t in rt.tiers:
            out.append(_summary(world, t, closed.get((t.claim, t.request, t.index)), visits, multi_claim))
    return out


def _summary(world: World, t: Tier, closed: str | None, visits: list[Visit], multi_claim: bool) -> TierSummary:
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
        node_total, node_alloc, node_free = _node_counts(world, v.node, t.models)
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


def _node_counts(world: World, node: str, models: tuple[str, ...]) -> tuple[int, int, int]:
    per = world.node_model.get(node, {})
    total = sum(per.get(m, [0, 0])[0] for m in models)
    free = sum(per.get(m, [0, 0])[1] for m in models)
    alloc = 0
    for dev_id in world.node_devices.get(node, []):
        if dev_id in world.allocated_by and world.devices[dev_id].model in models:
            alloc += 1
    return total, alloc, free


def _pick_exemplars(out: list[Exemplar], seen: set[str], node: str, verdicts: list[Any]) -> None:
    for vd in verdicts:
        if len(out) >= MAX_EXEMPLARS:
            return
        if vd.reason == Reason.NOT_REACHED.value or vd.reason in seen:
            continue
        if vd.reason != Reason.SELECTED.value and Reason.SELECTED.value not in seen and any(
                x.reason == Reason.SELECTED.value for x in verdicts):
            # the chosen device leads the exemplars when this node has one
            sel = next(x for x in verdicts if x.reason == Reason.SELECTED.value)
            out.append(Exemplar(device=sel.device, node=node, reason=sel.reason, detail=sel.detail_dict()))
            seen.add(Reason.SELECTED.value)
            if len(out) >= MAX_EXEMPLARS:
                return
        seen.add(vd.reason)
        out.append(Exemplar(device=vd.device, node=node, reason=vd.reason, detail=vd.detail_dict()))


def _add(counts: dict[str, int], reason: str, n: int) -> None:
    counts[reason] = counts.get(reason, 0) + n
