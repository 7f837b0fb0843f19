"""ClaimTrail's metrics: one written definition and one pure reference function per metric.

The package is the specification. ``lifecycle`` folds the world event log into one row per pod;
each family module (``waits``, ``starvation``, ``usage``, ``fairness``, ``fallback`` with
``regret``, ``health``) states its metrics — unit of counting, unit, population, rule — as
``Definition`` values beside the function that computes them; ``report`` assembles the finished
figures every surface shows; ``catalog`` renders ``docs/metrics.md`` from the definitions.
"""

from audit.metrics.lifecycle import Lifecycle, LifecycleFold, PodLife, fold_lifecycle
from audit.metrics.report import fairness_report, fallback_report, health_report
from audit.metrics.window import Window

__all__ = ["Lifecycle", "LifecycleFold", "PodLife", "Window", "fairness_report", "fallback_report", "fold_lifecycle",
           "health_report"]
