"""Adaptive fallback: whether a pod holds out for its first choice, and the evidence saying why.

Under ``spec.fallback: {mode: adaptive, maxWait: 10m}`` a pod whose first choice does not fit now
waits for it only while the first choice is expected to fit on one node before ``maxWait`` has
passed since the pod was created: it holds while ``waited + expected < maxWait``, where
``expected`` is ``audit.scheduler.release_estimate.estimate`` for the tier 0 of the pod's first
request with alternatives (its models and count), read from the world alone. Otherwise its later
tiers open at once, as under ``immediate``. With no finished allocation of the first choice's
models yet there is nothing to estimate from and the pod falls back at once; the same when the
estimate is ``maxWait`` or more, or when no release can ever make the tier fit on one node.

A tier 0 that the tenant's quota closes reopens when devices of it are given back: the tenant's
own, and those of the other tenants with a quota of the model, which lend one more each
(``audit.scheduler.quota.QuotaGap``). ``expected`` is then the time until their running
allocations are expected to have given back enough (``release_estimate.quota_estimate``), or,
when the devices are short on every node as well, the later of that and the devices' estimate
(each is a lower bound of the time until both hold). The evidence says which of the two the pod
waited on (``wait_on``: ``quota`` or ``devices``) and how many devices the tenant alone would have
to give back (``quota_short``).

Every decision the estimate shaped carries a ``fallback_estimate`` blocker on tier 0 (the choice,
the expected time and what it was read from) and says it in its message. A held pod is looked at
again when a release wakes its queue, and at the latest after ``recheck_after_ms``: when the
expected release would be due, or when the wait left would run out if the estimate stayed the
same, whichever comes first (never sooner than a twentieth of ``maxWait`` unless the wait left
is shorter).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from audit.policy import Policy
from audit.records import Blocker, DecisionRecord, TierBlocker
from audit.scheduler.quota import check_quota, quota_gap
from audit.scheduler.release_estimate import ReleaseEstimate, estimate, quota_estimate
from audit.scheduler.tiers import RequestTiers, Tier
from audit.world import World

MODE = "adaptive"


@dataclass(frozen=True)
class AdaptiveHold:
    holding: bool
    tier: Tier
    estimate: ReleaseEstimate
    waited_ms: int
    max_wait_ms: int
    wait_on: str = "devices"  # what ``estimate`` is the time until: "devices" or "quota"
    # when the tenant's quota closes the tier: what it lacks (the fewest devices of one model),
    # and the two estimates ``estimate`` is the later of
    quota_short: int = 0
    quota: ReleaseEstimate | None = None
    devices: ReleaseEstimate | None = None

    @property
    def recheck_after_ms(self) -> int:
        expected = self.estimate.expected_ms or 0
        slack = self.max_wait_ms - self.waited_ms - expected
        return max(1, min(slack, max(expected, self.max_wait_ms // 20)))


def first_choice(rts: list[RequestTiers]) -> Tier | None:
    """Tier 0 of the first request that has alternatives (the choice a fallback gives up)."""
    for rt in rts:
        if rt.first_available and len(rt.tiers) > 1:
            return rt.tiers[0]
    return None


def adaptive_hold(world: World, policy: Policy, tenant: str, rts: list[RequestTiers], wait_ms: int,
                  time_ms: int) -> AdaptiveHold | None:
    """None unless the policy is adaptive and the pod has a first choice."""
    if policy.fallback_mode != MODE:
        return None
    tier = first_choice(rts)
    if tier is None:
        return None
    return hold_for_tier(world, policy, tenant, tier, wait_ms, time_ms)


def hold_for_tier(world: World, policy: Policy, tenant: str, tier: Tier, wait_ms: int,
                  time_ms: int) -> AdaptiveHold | None:
    """``adaptive_hold`` for a first choice already found."""
    if not tier.models:
        return None
    max_wait = policy.fallback_max_wait_ms
    if any(check_quota(world, policy, tenant, m, tier.count).fits for m in tier.models):
        return _hold(tier, estimate(world, tier.models, tier.count, time_ms, max_wait), wait_ms, max_wait)
    gaps = [g for g in (quota_gap(world, policy, tenant, m, tier.count) for m in tier.models) if g is not None]
    quota = quota_estimate(world, tenant, gaps, tier.models, time_ms, max_wait)
    least = min(g.own_alone for g in gaps)
    if quota.basis != "estimate":  # no wait on the devices can reopen the quota
        return _hold(tier, quota, wait_ms, max_wait, "quota", least, quota)
    devices = estimate(world, tier.models, tier.count, time_ms, max_wait)
    if devices.basis == "free_now":
        return _hold(tier, quota, wait_ms, max_wait, "quota", least, quota, devices)
    if devices.basis != "estimate":
        return _hold(tier, devices, wait_ms, max_wait, "devices", least, quota, devices)
    # both short: the later of the two (ties read as quota, the tenant's own to settle)
    later = "quota" if (quota.expected_ms or 0) >= (devices.expected_ms or 0) else "devices"
    return _hold(tier, quota if later == "quota" else devices, wait_ms, max_wait, later, least, quota, devices)


def _hold(tier: Tier, est: ReleaseEstimate, wait_ms: int, max_wait_ms: int, wait_on: str = "devices",
          quota_short: int = 0, quota: ReleaseEstimate | None = None,
          devices: ReleaseEstimate | None = None) -> AdaptiveHold:
    expected = est.expected_ms
    holding = (est.basis == "estimate" and expected is not None and expected > 0
               and wait_ms + expected < max_wait_ms)
    return AdaptiveHold(holding, tier, est, wait_ms, max_wait_ms, wait_on, quota_short, quota, devices)


def evidence(hold: AdaptiveHold) -> TierBlocker:
    est = hold.estimate
    detail: dict[str, Any] = {
        "choice": "wait" if hold.holding else "fallback", "basis": est.basis,
        "expected_free_ms": -1 if est.expected_ms is None else est.expected_ms,
        "waited_ms": hold.waited_ms, "max_wait_ms": hold.max_wait_ms,
        "model": hold.tier.label, "count": hold.tier.count, "history": est.history, "running": est.running,
        "wait_on": hold.wait_on,
    }
    if hold.quota is not None:
        detail["quota_short"] = hold.quota_short
        detail["quota_free_ms"] = _ms(hold.quota)
    if hold.devices is not None:
        detail["devices_free_ms"] = _ms(hold.devices)
    if hold.holding:
        detail["recheck_after_ms"] = hold.recheck_after_ms
    return TierBlocker(Blocker.FALLBACK_ESTIMATE.value, hold.tier.index, detail)


def _ms(est: ReleaseEstimate) -> int:
    return -1 if est.expected_ms is None else est.expected_ms


def duration_text(ms: int) -> str:
    """``3m12s``, ``1h05m``, ``45s``, ``0s``: whole seconds, as a person reads a wait."""
    s = max(0, ms) // 1000
    h, rest = divmod(s, 3600)
    m, sec = divmod(rest, 60)
    if h:
        return f"{h}h{m:02d}m"
    if m:
        return f"{m}m{sec:02d}s" if sec else f"{m}m"
    return f"{sec}s"


def estimate_phrase(detail: Mapping[str, Any]) -> str:
    """The choice in words from a ``fallback_estimate`` detail (the engine's message and ``why``)."""
    model = detail.get("model", "?")
    max_wait = duration_text(int(detail.get("max_wait_ms", 0)))
    waited = int(detail.get("waited_ms", 0))
    expected = int(detail.get("expected_free_ms", -1))
    basis = detail.get("basis")
    quota = "quota_free_ms" in detail
    what = f"{model} quota expected to reopen" if detail.get("wait_on") == "quota" else "expected free"
    if detail.get("choice") == "wait":
        extra = f" (+{duration_text(waited)} waited)" if waited >= 1000 else ""
        return f"waiting for {model}: {what} in {duration_text(expected)}{_other(detail)}{extra} < maxWait {max_wait}"
    if basis == "no_history":
        return f"fell back from {model}: no finished {model} allocation yet to estimate a release from"
    if basis == "never" and quota and detail.get("wait_on") == "quota":
        return (f"fell back from {model}: the tenant's quota lacks {detail.get('quota_short', '?')} {model} and "
                "no release of its own or of a tenant that lends is expected to reopen it")
    if basis == "never":
        return f"fell back from {model}: no release expected to free {detail.get('count', '?')} on one node"
    if basis == "at_least":
        return f"fell back from {model}: {what} in more than {duration_text(expected)} >= maxWait {max_wait}"
    if basis == "free_now":
        return f"fell back from {model}: the free {model} devices do not fit the claim"
    extra = f" after {duration_text(waited)} waited" if waited >= 1000 else ""
    return (f"fell back from {model}: {what} in {duration_text(expected)}{_other(detail)}{extra}, "
            f"not within maxWait {max_wait}")


def _other(detail: Mapping[str, Any]) -> str:
    """When the quota closed the first choice too, the estimate the pod did not wait on."""
    if "quota_free_ms" not in detail:
        return ""
    if detail.get("wait_on") == "devices":
        return f" (its quota reopens in {duration_text(int(detail['quota_free_ms']))})"
    devices = int(detail.get("devices_free_ms", -1))
    if devices <= 0:
        return " (devices free now)"
    return f" (devices free in {duration_text(devices)})"


def has_recheck(record: DecisionRecord) -> bool:
    """Whether the record holds the pod for its first choice until a recheck (quota or devices)."""
    return any(b.code == Blocker.FALLBACK_ESTIMATE.value and "recheck_after_ms" in b.detail for b in record.blockers)


def hold_wake_after_ms(record: DecisionRecord, fallback_wait_ms: int) -> int:
    """When a pod deferred for its preferred model is looked at again without a release: after its
    adaptive recheck, or when its ``wait-for-preferred`` wait runs out."""
    for b in record.blockers:
        if b.code == Blocker.FALLBACK_ESTIMATE.value and "recheck_after_ms" in b.detail:
            return max(1, int(b.detail["recheck_after_ms"]))
    return max(1, fallback_wait_ms - record.wait_ms)
