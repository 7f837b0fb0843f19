"""Idle-while-fit over a simulated day, for ``bench_fairness``: the one figure ``audit.metrics``
does not define yet.

It is the share of pending pod-minutes during which an allowed tier of the pod (open under the
policy's quota and fallback gates, an adaptive hold included) had a node with enough free healthy
devices (``audit.scheduler.engine.may_place``), measured after every instant of the event log,
folded by the engine's own world. It uses the engine's own fit test, so it is not an independent
check of the engine.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from audit.canonical import digest
from audit.scheduler.engine import holding_below, may_place
from audit.timestamps import parse_time_ms
from audit.world import World


@dataclass
class DayFigures:
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
            world.apply(events[i])
            i += 1
        nxt = min(parse_time_ms(events[i].time), end_ms) if i < len(events) else end_ms
        if nxt > t and world.pending:
            fits = _fitting(world, t, shapes)
            out.pending_ms += len(world.pending) * (nxt - t)
            out.fit_ms += fits * (nxt - t)
    return out, world


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
        spec = _shape(world, key, pod, shapes)
        if policy.fallback_mode == "adaptive":  # each pod's own threshold: the pods ahead differ
            holding = t - created < policy.fallback_max_wait_ms and t - created < holding_below(world, key, t, policy)
        else:
            holding = policy.fallback_mode == "strict" or (
                policy.fallback_mode == "wait-for-preferred" and t - created < policy.fallback_wait_ms)
        shape = (spec, holding)
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
