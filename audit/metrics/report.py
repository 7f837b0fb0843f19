"""The finished figures every surface shows: the API's stats bodies, the ``simulate`` summary and
the ``demo`` log all call these, so one pod lifecycle and one window give one set of numbers.

A tenant caller (``scope``) sees its own row and every other tenant folded into one ``(others)``
row, computed from the pooled pods (so its percentiles are percentiles, not averages); the
window-level indexes (Jain) are the cluster's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from audit.metrics.fairness import jain_contention, jain_whole
from audit.metrics.fallback import fallback_stats
from audit.metrics.health import device_health
from audit.metrics.lifecycle import Lifecycle
from audit.metrics.starving import starving_pods
from audit.metrics.usage import Usage, entitlements, tenant_usage, window_tenants
from audit.metrics.waits import WaitStats, tenant_waits
from audit.metrics.window import Window

OTHERS = "(others)"


def _grouping(scope: str | None) -> Callable[[str], str]:
    if scope is None:
        return lambda t: t
    return lambda t: t if t == scope else OTHERS


def _end_policy_ms(window: Window) -> int:
    return max(window.since_ms, window.until_ms - 1)


def fairness_report(life: Lifecycle, window: Window, scope: str | None = None) -> dict[str, Any]:
    life = life.touching(window.since_ms, window.until_ms)
    group = _grouping(scope)
    tenants = window_tenants(life, window)
    entitled = entitlements(life, window, tenants)
    used = tenant_usage(life.pods, window)
    policy = life.policy_at(_end_policy_ms(window))
    waits = tenant_waits(life.pods, window, group)
    starving = starving_pods(life.pods, window, policy.starvation_ms, group)
    contention, windows = jain_contention(life, window)
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
        w = waits.get(name, WaitStats([]))
        row.update({"pods_started": w.pods_started, "wait_p50_s": w.p(0.50) / 1000, "wait_p95_s": w.p(0.95) / 1000,
                    "wait_p99_s": w.p(0.99) / 1000, "pending_at_end": w.pending_at_end, "failed": w.failed,
                    "starving_pods": starving.get(name, 0), "longest_wait_s": w.longest_wait_ms / 1000})
    return {
        "jain_whole": jain_whole({t: used.get(t, Usage()).h100_eq_hours for t in tenants}, entitled),
        "jain_contention": contention,
        "contention_windows": windows,
        "tenants": [rows[k] for k in sorted(rows, key=lambda k: (k == OTHERS, k))],
    }


def fallback_report(life: Lifecycle, window: Window, scope: str | None = None) -> dict[str, Any]:
    life = life.touching(window.since_ms, window.until_ms)
    s = fallback_stats(life.pods, window, (lambda p: True) if scope is None else (lambda p: p.tenant == scope))
    policy = life.policy_at(_end_policy_ms(window))
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
