"""Shared simulated histories for the replay tests (each runs once per test run)."""

from __future__ import annotations

import functools
import os

from audit.replay import MemorySource
from ingest.simulate.loop import SimulationResult, simulate
from ingest.simulate.scenario import load_scenario_text

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(__file__)), "fixtures", "replay")
SCENARIO = os.path.join(FIXTURES, "busy-small.yaml")
CHECKPOINT_EVERY = 2000


@functools.lru_cache(maxsize=2)
def busy(hours: float = 15.0, seed: int = 3) -> SimulationResult:
    with open(SCENARIO, encoding="utf-8") as fh:
        sc = load_scenario_text(fh.read(), "busy-small.yaml")
    return simulate(sc, seed=seed, hours=hours)


@functools.lru_cache(maxsize=2)
def busy_checkpoints(hours: float = 15.0) -> tuple[tuple[str, int, dict], ...]:
    source = MemorySource(busy(hours).events)
    source.add_checkpoints(CHECKPOINT_EVERY)
    cluster = busy(hours).world.cluster
    return tuple((cluster, seq, source.nearest_checkpoint(cluster, seq)[1]) for seq in source.checkpoint_seqs(cluster))


def busy_source(hours: float = 15.0, events: list | None = None) -> MemorySource:
    """The run's events (or the given ones) with checkpoints every CHECKPOINT_EVERY events."""
    return MemorySource(busy(hours).events if events is None else events, busy_checkpoints(hours))
