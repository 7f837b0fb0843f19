"""Reservations against starvation of large pods, over a simulated day.

The default scenario (``ingest/simulate/scenarios/cluster-day.yaml``: weighted DRF, immediate
fallback until its noon policy change brings a 5-minute wait for the preferred model, best-effort
queueing) runs for 24 simulated hours without reservations and with
``spec.queueing.reserveAfter: 10m`` (one reservation per tenant at a time, the default, and four),
in this process, so the variants are compared within one run. Per variant, from ``audit.metrics`` (pod lifecycle folded
from the event log; waits are first bind − creation, nearest-rank percentiles): the p99 wait of
research's multi-GPU pods (2, 4 and 8 GPUs, the pods that lost freed devices to smaller ones) and
of its 8-GPU pods, how many of them were still pending at the end and the longest such wait, the
worst/best ratio of the tenants' p99 waits, Jain's index under contention, the reservations made
and what they cost: device-hours that free devices spent held for a pod that was not yet using
them (folded from the event log with the engine's own rule for what a reservation holds), and
decisions per CPU-second.
"""

from __future__ import annotations

import os
from typing import Any

from audit.metrics import Window, fairness_report, fold_lifecycle
from audit.metrics.waits import WaitStats, tenant_waits
from audit.scheduler import reservations
from audit.timestamps import parse_time_ms
from audit.world import World
from benchmarks.bench_fairness import tenant_p99, worst_best
from benchmarks.cluster_day import cluster_day
from benchmarks.paced_day import paced_day
from benchmarks.pacers import MemoryPacer
from ingest.simulate.loop import SimulationResult, Simulator
from ingest.simulate.scenario import Scenario

BENCH_RUNS = 3  # a rate per CPU-second of one process: make bench reports the median of three runs
HOURS = float(os.environ.get("CLAIMTRAIL_BENCH_RESERVATIONS_HOURS", "24"))
SEED = 1
TENANT = "research"


def _scenario(reserve_after: str, per_tenant: int | None) -> Scenario:
    if not reserve_after:
        return cluster_day()
    limit = {} if per_tenant is None else {"maxReservationsPerTenant": per_tenant}
    return cluster_day(lambda spec: spec.update(
        queueing={**spec.get("queueing", {}), "reserveAfter": reserve_after, **limit}))


def _sizes(result: SimulationResult) -> dict[str, int]:
    """Pod key -> devices its claim asks for (the first alternative's count), from the claims'
    creation events: the simulator names a pod's claim ``<pod>-gpu``."""
    out: dict[str, int] = {}
    for ev in result.events:
        if ev.object_kind != "ResourceClaim" or ev.type != "upsert" or not ev.name.endswith("-gpu"):
            continue
        for req in ((ev.payload.get("spec") or {}).get("devices") or {}).get("requests") or []:
            first = (req.get("firstAvailable") or [req.get("exactly") or {}])[0]
            out.setdefault(f"{ev.namespace}/{ev.name[:-4]}", int(first.get("count", 1)))
    return out


def held_device_hours(result: SimulationResult) -> float:
    """Σ over time of the free devices reservations held (what no pod could use meanwhile)."""
    world = World(result.world.cluster)
    total_ms, held, since = 0, 0, result.start_ms
    for ev in result.events:
        at = parse_time_ms(ev.time)
        if at != since:
            total_ms += held * (at - since)
            since = at
        world.apply(ev)
        held = sum(len(reservations.held_devices(world, world.policy, h.node, "")) for h in world.reservations.values())
    total_ms += held * max(0, result.end_ms - since)
    return total_ms / 3_600_000


def p99_row(name: str, stats: WaitStats) -> dict[str, Any]:
    """The row of one group of pods' p99 wait: null when none of them started (all still pending
    or failed), as ``tenant_waits`` gives it, with how many are pending and for how long."""
    p99_ms = stats.p(0.99)
    return {"issue": "#16", "name": name, "value": None if p99_ms is None else round(p99_ms / 1000, 1), "unit": "s",
            "target": "", "scale": "none",  # simulated seconds: no machine makes them shorter
            "note": f"{stats.pods_started:,} started; {stats.pending_at_end:,} still pending at the end "
                    f"(longest {stats.longest_wait_ms / 1000:,.0f} s)"}


def _rows(pacer: MemoryPacer, label: str, reserve_after: str, per_tenant: int | None = None) -> list[dict[str, Any]]:
    paced = paced_day(Simulator(_scenario(reserve_after, per_tenant), seed=SEED, hours=HOURS), pacer.speed)
    result = paced.result
    life = fold_lifecycle(result.events, result.world.cluster)
    window = Window(result.start_ms, result.end_ms)
    sizes = _sizes(result)
    research = [p for p in life.pods if p.tenant == TENANT]
    multi = tenant_waits([p for p in research if sizes.get(p.key, 1) >= 2], window).get(TENANT)
    eight = tenant_waits([p for p in research if sizes.get(p.key, 1) == 8], window).get(TENANT)
    report = fairness_report(life, window)
    p99 = tenant_p99(report)
    made = sum(1 for e in result.events if e.object_kind == "Reservation" and e.type == "upsert")
    kept_off = sum(1 for r in result.records if any(b.code == "reservation_held" for b in r.blockers))
    name = f"reservations, cluster-day {HOURS:g} h seed {SEED}, DRF, default policies, {label}"
    rows = [p99_row(f"{name}: {TENANT} {what} pods p99 wait", stats)
            for what, stats in (("2/4/8-GPU", multi), ("8-GPU", eight)) if stats is not None]
    waits = ", ".join(f"{t} {v:,.0f}s" for t, v in p99.items())
    rows += [
        {"issue": "#16", "name": f"{name}: worst/best tenant p99 wait", "value": round(worst_best(p99), 1), "unit": "x",
         "target": "<= 3", "note": f"p99 wait per tenant: {waits}"},
        {"issue": "#16", "name": f"{name}: Jain under contention",
         "value": None if report["jain_contention"] is None else round(report["jain_contention"], 4),
         "unit": "index", "target": ">= 0.95", "note": f"{report['contention_windows']} contended 1-hour windows"},
        {"issue": "#16", "name": f"{name}: reservations made", "value": made, "unit": "reservations", "target": "",
         "note": f"{kept_off:,} decisions kept off reserved devices"},
        {"issue": "#16", "name": f"{name}: device-hours held idle by reservations",
         "value": round(held_device_hours(result), 1), "unit": "device-hours", "target": "",
         "note": "free devices set aside for a pod not yet placed"},
        {"issue": "#16", "name": f"{name}: decisions/s", "target": "", **paced.row(), "note": paced.note()},
    ]
    return rows


def run() -> list[dict[str, Any]]:
    with MemoryPacer() as pacer:
        return (_rows(pacer, "no reservations (default)", "")
                + _rows(pacer, "reserveAfter 10m", "10m")
                + _rows(pacer, "reserveAfter 10m, 4 per tenant", "10m", 4))


if __name__ == "__main__":
    for row in run():
        print(row)
