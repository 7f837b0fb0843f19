"""Adaptive fallback: whether a pod holds out for its first choice, and the evidence saying why.

Under ``spec.fallback: {mode: adaptive, maxWait: 10m}`` a pod whose first choice does not fit now
waits for it only while the first choice is expected to fit on one node within ``maxWait`` from
now, and at most until it has waited ``maxWait``: it holds while ``expected < maxWait`` and
``waited < maxWait``, where ``expected`` is ``audit.scheduler.release_estimate.estimate`` for the
tier 0 of the pod's first request with alternatives (its models and count), read from the world
alone. The wait so far does not shorten the hold: a pod that gave up once ``waited + expected``
reached ``maxWait`` gave up just as its release was near, so its fallback was the likeliest to be
regretted. Otherwise its later tiers open at once, as under ``immediate``. With no finished
allocation of the first choice's models yet there is nothing to estimate from and the pod falls
back at once; the same when the estimate is ``maxWait`` or more, or when no release can ever make
the tier fit on one node.

A tier 0 that the tenant's quota closes reopens when devices of it are given back: the tenant's
own, and those of the other tenants with a quota of the model, which lend one more each
(``audit.scheduler.quota.QuotaGap``). ``expected`` is then the time until their running
allocations are expected to have given back enough (``release_estimate.quota_estimate``), or,
when the devices are short on every node as well, the later of that and the devices' estimate
(each is a lower bound of the time until both hold). The evidence says which of the two the pod
waited on (``wait_on``: ``quota`` or ``devices``) and how many devices the tenant alone would have
to give back (``quota_short``). The tenant's pods ahead of it in its line that can only use the
first choice (its device-plugin pods pinned to the model and created earlier; with
``spec.queueing.soleChoiceFirst`` every pod with no other choice, ``audit.scheduler.sole_choice``)
take the reopening quota first, so the pod asks for its count plus theirs (``ahead`` in the
evidence).

Every decision the estimate shaped carries a ``fallback_estimate`` blocker on tier 0 (the choice,
the expected time and what it was read from) and says it in its message. A held pod is looked at
again when a release wakes its queue, after ``recheck_after_ms`` (when the expected release would
be due, or when its wait reaches ``maxWait``, whichever comes first; never sooner than a twentieth
of ``maxWait`` unless the wait left is shorter) and, if that came first, when its wait reaches
``maxWait``: for a pod still holding at its recheck (a best-effort pod is not decided again then;
a held head of a strict queue is) the later tiers open at ``maxWait`` whether or not a release
comes. A wake asks this of every parked pod: what the world says of a first choice is read once
per instant (the world's seq, the time, the policy) for each tenant, size and count ahead, and the
count ahead from the tenant's line read once per seq.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from audit.policy import Policy
from audit.records import Blocker, DecisionRecord, TierBlocker
from audit.scheduler.attempt import model_matcher
from audit.scheduler.claimspec import pod_claim_names
from audit.scheduler.filters import node_filter
from audit.scheduler.quota import check_quota, quota_gap
from audit.scheduler.sole_choice import sole_choice
from audit.scheduler.tiers import RequestTiers, Tier, request_tiers, resolve_claims
from audit.world import World, device_plugin_gpus, obj_key

if TYPE_CHECKING:
    from audit.scheduler.release_estimate import ReleaseEstimate

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
    # devices of the first choice the tenant's pods ahead of it wait for with no other choice
    # (they take the reopening quota first, see ``ahead``), and whether those are every pod with
    # no other choice (``spec.queueing.soleChoiceFirst``) rather than earlier pinned ones
    ahead: int = 0
    sole_choice_first: bool = False

    @property
    def recheck_after_ms(self) -> int:
        expected = self.estimate.expected_ms or 0
        return max(1, min(self.max_wait_ms - self.waited_ms, max(expected, self.max_wait_ms // 20)))


def first_choice(rts: list[RequestTiers]) -> Tier | None:
    """Tier 0 of the first request that has alternatives (the choice a fallback gives up)."""
    for rt in rts:
        if rt.first_available and len(rt.tiers) > 1:
            return rt.tiers[0]
    return None


def adaptive_hold(world: World, policy: Policy, tenant: str, rts: list[RequestTiers], wait_ms: int,
                  time_ms: int, pod_key: str | None = None) -> AdaptiveHold | None:
    """None unless the policy is adaptive and the pod has a first choice."""
    if policy.fallback_mode != MODE:
        return None
    tier = first_choice(rts)
    if tier is None:
        return None
    return hold_for_tier(world, policy, tenant, tier, wait_ms, time_ms, pod_key)


def pod_first_choice(world: World, pod_key: str) -> Tier | None:
    """The pending pod's first choice (``first_choice`` of its claims' tiers), kept while the pod
    object, its claims' objects and what tiers are read from (classes, device signatures) stay the
    same: the loop asks this of every parked pod on every wake."""
    ns, _, name = pod_key.partition("/")
    pod = world.get("Pod", ns, name)
    if pod is None:
        return None
    memo: dict[str, Any] = world.derived.setdefault("first_choice", {})
    versions = (world.signature_version, world.inventory_version)
    hit = memo.get(pod_key)
    # the objects themselves are kept and compared by identity (an id() of a freed claim can be
    # handed to a new one); the same pod object names the same claims
    if hit is not None and hit[0] is pod and hit[1] == versions:
        bucket = world.objects.get("ResourceClaim") or {}
        if all(bucket.get(key) is claim for key, claim in hit[2]):
            found: Tier | None = hit[3]
            return found
    claims = tuple((key, world.objects.get("ResourceClaim", {}).get(key))
                   for key in (obj_key(ns, c) for _, c in pod_claim_names(pod) if c))
    pc = resolve_claims(world, pod)
    tier = first_choice(request_tiers(pc.claims, model_matcher(world))) if pc.claims else None
    if len(memo) > 50_000:
        memo.clear()
    memo[pod_key] = (pod, versions, claims, tier)
    return tier


def forget_pod(world: World, pod_key: str) -> None:
    """Drop the per-pod memos of a pod that left the world: they are bounded by size alone and
    would otherwise keep its objects alive long after it is gone."""
    for name in ("first_choice", "dp_models", "pod_tiers", "sole_choice"):
        memo = world.derived.get(name)
        if memo is not None:
            memo.pop(pod_key, None)


def ahead(world: World, policy: Policy, pod_key: str, models: tuple[str, ...]) -> int:
    """Devices of ``models`` that the tenant's pods ahead of this one in its line wait for with no
    other choice: they take the tenant's quota as it reopens, so the pod's own share of a reopening
    quota comes after theirs. By default those are the tenant's device-plugin pods pinned to
    ``models`` by their node selection and created before the pod (by name on a tie, as the line
    orders them); with ``spec.queueing.soleChoiceFirst`` every pending pod of the tenant whose one
    model is among ``models`` (``audit.scheduler.sole_choice``), as all of them are ahead of a
    flexible pod in its line."""
    created = world.pending.get(pod_key)
    if created is None:
        return 0
    lines: dict[tuple[str, tuple[str, ...]], _Line] = world.derived_at("adaptive_ahead", (world.seq, policy.digest))
    tenant = policy.tenant_for(pod_key.partition("/")[0])
    line = lines.get((tenant, models))
    if line is None:
        find = _no_other_choice if policy.sole_choice_first else _pinned
        line = lines[(tenant, models)] = _Line(find(world, policy, tenant, models))
    if policy.sole_choice_first:
        return line.total - line.devices.get(pod_key, 0)
    return line.before((created, pod_key))


class _Line:
    """A tenant's pods with no other choice, (created, key, devices) in line order, read for every
    pod asking how many devices go to those ahead of it."""

    def __init__(self, pods: list[tuple[int, str, int]]) -> None:
        self.order = [(created, key) for created, key, _ in pods]
        self.devices = {key: n for _, key, n in pods}
        self.upto = [0]  # upto[i]: the devices of the first i pods
        for _, _, n in pods:
            self.upto.append(self.upto[-1] + n)
        self.total = self.upto[-1]

    def before(self, me: tuple[int, str]) -> int:
        """The devices of the pods ahead of ``me`` (created, key) in line."""
        return self.upto[bisect.bisect_left(self.order, me)]


def _live(world: World, policy: Policy, tenant: str) -> list[tuple[int, str, dict[str, Any]]]:
    """The tenant's pending pods that have not failed, in creation order: (created, key, pod)."""
    out = []
    for created, key in world.pending_order.get(tenant, []):
        ns, _, name = key.partition("/")
        pod = world.get("Pod", ns, name) or {}
        if (pod.get("status") or {}).get("phase") == "Failed" or policy.tenant_for(ns) != tenant:
            continue
        out.append((created, key, pod))
    return out


