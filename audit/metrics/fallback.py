"""First choice, fallback and regret: did DRA pods get the device they preferred?

The population is DRA pods first bound in the window whose claims offer alternatives (some
request lists ≥ 2 ``firstAvailable`` subrequests): only they can fall back. Device-plugin pods
and DRA pods without alternatives are outside every figure here. A pod is *first choice* when
every request got its first subrequest, a *fallback* when some request got a later one, whatever
the other requests got (a pod with two requests can fall back on its second only). A fallback is
*regretted* as ``audit.metrics.regret`` decides. Paths count pods per (preferred model, models
got), first-choice pods included.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from audit.metrics.definition import Definition
from audit.metrics.lifecycle import PodLife
from audit.metrics.window import Window

_POP = "DRA pods first bound in the window whose claims offer ≥ 2 alternatives"
DEFINITIONS = (
    Definition("pods_with_preference", "fallback", "pod", "pods", _POP, "count",
               "audit.metrics.fallback.fallback_stats"),
    Definition("first_choice_rate", "fallback", "pod", "ratio (null when no pod)", _POP,
               "pods whose every request got its first subrequest / pods_with_preference",
               "audit.metrics.fallback.fallback_stats"),
    Definition("fallbacks", "fallback", "pod", "pods", _POP,
               "count of pods where some request got a later subrequest, each pod once (the rows' "
               "`fallback_decisions` counts decision records)", "audit.metrics.fallback.fallback_stats"),
    Definition("regretted", "fallback", "pod", "pods", "the fallbacks",
               "count of fallbacks whose first alternatives alone were allocatable on one node by the allocator, "
               "within the tenant's quota, at the end of some instant within fallback.regretWindow after the bind",
               "audit.metrics.fallback.fallback_stats"),
    Definition("regret_rate", "fallback", "pod", "ratio (null when no fallback)", "the fallbacks",
               "regretted / fallbacks", "audit.metrics.fallback.fallback_stats"),
    Definition("paths", "fallback", "pod", "pods", _POP,
               "count per (preferred model, models got '|'-joined)", "audit.metrics.fallback.fallback_stats"),
)


@dataclass
class FallbackStats:
    pods_with_preference: int = 0
    first_choice: int = 0
    fallbacks: int = 0
    regretted: int = 0
    paths: dict[tuple[str, str], int] = field(default_factory=dict)

    @property
    def first_choice_rate(self) -> float | None:
        return self.first_choice / self.pods_with_preference if self.pods_with_preference else None

    @property
    def regret_rate(self) -> float | None:
        return self.regretted / self.fallbacks if self.fallbacks else None


def in_population(life: PodLife, window: Window) -> bool:
    return life.track == "dra" and life.alternatives and window.holds(life.bound_ms)


def fallback_stats(pods: Iterable[PodLife], window: Window,
                   keep: Callable[[PodLife], bool] = lambda p: True) -> FallbackStats:
    s = FallbackStats()
    for life in pods:
        if not in_population(life, window) or not keep(life):
            continue
        s.pods_with_preference += 1
        if life.first_choice:
            s.first_choice += 1
        if life.fallback:
            s.fallbacks += 1
            if life.regretted:
                s.regretted += 1
        path = (life.preferred, life.allocated)
        s.paths[path] = s.paths.get(path, 0) + 1
    return s
