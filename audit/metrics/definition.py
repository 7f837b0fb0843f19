"""The shape of a metric's written definition, shared by every metric family module.

Each family module (waits, usage, fairness, fallback, starvation, health) declares its metrics as
``Definition`` values next to the reference function that computes them; ``audit.metrics.catalog``
gathers them and renders ``docs/metrics.md`` from them, so the page users read and the code that
counts cannot drift apart.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Definition:
    name: str  # the field name the API and the CLI use
    family: str
    counts: str  # the unit of counting: what one item of the population is
    unit: str
    population: str  # which tracks, outcomes and time span are in (and what is reported apart)
    rule: str  # how the value is computed, percentile method included
    reference: str  # the pure function that computes it