def _pinned(world: World, policy: Policy, tenant: str, models: tuple[str, ...]) -> list[tuple[int, str, int]]:
    """The tenant's pending device-plugin pods whose nodes are all of ``models``: (created, key, GPUs)."""
    return [(created, key, device_plugin_gpus(pod)) for created, key, pod in _live(world, policy, tenant)
            if _dp_models(world, key, pod) == models]


def _no_other_choice(world: World, policy: Policy, tenant: str,
                     models: tuple[str, ...]) -> list[tuple[int, str, int]]:
    """The tenant's pending pods whose one model is among ``models``: (created, key, devices)."""
    out = []
    for created, key, _ in _live(world, policy, tenant):
        model, devices = sole_choice(world, key)
        if devices and model in models:
            out.append((created, key, devices))
    return out


def _dp_models(world: World, key: str, pod: dict[str, Any]) -> tuple[str, ...]:
    """The models of the device-plugin nodes a device-plugin pod may go to (() for other pods)."""
    if not pod or device_plugin_gpus(pod) <= 0:
        return ()
    memo: dict[str, Any] = world.derived.setdefault("dp_models", {})
    hit = memo.get(key)
    if hit is None or hit[0] is not pod or hit[1] != world.inventory_version:
        models = tuple(sorted({world.dp_model.get(n, "unknown") for n in world.dp_capacity
                               if node_filter(world, n, pod) is None}))
        if len(memo) > 50_000:
            memo.clear()
        hit = memo[key] = (pod, world.inventory_version, models)
    found: tuple[str, ...] = hit[2]
    return found


