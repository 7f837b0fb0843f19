"""Where the fairness figures of a simulated day come from, for ``bench_fairness`` and by hand.

Three breakdowns, each computed with the definitions of ``audit.metrics`` (nothing here is a new
metric, and none changes a figure):

* ``contended_hours``: per hour that counts in Jain under contention, the backlogged tenants,
  their xᵢ (H100-eq-hours used / weight-hours) and the hour's index, plus the tenants whose
  backlog in that hour came only from device-plugin pods. Such a pod can use only the nodes its
  nodeSelector admits, so its wait says nothing about the tenant's demand on the shared pool
  that xᵢ measures.
* ``regret_by_reason``: the fallbacks of an adaptive run grouped by what the engine's
  ``fallback_estimate`` evidence said when the pod fell back (the estimate's basis, whether it
  waited on devices or on quota, and whether the pod had waited ``maxWait``), with how many of
  each group were regretted.
* ``p99_by_track``: each tenant's p99 wait (nearest rank, as ``fairness_report``) over all its
  pods and per track, to tell a tenant's wait on its device-plugin pods from its wait on DRA.

Run ``python -m benchmarks.fairness_diagnosis [seed] [immediate|adaptive] [hours]`` to print them for
the default scenario.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Any

from audit.metrics import Window, fold_lifecycle
from audit.metrics.fairness import BACKLOG_MS, hourly_use, hours, jain, pending_intervals
from audit.metrics.lifecycle import Lifecycle
from audit.metrics.ranks import nearest_rank
from audit.metrics.usage import weight_hours
from audit.records import Blocker, DecisionRecord, Outcome

DEVICE_PLUGIN = "device-plugin"


def _backlogged(pending: dict[str, list[tuple[int, int]]], hour: Window) -> list[str]:
    return sorted(t for t, iv in pending.items() if sum(hour.overlap_ms(a, b) for a, b in iv) >= BACKLOG_MS)


def contended_hours(life: Lifecycle, window: Window) -> list[dict[str, Any]]:
    """The hours ``jain_contention`` averages, each with its tenants' xᵢ and Jain's index."""
    pending = pending_intervals(life.pods, window)
    # the same intervals without device-plugin pods: who would still be backlogged
    pending_dra = pending_intervals([p for p in life.pods if p.track != DEVICE_PLUGIN], window)
    used = hourly_use(life.pods, window)
    rows = []
    for i, hour in enumerate(hours(window)):
        backlogged = _backlogged(pending, hour)
        if len(backlogged) < 2:
            continue
        xs = {}
        for t in backlogged:
            w = weight_hours(life, hour, t)
            xs[t] = used.get((i, t), 0.0) / w if w > 0 else 0.0
        on_dra = set(_backlogged(pending_dra, hour))
        rows.append({"hour": i, "jain": jain(xs.values()), "x": xs,
                     "pinned_only": [t for t in backlogged if t not in on_dra]})
    return rows


def regret_by_reason(records: Iterable[DecisionRecord], life: Lifecycle) -> list[dict[str, Any]]:
    """Fallbacks grouped by the evidence of the decision that placed them, most first."""
    placed: dict[str, DecisionRecord] = {}
    for r in records:
        if r.outcome == Outcome.ALLOCATED.value and r.fallback:
            placed[r.pod_uid] = r
    groups: dict[tuple[str, str, bool], list[int]] = {}
    for p in life.pods:
        r = placed.get(p.uid)
        if r is None:
            continue
        said = [b.detail for b in r.blockers if b.code == Blocker.FALLBACK_ESTIMATE.value]
        if said:
            d = said[0]
            key = (str(d.get("basis")), str(d.get("wait_on")), int(d.get("waited_ms", 0)) >= int(d.get("max_wait_ms", 0)))
        else:
            key = ("no estimate", "", False)
        counts = groups.setdefault(key, [0, 0])
        counts[0] += 1
        counts[1] += bool(p.regretted)
    return [{"basis": k[0], "wait_on": k[1], "waited_max_wait": k[2], "fallbacks": n, "regretted": reg}
            for k, (n, reg) in sorted(groups.items(), key=lambda kv: (-kv[1][0], kv[0]))]


def p99_by_track(life: Lifecycle) -> dict[str, float]:
    """p99 wait in seconds of the pods first bound, per tenant and per ``tenant track``."""
    waits: dict[str, list[float]] = {}
    for p in life.pods:
        if p.bound_ms is None:
            continue
        wait = (p.bound_ms - p.created_ms) / 1000
        waits.setdefault(p.tenant, []).append(wait)
        waits.setdefault(f"{p.tenant} {p.track}", []).append(wait)
    return {k: nearest_rank(sorted(v), 0.99) for k, v in sorted(waits.items())}


def main(argv: list[str]) -> None:
    from benchmarks.bench_fairness import ADAPTIVE, _scenario
    from ingest.simulate.loop import simulate

    seed = int(argv[0]) if argv else 1
    adaptive = len(argv) > 1 and argv[1] == "adaptive"
    hours_ = float(argv[2]) if len(argv) > 2 else 24.0
    result = simulate(_scenario("", ADAPTIVE if adaptive else None), seed=seed, hours=hours_)
    window = Window(result.start_ms, result.end_ms)
    life = fold_lifecycle(result.events, result.world.cluster)
    for row in contended_hours(life, window):
        tenants = ", ".join(f"{t}{'*' if t in row['pinned_only'] else ''} {x:.1f}" for t, x in row["x"].items())
        print(f"h{row['hour']:02d} Jain {row['jain']:.3f}: {tenants}")
    print("(* backlog only from device-plugin pods)")
    for g in regret_by_reason(result.records, life):
        print(f"{g['regretted']:5d} of {g['fallbacks']:5d} regretted: basis {g['basis']}, on {g['wait_on'] or '-'}"
              f"{', after maxWait' if g['waited_max_wait'] else ''}")
    for k, v in p99_by_track(life).items():
        print(f"p99 wait {k}: {v:,.0f} s")


if __name__ == "__main__":
    main(sys.argv[1:])
