"""A simulated day's decisions per CPU-second, timed slice by slice between calibration passes.

The simulated days (the engine's 1,000 × 8 slice, the fairness, reservation and reclaim variants,
the trace day) run for seconds to a minute each, long enough for the shared machine's speed to
change under them. The day is cut into ``SLICES`` equal spans of simulated time (the setup is one
more round before them); each round's CPU time is normalised by the ``memory`` scale's factor
measured just around it (``benchmarks.pacers``, ``benchmarks.interleaved.paced_by``), and the
rate is the day's decisions over the sum of the normalised times. The row takes the ``inline``
scale with that rate's own factor. Cutting the day changes nothing in it: ``run_until`` processes
each instant whole, so the records are those of an uncut run.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from audit.replay.checkpoints import collector_paused
from benchmarks.interleaved import Interleaved, of_work, paced_by
from ingest.simulate.loop import SimulationResult, Simulator

SLICES = 6


@dataclass(frozen=True)
class PacedDay:
    result: SimulationResult
    rate: Interleaved  # decisions per CPU-second, as measured and normalised slice by slice
    cpu_seconds: float  # the whole day's, setup included

    def row(self) -> dict[str, int | float | str]:
        """A bench row's value, unit, scale and factor for the rate."""
        return self.rate.row("decisions/s", 1)

    def note(self) -> str:
        return (f"{len(self.result.records):,} decisions, {self.result.jobs:,} jobs, {self.cpu_seconds:.1f} s CPU "
                f"in {SLICES} slices, each normalised by the memory scale's speed around it "
                f"(median {self.rate.speed:.3f})")


def paced_day(sim: Simulator, speed: Callable[[], float], slices: int = SLICES) -> PacedDay:
    """Run ``sim`` (built, not started) to its end in ``slices`` spans, ``speed`` measured before,
    between and after them (``MemoryPacer.speed``)."""

    def timed(step: Callable[[], object]) -> Callable[[], tuple[int, float]]:
        def round_() -> tuple[int, float]:
            made, cpu = len(sim.records), time.process_time()
            step()
            return len(sim.records) - made, time.process_time() - cpu
        return round_

    span = sim.end_ms - sim.start_ms
    ends = [sim.start_ms + span * (i + 1) // slices for i in range(slices)]
    with collector_paused():  # as ``Simulator.run``
        rounds = paced_by([timed(sim.start), *(timed(partial(sim.run_until, end)) for end in ends)], speed)
    work = [(float(n), cpu, factor) for (n, cpu), factor in rounds]
    return PacedDay(sim.result(), of_work(work, "decisions/s"), sum(cpu for _, cpu, _ in work))
