"""Explain from a stored decision alone: the evidence summary the record carries.

This is the fast path of the API (no world rebuild): reason counts are the decision's own tier
counts for the model (so they add up to the devices of the model that tier considered), blockers
are the record's tier blockers, and the outcome is the record's. Per-device detail needs the world
and goes through ``explain``.

Two codes of the record are the search's, not a device's: ``selected`` (the decision took the
device) stays when the pod got it, as ``explain`` marks the pod's own devices
(``audit.explain.verdicts``; after a failed binding it reads ``available``, and so do devices
the search picked on a node the engine then passed over, the tenant's quota not taking that
node's models: the pod does not hold them), and
``not_reached`` (free and healthy when decided, and no check the decision ran failed for it: the
search ended before it, or its node never had enough free devices for the tier) reads as
``available``, the code a device gets when no check fails. Why a skipped tier's available
devices went unused is its ``insufficient_on_node`` blocker, recorded by the engine. A tier the
policy closed before any device was looked at keeps its closing code for all its devices
(``quota_exhausted``, ``fair_share_deferred``), next to the blocker that gives the numbers; the
per-device answer gives the same code, with what each device's checks found as evidence.
A model that only a tier of several models asks for (``A100|H100|L40S``) is answered from that
tier, whose counts cover all its models: the sentence says so. When the tenant's quota closed
such a tier (none of its models fits), the record has a ``quota_exhausted`` blocker per model,
each with ``over_quota``, its part of the tier's count: the answer gives the model's own. A device-plugin pod's one tier
counts every device-plugin GPU, of whatever model its node holds, and the sentence says
``nvidia.com/gpu``. Such a pod names no model, so a model it neither got nor was turned down for
is not "outside its preference list": the record does not know which of its nodes hold that
model, and its counts and blockers are of other models (a quota it was deferred on is one
its blockers name), so the answer counts nothing and gives a ``no_model_choice`` blocker saying
that the record does not say (with a world, ``audit.explain.deviceplugin`` counts the model's own
GPUs instead).
Devices a reservation held for another pod count as ``in_use`` (the allocator saw them so); the
record's ``reservation_held`` blockers for the model say which node and pod held them. A
reclaim's ``reclaim_victim`` blockers go with the model they free.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from audit.explain.reasons import AVAILABLE, ordered_codes
from audit.explain.result import Explanation
from audit.explain.summary import render_summary
from audit.records import Blocker, DecisionRecord, Outcome, Reason, TierSummary, Track, label_models
from audit.world import DEVICE_PLUGIN_RESOURCE


def record_outcome(record: DecisionRecord) -> dict[str, Any]:
    allocated = record.outcome == Outcome.ALLOCATED.value
    out = {
        "result": record.outcome,
        "model": record.allocated_model if allocated else "",
        "devices": [d.device for d in record.devices],
        "node": record.node,
        "tier": record.tier_index if allocated else -1,
        "retry_class": record.retry_class,
        "fallback": record.fallback,
    }
    if record.outcome == Outcome.PREEMPTED.value:  # what the reclaim took back (audit.scheduler.reclaim)
        fair = any(b.code == Blocker.RECLAIM.value and b.detail.get("basis") == "fair_share" for b in record.blockers)
        out["reclaimed"] = "fair share" if fair else "quota"
    return out


def model_tier(record: DecisionRecord, model: str) -> TierSummary | None:
    """The first preference tier asking for the model. A device-plugin pod's one tier asks for GPUs
    of whatever model its nodes hold (``any``): it asks for the model the record allocated, or
    the one a blocker of it names (the tenant's quota of a node's model)."""
    found = next((t for t in record.tiers if model in label_models(t.model)), None)
    if found is None and record.track == Track.DEVICE_PLUGIN.value and record.tiers and (
            model == record.allocated_model or any(b.detail.get("model") == model for b in record.blockers)):
        found = record.tiers[0]
    return found


def names_model(record: DecisionRecord, model: str) -> bool:
    """Whether the record answers for ``model``: a tier asks for it, or, for a device-plugin pod,
    it is the model the pod got or one a blocker names (``model_tier``). What the GPUs of a model
    a device-plugin record does not name were doing only a world can say."""
    return (record.track != Track.DEVICE_PLUGIN.value or model_tier(record, model) is not None
            or (record.outcome == Outcome.ALLOCATED.value and model == record.allocated_model))


def record_models(record: DecisionRecord) -> set[str]:
    """The device models the record names, which ``why`` may be asked about: those of its
    preference entries and tier labels (a device-plugin record's one entry is the resource its
    pod asks for, ``nvidia.com/gpu``, not a model), the model it got and its first choice."""
    preference = record.preference if record.track != Track.DEVICE_PLUGIN.value else []
    labels = [*preference, *(t.model for t in record.tiers)]
    return {m for label in labels for m in label_models(label)} | ({record.allocated_model, record.preferred_model}
                                                                   - {""})


def no_model_choice(model_nodes: int | None = None) -> dict[str, Any]:
    """The blocker of a device-plugin pod asked about a model it names nowhere: it chooses no
    model. ``model_nodes``: how many device-plugin nodes hold the model, when a world says it."""
    return {"code": Blocker.NO_MODEL_CHOICE.value, "tier": 0, "request": DEVICE_PLUGIN_RESOURCE,
            **({"model_nodes": model_nodes} if model_nodes is not None else {})}


def record_blockers(record: DecisionRecord, tier: TierSummary | None, model: str) -> list[dict[str, Any]]:
    """The record's blockers that answer for ``model`` asked through ``tier``: the tier's own, but
    those naming another of its models alone. A tier the tenant's quota closed on several models'
    quotas (a DRA tier of several models, none of which fits; a device-plugin pod turned away by
    the quotas of several of its nodes' models) has a ``quota_exhausted`` blocker per model, with
    its part of the tier's count (``audit.scheduler.quota.closed_details``): the model's own is its
    answer. Blockers naming the whole tier (its label) or no model stay."""
    if tier is None:
        return [{"code": Blocker.NOT_REQUESTED.value, "preference": list(record.preference)}]
    return [{"code": b.code, "tier": b.tier, **b.detail} for b in record.blockers
            if (b.tier == tier.index and b.detail.get("model") in (None, "", model, tier.model))
            or (b.code in (Blocker.RESERVATION_HELD.value, Blocker.RECLAIM_VICTIM.value)
                and model in str(b.detail.get("model", "")).split("|"))]


def _taint_keys(tier: TierSummary) -> dict[str, str]:
    keys: dict[str, Counter[str]] = {}
    for ex in tier.exemplars:
        key = ex.detail.get("key") or ex.detail.get("taint") or ""
        if ex.reason in (Reason.UNHEALTHY.value, Reason.TAINT_NOT_TOLERATED.value) and key:
            keys.setdefault(ex.reason, Counter())[key] += 1
    return {code: c.most_common(1)[0][0] for code, c in keys.items()}


def own_devices(record: DecisionRecord, tier: TierSummary) -> int | None:
    """How many of the devices the pod holds the tier gave it, or None when the record cannot say:
    a device-plugin pod's GPUs have no identities (its tier's ``selected`` is its count), and a
    record none of whose held devices names a request of its tiers (another producer's naming)
    is taken as recorded. A tier's request is ``request/subrequest``, led by the claim's name when
    the pod has several claims; a held device names the allocator's request, without the claim."""
    if record.track == Track.DEVICE_PLUGIN.value:
        return None

    def gave(t: TierSummary) -> int:
        return sum(1 for d in record.devices if t.request == d.request or t.request.endswith("/" + d.request))

    return gave(tier) if any(gave(t) for t in record.tiers) else None


def device_reason_counts(tier: TierSummary, allocated: bool, own: int | None = None) -> dict[str, int]:
    """The tier's reason counts with ``not_reached`` read as ``available``, and ``selected`` too
    unless the pod got the devices (``allocated``: a decision that failed at binding holds none);
    the total is unchanged. ``own``: the devices the pod got through the tier (``own_devices``);
    what the search selected beyond them reads ``available``: the allocator picked them on a node
    the engine then passed over (the tenant's quota could not take that node's models), so no
    check failed for them and the pod does not hold them."""
    available = {Reason.NOT_REACHED.value} if allocated else {Reason.NOT_REACHED.value, Reason.SELECTED.value}
    counts: Counter[str] = Counter()
    for code, n in tier.reasons.items():
        if not n:
            continue
        if code == Reason.SELECTED.value and allocated and own is not None and n > own:
            counts[AVAILABLE] += n - own
            n = own
            if not n:
                continue
        counts[AVAILABLE if code in available else code] += n
    return dict(counts)


def counted_as(record: DecisionRecord, tier: TierSummary | None, model: str) -> str:
    """What the tier's counts count when it is not the model's devices alone: a tier of several
    models counts them together (``A100|H100|L40S``), and a device-plugin pod's one tier every
    device-plugin GPU, whatever the model of its node (``nvidia.com/gpu``)."""
    if tier is None:
        return ""
    if record.track == Track.DEVICE_PLUGIN.value:
        return DEVICE_PLUGIN_RESOURCE
    return tier.model if tier.model != model else ""


def explain_record(record: DecisionRecord, model: str) -> Explanation:
    dp = record.track == Track.DEVICE_PLUGIN.value
    unnamed = not names_model(record, model)
    # Of a model a device-plugin record does not name it says nothing: its one tier counts the
    # GPUs of every model its nodes hold, and a quota it closed on is another model's (its blockers
    # name which), so no figure of it is this model's.
    tier = None if unnamed else model_tier(record, model)
    counts = (device_reason_counts(tier, record.outcome == Outcome.ALLOCATED.value, own_devices(record, tier))
              if tier else {})
    reasons = {code: counts[code] for code in ordered_codes(set(counts))}
    # a device-plugin record without tiers (the watcher's: it sees a binding, not a search) counts nothing
    blockers = [no_model_choice()] if unnamed else [] if dp and tier is None else record_blockers(record, tier, model)
    outcome = record_outcome(record)
    skipped = not (record.outcome == Outcome.ALLOCATED.value and record.allocated_model == model)
    absent = None if not dp else "" if unnamed else f"its record does not count its nodes' {DEVICE_PLUGIN_RESOURCE}"
    summary = render_summary(model, skipped, reasons, blockers, outcome, record.policy_version,
                             taint_keys=_taint_keys(tier) if tier else {}, counted=counted_as(record, tier, model),
                             absent=absent)
    return Explanation(pod=f"{record.namespace}/{record.pod}", decision_id=record.decision_id, model=model,
                       skipped=skipped, outcome=outcome, reasons=reasons, blockers=blockers, summary=summary,
                       policy_version=record.policy_version)
