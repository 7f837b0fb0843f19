"""Helper processes that measure a calibration's speed on demand, between the rounds of a run.

Rows timed round by round (``benchmarks.interleaved.paced_by``) take the speed of the machine
measured just around each round. The ``cpu`` workload can be timed in the measured process
itself; two calibrations cannot, and run in helper processes started once per module:

- ``MemoryPacer``, for rates per CPU-second of a process holding hundreds of megabytes (a
  simulated day, a replay), normalised by a blend of the ``cputime`` and ``memory`` calibrations
  (``calibrate.memory_factor``). Measured in fresh processes after the module, that blend missed
  how the shared machine's speed moved during the module: in one quiet ``make bench`` the three
  runs of one simulated day spread 1.4-1.6x, and the same days moved 24-43 % (both ways) between a
  quiet run and a ``--noise`` one. The helper builds both workloads once and times a pass of each
  in CPU time as the calibrations do: the ``cpu`` workload best of ``calibrate.CPU_ROUNDS``, one
  round of the memory workload after a collection. Not in the measured process: the memory
  workload's heap (about 200 MB) and the collections before its rounds would change the work being
  measured; nor in a fresh process per pass, which would bring back the 15-20 % spread between
  fresh processes that ``calibrate`` describes.
- ``ParallelPacer``, for rows whose work keeps several cores busy (``calibrate``'s ``parallel``
  and ``mixed`` scales): one worker per core, each with the ``cpu`` workload built, started
  together on a barrier for each pass, timed as ``calibrate.parallel_seconds`` times one round.

The measured process waits for the answer and takes no CPU meanwhile.
"""

from __future__ import annotations

import gc
import multiprocessing
import os
import time
from multiprocessing.connection import Connection
from types import TracebackType
from typing import Any

from benchmarks import calibrate


def _serve(conn: Connection) -> None:
    from benchmarks import memory_workload

    cpu = calibrate.cpu_workload()
    cpu()  # warm, as the calibration does
    memory = memory_workload.make()
    conn.send("ready")
    while conn.recv() is not None:
        cpu_rounds = []
        for _ in range(calibrate.CPU_ROUNDS):
            started = time.process_time()
            cpu()
            cpu_rounds.append(time.process_time() - started)
        gc.collect()  # each round starts with the collector in the same state (calibrate.memory_seconds)
        started = time.process_time()
        memory()
        conn.send((min(cpu_rounds), time.process_time() - started))


class MemoryPacer:
    """A helper process answering ``speed()``: the ``memory`` scale's factor of this moment."""

    def __init__(self, reference: dict[str, Any] | None = None) -> None:
        known = reference or calibrate.load_reference()
        self._cputime_reference = float(known["cputime_seconds"])
        self._memory_reference = float(known["memory_seconds"])
        context = multiprocessing.get_context("spawn")  # a clean interpreter, as the calibrations get
        self._conn, child = context.Pipe()
        self._process = context.Process(target=_serve, args=(child,), daemon=True)
        self._process.start()
        child.close()
        self._conn.recv()  # both workloads built and warmed
        self.last: tuple[float, float] = (0.0, 0.0)  # the latest pass's CPU seconds: cpu workload, memory workload

    def speed(self) -> float:
        """One pass of both workloads; their factors blended as a ``memory`` row's are."""
        self._conn.send("pass")
        cputime, memory = self.last = self._conn.recv()
        blended = calibrate.memory_factor(self._cputime_reference / cputime, self._memory_reference / memory)
        assert blended is not None  # both factors are known
        return blended

    def close(self) -> None:
        self._conn.send(None)
        self._process.join(timeout=60)
        self._conn.close()

    def __enter__(self) -> MemoryPacer:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()


def _parallel_worker(start: Any, conn: Connection) -> None:
    work = calibrate.cpu_workload()
    work()
    conn.send("ready")
    while conn.recv() is not None:
        start.wait()
        started = time.perf_counter()
        for _ in range(calibrate.PARALLEL_REPEAT):
            work()
        conn.send(time.perf_counter() - started)


class ParallelPacer:
    """Worker processes, one per core, answering ``speed()``: the ``parallel`` scale's factor of
    this moment (the reference's seconds over the mean time of one pass per worker)."""

    def __init__(self, reference: dict[str, Any] | None = None, workers: int = 0) -> None:
        known = reference or calibrate.load_reference()
        self._reference = float(known["parallel_seconds"])
        count = workers or os.cpu_count() or 1
        context = multiprocessing.get_context("spawn")
        start = context.Barrier(count)
        self._conns: list[Connection] = []
        self._processes = []
        for _ in range(count):
            conn, child = context.Pipe()
            process = context.Process(target=_parallel_worker, args=(start, child), daemon=True)
            process.start()
            child.close()
            self._conns.append(conn)
            self._processes.append(process)
        for conn in self._conns:
            conn.recv()

    def speed(self) -> float:
        for conn in self._conns:
            conn.send("pass")
        seconds = [conn.recv() for conn in self._conns]
        return self._reference / (sum(seconds) / len(seconds))

    def close(self) -> None:
        for conn in self._conns:
            conn.send(None)
        for process in self._processes:
            process.join(timeout=60)
        for conn in self._conns:
            conn.close()

    def __enter__(self) -> ParallelPacer:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()
