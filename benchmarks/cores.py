"""How many cores a benchmark row keeps busy: CPU seconds of its processes per wall second.

A row's figure is a wall time, but how a busy machine stretches it depends on how many cores
the work occupies: a request answered on one core waits for a core only when every core is
taken, one that runs ClickHouse's threads on every core loses a share as soon as any other
program runs. ``Busy`` adds up the CPU time of the benchmark's own process (every thread, the
embedded chDB engine's too) and of the server processes it talks to, over the timed spans only,
so a row can report the parallelism it actually had beside its figure. The CPU time of another
process is read from ``/proc/<pid>/stat`` (user plus system time, in clock ticks, of every
thread; see proc(5)), so it is counted in ticks of ``1 / SC_CLK_TCK`` seconds: a row's figure is
a sum over many spans, whose rounding errors cancel.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager

_TICK = 1.0 / os.sysconf("SC_CLK_TCK")


def process_cpu(pid: int) -> float:
    """User plus system CPU seconds of process ``pid`` (all its threads) so far."""
    with open(f"/proc/{pid}/stat") as fh:
        # the command name (field 2) may hold spaces and parentheses: fields are counted after
        # its closing one, from field 3 (state); utime and stime are fields 14 and 15
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * _TICK


class Busy:
    """CPU seconds and wall seconds summed over the spans timed with ``span()``, of this process
    and of the processes ``pids``."""

    def __init__(self, *pids: int) -> None:
        self.pids = pids
        self.cpu = 0.0
        self.wall = 0.0

    def _cpu_now(self) -> float:
        return time.process_time() + sum(process_cpu(pid) for pid in self.pids)

    @contextmanager
    def span(self) -> Iterator[None]:
        cpu, started = self._cpu_now(), time.perf_counter()
        try:
            yield
        finally:
            self.wall += time.perf_counter() - started
            self.cpu += self._cpu_now() - cpu

    def cores(self) -> float:
        """CPU seconds per wall second over the spans (0 before any)."""
        return self.cpu / self.wall if self.wall > 0 else 0.0
