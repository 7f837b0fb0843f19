"""A counterfactual window end to end: set it up from history, run it, compare with the record.

``whatif`` takes the world at the window's start (a copy, so the caller's cursor is untouched),
the event log and records, and a policy document; it returns the recorded and the counterfactual
side of the window as ``Side`` objects and ``deltas`` renders them next to each other per tenant
and per (tenant, model): fallback rate, first-choice rate, wait p50/p95 (nearest rank, of
allocated decisions), allocations, plus Jain's index over the tenants' normalised shares
(``audit.metrics``) and quota violations — allocations that left a tenant above nominal plus
borrowing limit, which must be 0 on both sides.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from audit.events import EventType, WorldEvent
from audit.metrics import jain_index, percentile, tenant_shares, usage_intervals
from audit.records import DecisionRecord, Outcome, Track
from audit.replay.checkpoints import checkpoint_body, load_checkpoint
from audit.replay.counterfactual import Counterfactual, QuotaViolation, quota_violations
from audit.replay.history import queue_state, split_history
from audit.timestamps import parse_time_ms
from audit.world import World


@dataclass
class Side:
    records: list[DecisionRecord]
    events: list[WorldEvent]
    violations: list[QuotaViolation] = field(default_factory=list)


@dataclass
class WhatIf:
    recorded: Side
    counterfactual: Side
    start_ms: int
    end_ms: int
    capacity: int
    policy: Any
    dropped_effects: int = 0
    unknown_durations: int = 0


def _copy(world: World) -> World:
    return load_checkpoint(world.cluster, world.seq, checkpoint_body(world)) if world.seq >= 0 else World(world.cluster)


def whatif(start: World, events: Iterable[WorldEvent], records: Iterable[DecisionRecord], policy_doc: dict[str, Any],
           since_ms: int, until_ms: int) -> WhatIf:
    """``start`` is the world just before ``since_ms``; ``events`` and ``records`` may cover more."""
    window_events = [e for e in events if e.seq > start.seq and parse_time_ms(e.time) < until_ms]
    known = [r for r in records if parse_time_ms(r.time) < until_ms]
    in_window = [r for r in known if parse_time_ms(r.time) >= since_ms]
    prior = [r for r in known if parse_time_ms(r.time) < since_ms]
    queues = queue_state(prior, since_ms, start.policy.fallback_wait_ms)
    history = split_history(window_events, known)
    recorded = Side(in_window, window_events, recorded_violations(_copy(start), window_events))
    cf = Counterfactual(_copy(start), history, policy_doc, until_ms, queues).run()
    capacity = sum(cf.world.model_totals.values()) + sum(cf.world.dp_capacity.values())
    return WhatIf(recorded, Side(cf.records, cf.events, cf.violations), max(since_ms, start.time_ms), until_ms,
                  capacity, cf.world.policy, history.effects, cf.unknown_durations)


def recorded_violations(world: World, events: list[WorldEvent]) -> list[QuotaViolation]:
    """Quota violations in the recorded history: checked after each claim allocation event."""
    out: list[QuotaViolation] = []
    for ev in events:
        world.apply(ev)
        if ev.object_kind != "ResourceClaim" or ev.type != EventType.UPSERT.value:
            continue
        devices = world.claim_devices.get(f"{ev.namespace}/{ev.name}")
        charge = world.charges.get(f"{ev.namespace}/{ev.name}")
        if devices and charge is not None:
            out += quota_violations(world, world.policy, charge.tenant, set(charge.models), ev.time)
    return out


# ---- deltas --------------------------------------------------------------------------------------


def _allocated(records: list[DecisionRecord]) -> list[DecisionRecord]:
    return [r for r in records if r.outcome == Outcome.ALLOCATED.value]


def tenant_metrics(records: list[DecisionRecord]) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for tenant in sorted({r.tenant for r in records}):
        mine = [r for r in records if r.tenant == tenant]
        alloc = _allocated(mine)
        dra = [r for r in alloc if r.track == Track.DRA.value]
        waits = sorted(float(r.wait_ms) for r in alloc)
        out[tenant] = {
            "decisions": len(mine), "allocated": len(alloc),
            "fallback_rate": sum(r.fallback for r in dra) / len(dra) if dra else 0.0,
            "first_choice_rate": sum(r.tier_index == 0 for r in dra) / len(dra) if dra else 0.0,
            "wait_p50_ms": percentile(waits, 50), "wait_p95_ms": percentile(waits, 95),
        }
    return out


def model_allocations(records: list[DecisionRecord]) -> dict[tuple[str, str], int]:
    """Allocations per (tenant, allocated model)."""
    out: dict[tuple[str, str], int] = {}
    for r in _allocated(records):
        key = (r.tenant, r.allocated_model or "-")
        out[key] = out.get(key, 0) + 1
    return dict(sorted(out.items()))


def jain(side: Side, w: WhatIf) -> float:
    intervals = usage_intervals(side.records, side.events, w.end_ms)
    tenants = sorted({r.tenant for r in side.records})
    shares = tenant_shares(intervals, w.policy, w.capacity, (w.start_ms, w.end_ms), tenants)
    return jain_index(s.normalized for s in shares.values())


def deltas(w: WhatIf) -> dict[str, Any]:
    rec, cf = tenant_metrics(w.recorded.records), tenant_metrics(w.counterfactual.records)
    rec_m, cf_m = model_allocations(w.recorded.records), model_allocations(w.counterfactual.records)
    return {
        "tenants": {t: {k: [rec.get(t, {}).get(k, 0.0), cf.get(t, {}).get(k, 0.0)]
                        for k in ("decisions", "allocated", "fallback_rate", "first_choice_rate", "wait_p50_ms",
                                  "wait_p95_ms")}
                    for t in sorted(set(rec) | set(cf))},
        "models": {f"{t}/{m}": [rec_m.get((t, m), 0), cf_m.get((t, m), 0)] for t, m in sorted(set(rec_m) | set(cf_m))},
        "jain_index": [jain(w.recorded, w), jain(w.counterfactual, w)],
        "quota_violations": [len(w.recorded.violations), len(w.counterfactual.violations)],
        "decisions": [len(w.recorded.records), len(w.counterfactual.records)],
        "unknown_durations": w.unknown_durations,
    }


def _fmt(key: str, v: float) -> str:
    if key.endswith("_rate"):
        return f"{v:.1%}"
    if key.endswith("_ms"):
        return f"{v / 1000:.1f}s"
    if isinstance(v, float) and not v.is_integer():
        return f"{v:.3f}"
    return f"{int(v):,}"


def delta_lines(d: dict[str, Any]) -> list[str]:
    lines = [f"{'':<34}{'recorded':>14}{'counterfactual':>16}"]
    for label, key in (("decisions", "decisions"), ("quota violations", "quota_violations")):
        a, b = d[key]
        lines.append(f"{label:<34}{a:>14,}{b:>16,}")
    a, b = d["jain_index"]
    lines.append(f"{'jain index':<34}{a:>14.3f}{b:>16.3f}")
    for tenant, metrics in d["tenants"].items():
        for key, (a, b) in metrics.items():
            lines.append(f"{tenant + ' ' + key:<34}{_fmt(key, a):>14}{_fmt(key, b):>16}")
    for tm, (a, b) in d["models"].items():
        lines.append(f"{tm + ' allocations':<34}{a:>14,}{b:>16,}")
    if d["unknown_durations"]:
        lines.append(f"jobs run here without a recorded running time (held to the window end): "
                     f"{d['unknown_durations']:,}")
    return lines
