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
DEFAULT_HOURS = 15.0


def busy(hours: float = DEFAULT_HOURS, seed: int = 3) -> SimulationResult:
    # One cache key per run whatever the spelling: busy(), busy(15.0) and busy(hours=15) are the
    # same run, and the suite asks for only three (2, 3 and 15 hours), so every one is kept: with
    # a smaller cache the modules' alternating asks simulated the 15-hour day again and again.
    return _busy(float(hours), int(seed))


@functools.cache
def _busy(hours: float, seed: int) -> SimulationResult:
    with open(SCENARIO, encoding="utf-8") as fh:
        sc = load_scenario_text(fh.read(), "busy-small.yaml")
    return simulate(sc, seed=seed, hours=hours)


def busy_checkpoints(hours: float = DEFAULT_HOURS) -> tuple[tuple[str, int, dict], ...]:
    return _busy_checkpoints(float(hours))


@functools.cache
def _busy_checkpoints(hours: float) -> tuple[tuple[str, int, dict], ...]:
    source = MemorySource(busy(hours).events)
    source.add_checkpoints(CHECKPOINT_EVERY)
    cluster = busy(hours).world.cluster
    return tuple((cluster, seq, source.nearest_checkpoint(cluster, seq)[1]) for seq in source.checkpoint_seqs(cluster))


def busy_source(hours: float = DEFAULT_HOURS, events: list | None = None) -> MemorySource:
    """The run's events (or the given ones) with checkpoints every CHECKPOINT_EVERY events."""
    return MemorySource(busy(hours).events if events is None else events, busy_checkpoints(hours))
