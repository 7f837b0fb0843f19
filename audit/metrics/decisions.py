"""Record-level helpers: figures over decision records rather than pods.

No surface shows these: every figure users see is defined in a family module (``docs/metrics.md``),
a pod figure over a pod lifecycle (the what-if comparison of ``audit.replay.whatif`` included) or
a count over the stored decision records (``audit.metrics.cohorts``, ``audit.metrics.decision_rows``). They
are kept for the simulator's tests, which check runs on their records. They are:

* **Usage intervals** — one per allocation: tenant, model, device count, start (the allocated
  record's time) and end (the claim's or device-plugin pod's delete event, else the window end).
* **Share vs entitlement** — per tenant, device-hours and H100-equivalent hours used in a window;
  entitlement is the tenant's weighted fair share of the capacity among tenants active in the
  window (weights from the policy); the normalised share is used / entitlement.
* **Jain's index** — (Σx)² / (n·Σx²) over the normalised shares (Jain, Chiu, Hawe 1984).
* **Wait percentiles** — per tenant p50/p95/p99 (nearest rank) of ``wait_ms`` at allocation.
* **First-choice hit rate** — allocated DRA decisions with ``tier_index == 0`` / allocated DRA.
* **Fallback rate by preferred → allocated model.**
* **Fallback regret** — fallbacks where the preferred model had enough free devices, cluster-wide,
  at some moment within Δ (default 10 min) after the decision (a cluster-level approximation:
  per-node fit is not checked).
* **Starvation** — pods that waited more than 10× their tenant's median wait (or, still pending,
  longer than the policy's starvation timeout); flagged when their latest record gives no reason
  (no blocker, no retry class).

Pure: inputs in, numbers out.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from audit.events import WorldEvent
from audit.metrics.fairness import jain
from audit.metrics.ranks import nearest_rank
from audit.policy import Policy
from audit.records import DecisionRecord, Outcome, Track

DEFAULT_REGRET_WINDOW_MS = 10 * 60_000
STARVATION_FACTOR = 10.0


@dataclass(frozen=True)
class UsageInterval:
    tenant: str
    model: str
    devices: int
    start_ms: int
    end_ms: int


@dataclass(frozen=True)
class TenantShare:
    tenant: str
    device_hours: float
    eq_hours: float
    entitlement_hours: float
    normalized: float  # device-hours / entitlement


@dataclass(frozen=True)
class Starvation:
    pod: str
    tenant: str
    wait_ms: int
    tenant_median_ms: float
    explained: bool


def _ms(text: str) -> int:
    from audit.timestamps import parse_time_ms

    return parse_time_ms(text)


def usage_intervals(records: Iterable[DecisionRecord], events: Iterable[WorldEvent], end_ms: int) -> list[UsageInterval]:
    """Allocation intervals from allocated records and the delete events that end them."""
    deletes: dict[tuple[str, str, str], list[int]] = {}
    for ev in events:
        if ev.type == "delete" and ev.object_kind in ("ResourceClaim", "Pod"):
            deletes.setdefault((ev.object_kind, ev.namespace, ev.name), []).append(_ms(ev.time))
    out: list[UsageInterval] = []
    for r in records:
        if r.outcome != Outcome.ALLOCATED.value:
            continue
        start = _ms(r.time)
        key = (("Pod", r.namespace, r.pod) if r.track == Track.DEVICE_PLUGIN.value
               else ("ResourceClaim", r.namespace, r.claims[0] if r.claims else ""))
        times = sorted(deletes.get(key, []))
        i = bisect.bisect_left(times, start)
        end = min(times[i], end_ms) if i < len(times) else end_ms
        if r.track == Track.DEVICE_PLUGIN.value:
            count = _dp_count(r)
            out.append(UsageInterval(r.tenant, r.allocated_model, count, start, end))
            continue
        per_model: dict[str, int] = {}
        for d in r.devices:
            per_model[d.model] = per_model.get(d.model, 0) + 1
        for model, n in sorted(per_model.items()):
            out.append(UsageInterval(r.tenant, model, n, start, end))
    return out


def _dp_count(r: DecisionRecord) -> int:
    for t in r.tiers:
        if "selected" in t.reasons:
            return t.reasons["selected"]
    return 0


def tenant_shares(intervals: Iterable[UsageInterval], policy: Policy, capacity: int, window: tuple[int, int],
                  tenants: Iterable[str] = ()) -> dict[str, TenantShare]:
    """Used device-hours vs weighted fair share of ``capacity`` devices over ``window``."""
    t0, t1 = window
    hours = max(0, t1 - t0) / 3_600_000
    used: dict[str, float] = {t: 0.0 for t in tenants}
    eq: dict[str, float] = {t: 0.0 for t in tenants}
    for iv in intervals:
        overlap = max(0, min(iv.end_ms, t1) - max(iv.start_ms, t0)) / 3_600_000
        if overlap <= 0:
            continue
        used[iv.tenant] = used.get(iv.tenant, 0.0) + iv.devices * overlap
        eq[iv.tenant] = eq.get(iv.tenant, 0.0) + iv.devices * overlap * policy.h100_equivalent(iv.model)
    total_weight = sum(policy.weight(t) for t in used) or 1.0
    out: dict[str, TenantShare] = {}
    for t in sorted(used):
        ent = capacity * hours * policy.weight(t) / total_weight
        out[t] = TenantShare(t, used[t], eq[t], ent, used[t] / ent if ent > 0 else 0.0)
    return out


def jain_index(values: Iterable[float]) -> float:
    """Jain's index as ``audit.metrics.fairness.jain`` defines it (one implementation)."""
    return jain(values)


