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

On a busy machine CPU per wall second says how many cores the work *got*, not how many it
*wants*: a process with two threads ready to run gets one core's worth beside two other
programs. ``Busy`` therefore also adds up each thread's time waiting in the kernel's run queue
(``/proc/<pid>/task/<tid>/schedstat``: nanoseconds on a CPU, then waiting for one; see the
kernel's Documentation/scheduler/sched-stats.rst). Running plus waiting per wall second is the
number of threads that were ready to run. It bounds the cores wanted from above, as CPU per
wall second bounds them from below: on a crowded machine a thread woken for a moment's work
waits long in the queue, and that wait counts as readiness as long as the moment's work would
have. Threads that end within a span take their figures with them; the servers measured keep
their thread pools.
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


def ready_seconds(pid: int) -> dict[int, float]:
    """Per thread of ``pid``: seconds on a CPU plus seconds waiting in the run queue so far."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as fh:
                running, waiting = fh.read().split()[:2]
        except FileNotFoundError:  # the thread ended since the listing
            continue
        out[int(tid)] = (int(running) + int(waiting)) / 1e9
    return out


class Busy:
    """CPU seconds and wall seconds summed over the spans timed with ``span()``, of this process
    and of the processes ``pids``."""

    def __init__(self, *pids: int) -> None:
        self.pids = pids
        self.cpu = 0.0
        self.ready = 0.0
        self.wall = 0.0

    def _cpu_now(self) -> float:
        return time.process_time() + sum(process_cpu(pid) for pid in self.pids)

    def _ready_now(self) -> dict[tuple[int, int], float]:
        return {(pid, tid): s for pid in (os.getpid(), *self.pids) for tid, s in ready_seconds(pid).items()}

    @contextmanager
    def span(self) -> Iterator[None]:
        ready, cpu, started = self._ready_now(), self._cpu_now(), time.perf_counter()
        try:
            yield
        finally:
            self.wall += time.perf_counter() - started
            self.cpu += self._cpu_now() - cpu
            # a thread started within the span was ready for all of its time
            self.ready += sum(s - ready.get(thread, 0.0) for thread, s in self._ready_now().items())

    def cores(self) -> float:
        """CPU seconds per wall second over the spans (0 before any): the cores the work got."""
        return self.cpu / self.wall if self.wall > 0 else 0.0

    def wanted(self) -> float:
        """Threads ready to run (on a CPU or waiting for one) per wall second over the spans: the
        cores the work would have kept busy had they been free."""
        return self.ready / self.wall if self.wall > 0 else 0.0

    def fields(self) -> dict[str, float]:
        """Both figures, for a benchmark row."""
        return {"busy_cores": round(self.cores(), 3), "ready_cores": round(self.wanted(), 3)}

    def describe(self, what: str) -> str:
        """Both figures, for a benchmark row's note; ``what`` names the processes counted."""
        return (f"{what}: {self.cores():.2f} cores busy, {self.wanted():.2f} ready to run "
                "(CPU s and CPU + run-queue s per wall s)")
