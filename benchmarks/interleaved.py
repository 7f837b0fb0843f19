"""Short figures normalised round by round, by the ``cpu`` workload timed between their rounds.

A figure of a tenth of a second or less (a microbenchmark's loop, one keyed lookup of the store)
follows the shared machine's speed of that moment, and that speed swings on a scale of seconds:
the ``cpu`` workload measured before and after a module, or its median over the whole run
(``benchmarks.run.run_factors``), missed those swings, and the history check's four rows moved by
up to 2.4x between a quiet run and a ``--noise`` one while no calibration moved more than 1.43x. Here each round of the figure sits between two passes of the ``cpu`` workload
(``benchmarks.calibrate``), each pass doubling as the next round's first, and the round is
normalised by the faster of its two; the figure is the median of the normalised rounds. Timed
that way, in one quiet process and in one beside a burned core, the history check's
lookups of a thousand ids came out 34.4 and 33.5 ms normalised, and re-sent decisions 41.4 and
38.0 ms, where their measured times moved 0.9-1.1x.

A row made so takes the scale ``inline`` and carries its own factor (``factor_of``), which
``benchmarks.run.annotate`` applies instead of the run's. Longer figures are paced the same way by
the calibration of their own kind of work, measured by helper processes (``benchmarks.pacers``):
``paced_by`` and ``paced_with`` take any pass, ``of_work`` makes a rate of work done in slices
(a simulated day, ``benchmarks.paced_day``), ``best_of`` picks the least disturbed of a few rounds.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from audit.metrics.ranks import nearest_rank
from benchmarks import calibrate

T = TypeVar("T")
S = TypeVar("S")


@dataclass(frozen=True)
class Interleaved:
    measured: float  # the median round as measured, in the unit ``measure`` returned
    normalised: float  # the median of the rounds each normalised by the speed around it
    speed: float  # the median of the rounds' speed factors, shown beside the figure

    def row(self, unit: str, digits: int) -> dict[str, int | float | str]:
        """A bench row's value, scale and factor for this figure in ``unit``."""
        value = round(self.measured) if digits == 0 else round(self.measured, digits)
        return {"value": value, "unit": unit, "scale": "inline",
                "inline_factor": round(self.factor_of(unit), 6)}

    def factor_of(self, unit: str) -> float:
        """The factor that normalises ``measured`` to ``normalised`` in ``unit``'s direction: what
        ``benchmarks.run.annotate`` multiplies a time by (divides a rate by)."""
        if calibrate.kind(unit) == "rate":
            return self.measured / self.normalised
        return self.normalised / self.measured


def interleaved(measure: Callable[[], float], rounds: int, unit: str,
                workload: Callable[[], Callable[[], None]] | None = None,
                reference_seconds: float | None = None, clock: Callable[[], float] = time.perf_counter) -> Interleaved:
    """Run ``measure`` (one round; it returns the round's time or rate in ``unit``) ``rounds``
    times between passes of the ``cpu`` workload (``paced``), and take the median round, as
    measured and normalised by the speed around it."""
    if rounds < 1:
        raise ValueError(f"rounds {rounds}: expected at least 1")
    return of_samples(paced([measure] * rounds, workload, reference_seconds, clock), unit)


def of_samples(samples: Sequence[tuple[float, float]], unit: str,
               summary: Callable[[list[float]], float] = statistics.median) -> Interleaved:
    """The median (or another ``summary``, such as a percentile) of many (figure, speed) samples,
    as measured and normalised: for a figure that is itself a median over many short samples (one
    per node visited), each taken in a round of ``paced`` and given that round's speed.

    ``summary`` is given the values in ascending order, as a nearest-rank percentile
    (``audit.metrics.percentile``) expects them: given them in the order taken, it returns
    whichever sample sits at its rank."""
    if not samples:
        raise ValueError("no samples")
    return Interleaved(summary(sorted(v for v, _ in samples)),
                       summary(sorted(calibrate.normalise(v, unit, s) for v, s in samples)),
                       statistics.median(s for _, s in samples))


def nearest_rank_of(q: float) -> Callable[[list[float]], float]:
    """A ``summary`` for ``of_samples``: the ``q`` quantile (0..1) of its ascending values by
    nearest rank (``audit.metrics.ranks``), the percentile method of every metric, so that a bench
    row's p95 is a time some sample really took, ranked as the metrics rank theirs."""
    return lambda ascending: nearest_rank(ascending, q)


