"""Fairness: Jain's index over what tenants got against what they were entitled to.

Jain's index J(x) = (Σxᵢ)² / (n·Σxᵢ²) lies in [1/n, 1] (Jain, Chiu, Hawe, DEC-TR-301, 1984); 1
when every xᵢ is equal (all zero included). It is applied to normalised allocations, never to
raw device counts:

* *whole window*: xᵢ = h100_eq_hoursᵢ / entitlement_h100_eq_hoursᵢ over every tenant with a
  positive entitlement (``audit.metrics.usage``).
* *under contention*: the window is cut into 1-hour windows from its start (the last one may be
  shorter); a tenant is *backlogged* in one when it had at least one pod pending for ≥ 30 min of
  it (the union of its pods' pending intervals). Jain over xᵢ = H100-eq-hoursᵢ used in that hour /
  ∫wᵢ dt (the policy's weight over the hour) among backlogged tenants, averaged over the hours
  with ≥ 2 backlogged tenants; the count of such hours is reported with it (null when there is
  none). Idle tenants do not dilute it: only tenants that wanted more are compared.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from audit.metrics.definition import Definition
from audit.metrics.lifecycle import Lifecycle, PodLife
from audit.metrics.usage import HOUR_MS, eq_hours, weight_hours
from audit.metrics.window import Window

CONTENTION_WINDOW_MS = HOUR_MS
BACKLOG_MS = 30 * 60_000

DEFINITIONS = (
    Definition("jain_whole", "fairness", "tenant", "index in [1/n, 1]",
               "tenants with a positive entitlement over the window",
               "Jain's index of h100_eq_hoursᵢ / entitlement_h100_eq_hoursᵢ", "audit.metrics.fairness.jain_whole"),
    Definition("jain_contention", "fairness", "tenant × hour", "index in [1/n, 1], or null",
               "1-hour windows from the window start with ≥ 2 tenants backlogged (≥ 1 pod pending for ≥ 30 min)",
               "mean over those hours of Jain's index of H100-eq-hoursᵢ / ∫wᵢ dt among the backlogged tenants",
               "audit.metrics.fairness.jain_contention"),
    Definition("contention_windows", "fairness", "hour", "windows", "as jain_contention",
               "count of hours with ≥ 2 backlogged tenants", "audit.metrics.fairness.jain_contention"),
)


def jain(values: Iterable[float]) -> float:
    xs = list(values)
    sq = sum(x * x for x in xs)
    if not xs or sq == 0:
        return 1.0
    s = sum(xs)
    return (s * s) / (len(xs) * sq)


def jain_whole(used_eq: Mapping[str, float], entitled: Mapping[str, float]) -> float:
    return jain(used_eq.get(t, 0.0) / e for t, e in sorted(entitled.items()) if e > 0)


def _merged(intervals: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for a, b in sorted(intervals):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def pending_intervals(pods: Iterable[PodLife], window: Window) -> dict[str, list[tuple[int, int]]]:
    """Per tenant, the union of its pods' pending intervals [created, bound | failed | window end)."""
    raw: dict[str, list[tuple[int, int]]] = {}
    for p in pods:
        end = p.pending_until(window.until_ms)
        if end > p.created_ms and end > window.since_ms and p.created_ms < window.until_ms:
            raw.setdefault(p.tenant, []).append((p.created_ms, end))
    return {t: _merged(iv) for t, iv in raw.items()}


def hours(window: Window) -> list[Window]:
    out = []
    a = window.since_ms
    while a < window.until_ms:
        b = min(a + CONTENTION_WINDOW_MS, window.until_ms)
        out.append(Window(a, b))
        a = b
    return out


def hourly_use(pods: Iterable[PodLife], window: Window) -> dict[tuple[int, str], float]:
    """H100-eq-hours per (hour index, tenant): each pod visits only the hours it held devices in
    (summed exactly, as ``audit.metrics.usage`` sums)."""
    ms: dict[tuple[int, str], dict[float, int]] = {}
    for p in pods:
        if p.allocated_ms is None or not p.devices:
            continue
        start = max(p.allocated_ms, window.since_ms)
        end = window.until_ms if p.released_ms is None else min(p.released_ms, window.until_ms)
        if end <= start:
            continue
        first = (start - window.since_ms) // CONTENTION_WINDOW_MS
        last = (end - 1 - window.since_ms) // CONTENTION_WINDOW_MS
        for i in range(first, last + 1):
            a = window.since_ms + i * CONTENTION_WINDOW_MS
            held = min(end, a + CONTENTION_WINDOW_MS) - max(start, a)
            per = ms.setdefault((i, p.tenant), {})
            per[p.h100_eq] = per.get(p.h100_eq, 0) + held
    return {k: eq_hours(v) for k, v in ms.items()}


def jain_contention(life: Lifecycle, window: Window, pending: dict[str, list[tuple[int, int]]] | None = None,
                    use: Callable[[], dict[tuple[int, str], float]] | None = None) -> tuple[float | None, int]:
    """(mean Jain over contended hours or None, how many hours were contended). ``pending`` and
    ``use`` give ``pending_intervals`` and ``hourly_use`` of the pods when computed elsewhere."""
    if pending is None:
        pending = pending_intervals(life.pods, window)
    values: list[float] = []
    used: dict[tuple[int, str], float] | None = None
    for i, hour in enumerate(hours(window)):
        backlogged = sorted(t for t, iv in pending.items()
                            if sum(hour.overlap_ms(a, b) for a, b in iv) >= BACKLOG_MS)
        if len(backlogged) < 2:
            continue
        if used is None:
            used = use() if use is not None else hourly_use(life.pods, window)
        xs = []
        for t in backlogged:
            w = weight_hours(life, hour, t)
            xs.append(used.get((i, t), 0.0) / w if w > 0 else 0.0)
        values.append(jain(xs))
    if not values:
        return None, 0
    return sum(values) / len(values), len(values)
