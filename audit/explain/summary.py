"""One human sentence from an explanation's codes, counts and details.

Example: "H100 skipped: of 64 H100, 40 in use, 8 unhealthy (taint gpu.nvidia.com/unhealthy),
16 on nodes excluded by node affinity; tenant quota 8/8 H100 used. Allocated A100 gpu-3 on
node a100-07 (tier 1) under policy v7."
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from audit.explain.nodes import NODE_CAUSE_TEXT
from audit.explain.reasons import REASON_TEXT, ordered_codes
from audit.records import Blocker, Reason
from audit.scheduler.adaptive import estimate_phrase


def _reason_phrases(reasons: Mapping[str, int], node_causes: Mapping[str, int],
                    taint_keys: Mapping[str, str]) -> list[str]:
    phrases = []
    for code in ordered_codes({c for c, n in reasons.items() if n}):
        n = reasons[code]
        if code == Reason.NODE_FILTERED.value and node_causes:
            for cause in sorted(node_causes, key=lambda c: (-node_causes[c], c)):
                phrases.append(f"{node_causes[cause]} {NODE_CAUSE_TEXT.get(cause, 'on nodes the pod cannot use')}")
            continue
        text = f"{n} {REASON_TEXT.get(code, code.replace('_', ' '))}"
        if code in taint_keys and taint_keys[code]:
            # Taint reasons carry the taint key; constraint_unsatisfied its constraint and attribute.
            prefix = "" if code == Reason.CONSTRAINT_UNSATISFIED.value else "taint "
            text += f" ({prefix}{taint_keys[code]})"
        phrases.append(text)
    return phrases


def _blocker_phrase(model: str, blocker: Mapping[str, Any]) -> str:
    """Detail keys follow the decision engine's blockers (audit.scheduler): quota ``used``/
    ``nominal``/``limit`` (and ``over_quota`` when several models' quotas closed the tier), insufficient
    ``count``/``fallback_mode``; fair share ``tenant_share``/
    ``other_share``/``other_tenant``; not requested ``preference``; the adaptive fallback's
    estimate (``audit.scheduler.adaptive``); reservations their own."""
    code = blocker.get("code")
    if code == Blocker.QUOTA_EXHAUSTED.value:
        nominal = blocker.get("nominal", "?")
        text = f"tenant quota {blocker.get('used', '?')}/{nominal} {model} used"
        limit = blocker.get("limit")
        beyond = [f"borrowing up to {limit}"] if limit is not None and limit != nominal else []
        # within its borrowing limit, what closed it is what other tenants leave to lend
        # (audit.scheduler.quota)
        lendable, used, requested = blocker.get("lendable"), blocker.get("used"), blocker.get("requested")
        if lendable is not None and not (isinstance(limit, int) and isinstance(used, int) and isinstance(requested, int)
                                         and used + requested > limit):
            beyond.append(f"{lendable} lendable by other tenants")
        said = ", ".join(beyond)
        # a tier closed on several models' quotas gives each its part of the tier's
        # quota_exhausted count (audit.scheduler.quota.closed_details)
        if blocker.get("over_quota") is not None:
            said = "; ".join(part for part in (said, f"{blocker['over_quota']} of the GPUs over quota are {model}") if part)
        return text + (f" ({said})" if said else "")
    if code == Blocker.FAIR_SHARE_DEFERRED.value:
        text = f"deferred for fair share (tenant share {blocker.get('tenant_share', '?')}"
        if blocker.get("other_tenant"):
            text += f" vs {blocker.get('other_share', '?')} for {blocker['other_tenant']}"
        return text + ")"
    if code == Blocker.INSUFFICIENT_ON_NODE.value:
        if blocker.get("fallback_mode"):
            return f"waiting for {model} before falling back (policy {blocker['fallback_mode']})"
        text = f"no node had {blocker.get('count', '?')} usable {model} together"
        if blocker.get("best_node"):
            text += f" (at most {blocker.get('best', 0)} on node {blocker['best_node']})"
        return text
    if code == Blocker.FALLBACK_ESTIMATE.value:
        return estimate_phrase(blocker)
    if code == Blocker.NOT_REQUESTED.value:
        pref = ", ".join(str(m) for m in blocker.get("preference") or []) or "none"
        return f"{model} is not in the pod's preference list ({pref})"
    if code == Blocker.NO_MODEL_CHOICE.value:
        text = f"a device-plugin pod does not choose a model (it is counted as {blocker.get('request', '?')})"
        if "model_nodes" not in blocker:  # from the record alone, which does not know its nodes' models
            return f"{text}, and its record does not say which nodes hold {model} or what their GPUs were doing"
        return f"no device-plugin node holds {model}, and {text}" if blocker["model_nodes"] == 0 else text
    if code == Blocker.RECLAIM.value:
        if blocker.get("basis") == "fair_share":
            return (f"reclaiming {blocker.get('requested_eq', '?')} H100-eq of {model} within its fair share "
                    f"({blocker.get('held_eq', '?')} of {blocker.get('entitlement_eq', '?')} H100-eq held) on node "
                    f"{blocker.get('node', '?')}")
        return (f"reclaiming {blocker.get('requested', '?')} {model} within nominal quota "
                f"({blocker.get('used', '?')}/{blocker.get('nominal', '?')} used) on node {blocker.get('node', '?')}")
    if code == Blocker.RECLAIM_VICTIM.value:
        if blocker.get("cause") == "above_fair_share":
            owed = (f"its tenant holds {blocker.get('held_eq', '?')} H100-eq, above its fair share "
                    f"{blocker.get('entitlement_eq', '?')}")
        else:
            owed = f"its tenant uses {blocker.get('used', '?')} of nominal {blocker.get('nominal', '?')}"
        return (f"preempting pod {blocker.get('pod', '?')} of tenant {blocker.get('tenant', '?')} "
                f"({blocker.get('count', '?')} {blocker.get('model', model)}, running "
                f"{int(blocker.get('runtime_ms') or 0) // 60_000} min; {owed})")
    return _reservation_phrase(model, blocker)


def _reservation_phrase(model: str, blocker: Mapping[str, Any]) -> str:
    """Detail keys follow ``audit.scheduler.reservations``."""
    code, node = blocker.get("code"), blocker.get("node", "?")
    if code == Blocker.RESERVATION_HELD.value:
        return f"{blocker.get('held', '?')} {model} on node {node} reserved for pod {blocker.get('pod', '?')}"
    if code == Blocker.RESERVATION_MADE.value:
        return (f"reserved node {node} for {blocker.get('count', '?')} {blocker.get('model', model)} "
                f"({blocker.get('missing', '?')} still in use)")
    if code == Blocker.RESERVATION_WAITING.value:
        return (f"holding {blocker.get('held', '?')} of {blocker.get('count', '?')} {blocker.get('model', model)} "
                f"reserved on node {node}")
    if code == Blocker.RESERVATION_RELEASED.value:
        where = ("used" if blocker.get("on_reserved_node") else
                 "released (the pod failed)" if blocker.get("cause") == "failed" else "released (placed elsewhere)")
        return f"reservation on node {node} {where}"
    if code == Blocker.RESERVATION_UNAVAILABLE.value:
        return f"no reservation possible ({blocker.get('cause', '?')})"
    return str(code)


def _outcome_sentence(outcome: Mapping[str, Any], policy_version: str) -> str:
    under = f" under policy {policy_version}" if policy_version else ""
    if outcome.get("result") == "allocated":
        words = ["Allocated", str(outcome.get("model") or "devices")]
        names = ", ".join(str(d).rsplit("/", 1)[-1] for d in outcome.get("devices") or [])
        if names:
            words.append(names)
        if outcome.get("node"):
            words.append(f"on node {outcome['node']}")
        tier = outcome.get("tier")
        if isinstance(tier, int) and tier >= 0:
            words.append(f"(tier {tier})")
        return " ".join(words) + f"{under}."
    result = str(outcome.get("result") or "pending")
    if result == "preempted":
        return (f"Pod not allocated yet: preempted pods on node {outcome.get('node') or '?'} to reclaim "
                f"{outcome.get('reclaimed') or 'quota'}{under}.")
    retry = f", retry class {outcome['retry_class']}" if outcome.get("retry_class") else ""
    return f"Pod not allocated ({result}{retry}){under}."


def would_get_sentence(would_get: Mapping[str, Any]) -> str:
    """"If scheduled now: A100 gpu-3 on node a100-07 (tier 1)." or the blocker of every tier."""
    if would_get.get("result") == "allocated":
        words = [str(would_get.get("model") or "devices")]
        names = ", ".join(str(d).rsplit("/", 1)[-1] for d in would_get.get("devices") or [])
        if names:
            words.append(names)
        words.append(f"on node {would_get.get('node')}")
        tier = would_get.get("tier")
        if isinstance(tier, int) and tier >= 0:
            words.append(f"(tier {tier})")
        text = "If scheduled now: " + " ".join(words)
        if would_get.get("fallback_mode"):
            text += f" (once the policy's {would_get['fallback_mode']} fallback allows it)"
        return text + "."
    parts = []
    for b in would_get.get("blockers") or []:
        tier_model = str(b.get("model") or "")
        if b.get("fallback_mode"):
            why = f"no fallback under the policy's {b['fallback_mode']} fallback mode"
        elif b.get("code") == Blocker.QUOTA_EXHAUSTED.value:
            # a tier closed on several models' quotas has a blocker per model, said one by one
            why = _blocker_phrase(tier_model, b)
        else:
            counts = b.get("reasons") or {}
            why = ", ".join(_reason_phrases(counts, b.get("node_causes") or {}, {})) if counts else (
                f"no {tier_model} visible to the claim" if tier_model else "no device it asks for")
            best, count = int(b.get("best") or 0), int(b.get("count") or 1)
            if 0 < best < count:
                why += f"; at most {best} on node {b.get('best_node')}, {count} needed"
            elif best >= count:
                why += "; the rest of the pod does not fit with them"
        parts.append(f"tier {b.get('tier')} {tier_model or b.get('request', '')}: {why}")
    return "If scheduled now: nothing fits (" + "; ".join(parts) + ")."


def render_summary(model: str, skipped: bool, reasons: Mapping[str, int], blockers: Sequence[Mapping[str, Any]],
                   outcome: Mapping[str, Any], policy_version: str, node_causes: Mapping[str, int] | None = None,
                   taint_keys: Mapping[str, str] | None = None, would_get: Mapping[str, Any] | None = None,
                   verdicts: Mapping[str, int] | None = None, counted: str = "", absent: str | None = None) -> str:
    """``verdicts``: for a tier the policy closed (``reasons`` is its closing code alone), what the
    devices' own checks found, said after it. ``counted``: the devices ``reasons`` counts when
    they are not the model's alone (a tier of several models, ``A100|H100|L40S``). ``absent``:
    what to say when nothing is counted instead of "no M visible to the pod's claims" (a
    device-plugin pod has no claims; empty: nothing, its blockers say it)."""
    total = sum(reasons.values())
    if skipped:
        head = f"{model} skipped"
    else:
        head = f"{model} chosen" if outcome.get("result") == "allocated" else f"{model} not yet allocated"
    if total:
        phrases = _reason_phrases(reasons, node_causes or {}, taint_keys or {})
        if verdicts:
            phrases = [f"{phrases[0]} ({', '.join(_reason_phrases(verdicts, node_causes or {}, taint_keys or {}))})",
                       *phrases[1:]]
        body = f"of {total} {counted or model}, {', '.join(phrases)}"
    else:
        body = f"no {model} visible to the pod's claims" if absent is None else absent
    blocker_text = "; ".join(_blocker_phrase(model, b) for b in blockers)
    first = f"{head}: " + "; ".join(part for part in (body, blocker_text) if part) + "."
    text = f"{first} {_outcome_sentence(outcome, policy_version)}"
    return f"{text} {would_get_sentence(would_get)}" if would_get else text
