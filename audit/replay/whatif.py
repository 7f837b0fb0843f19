"""A counterfactual window end to end: set it up from history, run it, compare with the record.

``whatif`` takes the world at the window's start (a copy, so the caller's cursor is untouched),
the event log and records, and a policy document; it returns the recorded and the counterfactual
side of the window as ``Side`` objects, each with the pod lifecycle folded from its event log
(the history up to the window's start, folded once and forked, then that side's events of the
window). ``deltas`` puts the two sides' figures next to each other, every one computed by
``audit.metrics``' reference reports over that side's lifecycle and the window, as
``docs/metrics.md`` defines them (section *whatif*): Jain's index whole-window and under
contention, and per tenant the pod waits, first choice and fallbacks, usage and entitlement; per
(tenant, models got) the pods started; plus the what-if's own counts — decision records, quota
violations (allocations that left a tenant above nominal plus borrowing limit, which must be 0 on
both sides) and jobs without a recorded running time. ``delta_lines`` renders them as the command
line's table.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from audit.events import EventType, WorldEvent
from audit.metrics import Lifecycle, LifecycleFold, Window, fairness_report, fallback_report
from audit.metrics.breakdown import wait_breakdown
from audit.records import DecisionRecord
from audit.replay.checkpoints import checkpoint_body, load_checkpoint
from audit.replay.counterfactual import Counterfactual, QuotaViolation, quota_violations
from audit.replay.history import activation_dues, queue_state, recorded_policies, split_history
from audit.timestamps import parse_time_ms
from audit.world import World


@dataclass
class Side:
    records: list[DecisionRecord]
    events: list[WorldEvent]
    violations: list[QuotaViolation] = field(default_factory=list)
    life: Lifecycle | None = None  # the pod lifecycle of the history up to the window's start, then ``events``


@dataclass
class WhatIf:
    recorded: Side
    counterfactual: Side
    start_ms: int
    end_ms: int
    dropped_effects: int = 0
    unknown_durations: int = 0


def _copy(world: World) -> World:
    return load_checkpoint(world.cluster, world.seq, checkpoint_body(world)) if world.seq >= 0 else World(world.cluster)


def whatif(start: World, events: Iterable[WorldEvent], records: Iterable[DecisionRecord], policy_doc: dict[str, Any],
           since_ms: int, until_ms: int) -> WhatIf:
    """``start`` is the world just before ``since_ms``; ``events`` (the cluster's log in seq order,
    from its first event) and ``records`` may cover more."""
    events = list(events)
    window_events = [e for e in events if e.seq > start.seq and parse_time_ms(e.time) < until_ms]
    known = [r for r in records if parse_time_ms(r.time) < until_ms]
    in_window = [r for r in known if parse_time_ms(r.time) >= since_ms]
    prior = [r for r in known if parse_time_ms(r.time) < since_ms]
    policies = recorded_policies(e for e in events if e.seq <= start.seq)
    queues = queue_state(prior, since_ms, start.policy, policies)
    queues.dues = activation_dues((e for e in events if e.seq <= start.seq), start.pending, start.policy, since_ms)
    history = split_history(window_events, known)
    recorded = Side(in_window, window_events, recorded_violations(_copy(start), window_events))
    cf = Counterfactual(_copy(start), history, policy_doc, until_ms, queues).run()
    counterfactual = Side(cf.records, cf.events, cf.violations)
    goes_on = any(parse_time_ms(e.time) >= until_ms for e in events)
    # the history before the window is most of what both sides fold: fold it once, go on apart
    before = LifecycleFold(start.cluster).apply_all(e for e in events if e.seq <= start.seq)
    recorded.life = side_lifecycle(before.fork(), recorded.events, goes_on)
    counterfactual.life = side_lifecycle(before, counterfactual.events, goes_on)
    return WhatIf(recorded, counterfactual, max(since_ms, start.time_ms), until_ms, history.effects,
                  cf.unknown_durations)


def side_lifecycle(before: LifecycleFold, window_events: list[WorldEvent], goes_on: bool) -> Lifecycle:
    """The pod lifecycle of the history folded into ``before`` (up to the window's start; the fold
    goes on with the window, so pass each side its own ``fork()``) followed by one side's events of
    the window. ``goes_on``: the recorded history has events at or after the window's end, so the
    window's last instant is complete and is judged as a fold of the whole history judges it."""
    fold = before.apply_all(window_events)
    if goes_on:
        fold.end_instant()
    return fold.lifecycle()


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

