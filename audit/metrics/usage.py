"""Usage and entitlement: what each tenant held, and what its weight entitled it to, over a window.

*usage* is device-hours from allocation to release, clipped to the window; in H100-equivalent
hours each device weighs its own model's ``h100Equivalent`` (policy in force at allocation), so a
pod holding an H100 and an A100 counts 1 + 0.5 (default table). Both tracks count.

*entitlement* integrates, over the window, the cluster's capacity in H100-equivalents (every
device on a live node, healthy or not) times wᵢ/Σw, with the weights of the policy in force at
each moment. Σw runs over the tenants the policies in force name plus every tenant with a pod
alive in the window (an unnamed tenant weighs 1).

Sums are exact, so a figure does not depend on the order in which pods are counted:
device-milliseconds are summed as integers, and so are the milliseconds held per H100-equivalent
weight, each weight's total then converted to hours with ``math.fsum``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from audit.metrics.definition import Definition
from audit.metrics.lifecycle import Lifecycle, PodLife
from audit.metrics.window import Window

HOUR_MS = 3_600_000
_POP = "pods of both tracks holding devices at some moment of the window"
DEFINITIONS = (
    Definition("device_hours", "usage", "device × hour", "device-hours", _POP,
               "Σ devices × (min(release, window end) − max(allocation, window start))",
               "audit.metrics.usage.tenant_usage"),
    Definition("h100_eq_hours", "usage", "device × hour", "H100-eq-hours", _POP,
               "as device_hours, each device weighted by its model's h100Equivalent (policy at allocation)",
               "audit.metrics.usage.tenant_usage"),
    Definition("entitlement_h100_eq_hours", "usage", "tenant", "H100-eq-hours",
               "tenants named by a policy in force in the window, and tenants with a pod alive in it",
               "∫ capacity_H100eq(t) · wᵢ(t) / Σⱼ wⱼ(t) dt over the window, weights of the policy in force at t",
               "audit.metrics.usage.entitlements"),
)


@dataclass
class Usage:
    device_hours: float = 0.0
    h100_eq_hours: float = 0.0


def eq_hours(ms_per_weight: Mapping[float, int]) -> float:
    """H100-eq-hours of milliseconds held per pod weight (a pod's Σ of its devices' H100-eq)."""
    return math.fsum(w * ms / HOUR_MS for w, ms in ms_per_weight.items())


def tenant_usage(pods: Iterable[PodLife], window: Window) -> dict[str, Usage]:
    device_ms: dict[str, int] = {}
    eq_ms: dict[str, dict[float, int]] = {}
    for life in pods:
        if life.allocated_ms is None or not life.devices:
            continue
        held = window.overlap_ms(life.allocated_ms, life.released_ms)
        if held <= 0:
            continue
        device_ms[life.tenant] = device_ms.get(life.tenant, 0) + life.devices * held
        per = eq_ms.setdefault(life.tenant, {})
        per[life.h100_eq] = per.get(life.h100_eq, 0) + held
    return {t: Usage(ms / HOUR_MS, eq_hours(eq_ms[t])) for t, ms in device_ms.items()}


def alive_in(life: PodLife, window: Window) -> bool:
    """The pod existed at some moment of the window."""
    ends = [t for t in (life.failed_ms, life.released_ms) if t is not None]
    end = min(ends) if ends else None
    return life.created_ms < window.until_ms and (end is None or end > window.since_ms)


def window_tenants(life: Lifecycle, window: Window, alive: Iterable[str] | None = None) -> list[str]:
    """Tenants with a pod alive in the window (``alive``, when already known), and tenants a
    policy in force in it names."""
    names = set(alive) if alive is not None else {p.tenant for p in life.pods if alive_in(p, window)}
    for a in _breakpoints(life, window)[:-1] or [window.since_ms]:
        names.update(t.name for t in life.policy_at(a).tenants)
    return sorted(names)


def _breakpoints(life: Lifecycle, window: Window) -> list[int]:
    points = {window.since_ms, window.until_ms}
    points.update(t for t, _ in life.policies if window.since_ms < t < window.until_ms)
    points.update(t for t, _ in life.capacity if window.since_ms < t < window.until_ms)
    return sorted(points)


def capacity_at(life: Lifecycle, ms: int) -> float:
    found = 0.0
    for start, cap in life.capacity:
        if start > ms:
            break
        found = cap
    return found


def entitlements(life: Lifecycle, window: Window, tenants: list[str] | None = None) -> dict[str, float]:
    """H100-eq-hours each tenant was entitled to over the window."""
    names = window_tenants(life, window) if tenants is None else tenants
    out = {t: 0.0 for t in names}
    points = _breakpoints(life, window)
    for a, b in zip(points, points[1:], strict=False):
        policy = life.policy_at(a)
        cap = capacity_at(life, a)
        total = sum(policy.weight(t) for t in names)
        if total <= 0 or cap <= 0:
            continue
        for t in names:
            out[t] += cap * (b - a) / HOUR_MS * policy.weight(t) / total
    return out


def weight_hours(life: Lifecycle, window: Window, tenant: str) -> float:
    """∫ wᵢ(t) dt over the window, in weight × hours (weights of the policy in force at t)."""
    points = _breakpoints(life, window)
    return sum(life.policy_at(a).weight(tenant) * (b - a) / HOUR_MS for a, b in zip(points, points[1:], strict=False))
