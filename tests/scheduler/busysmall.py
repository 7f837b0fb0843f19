"""The busy-small run the cluster-loop and reservation tests share, and the window their
counterfactuals cover (cached: each queueing variant runs once per test process)."""

from __future__ import annotations

import functools
import os

from audit.timestamps import parse_time_ms
from audit.world import World
from ingest.simulate.loop import SimulationResult, simulate
from ingest.simulate.scenario import load_scenario_text

SCENARIO = os.path.join(os.path.dirname(os.path.dirname(__file__)), "fixtures", "replay", "busy-small.yaml")
HOUR = 3_600_000


@functools.lru_cache(maxsize=8)  # every variant the scheduler tests ask for, so none is simulated twice
def busy_small(queueing: tuple[tuple[str, str], ...] = (),
               fallback: tuple[tuple[str, str], ...] = (),
               preemption: tuple[tuple[str, object], ...] = (), seed: int = 3) -> SimulationResult:
    """Four hours of busy-small, seed 3 unless given, with ``queueing`` as every policy's
    ``spec.queueing``, ``fallback`` as its ``spec.fallback`` and ``preemption`` as its
    ``spec.preemption``."""
    with open(SCENARIO, encoding="utf-8") as fh:
        sc = load_scenario_text(fh.read(), "busy-small.yaml")
    for doc in [sc.policy, *(d for _, d in sc.policy_changes)]:
        if queueing:
            doc["spec"]["queueing"] = dict(queueing)
        if fallback:
            doc["spec"]["fallback"] = dict(fallback)
        if preemption:
            doc["spec"]["preemption"] = dict(preemption)
    return simulate(sc, seed=seed, hours=4.0)


def window_start(res: SimulationResult) -> tuple[World, int, int]:
    """The world just before the window (from 1.5 h, off the minute, to 2.9 h) and its bounds."""
    t0 = parse_time_ms(res.events[0].time)
    since, until = t0 + int(1.5 * HOUR) + 777, t0 + int(2.9 * HOUR)
    start = World(res.world.cluster)
    for e in res.events:
        if parse_time_ms(e.time) < since:
            start.apply(e)
    return start, since, until