def best_of(samples: Sequence[tuple[float, float]], unit: str) -> Interleaved:
    """The (figure, speed) sample whose measured figure is best (the least time, the highest
    rate), normalised by the speed around it: for a figure taken as the best of a few rounds, the
    round least disturbed by the shared machine.

    Not the round whose normalised figure is best: a speed is itself a measurement, and the round
    with the lowest reading of it then wins whatever it measured, so the figure rose with the
    calibration's own scatter, most where that scatter was widest (beside ``--noise``). In one
    quiet/``--noise`` pair the full writer was picked at 27,874 and 28,032 rec/s measured, its
    second-worst and middle runs of five (the best were 37,078 and 28,714), and moved +23 %; the
    offline replay moved +27 % on an unchanged measured time."""
    if not samples:
        raise ValueError("no samples")
    sign = -1.0 if calibrate.kind(unit) == "rate" else 1.0
    value, speed = min(samples, key=lambda s: sign * s[0])
    return Interleaved(value, calibrate.normalise(value, unit, speed), speed)


def paced(rounds: Sequence[Callable[[], T]], workload: Callable[[], Callable[[], None]] | None = None,
          reference_seconds: float | None = None, clock: Callable[[], float] = time.perf_counter,
          passes: int = 1) -> list[tuple[T, float]]:
    """Each round's result with the machine's speed around it, the rounds run in order with a
    pass of the ``cpu`` workload before the first and after each. A round's speed is the
    reference's seconds over the faster of the passes around it: a pass slowed by a moment of
    contention that missed the round would otherwise normalise the round as if the machine had
    been slow throughout. With ``passes`` above 1, each reading between two rounds is the fastest
    of that many passes in a row: for rounds of seconds whose own work lingers after them (a
    server still busy for a command that has returned), which one pass read as a slow machine."""
    work = (workload or calibrate.cpu_workload)()
    work()  # warm, as the calibration itself does
    reference = reference_seconds or float(calibrate.load_reference()["cpu_seconds"])

    def one_pass() -> float:
        started = clock()
        work()
        return clock() - started

    def speed() -> float:
        return reference / min(one_pass() for _ in range(passes))

    return paced_by(rounds, speed)


def paced_by(rounds: Sequence[Callable[[], T]], speed: Callable[[], float]) -> list[tuple[T, float]]:
    """``paced`` with any pass: ``speed`` runs one pass of a calibration and returns the machine's
    speed factor it measured (higher is faster); a round takes the faster pass around it."""
    return paced_with(rounds, speed, max)


def faster_each(before: tuple[float, ...], after: tuple[float, ...]) -> tuple[float, ...]:
    """The faster of two passes of several calibrations at once, calibration by calibration."""
    return tuple(max(b, a) for b, a in zip(before, after, strict=True))


def paced_with(rounds: Sequence[Callable[[], T]], speed: Callable[[], S], faster: Callable[[S, S], S]) -> list[tuple[T, S]]:
    """``paced_by`` for passes of several calibrations at once (``speed`` returns their factors
    together), ``faster`` choosing between the passes before and after a round."""
    results: list[tuple[T, S]] = []
    before = speed()
    for measure in rounds:
        result = measure()
        after = speed()
        results.append((result, faster(before, after)))
        before = after
    return results


def of_work(slices: Sequence[tuple[float, float, float]], unit: str) -> Interleaved:
    """A rate over work done in slices, each ``(items, seconds, speed)`` from a round of
    ``paced_by``: measured, items over seconds in all; normalised, items over the seconds each
    slice would have taken at the reference speed (a long run, a simulated day, cut into slices
    so that each follows the machine's speed of its own minutes)."""
    if calibrate.kind(unit) != "rate" or not slices:
        raise ValueError(f"of_work needs a rate and at least one slice, got {unit!r} and {len(slices)}")
    items = sum(n for n, _, _ in slices)
    seconds = sum(s for _, s, _ in slices)
    reference_seconds = sum(calibrate.normalise(s, "s", speed) for _, s, speed in slices)
    return Interleaved(items / seconds, items / reference_seconds, statistics.median(f for _, _, f in slices))
