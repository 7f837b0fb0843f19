"""The finished figures every surface shows: the API's stats bodies, the ``simulate`` summary and
the ``demo`` log all call these, so one pod lifecycle and one window give one set of numbers.

A tenant caller (``scope``) sees its own row and every other tenant folded into one ``(others)``
row, computed from the pooled pods (so its percentiles are percentiles, not averages); the
window-level indexes (Jain) are the cluster's.

The per-pod passes run on the lifecycle's columns when it has them (``audit.metrics.columnar``,
held equal to the reference functions by property tests), else on the ``PodLife`` rows with the
reference functions themselves.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from audit.metrics.columnar import ColumnarPods
from audit.metrics.fairness import hourly_use, jain_contention, jain_whole, pending_intervals
from audit.metrics.fallback import FallbackStats, fallback_stats
from audit.metrics.health import device_health
from audit.metrics.lifecycle import Lifecycle, PodLife
from audit.metrics.starving import starving_pods
from audit.metrics.usage import Usage, alive_in, entitlements, tenant_usage, window_tenants
from audit.metrics.waits import WaitStats, tenant_waits
from audit.metrics.window import Window

OTHERS = "(others)"


def _grouping(scope: str | None) -> Callable[[str], str]:
    if scope is None:
        return lambda t: t
    return lambda t: t if t == scope else OTHERS


def end_policy_ms(window: Window) -> int:
    return max(window.since_ms, window.until_ms - 1)


class RowPods:
    """The per-pod passes by the reference functions, one ``PodLife`` at a time."""

    def __init__(self, pods: list[PodLife]) -> None:
        self.pods = pods

    def where(self, field: str, value: str) -> RowPods:
        return RowPods([p for p in self.pods if getattr(p, field) == value])

    def values(self, field: str) -> set[str]:
        return {getattr(p, field) for p in self.pods}

    def usage(self, window: Window) -> dict[str, Usage]:
        return tenant_usage(self.pods, window)

    def alive_tenants(self, window: Window) -> set[str]:
        return {p.tenant for p in self.pods if alive_in(p, window)}

    def waits(self, window: Window, group: Callable[[str], str] = lambda t: t) -> dict[str, WaitStats]:
        return tenant_waits(self.pods, window, group)

    def starving(self, window: Window, timeout_ms: int, group: Callable[[str], str] = lambda t: t) -> dict[str, int]:
        return starving_pods(self.pods, window, timeout_ms, group)

    def pending(self, window: Window) -> dict[str, list[tuple[int, int]]]:
        return pending_intervals(self.pods, window)

    def hourly_use(self, window: Window) -> dict[tuple[int, str], float]:
        return hourly_use(self.pods, window)

    def fallback(self, window: Window, tenant: str | None = None) -> FallbackStats:
        return fallback_stats(self.pods, window, (lambda p: True) if tenant is None else (lambda p: p.tenant == tenant))


class PodPasses(Protocol):
    """The per-pod passes the reports run; any implementation (the reference's rows, the columns,
    the store's SQL) must return exactly what the reference functions return."""

    def usage(self, window: Window) -> dict[str, Usage]: ...

    def alive_tenants(self, window: Window) -> set[str]: ...

    def waits(self, window: Window, group: Callable[[str], str] = ...) -> dict[str, WaitStats]: ...

    def starving(self, window: Window, timeout_ms: int, group: Callable[[str], str] = ...) -> dict[str, int]: ...

    def pending(self, window: Window) -> dict[str, list[tuple[int, int]]]: ...

    def hourly_use(self, window: Window) -> dict[tuple[int, str], float]: ...

    def fallback(self, window: Window, tenant: str | None = None) -> FallbackStats: ...


def pod_passes(life: Lifecycle, window: Window) -> RowPods | ColumnarPods:
    """The columnar passes when the lifecycle carries its columns, else the reference's."""
    if life.columns is not None and life.columns.n == len(life.pods):
        return ColumnarPods(life.columns)
    return RowPods(life.touching(window.since_ms, window.until_ms).pods)


def _seconds(ms: float | None) -> float | None:
    return None if ms is None else ms / 1000


def wait_figures(w: WaitStats, starving: int) -> dict[str, Any]:
    """A row's wait figures: ``fairness_report``'s per tenant, ``wait_breakdown``'s per hour or model."""
    return {"pods_started": w.pods_started, "wait_p50_s": _seconds(w.p(0.50)), "wait_p95_s": _seconds(w.p(0.95)),
            "wait_p99_s": _seconds(w.p(0.99)), "pending_at_end": w.pending_at_end, "failed": w.failed,
            "starving_pods": starving, "longest_wait_s": w.longest_wait_ms / 1000}


def fairness_report(life: Lifecycle, window: Window, scope: str | None = None,
                    pods: PodPasses | None = None) -> dict[str, Any]:
    """``pods``: the per-pod passes to run (default: on ``life``'s pods; the store's SQL passes
    come with a ``life`` that holds only the policy and capacity timelines)."""
    if pods is None:
        pods = pod_passes(life, window)
    group = _grouping(scope)
    tenants = window_tenants(life, window, pods.alive_tenants(window))
    entitled = entitlements(life, window, tenants)
    used = pods.usage(window)
    policy = life.policy_at(end_policy_ms(window))
    waits = pods.waits(window, group)
    starving = pods.starving(window, policy.starvation_ms, group)
    contention, windows = jain_contention(life, window, pods.pending(window), lambda: pods.hourly_use(window))
    rows: dict[str, dict[str, Any]] = {}
    for t in tenants:
        row = rows.setdefault(group(t), {"tenant": group(t), "weight": 0.0, "device_hours": 0.0, "h100_eq_hours": 0.0,
                                         "entitlement_h100_eq_hours": 0.0})
        u = used.get(t, Usage())
        row["weight"] += policy.weight(t)
        row["device_hours"] += u.device_hours
        row["h100_eq_hours"] += u.h100_eq_hours
        row["entitlement_h100_eq_hours"] += entitled.get(t, 0.0)
    for name, row in rows.items():
        row.update(wait_figures(waits.get(name, WaitStats([])), starving.get(name, 0)))
    return {
        "jain_whole": jain_whole({t: used.get(t, Usage()).h100_eq_hours for t in tenants}, entitled),
        "jain_contention": contention,
        "contention_windows": windows,
        "tenants": [rows[k] for k in sorted(rows, key=lambda k: (k == OTHERS, k))],
    }


def fallback_report(life: Lifecycle, window: Window, scope: str | None = None,
                    pods: PodPasses | None = None) -> dict[str, Any]:
    s = (pods if pods is not None else pod_passes(life, window)).fallback(window, scope)
    policy = life.policy_at(end_policy_ms(window))
    return {
        "pods_with_preference": s.pods_with_preference,
        "first_choice_rate": s.first_choice_rate,
        "fallbacks": s.fallbacks,
        "regretted": s.regretted,
        "regret_rate": s.regret_rate,
        "regret_window_s": policy.regret_window_ms / 1000,
        "paths": [{"preferred": p, "allocated": a, "pods": n}
                  for (p, a), n in sorted(s.paths.items(), key=lambda kv: (-kv[1], kv[0]))],
    }


def health_report(life: Lifecycle, window: Window) -> dict[str, Any]:
    h = device_health(life.unhealthy, window)
    return {"unhealthy_devices": h.unhealthy_devices, "unhealthy_device_hours": h.device_hours,
            "models": [{"model": m, "unhealthy_devices": n, "unhealthy_device_hours": hrs}
                       for m, (n, hrs) in h.by_model.items()]}
