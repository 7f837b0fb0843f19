"""ClaimTrail's metrics: one written definition and one pure reference function per metric.

The package is the specification. ``lifecycle`` folds the world event log into one row per pod;
each family module (``waits``, ``starvation``, ``usage``, ``fairness``, ``fallback`` with
``regret``, ``health``) states its metrics — unit of counting, unit, population, rule — as
``Definition`` values beside the function that computes them; ``report`` assembles the finished
figures every surface shows; ``catalog`` renders ``docs/metrics.md`` from the definitions.
``decisions`` keeps record-level helpers no surface shows (see its docstring).
"""

from audit.metrics.decisions import (
    DEFAULT_REGRET_WINDOW_MS,
    STARVATION_FACTOR,
    Starvation,
    TenantShare,
    UsageInterval,
    fallback_rates,
    fallback_regret,
    first_choice_hit_rate,
    jain_index,
    percentile,
    starvation,
    tenant_shares,
    usage_intervals,
    wait_percentiles,
)
from audit.metrics.lifecycle import Lifecycle, LifecycleFold, PodLife, fold_lifecycle
from audit.metrics.report import fairness_report, fallback_report, health_report
from audit.metrics.window import Window

__all__ = [
    "DEFAULT_REGRET_WINDOW_MS", "STARVATION_FACTOR", "Lifecycle", "LifecycleFold", "PodLife", "Starvation",
    "TenantShare", "UsageInterval", "Window", "fairness_report", "fallback_rates", "fallback_regret",
    "fallback_report", "first_choice_hit_rate", "fold_lifecycle", "health_report", "jain_index", "percentile",
    "starvation", "tenant_shares", "usage_intervals", "wait_percentiles",
]
