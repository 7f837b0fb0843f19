"""Wording for the decision explorer: how a decision is labelled and how a replay verdict reads.

Kept apart from the page so the phrasing of a match or mismatch can be checked directly.
"""

from __future__ import annotations

from typing import Any

from audit.records import DecisionRecord, Track, label_models
from dashboards.client import ReplayReport


def label_of(record: DecisionRecord) -> str:
    """A unique, readable option text for one decision; the cluster is named, as a pod's name is
    unique within its cluster only."""
    got = record.allocated_model or record.outcome
    return (f"{record.time} · {record.cluster}: {record.namespace}/{record.pod} · attempt {record.attempt} · {got} · "
            f"{record.decision_id[:8]}")


def why_models(record: DecisionRecord) -> list[str]:
    """The device models one can ask "why was it skipped?" about, in preference order.

    A tier that accepts several models is labelled ``A100|H100|L40S``; the API explains one
    model at a time (a label with ``|`` is refused with 400), so such a label offers each of its
    models instead; a device-plugin tier's ``any`` offers none, and neither does a device-plugin
    record's preference, which names the extended resource it asks for (``nvidia.com/gpu``), not a
    model."""
    preference = record.preference if record.track != Track.DEVICE_PLUGIN else []
    labels = [*preference, *(t.model for t in record.tiers), record.allocated_model]
    return list(dict.fromkeys(m for label in labels for m in label_models(label)))


def has_device_reasons(record: DecisionRecord) -> bool:
    """Whether the API can answer per device for the record: a device-plugin pod's GPUs are a count
    on a node, with no device identities, and the API refuses the per-device answer for it."""
    return record.track != Track.DEVICE_PLUGIN


def detail_text(detail: Any) -> str:
    """A device verdict's structured detail as one table cell: ``key=value`` pairs in key order."""
    if detail is None or detail == "" or detail == {}:
        return ""
    if isinstance(detail, dict):
        return ", ".join(f"{k}={detail[k]}" for k in sorted(detail))
    return str(detail)


def next_step_text(would_get: dict[str, Any]) -> str:
    """What a pod left without devices would get if scheduled now, as the API computed it."""
    at = f" (the world at seq {would_get['seq']})" if isinstance(would_get.get("seq"), int) and would_get["seq"] >= 0 else ""
    result = would_get.get("result")
    if result == "allocated":
        names = ", ".join(str(d).rsplit("/", 1)[-1] for d in would_get.get("devices") or [])
        tier = would_get.get("tier")
        tier_text = f" (tier {tier})" if isinstance(tier, int) and tier >= 0 else ""
        return (f"If scheduled now{at}: {would_get.get('model') or 'devices'} {names} on node "
                f"{would_get.get('node')}{tier_text}.")
    if result == "unschedulable":
        return f"If scheduled now{at}: nothing fits; every tier's blocker is below."
    return f"What the pod would get now is unknown{at}: {would_get.get('error') or 'no answer'}."


def next_step_blockers(would_get: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per blocker of a tier that stops the pod now (a tier closed by several models' quotas
    has one per model): its request, model, blocker and device reasons."""
    return [{"tier": b.get("tier"), "request": b.get("request", ""), "model": b.get("model") or "–",
             "blocker": b.get("code", ""), "devices": detail_text(b.get("reasons") or {})}
            for b in would_get.get("blockers") or []]


def _run_for(report: ReplayReport, decision_id: str) -> dict[str, Any] | None:
    return next((r for r in report.runs if r.get("decision_id") == decision_id), None)


def describe_replay(report: ReplayReport, decision_id: str) -> tuple[str, bool]:
    """One sentence on whether replaying ``decision_id`` matched; the flag is True for a match."""
    run = _run_for(report, decision_id)
    if run is None:
        if report.body.get("job") or report.body.get("job_id"):
            return f"Replay queued as job {report.body.get('job') or report.body.get('job_id')}.", True
        return f"The replay answer did not mention decision {decision_id}.", False
    if run.get("match") is True:
        return f"Match: re-executing {decision_id[:8]} reproduced the recorded output digest.", True
    cause = run.get("cause") or "unknown cause"
    diff = run.get("diff")
    if isinstance(diff, list):
        # the first differences say enough; the full list is in the replay run itself
        diff = "; ".join(str(d) for d in diff[:3]) + (f"; … {len(diff) - 3} more" if len(diff) > 3 else "")
    return f"Mismatch ({cause}) for {decision_id[:8]}" + (f": {diff}" if diff else "."), False
