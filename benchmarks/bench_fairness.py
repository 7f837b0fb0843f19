"""Fairness and work conservation of the decision engine over a simulated day.

The default scenario (``ingest/simulate/scenarios/cluster-day.yaml``: weighted DRF, immediate
fallback) runs for 24 simulated hours twice in this process: with the policy's default
best-effort queueing, and with strict FIFO per tenant (the engine's earlier behaviour), so the
two are compared within one run. Per run: Jain's index under contention, the worst/best ratio of
the tenants' p99 waits, the share of pending pod-minutes during which an allowed tier of the pod
fit on free devices (idle while a pod fits), fallback regret, and decisions per CPU-second. The
figures come from ``benchmarks/fairness_figures.py`` (definitions in its docstring).
"""

from __future__ import annotations

import copy
import os
import time
from typing import Any

from benchmarks.fairness_figures import fold_day, jain_under_contention, regret_share, wait_p99_by_tenant
from ingest.simulate.loop import simulate
from ingest.simulate.scenario import load_scenario_text

HOURS = float(os.environ.get("CLAIMTRAIL_BENCH_FAIRNESS_HOURS", "24"))
SEED = 1
SCENARIO = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "ingest", "simulate",
                        "scenarios", "cluster-day.yaml")
# A tenant served at once has a p99 wait of 0 s; the ratio floors the best p99 at one second.
P99_FLOOR_S = 1.0


def _scenario(queueing: str) -> Any:
    with open(SCENARIO, encoding="utf-8") as fh:
        sc = load_scenario_text(fh.read(), "cluster-day.yaml")
    if queueing:
        sc.policy = copy.deepcopy(sc.policy)
        for doc in [sc.policy, *(d for _, d in sc.policy_changes)]:
            doc["spec"]["queueing"] = {"mode": queueing}
    return sc


def _rows(label: str, queueing: str) -> list[dict[str, Any]]:
    cpu = time.process_time()
    result = simulate(_scenario(queueing), seed=SEED, hours=HOURS)
    cpu = time.process_time() - cpu
    day, world = fold_day(result.events, result.end_ms)
    jain, windows = jain_under_contention(day, result.records, result.events, world.policy, result.start_ms)
    p99 = wait_p99_by_tenant(day)
    worst, best = max(p99.values()), max(P99_FLOOR_S, min(p99.values()))
    idle = day.fit_ms / day.pending_ms if day.pending_ms else 0.0
    regret, fallbacks = regret_share(result.records, result.events, world, result.end_ms)
    name = f"fairness, cluster-day {HOURS:g} h seed {SEED}, DRF/immediate, {label}"
    per_tenant = ", ".join(f"{t} {v:,.0f}s" for t, v in p99.items())
    return [
        {"issue": "#16", "name": f"{name}: Jain under contention", "value": round(jain, 3), "unit": "index",
         "target": ">= 0.95", "note": f"mean over {windows} contended 1-hour windows"},
        {"issue": "#16", "name": f"{name}: worst/best tenant p99 wait", "value": round(worst / best, 1), "unit": "x",
         "target": "<= 3", "note": f"p99 wait per tenant: {per_tenant}"},
        {"issue": "#16", "name": f"{name}: pending pod-minutes while an allowed tier fit", "value": round(100 * idle, 1),
         "unit": "%", "target": "<= 5", "note": f"{day.pending_ms / 60_000:,.0f} pending pod-minutes"},
        {"issue": "#16", "name": f"{name}: fallback regret", "value": round(100 * regret, 1), "unit": "%",
         "target": "", "note": f"{fallbacks:,} fallbacks; preferred model free within 10 min"},
        {"issue": "#16", "name": f"{name}: decisions/s", "value": round(len(result.records) / cpu, 1),
         "unit": "decisions/s", "target": "",
         "note": f"{len(result.records):,} decisions, {result.jobs:,} jobs, {cpu:.0f} s CPU"},
    ]


def run() -> list[dict[str, Any]]:
    return _rows("best-effort queueing (default)", "") + _rows("strict FIFO per tenant", "strict")


if __name__ == "__main__":
    for row in run():
        print(row)
