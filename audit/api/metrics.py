"""Prometheus text exposition for the API process (format 0.0.4, written by hand).

Request counters and latency histograms are kept per route template (not per raw path, so
ids never become label values); store counters are read from the store on each scrape.
"""

from __future__ import annotations

import math
import threading
from collections import defaultdict
from collections.abc import Iterable, Mapping

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


def _labels(pairs: Iterable[tuple[str, str]]) -> str:
    body = ",".join(f'{k}="{_escape(v)}"' for k, v in pairs)
    return "{" + body + "}" if body else ""


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _num(value: float) -> str:
    if isinstance(value, float) and math.isinf(value):
        return "+Inf"
    return repr(float(value)) if isinstance(value, float) else str(value)


class RequestMetrics:
    """Thread-safe request counts and latency histograms."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._count: dict[tuple[str, str, str], int] = defaultdict(int)
        self._buckets: dict[tuple[str, str], list[int]] = {}
        self._sum: dict[tuple[str, str], float] = defaultdict(float)

    def observe(self, method: str, route: str, status: int, seconds: float) -> None:
        with self._lock:
            self._count[(method, route, str(status))] += 1
            key = (method, route)
            buckets = self._buckets.setdefault(key, [0] * (len(LATENCY_BUCKETS) + 1))
            for i, bound in enumerate(LATENCY_BUCKETS):
                if seconds <= bound:
                    buckets[i] += 1
            buckets[-1] += 1
            self._sum[key] += seconds

    def render(self) -> list[str]:
        with self._lock:
            lines = ["# HELP claimtrail_http_requests_total HTTP requests by method, route and status.",
                     "# TYPE claimtrail_http_requests_total counter"]
            for (method, route, status), n in sorted(self._count.items()):
                lines.append(f"claimtrail_http_requests_total"
                             f"{_labels([('method', method), ('route', route), ('status', status)])} {n}")
            lines += ["# HELP claimtrail_http_request_duration_seconds HTTP request latency.",
                      "# TYPE claimtrail_http_request_duration_seconds histogram"]
            for (method, route), buckets in sorted(self._buckets.items()):
                base = [("method", method), ("route", route)]
                for bound, n in zip((*LATENCY_BUCKETS, math.inf), buckets, strict=True):
                    lines.append(f"claimtrail_http_request_duration_seconds_bucket"
                                 f"{_labels([*base, ('le', _num(float(bound)))])} {n}")
                lines.append(f"claimtrail_http_request_duration_seconds_sum{_labels(base)} {self._sum[(method, route)]!r}")
                lines.append(f"claimtrail_http_request_duration_seconds_count{_labels(base)} {buckets[-1]}")
            return lines


def render_gauges(name: str, help_text: str, values: Mapping[str, float], label: str) -> list[str]:
    """One metric family with a single label, from a mapping label value → number."""
    lines = [f"# HELP {name} {help_text}", f"# TYPE {name} gauge"]
    for key, value in sorted(values.items()):
        lines.append(f"{name}{_labels([(label, key)])} {_num(value)}")
    return lines


def process_memory() -> dict[str, float]:
    """This process's resident memory now and its peak (the kernel's own accounting: statm and
    getrusage), so an operator — or a test — can see what a request cost in memory."""
    import os
    import resource

    with open("/proc/self/statm") as fh:
        resident_pages = int(fh.read().split()[1])
    return {"resident_memory_bytes": float(resident_pages * os.sysconf("SC_PAGE_SIZE")),
            "max_resident_memory_bytes": float(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)}


def render_process(values: Mapping[str, float]) -> list[str]:
    lines: list[str] = []
    for key, value in sorted(values.items()):
        lines += [f"# HELP process_{key} Process {key.replace('_', ' ')}.", f"# TYPE process_{key} gauge",
                  f"process_{key} {_num(value)}"]
    return lines


def render_collector() -> list[str]:
    """The cyclic garbage collector: collections run per generation, and the objects frozen out of
    its walks (``claimtrail serve`` freezes what it built before serving)."""
    import gc

    lines = render_gauges("python_gc_collections", "Cyclic garbage collections run, by generation.",
                          {str(g): s["collections"] for g, s in enumerate(gc.get_stats())}, "generation")
    return [*lines, "# HELP python_gc_frozen_objects Objects the collector no longer walks (gc.freeze).",
            "# TYPE python_gc_frozen_objects gauge", f"python_gc_frozen_objects {gc.get_freeze_count()}"]
