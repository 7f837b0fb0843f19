"""Starvation: pods that waited longer than the policy allows.

A pod is *starving* when its wait exceeds the starvation timeout (``spec.timeouts.starvation``,
default 1 h) of the policy in force at the window end: a pod first bound in the window whose
first bind − creation exceeds it, or a pod still pending at the window end whose window end −
creation exceeds it. Failed pods are not starving (they are counted as failed, see waits).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from audit.metrics.definition import Definition
from audit.metrics.lifecycle import PodLife
from audit.metrics.waits import pending_at
from audit.metrics.window import Window

DEFINITIONS = (
    Definition("starving_pods", "starvation", "pod", "pods (null in overview rows without pod figures)",
               "pods of both tracks first bound in the window, or still pending at its end",
               "count of those whose wait (first bind − creation, or window end − creation while pending) exceeds "
               "the starvation timeout of the policy in force at the window end",
               "audit.metrics.starving.starving_pods"),
)


def starving_pods(pods: Iterable[PodLife], window: Window, timeout_ms: int,
                  group: Callable[[str], str] = lambda t: t) -> dict[str, int]:
    out: dict[str, int] = {}
    for life in pods:
        if window.holds(life.bound_ms):
            assert life.bound_ms is not None
            wait = life.bound_ms - life.created_ms
        elif pending_at(life, window.until_ms):
            wait = window.until_ms - life.created_ms
        else:
            continue
        if wait > timeout_ms:
            row = group(life.tenant)
            out[row] = out.get(row, 0) + 1
    return out
