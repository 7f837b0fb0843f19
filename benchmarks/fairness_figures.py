"""Fairness and work-conservation figures of a simulated day, for ``bench_fairness``.

Stand-ins, one function per figure, written to the definitions the metrics module adopts (and to
be replaced by it): a pod's wait is its first bind minus its creation; percentiles are nearest
rank; Jain under contention takes 1-hour windows, counts a tenant as backlogged in a window when
it had at least one pod pending for at least 30 minutes of it, computes Jain's index over
usage_i / weight_i (H100-equivalent hours) among the backlogged tenants, and averages over the
windows with at least two of them. Idle-while-fit is the share of pending pod-minutes during which
an allowed tier of the pod (open under the policy's quota and fallback gates) had a node with
enough free healthy devices (``audit.scheduler.engine.may_place``). Everything is derived from
the event log, folded by the engine's own world, and the decision records.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from audit.canonical import digest
from audit.metrics import fallback_regret, usage_intervals
from audit.policy import Policy
from audit.records import DecisionRecord, Outcome, Track
from audit.scheduler.engine import may_place
from audit.timestamps import parse_time_ms
from audit.world import World

HOUR_MS = 3_600_000
BACKLOG_MS = 30 * 60_000


@dataclass
class PodLife:
    tenant: str
    created_ms: int
    bound_ms: int | None = None
    gone_ms: int | None = None


@dataclass
class DayFigures:
    pods: dict[str, PodLife] = field(default_factory=dict)
    pending_ms: int = 0  # pending pod-milliseconds over the day
    fit_ms: int = 0  # of which an allowed tier fit on free devices
    end_ms: int = 0


def fold_day(events: list[Any], end_ms: int) -> tuple[DayFigures, World]:
    """Fold the event log instant by instant; after each instant, measure until the next one."""
    world = World(events[0].cluster) if events else World("empty")
    out = DayFigures(end_ms=end_ms)
    shapes: dict[str, str] = {}
    i = 0
    while i < len(events):
        t = parse_time_ms(events[i].time)
        while i < len(events) and parse_time_ms(events[i].time) == t:
            ev = events[i]
            _lifecycle(out, world, ev, t)
            world.apply(ev)
            i += 1
        nxt = min(parse_time_ms(events[i].time), end_ms) if i < len(events) else end_ms
        if nxt > t and world.pending:
            fits = _fitting(world, t, shapes)
            out.pending_ms += len(world.pending) * (nxt - t)
            out.fit_ms += fits * (nxt - t)
    return out, world


def _lifecycle(out: DayFigures, world: World, ev: Any, t: int) -> None:
    if ev.object_kind != "Pod":
        return
    key = f"{ev.namespace}/{ev.name}"
    if ev.type == "delete":
        if key in out.pods and out.pods[key].gone_ms is None:
            out.pods[key].gone_ms = t
        return
    life = out.pods.get(key)
    if life is None:
        created = parse_time_ms(ev.payload["metadata"].get("creationTimestamp") or ev.time)
        life = out.pods[key] = PodLife(world.policy.tenant_for(ev.namespace), created)
    if life.bound_ms is None and (ev.payload.get("spec") or {}).get("nodeName"):
        life.bound_ms = t


def _fitting(world: World, t: int, shapes: dict[str, str]) -> int:
    """Pending pods with an allowed tier that fits now; pods of one shape are asked once."""
    memo: dict[tuple[str, bool], bool] = {}
    policy = world.policy
    fits = 0
    for key, created in world.pending.items():
        ns, name = key.split("/", 1)
        pod = world.get("Pod", ns, name) or {}
        if (pod.get("status") or {}).get("phase") == "Failed":
            continue
        holding = policy.fallback_mode == "strict" or (
            policy.fallback_mode == "wait-for-preferred" and t - created < policy.fallback_wait_ms)
        shape = (_shape(world, key, pod, shapes), holding)
        ok = memo.get(shape)
        if ok is None:
            ok = memo[shape] = may_place(world, key, t)
        fits += ok
    return fits


def _shape(world: World, key: str, pod: dict[str, Any], shapes: dict[str, str]) -> str:
    s = shapes.get(key)
    if s is None:
        ns = key.split("/", 1)[0]
        claims = [world.get("ResourceClaim", ns, str(c.get("resourceClaimName", "")))
                  for c in (pod.get("status") or {}).get("resourceClaimStatuses") or []]
        s = shapes[key] = digest({"ns": ns, "pod": pod.get("spec"), "claims": [(c or {}).get("spec") for c in claims]})
    return s


def nearest_rank(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return 0.0
    rank = max(1, math.ceil(q / 100 * len(sorted_values)))
    return sorted_values[min(rank, len(sorted_values)) - 1]


def wait_p99_by_tenant(day: DayFigures) -> dict[str, float]:
    """Nearest-rank p99 of (first bind − creation) per tenant, in seconds, over bound pods."""
    waits: dict[str, list[float]] = {}
    for life in day.pods.values():
        if life.bound_ms is not None:
            waits.setdefault(life.tenant, []).append((life.bound_ms - life.created_ms) / 1000)
    return {t: nearest_rank(sorted(xs), 99) for t, xs in sorted(waits.items())}


def _pending_cover(day: DayFigures, tenant: str, t0: int, t1: int) -> int:
    """Milliseconds of [t0, t1) during which the tenant had at least one pod pending."""
    spans = []
    for life in day.pods.values():
        if life.tenant != tenant:
            continue
        end = life.bound_ms if life.bound_ms is not None else (life.gone_ms if life.gone_ms is not None else day.end_ms)
        a, b = max(life.created_ms, t0), min(end, t1)
        if b > a:
            spans.append((a, b))
    spans.sort()
    covered, cur_a, cur_b = 0, None, None
    for a, b in spans:
        if cur_b is None or a > cur_b:
            if cur_b is not None and cur_a is not None:
                covered += cur_b - cur_a
            cur_a, cur_b = a, b
        else:
            cur_b = max(cur_b, b)
    if cur_b is not None and cur_a is not None:
        covered += cur_b - cur_a
    return covered


def jain_under_contention(day: DayFigures, records: list[DecisionRecord], events: list[Any], policy: Policy,
                          start_ms: int) -> tuple[float, int]:
    """(mean Jain over contended 1-hour windows, number of such windows)."""
    intervals = usage_intervals(records, events, day.end_ms)
    tenants = sorted({life.tenant for life in day.pods.values()})
    values: list[float] = []
    t0 = start_ms
    while t0 + HOUR_MS <= day.end_ms:
        t1 = t0 + HOUR_MS
        backlogged = [t for t in tenants if _pending_cover(day, t, t0, t1) >= BACKLOG_MS]
        if len(backlogged) >= 2:
            usage = {t: 0.0 for t in backlogged}
            for iv in intervals:
                if iv.tenant in usage:
                    overlap = max(0, min(iv.end_ms, t1) - max(iv.start_ms, t0)) / HOUR_MS
                    usage[iv.tenant] += iv.devices * overlap * policy.h100_equivalent(iv.model)
            xs = [usage[t] / policy.weight(t) for t in backlogged]
            sq = sum(x * x for x in xs)
            values.append(sum(xs) ** 2 / (len(xs) * sq) if sq > 0 else 1.0)
        t0 = t1
    return (sum(values) / len(values) if values else 1.0), len(values)


def regret_share(records: list[DecisionRecord], events: list[Any], world: World, end_ms: int) -> tuple[float, int]:
    """(regretted fallbacks / fallbacks, fallbacks) by ``audit.metrics.fallback_regret``."""
    dra = [r for r in records if r.track == Track.DRA.value and r.outcome == Outcome.ALLOCATED.value]
    regret, fallbacks = fallback_regret(dra, usage_intervals(dra, events, end_ms), dict(world.model_totals))
    return (regret / fallbacks if fallbacks else 0.0), fallbacks
