"""Rows per hour and per model: the wait and regret figures over sub-windows and subpopulations.

They are not new metrics: each row is the figures of ``fairness_report``'s tenant rows (waits,
pending, failed, starving) or of ``fallback_report`` (first choice, fallbacks, regret), computed
by the same functions over a 1-hour window from the window start, or over the pods of one model,
for the whole window. Rows per hour pool the tenants (a tenant caller's rows count only its own
pods); a pod counts in the hour it was first bound, pending pods at the end of each hour, failed
pods in the hour they failed. Rows per model for waits go by the models a pod got ('|'-joined;
``(none)`` for pods that got no device, pending or failed), so every pod of the window is in
exactly one row; rows per model for regret go by the preferred model. The API lists them with
``by=hour`` or ``by=model``: ``/v1/stats/fairness`` the wait rows, ``/v1/stats/fallback`` the
regret rows, as ``by_hour`` or ``by_model`` beside the window's figures.
"""

from __future__ import annotations

from typing import Any

from audit.metrics.columnar import ColumnarPods
from audit.metrics.definition import Definition
from audit.metrics.fairness import hours
from audit.metrics.lifecycle import Lifecycle
from audit.metrics.report import RowPods, end_policy_ms, pod_passes, wait_figures
from audit.metrics.waits import WaitStats
from audit.metrics.window import Window
from audit.timestamps import format_time_ms

DEFINITIONS = (
    Definition("hour", "breakdown", "pod", "the hour's start, RFC 3339 UTC",
               "1-hour windows from the window start (the last may be shorter)",
               "the wait or regret figures with the hour as their window", "audit.metrics.breakdown.wait_breakdown"),
    Definition("model", "breakdown", "pod", "device models '|'-joined, or (none)",
               "the pods of the window, by the models they got", "the wait figures of those pods over the window",
               "audit.metrics.breakdown.wait_breakdown"),
    Definition("preferred", "breakdown", "pod", "device model",
               "the pods with alternatives first bound in the window, by preferred model",
               "the first-choice, fallback and regret figures of those pods", "audit.metrics.breakdown.regret_breakdown"),
)


ALL = "(all)"
NO_MODEL = "(none)"  # pods that got no device: pending at the window end, failed, or bound without devices
BREAKDOWNS = ("hour", "model")


def _pooled(tenant: str) -> str:
    return ALL  # every tenant of the pods in one row


def _wait_row(pods: RowPods | ColumnarPods, window: Window, timeout_ms: int) -> dict[str, Any]:
    return wait_figures(pods.waits(window, _pooled).get(ALL, WaitStats([])),
                        pods.starving(window, timeout_ms, _pooled).get(ALL, 0))


def _regret_row(pods: RowPods | ColumnarPods, window: Window) -> dict[str, Any]:
    s = pods.fallback(window)
    return {"pods_with_preference": s.pods_with_preference, "first_choice_rate": s.first_choice_rate,
            "fallbacks": s.fallbacks, "regretted": s.regretted, "regret_rate": s.regret_rate}


def _scoped(life: Lifecycle, window: Window, scope: str | None) -> RowPods | ColumnarPods:
    pods = pod_passes(life, window)
    return pods if scope is None else pods.where("tenant", scope)


def _hours(window: Window) -> list[tuple[str, Window]]:
    return [(format_time_ms(h.since_ms), h) for h in hours(window)]


def wait_breakdown(life: Lifecycle, window: Window, by: str, scope: str | None = None) -> list[dict[str, Any]]:
    """The wait figures of ``fairness_report``'s tenant rows, pooled over the tenants (only
    ``scope``'s pods when given), per 1-hour window from the window start (``hour``: its start)
    or per model the pods got over the whole window (``model``)."""
    pods = _scoped(life, window, scope)
    timeout = life.policy_at(end_policy_ms(window)).starvation_ms
    if by == "hour":
        return [{"hour": start, **_wait_row(pods, hour, timeout)} for start, hour in _hours(window)]
    rows = []
    for model in sorted(pods.values("allocated")):
        row = _wait_row(pods.where("allocated", model), window, timeout)
        if row["pods_started"] or row["pending_at_end"] or row["failed"]:
            rows.append({"model": model or NO_MODEL, **row})
    return rows


def regret_breakdown(life: Lifecycle, window: Window, by: str, scope: str | None = None) -> list[dict[str, Any]]:
    """The first-choice, fallback and regret figures of ``fallback_report`` (only ``scope``'s pods
    when given) per 1-hour window from the window start (``hour``: its start; a pod counts in the
    hour it was first bound) or per preferred model over the whole window (``preferred``)."""
    pods = _scoped(life, window, scope)
    if by == "hour":
        return [{"hour": start, **_regret_row(pods, hour)} for start, hour in _hours(window)]
    rows = []
    for model in sorted(pods.values("preferred")):
        row = _regret_row(pods.where("preferred", model), window)
        if row["pods_with_preference"]:
            rows.append({"preferred": model, **row})
    return rows
