"""Shared simulation runs for the simulate tests (cached: each runs once per test process)."""

from __future__ import annotations

import functools
import os

from audit.scheduler.engine import bind, bind_failures_before, decide
from audit.timestamps import parse_time_ms
from audit.world import World
from ingest.simulate.loop import SimulationResult, simulate
from ingest.simulate.scenario import load_scenario_text

SCENARIO = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(__file__))),
                        "ingest", "simulate", "scenarios", "cluster-day.yaml")


@functools.lru_cache(maxsize=4)
def cluster_day(seed: int = 5, hours: float = 5.0) -> SimulationResult:
    with open(SCENARIO, encoding="utf-8") as fh:
        sc = load_scenario_text(fh.read(), "cluster-day.yaml")
    return simulate(sc, seed=seed, hours=hours)


def replay_every_decision(result: SimulationResult) -> int:
    """Re-run the engine for every record on the world rebuilt from the event log, asserting both
    digests; the number of records replayed."""
    world = World(result.world.cluster)
    events = iter(result.events)
    replayed = 0
    for r in sorted(result.records, key=lambda r: r.seq):
        while world.seq < r.seq:
            world.apply(next(events))
        d = decide(world, f"{r.namespace}/{r.pod}", r.attempt, parse_time_ms(r.time))
        bind_seq = next((b.detail["bind_seq"] for b in r.blockers if "bind_seq" in b.detail), None)
        if bind_seq is not None:
            # the bind-time check ran later, after the interfering events: replay it there
            later = World.from_snapshot(world.snapshot())
            for ev in result.events[world.seq + 1:bind_seq + 1]:
                later.apply(ev)
            d = bind(later, d, parse_time_ms(r.time), failures_before=bind_failures_before(r))
        assert (d.record.input_digest, d.record.output_digest) == (r.input_digest, r.output_digest), r.decision_id
        replayed += 1
    return replayed
