"""Reclaim over a simulated day: what preempting borrowers, or tenants above their fair share, buys and costs.

The default scenario (``ingest/simulate/scenarios/cluster-day.yaml``: weighted DRF, immediate
fallback until its mid-day policy change, best-effort queueing) already gives every tenant a
nominal H100 quota, and the nominal quotas add up to the H100 devices, so reclaim has something to
take back; it runs for 24 simulated hours without reclaim, with ``spec.preemption: {enabled:
true, minRuntime: 10m}`` (reclaim of nominal quota) and with ``basis: fairShare`` added (reclaim
of DRF entitlements, whatever the model) on every policy of the day, in this process, so the
variants are compared within one run. Per variant, from ``audit.metrics`` (pod lifecycle folded from the event log;
waits are first bind − creation, nearest-rank percentiles): Jain's index under contention, the
worst/best ratio of the tenants' p99 waits; and from the run: preemptions (records with outcome
``preempted``) and pods evicted, the device-hours the victims had run (lost: the simulator's jobs
restart from zero), and decisions per CPU-second.
"""

from __future__ import annotations

import os
from typing import Any

from audit.metrics import Window, fairness_report, fold_lifecycle
from audit.records import Blocker, Outcome
from benchmarks.bench_fairness import tenant_p99, worst_best
from benchmarks.cluster_day import cluster_day
from benchmarks.paced_day import paced_day
from benchmarks.pacers import MemoryPacer
from ingest.simulate.loop import Simulator
from ingest.simulate.scenario import Scenario

BENCH_RUNS = 3  # a rate per CPU-second of one process: make bench reports the median of three runs
HOURS = float(os.environ.get("CLAIMTRAIL_BENCH_RECLAIM_HOURS", "24"))
SEED = 1
MIN_RUNTIME = "10m"


def _scenario(basis: str | None) -> Scenario:
    """The default scenario with reclaim on the given basis (None: off)."""
    if basis is None:
        return cluster_day()
    return cluster_day(lambda spec: spec.update(preemption={"enabled": True, "minRuntime": MIN_RUNTIME, "basis": basis}))


def _rows(pacer: MemoryPacer, label: str, basis: str | None) -> list[dict[str, Any]]:
    paced = paced_day(Simulator(_scenario(basis), seed=SEED, hours=HOURS), pacer.speed)
    result = paced.result
    life = fold_lifecycle(result.events, result.world.cluster)
    report = fairness_report(life, Window(result.start_ms, result.end_ms))
    p99 = tenant_p99(report)
    preemptions = [r for r in result.records if r.outcome == Outcome.PREEMPTED.value]
    victims = [b.detail for r in preemptions for b in r.blockers if b.code == Blocker.RECLAIM_VICTIM.value]
    lost_h = sum(int(v["device_ms"]) for v in victims) / 3_600_000
    by_tenant: dict[str, int] = {}
    for r in preemptions:
        by_tenant[r.tenant] = by_tenant.get(r.tenant, 0) + 1
    evicted: dict[str, int] = {}
    for v in victims:
        evicted[str(v["tenant"])] = evicted.get(str(v["tenant"]), 0) + 1
    name = f"reclaim, cluster-day {HOURS:g} h seed {SEED}, DRF, default policies, {label}"
    per_tenant = ", ".join(f"{t} {v:,.0f}s" for t, v in p99.items())
    return [
        {"issue": "#16", "name": f"{name}: Jain under contention",
         "value": None if report["jain_contention"] is None else round(report["jain_contention"], 4),
         "unit": "index", "target": ">= 0.95", "note": f"{report['contention_windows']} contended 1-hour windows"},
        {"issue": "#16", "name": f"{name}: worst/best tenant p99 wait", "value": round(worst_best(p99), 1), "unit": "x",
         "target": "<= 3", "note": f"p99 wait per tenant: {per_tenant}"},
        {"issue": "#16", "name": f"{name}: preemptions", "value": len(preemptions), "unit": "preemptions",
         "target": "", "note": (f"{len(victims):,} pods evicted; by preemptor "
                                + (", ".join(f"{t} {n}" for t, n in sorted(by_tenant.items())) or "none")
                                + "; evicted from " + (", ".join(f"{t} {n}" for t, n in sorted(evicted.items()))
                                                      or "none"))},
        {"issue": "#16", "name": f"{name}: device-hours lost to preemption", "value": round(lost_h, 1),
         "unit": "device-hours", "target": "", "scale": "none",
         "note": "devices x runtime of the evicted pods, which restart from zero"},
        {"issue": "#16", "name": f"{name}: decisions/s", "target": "", **paced.row(), "note": paced.note()},
    ]


def run() -> list[dict[str, Any]]:
    with MemoryPacer() as pacer:
        return (_rows(pacer, "no reclaim (default)", None) + _rows(pacer, f"reclaim, minRuntime {MIN_RUNTIME}", "quota")
                + _rows(pacer, f"reclaim of fair shares, minRuntime {MIN_RUNTIME}", "fairShare"))


if __name__ == "__main__":
    for row in run():
        print(row)
