"""Shared simulation runs for the simulate tests (cached: each runs once per test process)."""

from __future__ import annotations

import functools
import os

from ingest.simulate.loop import SimulationResult, simulate
from ingest.simulate.scenario import load_scenario_text

SCENARIO = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(__file__))),
                        "ingest", "simulate", "scenarios", "cluster-day.yaml")


@functools.lru_cache(maxsize=4)
def cluster_day(seed: int = 5, hours: float = 5.0) -> SimulationResult:
    with open(SCENARIO, encoding="utf-8") as fh:
        sc = load_scenario_text(fh.read(), "cluster-day.yaml")
    return simulate(sc, seed=seed, hours=hours)