def percentile(sorted_values: list[float], q: float) -> float:
    """Nearest-rank percentile of an ascending list, ``q`` in 0..100 (``audit.metrics.ranks``)."""
    return nearest_rank(sorted_values, q / 100)


def wait_percentiles(records: Iterable[DecisionRecord]) -> dict[str, tuple[float, float, float]]:
    waits: dict[str, list[float]] = {}
    for r in records:
        if r.outcome == Outcome.ALLOCATED.value:
            waits.setdefault(r.tenant, []).append(float(r.wait_ms))
    out = {}
    for t, xs in sorted(waits.items()):
        xs.sort()
        out[t] = (percentile(xs, 50), percentile(xs, 95), percentile(xs, 99))
    return out


def first_choice_hit_rate(records: Iterable[DecisionRecord]) -> float:
    allocated = [r for r in records if r.outcome == Outcome.ALLOCATED.value and r.track == Track.DRA.value]
    return sum(1 for r in allocated if r.tier_index == 0) / len(allocated) if allocated else 0.0


def fallback_rates(records: Iterable[DecisionRecord]) -> dict[tuple[str, str], float]:
    """Share of allocated DRA decisions per (preferred model, allocated model)."""
    counts: dict[tuple[str, str], int] = {}
    total = 0
    for r in records:
        if r.outcome == Outcome.ALLOCATED.value and r.track == Track.DRA.value:
            total += 1
            key = (r.preferred_model, r.allocated_model)
            counts[key] = counts.get(key, 0) + 1
    return {k: v / total for k, v in sorted(counts.items())} if total else {}


def fallback_regret(records: Iterable[DecisionRecord], intervals: Iterable[UsageInterval],
                    capacity: Mapping[str, int], window_ms: int = DEFAULT_REGRET_WINDOW_MS) -> tuple[int, int]:
    """(regretted fallbacks, all fallbacks): preferred model free enough within ``window_ms`` after."""
    changes: dict[str, list[tuple[int, int]]] = {}
    for iv in intervals:
        changes.setdefault(iv.model, []).extend([(iv.start_ms, iv.devices), (iv.end_ms, -iv.devices)])
    timelines: dict[str, tuple[list[int], list[int]]] = {}
    for model, ch in changes.items():
        ch.sort()
        times: list[int] = []
        in_use: list[int] = []
        level = 0
        for t, d in ch:
            level += d
            if times and times[-1] == t:
                in_use[-1] = level
            else:
                times.append(t)
                in_use.append(level)
        timelines[model] = (times, in_use)
    regret = fallbacks = 0
    for r in records:
        if r.outcome != Outcome.ALLOCATED.value or not r.fallback or not r.preferred_model:
            continue
        fallbacks += 1
        need = len(r.devices)
        model = r.preferred_model
        cap = capacity.get(model, 0)
        times, in_use = timelines.get(model, ([], []))
        t = _ms(r.time)
        i = bisect.bisect_right(times, t)
        while i < len(times) and times[i] <= t + window_ms:
            if cap - in_use[i] >= need:
                regret += 1
                break
            i += 1
        else:
            if not times and cap >= need:
                regret += 1
    return regret, fallbacks


def starvation(records: Iterable[DecisionRecord], now_ms: int, factor: float = STARVATION_FACTOR,
               max_pending_ms: int | None = None) -> list[Starvation]:
    """Pods that waited > ``factor`` × their tenant's median wait, or > ``max_pending_ms`` (the
    policy's ``timeouts.starvation``) when given; ``explained`` tells whether a reason was recorded."""
    latest: dict[str, DecisionRecord] = {}
    for r in records:
        key = f"{r.namespace}/{r.pod}"
        prev = latest.get(key)
        if prev is None or (r.seq, r.attempt) >= (prev.seq, prev.attempt):
            latest[key] = r
    waits: dict[str, list[float]] = {}
    for r in latest.values():
        if r.outcome == Outcome.ALLOCATED.value:
            waits.setdefault(r.tenant, []).append(float(r.wait_ms))
    medians = {t: percentile(sorted(xs), 50) for t, xs in waits.items()}
    out: list[Starvation] = []
    for key, r in sorted(latest.items()):
        wait = r.wait_ms if r.outcome == Outcome.ALLOCATED.value else r.wait_ms + max(0, now_ms - _ms(r.time))
        median = medians.get(r.tenant, 0.0)
        too_long = max_pending_ms is not None and r.outcome != Outcome.ALLOCATED.value and wait > max_pending_ms
        if (median > 0 and wait > factor * median) or too_long:
            explained = bool(r.blockers or r.retry_class or r.outcome == Outcome.ALLOCATED.value)
            out.append(Starvation(key, r.tenant, wait, median, explained))
    return out