def hold_for_tier(world: World, policy: Policy, tenant: str, tier: Tier, wait_ms: int,
                  time_ms: int, pod_key: str | None = None) -> AdaptiveHold | None:
    """``adaptive_hold`` for a first choice already found; with ``pod_key`` (a pending pod), the
    tenant's pods ahead of it that can only use the first choice take its quota first (``ahead``)."""
    if not tier.models:
        return None
    before = ahead(world, policy, pod_key, tier.models) if pod_key is not None else 0
    est, wait_on, least, quota, devices = _reading(world, policy, tenant, tier.models, tier.count, before, time_ms)
    return AdaptiveHold(_holds(est, wait_ms, policy.fallback_max_wait_ms), tier, est, wait_ms,
                        policy.fallback_max_wait_ms, wait_on, least, quota, devices, before, policy.sole_choice_first)


# What the world says of a first choice at one instant: the estimate the hold reads, what it is
# the time until ("devices" or "quota"), the fewest devices the tenant alone must give back, and
# the quota's and the devices' own estimates when the quota closes the tier.
_Reading = tuple["ReleaseEstimate", str, int, "ReleaseEstimate | None", "ReleaseEstimate | None"]

# world.derived key: readings at one (seq, time, policy), per (tenant, models, count, ahead). On a
# wake every parked pod of a group asks, and pods of one shape ask the same question.
_READINGS = "adaptive_readings"


def _reading(world: World, policy: Policy, tenant: str, models: tuple[str, ...], count: int, before: int,
             time_ms: int) -> _Reading:
    memo: dict[tuple[str, tuple[str, ...], int, int], _Reading] = world.derived_at(
        _READINGS, (world.seq, time_ms, policy.digest))
    key = (tenant, models, count, before)
    found = memo.get(key)
    if found is None:
        found = memo[key] = _read(world, policy, tenant, models, count, before, time_ms)
    return found


