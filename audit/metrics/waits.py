"""Waits: how long pods waited for their devices, per tenant.

*wait* = first bind − pod creation, for every pod first bound inside the window (both tracks,
whatever it got). Pods that were not bound are never mixed in: those still pending at the window
end and those that failed (or were deleted) unbound inside it are counted apart, with the longest
wait so far among them. Percentiles are nearest rank (``audit.metrics.ranks``), and null for a row
with no pod started, as a rate over no pods is: 0 s would read as pods served at once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from audit.metrics.definition import Definition
from audit.metrics.lifecycle import PodLife
from audit.metrics.ranks import nearest_rank
from audit.metrics.window import Window

_POP = "pods of both tracks first bound in the window"
_SECONDS = "seconds (null when no pod started)"
DEFINITIONS = (
    Definition("pods_started", "waits", "pod", "pods", _POP, "count of pods whose first bind falls in the window",
               "audit.metrics.waits.tenant_waits"),
    Definition("wait_p50_s", "waits", "pod", _SECONDS, _POP,
               "nearest-rank 50th percentile (the ⌈0.5·n⌉-th smallest) of first bind − creation",
               "audit.metrics.waits.tenant_waits"),
    Definition("wait_p95_s", "waits", "pod", _SECONDS, _POP, "nearest-rank 95th percentile of first bind − creation",
               "audit.metrics.waits.tenant_waits"),
    Definition("wait_p99_s", "waits", "pod", _SECONDS, _POP, "nearest-rank 99th percentile of first bind − creation",
               "audit.metrics.waits.tenant_waits"),
    Definition("pending_at_end", "waits", "pod", "pods", "pods created before the window end, not bound and not "
               "failed by then", "count", "audit.metrics.waits.tenant_waits"),
    # /v1/stats/overview gives it beside its decision rows under its dashboard's name
    Definition("pending_now", "waits", "pod", "pods (null without pod figures: several clusters and none named, or "
               "no world events)", "pods created before the window end, not bound and not "
               "failed by then", "count: the tenant's `pending_at_end` (at the window end, not at the time asked)",
               "audit.metrics.waits.tenant_waits"),
    Definition("failed", "waits", "pod", "pods", "pods that failed or were deleted in the window without ever "
               "being bound", "count", "audit.metrics.waits.tenant_waits"),
    Definition("longest_wait_s", "waits", "pod", "seconds", "pods pending at the window end and pods failed "
               "unbound in it", "the longest wait so far: window end (or failure) − creation; 0 when none",
               "audit.metrics.waits.tenant_waits"),
)


@dataclass
class WaitStats:
    waits_ms: Sequence[int]  # ascending: the waits of the pods started
    pending_at_end: int = 0
    failed: int = 0
    longest_wait_ms: int = 0

    @property
    def pods_started(self) -> int:
        return len(self.waits_ms)

    def p(self, q: float) -> float | None:
        """The ``q`` percentile in ms; None when no pod started."""
        return nearest_rank(self.waits_ms, q) if self.pods_started else None


def pending_at(life: PodLife, ms: int) -> bool:
    """Created before ``ms`` and, at ``ms``, neither bound nor failed."""
    return life.created_ms < ms and life.pending_until(ms) >= ms


def tenant_waits(pods: Iterable[PodLife], window: Window,
                 group: Callable[[str], str] = lambda t: t) -> dict[str, WaitStats]:
    """Per group of tenants (``group`` maps a tenant to its row, e.g. other tenants to "(others)")."""
    out: dict[str, WaitStats] = {}
    started: dict[str, list[int]] = {}
    for life in pods:
        row = group(life.tenant)
        if window.holds(life.bound_ms):
            assert life.bound_ms is not None
            started.setdefault(row, []).append(life.bound_ms - life.created_ms)
        elif pending_at(life, window.until_ms):
            s = out.setdefault(row, WaitStats([]))
            s.pending_at_end += 1
            s.longest_wait_ms = max(s.longest_wait_ms, window.until_ms - life.created_ms)
        elif life.bound_ms is None and window.holds(life.failed_ms):
            assert life.failed_ms is not None
            s = out.setdefault(row, WaitStats([]))
            s.failed += 1
            s.longest_wait_ms = max(s.longest_wait_ms, life.failed_ms - life.created_ms)
    for row, waits in started.items():
        out.setdefault(row, WaitStats([])).waits_ms = sorted(waits)
    return out