# per tenant, in the order the table shows them: (figure, report it comes from)
TENANT_FIGURES = (("pods_started", "fairness"), ("wait_p50_s", "fairness"), ("wait_p95_s", "fairness"),
                  ("pending_at_end", "fairness"), ("failed", "fairness"), ("pods_with_preference", "fallback"),
                  ("first_choice_rate", "fallback"), ("fallbacks", "fallback"), ("h100_eq_hours", "fairness"),
                  ("entitlement_h100_eq_hours", "fairness"))
_WAITS = ("wait_p50_s", "wait_p95_s")


def side_figures(life: Lifecycle, window: Window) -> dict[str, Any]:
    """One side's figures over the window, each from the ``audit.metrics`` report that defines it."""
    fair = fairness_report(life, window)
    tenants: dict[str, dict[str, Any]] = {}
    models: dict[str, int] = {}
    for row in fair["tenants"]:
        t = row["tenant"]
        fb = fallback_report(life, window, scope=t)
        tenants[t] = {name: (row if source == "fairness" else fb)[name] for name, source in TENANT_FIGURES}
        for m in wait_breakdown(life, window, "model", scope=t):
            if m["pods_started"]:
                models[f"{t}/{m['model']}"] = m["pods_started"]
    return {"jain_whole": fair["jain_whole"], "jain_contention": fair["jain_contention"],
            "contention_windows": fair["contention_windows"], "tenants": tenants, "models": models}


def _empty(name: str) -> Any:
    """A tenant's figure on a side where it had no pod: counts are 0, ratios and percentiles null."""
    return None if name.endswith("_rate") or name in _WAITS else 0


def deltas(w: WhatIf) -> dict[str, Any]:
    assert w.recorded.life is not None and w.counterfactual.life is not None
    window = Window(w.start_ms, w.end_ms)
    rec, cf = side_figures(w.recorded.life, window), side_figures(w.counterfactual.life, window)
    names = [name for name, _ in TENANT_FIGURES]
    return {
        "jain_whole": [rec["jain_whole"], cf["jain_whole"]],
        "jain_contention": [rec["jain_contention"], cf["jain_contention"]],
        "contention_windows": [rec["contention_windows"], cf["contention_windows"]],
        "tenants": {t: {k: [rec["tenants"].get(t, {}).get(k, _empty(k)), cf["tenants"].get(t, {}).get(k, _empty(k))]
                        for k in names}
                    for t in sorted(set(rec["tenants"]) | set(cf["tenants"]))},
        "models": {tm: [rec["models"].get(tm, 0), cf["models"].get(tm, 0)]
                   for tm in sorted(set(rec["models"]) | set(cf["models"]))},
        "quota_violations": [len(w.recorded.violations), len(w.counterfactual.violations)],
        "decisions": [len(w.recorded.records), len(w.counterfactual.records)],
        "unknown_durations": w.unknown_durations,
    }


def _fmt(key: str, v: Any) -> str:
    if v is None:
        return "-"
    if key.endswith("_rate"):
        return f"{v:.1%}"
    if key.endswith("_s"):
        return f"{v:.1f}s"
    if key.endswith("_hours"):
        return f"{v:.1f}"
    if key.startswith("jain"):
        return f"{v:.3f}"
    return f"{int(v):,}"


def delta_lines(d: dict[str, Any]) -> list[str]:
    """The command line's table: one row per figure, named as ``docs/metrics.md`` names it."""
    lines = [f"{'':<40}{'recorded':>14}{'counterfactual':>16}"]

    def row(label: str, key: str, pair: list[Any]) -> None:
        lines.append(f"{label:<40}{_fmt(key, pair[0]):>14}{_fmt(key, pair[1]):>16}")

    for key in ("decisions", "quota_violations", "jain_whole", "jain_contention", "contention_windows"):
        row(key, key, d[key])
    for tenant, metrics in d["tenants"].items():
        for key, pair in metrics.items():
            row(f"{tenant} {key}", key, pair)
    for tm, pair in d["models"].items():
        row(f"{tm} pods_started", "pods_started", pair)
    if d["unknown_durations"]:
        lines.append(f"unknown_durations (jobs run here without a recorded running time, held to the window end): "
                     f"{d['unknown_durations']:,}")
    return lines