def _read(world: World, policy: Policy, tenant: str, models: tuple[str, ...], count: int, before: int,
          time_ms: int) -> _Reading:
    # imported here: the estimates need numpy, which commands that never hold a pod do without
    from audit.scheduler.release_estimate import estimate, quota_estimate

    max_wait = policy.fallback_max_wait_ms
    asked = count + before  # what the tenant's quota must hold for it and the pods ahead
    if any(check_quota(world, policy, tenant, m, asked).fits for m in models):
        return estimate(world, models, count, time_ms, max_wait), "devices", 0, None, None
    gaps = [g for g in (quota_gap(world, policy, tenant, m, asked) for m in models) if g is not None]
    quota = quota_estimate(world, tenant, gaps, models, time_ms, max_wait)
    least = min(g.own_alone for g in gaps)
    if quota.basis != "estimate":  # no wait on the devices can reopen the quota
        return quota, "quota", least, quota, None
    devices = estimate(world, models, count, time_ms, max_wait)
    if devices.basis == "free_now":
        return quota, "quota", least, quota, devices
    if devices.basis != "estimate":
        return devices, "devices", least, quota, devices
    # both short: the later of the two (ties read as quota, the tenant's own to settle)
    if (quota.expected_ms or 0) >= (devices.expected_ms or 0):
        return quota, "quota", least, quota, devices
    return devices, "devices", least, quota, devices


def _holds(est: ReleaseEstimate, wait_ms: int, max_wait_ms: int) -> bool:
    # Holds while the first choice is expected within maxWait from now and the pod has waited less
    # than maxWait; the wait so far is not added to the estimate: a pod that gives up before
    # maxWait because its release was "expected" after it gives up just when that release is
    # near, so its fallback is the likeliest to be regretted.
    expected = est.expected_ms
    return est.basis == "estimate" and expected is not None and 0 < expected < max_wait_ms and wait_ms < max_wait_ms


def hold_threshold(world: World, policy: Policy, pod_key: str, time_ms: int) -> int:
    """The wait below which the pending pod holds out for its first choice now (0: it does not):
    ``maxWait`` while its first choice is expected within ``maxWait``."""
    tier = pod_first_choice(world, pod_key)
    if tier is None or not tier.models:
        return 0
    tenant = policy.tenant_for(pod_key.partition("/")[0])
    before = ahead(world, policy, pod_key, tier.models)
    est = _reading(world, policy, tenant, tier.models, tier.count, before, time_ms)[0]
    return policy.fallback_max_wait_ms if _holds(est, 0, policy.fallback_max_wait_ms) else 0


def evidence(hold: AdaptiveHold) -> TierBlocker:
    est = hold.estimate
    detail: dict[str, Any] = {
        "choice": "wait" if hold.holding else "fallback", "basis": est.basis,
        "expected_free_ms": -1 if est.expected_ms is None else est.expected_ms,
        "waited_ms": hold.waited_ms, "max_wait_ms": hold.max_wait_ms,
        "model": hold.tier.label, "count": hold.tier.count, "history": est.history, "running": est.running,
        "wait_on": hold.wait_on, "ahead": hold.ahead,
    }
    if hold.sole_choice_first:
        detail["ahead_rule"] = "sole_choice_first"
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
    if int(detail.get("ahead", 0)) > 0:
        who = ("pods with no other choice" if detail.get("ahead_rule") == "sole_choice_first"
               else "earlier device-plugin pods")
        what += f" (after {detail['ahead']} for {who})"
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


def hold_wakes_after_ms(record: DecisionRecord, fallback_wait_ms: int) -> tuple[int, ...]:
    """When a pod deferred for its preferred model is looked at again without a release, from the
    decision's time: after its adaptive recheck and, if later, when its wait reaches ``maxWait``
    (a wake asks every parked pod's hold anew, and no hold outlasts ``maxWait``, so its later
    tiers open then at the latest, release or not; both are read from the record, so a window's
    replay restores them); or when its ``wait-for-preferred`` wait runs out."""
    for b in record.blockers:
        if b.code == Blocker.FALLBACK_ESTIMATE.value and "recheck_after_ms" in b.detail:
            recheck = max(1, int(b.detail["recheck_after_ms"]))
            left = int(b.detail["max_wait_ms"]) - int(b.detail["waited_ms"])
            return (recheck, left) if left > recheck else (recheck,)
    return (max(1, fallback_wait_ms - record.wait_ms),)
